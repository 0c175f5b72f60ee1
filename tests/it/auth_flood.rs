//! Authentication under floods over real sockets (`docs/SECURITY.md`, "Authentication under
//! floods"): hundreds of clients sending wrong passwords from 127.0.0.1 do not keep a valid
//! credential from 127.0.0.2 waiting, and connections that never start their TLS handshake do not
//! keep a new one waiting. Both print the measured wait (`-- --nocapture`).

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use test_support::flood::{Flood, Tls, basic, connect, get, tcp_from};

use crate::harness::TempDir;
use crate::pki::Pki;
use crate::secure::{Service, client, write};

const FLOOD_FROM: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 1));
const LEGITIMATE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 2));

/// Generous for a loaded two-core machine; the figure printed is the finding.
const PROMPT: Duration = Duration::from_secs(3);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// One request from [`LEGITIMATE`] on a new connection: its status (or error) and how long the
/// connection and the answer took, given up after 20 s.
async fn legitimate_request(
    to: SocketAddr,
    tls: Option<&Tls>,
    path: &str,
    authorization: Option<&str>,
) -> (String, Duration) {
    let started = Instant::now();
    let outcome = tokio::time::timeout(Duration::from_secs(20), async {
        let mut stream = connect(LEGITIMATE, to, tls).await?;
        get(&mut stream, path, authorization).await
    })
    .await;
    let status = match outcome {
        Ok(Ok(status)) => status.to_string(),
        Ok(Err(e)) => format!("error {e}"),
        Err(_) => "no answer within 20 s".to_owned(),
    };
    (status, started.elapsed())
}

#[test]
fn a_valid_credential_is_checked_within_a_second_under_a_flood_of_bad_ones() {
    let dir = TempDir::new("auth-flood");
    // Cost 8: about 80 ms a check in this debug build, so 300 checks in one queue take 24 s.
    let hash = bcrypt::hash("remote-write-pw", 8).unwrap();
    let web = write(
        &dir,
        "web.yml",
        &format!("basic_auth_users:\n  prometheus: {hash}\n"),
    );
    let probe = client(None, None, false);
    let args = [format!("--web.config.file={}", web.display())];
    let service = Service::start(dir, &args, "http", &probe);
    let address: SocketAddr = service.address.parse().unwrap();

    let (status, took, flood_401, flood_503) = runtime().block_on(async {
        let flood = Flood::start(
            300,
            FLOOD_FROM,
            address,
            None,
            ("/metrics", "prometheus"),
            true,
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        let right = basic("prometheus", "remote-write-pw");
        let (status, took) = legitimate_request(address, None, "/metrics", Some(&right)).await;
        let tally = &flood.tally;
        let answers = (
            tally.unauthorized.load(Ordering::Relaxed),
            tally.unavailable.load(Ordering::Relaxed),
        );
        (status, took, answers.0, answers.1)
    });
    println!(
        "valid credential answered {status} in {took:?} under 300 flooding clients \
         ({flood_401} × 401, {flood_503} × 503)"
    );
    assert_eq!(status, "200", "{}", service.log_text());
    assert!(took < PROMPT, "took {took:?}");

    // The flood ran bcrypt within its client's allowance (a burst of 10, then 1 a second) and
    // was refused at once beyond it, each refusal counted.
    let snapshot = service.snapshot(&probe, |r| {
        r.basic_auth("prometheus", Some("remote-write-pw"))
    });
    let failures = |reason| {
        snapshot
            .value("vllm_corrector_auth_failures_total", &[("reason", reason)])
            .unwrap()
    };
    assert!(failures("invalid_credentials") <= 20.0, "{snapshot:?}");
    assert!(failures("rate_limited") >= flood_503 as f64);
    assert!(
        flood_401 <= 20 && flood_503 > 100,
        "{flood_401} {flood_503}"
    );
}

#[test]
fn a_new_tls_connection_is_not_held_up_by_idle_ones() {
    let pki = Pki::new("corrector test CA");
    let dir = TempDir::new("tls-idle");
    let server = pki.server();
    write(&dir, "server.crt", &server.cert_pem);
    write(&dir, "server.key", &server.key_pem);
    let web = write(
        &dir,
        "web.yml",
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n",
    );
    let probe = client(Some(&pki.ca_pem), None, false);
    let args = [format!("--web.config.file={}", web.display())];
    let service = Service::start(dir, &args, "https", &probe);
    let address: SocketAddr = service.address.parse().unwrap();
    let tls = Tls::new(pki.ca_pem.as_bytes(), "127.0.0.1").unwrap();

    // 600 connections that never send a ClientHello, more than the 256 handshakes in progress.
    let (idle, status, took) = runtime().block_on(async {
        let mut idle = Vec::new();
        for _ in 0..600 {
            match tokio::time::timeout(Duration::from_secs(2), tcp_from(FLOOD_FROM, address)).await
            {
                Ok(Ok(stream)) => idle.push(stream),
                _ => break,
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let (status, took) = legitimate_request(address, Some(&tls), "/-/ready", None).await;
        (idle.len(), status, took)
    });
    println!("new TLS connection answered {status} in {took:?} beside {idle} idle ones");
    assert_eq!(status, "200", "{}", service.log_text());
    assert!(took < PROMPT, "took {took:?}");
    // All accepted at once (when accepting waited for handshakes, the listen backlog held 129
    // more and the rest could not connect), and the oldest closed for newer ones, each counted.
    assert_eq!(idle, 600);
    let snapshot = service.snapshot(&probe, |r| r);
    let failures = snapshot
        .value("vllm_corrector_tls_handshake_failures_total", &[])
        .unwrap();
    assert!(failures >= (600 - 256) as f64, "{failures}");
}
