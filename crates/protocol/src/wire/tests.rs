//! Tests of `wire.rs`.

use super::*;

#[test]
fn zigzag_maps_small_magnitudes_to_small_codes() {
    // From the protobuf encoding guide's table: 0 -> 0, -1 -> 1, 1 -> 2, -2 -> 3,
    // 2147483647 -> 4294967294, -2147483648 -> 4294967295.
    assert_eq!(zigzag64(0), 0);
    assert_eq!(zigzag64(1), -1);
    assert_eq!(zigzag64(2), 1);
    assert_eq!(zigzag64(3), -2);
    assert_eq!(zigzag64(u64::MAX), i64::MIN);
    assert_eq!(zigzag64(u64::MAX - 1), i64::MAX);
    // sint32 -53 (the custom-buckets schema) is 2·53 - 1 = 105 = 0x69: one varint byte.
    assert_eq!(Reader::new(&[0x69], "t").sint32().unwrap(), -53);
    assert_eq!(
        Reader::new(&[0xfe, 0xff, 0xff, 0xff, 0x0f], "t")
            .sint32()
            .unwrap(),
        i32::MAX
    );
}

/// The byte-at-a-time reading of the protobuf encoding guide, independent of `Reader`.
fn reference_varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &b) in bytes.iter().enumerate().take(10) {
        if i == 9 && b > 1 {
            return None;
        }
        value |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return Some((value, i + 1));
        }
    }
    None
}

#[test]
fn varints_read_as_the_encoding_guide_reads_them() {
    // Every length 1 to 10, each followed by 0 to 9 bytes of the message (the inlined short
    // paths, the byte loop and `varint_at_end`'s word read all run), values at the edges of
    // each length and a mix between.
    let mut values = vec![
        0u64,
        1,
        127,
        128,
        300,
        1_700_000_000_000,
        u64::MAX,
        u64::MAX - 1,
    ];
    for bits in 1..64 {
        values.extend([(1u64 << bits) - 1, 1u64 << bits, (1u64 << bits) | 0x55]);
    }
    for value in values {
        let mut enc = Vec::new();
        let mut v = value;
        while v >= 0x80 {
            enc.push((v as u8) | 0x80);
            v >>= 7;
        }
        enc.push(v as u8);
        for trailing in 0..10 {
            let mut msg = enc.clone();
            msg.extend(std::iter::repeat_n(0xffu8, trailing));
            let mut r = Reader::new(&msg, "t");
            assert_eq!(r.varint().unwrap(), value, "{msg:x?}");
            assert_eq!(r.position(), enc.len(), "{msg:x?}");
            // The same varint ending a message, after `trailing` bytes of something else.
            let mut ending = vec![0x80u8; trailing];
            ending.extend_from_slice(&enc);
            let filled = varint_filling(&ending, trailing);
            if enc.len() <= 8 && ending.len() >= 8 {
                assert_eq!(filled, Some(value), "{ending:x?}");
            } else {
                assert_eq!(filled, None, "{ending:x?}");
            }
        }
    }
    // Truncated and overlong varints, with and without 8 readable bytes: the reference's verdict.
    for msg in [
        &[0x80u8; 3][..],
        &[0x80; 8],
        &[0x80; 9],
        &[0x80; 12],
        &[
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0,
        ],
        &[
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 0,
        ],
        &[0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, 0x05],
    ] {
        let mut r = Reader::new(msg, "t");
        assert_eq!(
            r.varint().ok().map(|v| (v, r.position())),
            reference_varint(msg),
            "{msg:x?}"
        );
    }
}

#[test]
fn a_varint_filling_the_message_is_read_only_when_it_ends_exactly_there() {
    // Every 1- to 3-byte pattern from a set of edge bytes, after 8 bytes of prefix: decided
    // as a `Reader` decides "one varint, then the end of the message".
    let edge = [0x00u8, 0x01, 0x7f, 0x80, 0x81, 0xff];
    let mut patterns: Vec<Vec<u8>> = Vec::new();
    for &a in &edge {
        patterns.push(vec![a]);
        for &b in &edge {
            patterns.push(vec![a, b]);
            for &c in &edge {
                patterns.push(vec![a, b, c]);
            }
        }
    }
    patterns.push(vec![0x80; 8]);
    patterns.push(vec![0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]);
    for tail in patterns {
        let mut m = vec![0x80u8; 8];
        m.extend_from_slice(&tail);
        let mut r = Reader::new(&tail, "t");
        let expected = r.varint().ok().filter(|_| r.at_end());
        assert_eq!(varint_filling(&m, 8), expected, "{tail:x?}");
    }
}

#[test]
fn packed_and_unpacked_repeated_fields_read_alike() {
    let mut got = Vec::new();
    // Packed: length 3, then varints 1, 300 (0xac 0x02).
    let mut r = Reader::new(&[3, 0x01, 0xac, 0x02], "t");
    r.repeated_varint(1, Wire::Len, |v| got.push(v)).unwrap();
    let mut r = Reader::new(&[0x05], "t");
    r.repeated_varint(1, Wire::Varint, |v| got.push(v)).unwrap();
    assert_eq!(got, [1, 300, 5]);
    let mut r = Reader::new(&[3, 0, 0, 0], "t");
    assert!(r.repeated_double(16, Wire::Len, |_| {}).is_err(), "3 bytes");
    let mut r = Reader::new(&[0x01], "t");
    assert!(r.repeated_varint(1, Wire::Fixed32, |_| {}).is_err());
    let mut r = Reader::new(&[2, 0x80, 0x80], "t");
    assert!(
        r.repeated_varint(1, Wire::Len, |_| {}).is_err(),
        "truncated"
    );
}

/// A length-delimited field: key (`field`, wire type 2) and length as varints, then `len` bytes.
fn len_field(field: u32, len: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for mut v in [u64::from(field << 3 | 2), len as u64] {
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    out.extend(std::iter::repeat_n(0x2a, len));
    out
}

#[test]
fn counting_fields_gives_the_counts_of_the_fields_written_and_the_errors_of_the_general_reader() {
    // Field-1 values of every length class around the two-byte fast run (127: one length byte;
    // 128 and 16 383: two; 16 384: three), a field 3 in between, then field 1 again.
    let lengths = [200, 128, 16_383, 127, 300, 16_384, 0, 250];
    let mut body = Vec::new();
    for (i, len) in lengths.iter().enumerate() {
        body.extend(len_field(1, *len));
        if i == 2 {
            body.extend(len_field(3, 5));
        }
    }
    body.extend(len_field(1, 140));
    assert_eq!(count_fields(&body, "t", [1, 3]).unwrap(), [9, 1]);
    // The same body cut inside its last value: the fast run stops, the general reader refuses it.
    let cut = &body[..body.len() - 1];
    assert!(count_fields(cut, "t", [1, 3]).is_err());
    // Cut inside the first (fast-run) value as well.
    assert!(count_fields(&body[..100], "t", [1, 3]).is_err());
    // An overlong two-byte length (0x80 0x00 = 0) is left to the general reader, which reads it
    // as 0 as the encoding guide does: two empty field-1 values.
    let overlong = [0x0a, 0x80, 0x00, 0x0a, 0x00];
    assert_eq!(reference_varint(&overlong[1..]), Some((0, 2)));
    assert_eq!(count_fields(&overlong, "t", [1, 3]).unwrap(), [2, 0]);
}
