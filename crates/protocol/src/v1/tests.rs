//! Tests of the borrowed RW 1.0 decoder, with the prost-generated types as the oracle.

mod random;

/// [`super::decode`] with every series resolved: the whole request decoded, as prost decodes it.
fn decode(bytes: &[u8]) -> Result<WriteRequestRef<'_>, ProtocolError> {
    let mut request = super::decode(bytes)?;
    request.resolve_all()?;
    Ok(request)
}
use crate::prompb::v1 as pb;
use crate::{
    MetadataDropReason, MetricType, ProtocolError, STALE_NAN_BITS, WriteRequestRef, is_stale_marker,
};
use prost::Message;

/// Hand-written protobuf bytes, for messages prost would never produce (order, unknown fields).
#[derive(Default)]
struct W(Vec<u8>);

impl W {
    fn varint(mut self, mut v: u64) -> Self {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
        self
    }
    fn key(self, field: u32, wire: u8) -> Self {
        self.varint(u64::from(field) << 3 | u64::from(wire))
    }
    fn uint(self, field: u32, v: u64) -> Self {
        self.key(field, 0).varint(v)
    }
    fn fixed64(mut self, field: u32, v: u64) -> Self {
        self = self.key(field, 1);
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn fixed32(mut self, field: u32, v: u32) -> Self {
        self = self.key(field, 5);
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn bytes(mut self, field: u32, b: &[u8]) -> Self {
        self = self.key(field, 2).varint(b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }
    fn msg(self, field: u32, m: W) -> Self {
        self.bytes(field, &m.0)
    }
    /// One unknown field of each accepted wire type, numbered from `first`.
    fn unknowns(self, first: u32) -> Self {
        self.uint(first, 300)
            .fixed64(first + 1, 7)
            .bytes(first + 2, b"\xff\x00junk")
            .fixed32(first + 3, 9)
    }
}

fn label(name: &str, value: &str) -> pb::Label {
    pb::Label {
        name: name.into(),
        value: value.into(),
    }
}

/// Every decoded field in one comparable shape: per series (labels, (value bits, timestamp),
/// exemplar count, histogram count), then per metadata (type, family, help, unit). Value bits, not
/// floats, so NaNs compare exactly.
type Flat<'a> = (
    Vec<(Vec<(&'a str, &'a str)>, Vec<(u64, i64)>, usize, usize)>,
    Vec<(i32, &'a str, &'a str, &'a str)>,
);

fn flat_ours<'a>(r: &WriteRequestRef<'a>) -> Flat<'a> {
    let series = r.series.iter().map(|s| {
        let labels = r.labels_of(s).iter().map(|l| (l.name, l.value)).collect();
        let samples = s
            .samples
            .iter()
            .map(|x| (x.value.to_bits(), x.timestamp_ms))
            .collect();
        (labels, samples, s.exemplars as usize, s.histograms.len())
    });
    let metadata = r
        .metadata
        .iter()
        .map(|m| (m.metric_type.to_wire(), m.family_name, m.help, m.unit));
    (series.collect(), metadata.collect())
}

fn flat_prost(r: &pb::WriteRequest) -> Flat<'_> {
    let series = r.timeseries.iter().map(|s| {
        let labels = s
            .labels
            .iter()
            .map(|l| (l.name.as_str(), l.value.as_str()))
            .collect();
        let samples = s
            .samples
            .iter()
            .map(|x| (x.value.to_bits(), x.timestamp))
            .collect();
        (labels, samples, s.exemplars.len(), s.histograms.len())
    });
    let metadata = r
        .metadata
        .iter()
        .map(|m| (m.r#type, &*m.metric_family_name, &*m.help, &*m.unit));
    (series.collect(), metadata.collect())
}

/// Asserts that every field our decoder returns equals prost's decoding of the same bytes.
fn assert_same(ours: &WriteRequestRef<'_>, theirs: &pb::WriteRequest) {
    assert_eq!(flat_ours(ours), flat_prost(theirs));
}

/// Decodes `bytes` with both decoders, asserts they agree, and returns prost's result.
fn decode_both(bytes: &[u8]) -> pb::WriteRequest {
    let theirs = pb::WriteRequest::decode(bytes).expect("prost decodes the test body");
    let ours = decode(bytes).expect("our decoder decodes the test body");
    assert_same(&ours, &theirs);
    // prost accepted every string as UTF-8, so no metadata entry may be missing.
    assert_eq!(ours.metadata_dropped.total(), 0);
    theirs
}

fn sample_request() -> pb::WriteRequest {
    pb::WriteRequest {
        timeseries: vec![
            pb::TimeSeries {
                labels: vec![
                    label("__name__", "vllm:generation_tokens_total"),
                    label("engine", "0"),
                ],
                samples: vec![pb::Sample {
                    value: 42.5,
                    timestamp: 1_700_000_000_000,
                }],
                exemplars: vec![pb::Exemplar {
                    labels: vec![label("trace_id", "abc")],
                    value: 0.25,
                    timestamp: 5,
                }],
                histograms: vec![],
            },
            pb::TimeSeries {
                labels: vec![label("__name__", "up")],
                samples: vec![
                    pb::Sample {
                        value: 1.0,
                        timestamp: 10,
                    },
                    pb::Sample {
                        value: 0.0,
                        timestamp: 20,
                    },
                ],
                exemplars: vec![],
                histograms: vec![
                    pb::Histogram {
                        sum: 3.0,
                        schema: -53,
                        ..Default::default()
                    };
                    2
                ],
            },
        ],
        metadata: vec![pb::MetricMetadata {
            r#type: 1,
            metric_family_name: "vllm:generation_tokens".into(),
            help: "Number of generation tokens processed.".into(),
            unit: "tokens".into(),
        }],
    }
}

#[test]
fn prost_encoded_request_decodes_field_by_field() {
    let bytes = sample_request().encode_to_vec();
    decode_both(&bytes);
    // And against the values written above, by hand.
    let req = decode(&bytes).unwrap();
    assert_eq!(
        req.labels_of(&req.series[0])[0].value,
        "vllm:generation_tokens_total"
    );
    assert_eq!(req.series[0].samples[0].value, 42.5);
    assert_eq!(req.series[0].samples[0].timestamp_ms, 1_700_000_000_000);
    assert_eq!(
        (req.series[0].exemplars, req.series[0].histograms.len()),
        (1, 0)
    );
    assert_eq!(
        (req.series[1].exemplars, req.series[1].histograms.len()),
        (0, 2)
    );
    assert_eq!(req.metadata[0].metric_type, MetricType::Counter);
    assert_eq!(req.metadata[0].unit, "tokens");
}

#[test]
fn fields_in_reverse_order_decode_the_same() {
    let sample = W::default().uint(2, 1234).fixed64(1, 2.5f64.to_bits());
    let name = W::default().bytes(2, b"up").bytes(1, b"__name__");
    let series = W::default()
        .msg(3, W::default())
        .msg(2, sample)
        .msg(1, name);
    let metadata = W::default()
        .bytes(5, b"s")
        .bytes(4, b"h")
        .bytes(2, b"fam")
        .uint(1, 2);
    let bytes = W::default().msg(3, metadata).msg(1, series).0;
    let theirs = decode_both(&bytes);
    let req = decode(&bytes).unwrap();
    assert_eq!(
        (
            req.labels_of(&req.series[0])[0].name,
            req.labels_of(&req.series[0])[0].value
        ),
        ("__name__", "up")
    );
    assert_eq!(
        (
            req.series[0].samples[0].value,
            req.series[0].samples[0].timestamp_ms
        ),
        (2.5, 1234)
    );
    assert_eq!(req.series[0].exemplars, 1);
    assert_eq!(req.metadata[0].metric_type, MetricType::Gauge);
    assert_eq!(
        (
            req.metadata[0].family_name,
            req.metadata[0].help,
            req.metadata[0].unit
        ),
        ("fam", "h", "s")
    );
    assert_eq!(theirs.timeseries.len(), 1);
}

#[test]
fn unknown_fields_of_every_wire_type_are_skipped_at_every_level() {
    let sample = W::default()
        .unknowns(3)
        .fixed64(1, 1.5f64.to_bits())
        .unknowns(10)
        .uint(2, 99);
    let name = W::default()
        .unknowns(3)
        .bytes(1, b"__name__")
        .unknowns(20)
        .bytes(2, b"x");
    let series = W::default()
        .unknowns(5)
        .msg(1, name)
        .unknowns(9)
        .msg(2, sample)
        .unknowns(100);
    let metadata = W::default()
        .unknowns(6)
        .uint(1, 5)
        .bytes(3, b"field 3 is not read")
        .bytes(2, b"x");
    let bytes = W::default()
        .bytes(2, b"reserved field 2")
        .uint(2, 1)
        .unknowns(4)
        .msg(1, series)
        .unknowns(536_870_900) // near the largest field number, 2^29 - 1
        .msg(3, metadata)
        .0;
    decode_both(&bytes);
    let req = decode(&bytes).unwrap();
    assert_eq!(req.series.len(), 1);
    assert_eq!(req.series[0].samples[0].value, 1.5);
    assert_eq!(req.series[0].samples[0].timestamp_ms, 99);
    assert_eq!(req.labels_of(&req.series[0])[0].value, "x");
    assert_eq!(req.metadata[0].metric_type, MetricType::Summary);
}

#[test]
fn negative_timestamps_decode_as_twos_complement() {
    // int64 -1 is the varint of u64::MAX: nine 0xff bytes then 0x01. i64::MIN is 2^63.
    let bytes = W::default()
        .msg(
            1,
            W::default()
                .msg(2, W::default().uint(2, u64::MAX))
                .msg(2, W::default().uint(2, 1 << 63)),
        )
        .0;
    // Bytes: 0x0a len (series), 0x12 len (sample), 0x10 (timestamp key), then the varint.
    assert_eq!(
        &bytes[5..15],
        &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]
    );
    decode_both(&bytes);
    let req = decode(&bytes).unwrap();
    assert_eq!(req.series[0].samples[0].timestamp_ms, -1);
    assert_eq!(req.series[0].samples[1].timestamp_ms, i64::MIN);
    let enc = pb::WriteRequest {
        timeseries: vec![pb::TimeSeries {
            samples: vec![pb::Sample {
                value: 0.0,
                timestamp: -86_400_000,
            }],
            ..Default::default()
        }],
        metadata: vec![],
    };
    assert_eq!(
        decode(&enc.encode_to_vec()).unwrap().series[0].samples[0].timestamp_ms,
        -86_400_000
    );
}

#[test]
fn stale_marker_bit_pattern_survives_decode_exactly() {
    let mut req = sample_request();
    req.timeseries[1].samples[1].value = f64::from_bits(STALE_NAN_BITS);
    // A different NaN must stay a different NaN.
    req.timeseries[1].samples[0].value = f64::from_bits(0x7ff8_0000_0000_0001);
    let bytes = req.encode_to_vec();
    decode_both(&bytes);
    let ours = decode(&bytes).unwrap();
    assert_eq!(
        ours.series[1].samples[1].value.to_bits(),
        0x7ff0_0000_0000_0002
    );
    assert!(is_stale_marker(ours.series[1].samples[1].value));
    assert_eq!(
        ours.series[1].samples[0].value.to_bits(),
        0x7ff8_0000_0000_0001
    );
    assert!(!is_stale_marker(ours.series[1].samples[0].value));
}

#[test]
fn metadata_types_map_from_the_wire() {
    let types = [
        (0, MetricType::Unknown),
        (1, MetricType::Counter),
        (2, MetricType::Gauge),
        (3, MetricType::Histogram),
        (4, MetricType::GaugeHistogram),
        (5, MetricType::Summary),
        (6, MetricType::Info),
        (7, MetricType::StateSet),
        (8, MetricType::Other(8)),
        (-1, MetricType::Other(-1)),
    ];
    let req = pb::WriteRequest {
        timeseries: vec![],
        metadata: types
            .iter()
            .map(|&(t, _)| pb::MetricMetadata {
                r#type: t,
                ..Default::default()
            })
            .collect(),
    };
    let bytes = req.encode_to_vec();
    decode_both(&bytes);
    let got: Vec<MetricType> = decode(&bytes)
        .unwrap()
        .metadata
        .iter()
        .map(|m| m.metric_type)
        .collect();
    let want: Vec<MetricType> = types.iter().map(|&(_, m)| m).collect();
    assert_eq!(got, want);
}

#[test]
fn metadata_with_invalid_utf8_is_dropped_not_fatal() {
    let bad = W::default()
        .uint(1, 1)
        .bytes(2, b"fam")
        .bytes(4, b"\xc3\x28");
    let good = W::default().uint(1, 2).bytes(2, b"ok");
    let bytes = W::default().msg(3, bad).msg(3, good).0;
    let req = decode(&bytes).unwrap();
    assert_eq!(req.metadata.len(), 1);
    assert_eq!(req.metadata[0].family_name, "ok");
    assert_eq!(req.metadata_dropped.get(MetadataDropReason::InvalidUtf8), 1);
    assert_eq!(req.metadata_dropped.total(), 1);
}

#[test]
fn every_dropped_metadata_entry_is_counted_whichever_string_is_bad() {
    // Three entries, each with one bad string (family name, help, unit: a lone continuation byte,
    // a truncated 3-byte sequence, an overlong encoding of '/'), between two valid ones: 3 dropped,
    // 2 kept, the series untouched.
    let entry = |family: &[u8], help: &[u8], unit: &[u8]| {
        W::default()
            .uint(1, 1)
            .bytes(2, family)
            .bytes(4, help)
            .bytes(5, unit)
    };
    let series = W::default()
        .msg(1, W::default().bytes(1, b"__name__").bytes(2, b"up"))
        .msg(2, W::default().fixed64(1, 1f64.to_bits()).uint(2, 5));
    let bytes = W::default()
        .msg(3, entry(b"a", b"h", b""))
        .msg(3, entry(b"\x80", b"h", b""))
        .msg(1, series)
        .msg(3, entry(b"b", b"\xe2\x82", b""))
        .msg(3, entry(b"c", b"h", b"\xc0\xaf"))
        .msg(3, entry(b"d", b"", b"seconds"))
        .0;
    let req = decode(&bytes).unwrap();
    let kept: Vec<&str> = req.metadata.iter().map(|m| m.family_name).collect();
    assert_eq!(kept, ["a", "d"]);
    assert_eq!(req.metadata_dropped.get(MetadataDropReason::InvalidUtf8), 3);
    assert_eq!(
        req.metadata_dropped
            .get(MetadataDropReason::SymbolRefOutOfRange),
        0
    );
    assert_eq!(req.series.len(), 1);
    assert_eq!(req.series[0].samples[0].timestamp_ms, 5);
}

#[test]
fn repeated_scalar_fields_keep_the_last_value() {
    let name = W::default()
        .bytes(1, b"first")
        .bytes(2, b"v1")
        .bytes(1, b"__name__")
        .bytes(2, b"v2");
    let sample = W::default()
        .fixed64(1, 1f64.to_bits())
        .uint(2, 5)
        .fixed64(1, 2f64.to_bits())
        .uint(2, 6);
    let bytes = W::default()
        .msg(1, W::default().msg(1, name).msg(2, sample))
        .0;
    decode_both(&bytes);
    let req = decode(&bytes).unwrap();
    assert_eq!(
        (
            req.labels_of(&req.series[0])[0].name,
            req.labels_of(&req.series[0])[0].value
        ),
        ("__name__", "v2")
    );
    assert_eq!(
        (
            req.series[0].samples[0].value,
            req.series[0].samples[0].timestamp_ms
        ),
        (2.0, 6)
    );
}

#[test]
fn truncation_at_every_byte_offset_errors_unless_at_a_top_level_boundary() {
    let req = sample_request();
    let bytes = req.encode_to_vec();
    // Prefixes that end between two top-level fields are valid, shorter requests. Their offsets,
    // from prost's own length arithmetic: a key byte, the length varint, the message.
    let field_len = |n: usize| 1 + prost::length_delimiter_len(n) + n;
    let b1 = field_len(req.timeseries[0].encoded_len());
    let b2 = b1 + field_len(req.timeseries[1].encoded_len());
    assert_eq!(b2 + field_len(req.metadata[0].encoded_len()), bytes.len());
    for k in 0..bytes.len() {
        let prefix = &bytes[..k];
        let ours = decode(prefix);
        if k == 0 || k == b1 || k == b2 {
            let theirs = pb::WriteRequest::decode(prefix).unwrap();
            assert_same(&ours.unwrap(), &theirs);
        } else {
            assert!(ours.is_err(), "prefix of {k} bytes decoded");
            assert!(
                pb::WriteRequest::decode(prefix).is_err(),
                "oracle disagrees at {k}"
            );
        }
    }
}

#[test]
fn truncated_nested_messages_agree_with_prost_at_every_offset() {
    // Cut the inner TimeSeries at every offset, re-wrapped with a correct outer length: nested
    // lengths must be checked against the enclosing message, not the whole body.
    let series = sample_request().timeseries[0].encode_to_vec();
    for k in 0..series.len() {
        let bytes = W::default().bytes(1, &series[..k]).0;
        match (decode(&bytes), pb::WriteRequest::decode(&bytes[..])) {
            (Ok(ours), Ok(theirs)) => assert_same(&ours, &theirs),
            (Err(_), Err(_)) => {}
            (ours, theirs) => panic!("offset {k}: ours {ours:?}, prost {theirs:?}"),
        }
    }
}

#[test]
fn nested_length_past_the_enclosing_message_is_an_error() {
    // The Label claims 50 bytes; the TimeSeries holds 3; the body itself is longer than 50.
    let series = [0x0a, 50, 0x0a];
    let mut bytes = W::default().bytes(1, &series).0;
    bytes.extend(W::default().bytes(99, &[0u8; 60]).0);
    assert!(decode(&bytes).is_err());
}

#[test]
fn malformed_keys_and_varints_are_errors() {
    // Varints sit in unknown field 9 (key (9 << 3) | 0 = 0x48) so only the varint itself can fail.
    let cases: [(&str, Vec<u8>); 7] = [
        ("group", W::default().key(1, 3).0),
        ("group", W::default().key(7, 4).0),
        ("undefined wire type 6", W::default().key(9, 6).0),
        ("undefined wire type 7", W::default().key(9, 7).0),
        ("field number 0", W::default().uint(0, 1).0),
        (
            "overflows 64 bits",
            [vec![0x48], vec![0x80; 10], vec![0x00]].concat(),
        ),
        (
            "overflows 64 bits",
            [vec![0x48], vec![0xff; 9], vec![0x02]].concat(),
        ),
    ];
    for (why, bytes) in cases {
        let err = decode(&bytes).unwrap_err().to_string();
        assert!(err.contains(why), "{why}: {err}");
    }
    // The largest valid varint: ten bytes, the last carrying only bit 63 (in unknown field 9,
    // key (9 << 3) | 0 = 0x48).
    let ok = [vec![0x48], vec![0xff; 9], vec![0x01]].concat();
    assert!(decode(&ok).unwrap().series.is_empty());
}

#[test]
fn known_field_with_the_wrong_wire_type_is_an_error() {
    assert!(
        decode(&W::default().uint(1, 3).0).is_err(),
        "timeseries as varint"
    );
    let sample_as_varint = W::default()
        .msg(1, W::default().msg(2, W::default().uint(1, 7)))
        .0;
    assert!(decode(&sample_as_varint).is_err());
    assert!(
        pb::WriteRequest::decode(&sample_as_varint[..]).is_err(),
        "prost agrees"
    );
}

#[test]
fn label_that_is_not_utf8_is_an_error() {
    let bytes = W::default()
        .msg(
            1,
            W::default().msg(1, W::default().bytes(1, b"__name__").bytes(2, b"\xff")),
        )
        .0;
    let err = decode(&bytes).unwrap_err();
    assert!(err.to_string().contains("UTF-8"), "{err}");
}

#[test]
fn rw2_body_decoded_as_v1_is_refused_naming_the_rw2_content_type() {
    // RW 1.0 knows no fields 4 and 5: decoded as 1.0, this 2.0 body would be an empty request,
    // a 204 that loses its sample. Symbols "", "__name__", "up" (field 4), one series (field 5).
    let series = [(
        vec![("__name__".to_string(), "up".to_string())],
        vec![crate::Sample {
            value: 1.0,
            timestamp_ms: 1,
        }],
    )];
    let body = crate::encode::encode_v2(&series);
    let mut raw = Vec::new();
    crate::snappy::decompress_into(&body, 1 << 20, &mut raw).unwrap();
    let want = ProtocolError::V2BodyAsV1 {
        symbols: 3,
        series: 1,
    };
    assert_eq!(decode(&raw).unwrap_err(), want);
    assert_eq!(super::decode(&raw).unwrap_err(), want);
    assert!(
        want.to_string()
            .contains("Content-Type application/x-protobuf;proto=io.prometheus.write.v2.Request"),
        "{want}"
    );
    // Fields 4 and 5 beside a 1.0 series are skipped as any unknown field is
    // (`unknown_fields_of_every_wire_type_are_skipped_at_every_level`); a body of metadata alone
    // stays a valid request.
    let metadata = W::default().uint(1, 1).bytes(2, b"x");
    let metadata_only = W::default().msg(3, metadata).0;
    assert_eq!(decode(&metadata_only).unwrap().metadata.len(), 1);
}
