//! Fuzzing entry points, shared by the cargo-fuzz targets (`fuzz/fuzz_targets/`) and the stable
//! seed replay and mutation tests (`tests/it/fuzz_seeds.rs`), so both run exactly the same code.
//!
//! Each takes arbitrary bytes and must never panic; the receiver's invariants are asserted inside,
//! so a violation is a finding too:
//! * received = applied + Σ rejected for every request that decodes;
//! * every derived value is well formed (cumulative buckets ascending in `le`, ending at `+Inf`
//!   with the count).
//!
//! Not part of the service's API.

mod engine;

use crate::config::Limits;
use crate::ingest;
use ::engine::{DerivedValue, Engine, EngineConfig, Family};
use protocol::{ProtocolError, WriteRequestRef, snappy, v1, v2};

/// Decoded-size cap for fuzz inputs: large enough for every seed, small enough to stay fast.
pub const MAX_DECODED_BYTES: usize = 1 << 20;

/// The `engine` target: `data` as a program of series, timestamps, staleness markers, bucket
/// layouts, counter resets and idle sweeps on one engine, with the engine's invariants checked
/// after every step (`crates/service/src/fuzz/engine.rs`). Returns how many derived values were checked.
pub fn engine(data: &[u8]) -> usize {
    engine::run(data)
}

/// A snappy-compressed RW 1.0 body: decompress (with the length cap), decode, ingest.
pub fn rw1(body: &[u8]) {
    let mut raw = Vec::new();
    if snappy::decompress_into(body, MAX_DECODED_BYTES, &mut raw).is_ok() {
        rw1_decoded(&raw);
    }
}

/// A snappy-compressed RW 2.0 body: decompress (with the length cap), decode, ingest.
pub fn rw2(body: &[u8]) {
    let mut raw = Vec::new();
    if snappy::decompress_into(body, MAX_DECODED_BYTES, &mut raw).is_ok() {
        rw2_decoded(&raw);
    }
}

/// A decompressed RW 1.0 body: decode, ingest; and the known-series fast path against the full
/// path ([`fast_path_agrees`]).
pub fn rw1_decoded(raw: &[u8]) {
    apply(v1::decode(raw));
    fast_path_agrees(raw);
}

/// The known-series fast path as the HTTP handler runs it (`decode_deferred`, `known_series`,
/// `prepare_known`) against the full path (`decode`, `prepare`), each on its own engine, with the
/// body sent twice (the second time its series are known): both refuse it, or both give the same
/// outcome; and the two engines' outputs are the same.
fn fast_path_agrees(raw: &[u8]) {
    let limits = Limits::default();
    let now = newest(v1::decode(raw).as_ref().ok());
    let (mut full, mut fast) = (
        Engine::new(EngineConfig::default()),
        Engine::new(EngineConfig::default()),
    );
    for _ in 0..2 {
        let want = v1::decode(raw).map(|r| ingest::prepare(r, &limits).apply(&mut full, now));
        let got = v1::decode_deferred(raw)
            .and_then(|r| {
                let known = ingest::known_series(&mut fast, &r, &limits, now);
                ingest::prepare_known(r, known, &limits)
            })
            .map(|prepared| prepared.apply(&mut fast, now));
        match (want, got) {
            (Ok(want), Ok(got)) => assert_eq!(want, got, "fast path outcome"),
            (Err(_), Err(_)) => return,
            (want, got) => panic!("full path {want:?}, fast path {got:?}"),
        }
    }
    assert_eq!(outputs(&full), outputs(&fast), "fast path outputs");
}

/// Every derived value of every family, as text.
fn outputs(engine: &Engine) -> Vec<String> {
    let mut rows = Vec::new();
    for family in Family::ALL {
        engine.for_each_derived(family, |labels, value| {
            rows.push(format!("{family:?} {labels:?} {value:?}"));
        });
    }
    rows
}

/// The newest sample timestamp of `request` (ms), 0 without one.
fn newest(request: Option<&WriteRequestRef<'_>>) -> i64 {
    request
        .into_iter()
        .flat_map(|r| &r.series)
        .flat_map(|s| s.samples.iter().map(|x| x.timestamp_ms))
        .max()
        .unwrap_or(0)
}

/// A decompressed RW 2.0 body: decode, ingest.
pub fn rw2_decoded(raw: &[u8]) {
    apply(v2::decode(raw));
}

/// Exposition text (0.0.4 and OpenMetrics): parse it in both formats.
pub fn exposition(bytes: &[u8]) {
    if let Ok(text) = std::str::from_utf8(bytes) {
        for format in [promtext::Format::Text004, promtext::Format::OpenMetrics] {
            let _ = promtext::parse(text, format);
        }
    }
}

/// Ingests a decoded request into a fresh engine (timestamps near the inputs' own, so the
/// future-skew limit does not hide the rules) and checks the invariants.
fn apply(decoded: Result<WriteRequestRef<'_>, ProtocolError>) {
    let Ok(request) = decoded else { return };
    let newest = newest(Some(&request));
    let mut engine = Engine::new(EngineConfig::default());
    let outcome = ingest::prepare(request, &Limits::default()).apply(&mut engine, newest);
    let r = &outcome.report;
    assert_eq!(
        r.received,
        r.applied + r.rejected_total(),
        "received = applied + Σ rejected"
    );
    for family in Family::ALL {
        engine.for_each_derived(family, |_, value| check(value));
    }
}

fn check(value: &DerivedValue) {
    if let DerivedValue::Histogram { buckets, count, .. } = value {
        assert!(
            buckets.windows(2).all(|w| w[0].0 < w[1].0),
            "bounds ascend: {buckets:?}"
        );
        let last = buckets.last().expect("a +Inf bucket");
        assert!(last.0 == f64::INFINITY, "ends at +Inf: {buckets:?}");
        assert!(
            last.1.to_bits() == count.to_bits() || last.1 == *count,
            "+Inf bucket is the count: {buckets:?} vs {count}"
        );
    }
}
