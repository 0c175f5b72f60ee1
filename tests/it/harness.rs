//! Runs the `vllm-corrector` binary as a black box on a free loopback port.

use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::rw::{self, Point};

/// A directory under the system temp dir, removed on drop.
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    /// Creates a fresh, uniquely named directory.
    pub(crate) fn new(tag: &str) -> TempDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "vllm-corrector-it-{tag}-{}-{n}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create temp dir");
        TempDir(path)
    }

    /// The directory's path.
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A loopback port that was free a moment ago.
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind an ephemeral port")
        .local_addr()
        .unwrap()
        .port()
}

/// A running corrector; killed on drop. Its log goes to a file that failures print.
pub(crate) struct Corrector {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// The `host:port` it listens on.
    pub address: String,
    log: PathBuf,
    client: reqwest::blocking::Client,
    dir: TempDir,
}

/// The `engine:` line of [`Corrector::start_unsettled`].
pub(crate) const UNSETTLED: &str = "engine:\n  settle_scrapes: 0\n";

impl Corrector {
    /// Starts the binary with embedded defaults.
    pub(crate) fn start() -> Corrector {
        Self::start_with_config(None)
    }

    /// Starts the binary with the defaults but `engine.settle_scrapes: 0`, for tests that check
    /// what the first one or two hand-made scrapes give (docs/ENGINE.md, "Settling"; the settling
    /// itself is checked by `crates/engine/src/settle_tests.rs` and, with the defaults, by the accuracy
    /// chains).
    pub(crate) fn start_unsettled() -> Corrector {
        Self::start_with_config(Some(UNSETTLED))
    }

    /// Starts the binary, with `--config.file` holding `yaml` when given, and waits for `/-/ready`.
    pub(crate) fn start_with_config(yaml: Option<&str>) -> Corrector {
        let dir = TempDir::new("corrector");
        let config = yaml.map(|text| {
            let path = dir.path().join("config.yml");
            std::fs::write(&path, text).expect("write config file");
            path
        });
        let client = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        let mut last_error = String::new();
        for _attempt in 0..3 {
            let address = format!("127.0.0.1:{}", free_port());
            let log = dir
                .path()
                .join(format!("corrector-{}.log", address.replace(':', "_")));
            let mut command = Command::new(env!("CARGO_BIN_EXE_vllm-corrector"));
            command.args(["--web.listen-address", &address, "--log.level", "debug"]);
            if let Some(path) = &config {
                command.arg("--config.file").arg(path);
            }
            let out = File::create(&log).expect("create log file");
            let mut child = command
                .stdin(Stdio::null())
                .stdout(out.try_clone().unwrap())
                .stderr(out)
                .spawn()
                .expect("spawn vllm-corrector");
            let base = format!("http://{address}");
            match wait_ready(
                &mut child,
                &client,
                &format!("{base}/-/ready"),
                Duration::from_secs(20),
            ) {
                Ok(()) => {
                    return Corrector {
                        child,
                        base,
                        address,
                        log,
                        client,
                        dir,
                    };
                }
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    // A port taken between free_port() and bind: try another one.
                    last_error = format!(
                        "{e}\n--- log ---\n{}",
                        std::fs::read_to_string(&log).unwrap_or_default()
                    );
                }
            }
        }
        panic!("vllm-corrector did not become ready: {last_error}");
    }

    /// Replaces the `--config.file` (the binary must have been started with one) with `yaml` and
    /// asks for a reload (`POST /-/reload`), asserting that it succeeded.
    pub(crate) fn reload_config(&self, yaml: &str) {
        std::fs::write(self.dir.path().join("config.yml"), yaml).expect("write config file");
        let response = self
            .client
            .post(format!("{}/-/reload", self.base))
            .send()
            .expect("POST /-/reload");
        let status = response.status();
        assert!(
            status.is_success(),
            "{status}: {}",
            response.text().unwrap_or_default()
        );
    }

    /// Sends SIGTERM and waits for the exit: the exit status and how long it took.
    pub(crate) fn terminate(&mut self) -> (std::process::ExitStatus, Duration) {
        let started = std::time::Instant::now();
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -TERM failed");
        let status = self.child.wait().expect("wait for vllm-corrector");
        (status, started.elapsed())
    }

    /// The corrector's log so far.
    pub(crate) fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Posts one RW1 body built from `points`; returns the HTTP status.
    pub(crate) fn post(&self, points: &[Point]) -> u16 {
        let response = self
            .client
            .post(format!("{}/api/v1/write", self.base))
            .header("Content-Type", "application/x-protobuf")
            .header("Content-Encoding", "snappy")
            .header("X-Prometheus-Remote-Write-Version", "0.1.0")
            .body(rw::body(points))
            .send()
            .unwrap_or_else(|e| {
                panic!(
                    "POST /api/v1/write failed: {e}\n--- log ---\n{}",
                    self.log_text()
                )
            });
        response.status().as_u16()
    }

    /// Posts `points` and asserts a 2xx answer.
    pub(crate) fn write(&self, points: &[Point]) {
        let status = self.post(points);
        assert!(
            (200..300).contains(&status),
            "remote write answered {status}\n--- log ---\n{}",
            self.log_text()
        );
    }

    /// `GET /metrics` in text format 0.0.4 (no `Accept` header).
    pub(crate) fn metrics_text(&self) -> String {
        self.get_metrics(None)
    }

    /// `GET /metrics` with `Accept: application/openmetrics-text`.
    pub(crate) fn metrics_openmetrics(&self) -> String {
        self.get_metrics(Some("application/openmetrics-text; version=1.0.0"))
    }

    fn get_metrics(&self, accept: Option<&str>) -> String {
        let send = || {
            let mut request = self.client.get(format!("{}/metrics", self.base));
            if let Some(accept) = accept {
                request = request.header("Accept", accept);
            }
            request.send()
        };
        // Once more on a connection error: the client may pick its pooled keep-alive connection
        // in the instant the server closes it for idleness (the slow-client tests set a 1 s idle
        // timeout), and a GET is safe to repeat.
        let response = send().or_else(|_| send()).unwrap_or_else(|e| {
            panic!("GET /metrics failed: {e}\n--- log ---\n{}", self.log_text())
        });
        assert!(
            response.status().is_success(),
            "GET /metrics answered {}",
            response.status()
        );
        response.text().unwrap()
    }

    /// `/metrics` (text 0.0.4), parsed.
    pub(crate) fn snapshot(&self) -> crate::metrics::Snapshot {
        crate::metrics::Snapshot::parse_text(&self.metrics_text())
    }
}

/// Polls `ready_url` until it answers 2xx; fails if `child` exits or `timeout` passes.
pub(crate) fn wait_ready(
    child: &mut Child,
    client: &reqwest::blocking::Client,
    ready_url: &str,
    timeout: Duration,
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            return Err(format!("exited early with {status}"));
        }
        if let Ok(r) = client.get(ready_url).send()
            && r.status().is_success()
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("timed out waiting for {ready_url}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Drop for Corrector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
