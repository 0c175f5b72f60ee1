//! Tests of native histogram decoding and the custom-buckets to classic conversion. Expected
//! values are worked by hand in the comments; the messages are built field by field with prost,
//! not with the crate's encoder, except where the encoder itself is under test.

use prost::Message;

use super::*;
use crate::encode::CustomBucketsSpec;
use crate::prompb::v2 as pb;

fn decoded(h: &pb::Histogram) -> NativeHistogram {
    decode(&h.encode_to_vec()).expect("well-formed message")
}

fn span(offset: i32, length: u32) -> pb::BucketSpan {
    pb::BucketSpan { offset, length }
}

/// Bounds 0.1, 0.5, 1 (+Inf implicit) with per-bucket counts 2, 0, 3, 1 (index 3 is +Inf).
/// Empty index 1 is left out: spans (0, 1) then (1, 2) cover indices 0, 2, 3.
/// Integer deltas: 2, 3 - 2 = 1, 1 - 3 = -2. Count 6, sum 4.2.
fn integer_example() -> pb::Histogram {
    pb::Histogram {
        count: Some(pb::histogram::Count::CountInt(6)),
        sum: 4.2,
        schema: -53,
        positive_spans: vec![span(0, 1), span(1, 2)],
        positive_deltas: vec![2, 1, -2],
        timestamp: 15_000,
        custom_values: vec![0.1, 0.5, 1.0],
        ..Default::default()
    }
}

/// Cumulative at 0.1, 0.5, 1: 2, 2 + 0 = 2, 2 + 3 = 5; +Inf = count = 6.
fn expected_example(start: Option<i64>) -> NativeHistogram {
    NativeHistogram::CustomBuckets(CustomBuckets {
        timestamp_ms: 15_000,
        start_timestamp_ms: start,
        bounds: vec![0.1, 0.5, 1.0],
        cumulative: vec![2.0, 2.0, 5.0],
        count: 6.0,
        sum: 4.2,
    })
}

#[test]
fn integer_custom_buckets_become_cumulative_counts() {
    assert_eq!(decoded(&integer_example()), expected_example(None));
}

#[test]
fn float_custom_buckets_use_absolute_counts() {
    let h = pb::Histogram {
        count: Some(pb::histogram::Count::CountFloat(6.0)),
        positive_deltas: vec![],
        positive_counts: vec![2.0, 3.0, 1.0],
        ..integer_example()
    };
    assert_eq!(decoded(&h), expected_example(None));
}

#[test]
fn start_timestamp_of_field_17_is_kept() {
    let h = pb::Histogram {
        start_timestamp: 9_000,
        ..integer_example()
    };
    assert_eq!(decoded(&h), expected_example(Some(9_000)));
}

#[test]
fn unpacked_repeated_fields_decode_like_packed_ones() {
    // Hand-written: custom_values (16) as three fixed64 fields, positive_deltas (12) as three
    // zigzag varints (2 -> 4, 1 -> 2, -2 -> 3), fields in reverse order.
    let mut b = Vec::new();
    for v in [0.1f64, 0.5, 1.0] {
        b.extend([0x81, 0x01]); // key (16 << 3) | 1 = 129
        b.extend(v.to_le_bytes());
    }
    b.extend([0x78, 0x98, 0x75]); // 15: timestamp 15000 = 0x18 + 0x75 · 128
    for zigzag in [4u8, 2, 3] {
        b.extend([0x60, zigzag]); // key (12 << 3) | 0
    }
    for (offset, length) in [(0u8, 1u8), (2, 2)] {
        // 11: BucketSpan { offset (sint32 zigzag), length }; offsets 0 and 1 zigzag to 0 and 2.
        b.extend([0x5a, 4, 0x08, offset, 0x10, length]);
    }
    b.extend([0x20, 0x69]); // 4: schema -53, zigzag 105
    b.push(0x19); // 3: sum
    b.extend(4.2f64.to_le_bytes());
    b.extend([0x08, 6]); // 1: count_int 6
    assert_eq!(decode(&b).unwrap(), expected_example(None));
}

