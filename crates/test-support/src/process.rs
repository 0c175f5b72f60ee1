//! Child processes for the tests: a log file per child, a readiness wait over HTTP, teardown on
//! drop, and the log's tail on stderr when a test fails while the child runs. Also temporary
//! directories and free loopback ports. The launchers ([`crate::corrector`],
//! [`crate::prometheus`], [`crate::vmagent`]) are built on [`Process`].

use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A directory under the system temp dir, removed on drop.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// Creates a fresh, uniquely named directory (`vllm-corrector-it-<tag>-<pid>-<n>`).
    pub fn new(tag: &str) -> TempDir {
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
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Writes `text` to the file `name` in the directory; returns its path. Panics on an I/O error.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind an ephemeral port")
        .local_addr()
        .unwrap()
        .port()
}

/// A `127.0.0.1:<port>` address that was free a moment ago.
pub fn free_address() -> String {
    format!("127.0.0.1:{}", free_port())
}

/// The last `lines` lines of the file at `path` (empty when it cannot be read).
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A client with a `timeout` per request, for readiness probes and the launchers' own requests.
pub fn http_client(timeout: Duration) -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(timeout)
        .build()
        .expect("build an HTTP client")
}

/// Polls `ready_url` with `client` until it answers 2xx. Errors: `child` exited (with its
/// status), or `timeout` passed.
pub fn wait_ready(
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

/// POSTs to `url` and asserts a 2xx answer (Prometheus', vmagent's and the corrector's
/// `/-/reload`).
pub fn post_ok(client: &reqwest::blocking::Client, url: &str) {
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

/// How many log lines a failing test prints per child.
const TAIL_ON_FAILURE: usize = 80;

/// A child process with stdout and stderr in a log file; killed and reaped on drop. When the
/// dropping thread is panicking (a failed test), the log's last lines go to stderr.
#[derive(Debug)]
pub struct Process {
    what: String,
    child: Option<Child>,
    log: PathBuf,
}

impl Process {
    /// Spawns `command` with stdout and stderr appended to `log` (created if missing), then waits
    /// until `ready_url` answers 2xx to `probe` within `timeout`. Errors (the child is then killed):
    /// the spawn failed, or the child exited or never got ready; the message holds the log's tail.
    pub fn spawn(
        what: &str,
        command: &mut Command,
        log: &Path,
        probe: &reqwest::blocking::Client,
        ready_url: &str,
        timeout: Duration,
    ) -> Result<Process, String> {
        let out = File::options()
            .create(true)
            .append(true)
            .open(log)
            .unwrap_or_else(|e| panic!("open {}: {e}", log.display()));
        let mut child = command
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("clone the log handle"))
            .stderr(out)
            .spawn()
            .map_err(|e| format!("spawn {what}: {e}"))?;
        if let Err(e) = wait_ready(&mut child, probe, ready_url, timeout) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "{what} not ready: {e}\n--- {what} log ({}) ---\n{}",
                log.display(),
                tail(log, TAIL_ON_FAILURE)
            ));
        }
        Ok(Process {
            what: what.to_string(),
            child: Some(child),
            log: log.to_path_buf(),
        })
    }

    /// The log file.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// The child's process id. Panics when it was killed or reaped.
    pub fn id(&self) -> u32 {
        self.child.as_ref().expect("the child runs").id()
    }

    /// Sends `signal` (`TERM`, `HUP`, …) to this child by its own process id.
    pub fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &self.id().to_string()])
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -{signal} {} failed", self.id());
    }

    /// Waits for the child to exit. Panics when it was already reaped.
    pub fn wait(&mut self) -> ExitStatus {
        let status = self
            .child
            .as_mut()
            .expect("the child runs")
            .wait()
            .expect("wait for the child");
        self.child = None;
        status
    }

    /// Kills and reaps the child (nothing when it already exited and was reaped).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!(
                "--- {} log, last {TAIL_ON_FAILURE} lines ({}) ---\n{}\n--- end of {} log ---",
                self.what,
                self.log.display(),
                tail(&self.log, TAIL_ON_FAILURE),
                self.what
            );
        }
    }
}
