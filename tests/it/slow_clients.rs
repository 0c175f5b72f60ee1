//! Slow and greedy clients over real sockets (`docs/RELIABILITY.md`, "Slow clients"): a request
//! head that never completes, a keep-alive connection left idle, and more connections than
//! `limits.max_connections`, each closed by the server and counted, while a Prometheus-like
//! writer keeps working.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::fixture::{Scrape, scrape_times};
use crate::harness::Corrector;

/// Reads until the server closes the connection; how long that took. Panics if it stays open
/// for `limit`.
fn wait_closed(stream: &mut TcpStream, limit: Duration) -> (Duration, Vec<u8>) {
    let started = Instant::now();
    stream.set_read_timeout(Some(limit)).unwrap();
    let mut got = Vec::new();
    match stream.read_to_end(&mut got) {
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
        Err(e) => panic!("connection still open after {:?}: {e}", started.elapsed()),
    }
    (started.elapsed(), got)
}

/// The value of one self-metric line, e.g. `vllm_corrector_connections_open`.
fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| {
            l.strip_prefix(series)
                .and_then(|rest| rest.strip_prefix(' '))
        })
        .unwrap_or_else(|| panic!("{series} missing:\n{text}"))
        .parse()
        .unwrap()
}

#[test]
fn half_a_request_head_is_closed_after_the_header_read_timeout() {
    let corrector = Corrector::start_with_config(Some("limits:\n  header_read_timeout: 1s\n"));
    let mut stream = TcpStream::connect(&corrector.address).unwrap();
    stream
        .write_all(
            b"POST /api/v1/write HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n",
        )
        .unwrap();
    let (took, answer) = wait_closed(&mut stream, Duration::from_secs(10));
    assert!(
        took >= Duration::from_millis(800) && took < Duration::from_secs(4),
        "closed after {took:?}"
    );
    assert!(
        answer.is_empty(),
        "no HTTP answer to half a head: {:?}",
        String::from_utf8_lossy(&answer)
    );
    let text = corrector.metrics_text();
    assert_eq!(
        metric(
            &text,
            "vllm_corrector_connections_closed_total{reason=\"header_read_timeout\"}"
        ),
        1.0
    );
    assert_eq!(
        metric(
            &text,
            "vllm_corrector_connections_closed_total{reason=\"idle_timeout\"}"
        ),
        0.0
    );
}

#[test]
fn a_request_head_past_32_kib_is_answered_431_at_once() {
    // hyper's default buffer (about 400 KiB) kept reading such a head until the header read
    // timeout: 1 015 connections sending one endless header held 530 MiB.
    let corrector = Corrector::start_with_config(Some("limits:\n  header_read_timeout: 30s\n"));
    let mut stream = TcpStream::connect(&corrector.address).unwrap();
    stream
        .write_all(b"POST /api/v1/write HTTP/1.1\r\nHost: x\r\nX-Pad: ")
        .unwrap();
    // Past 32 KiB the server answers and closes; what is still unsent may be refused.
    let _ = stream.write_all(&[b'a'; 40 * 1024]);
    let (took, answer) = wait_closed(&mut stream, Duration::from_secs(20));
    assert!(took < Duration::from_secs(10), "closed after {took:?}");
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 431"),
        "{:?}",
        &answer[..answer.len().min(200)]
    );
}

#[test]
fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let corrector = Corrector::start_with_config(Some(
        "limits:\n  header_read_timeout: 10s\n  idle_connection_timeout: 1s\n",
    ));
    let mut stream = TcpStream::connect(&corrector.address).unwrap();
    stream
        .write_all(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    // The answer comes at once; then the connection idles until the server closes it.
    let (took, answer) = wait_closed(&mut stream, Duration::from_secs(10));
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        took >= Duration::from_millis(800) && took < Duration::from_secs(4),
        "closed after {took:?}"
    );
    // Ours, and the harness client's pooled connection, idle since its readiness probe (before
    // ours opened, so it closed first).
    let text = corrector.metrics_text();
    assert_eq!(
        metric(
            &text,
            "vllm_corrector_connections_closed_total{reason=\"idle_timeout\"}"
        ),
        2.0
    );
    assert_eq!(
        metric(
            &text,
            "vllm_corrector_connections_closed_total{reason=\"header_read_timeout\"}"
        ),
        0.0
    );
}

