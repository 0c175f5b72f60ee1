//! Starting the binary with arbitrary flags and files, over HTTP or HTTPS, for the auth, TLS and
//! reload tests: [`Service`], and [`client`] to build reqwest clients with a CA, a client
//! certificate and a TLS version cap.

use std::ops::Deref;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::harness::{TempDir, corrector};
use crate::metrics::Snapshot;
use crate::pki::Leaf;

/// A running `vllm-corrector` ([`test_support::corrector::Corrector`]), killed on drop, with its
/// working files in its directory.
pub(crate) struct Service(test_support::corrector::Corrector);

impl Deref for Service {
    type Target = test_support::corrector::Corrector;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl Service {
    /// Starts the binary on a free loopback port with `args` and the files of `dir`, and waits
    /// until `probe` (a client able to complete the handshake) gets a 2xx from `/-/ready`.
    pub(crate) fn start(
        dir: TempDir,
        args: &[String],
        scheme: &'static str,
        probe: &reqwest::blocking::Client,
    ) -> Service {
        Service(
            corrector()
                .dir(dir)
                .args(args.iter().cloned())
                .scheme(scheme, probe.clone())
                .start(),
        )
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
    dir.write(name, text)
}
