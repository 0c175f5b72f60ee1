//! Load generator for `scripts/bench-compare.sh`: replays vLLM-shaped remote-write 1.0 requests
//! (`benches/support/vllm_shape.rs`) over HTTP/1.1 keep-alive connections to one receiver on the
//! loopback interface, and reads the receiver's CPU and memory from `/proc/<pid>`.
//!
//! Subcommands (each prints `RESULT key=value …` lines for the script):
//! * `encode`: pre-encodes scrapes of a fleet into a file of snappy bodies (so that the client does
//!   no encoding while it measures).
//! * `bench`: from that file, saturation (N connections back to back, bounded in time and count),
//!   then latency at a given fraction of the measured saturation rate (paced, open loop), both
//!   continuing through the file so timestamps always advance.
//! * `memory`: RSS of a fresh receiver before and after `scrapes` scrapes of a fleet (encoded on the
//!   fly), its CPU per sample over them, and optionally `GET /metrics` timings.
//!
//! The HTTP client ([`client`]) is a minimal hand-written HTTP/1.1 writer and response reader over
//! `std::net::TcpStream`. Only loopback URLs are accepted.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::{Parser, Subcommand};

mod client;
#[path = "../../benches/support/vllm_shape.rs"]
mod vllm_shape;

use client::{Connection, Endpoint};
use vllm_shape::{Payloads, compress};

#[derive(Parser)]
#[command(about = "vLLM-shaped remote-write load generator (loopback only)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Clone)]
struct Fleet {
    /// vLLM pods.
    #[arg(long, default_value_t = 16)]
    pods: usize,
    /// Data-parallel engines per pod.
    #[arg(long, default_value_t = 2)]
    engines: usize,
    /// Remote-write shards (queues) that cut the requests.
    #[arg(long, default_value_t = 4)]
    shards: usize,
    /// Scrape interval of the timestamps, ms.
    #[arg(long, default_value_t = 1000)]
    step_ms: i64,
}

#[derive(Subcommand)]
enum Command {
    /// Pre-encodes `scrapes` scrapes into `out`.
    Encode {
        #[command(flatten)]
        fleet: Fleet,
        /// Scrapes to encode.
        #[arg(long)]
        scrapes: u64,
        /// Output file: per request, u32 LE sample count, u32 LE length, snappy body.
        #[arg(long)]
        out: PathBuf,
    },
    /// Saturation, then latency at `--latency-fraction` of saturation, from a pre-encoded file.
    Bench {
        /// Receiver write URL, e.g. `http://127.0.0.1:9490/api/v1/write`.
        #[arg(long)]
        url: String,
        /// Receiver process id (for `/proc/<pid>/stat`).
        #[arg(long)]
        pid: u32,
        /// File written by `encode`.
        #[arg(long)]
        file: PathBuf,
        /// Concurrent connections.
        #[arg(long, default_value_t = 4)]
        connections: usize,
        /// Longest saturation phase, seconds.
        #[arg(long, default_value_t = 8.0)]
        saturate_secs: f64,
        /// Longest latency phase, seconds.
        #[arg(long, default_value_t = 8.0)]
        latency_secs: f64,
        /// Request rate of the latency phase as a fraction of the saturation rate.
        #[arg(long, default_value_t = 0.5)]
        latency_fraction: f64,
        /// Kernel clock ticks per second (`getconf CLK_TCK`).
        #[arg(long, default_value_t = 100)]
        clk_tck: u64,
        /// Name printed in the results.
        #[arg(long)]
        target: String,
    },
    /// RSS per series after warm-up, and CPU per sample during it.
    Memory {
        #[command(flatten)]
        fleet: Fleet,
        /// Receiver write URL.
        #[arg(long)]
        url: String,
        /// Receiver process id.
        #[arg(long)]
        pid: u32,
        /// Warm-up scrapes (every series gets one sample per scrape).
        #[arg(long, default_value_t = 20)]
        scrapes: u64,
        /// Concurrent connections.
        #[arg(long, default_value_t = 4)]
        connections: usize,
        /// Kernel clock ticks per second (`getconf CLK_TCK`).
        #[arg(long, default_value_t = 100)]
        clk_tck: u64,
        /// Optional `/metrics` URL to time after the warm-up.
        #[arg(long)]
        metrics_url: Option<String>,
        /// Name printed in the results.
        #[arg(long)]
        target: String,
    },
}

