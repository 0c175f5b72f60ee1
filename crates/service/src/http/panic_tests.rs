//! The panic path of `POST /api/v1/write`, through the real router: a panic while processing a
//! request (a bug, injected here at a fail point, `crate::test_points`) must answer 400 — never 500,
//! which a sender would retry forever — count the panic and, once the request was decoded, its
//! samples as `internal_error`, and leave the service working: the next write is a 204, even when
//! the panic poisoned the engine lock.

use std::collections::BTreeMap;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use tower::ServiceExt;

use super::{AppState, app};
use crate::config::Limits;
use crate::test_points::{self, BEFORE_DECODE, UNDER_LOCK};
use engine::{Engine, EngineConfig};
use protocol::encode::{self, SeriesSpec};

pub(in crate::http) const V1: &str = "application/x-protobuf";
const V2: &str = "application/x-protobuf;proto=io.prometheus.write.v2.Request";
/// A scrape timestamp in the past (2023-11-14), well inside the future-skew limit.
pub(in crate::http) const T: i64 = 1_700_000_000_000;

/// The generation-token counter of engine `e` (a series the rules read), with `samples`.
pub(in crate::http) fn tokens(e: &str, samples: &[(f64, i64)]) -> SeriesSpec {
    encode::series_spec(
        &[
            ("__name__", "vllm:generation_tokens_total"),
            ("engine", e),
            ("model_name", "m"),
        ],
        samples,
    )
}

/// Sends one write; returns the status, the `*-Samples-Written` header and the body text.
pub(in crate::http) async fn send(
    state: &AppState,
    content_type: &str,
    body: Vec<u8>,
) -> (StatusCode, Option<String>, String) {
    let request = Request::post("/api/v1/write")
        .header(header::CONTENT_TYPE, content_type)
        .header(header::CONTENT_ENCODING, "snappy")
        .body(Body::from(body))
        .unwrap();
    let response = app(state.clone()).oneshot(request).await.unwrap();
    let status = response.status();
    let written = response
        .headers()
        .get("x-prometheus-remote-write-samples-written")
        .map(|v| v.to_str().unwrap().to_owned());
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        written,
        String::from_utf8_lossy(&bytes).into_owned(),
    )
}

/// `GET /metrics` through the router (it takes the engine lock too), as `name{labels}` → value.
pub(in crate::http) async fn scrape(state: &AppState) -> BTreeMap<String, f64> {
    let request = Request::get("/metrics").body(Body::empty()).unwrap();
    let response = app(state.clone()).oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec())
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("vllm_corrector_"))
        .filter_map(|l| {
            let (name, value) = l.rsplit_once(' ')?;
            Some((name.to_owned(), value.parse().ok()?))
        })
        .collect()
}

pub(in crate::http) fn state() -> AppState {
    AppState::new(
        Engine::new(EngineConfig {
            // One scrape per test: evaluated at once (the settling has its own tests).
            settle_scrapes: 0,
            ..EngineConfig::default()
        }),
        Limits::default(),
    )
}

#[track_caller]
pub(in crate::http) fn assert_counters(m: &BTreeMap<String, f64>, want: &[(&str, f64)]) {
    for (name, value) in want {
        assert_eq!(m.get(*name), Some(value), "{name}");
    }
}

