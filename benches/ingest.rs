//! Micro-benchmarks of the receive path: the whole path without HTTP, every series new and every
//! series known; snappy decode, RW1 and RW2 decode, engine apply
//! (known series, new series, unused series, a whole scrape), `/metrics` rendering at 1 k and 10 k
//! derived series. Allocation counts are in `benches/alloc.rs`.
//!
//! Run: `cargo bench --bench ingest` (all), `cargo bench --bench ingest -- engine/` (a filter).
//! Payloads are vLLM-shaped (`support/vllm_shape.rs`): 500-sample requests as Prometheus 2.42 cuts
//! them. Throughputs are in samples (elements) or bytes of the snappy body.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, Throughput};
use engine::{Engine, EngineConfig, IngestReport};
use protocol::encode::SeriesSpec;
use protocol::{NameMemo, Version, snappy, v1, v2};
use service::config::Limits;
use service::exposition::Format;
use service::http::AppState;
use service::http::metrics::render_all;
use service::ingest::Receiver;

#[path = "support/scrape.rs"]
mod scrape;
#[path = "support/vllm_shape.rs"]
mod vllm_shape;

use scrape::{Scrape, one_request};
use vllm_shape::{SeriesTemplate, is_rule_input};

/// The series of a decoded RW1 request, owned, for the RW 2.0 encoder.
fn specs_of(raw: &[u8]) -> Vec<SeriesSpec> {
    let mut request = v1::decode(raw).unwrap();
    request.resolve_all().unwrap();
    request
        .series
        .iter()
        .map(|s| {
            let labels = request
                .labels_of(s)
                .iter()
                .map(|l| (l.name.to_owned(), l.value.to_owned()))
                .collect();
            (labels, s.samples.to_vec())
        })
        .collect()
}

fn bench_decode(c: &mut Criterion) {
    let (body, raw) = one_request(4);
    let mut group = c.benchmark_group("decode");
    group.throughput(Throughput::Bytes(body.len() as u64));
    let mut buffer = Vec::new();
    group.bench_function("snappy_500_sample_request", |b| {
        b.iter(|| snappy::decompress_into(black_box(&body), 128 << 20, &mut buffer).unwrap())
    });
    group.throughput(Throughput::Elements(vllm_shape::SAMPLES_PER_BATCH as u64));
    // Labels left pending, as the receiver decodes a request of known series.
    group.bench_function("rw1_500_sample_request", |b| {
        b.iter(|| v1::decode(black_box(&raw)).unwrap().series.len())
    });
    // The same 500 series as an RW 2.0 request (interned symbols).
    let raw_v2 = prost::Message::encode_to_vec(&protocol::encode::request_v2(&specs_of(&raw)));
    group.bench_function("rw2_500_sample_request", |b| {
        b.iter(|| v2::decode(black_box(&raw_v2)).unwrap().series.len())
    });
    group.bench_function("snappy_rw1_normalize_500_sample_request", |b| {
        b.iter(|| {
            snappy::decompress_into(black_box(&body), 128 << 20, &mut buffer).unwrap();
            let mut request = v1::decode(&buffer).unwrap();
            request.resolve_all().unwrap();
            let (limits, mut memo) = (Default::default(), NameMemo::default());
            for i in 0..request.series.len() {
                request.check_labels(i, &limits, &mut memo).unwrap();
            }
            request.series.len()
        })
    });
    group.finish();
}

fn bench_engine(c: &mut Criterion) {
    let templates = vllm_shape::fleet(20, 2);
    let (used, unused): (Vec<SeriesTemplate>, Vec<SeriesTemplate>) =
        templates.iter().cloned().partition(is_rule_input);
    let mut group = c.benchmark_group("engine");

    // Hot path: every series and group already known; each pass is the next scrape.
    let mut known = Scrape::new(&used);
    group.throughput(Throughput::Elements(known.samples()));
    group.bench_function("apply_known_series", |b| {
        let mut engine = Engine::new(EngineConfig::default());
        let mut report = IngestReport::default();
        let mut k = 0;
        // Fill the frame window first, as in steady state.
        for _ in 0..20 {
            k += 1;
            known.at(k);
            known.ingest(&mut engine, &mut report);
        }
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                k += 1;
                known.at(k);
                let start = Instant::now();
                known.ingest(&mut engine, &mut report);
                spent += start.elapsed();
            }
            spent
        });
        assert_eq!(
            report.applied, report.received,
            "every known-series sample is applied"
        );
    });

    // First sample of every series: a new group per engine, a new role per series.
    let mut first = Scrape::new(&used);
    first.at(1);
    group.bench_function("apply_new_series", |b| {
        b.iter_batched(
            || Engine::new(EngineConfig::default()),
            |mut engine| {
                first.ingest(&mut engine, &mut IngestReport::default());
                engine
            },
            BatchSize::LargeInput,
        )
    });

    // Series no rule reads: counted and dropped.
    let mut dropped = Scrape::new(&unused);
    dropped.at(1);
    group.throughput(Throughput::Elements(dropped.samples()));
    group.bench_function("discard_unused_series", |b| {
        let mut engine = Engine::new(EngineConfig::default());
        let mut report = IngestReport::default();
        b.iter(|| dropped.ingest(&mut engine, &mut report));
    });

    // A whole scrape of the fleet in Prometheus' order: the realistic per-sample average.
    let mut whole = Scrape::new(&templates);
    group.throughput(Throughput::Elements(whole.samples()));
    group.bench_function("apply_full_scrape", |b| {
        let mut engine = Engine::new(EngineConfig::default());
        let mut report = IngestReport::default();
        let mut k = 0;
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                k += 1;
                whole.at(k);
                let start = Instant::now();
                whole.ingest(&mut engine, &mut report);
                spent += start.elapsed();
            }
            spent
        });
    });
    group.finish();
}

