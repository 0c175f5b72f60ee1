//! The bad-input table (issue 4, item 2): one row per input class, each sent to a fresh receiver
//! through the real router. Every row asserts the status, the reason in the body, the RW 2.0
//! `*-Written` headers (present on every RW 2.0 response, absent from every RW 1.0 one), the
//! per-reason counters, and the invariant received = applied + Σ rejected, all read back from the
//! self-metrics as `/metrics` renders them. Expected counts are worked out per row.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use prost::Message;
use tower::ServiceExt;

use super::{AppState, app};
use crate::config::Limits;
use crate::engine::{Engine, EngineConfig};
use crate::protocol::encode::{self, CustomBucketsSpec, RequestV2Builder, SeriesSpec};
use crate::protocol::labels::LabelLimits;
use crate::protocol::prompb::v2 as pb;
use crate::protocol::{MetadataRef, MetricType, STALE_NAN_BITS, Sample};

const V1: &str = "application/x-protobuf";
const V2: &str = "application/x-protobuf;proto=io.prometheus.write.v2.Request";
const TOKENS: &str = "vllm:generation_tokens_total";
/// A scrape timestamp in the past (2023-11-14), well inside the future-skew limit.
const T: i64 = 1_700_000_000_000;

/// One row: what is sent, under which limits, and everything the receiver must answer and count.
struct Row {
    name: &'static str,
    content_type: Option<&'static str>,
    encoding: Option<&'static str>,
    body: Vec<u8>,
    limits: Limits,
    max_active_series: usize,
    /// Hold the only request slot while sending (with `max_concurrent_requests: 1`).
    hold_slot: bool,
    status: StatusCode,
    /// A piece of the answer's text ("" for a 204).
    reason: &'static str,
    received: u64,
    applied: u64,
    /// Non-zero `vllm_corrector_samples_rejected_total{reason}` values; every other is 0.
    rejected: &'static [(&'static str, u64)],
    /// The `vllm_corrector_requests_limited_total{limit}` that must be 1; every other is 0.
    limited: Option<&'static str>,
    /// `(samples, histograms, exemplars)` written, for RW 2.0 rows.
    written: Option<(u64, u64, u64)>,
    /// Metadata families cached afterwards.
    metadata_families: usize,
}

impl Row {
    fn new(name: &'static str, content_type: &'static str, body: Vec<u8>) -> Row {
        Row {
            name,
            content_type: Some(content_type),
            encoding: Some("snappy"),
            body,
            limits: Limits::default(),
            max_active_series: EngineConfig::default().max_active_series,
            hold_slot: false,
            status: StatusCode::NO_CONTENT,
            reason: "",
            received: 0,
            applied: 0,
            rejected: &[],
            limited: None,
            written: (content_type == V2).then_some((0, 0, 0)),
            metadata_families: 0,
        }
    }
    fn status(mut self, status: StatusCode, reason: &'static str) -> Row {
        self.status = status;
        self.reason = reason;
        self
    }
    fn counts(
        mut self,
        received: u64,
        applied: u64,
        rejected: &'static [(&'static str, u64)],
    ) -> Row {
        self.received = received;
        self.applied = applied;
        self.rejected = rejected;
        self
    }
    fn written(mut self, samples: u64, histograms: u64) -> Row {
        self.written = Some((samples, histograms, 0));
        self
    }
}

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

fn series(pairs: &[(&str, &str)], samples: &[(f64, i64)]) -> SeriesSpec {
    let samples = samples
        .iter()
        .map(|&(value, timestamp_ms)| Sample {
            value,
            timestamp_ms,
        })
        .collect();
    (labels(pairs), samples)
}

