//! Seeded randomized tests of the borrowed RW 2.0 decoder: prost encodes random requests (with
//! valid and invalid symbol references), both decoders read the bytes and must agree on every
//! field; corrupted bodies must never panic.

use prost::Message;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{decode, decode_both, pb};
use crate::STALE_NAN_BITS;

fn random_string(rng: &mut StdRng) -> String {
    const CHARS: [char; 8] = ['a', 'Z', '_', ':', '0', 'é', '日', '\u{0}'];
    (0..rng.random_range(0..6))
        .map(|_| CHARS[rng.random_range(0..CHARS.len())])
        .collect()
}

/// A reference into a table of `n` symbols, out of range one time in twenty.
fn random_ref(rng: &mut StdRng, n: usize) -> u32 {
    if rng.random_bool(0.05) {
        rng.random_range(n as u32..=u32::MAX)
    } else {
        rng.random_range(0..n as u32)
    }
}

fn random_request(rng: &mut StdRng) -> pb::Request {
    let mut symbols = vec![String::new()];
    symbols.extend((0..rng.random_range(0..10)).map(|_| random_string(rng)));
    let n = symbols.len();
    let special = [
        f64::from_bits(STALE_NAN_BITS),
        f64::NAN,
        f64::INFINITY,
        -0.0,
    ];
    let timeseries = (0..rng.random_range(0..8))
        .map(|_| pb::TimeSeries {
            // An odd length one time in ten.
            // Sometimes more than 12 pairs: a label set longer than a vLLM series'.
            labels_refs: (0..2
                * (rng.random_range(0..5) + if rng.random_bool(0.2) { 10 } else { 0 })
                + usize::from(rng.random_bool(0.1)))
                .map(|_| random_ref(rng, n))
                .collect(),
            samples: (0..rng.random_range(0..5))
                .map(|_| pb::Sample {
                    value: if rng.random_bool(0.3) {
                        special[rng.random_range(0..special.len())]
                    } else {
                        f64::from_bits(rng.random())
                    },
                    timestamp: rng.random(),
                    start_timestamp: if rng.random_bool(0.5) {
                        0
                    } else {
                        rng.random()
                    },
                })
                .collect(),
            histograms: (0..rng.random_range(0..3))
                .map(|_| pb::Histogram {
                    count: Some(pb::histogram::Count::CountInt(rng.random_range(0..20))),
                    sum: rng.random(),
                    schema: if rng.random_bool(0.7) {
                        -53
                    } else {
                        rng.random_range(-4..9)
                    },
                    positive_spans: (0..rng.random_range(0..3))
                        .map(|_| pb::BucketSpan {
                            offset: rng.random_range(-1..3),
                            length: rng.random_range(0..3),
                        })
                        .collect(),
                    positive_deltas: (0..rng.random_range(0..5))
                        .map(|_| rng.random_range(-3..4))
                        .collect(),
                    custom_values: (0..rng.random_range(0..5))
                        .map(|i| f64::from(i) * 0.5 + rng.random::<f64>() * 0.1)
                        .collect(),
                    timestamp: rng.random(),
                    start_timestamp: rng.random(),
                    ..Default::default()
                })
                .collect(),
            exemplars: (0..rng.random_range(0..3))
                .map(|_| pb::Exemplar {
                    labels_refs: vec![random_ref(rng, n); 2],
                    value: rng.random(),
                    timestamp: rng.random(),
                })
                .collect(),
            metadata: rng.random_bool(0.5).then(|| pb::Metadata {
                r#type: rng.random_range(-1..9),
                help_ref: random_ref(rng, n),
                unit_ref: random_ref(rng, n),
            }),
            created_timestamp: if rng.random_bool(0.5) {
                0
            } else {
                rng.random()
            },
        })
        .collect();
    pb::Request {
        symbols,
        timeseries,
    }
}

#[test]
fn randomized_requests_decode_like_prost() {
    let mut rng = StdRng::seed_from_u64(0x5eed_2002);
    for _ in 0..2000 {
        decode_both(&random_request(&mut rng).encode_to_vec());
    }
}

#[test]
fn randomly_corrupted_bodies_never_panic() {
    let mut rng = StdRng::seed_from_u64(11);
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

#[test]
fn count_gives_the_series_and_samples_of_the_decode() {
    let mut rng = StdRng::seed_from_u64(0xc0_0427);
    for _ in 0..500 {
        let bytes = random_request(&mut rng).encode_to_vec();
        match (crate::v2::count(&bytes), decode(&bytes)) {
            (Ok(counts), Ok(request)) => {
                assert_eq!(counts.series, request.series.len());
                assert_eq!(counts.samples, request.sample_count());
            }
            // Counting resolves no symbol, so it may accept a body whose symbols do not decode.
            (Ok(_), Err(_)) | (Err(_), Err(_)) => {}
            (Err(e), Ok(_)) => panic!("counted as bad, decoded fine: {e}"),
        }
    }
}