#[test]
fn every_invalid_layout_has_its_own_error() {
    use HistogramError as E;
    type Edit = fn(&mut pb::Histogram);
    let cases: [(E, Edit); 11] = [
        (E::BoundsNotIncreasing, |h| {
            h.custom_values = vec![0.1, 0.1, 1.0]
        }),
        (E::BoundsNotIncreasing, |h| {
            h.custom_values = vec![0.1, f64::NAN, 1.0]
        }),
        (E::InfiniteBound, |h| {
            h.custom_values = vec![0.1, 0.5, f64::INFINITY]
        }),
        (E::NegativeSpanOffset, |h| h.positive_spans[1].offset = -1),
        (E::SpansBucketsMismatch, |h| h.positive_deltas.push(0)),
        // Spans reach 1 + (2 + 2) = 5 buckets, one more than the 3 bounds + Inf provide.
        (E::TooFewBounds, |h| h.positive_spans[1].offset = 2),
        (E::ZeroBucket, |h| h.zero_threshold = 1e-9),
        (E::NegativeBuckets, |h| h.negative_spans = vec![span(0, 0)]),
        // Absolute counts 2, 2 - 3 = -1.
        (E::NegativeBucketCount, |h| h.positive_deltas[1] = -3),
        (E::CountMismatch, |h| {
            h.count = Some(pb::histogram::Count::CountInt(7));
        }),
        (E::CountNotBigEnough, |h| {
            h.count = Some(pb::histogram::Count::CountInt(5));
            h.sum = f64::NAN;
        }),
    ];
    for (want, edit) in cases {
        let mut h = integer_example();
        edit(&mut h);
        assert_eq!(decoded(&h), NativeHistogram::Invalid(want), "{want:?}");
    }
    let mut zero_count = integer_example();
    zero_count.zero_count = Some(pb::histogram::ZeroCount::ZeroCountInt(1));
    assert_eq!(
        decoded(&zero_count),
        NativeHistogram::Invalid(E::ZeroBucket)
    );
    let mut negative_float = integer_example();
    negative_float.count = Some(pb::histogram::Count::CountFloat(6.0));
    negative_float.positive_counts = vec![2.0, -3.0, 1.0];
    negative_float.positive_deltas.clear();
    assert_eq!(
        decoded(&negative_float),
        NativeHistogram::Invalid(E::NegativeBucketCount)
    );
}

#[test]
fn nan_sum_with_a_count_above_the_buckets_is_valid() {
    // Prometheus accepts count ≥ Σ buckets when the sum is NaN. Σ buckets = 6, count 8.
    let h = pb::Histogram {
        count: Some(pb::histogram::Count::CountInt(8)),
        sum: f64::NAN,
        ..integer_example()
    };
    let NativeHistogram::CustomBuckets(got) = decoded(&h) else {
        panic!("rejected");
    };
    assert_eq!((got.cumulative, got.count), (vec![2.0, 2.0, 5.0], 8.0));
}

#[test]
fn exponential_schemas_are_recognised_not_used() {
    let h = pb::Histogram {
        schema: 3,
        zero_threshold: 1e-128,
        ..integer_example()
    };
    assert_eq!(decoded(&h), NativeHistogram::OtherSchema { schema: 3 });
    assert_eq!(decoded(&h).sample_count(), 1);
}

#[test]
fn stale_markers_of_any_schema_become_stale_custom_buckets() {
    let stale = f64::from_bits(STALE_NAN_BITS);
    // What Prometheus' TSDB writes when a histogram series disappears: schema 0, only the sum.
    let bare = pb::Histogram {
        sum: stale,
        timestamp: 30_000,
        ..Default::default()
    };
    let NativeHistogram::CustomBuckets(got) = decoded(&bare) else {
        panic!("not kept");
    };
    assert!(got.is_stale() && is_stale_marker(got.count));
    assert_eq!((got.bounds.len(), got.timestamp_ms), (0, 30_000));
    // A custom-buckets stale marker that lists its bounds marks every bucket stale.
    let listed = pb::Histogram {
        sum: stale,
        ..integer_example()
    };
    let NativeHistogram::CustomBuckets(got) = decoded(&listed) else {
        panic!("not kept");
    };
    assert_eq!(got.bounds, [0.1, 0.5, 1.0]);
    assert!(got.cumulative.iter().all(|v| is_stale_marker(*v)));
}

#[test]
fn wire_faults_in_a_histogram_are_protocol_errors() {
    // custom_values packed in 7 bytes; schema as fixed64; a truncated span.
    for bytes in [
        vec![0x82, 0x01, 7, 0, 0, 0, 0, 0, 0, 0],
        vec![0x21, 0, 0, 0, 0, 0, 0, 0, 0],
        vec![0x5a, 4, 0x08, 0x00],
    ] {
        assert!(decode(&bytes).is_err(), "{bytes:?}");
    }
}

