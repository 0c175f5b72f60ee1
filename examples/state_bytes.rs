//! The engine's accounted state bytes (`Engine::state_bytes`, what `engine.max_state_bytes` bounds)
//! against the heap it really holds, counted with `dhat`'s allocator (live bytes after the run,
//! less the fixtures'), for the shapes the memory budget must hold under (docs/RELIABILITY.md,
//! "The memory budget"):
//!
//! - `fleet N`: N vLLM pods × 2 engines (`benches/support/vllm_shape.rs`), 20 scrapes, so every
//!   frame, output, hold and acceptance state is full;
//! - `lone N`: N one-series groups (a cardinality flood), two scrapes;
//! - `flood N`: the same, re-sent for 20 scrapes, so every group's frame window is full;
//! - `labels N`: N groups of one series with 63 labels of 2 KiB values (the default label limits'
//!   worst case), two scrapes;
//! - `retired N [K]`: N vLLM engines that served, then went stale: their states retired (with
//!   K SLOs of `slos`, when given);
//! - `slos N [K]`: as `fleet`, counting K SLOs (8 by default) of every SLI (all but the first
//!   5 with thresholds between edges, so with notes) with 40-byte names: the SLO counters'
//!   plans, rows, notes and states per group.
//!
//! Prints `accounted_bytes`, `heap_bytes` and their ratio; the accounting must not be below the
//! heap (the ratio ≥ 1). Run: `cargo run --release --example state_bytes fleet 200`.

use engine::{Engine, EngineConfig, IngestReport};
use protocol::{Label, STALE_NAN_BITS, Sample};

#[path = "../benches/support/scrape.rs"]
mod scrape;
#[path = "../benches/support/vllm_shape.rs"]
mod vllm_shape;

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

fn config() -> EngineConfig {
    EngineConfig {
        max_active_series: usize::MAX,
        max_state_bytes: usize::MAX,
        settle_scrapes: 0,
        ..EngineConfig::default()
    }
}

/// `count` SLOs of every SLI with 40-byte names; all but the first 5 with thresholds between
/// vLLM's edges.
fn many_slos(count: usize) -> engine::slo::SloSet {
    use engine::slo::{Sli, Slo, SloSpec};
    let slo = |i: usize| {
        let off = if i >= 5 { 0.003 } else { 0.0 };
        let slis = [
            (Sli::Ttft, 0.25 + off),
            (Sli::Tpot, 0.05 + off),
            (Sli::E2el, 5.0 + off),
            (Sli::ItlPerToken, 0.05 + off),
        ];
        Slo::with_thresholds(&format!("slo_{i}_{}", "x".repeat(34)), 0.99, &slis)
    };
    let spec = SloSpec {
        slos: (0..count).map(slo).collect(),
    };
    engine::slo::SloSet::new(&spec, |_| None)
}

/// One sample of `name` with `extra` labels, ingested at `ts`.
fn one(engine: &mut Engine, labels: &[Label<'_>], value: f64, ts: i64) {
    let sample = Sample {
        value,
        timestamp_ms: ts,
    };
    engine.ingest(labels, &[sample], ts, &mut IngestReport::default());
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let shape = args.get(1).map_or("fleet", String::as_str);
    let n: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(200);
    let _profiler = dhat::Profiler::builder().testing().build();
    let (mut engine, fixtures) = match shape {
        "fleet" | "retired" | "slos" => {
            // The fixtures (templates and scrape) stay alive until the heap is read.
            let templates: &'static [_] = Box::leak(vllm_shape::fleet(n, 2).into_boxed_slice());
            let mut scrape = scrape::Scrape::new(templates);
            let fixtures = dhat::HeapStats::get().curr_bytes;
            let mut config = config();
            let count = args.get(3).and_then(|a| a.parse().ok());
            if shape == "slos" || count.is_some() {
                config.slos = many_slos(count.unwrap_or(8));
            }
            let mut engine = Engine::new(config);
            for k in 1..=20 {
                scrape.at(k);
                scrape.ingest(&mut engine, &mut IngestReport::default());
            }
            if shape == "retired" {
                scrape.at(21);
                for (_, sample, _) in &mut scrape.series {
                    sample[0].value = f64::from_bits(STALE_NAN_BITS);
                }
                scrape.ingest(&mut engine, &mut IngestReport::default());
                assert_eq!(engine.stats().groups, 0, "every group retired");
            }
            std::mem::forget(scrape);
            (engine, fixtures)
        }
        "lone" | "labels" | "flood" => {
            let value = "v".repeat(2048);
            let names: Vec<String> = (0..62).map(|i| format!("label_{i:02}")).collect();
            let instances: Vec<String> = (0..n).map(|i| format!("10.0.{i}:8000")).collect();
            let fixtures = dhat::HeapStats::get().curr_bytes;
            let mut engine = Engine::new(config());
            let scrapes = if shape == "flood" { 20 } else { 2 };
            for k in 0..scrapes {
                let (k, ts) = (
                    f64::from(k + 1),
                    1_750_000_000_000i64 + 15_000 * i64::from(k),
                );
                for instance in &instances {
                    let mut labels = vec![
                        Label {
                            name: "__name__",
                            value: "vllm:generation_tokens_total",
                        },
                        Label {
                            name: "instance",
                            value: instance,
                        },
                    ];
                    if shape == "labels" {
                        labels.extend(names.iter().map(|name| Label {
                            name,
                            value: &value,
                        }));
                    }
                    labels.sort();
                    one(&mut engine, &labels, k, ts);
                }
            }
            (engine, fixtures)
        }
        other => panic!("shape {other}: fleet, lone, flood, labels or retired"),
    };
    engine.sweep_idle(0);
    let heap = dhat::HeapStats::get().curr_bytes.saturating_sub(fixtures);
    let accounted = engine.state_bytes();
    let stats = engine.stats();
    println!(
        "shape={shape} n={n} groups={} series={} accounted_bytes={accounted} heap_bytes={heap} ratio={:.2} parts={:?}",
        stats.groups,
        stats.active_series,
        accounted as f64 / heap as f64,
        stats.memory
    );
    engine = Engine::new(config());
    drop(engine);
}
