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
//!   read 1 KiB a second;
//! * **metadata bomb**: RW 1.0 requests of one `MetricMetadata` each, for every family name the
//!   metadata cache keeps (each read name and its base), with a 7.5 MiB help text;
//! * **lone flood**: lone `vllm:generation_tokens_total` series of a misconfigured job (groups that
//!   can feed no family): 135 000 re-sent every 15 s, and 5 000 new ones each second;
//! * **late engines**: during the flood, every 2 minutes from the first, a new complete vLLM
//!   engine (`model_name="a-late-<n>"`, so it is the first group of `/api/v1/groups`) starts,
//!   sends six scrapes 10 s apart, then staleness markers; for each, the scrape whose write was
//!   first accepted whole (2xx) and the first at which `/api/v1/groups` shows it served.
//!
//! The well-behaved engine is sent whole every second, stamped with the wall clock. Prints one
//! `RESULT key=value …` line at the end: requests per attack by outcome, the well-behaved
//! engine's writes by outcome, and per late engine `late<n>=<accepted at scrape>/<served at
//! scrape>/<ms to acceptance>` (scrapes from 1; 0 when never). Only loopback addresses are
//! accepted.
//!
//! ```text
//! cargo run --release --example soak_attack -- --addr 127.0.0.1:19710 --duration 2m
//! ```

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use protocol::encode::{SeriesSpec, compress, request_v2, write_request_v1};
use protocol::{MetadataRef, MetricType, STALE_NAN_BITS, Sample};
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
    /// slow_bodies, slow_readers, metadata_bomb, lone_flood, late_engines.
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
    post_v1_with(client, url, series, &[])
}

