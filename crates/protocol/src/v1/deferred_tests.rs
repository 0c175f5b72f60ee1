//! Tests of the labels [`super::decode`] leaves pending: resolved, they are what prost decodes,
//! and a series' key is a function of its label bytes alone.

use prost::Message;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::decode;
use crate::prompb::v1 as pb;
use crate::{LabelScratch, SeriesKey, SeriesLabels, SeriesRef, WriteRequestRef};

fn label(name: &str, value: &str) -> pb::Label {
    pb::Label {
        name: name.into(),
        value: value.into(),
    }
}

/// Label text from a small alphabet, so equal label sets recur; sometimes 130 bytes, so its
/// `Label` takes a two-byte length.
fn text(rng: &mut StdRng) -> String {
    const WORDS: [&str; 6] = ["a", "job", "é", "", "__name__", "vllm:x_total"];
    if rng.random_bool(0.05) {
        return "v".repeat(130);
    }
    WORDS[rng.random_range(0..WORDS.len())].to_owned()
}

fn random_request(rng: &mut StdRng) -> pb::WriteRequest {
    pb::WriteRequest {
        timeseries: (0..rng.random_range(0..10))
            .map(|_| pb::TimeSeries {
                labels: (0..rng.random_range(0..4) + if rng.random_bool(0.1) { 12 } else { 0 })
                    .map(|_| label(&text(rng), &text(rng)))
                    .collect(),
                samples: (0..rng.random_range(0..3))
                    .map(|_| pb::Sample {
                        value: rng.random(),
                        timestamp: rng.random(),
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        metadata: Vec::new(),
    }
}

/// The key of a series as decoded (pending), `None` without one.
fn key(series: &SeriesRef<'_>) -> Option<SeriesKey> {
    series.labels.key()
}

/// Whether a series' key is still provisional.
fn provisional(series: &SeriesRef<'_>) -> bool {
    matches!(&series.labels, SeriesLabels::Pending(p) if p.provisional)
}

/// Per series: labels, and samples as (value bits, timestamp ms).
type Flat = Vec<(Vec<(String, String)>, Vec<(u64, i64)>)>;

/// Labels and samples of every series, resolved, in a comparable shape (value bits: NaNs compare).
fn flat(request: &WriteRequestRef<'_>) -> Flat {
    request
        .series
        .iter()
        .map(|s| {
            let labels = request.labels_of(s).iter();
            let samples = s.samples.iter();
            (
                labels.map(|l| (l.name.into(), l.value.into())).collect(),
                samples
                    .map(|x| (x.value.to_bits(), x.timestamp_ms))
                    .collect(),
            )
        })
        .collect()
}

/// The same shape from prost's decoding.
fn flat_prost(request: &pb::WriteRequest) -> Flat {
    request
        .timeseries
        .iter()
        .map(|s| {
            let labels = s.labels.iter();
            let samples = s.samples.iter();
            (
                labels.map(|l| (l.name.clone(), l.value.clone())).collect(),
                samples.map(|x| (x.value.to_bits(), x.timestamp)).collect(),
            )
        })
        .collect()
}

#[test]
fn resolved_labels_are_what_prost_decodes_on_random_and_corrupted_requests() {
    let mut rng = StdRng::seed_from_u64(0xdefe_44ed);
    let (mut compared, mut refused) = (0, 0);
    for _ in 0..3000 {
        let mut bytes = random_request(&mut rng).encode_to_vec();
        if rng.random_bool(0.3) && !bytes.is_empty() {
            let i = rng.random_range(0..bytes.len());
            bytes[i] = rng.random();
        }
        let ours = decode(&bytes).and_then(|mut r| r.resolve_all().map(|()| r));
        match (pb::WriteRequest::decode(bytes.as_slice()), ours) {
            (Ok(theirs), Ok(ours)) => {
                assert_eq!(flat(&ours), flat_prost(&theirs));
                compared += 1;
            }
            (Err(_), Err(_)) => refused += 1,
            (theirs, ours) => panic!("prost {theirs:?}, ours {ours:?}"),
        }
    }
    // Both kinds of outcome are exercised.
    assert!(compared > 1000 && refused > 100, "{compared} {refused}");
}

/// [`decode`] with every series resolved: the keys a receiver learns (never provisional).
fn walked(bytes: &[u8]) -> WriteRequestRef<'_> {
    let mut request = decode(bytes).unwrap();
    request.resolve_all().unwrap();
    request
}

#[test]
fn learned_keys_are_equal_exactly_when_labels_are_and_a_provisional_key_hits_only_its_own_labels() {
    let mut rng = StdRng::seed_from_u64(0x6b65_7973);
    let (mut same_key_pairs, mut provisional_hits, mut provisional_misses) = (0, 0, 0);
    for _ in 0..500 {
        let mut req = random_request(&mut rng);
        // Half the series again with other samples: the same label bytes in another series, with
        // one sample (a millisecond time, or a value of 0 that protobuf leaves out) or two.
        for i in 0..req.timeseries.len() {
            if rng.random_bool(0.5) {
                let mut again = req.timeseries[i].clone();
                let sample = |value| pb::Sample {
                    value,
                    timestamp: 1_764_000_000_000,
                };
                again.samples = match rng.random_range(0..3) {
                    0 => vec![sample(2.0)],
                    1 => vec![sample(0.0)],
                    _ => vec![sample(1.0), sample(2.0)],
                };
                req.timeseries.push(again);
            }
        }
        let bytes = req.encode_to_vec();
        let fresh = decode(&bytes).unwrap();
        let learned = walked(&bytes);
        for (i, a) in learned.series.iter().enumerate() {
            let la = &req.timeseries[i].labels;
            assert!(!provisional(a));
            // A series without labels is keyed by its (empty) label text, not by wire bytes.
            if la.is_empty() {
                continue;
            }
            for (j, b) in learned.series.iter().enumerate().skip(i + 1) {
                let lb = &req.timeseries[j].labels;
                if !lb.is_empty() {
                    assert_eq!(key(a) == key(b), la == lb, "{la:?} {lb:?}");
                    same_key_pairs += usize::from(key(a) == key(b));
                }
            }
        }
        for (i, f) in fresh.series.iter().enumerate() {
            if !provisional(f) {
                if !req.timeseries[i].labels.is_empty() {
                    assert_eq!(key(f), key(&learned.series[i]), "a walked key is final");
                }
                continue;
            }
            // Where a provisional key meets a learned one, the series is that one's labels and
            // exactly the sample the provisional decoding read.
            let mut hit = false;
            for (j, b) in learned.series.iter().enumerate() {
                if key(f).is_some() && key(f) == key(b) {
                    assert_eq!(req.timeseries[i].labels, req.timeseries[j].labels);
                    let want: Vec<_> = req.timeseries[i]
                        .samples
                        .iter()
                        .map(|x| (x.value.to_bits(), x.timestamp))
                        .collect();
                    let got: Vec<_> = f
                        .samples
                        .iter()
                        .map(|x| (x.value.to_bits(), x.timestamp_ms))
                        .collect();
                    assert_eq!(want, got);
                    hit = true;
                }
            }
            provisional_hits += usize::from(hit);
            provisional_misses += usize::from(key(f) != key(&learned.series[i]));
        }
    }
    assert!(same_key_pairs > 500, "{same_key_pairs}");
    assert!(
        provisional_hits > 500 && provisional_misses > 100,
        "{provisional_hits} {provisional_misses}"
    );
}

/// A `TimeSeries` field: key byte, one-byte length, bytes.
fn field(key: u8, bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![key, bytes.len() as u8];
    out.extend_from_slice(bytes);
    out
}

#[test]
fn a_label_after_a_sample_gives_no_wire_key_and_is_keyed_by_its_text_once_resolved() {
    let name = label("__name__", "up").encode_to_vec();
    let job = label("job", "x").encode_to_vec();
    let sample = pb::Sample {
        value: 1.0,
        timestamp: 5,
    }
    .encode_to_vec();
    let series = [field(0x0a, &name), field(0x12, &sample), field(0x0a, &job)].concat();
    let body = field(0x0a, &series);
    let request = decode(&body).unwrap();
    assert_eq!(key(&request.series[0]), None);
    let resolved = walked(&body);
    let labels = resolved.labels_of(&resolved.series[0]);
    assert_eq!(
        labels.iter().map(|l| (l.name, l.value)).collect::<Vec<_>>(),
        [("__name__", "up"), ("job", "x")]
    );
    let by_text = SeriesKey::of_labels(labels, &mut Vec::new());
    assert_eq!(key(&resolved.series[0]), Some(by_text));
    // The same labels encoded first get a wire key: that of their two fields' bytes.
    let leading = [field(0x0a, &name), field(0x0a, &job), field(0x12, &sample)].concat();
    let body = field(0x0a, &leading);
    let request = decode(&body).unwrap();
    let label_bytes = [field(0x0a, &name), field(0x0a, &job)].concat();
    assert_eq!(key(&request.series[0]), Some(SeriesKey::of(&label_bytes)));
}

#[test]
fn a_label_that_is_not_utf8_fails_when_resolved_as_prost_refuses_it() {
    let bad = pb::Label {
        name: "job".into(),
        value: "x".into(),
    }
    .encode_to_vec();
    // The value byte 'x' becomes 0xff: not UTF-8.
    let mut bad = bad;
    *bad.last_mut().unwrap() = 0xff;
    let body = field(0x0a, &field(0x0a, &bad));
    assert!(pb::WriteRequest::decode(body.as_slice()).is_err());
    let mut request = decode(&body).unwrap();
    let error = request
        .resolve(0, &mut LabelScratch::default())
        .unwrap_err();
    assert!(error.to_string().contains("UTF-8"), "{error}");
    assert!(matches!(request.series[0].labels, SeriesLabels::Pending(_)));
}

fn sample_field(value: f64, timestamp: i64) -> Vec<u8> {
    field(0x12, &pb::Sample { value, timestamp }.encode_to_vec())
}

#[test]
fn a_label_run_then_two_samples_or_an_exemplar_is_walked_for_all_it_holds() {
    let name = field(0x0a, &label("__name__", "up").encode_to_vec());
    let ts = 1_764_000_000_000;
    let two = [
        name.clone(),
        sample_field(1.0, ts),
        sample_field(2.0, ts + 1),
    ]
    .concat();
    let exemplar = field(0x1a, &[0x09, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f]);
    let with_exemplar = [name.clone(), exemplar, sample_field(3.0, ts)].concat();
    for (message, samples, exemplars) in [(two, 2, 0), (with_exemplar, 1, 1)] {
        let body = field(0x0a, &message);
        let fresh = decode(&body).unwrap();
        // Read without a walk: the last sample, and a key over everything before it.
        assert!(provisional(&fresh.series[0]));
        assert_eq!(fresh.series[0].samples.len(), 1);
        assert_ne!(key(&fresh.series[0]), Some(SeriesKey::of(&name)));
        let learned = walked(&body);
        assert_eq!(key(&learned.series[0]), Some(SeriesKey::of(&name)));
        assert_eq!(learned.series[0].samples.len(), samples);
        assert_eq!(learned.series[0].exemplars, exemplars);
        // (The exemplar's bytes are not a valid `Exemplar`, which the receiver never reads.)
        if let Ok(theirs) = pb::WriteRequest::decode(body.as_slice()) {
            assert_eq!(flat(&learned), flat_prost(&theirs));
        }
    }
}

#[test]
fn walking_provisional_keys_counts_every_sample_and_leaves_the_labels_pending() {
    let name = field(0x0a, &label("__name__", "up").encode_to_vec());
    let ts = 1_764_000_000_000;
    let two = [name, sample_field(1.0, ts), sample_field(2.0, ts + 1)].concat();
    let body = field(0x0a, &two);
    let mut request = decode(&body).unwrap();
    assert_eq!(
        request.sample_count(),
        1,
        "the provisional reading sees the tail"
    );
    request.walk_provisional().unwrap();
    assert_eq!(request.sample_count(), 2);
    assert!(!provisional(&request.series[0]));
    assert!(matches!(request.series[0].labels, SeriesLabels::Pending(_)));
}

#[test]
fn a_label_value_that_ends_like_a_sample_field_is_walked_not_cut() {
    // The last 18 bytes of the value read as key 0x12, length 16, value "abcdefgh" and a 6-byte
    // timestamp varint (five bytes with the high bit set, as in U+0800 and 'é', then 'x').
    let value = "v\u{12}\u{10}\u{9}abcdefgh\u{10}\u{800}éx";
    let message = field(0x0a, &label("__name__", value).encode_to_vec());
    let body = field(0x0a, &message);
    let fresh = decode(&body).unwrap();
    assert!(provisional(&fresh.series[0]));
    let learned = walked(&body);
    assert!(learned.series[0].samples.is_empty(), "no sample field");
    assert_eq!(key(&learned.series[0]), Some(SeriesKey::of(&message)));
    assert_ne!(key(&fresh.series[0]), key(&learned.series[0]));
    assert_eq!(learned.labels_of(&learned.series[0])[0].value, value);
}

#[test]
fn count_gives_the_series_and_samples_of_the_full_decode_without_decoding() {
    let mut rng = StdRng::seed_from_u64(0xc0_0417);
    for _ in 0..500 {
        let mut bytes = random_request(&mut rng).encode_to_vec();
        if rng.random_bool(0.2) && !bytes.is_empty() {
            let i = rng.random_range(0..bytes.len());
            bytes[i] = rng.random();
        }
        let full = decode(&bytes).and_then(|mut r| {
            r.resolve_all()?;
            Ok(r)
        });
        match (super::count(&bytes), full) {
            (Ok(counts), Ok(request)) => {
                assert_eq!(counts.series, request.series.len());
                assert_eq!(counts.samples, request.sample_count());
            }
            // Counting reads no label, so it may accept a body whose labels do not decode.
            (Ok(_), Err(_)) | (Err(_), Err(_)) => {}
            (Err(e), Ok(_)) => panic!("counted as bad, decoded fine: {e}"),
        }
    }
}

#[test]
fn decode_at_most_refuses_a_body_over_its_series_before_decoding_any() {
    let req = pb::WriteRequest {
        timeseries: vec![pb::TimeSeries::default(); 5],
        metadata: Vec::new(),
    };
    let bytes = req.encode_to_vec();
    assert_eq!(
        super::decode_at_most(&bytes, 4).unwrap_err(),
        crate::ProtocolError::TooManySeries {
            series: 5,
            limit: 4
        }
    );
    assert_eq!(super::decode_at_most(&bytes, 5).unwrap().series.len(), 5);
}
