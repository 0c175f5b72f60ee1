//! Accuracy suite: the real processes of the chain, each on a fixed loopback address so that it can
//! be restarted (the corrector) or reconfigured (Prometheus, vmagent) while the others keep running.
//! Every child is killed on drop; failures print the tail of its log.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{TempDir, free_port, wait_ready};

/// A child process with its log file; killed and reaped on drop.
struct Proc {
    child: Option<Child>,
    log: PathBuf,
}

impl Proc {
    /// Spawns `command` with stdout and stderr appended to `log`, then waits for `ready_url` to
    /// answer 2xx within `timeout`. Errors: the spawn error, or the child exited or never got
    /// ready (the child is then killed); the message holds the log's tail.
    fn try_spawn(
        what: &str,
        command: &mut Command,
        log: &Path,
        ready_url: &str,
        timeout: Duration,
    ) -> Result<Proc, String> {
        let out = File::options()
            .create(true)
            .append(true)
            .open(log)
            .expect("open log file");
        let mut child = command
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .map_err(|e| format!("spawn {what}: {e}"))?;
        let client = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap();
        if let Err(e) = wait_ready(&mut child, &client, ready_url, timeout) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "{what} not ready: {e}\n--- log ---\n{}",
                tail(log, 80)
            ));
        }
        Ok(Proc {
            child: Some(child),
            log: log.to_path_buf(),
        })
    }

    /// [`Proc::try_spawn`], panicking on error.
    fn spawn(
        what: &str,
        mut command: Command,
        log: PathBuf,
        ready_url: &str,
        timeout: Duration,
    ) -> Proc {
        Proc::try_spawn(what, &mut command, &log, ready_url, timeout)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The last `lines` lines of the file at `path`.
pub(crate) fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A `127.0.0.1:<port>` address that was free a moment ago.
pub(crate) fn free_address() -> String {
    format!("127.0.0.1:{}", free_port())
}

/// POSTs to `url` and asserts a 2xx answer (Prometheus's and vmagent's `/-/reload`).
fn post_ok(url: &str) {
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let response = client
        .post(url)
        .send()
        .unwrap_or_else(|e| panic!("POST {url}: {e}"));
    let status = response.status();
    assert!(
        status.is_success(),
        "POST {url} answered {status}: {}",
        response.text().unwrap_or_default()
    );
}

/// The `vllm-corrector` binary under test on a fixed address, restartable in place.
pub(crate) struct CorrectorProc {
    /// `127.0.0.1:<port>`: the remote-write target and the scrape target.
    pub address: String,
    dir: TempDir,
    proc: Option<Proc>,
    starts: u32,
}

impl CorrectorProc {
    /// Starts the binary (embedded default configuration) on `address` and waits for `/-/ready`.
    pub(crate) fn start(address: &str) -> CorrectorProc {
        let mut corrector = CorrectorProc {
            address: address.to_string(),
            dir: TempDir::new("acc-corrector"),
            proc: None,
            starts: 0,
        };
        corrector.spawn();
        corrector
    }

    fn spawn(&mut self) {
        self.starts += 1;
        let log = self.log_path();
        let mut command = Command::new(env!("CARGO_BIN_EXE_vllm-corrector"));
        command.args(["--web.listen-address", &self.address, "--log.level", "info"]);
        // The previous instance's port may take a moment to be released: try a few times.
        let ready = format!("http://{}/-/ready", self.address);
        let mut last_error = String::new();
        for _ in 0..5 {
            match Proc::try_spawn(
                "vllm-corrector",
                &mut command,
                &log,
                &ready,
                Duration::from_secs(30),
            ) {
                Ok(p) => {
                    self.proc = Some(p);
                    return;
                }
                Err(e) => last_error = e,
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        panic!("{last_error}");
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("corrector.log")
    }

    /// Kills the process and starts a fresh one on the same address (all in-memory state lost).
    pub(crate) fn restart(&mut self) {
        if let Some(mut p) = self.proc.take() {
            p.kill();
        }
        self.spawn();
    }

    /// How many times the process was started.
    pub(crate) fn starts(&self) -> u32 {
        self.starts
    }

    /// `GET /metrics` (text format 0.0.4). Errors: transport or non-2xx.
    pub(crate) fn metrics_text(&self) -> Result<String, String> {
        let response = reqwest::blocking::Client::new()
            .get(format!("http://{}/metrics", self.address))
            .timeout(Duration::from_secs(10))
            .send()
            .map_err(|e| e.to_string())?;
        if !response.status().is_success() {
            return Err(format!("GET /metrics answered {}", response.status()));
        }
        response.text().map_err(|e| e.to_string())
    }

    /// The last lines of the log (every start appends to the same file).
    pub(crate) fn log_tail(&self) -> String {
        tail(&self.log_path(), 60)
    }
}

/// A Prometheus 2.42 server with a generated configuration and rules file, reloadable.
pub(crate) struct PrometheusProc {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    dir: TempDir,
    proc: Proc,
}

impl PrometheusProc {
    /// Starts `binary` with `config` (YAML; may name `rules.yml`, written from `rules`) and
    /// `--web.enable-lifecycle` (for `/-/reload`) plus `--web.enable-remote-write-receiver`
    /// (so that vmagent can write raw series into it). Waits for `/-/ready` (60 s).
    pub(crate) fn start(binary: &Path, config: &str, rules: &str) -> PrometheusProc {
        let dir = TempDir::new("acc-prometheus");
        std::fs::write(dir.path().join("rules.yml"), rules).unwrap();
        std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
        let address = free_address();
        let mut command = Command::new(binary);
        command
            .current_dir(dir.path())
            .arg("--config.file=prometheus.yml")
            .arg("--storage.tsdb.path=data")
            .arg(format!("--web.listen-address={address}"))
            .arg("--web.enable-lifecycle")
            .arg("--web.enable-remote-write-receiver");
        let base = format!("http://{address}");
        let log = dir.path().join("prometheus.log");
        let proc = Proc::spawn(
            "prometheus",
            command,
            log,
            &format!("{base}/-/ready"),
            Duration::from_secs(60),
        );
        PrometheusProc { base, dir, proc }
    }

    /// Replaces the configuration with `config` and asks Prometheus to reload it (`POST /-/reload`,
    /// answered once the new configuration is applied).
    pub(crate) fn reload(&self, config: &str) {
        std::fs::write(self.dir.path().join("prometheus.yml"), config).unwrap();
        post_ok(&format!("{}/-/reload", self.base));
    }

    /// The last lines of the log.
    pub(crate) fn log_tail(&self) -> String {
        tail(&self.proc.log, 60)
    }
}

/// vmagent 1.79 scraping with a Prometheus-style `scrape_configs` file and remote-writing to
/// several URLs, each with its own relabelling.
pub(crate) struct VmagentProc {
    /// `http://127.0.0.1:<port>` (its own HTTP server: `/-/reload`, `/metrics`).
    pub base: String,
    dir: TempDir,
    proc: Proc,
}

impl VmagentProc {
    /// Starts `binary` scraping per `scrape_config` and writing to every `(url, relabel YAML)`.
    ///
    /// Which flags make vmagent 1.79 send RW1 snappy: `-remoteWrite.url` alone. 1.79 has a single
    /// remote-write protocol, Prometheus RW 1.0: a protobuf `WriteRequest` in snappy block format
    /// with `Content-Type: application/x-protobuf`, `Content-Encoding: snappy` and
    /// `X-Prometheus-Remote-Write-Version: 0.1.0` (checked by capturing its requests). The flags
    /// that choose a protocol (`-remoteWrite.forcePromProto`, `-remoteWrite.forceVMProto`) belong
    /// to later releases, which also speak VictoriaMetrics' zstd protocol; they are absent from
    /// 1.79's `vmagent -help`, and passing one makes 1.79 exit with "flag provided but not
    /// defined". The corrector's `code="204"` answers to `/api/v1/write` confirm the format.
    ///
    /// `-remoteWrite.maxRowsPerBlock=100` and `-remoteWrite.flushInterval=200ms` are vmagent's
    /// `max_samples_per_send` and `batch_send_deadline`: every scrape is split over many requests
    /// on `-remoteWrite.queues=4` concurrent queues, so one scrape's series arrive in any order.
    /// Significant figures and rounding stay off (their defaults), so values pass bit-exact.
    pub(crate) fn start(
        binary: &Path,
        scrape_config: &str,
        writes: &[(String, String)],
    ) -> VmagentProc {
        let dir = TempDir::new("acc-vmagent");
        std::fs::write(dir.path().join("scrape.yml"), scrape_config).unwrap();
        let address = free_address();
        let mut command = Command::new(binary);
        command
            .current_dir(dir.path())
            .arg("-promscrape.config=scrape.yml")
            .arg(format!("-httpListenAddr={address}"))
            .arg("-remoteWrite.tmpDataPath=vmagent-data")
            .arg("-remoteWrite.maxRowsPerBlock=100")
            .arg("-remoteWrite.flushInterval=200ms")
            .arg("-remoteWrite.queues=4")
            .arg("-loggerLevel=WARN");
        for (i, (url, relabel)) in writes.iter().enumerate() {
            let file = format!("relabel-{i}.yml");
            std::fs::write(dir.path().join(&file), relabel).unwrap();
            command
                .arg(format!("-remoteWrite.url={url}"))
                .arg(format!("-remoteWrite.urlRelabelConfig={file}"));
        }
        let base = format!("http://{address}");
        let log = dir.path().join("vmagent.log");
        let proc = Proc::spawn(
            "vmagent",
            command,
            log,
            &format!("{base}/health"),
            Duration::from_secs(30),
        );
        VmagentProc { base, dir, proc }
    }

    /// Replaces the scrape configuration with `scrape_config` and makes vmagent re-read it
    /// (`/-/reload`, vmagent's HTTP form of `SIGHUP`). Waits until vmagent's `/api/v1/targets` no
    /// longer lists `removed_target`.
    pub(crate) fn reload(&self, scrape_config: &str, removed_target: &str) {
        std::fs::write(self.dir.path().join("scrape.yml"), scrape_config).unwrap();
        post_ok(&format!("{}/-/reload", self.base));
        let client = reqwest::blocking::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let listed = client
                .get(format!("{}/api/v1/targets", self.base))
                .send()
                .and_then(|r| r.text())
                .map(|t| t.contains(removed_target))
                .unwrap_or(true);
            if !listed {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "vmagent still scrapes {removed_target} 30 s after SIGHUP\n{}",
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The last lines of the log.
    pub(crate) fn log_tail(&self) -> String {
        tail(&self.proc.log, 60)
    }
}
