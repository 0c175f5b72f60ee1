//! A real vmagent ([`crate::tools::Tool::VMAGENT_SYSTEM`], 1.79 on Debian 12, or
//! [`crate::tools::Tool::VMAGENT_SID`], 1.145) scraping with a Prometheus-style `scrape_configs`
//! file and remote-writing to several URLs, each with its own relabelling; killed on drop with its
//! log shown when the test failed.
//!
//! Which protocol it sends: with `-remoteWrite.url` alone, 1.79 has a single one, Prometheus RW 1.0
//! (a protobuf `WriteRequest` in snappy block format, `Content-Encoding: snappy`,
//! `X-Prometheus-Remote-Write-Version: 0.1.0`; checked by capturing its requests). The flags that
//! choose a protocol (`-remoteWrite.forcePromProto`, `-remoteWrite.forceVMProto`) belong to later
//! releases (1.145 has them), which also speak VictoriaMetrics' zstd protocol to a server that says
//! it can; passing one to 1.79 makes it exit with "flag provided but not defined". The corrector's
//! `code="204"` answers to `/api/v1/write` confirm the format.
//!
//! `-remoteWrite.maxRowsPerBlock=100` and `-remoteWrite.flushInterval=200ms` are vmagent's
//! `max_samples_per_send` and `batch_send_deadline`: every scrape is split over many requests on
//! `-remoteWrite.queues=4` concurrent queues, so one scrape's series arrive in any order.
//! Significant figures and rounding stay off (their defaults), so values pass bit-exact.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::process::{Process, TempDir, free_address, http_client, post_ok, tail};

/// What to start; [`VmagentBuilder::start`] starts it.
#[derive(Debug)]
pub struct VmagentBuilder {
    binary: PathBuf,
    scrape_config: String,
    writes: Vec<(String, Option<String>)>,
    relabel: Option<String>,
    args: Vec<String>,
}

impl VmagentBuilder {
    /// Adds a `-remoteWrite.url`, with `relabel` (YAML) as its `-remoteWrite.urlRelabelConfig`
    /// when given. The URLs keep their order (`-remoteWrite.shardByURL` numbers them so).
    pub fn write(mut self, url: &str, relabel: Option<&str>) -> Self {
        self.writes
            .push((url.to_string(), relabel.map(str::to_string)));
        self
    }

    /// `-remoteWrite.relabelConfig`: relabelling applied to everything before the per-URL one
    /// (and before `-remoteWrite.shardByURL` picks a URL).
    pub fn relabel(mut self, yaml: &str) -> Self {
        self.relabel = Some(yaml.to_string());
        self
    }

    /// Adds a command-line flag (`-remoteWrite.shardByURL`).
    pub fn arg(mut self, arg: &str) -> Self {
        self.args.push(arg.to_string());
        self
    }

    /// Starts vmagent and waits for `/health` (30 s). Panics with its log when it never gets ready.
    pub fn start(self) -> Vmagent {
        let dir = TempDir::new("vmagent");
        dir.write("scrape.yml", &self.scrape_config);
        let address = free_address();
        let mut command = Command::new(&self.binary);
        command
            .current_dir(dir.path())
            .arg("-promscrape.config=scrape.yml")
            .arg(format!("-httpListenAddr={address}"))
            .arg("-remoteWrite.tmpDataPath=vmagent-data")
            .arg("-remoteWrite.maxRowsPerBlock=100")
            .arg("-remoteWrite.flushInterval=200ms")
            .arg("-remoteWrite.queues=4")
            .arg("-loggerLevel=WARN");
        if let Some(yaml) = &self.relabel {
            dir.write("relabel.yml", yaml);
            command.arg("-remoteWrite.relabelConfig=relabel.yml");
        }
        let relabelled = self.writes.iter().any(|(_, r)| r.is_some());
        for (i, (url, relabel)) in self.writes.iter().enumerate() {
            command.arg(format!("-remoteWrite.url={url}"));
            if relabelled {
                // The per-URL array flag, one value per URL in order (empty: none).
                let file = match relabel {
                    Some(yaml) => {
                        let file = format!("relabel-{i}.yml");
                        dir.write(&file, yaml);
                        file
                    }
                    None => String::new(),
                };
                command.arg(format!("-remoteWrite.urlRelabelConfig={file}"));
            }
        }
        command.args(&self.args);
        let base = format!("http://{address}");
        let client = http_client(Duration::from_secs(30));
        let process = Process::spawn(
            "vmagent",
            &mut command,
            &dir.path().join("vmagent.log"),
            &client,
            &format!("{base}/health"),
            Duration::from_secs(30),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        Vmagent {
            base,
            dir,
            process,
            client,
        }
    }
}

/// A running vmagent; killed on drop.
#[derive(Debug)]
pub struct Vmagent {
    /// `http://127.0.0.1:<port>` (its own HTTP server: `/-/reload`, `/metrics`,
    /// `/api/v1/targets`).
    pub base: String,
    dir: TempDir,
    process: Process,
    client: reqwest::blocking::Client,
}

impl Vmagent {
    /// A builder for the binary at `binary` scraping per `scrape_config` (YAML).
    pub fn builder(binary: &Path, scrape_config: &str) -> VmagentBuilder {
        VmagentBuilder {
            binary: binary.to_path_buf(),
            scrape_config: scrape_config.to_string(),
            writes: Vec::new(),
            relabel: None,
            args: Vec::new(),
        }
    }

    /// Replaces the scrape configuration with `scrape_config` and makes vmagent re-read it
    /// (`/-/reload`, vmagent's HTTP form of `SIGHUP`). Waits (≤ 30 s) until vmagent's
    /// `/api/v1/targets` no longer lists `removed_target`.
    pub fn reload(&self, scrape_config: &str, removed_target: &str) {
        self.dir.write("scrape.yml", scrape_config);
        post_ok(&self.client, &format!("{}/-/reload", self.base));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let listed = self
                .client
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
                "vmagent still scrapes {removed_target} 30 s after the reload\n{}",
                self.log_tail(60)
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The last `lines` lines of the log.
    pub fn log_tail(&self, lines: usize) -> String {
        tail(self.process.log(), lines)
    }
}
