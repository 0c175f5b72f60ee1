//! Tests of [`super::decode_deferred`]: the labels it leaves pending decode exactly as
//! [`super::decode`] decodes them, and a series' key is a function of its label bytes alone.

use prost::Message;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{decode, decode_deferred, decode_pending_labels};
use crate::prompb::v1 as pb;
use crate::{LabelScratch, SeriesKey, WriteRequestRef};

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

/// The deferred decoding of `bytes` with every series' labels decoded.
fn deferred_in_full(bytes: &[u8]) -> Result<WriteRequestRef<'_>, crate::ProtocolError> {
    let mut request = decode_deferred(bytes)?;
    let mut scratch = LabelScratch::default();
    for series in &mut request.series {
        decode_pending_labels(series, &mut scratch)?;
        series.key = None;
        assert_eq!(series.pending_labels, None);
    }
    Ok(request)
}

#[test]
fn deferred_labels_decode_like_the_eager_decoder_on_random_and_corrupted_requests() {
    let mut rng = StdRng::seed_from_u64(0xdefe_44ed);
    let (mut compared, mut refused) = (0, 0);
    for _ in 0..3000 {
        let mut bytes = random_request(&mut rng).encode_to_vec();
        if rng.random_bool(0.3) && !bytes.is_empty() {
            let i = rng.random_range(0..bytes.len());
            bytes[i] = rng.random();
        }
        match (decode(&bytes), deferred_in_full(&bytes)) {
            (Ok(eager), Ok(deferred)) => {
                assert_eq!(eager, deferred);
                compared += 1;
            }
            (Err(_), Err(_)) => refused += 1,
            (eager, deferred) => panic!("eager {eager:?}, deferred {deferred:?}"),
        }
    }
    // Both kinds of outcome are exercised.
    assert!(compared > 1000 && refused > 100, "{compared} {refused}");
}

/// [`decode_deferred`] with every series walked by [`decode_pending_labels`]: the keys a receiver
/// learns.
fn walked(bytes: &[u8]) -> WriteRequestRef<'_> {
    let mut request = decode_deferred(bytes).unwrap();
    for series in &mut request.series {
        decode_pending_labels(series, &mut LabelScratch::default()).unwrap();
        assert!(!series.provisional_key);
    }
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
        let fresh = decode_deferred(&bytes).unwrap();
        let learned = walked(&bytes);
        let eager = decode(&bytes).unwrap();
        for (i, a) in learned.series.iter().enumerate() {
            let la = &eager.series[i].labels;
            assert_eq!(a.key.is_none(), la.is_empty(), "no label, no key");
            for (j, b) in learned.series.iter().enumerate().skip(i + 1) {
                let lb = &eager.series[j].labels;
                if !la.is_empty() && !lb.is_empty() {
                    assert_eq!(a.key == b.key, la == lb, "{la:?} {lb:?}");
                    same_key_pairs += usize::from(a.key == b.key);
                }
            }
        }
        for (i, f) in fresh.series.iter().enumerate() {
            if !f.provisional_key {
                assert_eq!(
                    f.key, learned.series[i].key,
                    "a walked series' key is final"
                );
                continue;
            }
            // Where a provisional key meets a learned one, the series is that one's labels and
            // exactly the sample the provisional decoding read.
            let mut hit = false;
            for (j, b) in learned.series.iter().enumerate() {
                if f.key.is_some() && f.key == b.key {
                    assert_eq!(eager.series[i].labels, eager.series[j].labels);
                    assert_eq!(eager.series[i].samples, f.samples);
                    assert!(eager.series[i].histograms.is_empty());
                    hit = true;
                }
            }
            provisional_hits += usize::from(hit);
            provisional_misses += usize::from(f.key != learned.series[i].key);
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
fn a_label_after_a_sample_gives_no_key_and_the_same_labels() {
    let name = label("__name__", "up").encode_to_vec();
    let job = label("job", "x").encode_to_vec();
    let sample = pb::Sample {
        value: 1.0,
        timestamp: 5,
    }
    .encode_to_vec();
    let series = [field(0x0a, &name), field(0x12, &sample), field(0x0a, &job)].concat();
    let body = field(0x0a, &series);
    let request = decode_deferred(&body).unwrap();
    assert_eq!(request.series[0].key, None);
    assert_eq!(deferred_in_full(&body).unwrap(), decode(&body).unwrap());
    // The same labels encoded first get a key: that of their two fields' bytes.
    let leading = [field(0x0a, &name), field(0x0a, &job), field(0x12, &sample)].concat();
    let body = field(0x0a, &leading);
    let request = decode_deferred(&body).unwrap();
    let label_bytes = [field(0x0a, &name), field(0x0a, &job)].concat();
    assert_eq!(request.series[0].key, Some(SeriesKey::of(&label_bytes)));
}

#[test]
fn a_label_that_is_not_utf8_fails_when_its_labels_are_decoded_with_the_eager_error() {
    let bad = pb::Label {
        name: "job".into(),
        value: "x".into(),
    }
    .encode_to_vec();
    // The value byte 'x' becomes 0xff: not UTF-8.
    let mut bad = bad;
    *bad.last_mut().unwrap() = 0xff;
    let body = field(0x0a, &field(0x0a, &bad));
    let eager = decode(&body).unwrap_err();
    let mut request = decode_deferred(&body).unwrap();
    let deferred =
        decode_pending_labels(&mut request.series[0], &mut LabelScratch::default()).unwrap_err();
    assert_eq!(eager, deferred);
    assert!(request.series[0].labels.is_empty());
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
    for message in [two, with_exemplar] {
        let body = field(0x0a, &message);
        let fresh = decode_deferred(&body).unwrap();
        // Read without a walk: the last sample, and a key over everything before it.
        assert!(fresh.series[0].provisional_key);
        assert_eq!(fresh.series[0].samples.len(), 1);
        let provisional = fresh.series[0].key;
        assert_ne!(provisional, Some(SeriesKey::of(&name)));
        let learned = walked(&body);
        assert_eq!(learned.series[0].key, Some(SeriesKey::of(&name)));
        assert_eq!(deferred_in_full(&body).unwrap(), decode(&body).unwrap());
    }
}

#[test]
fn a_label_value_that_ends_like_a_sample_field_is_walked_not_cut() {
    // The last 18 bytes of the value read as key 0x12, length 16, value "abcdefgh" and a 6-byte
    // timestamp varint (five bytes with the high bit set, as in U+0800 and 'é', then 'x').
    let value = "v\u{12}\u{10}\u{9}abcdefgh\u{10}\u{800}éx";
    let message = field(0x0a, &label("__name__", value).encode_to_vec());
    let body = field(0x0a, &message);
    let fresh = decode_deferred(&body).unwrap();
    assert!(fresh.series[0].provisional_key);
    let learned = walked(&body);
    assert!(learned.series[0].samples.is_empty(), "no sample field");
    assert_eq!(learned.series[0].key, Some(SeriesKey::of(&message)));
    assert_ne!(fresh.series[0].key, learned.series[0].key);
    assert_eq!(learned.series[0].labels[0].value, value);
}
