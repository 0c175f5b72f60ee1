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
fn stalled_bodies_time_out_with_503_so_the_sender_retries_and_hold_no_slot() {
    let corrector = Corrector::start_with_config(Some(
        "limits:\n  max_concurrent_requests: 2\n  request_body_timeout: 1s\n",
    ));
    // Two stalled senders: a body being read holds no request slot, only the bytes it sent.
    let mut stalled: Vec<TcpStream> = (0..2).map(|_| stalled_write(&corrector.address)).collect();
    std::thread::sleep(Duration::from_millis(200));
    // A real write gets a slot at once, before the stalled bodies time out at 1 s.
    let started = Instant::now();
    let [t1, _, _] = scrape_times();
    assert_eq!(corrector.post(&Scrape::T1.points(t1)), 204);
    assert!(
        started.elapsed() < Duration::from_millis(700),
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

/// Opens a connection that announces `announced` body bytes (or a chunked body when `None`) and
/// sends `sent` of them.
fn slow_body(address: &str, announced: Option<usize>, sent: usize) -> TcpStream {
    let mut stream = TcpStream::connect(address).expect("connect");
    let length = match announced {
        Some(n) => format!("Content-Length: {n}"),
        None => "Transfer-Encoding: chunked".to_owned(),
    };
    let mut head = format!(
        "POST /api/v1/write HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/x-protobuf\r\n\
         Content-Encoding: snappy\r\n{length}\r\n\r\n"
    )
    .into_bytes();
    if announced.is_none() {
        head.extend_from_slice(format!("{sent:x}\r\n").as_bytes());
    }
    head.resize(head.len() + sent, b'x');
    stream.write_all(&head).expect("send");
    stream
}

#[test]
fn eight_slow_bodies_do_not_stall_other_writers() {
    // Issue 23, item 6: with the budget reserved up front, eight bodies announcing the largest
    // size (or chunked) that send 2 bytes took the whole in-flight budget; every other writer
    // waited 5 s, then got 503. Charged as bytes arrive, they hold 1 KiB each.
    let corrector = Corrector::start_with_config(Some("limits:\n  request_body_timeout: 30s\n"));
    // The default limits.max_body_bytes.
    let largest = 8 * 1024 * 1024;
    let _slow: Vec<TcpStream> = (0..16)
        .map(|i| slow_body(&corrector.address, (i % 2 == 0).then_some(largest), 2))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let [t1, t2, _] = scrape_times();
    for points in [Scrape::T1.points(t1), Scrape::T2.points(t2)] {
        let started = Instant::now();
        assert_eq!(corrector.post(&points), 204);
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "took {:?}",
            started.elapsed()
        );
    }
    let text = corrector.metrics_text();
    assert!(
        text.lines()
            .any(|l| l == "vllm_corrector_requests_limited_total{limit=\"max_inflight_bytes\"} 0"),
        "{text}"
    );
    // The sixteen hold 1 KiB each (the two test writes have finished).
    let held = metric(
        &text,
        "vllm_corrector_memory_bytes{part=\"inflight_requests\"}",
    );
    assert_eq!(held, 16.0 * 1024.0, "{text}");
}

/// The value of the series `line_prefix` on the text page `text`.
fn metric(text: &str, line_prefix: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(line_prefix)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("{line_prefix} missing:\n{text}"))
}

#[test]
fn bodies_in_flight_never_hold_more_than_the_inflight_budget() {
    // The smallest budget the limits allow: a 1 MiB body decoding to 1 MiB is charged
    // 1 + 1 + 8 MiB + 64 KiB = 10 MiB + 64 KiB.
    let budget = 10 * 1024 * 1024 + 64 * 1024;
    let corrector = Corrector::start_with_config(Some(&format!(
        "limits:\n  max_body_bytes: 1048576\n  max_decoded_bytes: 1048576\n  \
         max_inflight_bytes: {budget}\n  request_body_timeout: 30s\n"
    )));
    // Sixteen senders announce 1 MiB and send 900 KiB each, 14 MiB in all: the budget fits about
    // ten of them (a buffer's capacity doubles toward the announced size), the rest are refused,
    // 503, as their bytes arrive.
    let mut slow: Vec<TcpStream> = (0..16)
        .map(|_| slow_body(&corrector.address, Some(1024 * 1024), 900 * 1024))
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let text = corrector.metrics_text();
    let held = metric(
        &text,
        "vllm_corrector_memory_bytes{part=\"inflight_requests\"}",
    );
    assert!(held <= budget as f64, "{held} > {budget}");
    assert!(
        held >= 8.0 * 900.0 * 1024.0,
        "{held}: the first bodies are held"
    );
    let refused = metric(
        &text,
        "vllm_corrector_requests_limited_total{limit=\"max_inflight_bytes\"}",
    );
    assert!(refused >= 1.0, "{text}");
    let mut answered_503 = 0;
    for stream in &mut slow {
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut answer = [0u8; 12];
        if stream.read_exact(&mut answer).is_ok() && answer.starts_with(b"HTTP/1.1 503") {
            answered_503 += 1;
        }
    }
    assert_eq!(f64::from(answered_503), refused, "{text}");
}
