//! Seeded randomized tests of the borrowed RW 1.0 decoder: prost encodes random requests, both
//! decoders read the bytes, every field must agree; corrupted bodies must never panic.

use prost::Message;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{decode, decode_both, label, pb};
use crate::STALE_NAN_BITS;

fn random_string(rng: &mut StdRng) -> String {
    const CHARS: [char; 8] = ['a', 'Z', '_', ':', '0', 'é', '日', '\u{0}'];
    (0..rng.random_range(0..6))
        .map(|_| CHARS[rng.random_range(0..CHARS.len())])
        .collect()
}

fn random_request(rng: &mut StdRng) -> pb::WriteRequest {
    let special = [
        f64::from_bits(STALE_NAN_BITS),
        f64::NAN,
        f64::INFINITY,
        -0.0,
        0.0,
    ];
    let timeseries = (0..rng.random_range(0..8))
        .map(|_| pb::TimeSeries {
            // Sometimes more than 12: a label set longer than a vLLM series'.
            labels: (0..rng.random_range(0..6) + if rng.random_bool(0.2) { 10 } else { 0 })
                .map(|_| label(&random_string(rng), &random_string(rng)))
                .collect(),
            samples: (0..rng.random_range(0..5))
                .map(|_| pb::Sample {
                    value: if rng.random_bool(0.3) {
                        special[rng.random_range(0..special.len())]
                    } else {
                        f64::from_bits(rng.random())
                    },
                    timestamp: rng.random(),
                })
                .collect(),
            exemplars: (0..rng.random_range(0..3))
                .map(|_| pb::Exemplar {
                    labels: vec![label("trace_id", &random_string(rng))],
                    value: rng.random(),
                    timestamp: rng.random(),
                })
                .collect(),
            histograms: (0..rng.random_range(0..3))
                .map(|_| pb::Histogram {
                    count: Some(pb::histogram::Count::CountInt(rng.random())),
                    schema: rng.random_range(-53..9),
                    positive_deltas: vec![rng.random(); rng.random_range(0..4)],
                    custom_values: vec![rng.random(); rng.random_range(0..4)],
                    timestamp: rng.random(),
                    ..Default::default()
                })
                .collect(),
        })
        .collect();
    let metadata = (0..rng.random_range(0..4))
        .map(|_| pb::MetricMetadata {
            r#type: rng.random_range(-2..10),
            metric_family_name: random_string(rng),
            help: random_string(rng),
            unit: random_string(rng),
        })
        .collect();
    pb::WriteRequest {
        timeseries,
        metadata,
    }
}

#[test]
fn randomized_requests_decode_like_prost() {
    let mut rng = StdRng::seed_from_u64(0x5eed_2026);
    for _ in 0..2000 {
        let req = random_request(&mut rng);
        // Compare with prost's decoding of the bytes, not with `req`: proto3 does not encode
        // default values, so a -0.0 sample value comes back from the wire as +0.0.
        decode_both(&req.encode_to_vec());
    }
}

#[test]
fn randomly_corrupted_bodies_never_panic() {
    let mut rng = StdRng::seed_from_u64(7);
    for _ in 0..2000 {
        let mut bytes = random_request(&mut rng).encode_to_vec();
        if bytes.is_empty() {
            continue;
        }
        for _ in 0..rng.random_range(1..4) {
            let i = rng.random_range(0..bytes.len());
            bytes[i] = rng.random();
        }
        let cut = rng.random_range(0..=bytes.len());
        let _ = decode(&bytes[..cut]);
    }
}
