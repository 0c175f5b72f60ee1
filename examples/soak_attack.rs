//! Hostile load for `SOAK_PROFILE=attack scripts/soak.sh`: everything a sender or a client can
//! make grow, at once, against one loopback receiver, for a fixed time, beside one well-behaved
//! vLLM engine whose writes must keep succeeding. docs/TESTING.md, "Soak".
//!
//! Attacks (each on its own threads):
//! * **churn**: short-lived vLLM engines (the simulator's 0.33 template with speculative
//!   decoding, `engine="c<n>"`), each sent four scrapes 15 s apart in sample time, then a
//!   staleness marker on every series: groups are created, serve, retire and are never seen again;
//! * **label-heavy**: new groups whose series carry 60 extra labels of 2 000-byte values (within
//!   the default label limits), so each new series costs about 120 KB of labels;
//! * **unused flood**: RW 2.0 requests of 5 000 series no rule reads, each with a unique label
//!   value;
//! * **slow bodies**: 16 connections announcing 8 MiB bodies that send 2 bytes a second;
//! * **slow readers**: 8 connections that ask for `/metrics`, `/api/v1/groups` and `/status` and
//!   read 1 KiB a second.
//!
//! The well-behaved engine is sent whole every second, stamped with the wall clock. Prints one
//! `RESULT key=value …` line at the end: requests per attack by outcome, and the well-behaved
//! engine's writes by outcome. Only loopback addresses are accepted.
//!
//! ```text
//! cargo run --release --example soak_attack -- --addr 127.0.0.1:19710 --duration 2m
//! ```

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use protocol::encode::{SeriesSpec, compress, request_v2, write_request_v1};
use protocol::{STALE_NAN_BITS, Sample};
use sim::{SimConfig, Simulator, SpecConfig};

#[derive(Parser)]
#[command(about = "Hostile remote-write and client load for the soak test (loopback only)")]
struct Args {
    /// Receiver address on the loopback interface.
    #[arg(long)]
    addr: SocketAddr,
    /// How long to attack.
    #[arg(long, value_parser = humantime::parse_duration)]
    duration: Duration,
    /// The attacks to run, comma-separated (default: all): churn, label_heavy, unused_flood,
    /// slow_bodies, slow_readers.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Answers of one kind of request: 2xx, 4xx, 5xx, transport errors.
#[derive(Default)]
struct Tally([AtomicU64; 4]);

impl Tally {
    fn record(&self, outcome: Result<u16, reqwest::Error>) {
        let i = match outcome {
            Ok(200..=299) => 0,
            Ok(400..=499) => 1,
            Ok(_) => 2,
            Err(_) => 3,
        };
        self.0[i].fetch_add(1, Ordering::Relaxed);
    }

    fn show(&self, name: &str) -> String {
        let [ok, c, s, t] = &self.0;
        format!(
            "{name}_2xx={} {name}_4xx={} {name}_5xx={} {name}_transport={}",
            ok.load(Ordering::Relaxed),
            c.load(Ordering::Relaxed),
            s.load(Ordering::Relaxed),
            t.load(Ordering::Relaxed)
        )
    }
}

/// The template engine's series: `(name, labels without __name__, value, cumulative)`.
type Template = Vec<(String, Vec<(String, String)>, f64, bool)>;

fn template() -> Result<Template, String> {
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
    let snapshot = sim.snapshot();
    Ok(snapshot
        .samples()
        .map(|s| {
            let grows = ["_total", "_bucket", "_sum", "_count"]
                .iter()
                .any(|suffix| s.name.ends_with(suffix));
            (s.name.clone(), s.labels.clone(), s.value, grows)
        })
        .collect())
}

/// One scrape of the template as engine `engine` of `model`, scrape `n` (values × (n + 1)), or
/// staleness markers when `n` is `None`, at `ts`, with `extra` labels.
fn scrape(
    template: &Template,
    model: &str,
    engine: &str,
    extra: &[(String, String)],
    n: Option<u64>,
    ts: i64,
) -> Vec<SeriesSpec> {
    template
        .iter()
        .map(|(name, labels, value, grows)| {
            let mut all = vec![("__name__".to_owned(), name.clone())];
            for (k, v) in labels {
                let v = match k.as_str() {
                    "model_name" => model.to_owned(),
                    "engine" => engine.to_owned(),
                    _ => v.clone(),
                };
                all.push((k.clone(), v));
            }
            all.extend(extra.iter().cloned());
            all.sort();
            let value = match n {
                None => f64::from_bits(STALE_NAN_BITS),
                Some(n) if *grows => value * (n + 1) as f64,
                Some(_) => *value,
            };
            (
                all,
                vec![Sample {
                    value,
                    timestamp_ms: ts,
                }],
            )
        })
        .collect()
}

fn post_v1(
    client: &reqwest::blocking::Client,
    url: &str,
    series: &[SeriesSpec],
) -> Result<u16, reqwest::Error> {
    let body = compress(&prost::Message::encode_to_vec(&write_request_v1(
        series,
        &[],
    )));
    client
        .post(url)
        .header("Content-Type", "application/x-protobuf")
        .header("Content-Encoding", "snappy")
        .header("X-Prometheus-Remote-Write-Version", "0.1.0")
        .body(body)
        .send()
        .map(|r| r.status().as_u16())
}

fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("HTTP client")
}