fn post_v1_with(
    client: &reqwest::blocking::Client,
    url: &str,
    series: &[SeriesSpec],
    metadata: &[MetadataRef<'_>],
) -> Result<u16, reqwest::Error> {
    let body = compress(&prost::Message::encode_to_vec(&write_request_v1(
        series, metadata,
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

/// RW 1.0 metadata of 7.5 MiB help texts (and a 512-byte unit) for every name the metadata
/// cache keeps: each read name and its base (without `_total`, `_bucket`, `_sum`, `_count`).
fn metadata_bomb(url: &str, stop: &AtomicBool, tally: &Tally) {
    let client = client();
    let help = "h".repeat(7 * 1024 * 1024 + 512 * 1024);
    let unit = "u".repeat(512);
    let mut names: Vec<String> = Vec::new();
    for read in engine::READ_NAMES {
        let base = ["_total", "_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| read.name.strip_suffix(s))
            .unwrap_or(read.name);
        for name in [read.name, base] {
            if !names.iter().any(|n| n == name) {
                names.push(name.to_owned());
            }
        }
    }
    let mut i = 0;
    while !stop.load(Ordering::Relaxed) {
        let metadata = MetadataRef {
            metric_type: MetricType::Counter,
            family_name: &names[i % names.len()],
            help: &help,
            unit: &unit,
        };
        i += 1;
        tally.record(post_v1_with(&client, url, &[], &[metadata]));
    }
}

/// A lone `vllm:generation_tokens_total` series of a misconfigured job: a group of its own that
/// can feed no family.
fn lone(id: &str, value: f64, ts: i64) -> SeriesSpec {
    (
        vec![
            (
                "__name__".to_owned(),
                "vllm:generation_tokens_total".to_owned(),
            ),
            ("instance".to_owned(), id.to_owned()),
            ("job".to_owned(), "flood".to_owned()),
        ],
        vec![Sample {
            value,
            timestamp_ms: ts,
        }],
    )
}

/// 135 000 lone series re-sent every 15 s, in requests of 5 000.
fn lone_resend(url: &str, stop: &AtomicBool, tally: &Tally) {
    let client = client();
    let mut k = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let (start, ts) = (Instant::now(), now_ms());
        k += 1;
        for chunk in (0..135_000).collect::<Vec<u32>>().chunks(5_000) {
            let series: Vec<SeriesSpec> = chunk
                .iter()
                .map(|i| lone(&format!("lone-{i}"), k as f64, ts))
                .collect();
            tally.record(post_v1(&client, url, &series));
            if stop.load(Ordering::Relaxed) {
                return;
            }
        }
        let wait = Duration::from_secs(15).saturating_sub(start.elapsed());
        std::thread::sleep(wait);
    }
}

/// 5 000 new lone series a second, each sent once.
fn lone_fresh(url: &str, stop: &AtomicBool, tally: &Tally) {
    let client = client();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let ts = now_ms();
        let series: Vec<SeriesSpec> = (0..5_000)
            .map(|_| {
                n += 1;
                lone(&format!("fresh-{n}"), 1.0, ts)
            })
            .collect();
        tally.record(post_v1(&client, url, &series));
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// What became of one late engine: the scrape (from 1) whose write was first accepted whole, the
/// first at which it showed served, and the ms from its first write to its acceptance (0: never).
#[derive(Debug, Clone, Copy, Default)]
struct Late {
    accepted: u32,
    served: u32,
    accepted_ms: u64,
}

/// True when the first group of `/api/v1/groups` is `model_name` and serves a family.
fn served(client: &reqwest::blocking::Client, base: &str, model_name: &str) -> bool {
    for _ in 0..3 {
        let page = client
            .get(format!("{base}/api/v1/groups?limit=1"))
            .send()
            .and_then(|r| r.error_for_status())
            .and_then(|r| r.bytes())
            .map(|b| serde_json::from_slice::<serde_json::Value>(&b).unwrap_or_default());
        let Ok(page) = page else {
            // 503 while the slow readers hold the page slots: again a second later.
            std::thread::sleep(Duration::from_secs(1));
            continue;
        };
        let group = &page["data"][0];
        return group["labels"]["model_name"] == model_name
            && group["families"]
                .as_object()
                .is_some_and(|f| f.values().any(|v| v["state"] == "served"));
    }
    false
}

/// A new complete engine every 2 minutes from `first`, six scrapes 10 s apart, then markers.
fn late_engines(
    base: &str,
    template: &Template,
    first: Duration,
    stop: &AtomicBool,
    results: &Mutex<Vec<Late>>,
) {
    let (client, url) = (client(), format!("{base}/api/v1/write"));
    let start = Instant::now();
    let mut n = 0u32;
    while !stop.load(Ordering::Relaxed) {
        let at = first + Duration::from_secs(120) * n;
        if start.elapsed() < at {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        }
        n += 1;
        let model = format!("a-late-{n}");
        let (t0, mut late) = (Instant::now(), Late::default());
        for k in 0..6u32 {
            let due = t0 + Duration::from_secs(10) * k;
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
            let series = scrape(template, &model, "0", &[], Some(u64::from(k)), now_ms());
            let ok = matches!(post_v1(&client, &url, &series), Ok(200..=299));
            if ok && late.accepted == 0 {
                late.accepted = k + 1;
                late.accepted_ms = t0.elapsed().as_millis() as u64;
            }
            if late.served == 0 && served(&client, base, &model) {
                late.served = k + 1;
            }
        }
        let markers = scrape(template, &model, "0", &[], None, now_ms());
        let _ = post_v1(&client, &url, &markers);
        results.lock().expect("results").push(late);
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
    let tallies: Arc<[Tally; 7]> = Arc::new(Default::default());
    let late: Arc<Mutex<Vec<Late>>> = Arc::default();
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
    if on("metadata_bomb") {
        let (url, stop, tallies) = (url.clone(), stop.clone(), tallies.clone());
        threads.push(std::thread::spawn(move || {
            metadata_bomb(&url, &stop, &tallies[4])
        }));
    }
    if on("lone_flood") {
        let (u, st, t) = (url.clone(), stop.clone(), tallies.clone());
        threads.push(std::thread::spawn(move || lone_resend(&u, &st, &t[5])));
        let (u, st, t) = (url.clone(), stop.clone(), tallies.clone());
        threads.push(std::thread::spawn(move || lone_fresh(&u, &st, &t[6])));
    }
    if on("late_engines") {
        let (base, template, stop, late) = (
            format!("http://{}", args.addr),
            template.clone(),
            stop.clone(),
            late.clone(),
        );
        threads.push(std::thread::spawn(move || {
            late_engines(&base, &template, Duration::from_secs(60), &stop, &late)
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
    let late: Vec<String> = late
        .lock()
        .expect("results")
        .iter()
        .enumerate()
        .map(|(i, l)| {
            format!(
                "late{}={}/{}/{}",
                i + 1,
                l.accepted,
                l.served,
                l.accepted_ms
            )
        })
        .collect();
    println!(
        "RESULT seconds={:.0} {} {} {} {} {} {} {} slow_bodies_opened={} slow_readers_opened={} {}",
        start.elapsed().as_secs_f64(),
        tallies[0].show("churn"),
        tallies[1].show("label_heavy"),
        tallies[2].show("unused_flood"),
        tallies[3].show("steady"),
        tallies[4].show("metadata_bomb"),
        tallies[5].show("lone_resend"),
        tallies[6].show("lone_fresh"),
        opened[0].load(Ordering::Relaxed),
        opened[1].load(Ordering::Relaxed),
        late.join(" ")
    );
    Ok(())
}
