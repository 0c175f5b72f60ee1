//! Starting the binary with arbitrary flags and files, over HTTP or HTTPS, for the auth, TLS and
//! reload tests: [`Service`], and [`client`] to build reqwest clients with a CA, a client
//! certificate and a TLS version cap.

use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{TempDir, free_port, wait_ready};
use crate::metrics::Snapshot;
use crate::pki::Leaf;

/// A running `vllm-corrector`, killed on drop, with its working files in `dir`.
pub(crate) struct Service {
    child: Child,
    /// `host:port` it listens on.
    pub address: String,
    /// `http` or `https`.
    pub scheme: &'static str,
    /// The directory holding its configuration files.
    pub dir: TempDir,
    log: PathBuf,
}

impl Service {
    /// Starts the binary on a free loopback port with `args`, and waits until `probe` (a
    /// client able to complete the handshake) gets a 2xx from `/-/ready`.
    pub(crate) fn start(
        dir: TempDir,
        args: &[String],
        scheme: &'static str,
        probe: &reqwest::blocking::Client,
    ) -> Service {
        let mut last_error = String::new();
        for _attempt in 0..3 {
            let address = format!("127.0.0.1:{}", free_port());
            let log = dir
                .path()
                .join(format!("corrector-{}.log", address.replace(':', "_")));
            let out = File::create(&log).expect("create log file");
            let mut child = Command::new(env!("CARGO_BIN_EXE_vllm-corrector"))
                .args(["--web.listen-address", &address, "--log.level", "debug"])
                .args(args)
                .stdin(Stdio::null())
                .stdout(out.try_clone().unwrap())
                .stderr(out)
                .spawn()
                .expect("spawn vllm-corrector");
            let ready = format!("{scheme}://{address}/-/ready");
            match wait_ready(&mut child, probe, &ready, Duration::from_secs(20)) {
                Ok(()) => {
                    return Service {
                        child,
                        address,
                        scheme,
                        dir,
                        log,
                    };
                }
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    last_error = format!(
                        "{e}\n--- log ---\n{}",
                        std::fs::read_to_string(&log).unwrap_or_default()
                    );
                }
            }
        }
        panic!("vllm-corrector did not become ready: {last_error}");
    }

    /// `scheme://address/path`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}://{}{path}", self.scheme, self.address)
    }

    /// The log so far.
    pub(crate) fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends SIGHUP to this child (by its own process id).
    pub(crate) fn hangup(&self) {
        let status = Command::new("kill")
            .args(["-HUP", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -HUP failed");
    }

    /// `/metrics` read by `client` (with whatever credentials `auth` adds), parsed.
    pub(crate) fn snapshot(
        &self,
        client: &reqwest::blocking::Client,
        auth: impl Fn(reqwest::blocking::RequestBuilder) -> reqwest::blocking::RequestBuilder,
    ) -> Snapshot {
        let response = auth(client.get(self.url("/metrics")))
            .send()
            .unwrap_or_else(|e| panic!("GET /metrics: {e}\n--- log ---\n{}", self.log_text()));
        assert_eq!(response.status().as_u16(), 200, "GET /metrics");
        Snapshot::parse_text(&response.text().unwrap())
    }

    /// Polls `check` on `/metrics` until it holds, or panics after `timeout` with the log.
    pub(crate) fn wait_for(&self, what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if check() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!(
            "{what} did not happen within {timeout:?}\n--- log ---\n{}",
            self.log_text()
        );
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A blocking client trusting only `ca` (when given; else plain HTTP use), presenting `identity`
/// when given, and speaking at most TLS 1.2 when `tls12_only`.
pub(crate) fn client(
    ca: Option<&str>,
    identity: Option<&Leaf>,
    tls12_only: bool,
) -> reqwest::blocking::Client {
    let mut builder = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(10))
        .use_rustls_tls();
    if let Some(ca) = ca {
        builder = builder
            .tls_built_in_root_certs(false)
            .add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes()).unwrap());
    }
    if let Some(leaf) = identity {
        builder =
            builder.identity(reqwest::Identity::from_pem(leaf.identity_pem().as_bytes()).unwrap());
    }
    if tls12_only {
        builder = builder.max_tls_version(reqwest::tls::Version::TLS_1_2);
    }
    builder.build().unwrap()
}

/// Writes `text` to `name` in `dir`, returning the path.
pub(crate) fn write(dir: &TempDir, name: &str, text: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path
}