/// An engine holding `groups` vLLM engines' worth of derived families (48 derived series each:
/// 22 + 22 histogram lines and 2 + 2 sum/count lines), after two scrapes.
fn engine_with_groups(groups: usize) -> Engine {
    let templates: Vec<SeriesTemplate> = vllm_shape::fleet(groups.div_ceil(2), 2)
        .into_iter()
        .filter(is_rule_input)
        .collect();
    let mut scrape = Scrape::new(&templates);
    let mut engine = Engine::new(EngineConfig::default());
    for k in 1..=2 {
        scrape.at(k);
        scrape.ingest(&mut engine, &mut IngestReport::default());
    }
    engine
}

fn bench_exposition(c: &mut Criterion) {
    let mut group = c.benchmark_group("metrics");
    for (label, groups) in [("1k_derived_series", 22), ("10k_derived_series", 210)] {
        let state = AppState::new(engine_with_groups(groups), Limits::default());
        let lines = render_all(&state, Format::Text)
            .lines()
            .filter(|l| l.starts_with("vllm_corrected_"))
            .count();
        eprintln!("metrics/{label}: {lines} derived series lines");
        group.throughput(Throughput::Elements(lines as u64));
        group.bench_function(label, |b| b.iter(|| render_all(&state, Format::Text).len()));
    }
    group.finish();
}

/// The whole receive path without HTTP, per 500-sample request in steady state (16 pods × 2
/// engines): [`service::ingest::Receiver`], which runs what the HTTP handler runs (snappy,
/// decode, the engine lock, look-up, apply). `known_series_500_sample_request`: every series in
/// the engine's index; `full_path_500_sample_request`: the index emptied before each request (a
/// new label epoch), so every series is decoded, checked, normalised and routed
/// (docs/ENGINE.md, "The series index"). Each iteration takes the next request; after 60 scrapes
/// a fresh engine is warmed up again (untimed).
fn bench_receive(c: &mut Criterion) {
    let (t0_ms, step_ms, scrapes) = (1_700_000_000_000_i64, 15_000, 60);
    let payloads = vllm_shape::Payloads::new(16, 2, 4, t0_ms, step_ms);
    let now_ms = t0_ms + (scrapes as i64 + 1) * step_ms;
    let mut bodies = Vec::new();
    payloads.for_each_request(1, scrapes, |raw, _| bodies.push(vllm_shape::compress(raw)));
    let per_scrape = bodies.len() / scrapes as usize;
    let mut group = c.benchmark_group("receive");
    group.throughput(Throughput::Elements(vllm_shape::SAMPLES_PER_BATCH as u64));
    for known in [false, true] {
        let run = |receiver: &mut Receiver, body: &[u8]| {
            if !known {
                receiver.label_epoch += 1;
            }
            receiver.receive(Version::V1, body, now_ms).report.received
        };
        let name = if known {
            "known_series_500_sample_request"
        } else {
            "full_path_500_sample_request"
        };
        group.bench_function(name, |b| {
            let (mut receiver, mut next) = (Receiver::new(EngineConfig::default()), bodies.len());
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    if next == bodies.len() {
                        // Two scrapes fill the index and the frame window, untimed.
                        receiver = Receiver::new(EngineConfig::default());
                        for body in &bodies[..2 * per_scrape] {
                            run(&mut receiver, body);
                        }
                        next = 2 * per_scrape;
                    }
                    let start = Instant::now();
                    black_box(run(&mut receiver, &bodies[next]));
                    spent += start.elapsed();
                    next += 1;
                }
                spent
            });
        });
    }
    group.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench_receive(&mut c);
    bench_decode(&mut c);
    bench_engine(&mut c);
    bench_exposition(&mut c);
    c.final_summary();
}
