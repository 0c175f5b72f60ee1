//! The rows of the bad-input table (`super`): one per input class, with the status, reason and
//! counts each must get, worked out per row. The harness that sends and checks them is `super`.

use axum::http::StatusCode;
use prost::Message;

use super::{Row, T, TOKENS, V1, V2};
use crate::config::Limits;
use protocol::encode::{self, CustomBucketsSpec, RequestV2Builder, SeriesSpec};
use protocol::labels::LabelLimits;
use protocol::prompb::v2 as pb;
use protocol::{MetadataDropReason, MetadataRef, MetricType, STALE_NAN_BITS};

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

use encode::series_spec as series;

/// The generation-token counter of engine `e`: a series the rules read.
fn tokens(e: &str, samples: &[(f64, i64)]) -> SeriesSpec {
    series(
        &[("__name__", TOKENS), ("engine", e), ("model_name", "m")],
        samples,
    )
}

/// The three series of engine `e` tokens per output reads (generation tokens, TTFT count, ITL
/// count): a group that feeds a family.
fn feeding(e: &str) -> Vec<SeriesSpec> {
    [
        TOKENS,
        "vllm:time_to_first_token_seconds_count",
        "vllm:inter_token_latency_seconds_count",
    ]
    .map(|name| {
        series(
            &[("__name__", name), ("engine", e), ("model_name", "m")],
            &[(1.0, T)],
        )
    })
    .to_vec()
}

fn v1(series: &[SeriesSpec]) -> Vec<u8> {
    encode::encode_v1(series, &[])
}

fn v2(request: &pb::Request) -> Vec<u8> {
    encode::compress(&request.encode_to_vec())
}

/// An RW 2.0 request with one valid series (1 sample) and one whose `labels_refs` are `bad`.
fn v2_bad_refs(bad: Vec<u32>) -> pb::Request {
    let mut req = encode::request_v2(&[tokens("0", &[(1.0, T)])]);
    req.timeseries.push(pb::TimeSeries {
        labels_refs: bad,
        samples: vec![pb::Sample {
            value: 2.0,
            timestamp: T,
            start_timestamp: 0,
        }],
        ..Default::default()
    });
    req
}

/// One ITL histogram with custom buckets (bounds 0.05, 0.1: 2 + 3 = 5 classic samples), as
/// `edit` leaves it, beside nothing else.
fn v2_histogram(edit: fn(&mut pb::Histogram)) -> pb::Request {
    let mut b = RequestV2Builder::new();
    let labels_refs = b.label_refs(&labels(&[
        ("__name__", "vllm:inter_token_latency_seconds"),
        ("engine", "0"),
    ]));
    let mut h = CustomBucketsSpec {
        bounds: vec![0.05, 0.1],
        cumulative: vec![3.0, 4.0],
        count: 4.0,
        sum: 0.2,
        timestamp_ms: T,
        float: false,
    }
    .to_v2();
    edit(&mut h);
    b.push(pb::TimeSeries {
        labels_refs,
        histograms: vec![h],
        ..Default::default()
    });
    b.build()
}

/// An RW 1.0 request with one series read by a rule and two metadata entries: a valid one
/// (`vllm:generation_tokens`) and one whose help is `0xc3 0x28`, not UTF-8 (a 2-byte lead followed
/// by no continuation byte). Prost cannot encode a non-UTF-8 string, so that entry is appended as
/// raw bytes (concatenated protobuf messages merge, a repeated field gaining an element).
fn v1_bad_metadata() -> Vec<u8> {
    let good = MetadataRef {
        metric_type: MetricType::Counter,
        family_name: "vllm:generation_tokens",
        help: "Number of generation tokens processed.",
        unit: "",
    };
    let mut body = encode::write_request_v1(&[tokens("0", &[(1.0, T)])], &[good]).encode_to_vec();
    let family = b"vllm:num_requests_running";
    // MetricMetadata: type (1) = GAUGE (2), metric_family_name (2), help (4).
    let mut bad = vec![0x08, 2, 0x12, family.len() as u8];
    bad.extend_from_slice(family);
    bad.extend_from_slice(&[0x22, 2, 0xc3, 0x28]);
    // WriteRequest.metadata (3), length-delimited.
    body.extend_from_slice(&[0x1a, bad.len() as u8]);
    body.extend_from_slice(&bad);
    encode::compress(&body)
}

