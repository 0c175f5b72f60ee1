//! Fuzzing entry points, shared by the cargo-fuzz targets (`fuzz/fuzz_targets/`) and the stable
//! seed replay and mutation tests (`tests/it/fuzz_seeds.rs`), so both run exactly the same code.
//!
//! Each takes arbitrary bytes and must never panic; the receiver's invariants are asserted inside,
//! so a violation is a finding too:
//! * the decoder agrees with prost, the independent oracle: a body prost decodes is decoded to
//!   the same series, labels and samples;
//! * received = applied + Σ rejected for every request that decodes, and received is the
//!   request's own sample count;
//! * a request whose series the engine's index holds gets the answer and the outputs it gets when
//!   the index holds nothing (every series on the full path);
//! * every derived value is well formed (cumulative buckets ascending in `le`, ending at `+Inf`
//!   with the count).
//!
//! Not part of the service's API.

mod engine;
mod goodput;

use crate::ingest::Receiver;
use ::engine::{DerivedValue, EngineConfig, Family};
use prost::Message;
use protocol::prompb::v1 as pb;
use protocol::{Version, snappy};

/// Decoded-size cap for fuzz inputs: large enough for every seed, small enough to stay fast.
pub const MAX_DECODED_BYTES: usize = 1 << 20;

/// The `engine` target: `data` as a program of series, timestamps, staleness markers, bucket
/// layouts, counter resets and idle sweeps on one engine, with the engine's invariants checked
/// after every step (`crates/service/src/fuzz/engine.rs`). Returns how many derived values were checked.
pub fn engine(data: &[u8]) -> usize {
    engine::run(data)
}

/// The `goodput` target: `data` as a vLLM request stream scraped into one engine counting three
/// SLOs, the goodput bounds checked against the stream's truth after every complete scrape
/// (`crates/service/src/fuzz/goodput.rs`). Returns how many bounds were checked.
pub fn goodput(data: &[u8]) -> usize {
    goodput::run(data)
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

/// A decompressed RW 1.0 body: the decoder against prost, then the receiver's invariants.
pub fn rw1_decoded(raw: &[u8]) {
    decoder_agrees_with_prost(raw);
    receiver_invariants(Version::V1, raw);
}

/// A decompressed RW 2.0 body: the receiver's invariants.
pub fn rw2_decoded(raw: &[u8]) {
    receiver_invariants(Version::V2, raw);
}

/// Where both prost and [`protocol::v1::decode`] (every series resolved) decode `raw`, they give
/// the same series, labels and samples (values by bits, so NaNs compare). (Each refuses some
/// bodies the other takes, by design: prost skips groups, which the spec's messages never hold,
/// and reads an RW 2.0 body as an empty request, which the receiver refuses.)
fn decoder_agrees_with_prost(raw: &[u8]) {
    let Ok(theirs) = pb::WriteRequest::decode(raw) else {
        return;
    };
    let Ok(mut ours) = protocol::v1::decode(raw) else {
        return;
    };
    if ours.resolve_all().is_err() {
        return;
    }
    assert_eq!(ours.series.len(), theirs.timeseries.len());
    for (a, b) in ours.series.iter().zip(&theirs.timeseries) {
        let labels: Vec<_> = ours
            .labels_of(a)
            .iter()
            .map(|l| (l.name, l.value))
            .collect();
        let want: Vec<_> = b.labels.iter().map(|l| (&*l.name, &*l.value)).collect();
        assert_eq!(labels, want, "labels");
        let samples = a
            .samples
            .iter()
            .map(|s| (s.value.to_bits(), s.timestamp_ms));
        let want = b.samples.iter().map(|s| (s.value.to_bits(), s.timestamp));
        assert!(samples.eq(want), "samples");
        assert_eq!(a.histograms.len(), b.histograms.len(), "histograms");
    }
}

/// Every derived value of every family of `receiver`'s engine, as text, each checked well formed.
fn outputs(receiver: &Receiver) -> Vec<String> {
    let engine = receiver.engine();
    let mut rows = Vec::new();
    for family in Family::ALL {
        engine.for_each_derived(family, |labels, value| {
            check(value);
            rows.push(format!("{family:?} {labels:?} {value:?}"));
        });
    }
    rows
}

/// `raw` received twice by two receivers (timestamps near the inputs' own, so the future-skew
/// limit does not hide the rules): one whose index learns the series the first time, one whose
/// index is emptied before each request (a new label epoch). Both give the same receipts, with
/// every sample counted, and the same outputs.
fn receiver_invariants(version: Version, raw: &[u8]) {
    let Ok(decoded) = version.decode(raw) else {
        return;
    };
    let now = decoded
        .series
        .iter()
        .flat_map(|s| s.samples.iter().map(|x| x.timestamp_ms))
        .max()
        .unwrap_or(0);
    let config = EngineConfig::default();
    let (warm, mut cold) = (Receiver::new(config.clone()), Receiver::new(config));
    for _ in 0..2 {
        let mut learned = warm.receive_raw(version, raw, now);
        cold.label_epoch += 1;
        let full_path = cold.receive_raw(version, raw, now);
        assert_eq!(full_path.known_series, 0);
        learned.known_series = 0;
        assert_eq!(learned, full_path, "a known series is applied as a new one");
        let r = &learned.report;
        assert_eq!(
            r.received,
            r.applied + r.rejected_total(),
            "received = applied + Σ rejected"
        );
        if learned.result.is_ok() {
            let mut resolved = version.decode(raw).expect("decoded once");
            if resolved.resolve_all().is_ok() {
                assert_eq!(r.received, resolved.sample_count(), "every sample received");
            }
        }
    }
    assert_eq!(outputs(&warm), outputs(&cold), "outputs");
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

/// Exposition text (0.0.4 and OpenMetrics): parse it in both formats.
pub fn exposition(bytes: &[u8]) {
    if let Ok(text) = std::str::from_utf8(bytes) {
        for format in [promtext::Format::Text004, promtext::Format::OpenMetrics] {
            let _ = promtext::parse(text, format);
        }
    }
}
