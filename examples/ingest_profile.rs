//! A deterministic driver of the receive path without HTTP, for `valgrind --tool=callgrind`
//! (instruction counts do not depend on the load of a shared machine) and `perf record`.
//!
//! Pre-encodes `scrapes` scrapes of `pods` pods × `engines` engines (vLLM-shaped, 500-sample
//! requests, `benches/support/vllm_shape.rs`), then receives each request as the HTTP handler
//! does, through [`service::ingest::Receiver`]: snappy, RW 1.0 decode, one engine lock, the
//! series index look-up, apply. A 4th argument `full` empties the index before each request (a
//! new label epoch), so every series takes the full path (decoded, checked, normalised, routed),
//! for comparison. Prints samples and wall time.
//!
//! Run: `cargo build --release --example ingest_profile && valgrind --tool=callgrind
//! target/release/examples/ingest_profile 16 2 40` (arguments: pods, engines, scrapes). The first
//! `scrapes / 2` scrapes warm the engine up and are not timed; add `--toggle-collect=*measure*` to
//! count only the timed half (steady state).

use std::time::Instant;

use engine::{EngineConfig, IngestReport};
use protocol::Version;
use service::ingest::Receiver;

#[path = "../benches/support/vllm_shape.rs"]
mod vllm_shape;

fn arg(i: usize, default: usize) -> usize {
    std::env::args()
        .nth(i)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

#[inline(never)]
fn warm_up(bodies: &[Vec<u8>], receiver: &mut Receiver, now_ms: i64) {
    run(bodies, receiver, &mut IngestReport::default(), now_ms);
}

#[inline(never)]
fn measure(bodies: &[Vec<u8>], receiver: &mut Receiver, report: &mut IngestReport, now_ms: i64) {
    run(bodies, receiver, report, now_ms);
}

fn run(bodies: &[Vec<u8>], receiver: &mut Receiver, report: &mut IngestReport, now_ms: i64) {
    let full_path = std::env::args().nth(4).is_some_and(|a| a == "full");
    for body in bodies {
        if full_path {
            receiver.label_epoch += 1;
        }
        let receipt = receiver.receive(Version::V1, body, now_ms);
        report.merge(&receipt.report);
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
    let mut receiver = Receiver::new(EngineConfig {
        max_active_series: usize::MAX,
        ..EngineConfig::default()
    });
    warm_up(warm, &mut receiver, now_ms);
    let mut report = IngestReport::default();
    let start = Instant::now();
    measure(timed, &mut receiver, &mut report, now_ms);
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
