//! Bounded, paced remote-write load for `scripts/soak.sh`: a fixed fleet of vLLM engines whose
//! series come from the simulator (`sim`, profile 0.33, speculative decoding on),
//! sent as RW 1.0 at a steady sample rate to one loopback receiver, for a fixed time.
//!
//! One engine is simulated for 120 s once; its snapshot is the template of every engine (labels
//! `model_name="soak-<i/8>"`, `engine="<i%8>"`, `instance="pod-<i/8>:8000"`, `job="vllm"`). Every
//! scrape interval each engine is sent whole, stamped with the wall clock, in requests of at most
//! `--max-samples-per-send` series (as Prometheus cuts them). Cumulative series (`_total`,
//! `_bucket`, `_sum`, `_count`) are the template's values × (scrape number + 1), so counters only
//! grow, buckets stay cumulative and every frame is complete: the rules compute on every scrape.
//! The fleet size is `rate × scrape interval / series per engine`, fixed for the run, so the
//! cardinality is constant and RSS must be flat.
//!
//! Prints one `RESULT key=value …` line at the end. Only loopback URLs are accepted; the run stops
//! by itself after `--duration`.
//!
//! ```text
//! cargo run --release --example soak_load -- --url http://127.0.0.1:19710/api/v1/write \
//!     --rate 50000 --duration 2m
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use protocol::encode::{SeriesSpec, compress, write_request_v1};
use protocol::prompb::v1::WriteRequest;
use sim::remote_write::metadata_request;
use sim::{SimConfig, Simulator, SpecConfig};

#[derive(Parser)]
#[command(about = "Paced vLLM-shaped remote-write load for the soak test (loopback only)")]
struct Args {
    /// Receiver write URL on the loopback interface.
    #[arg(long)]
    url: String,
    /// Samples per second to send.
    #[arg(long)]
    rate: f64,
    /// How long to send.
    #[arg(long, value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Time between two scrapes of the whole fleet (sets the fleet size with --rate).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "1s")]
    scrape_interval: Duration,
    /// Concurrent connections.
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// Series per request.
    #[arg(long, default_value_t = 500)]
    max_samples_per_send: usize,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn cumulative(name: &str) -> bool {
    ["_total", "_bucket", "_sum", "_count"]
        .iter()
        .any(|suffix| name.ends_with(suffix))
}

/// Outcome counters shared by the sender threads.
#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    client_error: AtomicU64,
    server_error: AtomicU64,
    transport_error: AtomicU64,
}