/// Short-lived engines: four scrapes, then markers; a new engine label each time.
fn churn(url: &str, template: &Template, thread: u64, stop: &AtomicBool, tally: &Tally) {
    let client = client();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let engine = format!("c{thread}-{n}");
        n += 1;
        let t0 = now_ms() - 60_000;
        for k in 0..4u64 {
            let series = scrape(
                template,
                "churn",
                &engine,
                &[],
                Some(k),
                t0 + 15_000 * k as i64,
            );
            tally.record(post_v1(&client, url, &series));
        }
        let markers = scrape(template, "churn", &engine, &[], None, t0 + 60_000);
        tally.record(post_v1(&client, url, &markers));
    }
}

/// New groups whose few series carry 60 labels of 2 000 bytes each.
fn label_heavy(url: &str, stop: &AtomicBool, tally: &Tally) {
    let client = client();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let extra: Vec<(String, String)> = (0..60)
            .map(|i| (format!("pad{i:02}"), format!("{n:0>2000}")))
            .collect();
        let ts = now_ms();
        let series: Vec<SeriesSpec> = [
            "vllm:generation_tokens_total",
            "vllm:iteration_tokens_total_count",
        ]
        .iter()
        .map(|name| {
            let mut labels = vec![
                ("__name__".to_owned(), (*name).to_owned()),
                ("engine".to_owned(), "0".to_owned()),
                ("model_name".to_owned(), format!("heavy-{n}")),
            ];
            labels.extend(extra.iter().cloned());
            labels.sort();
            (
                labels,
                vec![Sample {
                    value: 1.0,
                    timestamp_ms: ts,
                }],
            )
        })
        .collect();
        tally.record(post_v1(&client, url, &series));
    }
}

/// RW 2.0 requests of 5 000 series no rule reads, unique label values.
fn unused_flood(url: &str, stop: &AtomicBool, tally: &Tally) {
    let client = client();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let ts = now_ms();
        let series: Vec<SeriesSpec> = (0..5_000)
            .map(|_| {
                n += 1;
                (
                    vec![
                        ("__name__".to_owned(), "attack_unused_total".to_owned()),
                        ("id".to_owned(), n.to_string()),
                    ],
                    vec![Sample {
                        value: 1.0,
                        timestamp_ms: ts,
                    }],
                )
            })
            .collect();
        let body = compress(&prost::Message::encode_to_vec(&request_v2(&series)));
        let outcome = client
            .post(url)
            .header(
                "Content-Type",
                "application/x-protobuf;proto=io.prometheus.write.v2.Request",
            )
            .header("Content-Encoding", "snappy")
            .header("X-Prometheus-Remote-Write-Version", "2.0.0")
            .body(body)
            .send()
            .map(|r| r.status().as_u16());
        tally.record(outcome);
    }
}