/// An RW 1.0 request with one series read by a rule and two metadata entries of read families:
/// one whose help is exactly `protocol::MAX_METADATA_HELP_BYTES` long (kept), one a byte longer
/// (dropped as `too_long`).
fn v1_long_metadata(at_cap: &str, past_cap: &str) -> Vec<u8> {
    let kept = MetadataRef {
        metric_type: MetricType::Counter,
        family_name: "vllm:generation_tokens",
        help: at_cap,
        unit: "",
    };
    let dropped = MetadataRef {
        metric_type: MetricType::Histogram,
        family_name: "vllm:time_to_first_token_seconds",
        help: past_cap,
        unit: "",
    };
    encode::encode_v1(&[tokens("0", &[(1.0, T)])], &[kept, dropped])
}

/// An RW 2.0 request with one series read by a rule whose metadata has a valid help and a
/// `unit_ref` outside the symbols table.
fn v2_bad_unit_ref() -> pb::Request {
    let mut b = RequestV2Builder::new();
    let (labels_refs, samples) = tokens("0", &[(1.0, T)]);
    let labels_refs = b.label_refs(&labels_refs);
    let mut metadata = b.metadata(MetricType::Counter, "Number of generation tokens.", "");
    metadata.unit_ref = 999;
    b.push(pb::TimeSeries {
        labels_refs,
        samples: samples
            .iter()
            .map(|s| pb::Sample {
                value: s.value,
                timestamp: s.timestamp_ms,
                start_timestamp: 0,
            })
            .collect(),
        metadata: Some(metadata),
        ..Default::default()
    });
    b.build()
}