fn main() -> Result<(), String> {
    let args = Args::parse();
    let loopback = ["http://127.0.0.1:", "http://localhost:", "http://[::1]:"];
    if !loopback.iter().any(|prefix| args.url.starts_with(prefix)) {
        return Err(format!("{}: only loopback URLs are accepted", args.url));
    }
    if args.rate.is_nan() || args.rate <= 0.0 {
        return Err("--rate must be positive".into());
    }

    // The template engine.
    let mut sim = Simulator::new(SimConfig {
        spec: Some(SpecConfig {
            num_speculative_tokens: 2,
            acceptance_prob: 0.7,
            no_draft_fraction: 0.1,
        }),
        ..SimConfig::default()
    })
    .map_err(|e| e.to_string())?;
    sim.advance_to(120.0);
    let template = sim.snapshot();
    let per_engine = template.samples().count();
    let engines = ((args.rate * args.scrape_interval.as_secs_f64()) / per_engine as f64)
        .round()
        .max(1.0) as usize;
    let per_scrape = engines * per_engine;
    let interval = Duration::from_secs_f64(per_scrape as f64 / args.rate);

    // Every engine's series, cut into requests once; each scrape rewrites the sample in place.
    let mut series: Vec<SeriesSpec> = Vec::with_capacity(per_scrape);
    let mut base: Vec<(f64, bool)> = Vec::with_capacity(per_scrape);
    for i in 0..engines {
        let model = format!("soak-{}", i / 8);
        let engine = (i % 8).to_string();
        let instance = format!("pod-{}:8000", i / 8);
        for s in template.samples() {
            let mut labels = vec![("__name__".to_owned(), s.name.clone())];
            for (k, v) in &s.labels {
                let v = match k.as_str() {
                    "model_name" => model.clone(),
                    "engine" => engine.clone(),
                    _ => v.clone(),
                };
                labels.push((k.clone(), v));
            }
            labels.push(("instance".to_owned(), instance.clone()));
            labels.push(("job".to_owned(), "vllm".to_owned()));
            labels.sort();
            series.push((labels, Vec::new()));
            base.push((s.value, cumulative(&s.name)));
        }
    }
    let mut requests: Vec<WriteRequest> = series
        .chunks(args.max_samples_per_send.max(1))
        .map(|chunk| write_request_v1(chunk, &[]))
        .collect();
    for request in &mut requests {
        for ts in &mut request.timeseries {
            ts.samples.push(Default::default());
        }
    }
    drop(series);
    println!(
        "PLAN engines={engines} series_per_engine={per_engine} samples_per_scrape={per_scrape} \
         requests_per_scrape={} scrape_interval_s={:.3} rate={} duration_s={} connections={}",
        requests.len(),
        interval.as_secs_f64(),
        args.rate,
        args.duration.as_secs(),
        args.connections
    );

    let tally = Arc::new(Tally::default());
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(args.connections * 2);
    let rx = Arc::new(std::sync::Mutex::new(rx));
    let mut workers = Vec::new();
    for _ in 0..args.connections.max(1) {
        let (rx, tally, url) = (rx.clone(), tally.clone(), args.url.clone());
        workers.push(std::thread::spawn(move || {
            let client = reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .expect("HTTP client");
            loop {
                let body = match rx.lock().map(|r| r.recv()) {
                    Ok(Ok(body)) => body,
                    _ => return,
                };
                let outcome = client
                    .post(&url)
                    .header("Content-Type", "application/x-protobuf")
                    .header("Content-Encoding", "snappy")
                    .header("X-Prometheus-Remote-Write-Version", "0.1.0")
                    .body(body)
                    .send();
                let counter = match outcome.map(|r| r.status().as_u16()) {
                    Ok(200..=299) => &tally.ok,
                    Ok(400..=499) => &tally.client_error,
                    Ok(_) => &tally.server_error,
                    Err(_) => &tally.transport_error,
                };
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }

    let metadata = compress(&prost::Message::encode_to_vec(&metadata_request(&template)));
    tx.send(metadata).map_err(|e| e.to_string())?;
    let start = Instant::now();
    let mut scrapes = 0u64;
    let mut sent_samples = 0u64;
    let mut max_lag = Duration::ZERO;
    while start.elapsed() < args.duration {
        let due = start + interval.mul_f64(scrapes as f64);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        } else {
            max_lag = max_lag.max(now - due);
        }
        let timestamp = now_ms();
        let factor = (scrapes + 1) as f64;
        let mut k = 0;
        for request in &mut requests {
            for ts in &mut request.timeseries {
                let (value, grows) = base[k];
                k += 1;
                ts.samples[0].value = if grows { value * factor } else { value };
                ts.samples[0].timestamp = timestamp;
            }
            let body = compress(&prost::Message::encode_to_vec(&*request));
            // Blocks when every connection is busy: the receiver sets the pace, lag shows it.
            tx.send(body).map_err(|e| e.to_string())?;
        }
        sent_samples += per_scrape as u64;
        scrapes += 1;
    }
    drop(tx);
    for worker in workers {
        let _ = worker.join();
    }
    let seconds = start.elapsed().as_secs_f64();
    println!(
        "RESULT scrapes={scrapes} samples={sent_samples} seconds={seconds:.1} \
         samples_per_second={:.0} ok={} client_errors={} server_errors={} transport_errors={} \
         max_lag_ms={}",
        sent_samples as f64 / seconds,
        tally.ok.load(Ordering::Relaxed),
        tally.client_error.load(Ordering::Relaxed),
        tally.server_error.load(Ordering::Relaxed),
        tally.transport_error.load(Ordering::Relaxed),
        max_lag.as_millis()
    );
    Ok(())
}