#[test]
fn connections_over_the_cap_are_closed_and_counted_and_a_writer_gets_in_once_they_go() {
    let corrector = Corrector::start_with_config(Some(
        "limits:\n  max_connections: 3\n  header_read_timeout: 30s\n",
    ));
    // The harness' client keeps one pooled keep-alive connection (its readiness probes, this scrape).
    assert_eq!(
        metric(&corrector.metrics_text(), "vllm_corrector_connections_open"),
        1.0
    );
    let held: Vec<TcpStream> = (0..2)
        .map(|_| TcpStream::connect(&corrector.address).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    // Three are open: the next ones are accepted by the kernel and closed by the server at once.
    for _ in 0..3 {
        let mut extra = TcpStream::connect(&corrector.address).unwrap();
        let _ = extra.write_all(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n");
        let (took, answer) = wait_closed(&mut extra, Duration::from_secs(5));
        assert!(
            answer.is_empty() && took < Duration::from_secs(2),
            "over the cap: {took:?} {answer:?}"
        );
    }
    drop(held);
    std::thread::sleep(Duration::from_millis(300));
    let [t1, t2, _] = scrape_times();
    corrector.write(&Scrape::T1.points(t1));
    corrector.write(&Scrape::T2.points(t2));
    let text = corrector.metrics_text();
    assert_eq!(
        metric(
            &text,
            "vllm_corrector_connections_closed_total{reason=\"max_connections\"}"
        ),
        3.0
    );
    assert_eq!(
        metric(&text, "vllm_corrector_connections_open"),
        1.0,
        "the held ones are gone"
    );
}

#[test]
fn a_keep_alive_writer_keeps_writing_across_idle_closes() {
    let corrector = Corrector::start_with_config(Some("limits:\n  idle_connection_timeout: 1s\n"));
    let [t1, t2, t3] = scrape_times();
    // Prometheus-like: one pooled keep-alive connection, a pause longer than the idle timeout
    // between two writes (the server closes the idle connection; the client reconnects).
    corrector.write(&Scrape::T1.points(t1));
    corrector.write(&Scrape::T2.points(t2));
    std::thread::sleep(Duration::from_millis(1600));
    corrector.write(&Scrape::T3Restart.points(t3));
    let text = corrector.metrics_text();
    assert!(
        metric(
            &text,
            "vllm_corrector_connections_closed_total{reason=\"idle_timeout\"}"
        ) >= 1.0,
        "{text}"
    );
    assert_eq!(
        metric(
            &text,
            "vllm_corrector_samples_rejected_total{reason=\"out_of_order\"}"
        ),
        0.0
    );
}

/// Engine `engine`'s scrape `points` with `pads` labels of 2 000 bytes added to every series, at
/// its own instance.
fn padded(points: &[crate::rw::Point], engine: usize, pads: usize) -> Vec<crate::rw::Point> {
    points
        .iter()
        .map(|p| {
            let mut p = p.clone();
            for (name, value) in &mut p.labels {
                if name == "instance" {
                    *value = format!("pod-{engine}:8000");
                }
            }
            for i in 0..pads {
                p.labels
                    .push((format!("pad_{i:02}"), format!("{i:02}").repeat(1000)));
            }
            p.labels.sort();
            p
        })
        .collect()
}

#[test]
fn a_client_that_stops_reading_metrics_is_disconnected_after_the_response_write_timeout() {
    let corrector = Corrector::start_with_config(Some(
        "engine:\n  settle_scrapes: 0\nlimits:\n  response_write_timeout: 1s\n",
    ));
    // Five engines whose series carry 20 labels of 2 000 bytes: /metrics repeats them on each of
    // its lines, so the page is tens of MB, more than the sockets buffer.
    let [t1, t2, _] = scrape_times();
    for engine in 0..5 {
        for (scrape, t) in [(Scrape::T1, t1), (Scrape::T2, t2)] {
            for chunk in padded(&scrape.points(t), engine, 20).chunks(100) {
                assert_eq!(corrector.post(chunk), 204);
            }
        }
    }
    let page = corrector.metrics_text().len();
    assert!(page > 20_000_000, "page of {page} bytes");
    let mut stream = TcpStream::connect(&corrector.address).unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    // The client reads nothing for 3 s: the server gives up on the response after 1 s.
    std::thread::sleep(Duration::from_secs(3));
    let (_, got) = wait_closed(&mut stream, Duration::from_secs(10));
    assert!(got.len() < page, "read {} of {page} bytes", got.len());
    let text = corrector.metrics_text();
    assert_eq!(
        metric(
            &text,
            "vllm_corrector_connections_closed_total{reason=\"response_write_timeout\"}"
        ),
        1.0
    );
    // Writers and readers that keep up are not affected.
    let [_, _, t3] = scrape_times();
    assert_eq!(corrector.post(&Scrape::T2.points(t3)), 204);
}

#[test]
fn four_clients_that_stop_reading_metrics_do_not_keep_scrapes_out() {
    let corrector = Corrector::start_with_config(Some("engine:\n  settle_scrapes: 0\n"));
    // A page of tens of MB (as above): more than the sockets and the server's buffers take, so a
    // client that reads nothing keeps its response, and its render slot, in flight.
    let [t1, t2, _] = scrape_times();
    for engine in 0..5 {
        for (scrape, t) in [(Scrape::T1, t1), (Scrape::T2, t2)] {
            for chunk in padded(&scrape.points(t), engine, 20).chunks(100) {
                assert_eq!(corrector.post(chunk), 204);
            }
        }
    }
    let page = corrector.metrics_text().len();
    // Four clients take every /metrics slot and stop reading (the write timeout is 1 min).
    let mut stalled: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut stream = TcpStream::connect(&corrector.address).unwrap();
            stream
                .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                .unwrap();
            stream
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1_500));
    // A scrape gets in at once: it takes the slot of the response stalled the longest, which is
    // cut (its connection closed before its page was whole).
    let started = Instant::now();
    let text = corrector.metrics_text();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        metric(
            &text,
            "vllm_corrector_requests_limited_total{limit=\"concurrent_scrapes\"}"
        ),
        0.0
    );
    // One of the four (the one stalled longest; which one depends on the order the server took
    // them in) is cut: closed before its page was whole.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut read = [0usize; 4];
    let mut buf = vec![0u8; 64 * 1024];
    let cut = 'cut: loop {
        assert!(
            Instant::now() < deadline,
            "no stalled response was cut: read {read:?}"
        );
        for (i, stream) in stalled.iter_mut().enumerate() {
            stream
                .set_read_timeout(Some(Duration::from_millis(20)))
                .unwrap();
            loop {
                match stream.read(&mut buf) {
                    Ok(0) => break 'cut i,
                    Ok(n) => read[i] += n,
                    Err(e) if e.kind() == ErrorKind::ConnectionReset => break 'cut i,
                    Err(_) => break,
                }
            }
        }
    };
    assert!(read[cut] < page, "read {} of {page} bytes", read[cut]);
}
