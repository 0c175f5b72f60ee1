//! End to end: the real Prometheus 2.42 remote-writes through each authentication scheme of
//! `--web.config.file` (basic auth, bearer token, TLS verified against a CA with basic auth, and
//! mTLS with a client certificate). For each, samples must arrive
//! (`vllm_corrector_samples_applied_total` > 0) and a request without the credentials must be
//! refused.

use std::time::Duration;

use crate::fixture::Scrape;
use crate::harness::TempDir;
use crate::pki::Pki;
use crate::prometheus_e2e::ExpositionServer;
use crate::secure::{Service, client, write};
use test_support::prometheus::Prometheus;
use test_support::tools::{Tool, require};

type Auth = Box<dyn Fn(reqwest::blocking::RequestBuilder) -> reqwest::blocking::RequestBuilder>;

/// One scheme: the web config, the `remote_write` lines that satisfy it, and a client (with
/// `auth`) that can read `/metrics` back.
struct Scheme {
    name: &'static str,
    url_scheme: &'static str,
    web_yaml: String,
    remote_write: String,
    client: reqwest::blocking::Client,
    auth: Auth,
    /// Asserts that requests without the credentials are refused.
    refused: Box<dyn Fn(&Service)>,
    /// Remote writes that `refused` gets refused with an HTTP answer (401): 1, or 0 when the
    /// refusal is at the TLS handshake.
    http_refusals: f64,
}

fn status_without_credentials(
    service: &Service,
    url_scheme: &str,
    c: &reqwest::blocking::Client,
) -> u16 {
    c.post(format!("{url_scheme}://{}/api/v1/write", service.address))
        .header("Content-Type", "application/x-protobuf")
        .header("Content-Encoding", "snappy")
        .body(Vec::new())
        .send()
        .unwrap()
        .status()
        .as_u16()
}

fn schemes(pki: &Pki, dir: &TempDir) -> Vec<Scheme> {
    let ca_file = dir.path().join("ca.crt");
    let client_crt = dir.path().join("client.crt");
    let client_key = dir.path().join("client.key");
    let prometheus = pki.client("prometheus");
    write(dir, "client.crt", &prometheus.cert_pem);
    write(dir, "client.key", &prometheus.key_pem);
    let hash = bcrypt::hash("rw-password", 4).unwrap();
    let plain = client(None, None, false);
    let tls = client(Some(&pki.ca_pem), None, false);
    let tls_server = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n";
    vec![
        Scheme {
            name: "basic auth",
            url_scheme: "http",
            web_yaml: format!("basic_auth_users:\n  prometheus: {hash}\n"),
            remote_write:
                "    basic_auth:\n      username: prometheus\n      password: rw-password\n".into(),
            client: plain.clone(),
            auth: Box::new(|r| r.basic_auth("prometheus", Some("rw-password"))),
            refused: Box::new(move |s| {
                assert_eq!(
                    status_without_credentials(s, "http", &client(None, None, false)),
                    401
                )
            }),
            http_refusals: 1.0,
        },
        Scheme {
            name: "bearer token",
            url_scheme: "http",
            web_yaml: "bearer_tokens: [rw-token-0123]\n".into(),
            remote_write:
                "    authorization:\n      type: Bearer\n      credentials: rw-token-0123\n".into(),
            client: plain,
            auth: Box::new(|r| r.bearer_auth("rw-token-0123")),
            refused: Box::new(move |s| {
                assert_eq!(
                    status_without_credentials(s, "http", &client(None, None, false)),
                    401
                )
            }),
            http_refusals: 1.0,
        },
        Scheme {
            name: "TLS verified against the CA, with basic auth",
            url_scheme: "https",
            web_yaml: format!("{tls_server}basic_auth_users:\n  prometheus: {hash}\n"),
            remote_write: format!(
                "    basic_auth:\n      username: prometheus\n      password: rw-password\n    tls_config:\n      ca_file: {}\n",
                ca_file.display()
            ),
            client: tls.clone(),
            auth: Box::new(|r| r.basic_auth("prometheus", Some("rw-password"))),
            refused: {
                let ca = pki.ca_pem.clone();
                Box::new(move |s| {
                    assert_eq!(
                        status_without_credentials(s, "https", &client(Some(&ca), None, false)),
                        401
                    );
                    let plain = client(None, None, false);
                    assert!(
                        plain
                            .get(format!("http://{}/metrics", s.address))
                            .send()
                            .is_err()
                    );
                })
            },
            http_refusals: 1.0,
        },
        Scheme {
            name: "mTLS with a client certificate",
            url_scheme: "https",
            web_yaml: format!(
                "{tls_server}  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n"
            ),
            remote_write: format!(
                "    tls_config:\n      ca_file: {}\n      cert_file: {}\n      key_file: {}\n",
                ca_file.display(),
                client_crt.display(),
                client_key.display()
            ),
            client: client(Some(&pki.ca_pem), Some(&prometheus), false),
            auth: Box::new(|r| r),
            refused: Box::new(move |s| {
                let outcome = tls.get(format!("https://{}/metrics", s.address)).send();
                assert!(
                    outcome.is_err(),
                    "no client certificate: {:?}",
                    outcome.map(|r| r.status())
                );
            }),
            http_refusals: 0.0,
        },
    ]
}

