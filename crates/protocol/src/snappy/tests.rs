//! Tests of `snappy.rs`.

use super::*;
use std::io::Write;

const CAP: usize = 32 << 20;

#[test]
fn round_trips_a_block_body_and_reuses_the_buffer() {
    let text = b"vllm:inter_token_latency_seconds_bucket".repeat(50);
    let body = snap::raw::Encoder::new().compress_vec(&text).unwrap();
    let mut out = vec![7u8; 4096]; // stale content that must not leak into the result
    decompress_into(&body, CAP, &mut out).unwrap();
    assert_eq!(out, text);
    // A second, shorter body into the same buffer yields exactly its own bytes.
    let body = snap::raw::Encoder::new().compress_vec(b"abc").unwrap();
    decompress_into(&body, CAP, &mut out).unwrap();
    assert_eq!(out, b"abc");
}

#[test]
fn header_declaring_2_5_gib_is_rejected_before_allocating() {
    // 2.5 GiB = 2_684_354_560 = 0xA000_0000. As a little-endian base-128 varint:
    // 7-bit groups from the low end: 0x00, 0x00, 0x00, 0x00, 0x0A
    // (0xA000_0000 >> 28 = 0x0A, lower 28 bits are all zero), so the bytes are
    // 0x80 0x80 0x80 0x80 0x0A, followed by 42 bytes of junk: a 47-byte body.
    let mut body = vec![0x80, 0x80, 0x80, 0x80, 0x0A];
    body.extend_from_slice(&[0u8; 42]);
    assert_eq!(body.len(), 47);
    let mut out = Vec::new();
    let err = decompress_into(&body, CAP, &mut out).unwrap_err();
    assert_eq!(
        err,
        ProtocolError::DecodedTooLarge {
            declared: 2_684_354_560,
            cap: CAP as u64
        }
    );
    assert_eq!(
        out.capacity(),
        0,
        "nothing may be allocated for a rejected body"
    );
}

#[test]
fn header_over_the_format_limit_is_too_large_not_corrupt() {
    // 2^32 = 0x1_0000_0000: groups 0,0,0,0,0x10 -> 0x80 0x80 0x80 0x80 0x10.
    let body = [0x80, 0x80, 0x80, 0x80, 0x10, 0x00];
    let err = decompress_into(&body, CAP, &mut Vec::new()).unwrap_err();
    assert_eq!(
        err,
        ProtocolError::DecodedTooLarge {
            declared: 1 << 32,
            cap: CAP as u64
        }
    );
}

#[test]
fn declared_length_the_body_cannot_produce_is_rejected_before_allocating() {
    // 1 MiB = 0x10_0000: groups 0x00, 0x00, 0x40 -> 0x80 0x80 0x40. Under the 32 MiB cap, but
    // a 47-byte body expands to at most 47 * 22 = 1034 bytes.
    let mut body = vec![0x80, 0x80, 0x40];
    body.extend_from_slice(&[0u8; 44]);
    let mut out = Vec::new();
    let err = decompress_into(&body, CAP, &mut out).unwrap_err();
    assert!(matches!(err, ProtocolError::Snappy(_)), "{err:?}");
    assert_eq!(out.capacity(), 0);
}

#[test]
fn densest_valid_body_is_not_mistaken_for_an_impossible_one() {
    // Guards MAX_EXPANSION against being too tight: 1 MiB of zeros compresses to
    // about 1 MiB / 64 * 3 bytes of 64-byte copies, the densest the format allows.
    let text = vec![0u8; 1 << 20];
    let body = snap::raw::Encoder::new().compress_vec(&text).unwrap();
    let mut out = Vec::new();
    decompress_into(&body, CAP, &mut out).unwrap();
    assert_eq!(out.len(), 1 << 20);
}

#[test]
fn cap_is_inclusive() {
    let body = snap::raw::Encoder::new().compress_vec(&[1u8; 100]).unwrap();
    decompress_into(&body, 100, &mut Vec::new()).unwrap();
    let err = decompress_into(&body, 99, &mut Vec::new()).unwrap_err();
    assert_eq!(
        err,
        ProtocolError::DecodedTooLarge {
            declared: 100,
            cap: 99
        }
    );
}

#[test]
fn framed_snappy_is_rejected() {
    let mut enc = snap::write::FrameEncoder::new(Vec::new());
    enc.write_all(b"prometheus remote write body").unwrap();
    let framed = enc.into_inner().unwrap();
    let err = decompress_into(&framed, CAP, &mut Vec::new()).unwrap_err();
    assert!(matches!(err, ProtocolError::Snappy(_)), "{err:?}");
}

#[test]
fn corrupt_and_empty_bodies_are_snappy_errors() {
    let mut out = Vec::new();
    // Empty body: not even a length header.
    assert!(matches!(
        decompress_into(&[], CAP, &mut out),
        Err(ProtocolError::Snappy(_))
    ));
    // Header declares 10 bytes, then a literal tag for 5 bytes with only 2 present.
    let body = [10, 4 << 2, b'a', b'b'];
    assert!(matches!(
        decompress_into(&body, CAP, &mut out),
        Err(ProtocolError::Snappy(_))
    ));
    // A valid block with its last byte cut off.
    let good = snap::raw::Encoder::new()
        .compress_vec(b"hello, remote write")
        .unwrap();
    let cut = &good[..good.len() - 1];
    assert!(matches!(
        decompress_into(cut, CAP, &mut out),
        Err(ProtocolError::Snappy(_))
    ));
}
