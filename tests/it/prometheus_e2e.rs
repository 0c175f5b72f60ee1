//! End to end with the real Prometheus (2.42 on Debian 12, and 3.5): Prometheus scrapes the fixture exposition
//! served by this test, remote-writes the `vllm:*` series to the corrector in small batches, scrapes
//! the corrector back with `honor_labels: true`, and the corrected values are read through
//! Prometheus's query API and compared with the hand values of EXPECTED.md.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use promtext::ParsedSample;

use crate::expected::{check_group, fixture};
use crate::fixture::{MODEL, Scrape, group_at};
use test_support::prometheus::Prometheus;
use test_support::tools::{Tool, require};

use crate::harness::Corrector;
use crate::metrics::Snapshot;

/// A tiny HTTP server answering every request with the current exposition text.
pub(crate) struct ExpositionServer {
    /// `host:port` it listens on.
    pub address: String,
    body: Arc<Mutex<String>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ExpositionServer {
    /// Serves `body` on a free loopback port until dropped.
    pub(crate) fn start(body: String) -> ExpositionServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind exposition server");
        listener.set_nonblocking(true).unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let body = Arc::new(Mutex::new(body));
        let stop = Arc::new(AtomicBool::new(false));
        let (body_in, stop_in) = (body.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !stop_in.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let text = body_in.lock().unwrap().clone();
                        let _ = serve_one(stream, &text);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        ExpositionServer {
            address,
            body,
            stop,
            thread: Some(thread),
        }
    }

    /// Replaces the exposition text served from now on.
    pub(crate) fn set(&self, text: String) {
        *self.body.lock().unwrap() = text;
    }
}

/// Reads one request's head and answers it with `text` as exposition format 0.0.4.
fn serve_one(stream: TcpStream, text: &str) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    while reader.read_line(&mut line)? > 0 && line != "\r\n" && line != "\n" {
        line.clear();
    }
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    )?;
    stream.flush()
}

impl Drop for ExpositionServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Prometheus scraping `vllm_target` and the corrector, remote-writing the `vllm:*` series to the
/// corrector in requests of at most 50 samples.
fn start_prometheus(binary: &std::path::Path, vllm_target: &str, corrector: &str) -> Prometheus {
    let config = format!(
        r#"global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: vllm
    static_configs:
      - targets: ["{vllm_target}"]
  - job_name: corrector
    honor_labels: true
    static_configs:
      - targets: ["{corrector}"]
remote_write:
  - url: http://{corrector}/api/v1/write
    write_relabel_configs:
      - source_labels: [__name__]
        regex: "vllm:.*"
        action: keep
    queue_config:
      max_samples_per_send: 50
      batch_send_deadline: 1s
"#
    );
    Prometheus::start(binary, &config)
}

/// The newest value of every `vllm_corrected_*` series in `prometheus`, as a snapshot of samples.
fn corrected_series(
    prometheus: &Prometheus,
    client: &reqwest::blocking::Client,
) -> Result<Snapshot, String> {
    let mut response = client
        .get(format!("{}/api/v1/query", prometheus.base))
        .query(&[("query", r#"{__name__=~"vllm_corrected_.*"}"#)])
        .send()
        .map_err(|e| e.to_string())?;
    let mut text = String::new();
    response
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))?;
    let results = json["data"]["result"]
        .as_array()
        .ok_or_else(|| format!("no data.result: {text}"))?;
    let mut samples = Vec::new();
    for r in results {
        let mut name = String::new();
        let mut labels = Vec::new();
        for (k, v) in r["metric"].as_object().ok_or("metric is not an object")? {
            let v = v.as_str().unwrap_or_default().to_string();
            if k == "__name__" {
                name = v
            } else {
                labels.push((k.clone(), v))
            }
        }
        let value = r["value"][1].as_str().ok_or("value is not a string")?;
        let value = value
            .parse::<f64>()
            .map_err(|e| format!("value {value:?}: {e}"))?;
        samples.push(ParsedSample {
            name,
            labels,
            value,
            timestamp_ms: None,
        });
    }
    Ok(Snapshot { text, samples })
}

/// Polls Prometheus until both engines serve the hand values of `scrape`, or panics after `timeout`.
fn wait_for(
    prometheus: &Prometheus,
    corrector: &Corrector,
    instance: &str,
    scrape: Scrape,
    timeout: Duration,
) {
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let deadline = Instant::now() + timeout;
    let mut last = String::from("no query answered yet");
    while Instant::now() < deadline {
        let outcome = corrected_series(prometheus, &client).and_then(|snapshot| {
            ["0", "1"].iter().try_for_each(|engine| {
                let what = format!("{scrape:?} engine {engine}");
                check_group(
                    &snapshot,
                    &group_at(MODEL, engine, instance),
                    &fixture(scrape, engine),
                    &what,
                )
            })
        });
        match outcome {
            Ok(()) => return,
            Err(e) => last = e,
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!(
        "Prometheus did not serve the {scrape:?} hand values within {timeout:?}: {last}\n--- prometheus log ---\n{}\n--- corrector log (tail) ---\n{}",
        prometheus.log_text(),
        corrector
            .log_text()
            .lines()
            .rev()
            .take(60)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The scenario with the Prometheus `tool`.
fn hand_values_through(tool: Tool) {
    let Some(binary) = require(tool) else {
        return;
    };
    let corrector = Corrector::start();
    let server = ExpositionServer::start(Scrape::T1.text());
    let prometheus = start_prometheus(&binary, &server.address, &corrector.address);
    // Prometheus adds job="vllm" and instance=<the exposition server> to every vLLM series; the
    // corrector keeps them and honor_labels keeps them when Prometheus scrapes the corrector.
    wait_for(
        &prometheus,
        &corrector,
        &server.address,
        Scrape::T1,
        Duration::from_secs(90),
    );
    server.set(Scrape::T2.text());
    wait_for(
        &prometheus,
        &corrector,
        &server.address,
        Scrape::T2,
        Duration::from_secs(90),
    );

    // The point of max_samples_per_send: 50 is that every scrape arrived split over requests.
    let per_scrape = Scrape::T1.points(0).len() as f64;
    let writes = corrector.snapshot().value(
        "vllm_corrector_http_requests_total",
        &[("handler", "/api/v1/write"), ("code", "204")],
    );
    assert!(
        writes.is_some_and(|n| n >= (per_scrape / 50.0).ceil()),
        "expected each {per_scrape}-sample scrape split into requests of at most 50 samples, saw {writes:?} accepted writes"
    );
}

#[test]
fn real_prometheus_scrapes_remote_writes_and_reads_back_the_hand_values() {
    hand_values_through(Tool::PROMETHEUS_2);
}

#[test]
fn real_prometheus_3_scrapes_remote_writes_and_reads_back_the_hand_values() {
    hand_values_through(Tool::PROMETHEUS_3);
}