pub(super) fn rows() -> Vec<Row> {
    use StatusCode as S;
    let valid = || tokens("9", &[(1.0, T)]);
    let mut too_big = Vec::new();
    // A snappy block opens with the decoded length as a varint: 2.5 GiB = 2 684 354 560 in 5
    // bytes, then junk up to 47 bytes that must never be read.
    let mut n: u64 = 5 << 29;
    while n >= 0x80 {
        too_big.push((n as u8) | 0x80);
        n >>= 7;
    }
    too_big.push(n as u8);
    too_big.resize(47, 0xab);
    let mut truncated = encode::write_request_v1(&[valid()], &[]).encode_to_vec();
    truncated.truncate(truncated.len() - 3);
    let mut framed = snap::write::FrameEncoder::new(Vec::new());
    std::io::Write::write_all(
        &mut framed,
        &encode::write_request_v1(&[valid()], &[]).encode_to_vec(),
    )
    .unwrap();
    let framed = framed.into_inner().unwrap();
    let mut corrupt = v1(&[valid()]);
    corrupt.truncate(corrupt.len() / 2);
    let conflicting = [
        MetadataRef {
            metric_type: MetricType::Counter,
            family_name: TOKENS,
            help: "old help",
            unit: "",
        },
        MetadataRef {
            metric_type: MetricType::Counter,
            family_name: TOKENS,
            help: "new help",
            unit: "",
        },
    ];
    let mut symbols_start = encode::request_v2(&[valid()]);
    symbols_start.symbols[0] = "x".into();
    let long = "v".repeat(2049);
    let help_at_cap = "h".repeat(protocol::MAX_METADATA_HELP_BYTES);
    let help_past_cap = "h".repeat(4097);
    let tight = |edit: fn(&mut Limits)| {
        let mut l = Limits::default();
        edit(&mut l);
        l
    };

    vec![
        Row::new("corrupt snappy", V1, corrupt).status(S::BAD_REQUEST, "snappy"),
        Row::new("framed snappy", V1, framed).status(S::BAD_REQUEST, "snappy"),
        Row::new("truncated protobuf", V1, encode::compress(&truncated))
            .status(S::BAD_REQUEST, "protobuf"),
        Row {
            limited: Some("max_decoded_bytes"),
            ..Row::new("47-byte body declaring 2.5 GiB", V1, too_big)
        }
        .status(S::PAYLOAD_TOO_LARGE, "declares 2684354560 decoded bytes"),
        Row {
            limits: tight(|l| l.max_body_bytes = 64),
            limited: Some("max_body_bytes"),
            ..Row::new("body over the cap", V1, vec![0; 100])
        }
        .status(S::PAYLOAD_TOO_LARGE, "max_body_bytes = 64"),
        Row::new(
            "duplicate label names",
            V1,
            v1(&[
                series(
                    &[("__name__", TOKENS), ("engine", "0"), ("engine", "1")],
                    &[(1.0, T)],
                ),
                valid(),
            ]),
        )
        .status(S::BAD_REQUEST, "duplicate label name")
        .counts(2, 1, &[("duplicate_label_name", 1)]),
        Row::new("no labels", V1, v1(&[series(&[], &[(1.0, T)]), valid()]))
            .status(S::BAD_REQUEST, "empty label set")
            .counts(2, 1, &[("empty_label_set", 1)]),
        Row::new(
            "missing __name__",
            V1,
            v1(&[series(&[("engine", "0")], &[(1.0, T)]), valid()]),
        )
        .status(S::BAD_REQUEST, "no __name__")
        .counts(2, 1, &[("missing_metric_name", 1)]),
        Row::new(
            "invalid metric name",
            V1,
            v1(&[series(&[("__name__", "vllm-tokens")], &[(1.0, T)]), valid()]),
        )
        .status(S::BAD_REQUEST, "invalid metric name")
        .counts(2, 1, &[("invalid_metric_name", 1)]),
        // Issue 23 item 9: a `__`-prefixed name other than `__name__` is reserved, and refused
        // as a label error (it was accepted and exported), in RW 1.0 and 2.0 alike.
        Row::new(
            "reserved label name",
            V1,
            v1(&[
                series(
                    &[("__meta_pod", "p"), ("__name__", TOKENS), ("engine", "0")],
                    &[(1.0, T)],
                ),
                valid(),
            ]),
        )
        .status(S::BAD_REQUEST, "starting with __")
        .counts(2, 1, &[("reserved_label_name", 1)]),
        Row::new(
            "reserved label name, RW 2.0",
            V2,
            v2(&encode::request_v2(&[
                series(
                    &[
                        ("__address__", "a:1"),
                        ("__name__", TOKENS),
                        ("engine", "0"),
                    ],
                    &[(1.0, T)],
                ),
                valid(),
            ])),
        )
        .status(S::BAD_REQUEST, "starting with __")
        .counts(2, 1, &[("reserved_label_name", 1)])
        .written(1, 0),
        // Without `__type__`/`__unit__` (Prometheus' type-and-unit labels, dropped), the second
        // series is the first one: a duplicate.
        Row::new(
            "metadata labels are dropped",
            V2,
            v2(&encode::request_v2(&[
                tokens("0", &[(1.0, T)]),
                series(
                    &[
                        ("__name__", TOKENS),
                        ("__type__", "counter"),
                        ("__unit__", "tokens"),
                        ("engine", "0"),
                        ("model_name", "m"),
                    ],
                    &[(1.0, T)],
                ),
            ])),
        )
        .counts(2, 1, &[("duplicate_sample", 1)])
        .written(2, 0),
        // Issue 24 item 10: a timestamp of 0 or before (no scrape makes one) was accepted.
        Row::new(
            "timestamp zero or negative",
            V1,
            v1(&[tokens("0", &[(1.0, 0), (2.0, -5_000)]), valid()]),
        )
        .status(S::BAD_REQUEST, "timestamp 0 or negative")
        .counts(3, 1, &[("non_positive_timestamp", 2)]),
        // Sorted, the second series is the first one: its sample at the same T is a duplicate.
        Row::new(
            "unsorted labels are sorted",
            V1,
            v1(&[
                tokens("0", &[(1.0, T)]),
                series(
                    &[("model_name", "m"), ("engine", "0"), ("__name__", TOKENS)],
                    &[(1.0, T)],
                ),
            ]),
        )
        .counts(2, 1, &[("duplicate_sample", 1)]),
        // Without its empty `pod`, the second series is the first one: a duplicate again.
        Row::new(
            "empty label values are dropped",
            V1,
            v1(&[
                tokens("0", &[(1.0, T)]),
                series(
                    &[
                        ("__name__", TOKENS),
                        ("engine", "0"),
                        ("model_name", "m"),
                        ("pod", ""),
                    ],
                    &[(1.0, T)],
                ),
            ]),
        )
        .counts(2, 1, &[("duplicate_sample", 1)]),
        Row::new(
            "NaN and stale NaN",
            V1,
            v1(&[
                tokens("0", &[(f64::NAN, T)]),
                tokens("1", &[(f64::from_bits(STALE_NAN_BITS), T)]),
            ]),
        )
        .counts(2, 1, &[("nan_value", 1)]),
        Row::new(
            "sample far in the future",
            V1,
            v1(&[tokens(
                "0",
                &[(1.0, T), (2.0, crate::clock::now_ms() + 86_400_000)],
            )]),
        )
        .status(S::BAD_REQUEST, "max_future_skew")
        .counts(2, 1, &[("future_timestamp", 1)]),
        // T+15 s applied; T (older) out of order; T+15 s again a duplicate.
        Row::new(
            "out-of-order and duplicate samples",
            V1,
            v1(&[tokens(
                "0",
                &[(2.0, T + 15_000), (1.0, T), (2.0, T + 15_000)],
            )]),
        )
        .counts(3, 1, &[("out_of_order", 1), ("duplicate_sample", 1)]),
        Row::new(
            "same series repeated in one request",
            V1,
            v1(&[tokens("0", &[(1.0, T)]), tokens("0", &[(2.0, T + 15_000)])]),
        )
        .counts(2, 2, &[]),
        // The control row of RW 2.0: a 204 that still says what it wrote, read by no rule
        // included (accepted by design).
        Row::new(
            "RW2 valid series",
            V2,
            v2(&encode::request_v2(&[
                tokens("0", &[(1.0, T), (2.0, T + 15_000)]),
                series(&[("__name__", "vllm:num_requests_running")], &[(4.0, T)]),
            ])),
        )
        .counts(3, 2, &[("unused_series", 1)])
        .written(3, 0),
        Row::new(
            "RW2 label reference out of range",
            V2,
            v2(&v2_bad_refs(vec![1, 999])),
        )
        .status(S::BAD_REQUEST, "outside the symbols table")
        .counts(2, 1, &[("symbol_ref_out_of_range", 1)])
        .written(1, 0),
        Row::new(
            "RW2 odd label references",
            V2,
            v2(&v2_bad_refs(vec![1, 2, 3])),
        )
        .status(S::BAD_REQUEST, "odd number of label references")
        .counts(2, 1, &[("odd_label_refs", 1)])
        .written(1, 0),
        Row::new("RW2 symbols[0] not empty", V2, v2(&symbols_start))
            .status(S::BAD_REQUEST, "symbols[0] must be the empty string"),
        // Decoded as 1.0 this would be an empty request: 204, its sample lost, nothing counted.
        Row::new(
            "RW2 body with the RW1 Content-Type",
            V1,
            v2(&encode::request_v2(&[valid()])),
        )
        .status(
            S::BAD_REQUEST,
            "send it with Content-Type application/x-protobuf;proto=io.prometheus.write.v2.Request",
        ),
        Row::new("RW2 custom buckets, valid", V2, v2(&v2_histogram(|_| {})))
            .counts(5, 5, &[])
            .written(0, 1),
        Row::new(
            "RW2 custom buckets, count mismatch",
            V2,
            v2(&v2_histogram(|h| {
                h.count = Some(pb::histogram::Count::CountInt(9));
            })),
        )
        .status(S::BAD_REQUEST, "invalid native histogram")
        .counts(1, 0, &[("invalid_native_histogram", 1)]),
        Row::new(
            "RW2 exponential histogram: accepted, not used",
            V2,
            v2(&v2_histogram(|h| h.schema = 3)),
        )
        .counts(1, 0, &[("native_histogram", 1)])
        .written(0, 1),
        Row::new(
            "unknown proto",
            "application/x-protobuf;proto=foo.Bar",
            v1(&[valid()]),
        )
        .status(S::UNSUPPORTED_MEDIA_TYPE, "unsupported Content-Type"),
        Row {
            encoding: Some("zstd"),
            ..Row::new("unknown encoding", V1, v1(&[valid()]))
        }
        .status(S::UNSUPPORTED_MEDIA_TYPE, "Content-Encoding"),
        Row {
            encoding: Some("gzip"),
            ..Row::new("gzip", V1, vec![0x1f, 0x8b, 8, 0])
        }
        .status(S::UNSUPPORTED_MEDIA_TYPE, "Content-Encoding"),
        Row {
            encoding: Some("gzip"),
            ..Row::new("gzip with the RW2 type", V2, vec![0x1f, 0x8b, 8, 0])
        }
        .status(S::UNSUPPORTED_MEDIA_TYPE, "Content-Encoding"),
        Row::new("empty body", V1, Vec::new()).status(S::BAD_REQUEST, "empty request body"),
        Row {
            metadata_families: 1,
            ..Row::new(
                "metadata only, conflicting",
                V1,
                encode::encode_v1(&[], &conflicting),
            )
        },
        // The sample is applied and the valid entry cached; the entry whose help is not UTF-8 is
        // dropped and counted, and the request still succeeds.
        Row {
            metadata_families: 1,
            metadata_dropped: Some(MetadataDropReason::InvalidUtf8),
            ..Row::new("RW1 metadata not UTF-8", V1, v1_bad_metadata())
        }
        .counts(1, 1, &[]),
        // A help text past 4096 bytes is not cached (the cache stays within a constant), and
        // counted; the entry at the cap and the sample are kept.
        Row {
            metadata_families: 1,
            metadata_dropped: Some(MetadataDropReason::TooLong),
            ..Row::new(
                "RW1 metadata help past 4 KiB",
                V1,
                v1_long_metadata(&help_at_cap, &help_past_cap),
            )
        }
        .counts(1, 1, &[]),
        // The series is applied without its metadata (a counter with help, so it would have been
        // cached): the metadata is dropped and counted, the request still succeeds.
        Row {
            metadata_dropped: Some(MetadataDropReason::SymbolRefOutOfRange),
            ..Row::new(
                "RW2 metadata unit_ref out of range",
                V2,
                v2(&v2_bad_unit_ref()),
            )
        }
        .counts(1, 1, &[])
        .written(1, 0),
        Row {
            limits: tight(|l| l.max_series_per_request = 2),
            limited: Some("max_series_per_request"),
            ..Row::new(
                "too many series",
                V1,
                v1(&[
                    valid(),
                    tokens("0", &[(1.0, T)]),
                    tokens("1", &[(1.0, T), (2.0, T + 1)]),
                ]),
            )
        }
        .status(S::PAYLOAD_TOO_LARGE, "max_series_per_request = 2")
        .counts(4, 0, &[("too_many_series", 4)]),
        Row {
            limits: tight(|l| {
                l.labels = LabelLimits {
                    max_labels_per_series: 3,
                    ..LabelLimits::default()
                }
            }),
            ..Row::new(
                "too many labels",
                V1,
                v1(&[
                    valid(),
                    series(
                        &[("__name__", TOKENS), ("a", "1"), ("b", "2"), ("c", "3")],
                        &[(1.0, T)],
                    ),
                ]),
            )
        }
        .status(S::BAD_REQUEST, "max_labels_per_series")
        .counts(2, 1, &[("too_many_labels", 1)]),
        // `model_name` (10 bytes) fits the limit of 10, `a_long_label` (12) does not.
        Row {
            limits: tight(|l| {
                l.labels = LabelLimits {
                    max_label_name_length: 10,
                    ..LabelLimits::default()
                }
            }),
            ..Row::new(
                "label name too long",
                V1,
                v1(&[
                    valid(),
                    series(&[("__name__", TOKENS), ("a_long_label", "1")], &[(1.0, T)]),
                ]),
            )
        }
        .status(S::BAD_REQUEST, "max_label_name_length")
        .counts(2, 1, &[("label_name_too_long", 1)]),
        Row::new(
            "label value too long",
            V1,
            v1(&[
                valid(),
                series(&[("__name__", TOKENS), ("pod", &long)], &[(1.0, T)]),
            ]),
        )
        .status(S::BAD_REQUEST, "max_label_value_length")
        .counts(2, 1, &[("label_value_too_long", 1)]),
        Row {
            max_active_series: 2,
            ..Row::new(
                "active series limit",
                V2,
                v2(&encode::request_v2(&feeding("0"))),
            )
        }
        .status(S::BAD_REQUEST, "max_active_series")
        .counts(3, 2, &[("active_series_limit", 1)])
        .written(2, 0),
        Row {
            max_active_series: 4,
            ..Row::new(
                "a group that can feed no family past its quarter",
                V2,
                v2(&encode::request_v2(&[
                    tokens("0", &[(1.0, T)]),
                    tokens("1", &[(1.0, T)]),
                ])),
            )
        }
        .status(S::BAD_REQUEST, "can feed no family")
        .counts(2, 1, &[("feeds_no_family", 1)])
        .written(1, 0),
        Row {
            limits: tight(|l| l.max_concurrent_requests = 1),
            hold_slot: true,
            limited: Some("max_concurrent_requests"),
            ..Row::new(
                "no free request slot",
                V2,
                v2(&encode::request_v2(&[valid()])),
            )
        }
        .status(S::SERVICE_UNAVAILABLE, "too many concurrent"),
    ]
}
