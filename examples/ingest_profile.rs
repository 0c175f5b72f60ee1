//! A deterministic driver of the receive path without HTTP, for `valgrind --tool=callgrind`
//! (instruction counts do not depend on the load of a shared machine) and `perf record`.
//!
//! Pre-encodes `scrapes` scrapes of `pods` pods × `engines` engines (vLLM-shaped, 500-sample
//! requests, `benches/support/vllm_shape.rs`), then runs each request as the HTTP handler does:
//! snappy decode, RW1 decode with labels deferred (`v1::decode_deferred`), the known-series lookup
//! (`ingest::known_series`), `ingest::prepare_known` (limits and label normalisation of the series
//! not known) and `Prepared::apply` (engine ingest). A 4th argument `full` takes the full path
//! instead (`v1::decode`, `ingest::prepare`), for comparison. Prints samples and wall time.
//!
//! Run: `cargo build --release --example ingest_profile && valgrind --tool=callgrind
//! target/release/examples/ingest_profile 16 2 40` (arguments: pods, engines, scrapes). The first
//! `scrapes / 2` scrapes warm the engine up and are not timed; add `--toggle-collect=*measure*` to
//! count only the timed half (steady state).

use std::time::Instant;

use engine::{Engine, EngineConfig, IngestReport};
use protocol::{snappy, v1};
use service::config::Limits;
use service::ingest;

#[path = "../benches/support/vllm_shape.rs"]
mod vllm_shape;

fn arg(i: usize, default: usize) -> usize {
    std::env::args()
        .nth(i)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

#[inline(never)]
fn warm_up(bodies: &[Vec<u8>], engine: &mut Engine, buffer: &mut Vec<u8>, now_ms: i64) {
    run(bodies, engine, buffer, &mut IngestReport::default(), now_ms);
}

#[inline(never)]
fn measure(
    bodies: &[Vec<u8>],
    engine: &mut Engine,
    buffer: &mut Vec<u8>,
    report: &mut IngestReport,
    now_ms: i64,
) {
    run(bodies, engine, buffer, report, now_ms);
}

fn run(
    bodies: &[Vec<u8>],
    engine: &mut Engine,
    buffer: &mut Vec<u8>,
    report: &mut IngestReport,
    now_ms: i64,
) {
    let limits = Limits::default();
    let full_path = std::env::args().nth(4).is_some_and(|a| a == "full");
    for body in bodies {
        snappy::decompress_into(body, 128 << 20, buffer).unwrap();
        let outcome = if full_path {
            let request = v1::decode(buffer).unwrap();
            ingest::prepare(request, &limits).apply(engine, now_ms)
        } else {
            // As the HTTP handler does: the known-series fast path.
            let request = v1::decode_deferred(buffer).unwrap();
            let known = ingest::known_series(engine, &request, &limits, now_ms);
            ingest::prepare_known(request, known, &limits)
                .unwrap()
                .apply(engine, now_ms)
        };
        report.merge(&outcome.report);
    }
}

fn main() {
    let (pods, engines, scrapes) = (arg(1, 16), arg(2, 2), arg(3, 40) as u64);
    let (t0_ms, step_ms) = (1_700_000_000_000, 15_000);
    let payloads = vllm_shape::Payloads::new(pods, engines, 4, t0_ms, step_ms);
    // The receive time: the newest sample's timestamp. (With 0, every sample would be refused as
    // beyond `limits.max_future_skew` and the engine never run.)
    let now_ms = t0_ms + (scrapes as i64 + 1) * step_ms;
    let mut bodies = Vec::new();
    payloads.for_each_request(1, scrapes, |raw, _| bodies.push(vllm_shape::compress(raw)));
    let (warm, timed) = bodies.split_at(bodies.len() / 2);
    let mut engine = Engine::new(EngineConfig {
        max_active_series: usize::MAX,
        ..EngineConfig::default()
    });
    let mut buffer = Vec::new();
    warm_up(warm, &mut engine, &mut buffer, now_ms);
    let mut report = IngestReport::default();
    let start = Instant::now();
    measure(timed, &mut engine, &mut buffer, &mut report, now_ms);
    let secs = start.elapsed().as_secs_f64();
    // Every sample is accepted: applied, or read by no rule.
    let unused = report.rejected[engine::RejectReason::UnusedSeries.index()];
    assert_eq!(report.applied + unused, report.received, "{report:?}");
    println!(
        "series={} timed_samples={} applied={} wall_ns_per_sample={:.1}",
        payloads.series(),
        report.received,
        report.applied,
        secs * 1e9 / report.received as f64
    );
}