/// `count` connections, each sending `head` then trickling: a slow body (`trickle` bytes a
/// second) or a slow reader (reading `trickle` bytes a second). Reconnects when closed.
fn trickle(
    addr: SocketAddr,
    heads: &[String],
    count: usize,
    body: bool,
    stop: &AtomicBool,
    opened: &AtomicU64,
) {
    let mut conns: Vec<Option<TcpStream>> = (0..count).map(|_| None).collect();
    let mut buf = [0u8; 1024];
    let mut i = 0usize;
    while !stop.load(Ordering::Relaxed) {
        for slot in &mut conns {
            if slot.is_none()
                && let Ok(mut s) = TcpStream::connect(addr)
            {
                let _ = s.set_read_timeout(Some(Duration::from_millis(50)));
                let _ = s.set_write_timeout(Some(Duration::from_millis(50)));
                i += 1;
                if s.write_all(heads[i % heads.len()].as_bytes()).is_ok() {
                    opened.fetch_add(1, Ordering::Relaxed);
                    *slot = Some(s);
                }
            }
            let alive = match slot.as_mut() {
                Some(s) if body => s.write_all(b"\0\0").is_ok(),
                Some(s) => match s.read(&mut buf) {
                    Ok(0) => false,
                    Ok(_) => true,
                    Err(e) => matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ),
                },
                None => true,
            };
            if !alive {
                *slot = None;
            }
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn main() -> Result<(), String> {
    let args = Args::parse();
    if !args.addr.ip().is_loopback() {
        return Err(format!(
            "{}: only loopback addresses are accepted",
            args.addr
        ));
    }
    let url = format!("http://{}/api/v1/write", args.addr);
    let template = Arc::new(template()?);
    let stop = Arc::new(AtomicBool::new(false));
    let tallies: Arc<[Tally; 4]> = Arc::new(Default::default());
    let opened: Arc<[AtomicU64; 2]> = Arc::new(Default::default());
    let mut threads = Vec::new();
    let on = |name: &str| args.only.is_empty() || args.only.iter().any(|o| o == name);
    for thread in (0..2u64).filter(|_| on("churn")) {
        let (url, template, stop, tallies) =
            (url.clone(), template.clone(), stop.clone(), tallies.clone());
        threads.push(std::thread::spawn(move || {
            churn(&url, &template, thread, &stop, &tallies[0])
        }));
    }
    if on("label_heavy") {
        let (url, stop, tallies) = (url.clone(), stop.clone(), tallies.clone());
        threads.push(std::thread::spawn(move || {
            label_heavy(&url, &stop, &tallies[1])
        }));
    }
    if on("unused_flood") {
        let (url, stop, tallies) = (url.clone(), stop.clone(), tallies.clone());
        threads.push(std::thread::spawn(move || {
            unused_flood(&url, &stop, &tallies[2])
        }));
    }
    let host = args.addr;
    let slow_body = vec![format!(
        "POST /api/v1/write HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/x-protobuf\r\n\
         Content-Encoding: snappy\r\nX-Prometheus-Remote-Write-Version: 0.1.0\r\n\
         Content-Length: 8388608\r\n\r\n"
    )];
    let readers: Vec<String> = ["/metrics", "/api/v1/groups", "/status"]
        .iter()
        .map(|path| format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n"))
        .collect();
    if on("slow_bodies") {
        let (stop, opened) = (stop.clone(), opened.clone());
        threads.push(std::thread::spawn(move || {
            trickle(host, &slow_body, 16, true, &stop, &opened[0])
        }));
    }
    if on("slow_readers") {
        let (stop, opened) = (stop.clone(), opened.clone());
        threads.push(std::thread::spawn(move || {
            trickle(host, &readers, 8, false, &stop, &opened[1])
        }));
    }

    // The well-behaved engine: one scrape a second, which must keep being accepted.
    let client = client();
    let start = Instant::now();
    let mut k = 0u64;
    while start.elapsed() < args.duration {
        let series = scrape(&template, "steady", "0", &[], Some(k), now_ms());
        tallies[3].record(post_v1(&client, &url, &series));
        k += 1;
        std::thread::sleep(Duration::from_secs(1));
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    println!(
        "RESULT seconds={:.0} {} {} {} {} slow_bodies_opened={} slow_readers_opened={}",
        start.elapsed().as_secs_f64(),
        tallies[0].show("churn"),
        tallies[1].show("label_heavy"),
        tallies[2].show("unused_flood"),
        tallies[3].show("steady"),
        opened[0].load(Ordering::Relaxed),
        opened[1].load(Ordering::Relaxed)
    );
    Ok(())
}