#[test]
fn prometheus_remote_writes_through_every_scheme_and_nothing_unauthenticated_passes() {
    let Some(binary) = require(Tool::PROMETHEUS_2) else {
        return;
    };
    let exposition = ExpositionServer::start(Scrape::T1.text());
    let pki = Pki::new("corrector e2e CA");
    // Files Prometheus reads (CA, its client certificate) live here for the whole test.
    let shared = TempDir::new("auth-e2e");
    write(&shared, "ca.crt", &pki.ca_pem);
    for scheme in schemes(&pki, &shared) {
        let dir = TempDir::new("auth-e2e-corrector");
        let server = pki.server();
        write(&dir, "server.crt", &server.cert_pem);
        write(&dir, "server.key", &server.key_pem);
        write(&dir, "ca.crt", &pki.ca_pem);
        let web = write(&dir, "web.yml", &scheme.web_yaml);
        let service = Service::start(
            dir,
            &[format!("--web.config.file={}", web.display())],
            scheme.url_scheme,
            &scheme.client,
        );
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: vllm\n    \
             static_configs:\n      - targets: [\"{}\"]\nremote_write:\n  - url: {}\n{}    \
             queue_config:\n      batch_send_deadline: 1s\n",
            exposition.address,
            service.url("/api/v1/write"),
            scheme.remote_write
        );
        let prometheus = Prometheus::start(&binary, &config);
        let applied = || {
            service
                .snapshot(&scheme.client, &scheme.auth)
                .value("vllm_corrector_samples_applied_total", &[])
                .unwrap_or(0.0)
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(90);
        while applied() <= 0.0 {
            assert!(
                std::time::Instant::now() < deadline,
                "{}: no sample arrived within 90 s\n--- prometheus ---\n{}\n--- corrector ---\n{}",
                scheme.name,
                prometheus.log_text(),
                service.log_text()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        (scheme.refused)(&service);
        let snapshot = service.snapshot(&scheme.client, &scheme.auth);
        // Prometheus itself was never refused: the only refused writes are the test's own.
        let refused_writes: f64 = ["401", "403"]
            .iter()
            .filter_map(|code| {
                snapshot.value(
                    "vllm_corrector_http_requests_total",
                    &[("handler", "/api/v1/write"), ("code", code)],
                )
            })
            .sum();
        assert_eq!(
            refused_writes, scheme.http_refusals,
            "{}: refused writes",
            scheme.name
        );
        drop(prometheus);
    }
}
