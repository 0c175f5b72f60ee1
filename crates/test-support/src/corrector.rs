//! The `vllm-corrector` binary as a black box: started on a loopback port with a configuration
//! file and flags, over HTTP or HTTPS, ready once `/-/ready` answers; restartable in place,
//! signalled, reloaded; killed on drop with its log shown when the test failed.
//!
//! The binary's path comes from the caller: only the integration tests of the root package know it
//! (`env!("CARGO_BIN_EXE_vllm-corrector")`).

use std::path::PathBuf;
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use crate::process::{Process, TempDir, free_address, http_client, tail};

/// How long a start may take before `/-/ready` answers.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// What to start; [`CorrectorBuilder::start`] starts it.
#[derive(Debug)]
pub struct CorrectorBuilder {
    binary: PathBuf,
    config: Option<String>,
    args: Vec<String>,
    dir: Option<TempDir>,
    scheme: &'static str,
    client: Option<reqwest::blocking::Client>,
    address: Option<String>,
    log_level: String,
}

impl CorrectorBuilder {
    /// Passes `--config.file` holding `yaml` (written to `config.yml` in the corrector's directory;
    /// [`Corrector::reload_config`] replaces it).
    pub fn config(mut self, yaml: &str) -> Self {
        self.config = Some(yaml.to_string());
        self
    }

    /// Adds command-line arguments (after `--web.listen-address` and `--log.level`).
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Uses `dir` as the corrector's directory (files the arguments name live there); by default a
    /// fresh [`TempDir`].
    pub fn dir(mut self, dir: TempDir) -> Self {
        self.dir = Some(dir);
        self
    }

    /// Serves `scheme` (`http` or `https`); `client` must complete the handshake: it probes
    /// `/-/ready` and makes the launcher's own requests. Default: `http`, a plain client.
    pub fn scheme(mut self, scheme: &'static str, client: reqwest::blocking::Client) -> Self {
        self.scheme = scheme;
        self.client = Some(client);
        self
    }

    /// Listens on the fixed `address` (`127.0.0.1:<port>`), so that [`Corrector::restart`] comes
    /// back at the same address; by default a free loopback port, another one if it is taken
    /// before the corrector binds it.
    pub fn address(mut self, address: &str) -> Self {
        self.address = Some(address.to_string());
        self
    }

    /// `--log.level` (default `debug`).
    pub fn log_level(mut self, level: &str) -> Self {
        self.log_level = level.to_string();
        self
    }

    /// Starts the binary and waits for `/-/ready` (30 s per try; three tries on fresh ports, or
    /// five on a fixed address half a second apart). Panics with the log when it never gets ready.
    pub fn start(self) -> Corrector {
        let dir = self.dir.unwrap_or_else(|| TempDir::new("corrector"));
        let mut args = Vec::new();
        if let Some(yaml) = &self.config {
            let path = dir.write("config.yml", yaml);
            args.push(format!("--config.file={}", path.display()));
        }
        args.extend(self.args);
        let fixed = self.address.is_some();
        let mut corrector = Corrector {
            address: self.address.unwrap_or_else(free_address),
            base: String::new(),
            scheme: self.scheme,
            log: dir.path().join("corrector.log"),
            dir,
            process: None,
            client: self
                .client
                .unwrap_or_else(|| http_client(Duration::from_secs(30))),
            binary: self.binary,
            args,
            log_level: self.log_level,
            starts: 0,
        };
        let mut last_error = String::new();
        for _attempt in 0..if fixed { 5 } else { 3 } {
            // Only the successful start's lines stay in the log.
            let _ = std::fs::remove_file(&corrector.log);
            match corrector.spawn() {
                Ok(()) => return corrector,
                Err(e) => last_error = e,
            }
            if fixed {
                std::thread::sleep(Duration::from_millis(500));
            } else {
                // The port was taken between free_address() and bind: another one.
                corrector.address = free_address();
            }
        }
        panic!("vllm-corrector did not become ready: {last_error}");
    }
}

