//! Heap bytes per one-series group (issue 13 item 4): `N` lone `vllm:generation_tokens_total`
//! series, each its own group (a distinct `instance`), scraped twice, as a cardinality flood
//! sends them. Counted with `dhat`'s allocator (live heap bytes and blocks after the second
//! scrape, divided by `N`), so the figure does not depend on the machine or the allocator's
//! caching, unlike RSS.
//!
//! Run: `cargo run --release --example lone_series_memory [N]` (default 100 000).

use engine::{Engine, EngineConfig, IngestReport};
use protocol::{Label, Sample};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let _profiler = dhat::Profiler::builder().testing().build();
    let before = dhat::HeapStats::get();
    let mut engine = Engine::new(EngineConfig {
        max_active_series: n,
        ..EngineConfig::default()
    });
    let instances: Vec<String> = (0..n)
        .map(|i| format!("10.0.{}.{}:8000", i / 250, i % 250))
        .collect();
    let mut report = IngestReport::default();
    for (k, ts) in [(1.0, 1_750_000_000_000i64), (2.0, 1_750_000_015_000)] {
        for instance in &instances {
            let labels = [
                Label {
                    name: "__name__",
                    value: "vllm:generation_tokens_total",
                },
                Label {
                    name: "engine",
                    value: "0",
                },
                Label {
                    name: "instance",
                    value: instance,
                },
                Label {
                    name: "job",
                    value: "flood",
                },
                Label {
                    name: "model_name",
                    value: "m",
                },
            ];
            engine.ingest(
                &labels,
                &[Sample {
                    value: k,
                    timestamp_ms: ts,
                }],
                ts,
                &mut report,
            );
        }
    }
    let after = dhat::HeapStats::get();
    assert_eq!(engine.stats().groups, n);
    assert_eq!(report.applied, 2 * n as u64);
    let bytes = after.curr_bytes - before.curr_bytes;
    let blocks = after.curr_blocks - before.curr_blocks;
    println!(
        "lone_series_memory: {n} one-series groups: {bytes} heap bytes live ({:.0} bytes and {:.1} blocks per group)",
        bytes as f64 / n as f64,
        blocks as f64 / n as f64
    );
}