#[tokio::test]
async fn a_panic_after_decoding_is_a_400_counting_its_samples_and_the_next_write_succeeds() {
    let state = state();
    test_points::panic_once_at(UNDER_LOCK);
    // Two series, 1 + 2 = 3 samples, all decoded before the panic.
    let body = encode::encode_v1(
        &[
            tokens("0", &[(1.0, T)]),
            tokens("1", &[(1.0, T), (2.0, T + 15_000)]),
        ],
        &[],
    );
    let (status, written, text) = send(&state, V1, body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    assert_eq!(written, None, "RW 1.0 answers carry no written headers");
    assert!(
        text.starts_with("internal error: processing this request panicked (injected test panic at ingest::under_lock)"),
        "{text}"
    );
    assert!(text.contains("please report it"), "{text}");
    assert!(
        state.core.is_poisoned(),
        "the panic happened under the engine lock"
    );

    // The engine lock is taken over: the next write is applied (engine 0 at T + 15 s: 1 sample).
    let body = encode::encode_v1(&[tokens("0", &[(2.0, T + 15_000)])], &[]);
    let (status, _, text) = send(&state, V1, body).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{text}");

    let m = scrape(&state).await;
    assert_counters(
        &m,
        &[
            ("vllm_corrector_write_panics_total", 1.0),
            (
                "vllm_corrector_http_requests_total{handler=\"/api/v1/write\",code=\"400\"}",
                1.0,
            ),
            (
                "vllm_corrector_http_requests_total{handler=\"/api/v1/write\",code=\"204\"}",
                1.0,
            ),
            // 3 samples of the panicked request + 1 of the next.
            ("vllm_corrector_samples_received_total", 4.0),
            ("vllm_corrector_samples_applied_total", 1.0),
            (
                "vllm_corrector_samples_rejected_total{reason=\"internal_error\"}",
                3.0,
            ),
            ("vllm_corrector_active_series", 1.0),
        ],
    );
    assert!(
        !m.keys()
            .any(|k| k.starts_with("vllm_corrector_http_requests_total")
                && k.contains("code=\"500\"")),
        "no 500 was answered: {m:?}"
    );
}

#[tokio::test]
async fn a_panic_before_decoding_is_a_400_that_cannot_count_samples() {
    let state = state();
    test_points::panic_once_at(BEFORE_DECODE);
    let body = encode::encode_v2(&[tokens("0", &[(1.0, T)])]);
    let (status, written, text) = send(&state, V2, body.clone()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    // RW 2.0 answers always carry the headers: nothing was written.
    assert_eq!(written.as_deref(), Some("0"));
    assert!(
        text.contains("(injected test panic at ingest::before_decode)"),
        "{text}"
    );
    assert!(!state.core.is_poisoned());

    // The same body again (the hook fires once): written and applied.
    let (status, written, text) = send(&state, V2, body).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{text}");
    assert_eq!(written.as_deref(), Some("1"));

    let m = scrape(&state).await;
    assert_counters(
        &m,
        &[
            ("vllm_corrector_write_panics_total", 1.0),
            (
                "vllm_corrector_http_requests_total{handler=\"/api/v1/write\",code=\"400\"}",
                1.0,
            ),
            // Undecoded, the panicked request's samples are unknown: only the retry's 1 sample.
            ("vllm_corrector_samples_received_total", 1.0),
            ("vllm_corrector_samples_applied_total", 1.0),
            (
                "vllm_corrector_samples_rejected_total{reason=\"internal_error\"}",
                0.0,
            ),
        ],
    );
}

/// One scrape of a minimal group the acceptance-corrected family reads: ITL with `bounds`
/// (cumulative `counts`, the last being `+Inf` = `_count`), generation tokens, TTFT count, all at
/// `ts` with the value `value` (or a staleness marker for every series when `stale`).
fn acceptance_inputs(
    bounds: &[&str],
    counts: &[f64],
    tokens: f64,
    ts: i64,
    stale: bool,
) -> Vec<SeriesSpec> {
    let marker = f64::from_bits(protocol::STALE_NAN_BITS);
    let v = |x: f64| if stale { marker } else { x };
    let l = |name: &'static str| vec![("__name__", name), ("engine", "0"), ("model_name", "m")];
    let mut out: Vec<SeriesSpec> = bounds
        .iter()
        .zip(counts)
        .map(|(le, c)| {
            let mut labels = l("vllm:inter_token_latency_seconds_bucket");
            labels.push(("le", le));
            encode::series_spec(&labels, &[(v(*c), ts)])
        })
        .collect();
    let n = *counts.last().unwrap();
    out.push(encode::series_spec(
        &l("vllm:inter_token_latency_seconds_count"),
        &[(v(n), ts)],
    ));
    out.push(encode::series_spec(
        &l("vllm:inter_token_latency_seconds_sum"),
        &[(v(n * 0.04), ts)],
    ));
    out.push(encode::series_spec(
        &l("vllm:generation_tokens_total"),
        &[(v(tokens + 10.0), ts)],
    ));
    out.push(encode::series_spec(
        &l("vllm:time_to_first_token_seconds_count"),
        &[(v(10.0), ts)],
    ));
    out
}

/// Issue 13, item 1, over HTTP: scrapes at T and T + 15 s, staleness markers for every series at
/// T + 30 s, then the same series with other ITL bounds at T + 15 s. This used to panic in the
/// engine (answered 400, the batch lost, and every later sample of that frame panicking again).
#[tokio::test]
async fn stale_group_returning_with_new_bucket_layout_is_written_not_a_panic() {
    let state = state();
    let bounds = ["0.025", "0.05", "+Inf"];
    for body in [
        acceptance_inputs(&bounds, &[0.0, 10.0, 40.0], 80.0, T, false),
        acceptance_inputs(&bounds, &[0.0, 20.0, 80.0], 160.0, T + 15_000, false),
        acceptance_inputs(&bounds, &[0.0, 20.0, 80.0], 160.0, T + 30_000, true),
        // 80 outputs, 160 tokens: re-seeded from 0 with w = 2: 0.025 → 2·F(0.05) = 2·20 = 40,
        // 0.05 → 2·F(0.1) = 2·80 = 160, and 160 from there on (flat past 0.1), +Inf = 160.
        acceptance_inputs(
            &["0.025", "0.05", "0.075", "0.1", "+Inf"],
            &[0.0, 20.0, 50.0, 80.0, 80.0],
            160.0,
            T + 15_000,
            false,
        ),
    ] {
        let (status, _, text) = send(&state, V1, encode::encode_v1(&body, &[])).await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{text}");
    }
    let m = scrape(&state).await;
    assert_counters(
        &m,
        &[
            ("vllm_corrector_write_panics_total", 0.0),
            ("vllm_corrector_groups_removed_total{reason=\"stale\"}", 1.0),
        ],
    );
    let request = Request::get("/metrics").body(Body::empty()).unwrap();
    let response = app(state.clone()).oneshot(request).await.unwrap();
    let text = String::from_utf8(
        response
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec(),
    )
    .unwrap();
    for (le, want) in [
        ("0.025", 40.0),
        ("0.05", 160.0),
        ("0.075", 160.0),
        ("0.1", 160.0),
        ("+Inf", 160.0),
    ] {
        let line = format!(
            "vllm_corrected_acceptance_corrected_itl_seconds_bucket{{engine=\"0\",model_name=\"m\",le=\"{le}\"}} "
        );
        let value: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix(&line))
            .unwrap_or_else(|| panic!("no {line} in\n{text}"))
            .parse()
            .unwrap();
        assert!((value - want).abs() < 1e-9, "{line}{value}, want {want}");
    }
}