/// A running `vllm-corrector`; killed on drop.
#[derive(Debug)]
pub struct Corrector {
    /// `http://127.0.0.1:<port>` (or `https://`).
    pub base: String,
    /// The `host:port` it listens on.
    pub address: String,
    /// `http` or `https`.
    pub scheme: &'static str,
    dir: TempDir,
    log: PathBuf,
    process: Option<Process>,
    client: reqwest::blocking::Client,
    binary: PathBuf,
    args: Vec<String>,
    log_level: String,
    starts: u32,
}

impl Corrector {
    /// A builder for the binary at `binary` (`env!("CARGO_BIN_EXE_vllm-corrector")`).
    pub fn builder(binary: impl Into<PathBuf>) -> CorrectorBuilder {
        CorrectorBuilder {
            binary: binary.into(),
            config: None,
            args: Vec::new(),
            dir: None,
            scheme: "http",
            client: None,
            address: None,
            log_level: "debug".to_string(),
        }
    }

    fn spawn(&mut self) -> Result<(), String> {
        self.starts += 1;
        self.base = format!("{}://{}", self.scheme, self.address);
        let mut command = Command::new(&self.binary);
        command
            .args(["--web.listen-address", &self.address])
            .args(["--log.level", &self.log_level])
            .args(&self.args);
        let ready = format!("{}/-/ready", self.base);
        let process = Process::spawn(
            "vllm-corrector",
            &mut command,
            &self.log,
            &self.client,
            &ready,
            READY_TIMEOUT,
        )?;
        self.process = Some(process);
        Ok(())
    }

    /// `scheme://address/path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The client the launcher probes with (for HTTPS, the one given to
    /// [`CorrectorBuilder::scheme`]).
    pub fn client(&self) -> &reqwest::blocking::Client {
        &self.client
    }

    /// The corrector's directory (its `config.yml`, its log, the caller's files).
    pub fn dir(&self) -> &TempDir {
        &self.dir
    }

    /// How many times the process was started ([`Corrector::restart`] adds one).
    pub fn starts(&self) -> u32 {
        self.starts
    }

    /// Kills the process and starts a fresh one with the same arguments at the same address (all
    /// in-memory state lost); its log is appended to the same file. Tries five times, half a
    /// second apart, while the old port is released. Panics with the log when it never gets ready.
    pub fn restart(&mut self) {
        if let Some(mut p) = self.process.take() {
            p.kill();
        }
        let mut last_error = String::new();
        for _ in 0..5 {
            match self.spawn() {
                Ok(()) => return,
                Err(e) => last_error = e,
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        panic!("vllm-corrector did not come back: {last_error}");
    }

    /// Sends SIGTERM and waits for the exit: the exit status and how long it took.
    pub fn terminate(&mut self) -> (ExitStatus, Duration) {
        let started = Instant::now();
        let process = self.process.as_mut().expect("the corrector runs");
        process.signal("TERM");
        let status = process.wait();
        (status, started.elapsed())
    }

    /// Sends SIGHUP (a configuration reload).
    pub fn hangup(&self) {
        self.process
            .as_ref()
            .expect("the corrector runs")
            .signal("HUP");
    }

    /// Replaces the configuration file (the corrector must have been started with
    /// [`CorrectorBuilder::config`]) with `yaml` and asks for a reload (`POST /-/reload`),
    /// asserting that it succeeded.
    pub fn reload_config(&self, yaml: &str) {
        self.dir.write("config.yml", yaml);
        let response = self
            .client
            .post(self.url("/-/reload"))
            .send()
            .expect("POST /-/reload");
        let status = response.status();
        assert!(
            status.is_success(),
            "{status}: {}",
            response.text().unwrap_or_default()
        );
    }

    /// The log so far (every start of this corrector appends to it).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last `lines` lines of the log.
    pub fn log_tail(&self, lines: usize) -> String {
        tail(&self.log, lines)
    }

    /// `GET path` with the launcher's client (10 s timeout). Errors: transport or non-2xx.
    pub fn get(&self, path: &str) -> Result<String, String> {
        let response = self
            .client
            .get(self.url(path))
            .timeout(Duration::from_secs(10))
            .send()
            .map_err(|e| format!("GET {path}: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("GET {path} answered {}", response.status()));
        }
        response.text().map_err(|e| format!("GET {path}: {e}"))
    }
}