/// The generation-token counter of engine `e`: a series the rules read.
fn tokens(e: &str, samples: &[(f64, i64)]) -> SeriesSpec {
    series(
        &[("__name__", TOKENS), ("engine", e), ("model_name", "m")],
        samples,
    )
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

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn rows() -> Vec<Row> {
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
            v1(&[tokens("0", &[(1.0, T), (2.0, now_ms() + 86_400_000)])]),
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
            max_active_series: 1,
            ..Row::new(
                "active series limit",
                V2,
                v2(&encode::request_v2(&[
                    tokens("0", &[(1.0, T)]),
                    tokens("1", &[(1.0, T)]),
                ])),
            )
        }
        .status(S::BAD_REQUEST, "max_active_series")
        .counts(2, 1, &[("active_series_limit", 1)])
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

/// Every `vllm_corrector_*` counter and gauge of the text exposition, by `name{labels}`.
fn self_metrics(state: &AppState) -> BTreeMap<String, f64> {
    let mut text = String::new();
    state.metrics.encode_text(&mut text).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (name, value) = l.rsplit_once(' ')?;
            Some((name.to_owned(), value.parse().ok()?))
        })
        .collect()
}

async fn run(row: Row) {
    let name = row.name;
    let engine = Engine::new(EngineConfig {
        max_active_series: row.max_active_series,
        ..EngineConfig::default()
    });
    let state = AppState::new(engine, row.limits).with_permit_wait(Duration::from_millis(20));
    let _slot = row.hold_slot.then(|| {
        state
            .permits()
            .try_acquire_owned()
            .expect("the only slot")
    });
    let mut request = Request::post("/api/v1/write");
    if let Some(ct) = row.content_type {
        request = request.header(header::CONTENT_TYPE, ct);
    }
    if let Some(ce) = row.encoding {
        request = request.header(header::CONTENT_ENCODING, ce);
    }
    let request = request.body(Body::from(row.body)).unwrap();
    let response = app(state.clone()).oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8_lossy(&bytes);

    assert_eq!(status, row.status, "{name}: {text}");
    assert!(
        text.contains(row.reason),
        "{name}: {text:?} lacks {:?}",
        row.reason
    );
    let header = |h: &str| {
        headers
            .get(h)
            .map(|v| v.to_str().unwrap().parse::<u64>().unwrap())
    };
    let written = [
        "x-prometheus-remote-write-samples-written",
        "x-prometheus-remote-write-histograms-written",
        "x-prometheus-remote-write-exemplars-written",
    ]
    .map(header);
    let want = row
        .written
        .map_or([None; 3], |(s, h, e)| [Some(s), Some(h), Some(e)]);
    assert_eq!(written, want, "{name}: written headers");

    let m = self_metrics(&state);
    let get = |key: &str| *m.get(key).unwrap_or_else(|| panic!("{name}: no {key}"));
    let received = get("vllm_corrector_samples_received_total");
    let applied = get("vllm_corrector_samples_applied_total");
    let rejected: BTreeMap<&str, f64> = m
        .iter()
        .filter_map(|(k, v)| {
            let reason = k.strip_prefix("vllm_corrector_samples_rejected_total{reason=\"")?;
            Some((reason.strip_suffix("\"}")?, *v))
        })
        .collect();
    assert_eq!(
        received,
        applied + rejected.values().sum::<f64>(),
        "{name}: received = applied + Σ rejected"
    );
    assert_eq!(
        (received, applied),
        (row.received as f64, row.applied as f64),
        "{name}"
    );
    for (reason, n) in &rejected {
        let want = row
            .rejected
            .iter()
            .find(|(r, _)| r == reason)
            .map_or(0, |(_, n)| *n);
        assert_eq!(*n, want as f64, "{name}: rejected {reason}");
    }
    for limit in crate::telemetry::REQUEST_LIMITS {
        let n = get(&format!(
            "vllm_corrector_requests_limited_total{{limit=\"{limit}\"}}"
        ));
        let want = if row.limited == Some(limit) { 1.0 } else { 0.0 };
        assert_eq!(n, want, "{name}: limited {limit}");
    }
    assert_eq!(
        state.lock_engine().metadata_families(),
        row.metadata_families,
        "{name}: metadata families"
    );
}

#[tokio::test]
async fn every_bad_input_class_gets_its_status_reason_and_accounting() {
    let rows = rows();
    // One row per input class of the issue, plus the RW 2.0 and limit rows.
    assert_eq!(rows.len(), 34);
    for row in rows {
        run(row).await;
    }
}