fn main() {
    match Cli::parse().command {
        Command::Encode {
            fleet,
            scrapes,
            out,
        } => encode(&fleet, scrapes, &out),
        Command::Bench {
            url,
            pid,
            file,
            connections,
            saturate_secs,
            latency_secs,
            latency_fraction,
            clk_tck,
            target,
        } => {
            let endpoint = Endpoint::parse(&url);
            let batches = read_batches(&file);
            bench(
                &endpoint,
                pid,
                &batches,
                connections,
                saturate_secs,
                latency_secs,
                latency_fraction,
                clk_tck,
                &target,
            );
        }
        Command::Memory {
            fleet,
            url,
            pid,
            scrapes,
            connections,
            clk_tck,
            metrics_url,
            target,
        } => memory(
            &fleet,
            &Endpoint::parse(&url),
            pid,
            scrapes,
            connections,
            clk_tck,
            metrics_url.as_deref(),
            &target,
        ),
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}

/// Timestamps end at the current time, so every receiver accepts them as recent.
fn payloads(fleet: &Fleet, scrapes: u64) -> Payloads {
    let t0 = now_ms() - (scrapes as i64 + 1) * fleet.step_ms;
    Payloads::new(fleet.pods, fleet.engines, fleet.shards, t0, fleet.step_ms)
}

fn encode(fleet: &Fleet, scrapes: u64, out: &PathBuf) {
    let p = payloads(fleet, scrapes);
    let rule_inputs = p
        .templates
        .iter()
        .filter(|t| vllm_shape::is_rule_input(t))
        .count();
    let mut file =
        std::io::BufWriter::new(std::fs::File::create(out).expect("create the batch file"));
    let (mut requests, mut samples, mut raw_bytes, mut bytes) = (0u64, 0u64, 0u64, 0u64);
    p.for_each_request(1, scrapes, |raw, n| {
        let body = compress(raw);
        file.write_all(&(n as u32).to_le_bytes()).unwrap();
        file.write_all(&(body.len() as u32).to_le_bytes()).unwrap();
        file.write_all(&body).unwrap();
        requests += 1;
        samples += n as u64;
        raw_bytes += raw.len() as u64;
        bytes += body.len() as u64;
    });
    file.flush().unwrap();
    println!(
        "RESULT phase=encode series={} rule_input_series={rule_inputs} scrapes={scrapes} requests={requests} samples={samples} raw_bytes_per_sample={:.1} snappy_bytes_per_sample={:.1}",
        p.series(),
        raw_bytes as f64 / samples as f64,
        bytes as f64 / samples as f64
    );
}

/// One request: its sample count and snappy body.
type Batch = (u32, Vec<u8>);

fn read_batches(path: &PathBuf) -> Vec<Batch> {
    let data = std::fs::read(path).expect("read the batch file");
    let mut out = Vec::new();
    let mut at = 0;
    while at + 8 <= data.len() {
        let n = u32::from_le_bytes(data[at..at + 4].try_into().unwrap());
        let len = u32::from_le_bytes(data[at + 4..at + 8].try_into().unwrap()) as usize;
        out.push((n, data[at + 8..at + 8 + len].to_vec()));
        at += 8 + len;
    }
    out
}

/// utime + stime of `pid`, seconds (`/proc/<pid>/stat` fields 14 and 15).
fn cpu_seconds(pid: u32, clk_tck: u64) -> f64 {
    let stat =
        std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the receiver is running");
    // Fields after the parenthesised command name, which may contain spaces.
    let rest = &stat[stat.rfind(')').expect("a stat line") + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 / clk_tck as f64
}

/// VmRSS of `pid`, bytes.
fn rss_bytes(pid: u32) -> u64 {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the receiver is running");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("a VmRSS line");
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 1024
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// What one phase did.
struct Phase {
    requests: u64,
    samples: u64,
    errors: u64,
    secs: f64,
    cpu: f64,
    /// Latencies in ms, from the actual send and from the scheduled send (paced phases).
    latencies: Vec<f64>,
    scheduled: Vec<f64>,
}

/// Sends `batches[next..end]` over `connections` connections, in order, until they run out or
/// `limit` passes. `rate` (requests/s) paces the sends when given.
#[allow(clippy::too_many_arguments)]
fn run_phase(
    endpoint: &Endpoint,
    pid: u32,
    clk_tck: u64,
    batches: &Arc<Vec<Batch>>,
    next: &Arc<AtomicUsize>,
    end: usize,
    connections: usize,
    limit: Duration,
    rate: Option<f64>,
) -> Phase {
    let stop = Arc::new(AtomicBool::new(false));
    let samples = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let first = next.load(Ordering::SeqCst);
    let cpu0 = cpu_seconds(pid, clk_tck);
    let start = Instant::now();
    let handles: Vec<_> = (0..connections)
        .map(|_| {
            let (endpoint, batches, next, stop, samples, errors) = (
                endpoint.clone(),
                batches.clone(),
                next.clone(),
                stop.clone(),
                samples.clone(),
                errors.clone(),
            );
            std::thread::spawn(move || {
                let mut conn = Connection::open(&endpoint);
                let (mut lat, mut sched) = (Vec::new(), Vec::new());
                while !stop.load(Ordering::Relaxed) && start.elapsed() < limit {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some((n, body)) = batches.get(i).filter(|_| i < end) else {
                        break;
                    };
                    let due = rate.map(|r| start + Duration::from_secs_f64((i - first) as f64 / r));
                    if let Some(due) = due
                        && let Some(wait) = due.checked_duration_since(Instant::now())
                    {
                        std::thread::sleep(wait);
                    }
                    let sent = Instant::now();
                    let status = conn.write(body);
                    let done = Instant::now();
                    lat.push((done - sent).as_secs_f64() * 1e3);
                    sched.push((done - due.unwrap_or(sent)).as_secs_f64() * 1e3);
                    if (200..300).contains(&status) {
                        samples.fetch_add(u64::from(*n), Ordering::Relaxed);
                    } else {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
                (lat, sched)
            })
        })
        .collect();
    let (mut latencies, mut scheduled) = (Vec::new(), Vec::new());
    for h in handles {
        let (l, s) = h.join().expect("a connection thread");
        latencies.extend(l);
        scheduled.extend(s);
    }
    stop.store(true, Ordering::Relaxed);
    let secs = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds(pid, clk_tck) - cpu0;
    latencies.sort_by(f64::total_cmp);
    scheduled.sort_by(f64::total_cmp);
    Phase {
        requests: latencies.len() as u64,
        samples: samples.load(Ordering::Relaxed),
        errors: errors.load(Ordering::Relaxed),
        secs,
        cpu,
        latencies,
        scheduled,
    }
}

fn print_phase(target: &str, phase: &str, p: &Phase, extra: &str) {
    println!(
        "RESULT target={target} phase={phase} requests={} samples={} errors={} secs={:.3} samples_per_s={:.0} cpu_s={:.3} cpu_ns_per_sample={:.1} cores={:.2} p50_ms={:.3} p99_ms={:.3} p99_sched_ms={:.3} max_ms={:.3}{extra}",
        p.requests,
        p.samples,
        p.errors,
        p.secs,
        p.samples as f64 / p.secs,
        p.cpu,
        p.cpu * 1e9 / p.samples.max(1) as f64,
        p.cpu / p.secs,
        percentile(&p.latencies, 0.5),
        percentile(&p.latencies, 0.99),
        percentile(&p.scheduled, 0.99),
        p.latencies.last().copied().unwrap_or(f64::NAN),
    );
}

#[allow(clippy::too_many_arguments)]
fn bench(
    endpoint: &Endpoint,
    pid: u32,
    batches: &[Batch],
    connections: usize,
    saturate_secs: f64,
    latency_secs: f64,
    latency_fraction: f64,
    clk_tck: u64,
    target: &str,
) {
    let batches = Arc::new(batches.to_vec());
    let next = Arc::new(AtomicUsize::new(0));
    let per_request = batches.iter().map(|b| b.0 as f64).sum::<f64>() / batches.len() as f64;
    // Saturation may use the first 60 % of the file; latency gets the rest.
    let saturation = run_phase(
        endpoint,
        pid,
        clk_tck,
        &batches,
        &next,
        batches.len() * 3 / 5,
        connections,
        Duration::from_secs_f64(saturate_secs),
        None,
    );
    print_phase(
        target,
        "saturate",
        &saturation,
        &format!(" connections={connections}"),
    );
    let rate = saturation.samples as f64 / saturation.secs * latency_fraction / per_request;
    let latency = run_phase(
        endpoint,
        pid,
        clk_tck,
        &batches,
        &next,
        batches.len(),
        connections,
        Duration::from_secs_f64(latency_secs),
        Some(rate),
    );
    print_phase(
        target,
        "latency",
        &latency,
        &format!(" connections={connections} target_requests_per_s={rate:.1}"),
    );
    for (name, phase, limit) in [
        ("saturate", &saturation, saturate_secs),
        ("latency", &latency, latency_secs),
    ] {
        if phase.secs < limit * 0.95 {
            println!(
                "NOTE target={target}: the {name} phase ran out of batches after {:.1} s (encode more scrapes)",
                phase.secs
            );
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn memory(
    fleet: &Fleet,
    endpoint: &Endpoint,
    pid: u32,
    scrapes: u64,
    connections: usize,
    clk_tck: u64,
    metrics_url: Option<&str>,
    target: &str,
) {
    let p = Arc::new(payloads(fleet, scrapes));
    let rule_inputs = p
        .templates
        .iter()
        .filter(|t| vllm_shape::is_rule_input(t))
        .count();
    let empty_rss = rss_bytes(pid);
    // Encode on the fly in one producer thread; connections take bodies from a bounded channel.
    let (tx, rx) = mpsc::sync_channel::<Batch>(256);
    let producer = {
        let p = p.clone();
        std::thread::spawn(move || {
            p.for_each_request(1, scrapes, |raw, n| {
                tx.send((n as u32, compress(raw)))
                    .expect("the senders are running");
            })
        })
    };
    let rx = Arc::new(Mutex::new(rx));
    let cpu0 = cpu_seconds(pid, clk_tck);
    let start = Instant::now();
    let senders: Vec<_> = (0..connections)
        .map(|_| {
            let (rx, endpoint) = (rx.clone(), endpoint.clone());
            std::thread::spawn(move || {
                let mut conn = Connection::open(&endpoint);
                let (mut samples, mut errors) = (0u64, 0u64);
                loop {
                    let next = rx.lock().unwrap().recv();
                    let Ok((n, body)) = next else { break };
                    if (200..300).contains(&conn.write(&body)) {
                        samples += u64::from(n);
                    } else {
                        errors += 1;
                    }
                }
                (samples, errors)
            })
        })
        .collect();
    producer.join().expect("the producer");
    let (mut samples, mut errors) = (0, 0);
    for s in senders {
        let (a, b) = s.join().expect("a sender");
        samples += a;
        errors += b;
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds(pid, clk_tck) - cpu0;
    // Let background work (GC, compaction of in-memory parts) settle, then read the resident set.
    std::thread::sleep(Duration::from_secs(3));
    let rss = rss_bytes(pid);
    let series = p.series();
    let grown = rss.saturating_sub(empty_rss) as f64;
    let mut extra = String::new();
    if let Some(url) = metrics_url {
        let mut conn = Connection::open(&Endpoint::parse(url));
        let mut times = Vec::new();
        let mut lines = 0;
        let mut bytes = 0;
        for _ in 0..20 {
            let start = Instant::now();
            let (status, body) = conn.get();
            times.push(start.elapsed().as_secs_f64() * 1e3);
            assert_eq!(status, 200, "GET /metrics");
            bytes = body.len();
            lines = body
                .split(|b| *b == b'\n')
                .filter(|l| l.starts_with(b"vllm_corrected_"))
                .count();
        }
        times.sort_by(f64::total_cmp);
        extra = format!(
            " metrics_derived_series={lines} metrics_bytes={bytes} metrics_p50_ms={:.2} metrics_max_ms={:.2}",
            percentile(&times, 0.5),
            times.last().unwrap()
        );
    }
    println!(
        "RESULT target={target} phase=memory series={series} rule_input_series={rule_inputs} scrapes={scrapes} samples={samples} errors={errors} secs={secs:.2} cpu_s={cpu:.3} cpu_ns_per_sample={:.1} empty_rss_mb={:.1} rss_mb={:.1} bytes_per_series={:.1} bytes_per_rule_input_series={:.1}{extra}",
        cpu * 1e9 / samples.max(1) as f64,
        empty_rss as f64 / 1048576.0,
        rss as f64 / 1048576.0,
        grown / series as f64,
        grown / rule_inputs as f64,
    );
}
