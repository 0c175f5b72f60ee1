//! Tests of the borrowed RW 2.0 decoder. The oracle is prost's decoding of the same bytes, with
//! symbol references resolved by the spec's rule restated in [`resolve`] (odd length first, then
//! any reference outside the table); hand-written bytes cover what prost never produces.

mod random;

use prost::Message;

use super::decode;
use crate::encode::{CustomBucketsSpec, RequestV2Builder};
use crate::prompb::v2 as pb;
use crate::{
    LabelError, MetadataDropReason, MetricType, NativeHistogram, ProtocolError, STALE_NAN_BITS,
    WriteRequestRef,
};

/// What a series' labels must decode to, from the prost message, by the 2.0 spec's rules.
fn resolve<'s>(
    ts: &pb::TimeSeries,
    symbols: &'s [String],
) -> Result<Vec<(&'s str, &'s str)>, LabelError> {
    if ts.labels_refs.len() % 2 == 1 {
        return Err(LabelError::OddLabelRefs);
    }
    let get = |r: u32| symbols.get(r as usize).map(String::as_str);
    ts.labels_refs
        .chunks(2)
        .map(|p| match (get(p[0]), get(p[1])) {
            (Some(n), Some(v)) => Ok((n, v)),
            _ => Err(LabelError::SymbolRefOutOfRange),
        })
        .collect()
}

/// Per series: labels or their error, (value bits, timestamp), histogram and exemplar counts,
/// metadata (type, help, unit). Value bits, not floats, so NaNs compare exactly.
type Flat<'a> = Vec<(
    Result<Vec<(&'a str, &'a str)>, LabelError>,
    Vec<(u64, i64)>,
    usize,
    u32,
    Option<(i32, &'a str, &'a str)>,
)>;

/// The reason a series' labels are invalid, if they are.
fn invalid(series: &crate::SeriesRef<'_>) -> Option<LabelError> {
    match series.labels {
        crate::SeriesLabels::Invalid(e) => Some(e),
        _ => None,
    }
}

fn flat_ours<'a>(r: &WriteRequestRef<'a>) -> Flat<'a> {
    r.series
        .iter()
        .map(|s| {
            let labels = match &s.labels {
                crate::SeriesLabels::Invalid(e) => Err(*e),
                _ => Ok(r.labels_of(s).iter().map(|l| (l.name, l.value)).collect()),
            };
            let samples = s
                .samples
                .iter()
                .map(|x| (x.value.to_bits(), x.timestamp_ms))
                .collect();
            let metadata = s
                .metadata
                .map(|m| (m.metric_type.to_wire(), m.help, m.unit));
            (labels, samples, s.histograms.len(), s.exemplars, metadata)
        })
        .collect()
}

