//! One test per status-code rule of `POST /api/v1/write`, the `/metrics` negotiation, and the
//! health endpoints, all through the real router with `tower::ServiceExt::oneshot`.
//!
//! Request bodies are encoded here by hand from the RW 1.0 field numbers (docs/REMOTE-WRITE.md,
//! "RW 1.0 messages"), independently of the decoder under test.

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use tower::ServiceExt;

use super::{AppState, app};
use crate::config::Limits;
use crate::exposition::Format;
use crate::exposition::render::promtool;
use engine::{Engine, EngineConfig};

// ---- a tiny protobuf writer for RW 1.0 messages ----

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Field key: `field << 3 | wire_type` (0 varint, 1 fixed64, 2 length-delimited).
fn key(out: &mut Vec<u8>, field: u64, wire_type: u64) {
    varint(out, (field << 3) | wire_type);
}

fn bytes_field(out: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    key(out, field, 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// `TimeSeries { labels = 1 (Label { name = 1, value = 2 }), samples = 2 (Sample { value = 1
/// double, timestamp = 2 int64 }) }`.
fn series(labels: &[(&str, &str)], samples: &[(f64, i64)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in labels {
        let mut label = Vec::new();
        bytes_field(&mut label, 1, name.as_bytes());
        bytes_field(&mut label, 2, value.as_bytes());
        bytes_field(&mut out, 1, &label);
    }
    for (value, ts) in samples {
        let mut sample = Vec::new();
        key(&mut sample, 1, 1);
        sample.extend_from_slice(&value.to_le_bytes());
        key(&mut sample, 2, 0);
        varint(&mut sample, *ts as u64);
        bytes_field(&mut out, 2, &sample);
    }
    out
}

/// `MetricMetadata { type = 1, metric_family_name = 2, help = 4 }`.
fn metadata(metric_type: u64, family: &str, help: &str) -> Vec<u8> {
    let mut out = Vec::new();
    key(&mut out, 1, 0);
    varint(&mut out, metric_type);
    bytes_field(&mut out, 2, family.as_bytes());
    bytes_field(&mut out, 4, help.as_bytes());
    out
}

/// `WriteRequest { timeseries = 1, metadata = 3 }`.
fn write_request(series: &[Vec<u8>], metadata: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for s in series {
        bytes_field(&mut out, 1, s);
    }
    for m in metadata {
        bytes_field(&mut out, 3, m);
    }
    out
}

fn snappy(raw: &[u8]) -> Vec<u8> {
    snap::raw::Encoder::new()
        .compress_vec(raw)
        .expect("snappy compresses")
}

// ---- requests ----

const TS: i64 = 1_700_000_000_000;

fn state_with(limits: Limits) -> AppState {
    AppState::new(
        Engine::new(EngineConfig {
            // One scrape per test: evaluated at once (the settling has its own tests).
            settle_scrapes: 0,
            ..EngineConfig::default()
        }),
        limits,
    )
}

fn state() -> AppState {
    state_with(Limits::default())
}

fn post(body: Vec<u8>, content_type: Option<&str>, encoding: Option<&str>) -> Request<Body> {
    let mut builder = Request::post("/api/v1/write");
    if let Some(ct) = content_type {
        builder = builder.header(header::CONTENT_TYPE, ct);
    }
    if let Some(ce) = encoding {
        builder = builder.header(header::CONTENT_ENCODING, ce);
    }
    builder
        .header("X-Prometheus-Remote-Write-Version", "0.1.0")
        .body(Body::from(body))
        .unwrap()
}

fn rw1(body: Vec<u8>) -> Request<Body> {
    post(body, Some("application/x-protobuf"), Some("snappy"))
}

async fn send(
    state: &AppState,
    request: Request<Body>,
) -> (StatusCode, axum::http::HeaderMap, String) {
    let response = app(state.clone())
        .oneshot(request)
        .await
        .expect("router answers");
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (
        status,
        headers,
        String::from_utf8(bytes.to_vec()).expect("utf-8 body"),
    )
}

async fn scrape(state: &AppState, accept: Option<&str>) -> (String, String) {
    let mut builder = Request::get("/metrics");
    if let Some(a) = accept {
        builder = builder.header(header::ACCEPT, a);
    }
    let (status, headers, body) = send(state, builder.body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    (content_type, body)
}

fn self_metrics_text(state: &AppState) -> String {
    let mut out = String::new();
    state.core.metrics.encode_text(&mut out).unwrap();
    out
}

fn has_line(text: &str, line: &str) -> bool {
    text.lines().any(|l| l == line)
}

fn tokens_series(engine: &str, samples: &[(f64, i64)]) -> Vec<u8> {
    series(
        &[
            ("__name__", "vllm:generation_tokens_total"),
            ("engine", engine),
            ("model_name", "m"),
        ],
        samples,
    )
}

// ---- status-code rules ----

#[tokio::test]
async fn valid_rw1_is_204_without_written_headers() {
    let state = state();
    let body = snappy(&write_request(&[tokens_series("0", &[(10.0, TS)])], &[]));
    let (status, headers, text) = send(&state, rw1(body)).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{text}");
    for name in headers.keys() {
        assert!(
            !name.as_str().starts_with("x-prometheus-remote-write-"),
            "v1 response carries {name}"
        );
    }
    // One sample sent, so one received.
    assert!(has_line(
        &self_metrics_text(&state),
        "vllm_corrector_samples_received_total 1"
    ));
}

#[tokio::test]
async fn absent_content_type_and_encoding_are_read_as_rw1() {
    let state = state();
    let body = snappy(&write_request(&[tokens_series("0", &[(10.0, TS)])], &[]));
    let (status, _, text) = send(&state, post(body, None, None)).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{text}");
}

#[tokio::test]
async fn proto_write_request_parameter_is_rw1() {
    let state = state();
    let body = snappy(&write_request(&[tokens_series("0", &[(10.0, TS)])], &[]));
    let request = post(
        body,
        Some("application/x-protobuf;proto=prometheus.WriteRequest"),
        Some("snappy"),
    );
    let (status, _, text) = send(&state, request).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{text}");
}

#[tokio::test]
async fn metadata_only_request_is_204_and_kept() {
    let state = state();
    let meta = [
        metadata(
            1,
            "vllm:generation_tokens",
            "Number of generation tokens processed.",
        ),
        metadata(
            3,
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
        ),
    ];
    let (status, _, text) = send(&state, rw1(snappy(&write_request(&[], &meta)))).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{text}");
    // Two distinct family names were sent.
    assert_eq!(state.lock_engine().metadata_families(), 2);
}

#[tokio::test]
async fn corrupt_snappy_is_400() {
    let state = state();
    let raw = write_request(&[tokens_series("0", &[(10.0, TS)])], &[]);
    let mut body = snappy(&raw);
    // Cutting the block in half leaves the declared length unmet.
    body.truncate(body.len() / 2);
    let (status, _, text) = send(&state, rw1(body)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
}

#[tokio::test]
async fn truncated_protobuf_is_400() {
    let state = state();
    let mut raw = write_request(&[tokens_series("0", &[(10.0, TS)])], &[]);
    // The outer length prefix promises more bytes than remain.
    raw.truncate(raw.len() - 3);
    let (status, _, text) = send(&state, rw1(snappy(&raw))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
}

#[tokio::test]
async fn invalid_series_is_400_naming_it_and_the_valid_series_is_applied() {
    let state = state();
    let bad = series(
        &[
            ("__name__", "vllm:generation_tokens_total"),
            ("model_name", "a"),
            ("model_name", "b"),
        ],
        &[(1.0, TS), (2.0, TS + 15_000), (3.0, TS + 30_000)],
    );
    let good = tokens_series("0", &[(10.0, TS), (20.0, TS + 15_000)]);
    let (status, _, text) = send(&state, rw1(snappy(&write_request(&[good, bad], &[])))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    assert!(
        text.contains("series #1") && text.contains("model_name=\"a\""),
        "{text}"
    );
    let m = self_metrics_text(&state);
    // Bad series: 3 samples rejected for the duplicate name. Good series: 2 new in-order samples
    // of a rule input, both applied. Received 3 + 2 = 5.
    assert!(
        has_line(
            &m,
            "vllm_corrector_samples_rejected_total{reason=\"duplicate_label_name\"} 3"
        ),
        "{m}"
    );
    assert!(
        has_line(&m, "vllm_corrector_samples_applied_total 2"),
        "{m}"
    );
    assert!(
        has_line(&m, "vllm_corrector_samples_received_total 5"),
        "{m}"
    );
}

#[tokio::test]
async fn oversized_body_is_413() {
    let limits = Limits {
        max_body_bytes: 64,
        ..Limits::default()
    };
    let state = state_with(limits);
    let (status, _, text) = send(&state, rw1(vec![0u8; 65])).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{text}");
    // Exactly at the cap is not refused for its size (it is not snappy, hence 400).
    let (status, _, _) = send(&state, rw1(vec![0xffu8; 64])).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let m = self_metrics_text(&state);
    assert!(
        has_line(
            &m,
            "vllm_corrector_http_requests_total{handler=\"/api/v1/write\",code=\"413\"} 1"
        ),
        "{m}"
    );
}

#[tokio::test]
async fn content_length_over_the_body_limit_is_413_before_the_body_is_read() {
    // A sender announcing more than `max_body_bytes` is refused for the announcement: waiting for
    // the body would end in the body timeout's 503, which a sender retries. The body here is
    // empty, so the old order (read, then judge) answered 400 for an empty body.
    let limits = Limits {
        max_body_bytes: 64,
        ..Limits::default()
    };
    let state = state_with(limits);
    let mut request = rw1(Vec::new());
    request
        .headers_mut()
        .insert(header::CONTENT_LENGTH, "2000000".parse().unwrap());
    let (status, _, text) = send(&state, request).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{text}");
    assert!(text.contains("64"), "names the limit: {text}");
    let m = self_metrics_text(&state);
    assert!(
        has_line(
            &m,
            "vllm_corrector_http_requests_total{handler=\"/api/v1/write\",code=\"413\"} 1"
        ),
        "{m}"
    );
}

#[tokio::test]
async fn declared_decoded_length_over_the_cap_is_413() {
    let limits = Limits {
        max_decoded_bytes: 1024,
        ..Limits::default()
    };
    let state = state_with(limits);
    // A snappy block starts with the decoded length as a varint: declare 2.5 GB in 5 bytes,
    // followed by a few junk bytes that must never be read.
    let mut body = Vec::new();
    varint(&mut body, 2_500_000_000);
    body.extend_from_slice(&[0, 1, 2, 3]);
    let (status, _, text) = send(&state, rw1(body)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{text}");
}

#[tokio::test]
async fn rw1_body_sent_as_rw2_is_400_never_a_silent_204() {
    // RW 2.0 reserves the fields where RW 1.0 keeps its series: decoded leniently, this body would
    // be an empty request and a 204 that wrote nothing.
    let state = state();
    let body = snappy(&write_request(&[tokens_series("0", &[(10.0, TS)])], &[]));
    let request = post(
        body,
        Some("application/x-protobuf;proto=io.prometheus.write.v2.Request"),
        Some("snappy"),
    );
    let (status, headers, text) = send(&state, request).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    assert!(text.contains("reserved"), "{text}");
    assert_eq!(
        headers["x-prometheus-remote-write-samples-written"], "0",
        "an RW 2.0 error response still says what was written"
    );
}

#[tokio::test]
async fn gzip_encoding_is_415() {
    let state = state();
    let request = post(
        vec![0x1f, 0x8b, 8, 0],
        Some("application/x-protobuf"),
        Some("gzip"),
    );
    let (status, _, text) = send(&state, request).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{text}");
}

#[tokio::test]
async fn unknown_content_type_is_415() {
    let state = state();
    let request = post(b"{}".to_vec(), Some("application/json"), Some("snappy"));
    let (status, _, text) = send(&state, request).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{text}");
}

#[tokio::test]
async fn empty_body_is_400() {
    let state = state();
    let (status, _, text) = send(&state, rw1(Vec::new())).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    assert!(text.contains("empty"), "{text}");
}

#[tokio::test]
async fn no_free_slot_within_the_wait_is_503() {
    let limits = Limits {
        max_concurrent_requests: 1,
        ..Limits::default()
    };
    let state = state_with(limits).with_permit_wait(Duration::from_millis(20));
    let _held = state.permits().try_acquire_owned().expect("the only slot");
    let (status, _, text) = send(&state, rw1(vec![1, 2, 3])).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{text}");
}

// ---- /metrics, health ----

#[tokio::test]
async fn metrics_negotiates_openmetrics_and_text() {
    let state = state();
    let body = snappy(&write_request(&[tokens_series("0", &[(10.0, TS)])], &[]));
    assert_eq!(send(&state, rw1(body)).await.0, StatusCode::NO_CONTENT);

    let prometheus_accept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    let (ct, om) = scrape(&state, Some(prometheus_accept)).await;
    assert_eq!(
        ct,
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    assert!(om.ends_with("# EOF\n"), "{om}");
    assert_eq!(om.matches("# EOF").count(), 1);
    assert!(
        has_line(&om, "# TYPE vllm_corrector_samples_received counter"),
        "{om}"
    );
    promtool::check(&om, Format::OpenMetrics);

    for accept in [None, Some("text/plain;version=0.0.4"), Some("*/*")] {
        let (ct, text) = scrape(&state, accept).await;
        assert_eq!(ct, "text/plain; version=0.0.4; charset=utf-8", "{accept:?}");
        assert!(!text.contains("# EOF"), "{text}");
        assert!(
            has_line(
                &text,
                "# TYPE vllm_corrector_samples_received_total counter"
            ),
            "{text}"
        );
        promtool::check(&text, Format::Text);
    }
}

#[tokio::test]
async fn healthy_always_and_ready_once_serving() {
    let state = state();
    let get = |path: &str| Request::get(path).body(Body::empty()).unwrap();
    assert_eq!(send(&state, get("/-/healthy")).await.0, StatusCode::OK);
    assert_eq!(
        send(&state, get("/-/ready")).await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    state.set_ready(true);
    assert_eq!(send(&state, get("/-/ready")).await.0, StatusCode::OK);
    assert_eq!(send(&state, get("/nope")).await.0, StatusCode::NOT_FOUND);
    let m = self_metrics_text(&state);
    assert!(
        has_line(
            &m,
            "vllm_corrector_http_requests_total{handler=\"/-/ready\",code=\"503\"} 1"
        ),
        "{m}"
    );
    assert!(
        has_line(
            &m,
            "vllm_corrector_http_requests_total{handler=\"other\",code=\"404\"} 1"
        ),
        "{m}"
    );
}

#[tokio::test]
async fn responses_are_counted_under_the_route_that_matched_whatever_the_method() {
    // The `handler` label is the route axum matched (`MatchedPath`), not a list of paths kept
    // beside the router: every route counts under its own pattern, a method the route does not
    // serve (405) under that route, a path no route matches (a trailing slash) as `other`.
    let state = state();
    let request = |method: &str, path: &str| {
        Request::builder()
            .method(method)
            .uri(path)
            .body(Body::empty())
            .unwrap()
    };
    for (method, path, status) in [
        ("GET", "/-/healthy", StatusCode::OK),
        ("GET", "/-/healthy", StatusCode::OK),
        ("GET", "/", StatusCode::OK),
        ("GET", "/api/v1/write", StatusCode::METHOD_NOT_ALLOWED),
        ("POST", "/metrics", StatusCode::METHOD_NOT_ALLOWED),
        ("POST", "/-/reload", StatusCode::NOT_FOUND),
        ("PUT", "/-/reload", StatusCode::NOT_FOUND),
        ("GET", "/metrics/", StatusCode::NOT_FOUND),
    ] {
        assert_eq!(
            send(&state, request(method, path)).await.0,
            status,
            "{method} {path}"
        );
    }
    let m = self_metrics_text(&state);
    for line in [
        "vllm_corrector_http_requests_total{handler=\"/-/healthy\",code=\"200\"} 2",
        "vllm_corrector_http_requests_total{handler=\"/\",code=\"200\"} 1",
        "vllm_corrector_http_requests_total{handler=\"/api/v1/write\",code=\"405\"} 1",
        "vllm_corrector_http_requests_total{handler=\"/metrics\",code=\"405\"} 1",
        // No reloader in-process: 404 from the route itself, under its name.
        "vllm_corrector_http_requests_total{handler=\"/-/reload\",code=\"404\"} 2",
        "vllm_corrector_http_requests_total{handler=\"other\",code=\"404\"} 1",
    ] {
        assert!(has_line(&m, line), "missing {line} in\n{m}");
    }
}

#[tokio::test]
async fn corrected_families_reach_metrics_in_both_formats() {
    let state = state();
    let g = [("engine", "0"), ("model_name", "m\"1")];
    let one = |name: &str, extra: &[(&str, &str)], value: f64| {
        let mut labels = vec![("__name__", name)];
        labels.extend_from_slice(&g);
        labels.extend_from_slice(extra);
        series(&labels, &[(value, TS)])
    };
    let tpot = "vllm:request_time_per_output_token_seconds";
    let gen_hist = "vllm:request_generation_tokens";
    let body = write_request(
        &[
            // Request TPOT: 6 requests, 2 of them with n <= 1 (TPOT 0, so in every bucket).
            one(&format!("{tpot}_bucket"), &[("le", "0.01")], 3.0),
            one(&format!("{tpot}_bucket"), &[("le", "0.1")], 5.0),
            one(&format!("{tpot}_bucket"), &[("le", "+Inf")], 6.0),
            one(&format!("{tpot}_sum"), &[], 0.9),
            one(&format!("{tpot}_count"), &[], 6.0),
            one(&format!("{gen_hist}_bucket"), &[("le", "1.0")], 2.0),
            one(&format!("{gen_hist}_bucket"), &[("le", "+Inf")], 6.0),
            one(&format!("{gen_hist}_sum"), &[], 300.0),
            one(&format!("{gen_hist}_count"), &[], 6.0),
            // Token-weighted ITL inputs.
            one("vllm:inter_token_latency_seconds_sum", &[], 2.5),
            one("vllm:generation_tokens_total", &[], 100.0),
            one("vllm:time_to_first_token_seconds_count", &[], 4.0),
        ],
        &[],
    );
    let (status, _, text) = send(&state, rw1(snappy(&body))).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{text}");

    let labels = "engine=\"0\",model_name=\"m\\\"1\"";
    let tpot_out = "vllm_corrected_request_time_per_output_token_seconds";
    let itl_out = "vllm_corrected_token_weighted_itl_seconds";
    // Canonical TPOT: every bucket and the count minus the 2 requests of le="1.0": 3-2, 5-2,
    // 6-2; count 6-2 = 4; the sum is unchanged (n <= 1 requests add 0). Token-weighted ITL:
    // sum 2.5 s, count 100 generated - 4 first tokens = 96.
    let expected = [
        format!("# TYPE {tpot_out} histogram"),
        format!("{tpot_out}_bucket{{{labels},le=\"0.01\"}} 1"),
        format!("{tpot_out}_bucket{{{labels},le=\"0.1\"}} 3"),
        format!("{tpot_out}_bucket{{{labels},le=\"+Inf\"}} 4"),
        format!("{tpot_out}_sum{{{labels}}} 0.9"),
        format!("{tpot_out}_count{{{labels}}} 4"),
        format!("# TYPE {itl_out} summary"),
        format!("{itl_out}_sum{{{labels}}} 2.5"),
        format!("{itl_out}_count{{{labels}}} 96"),
    ];
    for (accept, format) in [
        (None, Format::Text),
        (Some("application/openmetrics-text"), Format::OpenMetrics),
    ] {
        let (_, out) = scrape(&state, accept).await;
        for line in &expected {
            assert!(has_line(&out, line), "missing {line} in\n{out}");
        }
        promtool::check(&out, format);
    }
}
