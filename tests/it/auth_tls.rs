//! `--web.config.file` over real TLS: throwaway CA, server and client certificates (rcgen), the
//! binary as the server and reqwest (rustls) as the client. Proves that mTLS refuses a missing or
//! foreign client certificate at the handshake, that `VerifyClientCertIfGiven` keeps the probes
//! open and nothing else, that `min_version` holds, and that a reload swaps the server
//! certificate for new connections.

use crate::fixture::{Scrape, scrape_times};
use crate::harness::TempDir;
use crate::pki::Pki;
use crate::secure::{Service, client, write};

/// Writes the server's certificate and key, and `ca.crt` holding `client_ca`, into `dir`.
fn server_files(dir: &TempDir, server_ca: &Pki, client_ca: &Pki) {
    let server = server_ca.server();
    write(dir, "server.crt", &server.cert_pem);
    write(dir, "server.key", &server.key_pem);
    write(dir, "ca.crt", &client_ca.ca_pem);
}

fn start(dir: TempDir, web_yaml: &str, probe: &reqwest::blocking::Client) -> Service {
    let web = write(&dir, "web.yml", web_yaml);
    let args = [format!("--web.config.file={}", web.display())];
    Service::start(dir, &args, "https", probe)
}

fn no_auth(r: reqwest::blocking::RequestBuilder) -> reqwest::blocking::RequestBuilder {
    r
}

#[test]
fn mtls_refuses_missing_and_foreign_client_certificates_at_the_handshake() {
    let pki = Pki::new("corrector test CA");
    let dir = TempDir::new("mtls");
    server_files(&dir, &pki, &pki);
    let prometheus = pki.client("prometheus");
    let good = client(Some(&pki.ca_pem), Some(&prometheus), false);
    let service = start(
        dir,
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  \
         client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n",
        &good,
    );

    // The right certificate: a remote write is applied.
    let [t1, _, _] = scrape_times();
    let response = good
        .post(service.url("/api/v1/write"))
        .header("Content-Type", "application/x-protobuf")
        .header("Content-Encoding", "snappy")
        .header("X-Prometheus-Remote-Write-Version", "0.1.0")
        .body(crate::rw::body(&Scrape::T1.points(t1)))
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 204);

    // No certificate, a certificate of another CA, plain HTTP: no HTTP answer at all, on any
    // route, probes included (the handshake comes first).
    let foreign = Pki::new("someone else");
    let refused = [
        (
            "no certificate",
            client(Some(&pki.ca_pem), None, false),
            "https",
        ),
        (
            "foreign certificate",
            client(Some(&pki.ca_pem), Some(&foreign.client("mallory")), false),
            "https",
        ),
        ("plain HTTP", client(None, None, false), "http"),
    ];
    for (what, c, scheme) in &refused {
        for path in ["/metrics", "/-/healthy"] {
            let url = format!("{scheme}://{}{path}", service.address);
            let outcome = c.get(&url).send();
            assert!(
                outcome.is_err(),
                "{what} {path}: got {:?}",
                outcome.map(|r| r.status())
            );
        }
    }

    let snapshot = service.snapshot(&good, no_auth);
    let applied = snapshot
        .value("vllm_corrector_samples_applied_total", &[])
        .unwrap();
    assert!(applied > 0.0, "samples applied: {applied}");
    // Two refused handshakes for each of the two TLS clients, two paths each: 4. Plain HTTP is
    // a failed handshake as well: 2 more.
    let failures = snapshot
        .value("vllm_corrector_tls_handshake_failures_total", &[])
        .unwrap();
    assert_eq!(failures, 6.0, "{}", service.log_text());
}

#[test]
fn verify_if_given_keeps_the_probes_open_and_requires_a_certificate_elsewhere() {
    let pki = Pki::new("corrector test CA");
    let dir = TempDir::new("verify-if-given");
    server_files(&dir, &pki, &pki);
    let anonymous = client(Some(&pki.ca_pem), None, false);
    let service = start(
        dir,
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  \
         client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.crt\n",
        &anonymous,
    );
    let status = |c: &reqwest::blocking::Client, path: &str| {
        c.get(service.url(path)).send().unwrap().status().as_u16()
    };
    assert_eq!(status(&anonymous, "/-/healthy"), 200);
    assert_eq!(status(&anonymous, "/metrics"), 403);
    let with_cert = client(Some(&pki.ca_pem), Some(&pki.client("kubelet")), false);
    assert_eq!(status(&with_cert, "/metrics"), 200);
}

#[test]
fn server_only_tls_with_basic_auth_and_a_tls13_floor() {
    let pki = Pki::new("corrector test CA");
    let dir = TempDir::new("tls-basic");
    server_files(&dir, &pki, &pki);
    // bcrypt at cost 4 keeps the test fast; the service accepts any cost.
    let hash = bcrypt::hash("remote-write-pw", 4).unwrap();
    let tls = client(Some(&pki.ca_pem), None, false);
    let service = start(
        dir,
        &format!(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  \
             min_version: TLS13\nbasic_auth_users:\n  prometheus: {hash}\n"
        ),
        &tls,
    );
    let get = |c: &reqwest::blocking::Client, password: Option<&str>| {
        let mut request = c.get(service.url("/metrics"));
        if let Some(p) = password {
            request = request.basic_auth("prometheus", Some(p));
        }
        request.send().map(|r| r.status().as_u16())
    };
    assert_eq!(get(&tls, None).unwrap(), 401);
    assert_eq!(get(&tls, Some("wrong")).unwrap(), 401);
    assert_eq!(get(&tls, Some("remote-write-pw")).unwrap(), 200);
    // A client that stops at TLS 1.2 cannot connect.
    let old = client(Some(&pki.ca_pem), None, true);
    assert!(get(&old, Some("remote-write-pw")).is_err());
}

#[test]
fn a_reload_swaps_the_server_certificate_for_new_connections() {
    let first = Pki::new("first CA");
    let dir = TempDir::new("tls-reload");
    server_files(&dir, &first, &first);
    let trusts_first = client(Some(&first.ca_pem), None, false);
    let service = start(
        dir,
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n",
        &trusts_first,
    );
    let second = Pki::new("second CA");
    server_files(service.dir(), &second, &second);
    let response = trusts_first.post(service.url("/-/reload")).send().unwrap();
    assert_eq!(response.status().as_u16(), 200, "{}", service.log_text());
    // New clients, so new connections: the second CA's certificate is served now.
    let trusts_second = client(Some(&second.ca_pem), None, false);
    let ok = trusts_second.get(service.url("/-/ready")).send().unwrap();
    assert_eq!(ok.status().as_u16(), 200);
    let fresh_first = client(Some(&first.ca_pem), None, false);
    assert!(fresh_first.get(service.url("/-/ready")).send().is_err());
}