#[test]
fn encoder_spec_round_trips_through_the_decoder() {
    // Bounds 1, 2, 5, 10 with cumulative 3, 3, 7, 7 and count 9: per bucket 3, 0, 4, 0, 2.
    for float in [false, true] {
        let spec = CustomBucketsSpec {
            bounds: vec![1.0, 2.0, 5.0, 10.0],
            cumulative: vec![3.0, 3.0, 7.0, 7.0],
            count: 9.0,
            sum: 31.5,
            timestamp_ms: 1,
            float,
        };
        let v2 = spec.to_v2();
        // Non-empty buckets at indices 0, 2 and 4: spans (0, 1), (1, 1), (1, 1).
        assert_eq!(
            v2.positive_spans,
            [span(0, 1), span(1, 1), span(1, 1)],
            "float {float}"
        );
        let want = NativeHistogram::CustomBuckets(CustomBuckets {
            timestamp_ms: 1,
            start_timestamp_ms: None,
            bounds: spec.bounds.clone(),
            cumulative: spec.cumulative.clone(),
            count: 9.0,
            sum: 31.5,
        });
        assert_eq!(decoded(&v2), want);
        assert_eq!(
            decode(&spec.to_v1().encode_to_vec()).unwrap(),
            want,
            "v1, float {float}"
        );
    }
}

fn l<'a>(name: &'a str, value: &'a str) -> Label<'a> {
    Label { name, value }
}

type Emitted = Vec<(Vec<(String, String)>, Vec<(f64, i64)>)>;

fn classic(labels: &[Label<'_>], histograms: &[CustomBuckets]) -> Result<Emitted, HistogramError> {
    let mut out = Vec::new();
    for_each_classic_series(labels, histograms, |labels, samples| {
        out.push((
            labels
                .iter()
                .map(|l| (l.name.to_owned(), l.value.to_owned()))
                .collect(),
            samples.iter().map(|s| (s.value, s.timestamp_ms)).collect(),
        ));
    })?;
    Ok(out)
}

fn owned(labels: &[(&str, &str)]) -> Vec<(String, String)> {
    labels
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

#[test]
fn classic_series_carry_sorted_labels_and_every_sample() {
    let NativeHistogram::CustomBuckets(first) = expected_example(None) else {
        unreachable!()
    };
    let mut second = first.clone();
    second.timestamp_ms = 30_000;
    second.cumulative = vec![4.0, 4.0, 9.0];
    second.count = 11.0;
    second.sum = 8.0;
    let labels = [l("__name__", "x"), l("a", "1"), l("z", "2")];
    let got = classic(&labels, &[first, second]).unwrap();
    let bucket = |le| owned(&[("__name__", "x_bucket"), ("a", "1"), ("le", le), ("z", "2")]);
    let want: Emitted = vec![
        (bucket("0.1"), vec![(2.0, 15_000), (4.0, 30_000)]),
        (bucket("0.5"), vec![(2.0, 15_000), (4.0, 30_000)]),
        (bucket("1.0"), vec![(5.0, 15_000), (9.0, 30_000)]),
        (bucket("+Inf"), vec![(6.0, 15_000), (11.0, 30_000)]),
        (
            owned(&[("__name__", "x_sum"), ("a", "1"), ("z", "2")]),
            vec![(4.2, 15_000), (8.0, 30_000)],
        ),
        (
            owned(&[("__name__", "x_count"), ("a", "1"), ("z", "2")]),
            vec![(6.0, 15_000), (11.0, 30_000)],
        ),
    ];
    assert_eq!(got, want);
}

#[test]
fn a_bounds_change_starts_a_new_run_and_le_label_is_refused() {
    let a = CustomBuckets {
        timestamp_ms: 1,
        start_timestamp_ms: None,
        bounds: vec![1.0],
        cumulative: vec![1.0],
        count: 1.0,
        sum: 0.5,
    };
    let b = CustomBuckets {
        timestamp_ms: 2,
        bounds: vec![1.0, 2.0],
        cumulative: vec![1.0, 2.0],
        count: 2.0,
        sum: 2.0,
        ..a.clone()
    };
    let got = classic(&[l("__name__", "y")], &[a.clone(), b]).unwrap();
    // Run 1: le 1, +Inf, sum, count (4 series); run 2: le 1, 2, +Inf, sum, count (5 series).
    assert_eq!(got.len(), 9);
    assert_eq!(got[4].0, owned(&[("__name__", "y_bucket"), ("le", "1.0")]));
    assert_eq!(got[4].1, [(1.0, 2)]);
    assert_eq!(got[5].0, owned(&[("__name__", "y_bucket"), ("le", "2.0")]));
    assert_eq!(
        classic(&[l("__name__", "y"), l("le", "1")], &[a]),
        Err(HistogramError::LeLabel)
    );
}
