//! A real Prometheus server, any version ([`crate::tools::Tool::PROMETHEUS_2`] or `_3`): its
//! configuration and extra files (rules) written to its own directory, a free loopback port,
//! ready once `/-/ready` answers, reloadable, killed on drop with its log shown when the test
//! failed.
//!
//! Every instance runs with `--web.enable-lifecycle` (for `/-/reload`) and
//! `--web.enable-remote-write-receiver` (so that vmagent or a test can write raw series into it);
//! both flags exist in 2.x and 3.x and change nothing for a Prometheus that only scrapes.
//! Relative paths in the configuration (`rule_files: [rules.yml]`) resolve in its directory.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::process::{Process, TempDir, free_address, http_client, post_ok, tail};

/// How long a start may take before `/-/ready` answers.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// What to start; [`PrometheusBuilder::start`] starts it.
#[derive(Debug)]
pub struct PrometheusBuilder {
    binary: PathBuf,
    config: String,
    files: Vec<(String, String)>,
    features: Vec<String>,
}

impl PrometheusBuilder {
    /// Writes `text` to the file `name` of Prometheus' directory before the start (a rules file
    /// the configuration names).
    pub fn file(mut self, name: &str, text: &str) -> Self {
        self.files.push((name.to_string(), text.to_string()));
        self
    }

    /// Adds `--enable-feature=<name>` (3.x: `native-histograms`).
    pub fn feature(mut self, name: &str) -> Self {
        self.features.push(name.to_string());
        self
    }

    /// Starts Prometheus and waits for `/-/ready` (60 s; three tries on fresh ports). Panics with
    /// its log and configuration when it never gets ready.
    pub fn start(self) -> Prometheus {
        let dir = TempDir::new("prometheus");
        dir.write("prometheus.yml", &self.config);
        for (name, text) in &self.files {
            dir.write(name, text);
        }
        let log = dir.path().join("prometheus.log");
        let client = http_client(Duration::from_secs(30));
        let mut last_error = String::new();
        for _attempt in 0..3 {
            let _ = std::fs::remove_file(&log);
            let address = free_address();
            let mut command = Command::new(&self.binary);
            command
                .current_dir(dir.path())
                .arg("--config.file=prometheus.yml")
                .arg("--storage.tsdb.path=data")
                .arg(format!("--web.listen-address={address}"))
                .arg("--web.enable-lifecycle")
                .arg("--web.enable-remote-write-receiver");
            if !self.features.is_empty() {
                command.arg(format!("--enable-feature={}", self.features.join(",")));
            }
            let base = format!("http://{address}");
            match Process::spawn(
                "prometheus",
                &mut command,
                &log,
                &client,
                &format!("{base}/-/ready"),
                READY_TIMEOUT,
            ) {
                Ok(process) => {
                    return Prometheus {
                        base,
                        dir,
                        process,
                        client,
                    };
                }
                Err(e) => last_error = e,
            }
        }
        panic!("{last_error}\n--- configuration ---\n{}", self.config);
    }
}

/// A running Prometheus; killed on drop.
#[derive(Debug)]
pub struct Prometheus {
    /// `http://127.0.0.1:<port>`: the query API, `/api/v1/write`, `/-/reload`.
    pub base: String,
    dir: TempDir,
    process: Process,
    client: reqwest::blocking::Client,
}

impl Prometheus {
    /// A builder for the binary at `binary` with the configuration text `config` (YAML, or JSON,
    /// which is YAML).
    pub fn builder(binary: &Path, config: &str) -> PrometheusBuilder {
        PrometheusBuilder {
            binary: binary.to_path_buf(),
            config: config.to_string(),
            files: Vec::new(),
            features: Vec::new(),
        }
    }

    /// [`Prometheus::builder`] started as it is.
    pub fn start(binary: &Path, config: &str) -> Prometheus {
        Prometheus::builder(binary, config).start()
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Replaces the configuration with `config` and asks Prometheus to reload it (`POST
    /// /-/reload`, answered once the new configuration is applied); asserts a 2xx answer.
    pub fn reload(&self, config: &str) {
        self.dir.write("prometheus.yml", config);
        post_ok(&self.client, &format!("{}/-/reload", self.base));
    }

    /// The log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.process.log()).unwrap_or_default()
    }

    /// The last `lines` lines of the log.
    pub fn log_tail(&self, lines: usize) -> String {
        tail(self.process.log(), lines)
    }
}