fn flat_prost(r: &pb::Request) -> Flat<'_> {
    let get = |i: u32| r.symbols.get(i as usize).map(String::as_str);
    r.timeseries
        .iter()
        .map(|s| {
            let samples = s
                .samples
                .iter()
                .map(|x| (x.value.to_bits(), x.timestamp))
                .collect();
            let metadata = s.metadata.as_ref().and_then(|m| {
                let help = if m.help_ref == 0 {
                    Some("")
                } else {
                    get(m.help_ref)
                };
                let unit = if m.unit_ref == 0 {
                    Some("")
                } else {
                    get(m.unit_ref)
                };
                Some((m.r#type, help?, unit?))
            });
            (
                resolve(s, &r.symbols),
                samples,
                s.histograms.len(),
                s.exemplars.len() as u32,
                metadata,
            )
        })
        .collect()
}

/// Decodes `bytes` with both decoders, asserts they agree, and returns prost's result.
fn decode_both(bytes: &[u8]) -> pb::Request {
    let theirs = pb::Request::decode(bytes).expect("prost decodes the test body");
    let ours = decode(bytes).expect("our decoder decodes the test body");
    let flat = flat_prost(&theirs);
    assert_eq!(flat_ours(&ours), flat);
    assert!(ours.metadata.is_empty(), "RW 2.0 metadata is per series");
    // Metadata sent but unresolvable is dropped and counted, never lost silently.
    let unresolvable = theirs
        .timeseries
        .iter()
        .zip(&flat)
        .filter(|(s, f)| s.metadata.is_some() && f.4.is_none())
        .count();
    let dropped = ours.metadata_dropped;
    assert_eq!(
        dropped.get(MetadataDropReason::SymbolRefOutOfRange) as usize,
        unresolvable
    );
    assert_eq!(dropped.total() as usize, unresolvable);
    theirs
}

fn owned(labels: &[(&str, &str)]) -> Vec<(String, String)> {
    labels
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

/// Two series: a counter with metadata and a series-level created timestamp (field 6, ≤ 3.7);
/// a native custom-buckets histogram whose samples carry `start_timestamp` (≥ 3.8 form).
fn sample_request() -> pb::Request {
    let mut b = RequestV2Builder::new();
    let labels_refs = b.label_refs(&owned(&[
        ("__name__", "vllm:generation_tokens_total"),
        ("engine", "0"),
    ]));
    let metadata = Some(b.metadata(MetricType::Counter, "Generation tokens.", "tokens"));
    b.push(pb::TimeSeries {
        labels_refs,
        samples: vec![pb::Sample {
            value: 42.5,
            timestamp: 1_700_000_000_000,
            start_timestamp: 0,
        }],
        exemplars: vec![pb::Exemplar {
            labels_refs: vec![0, 0],
            value: 0.25,
            timestamp: 5,
        }],
        metadata,
        created_timestamp: 1_699_999_000_000,
        ..Default::default()
    });
    let labels_refs = b.label_refs(&owned(&[("__name__", "vllm:inter_token_latency_seconds")]));
    let histogram = CustomBucketsSpec {
        bounds: vec![0.01, 0.025],
        cumulative: vec![1.0, 4.0],
        count: 5.0,
        sum: 0.2,
        timestamp_ms: 1_700_000_000_000,
        float: false,
    };
    b.push(pb::TimeSeries {
        labels_refs,
        samples: vec![
            pb::Sample {
                value: 1.0,
                timestamp: 10,
                start_timestamp: 7,
            },
            pb::Sample {
                value: 2.0,
                timestamp: 20,
                start_timestamp: 8,
            },
        ],
        histograms: vec![histogram.to_v2()],
        metadata: Some(pb::Metadata {
            r#type: 3,
            help_ref: 0,
            unit_ref: 0,
        }),
        ..Default::default()
    });
    b.build()
}

#[test]
fn prost_encoded_request_decodes_field_by_field() {
    let bytes = sample_request().encode_to_vec();
    decode_both(&bytes);
    // And against the values written above, by hand.
    let req = decode(&bytes).unwrap();
    let s0 = &req.series[0];
    assert_eq!(req.labels_of(s0)[0].value, "vllm:generation_tokens_total");
    assert_eq!(
        (s0.samples[0].value, s0.samples[0].timestamp_ms),
        (42.5, 1_700_000_000_000)
    );
    assert_eq!(s0.exemplars, 1);
    assert_eq!(s0.start_timestamp_ms, Some(1_699_999_000_000));
    let m = req.family_metadata(s0).unwrap();
    assert_eq!(
        (m.metric_type, m.family_name, m.help, m.unit),
        (
            MetricType::Counter,
            "vllm:generation_tokens_total",
            "Generation tokens.",
            "tokens"
        )
    );
    let s1 = &req.series[1];
    // The last non-zero Sample.start_timestamp wins.
    assert_eq!(s1.start_timestamp_ms, Some(8));
    let NativeHistogram::CustomBuckets(h) = &s1.histograms[0] else {
        panic!("{:?}", s1.histograms[0]);
    };
    assert_eq!(
        (&h.cumulative[..], h.count, h.sum),
        (&[1.0, 4.0][..], 5.0, 0.2)
    );
    let m = req.family_metadata(s1).unwrap();
    assert_eq!(
        (m.metric_type, m.family_name),
        (MetricType::Histogram, "vllm:inter_token_latency_seconds")
    );
}

#[test]
fn histogram_metadata_names_the_family_without_its_suffix() {
    let mut b = RequestV2Builder::new();
    for name in [
        "h_bucket", "h_sum", "h_count", "s_count", "c_total", "silent",
    ] {
        let labels_refs = b.label_refs(&owned(&[("__name__", name)]));
        let kind = match name.as_bytes()[0] {
            b'h' => MetricType::Histogram,
            b's' if name != "silent" => MetricType::Summary,
            b'c' => MetricType::Counter,
            _ => MetricType::Unknown,
        };
        let metadata = Some(b.metadata(kind, if name == "silent" { "" } else { "help" }, ""));
        b.push(pb::TimeSeries {
            labels_refs,
            metadata,
            ..Default::default()
        });
    }
    let bytes = b.build().encode_to_vec();
    let req = decode(&bytes).unwrap();
    let families: Vec<Option<&str>> = req
        .series
        .iter()
        .map(|s| req.family_metadata(s).map(|m| m.family_name))
        .collect();
    // "silent" says nothing (unspecified type, no help, no unit): not cached.
    assert_eq!(
        families,
        [
            Some("h"),
            Some("h"),
            Some("h"),
            Some("s"),
            Some("c_total"),
            None
        ]
    );
}

#[test]
fn symbols_must_start_with_the_empty_string() {
    let mut req = sample_request();
    req.symbols[0] = "x".repeat(100);
    let err = decode(&req.encode_to_vec()).unwrap_err();
    // Quoted up to 64 bytes.
    assert_eq!(err, ProtocolError::SymbolsStartNotEmpty("x".repeat(64)));
    // No symbols and no series is a valid, empty request; so is an empty body.
    assert_eq!(decode(&[]).unwrap(), WriteRequestRef::default());
}

#[test]
fn bad_label_refs_reject_only_their_series() {
    let mut req = sample_request();
    let n = req.symbols.len() as u32;
    let good = req.timeseries[0].clone();
    let mut odd = good.clone();
    odd.labels_refs.push(1);
    let mut out_of_range = good.clone();
    out_of_range.labels_refs[3] = n;
    req.timeseries = vec![odd, out_of_range, good];
    let bytes = req.encode_to_vec();
    decode_both(&bytes);
    let got = decode(&bytes).unwrap();
    let errors: Vec<_> = got.series.iter().map(|s| invalid(s)).collect();
    assert_eq!(
        errors,
        [
            Some(LabelError::OddLabelRefs),
            Some(LabelError::SymbolRefOutOfRange),
            None
        ]
    );
    assert!(got.labels_of(&got.series[1]).is_empty());
    assert_eq!(
        got.series[1].labels.key(),
        None,
        "no key for invalid labels"
    );
    let mut got = got;
    assert_eq!(
        got.check_labels(1, &Default::default(), &mut Default::default()),
        Err(LabelError::SymbolRefOutOfRange)
    );
    // The samples stay countable for the accounting: 1 float sample.
    assert_eq!(got.series[1].sample_count(), 1);
}

#[test]
fn a_ref_above_u32_is_out_of_range_not_truncated() {
    // symbols ["", "a"]; labels_refs unpacked: 1, then 2^32 + 1 (would truncate to 1).
    let mut b = vec![0x22, 0x00, 0x22, 0x01, b'a'];
    let series = [0x08, 0x01, 0x08, 0x81, 0x80, 0x80, 0x80, 0x10];
    b.extend([0x2a, series.len() as u8]);
    b.extend(series);
    let got = decode(&b).unwrap();
    assert_eq!(
        invalid(&got.series[0]),
        Some(LabelError::SymbolRefOutOfRange)
    );
}

#[test]
fn unpacked_label_refs_and_fields_in_any_order_decode_the_same() {
    // Series first, symbols after; labels_refs as four unpacked varints 1, 2, 3, 4;
    // created_timestamp 5 before them.
    let series = [0x30, 0x05, 0x08, 0x01, 0x08, 0x02, 0x08, 0x03, 0x08, 0x04];
    let mut b = vec![0x2a, series.len() as u8];
    b.extend(series);
    for s in ["", "__name__", "up", "job", "j"] {
        b.extend([0x22, s.len() as u8]);
        b.extend(s.as_bytes());
    }
    decode_both(&b);
    let got = decode(&b).unwrap();
    let labels: Vec<_> = got
        .labels_of(&got.series[0])
        .iter()
        .map(|l| (l.name, l.value))
        .collect();
    assert_eq!(labels, [("__name__", "up"), ("job", "j")]);
    assert_eq!(got.series[0].start_timestamp_ms, Some(5));
}

#[test]
fn metadata_with_a_bad_ref_is_dropped_not_the_series() {
    let mut req = sample_request();
    req.timeseries[0].metadata.as_mut().unwrap().help_ref = 10_000;
    let bytes = req.encode_to_vec();
    decode_both(&bytes);
    let got = decode(&bytes).unwrap();
    assert_eq!(got.series[0].metadata, None);
    assert_eq!(got.labels_of(&got.series[0]).len(), 2);
    assert_eq!(
        got.metadata_dropped
            .get(MetadataDropReason::SymbolRefOutOfRange),
        1
    );
    assert_eq!(got.metadata_dropped.total(), 1);
}

#[test]
fn every_series_metadata_with_a_bad_ref_is_counted() {
    // Symbols: "", "__name__", "a", "b", "c", "d": n = 6, valid refs 0..=5. Series a: help_ref = n
    // (the first out of range); b: unit_ref far out; c: no metadata (nothing to drop); d: help_ref
    // = n - 1 (the last valid one, kept). 2 dropped, every series kept.
    let mut b = RequestV2Builder::new();
    for name in ["a", "b", "c", "d"] {
        let labels_refs = b.label_refs(&owned(&[("__name__", name)]));
        b.push(pb::TimeSeries {
            labels_refs,
            ..Default::default()
        });
    }
    let mut req = b.build();
    let n = req.symbols.len() as u32;
    assert_eq!(n, 6);
    let metadata = |help_ref, unit_ref| {
        Some(pb::Metadata {
            r#type: 1,
            help_ref,
            unit_ref,
        })
    };
    req.timeseries[0].metadata = metadata(n, 0);
    req.timeseries[1].metadata = metadata(0, u32::MAX);
    req.timeseries[3].metadata = metadata(n - 1, 0);
    let bytes = req.encode_to_vec();
    decode_both(&bytes);
    let got = decode(&bytes).unwrap();
    let kept: Vec<Option<&str>> = got
        .series
        .iter()
        .map(|s| s.metadata.map(|m| m.help))
        .collect();
    assert_eq!(kept, [None, None, None, Some("d")]);
    assert!(got.series.iter().all(|s| got.labels_of(s).len() == 1));
    assert_eq!(
        got.metadata_dropped
            .get(MetadataDropReason::SymbolRefOutOfRange),
        2
    );
    assert_eq!(got.metadata_dropped.get(MetadataDropReason::InvalidUtf8), 0);
}

#[test]
fn reserved_fields_are_an_rw1_body_and_fail_loudly() {
    // The mirror of v1's trap: an RW 1.0 WriteRequest keeps its series in field 1.
    let v1_body = crate::encode::write_request_v1(&[(owned(&[("__name__", "up")]), vec![])], &[])
        .encode_to_vec();
    let err = decode(&v1_body).unwrap_err().to_string();
    assert!(err.contains("reserved"), "{err}");
    assert!(decode(&[0x18, 0x01]).is_err(), "field 3 as a varint");
}

#[test]
fn wrong_wire_types_and_bad_utf8_symbols_are_errors() {
    for bytes in [
        vec![0x20, 0x01],                         // symbols as a varint
        vec![0x28, 0x01],                         // timeseries as a varint
        vec![0x22, 0x01, 0xff],                   // a symbol that is not UTF-8
        vec![0x2a, 0x02, 0x28, 0x01],             // Metadata as a varint
        vec![0x2a, 0x02, 0x31, 0x00],             // created_timestamp as fixed64 (truncated too)
        vec![0x2a, 0x04, 0x12, 0x02, 0x19, 0x00], // Sample.start_timestamp as fixed64
    ] {
        assert!(decode(&bytes).is_err(), "{bytes:x?}");
        assert!(
            pb::Request::decode(&bytes[..]).is_err(),
            "prost: {bytes:x?}"
        );
    }
}

#[test]
fn stale_markers_survive_bit_exact() {
    let mut req = sample_request();
    req.timeseries[0].samples[0].value = f64::from_bits(STALE_NAN_BITS);
    let bytes = req.encode_to_vec();
    decode_both(&bytes);
    assert_eq!(
        decode(&bytes).unwrap().series[0].samples[0].value.to_bits(),
        STALE_NAN_BITS
    );
}

#[test]
fn truncation_at_every_offset_agrees_with_prost() {
    let bytes = sample_request().encode_to_vec();
    for k in 0..bytes.len() {
        let prefix = &bytes[..k];
        match (decode(prefix), pb::Request::decode(prefix)) {
            (Ok(ours), Ok(theirs)) => assert_eq!(flat_ours(&ours), flat_prost(&theirs)),
            (Err(_), Err(_)) => {}
            (ours, theirs) => panic!("offset {k}: ours {ours:?}, prost {theirs:?}"),
        }
    }
}
