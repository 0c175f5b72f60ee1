//! Tests of `key.rs`.

use super::*;
use std::collections::HashSet;

/// Label bytes as a vLLM pod's series encode them, `i` making pod, engine and bucket differ.
fn label_bytes(i: u32) -> Vec<u8> {
    let labels = [
        (
            "__name__",
            "vllm:inter_token_latency_seconds_bucket".to_owned(),
        ),
        ("engine", format!("{}", i % 2)),
        (
            "instance",
            format!("10.0.{}.{}:8000", i / 256 % 256, i % 256),
        ),
        ("job", "vllm".to_owned()),
        ("le", format!("{}", i % 17)),
        ("model_name", "meta-llama/Llama-3.1-8B-Instruct".to_owned()),
        ("pod", format!("vllm-{}", i / 34)),
    ];
    let mut out = Vec::new();
    for (name, value) in labels {
        let n = (name.len() + value.len() + 4) as u8;
        out.extend_from_slice(&[0x0a, n, 0x0a, name.len() as u8]);
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&[0x12, value.len() as u8]);
        out.extend_from_slice(value.as_bytes());
    }
    out
}

#[test]
fn distinct_label_sets_get_distinct_hashes_and_checks() {
    let n = 200_000;
    let (mut hashes, mut checks) = (HashSet::new(), HashSet::new());
    for i in 0..n {
        let key = SeriesKey::of(&label_bytes(i));
        hashes.insert(key.hash);
        checks.insert(key.check);
    }
    // 2·10⁵ random 64-bit values collide with probability ~10⁻⁹.
    assert_eq!((hashes.len(), checks.len()), (n as usize, n as usize));
}

#[test]
fn one_flipped_bit_changes_about_half_of_each_hash() {
    // Every bit of every length up to 300 bytes (each tail and step shape): both hashes change,
    // and on average close to 32 of their 64 bits do (an avalanche far from 32 would mean some
    // input bits barely reach the key).
    let base: Vec<u8> = (0..300u32).map(|i| (i * 131 + 7) as u8).collect();
    let (mut flips, mut changed_bits) = (0u64, [0u64; 2]);
    for len in 0..=base.len() {
        let input = &base[..len];
        let key = SeriesKey::of(input);
        for bit in 0..len * 8 {
            let mut flipped = input.to_vec();
            flipped[bit / 8] ^= 1 << (bit % 8);
            let other = SeriesKey::of(&flipped);
            assert_ne!(key.hash, other.hash, "len {len} bit {bit}");
            assert_ne!(key.check, other.check, "len {len} bit {bit}");
            changed_bits[0] += u64::from((key.hash ^ other.hash).count_ones());
            changed_bits[1] += u64::from((key.check ^ other.check).count_ones());
            flips += 1;
        }
    }
    for changed in changed_bits {
        let mean = changed as f64 / flips as f64;
        assert!((31.0..33.0).contains(&mean), "mean {mean} bits changed");
    }
}

#[test]
fn inputs_that_differ_only_in_length_differ() {
    // No length prefix is hashed: the length must still tell inputs of zeros apart (foldhash
    // folds it into its state, and reads short inputs with overlapping loads).
    let mut seen = HashSet::new();
    for len in 0..100 {
        let key = SeriesKey::of(&vec![0u8; len]);
        assert!(seen.insert(key.hash), "len {len}");
        assert!(seen.insert(key.check), "len {len}");
    }
}

#[test]
fn the_two_hashes_are_not_related() {
    // The check is compared only after the hash matched: it must not follow from it. Over
    // distinct inputs, hash and check agree on about half of their bits.
    let mut agree = 0u64;
    let n = 10_000;
    for i in 0..n {
        let key = SeriesKey::of(&label_bytes(i));
        agree += u64::from((!(key.hash ^ key.check)).count_ones());
    }
    let mean = agree as f64 / f64::from(n);
    assert!((31.0..33.0).contains(&mean), "mean {mean}");
}

#[test]
fn sixteen_bytes_equal_to_foldhashs_fixed_constant_do_not_erase_the_bytes_before_them() {
    // foldhash's fixed shared seed (`FixedState`) starts with 0xc0ac29b7c97c50dd. A run whose last
    // 16 bytes are that constant twice zeroed both multiplications of both passes, so the 120
    // bytes before it no longer reached the key (found by a fresh user, issue 14's review).
    let tail = 0xc0ac_29b7_c97c_50dd_u64.to_le_bytes().repeat(2);
    let a = [vec![b'a'; 120], tail.clone()].concat();
    let mut b = a.clone();
    b[3] = b'b';
    let (ka, kb) = (SeriesKey::of(&a), SeriesKey::of(&b));
    assert_ne!(ka.hash, kb.hash);
    assert_ne!(ka.check, kb.check);
}
