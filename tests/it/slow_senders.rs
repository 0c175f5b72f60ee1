//! Regression tests for stalled and slow senders: a body that never completes must not hold a
//! remote-write slot, the in-flight memory budget, or a graceful shutdown beyond its timeout.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::fixture::{Scrape, scrape_times};
use crate::harness::Corrector;

/// Opens a connection that sends a write request's headers announcing 1000 bytes, then only 2.
fn stalled_write(address: &str) -> TcpStream {
    let mut stream = TcpStream::connect(address).expect("connect");
    let head = format!(
        "POST /api/v1/write HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/x-protobuf\r\n\
         Content-Encoding: snappy\r\nContent-Length: 1000\r\n\r\nxx"
    );
    stream.write_all(head.as_bytes()).expect("send headers");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream
}

#[test]
fn stalled_bodies_time_out_with_503_so_the_sender_retries_and_free_their_slots() {
    let corrector = Corrector::start_with_config(Some(
        "limits:\n  max_concurrent_requests: 2\n  request_body_timeout: 1s\n",
    ));
    // Two stalled senders take both slots.
    let mut stalled: Vec<TcpStream> = (0..2).map(|_| stalled_write(&corrector.address)).collect();
    std::thread::sleep(Duration::from_millis(200));
    // A real write waits for a slot (up to 5 s) and gets one once the stalled bodies time out at 1 s.
    let started = Instant::now();
    let [t1, _, _] = scrape_times();
    assert_eq!(corrector.post(&Scrape::T1.points(t1)), 204);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    for stream in &mut stalled {
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        assert!(
            answer.starts_with("HTTP/1.1 503"),
            "stalled sender got: {answer:?}"
        );
    }
    let text = corrector.metrics_text();
    assert!(
        text.lines().any(|l| l == "vllm_corrector_requests_limited_total{limit=\"request_body_timeout\"} 2"),
        "{text}"
    );
}

#[test]
fn sigterm_does_not_wait_for_a_stalled_body() {
    let mut corrector = Corrector::start_with_config(Some("limits:\n  request_body_timeout: 2s\n"));
    let _stalled = stalled_write(&corrector.address);
    std::thread::sleep(Duration::from_millis(200));
    let (status, took) = corrector.terminate();
    assert!(status.success(), "exit status {status:?}");
    // The stalled body times out after 2 s, then the server finishes; never the client's pace.
    assert!(took < Duration::from_secs(8), "SIGTERM took {took:?}");
}

#[test]
fn a_request_larger_than_the_memory_budget_share_waits_then_gets_503() {
    // Budget = body cap + decoded cap exactly: one stalled full-size body holds the body share, so
    // a second request cannot reserve its announced size within the 5 s slot wait... unless the
    // stalled one times out first (request_body_timeout 30 s here, so it does not).
    let corrector = Corrector::start_with_config(Some(
        "limits:\n  max_body_bytes: 1048576\n  max_decoded_bytes: 1048576\n  max_inflight_bytes: 2097152\n  request_body_timeout: 30s\n",
    ));
    let mut stream = TcpStream::connect(&corrector.address).expect("connect");
    let head = format!(
        "POST /api/v1/write HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-protobuf\r\n\
         Content-Encoding: snappy\r\nContent-Length: 1048576\r\n\r\nxx",
        corrector.address
    );
    stream.write_all(head.as_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    // This request announces 1 MiB + decodes up to 1 MiB: the budget has 1 MiB left, so the body
    // share fits but the decode share does not while the stalled body holds its share.
    let [t1, _, _] = scrape_times();
    let mut big = crate::rw::body(&Scrape::T1.points(t1));
    big.resize(1_048_576, 0);
    let status = reqwest::blocking::Client::new()
        .post(format!("{}/api/v1/write", corrector.base))
        .header("Content-Type", "application/x-protobuf")
        .header("Content-Encoding", "snappy")
        .body(big)
        .timeout(Duration::from_secs(20))
        .send()
        .unwrap()
        .status()
        .as_u16();
    // Padding makes the snappy body corrupt, but the budget is checked first: 503, not 400.
    assert_eq!(status, 503);
    let text = corrector.metrics_text();
    assert!(
        text.lines()
            .any(|l| l == "vllm_corrector_requests_limited_total{limit=\"max_inflight_bytes\"} 1"),
        "{text}"
    );
}
