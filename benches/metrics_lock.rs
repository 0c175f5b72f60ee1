//! How long a `/metrics` scrape holds the engine lock, which every remote write needs
//! (docs/SCRAPES.md, "/metrics: the lock hold"), at 10,000 groups and with one group whose
//! histogram has 60,000 buckets.
//!
//! Run: `cargo bench --bench metrics_lock` (a filter: `-- metrics_lock/huge`).

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use criterion::Criterion;
use engine::{Engine, EngineConfig, IngestReport};
use protocol::{Label, Sample, normalize_labels};
use service::config::Limits;
use service::exposition::Format;
use service::http::AppState;
use service::http::metrics::{page, render_all};

#[path = "support/scrape.rs"]
mod scrape;
#[path = "support/vllm_shape.rs"]
mod vllm_shape;

use scrape::{STEP_MS, Scrape, T0_MS};
use vllm_shape::{SeriesTemplate, is_rule_input};

/// Scrapes fed before measuring: the first two settle (`EngineConfig::settle_scrapes`).
const SCRAPES: u64 = 4;

fn config() -> EngineConfig {
    EngineConfig {
        max_active_series: 10_000_000,
        ..EngineConfig::default()
    }
}

/// `groups` vLLM engines (every series a rule reads, every family served), after [`SCRAPES`].
fn fleet(groups: usize) -> Engine {
    let templates: Vec<SeriesTemplate> = vllm_shape::fleet(groups.div_ceil(2), 2)
        .into_iter()
        .filter(is_rule_input)
        .collect();
    let mut scrape = Scrape::new(&templates);
    let mut engine = Engine::new(config());
    for k in 1..=SCRAPES {
        scrape.at(k);
        scrape.ingest(&mut engine, &mut IngestReport::default());
    }
    engine
}

/// One group whose request TPOT histogram has `buckets` bounds (plus `+Inf`), with the
/// `request_generation_tokens{le="1.0"}` and `_count` canonical TPOT reads: canonical TPOT
/// mirrors the raw bucket layout, so it serves `buckets + 1` bucket lines. Scrape `k` carries
/// 1,000·k requests, 100·k of them with one output token. Prints each scrape's ingest time (the
/// write side's hold, for comparison) and how many bucket series it refused: past
/// `engine::MAX_SERIES_PER_INPUT` (1,024) a histogram's further buckets are refused, so canonical
/// TPOT serves the 1,024 lowest bounds.
fn huge_histogram(buckets: usize) -> Engine {
    let group = [
        ("engine", "0"),
        ("instance", "10.0.0.1:8000"),
        ("job", "vllm"),
        ("model_name", "meta-llama/Llama-3.1-8B-Instruct"),
    ];
    let tpot = "vllm:request_time_per_output_token_seconds";
    // (name, le, value at scrape 1)
    let mut series: Vec<(String, Option<String>, f64)> = (0..buckets)
        .map(|i| {
            let le = 1e-4 * (i + 1) as f64;
            let slow = (900.0 * (1.0 - (-le / 0.02).exp())).floor();
            (
                format!("{tpot}_bucket"),
                Some(format!("{le:?}")),
                100.0 + slow,
            )
        })
        .collect();
    series.push((format!("{tpot}_bucket"), Some("+Inf".into()), 1_000.0));
    series.push((format!("{tpot}_count"), None, 1_000.0));
    series.push((format!("{tpot}_sum"), None, 20.0));
    series.push((
        "vllm:request_generation_tokens_bucket".into(),
        Some("1.0".into()),
        100.0,
    ));
    series.push(("vllm:request_generation_tokens_count".into(), None, 1_000.0));
    let labels: Vec<Vec<(String, String)>> = series
        .iter()
        .map(|(name, le, _)| {
            let mut l: Vec<(String, String)> = group
                .iter()
                .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
                .collect();
            l.push(("__name__".into(), name.clone()));
            if let Some(le) = le {
                l.push(("le".into(), le.clone()));
            }
            l
        })
        .collect();
    let labels: Vec<Vec<Label<'_>>> = labels
        .iter()
        .map(|l| {
            let mut l: Vec<Label<'_>> =
                l.iter().map(|(n, v)| Label { name: n, value: v }).collect();
            normalize_labels(&mut l).expect("valid labels");
            l
        })
        .collect();
    let mut engine = Engine::new(config());
    for k in 1..=SCRAPES {
        let start = Instant::now();
        let mut report = IngestReport::default();
        for (l, (_, _, v)) in labels.iter().zip(&series) {
            let sample = Sample {
                value: v * k as f64,
                timestamp_ms: T0_MS + k as i64 * STEP_MS,
            };
            engine.ingest(l, &[sample], 0, &mut report);
        }
        eprintln!(
            "huge_histogram({buckets}): scrape {k} ingested in {:?}, {} series refused as too_many_buckets",
            start.elapsed(),
            report.rejected[engine::RejectReason::TooManyBuckets.index()]
        );
    }
    engine
}

/// How long a writer waits for the engine lock while another thread serves `scrapes` `/metrics`
/// responses back to back: the writer takes the lock every 100 µs. Prints the median, 90th
/// percentile and largest wait (what a remote write sees), beside the criterion figures.
fn writer_waits(name: &str, state: &AppState, scrapes: usize) {
    let done = AtomicBool::new(false);
    let mut waits: Vec<Duration> = Vec::new();
    std::thread::scope(|s| {
        s.spawn(|| {
            for _ in 0..scrapes {
                black_box(render_all(state, Format::Text));
            }
            done.store(true, Ordering::Release);
        });
        while !done.load(Ordering::Acquire) {
            let start = Instant::now();
            let engine = state.core.engine();
            waits.push(start.elapsed());
            drop(engine);
            std::thread::sleep(Duration::from_micros(100));
        }
    });
    waits.sort_unstable();
    let at = |q: f64| waits[((waits.len() - 1) as f64 * q) as usize];
    eprintln!(
        "metrics_lock/{name}/writer_wait: {} writes during {scrapes} scrapes: \
         p50 {:?}, p90 {:?}, max {:?}",
        waits.len(),
        at(0.5),
        at(0.9),
        at(1.0)
    );
}

/// The scrape of `engine`: `render_all` (the whole response, its lock holds included), `order`
/// (the first hold: [`page`] copies each group's ref and labels pointer, then sorts
/// after releasing the lock) and `stats` (the last hold, for the self-metrics), then
/// [`writer_waits`] (every hold, as a writer sees them).
fn bench(c: &mut Criterion, name: &str, engine: Engine) {
    let state = AppState::new(engine, Limits::default());
    let text = render_all(&state, Format::Text);
    let lines = text
        .lines()
        .filter(|l| l.starts_with("vllm_corrected_"))
        .count();
    eprintln!(
        "metrics_lock/{name}: {lines} derived series lines, {} bytes",
        text.len()
    );
    drop(text);
    let mut group = c.benchmark_group(format!("metrics_lock/{name}"));
    group.sample_size(10);
    group.bench_function("render_all", |b| {
        b.iter_with_large_drop(|| render_all(&state, Format::Text))
    });
    group.bench_function("order", |b| {
        b.iter_with_large_drop(|| page(&state, Format::Text))
    });
    group.bench_function("stats", |b| {
        b.iter(|| black_box(state.core.engine().stats()))
    });
    group.finish();
    writer_waits(name, &state, 20);
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench(
        &mut c,
        "huge_histogram_60000_buckets",
        huge_histogram(60_000),
    );
    bench(&mut c, "10000_groups", fleet(10_000));
    c.final_summary();
}
