//! A vLLM whose ITL and TTFT histograms reach the corrector as native histograms of an
//! exponential schema (what a sender scraping native histograms, or an OpenTelemetry pipeline,
//! writes), through `POST /api/v1/write` as RW 2.0: the group is incomplete, and `/status`, the
//! groups API, `vllm_corrector_family_info` and the log name the histograms and their form
//! instead of blaming sharding. Values by hand.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use prost::Message;
use serde_json::Value;
use tower::ServiceExt;

use super::{AppState, app};
use crate::config::Limits;
use engine::{Engine, EngineConfig};
use protocol::encode::RequestV2Builder;
use protocol::prompb::v2 as pb;

/// One scrape at `ts` (ms) of engine `engine`: the counters and classic histograms of a vLLM
/// 0.22 without ITL and TTFT, which come as exponential native histograms (schema 3) instead.
fn scrape(engine: &str, ts: i64, k: f64) -> Vec<u8> {
    let mut b = RequestV2Builder::new();
    let base = |name: &str| -> Vec<(String, String)> {
        vec![
            ("__name__".into(), name.into()),
            ("engine".into(), engine.into()),
            ("instance".into(), "otel:8000".into()),
        ]
    };
    let mut push = |labels: Vec<(String, String)>, value: Option<f64>, histogram: bool| {
        let refs = b.label_refs(&labels);
        let series = pb::TimeSeries {
            labels_refs: refs,
            samples: value
                .map(|v| pb::Sample {
                    value: v,
                    timestamp: ts,
                    ..Default::default()
                })
                .into_iter()
                .collect(),
            histograms: if histogram {
                vec![pb::Histogram {
                    schema: 3,
                    count: Some(pb::histogram::Count::CountInt(40 * k as u64)),
                    sum: 2.4 * k,
                    timestamp: ts,
                    ..Default::default()
                }]
            } else {
                Vec::new()
            },
            ..Default::default()
        };
        b.push(series);
    };
    for (name, v) in [
        ("vllm:generation_tokens_total", 120.0 * k),
        ("vllm:iteration_tokens_total_count", 250.0 * k),
        ("vllm:iteration_tokens_total_sum", 3000.0 * k),
        ("vllm:request_generation_tokens_count", 10.0 * k),
        ("vllm:request_time_per_output_token_seconds_sum", 0.42 * k),
        ("vllm:request_time_per_output_token_seconds_count", 10.0 * k),
    ] {
        push(base(name), Some(v), false);
    }
    for (le, v) in [("0.05", 9.0 * k), ("+Inf", 10.0 * k)] {
        let mut labels = base("vllm:request_time_per_output_token_seconds_bucket");
        labels.push(("le".into(), le.into()));
        push(labels, Some(v), false);
    }
    let mut le1 = base("vllm:request_generation_tokens_bucket");
    le1.push(("le".into(), "1.0".into()));
    push(le1, Some(3.0 * k), false);
    let mut local = base("vllm:prompt_tokens_by_source_total");
    local.push(("source".into(), "local_compute".into()));
    push(local, Some(300.0 * k), false);
    for name in [
        "vllm:inter_token_latency_seconds",
        "vllm:time_to_first_token_seconds",
    ] {
        push(base(name), None, true);
    }
    b.build().encode_to_vec()
}

async fn call(state: &AppState, request: Request<Body>) -> (StatusCode, String) {
    let response = app(state.clone()).oneshot(request).await.unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

async fn get(state: &AppState, path: &str) -> String {
    let (status, body) = call(state, Request::get(path).body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK, "{path}");
    body
}

#[tokio::test]
async fn exponential_native_histograms_are_named_as_the_cause_of_an_incomplete_group() {
    let state = AppState::new(
        Engine::new(EngineConfig {
            settle_scrapes: 0,
            ..EngineConfig::default()
        }),
        Limits::default(),
    );
    let now = crate::clock::now_ms();
    for (i, k) in [1.0, 2.0, 3.0, 4.0].into_iter().enumerate() {
        let ts = now - 60_000 + 15_000 * i as i64;
        let body = protocol::encode::compress(&scrape("0", ts, k));
        let request = Request::post("/api/v1/write")
            .header(
                header::CONTENT_TYPE,
                "application/x-protobuf;proto=io.prometheus.write.v2.Request",
            )
            .header(header::CONTENT_ENCODING, "snappy")
            .body(Body::from(body))
            .unwrap();
        let (status, text) = call(&state, request).await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{text}");
    }
    let v: Value = serde_json::from_str(&get(&state, "/api/v1/groups").await).unwrap();
    let group = &v["data"][0];
    assert_eq!(group["incomplete"], true);
    assert_eq!(
        group["unread"],
        serde_json::json!([
            {"histogram": "vllm:inter_token_latency_seconds", "arrivesAs": "native_histogram_exponential"},
            {"histogram": "vllm:time_to_first_token_seconds", "arrivesAs": "native_histogram_exponential"},
        ])
    );
    let status = get(&state, "/status").await;
    assert!(
        status.contains(
            "<code class=\"histogram\">vllm:time_to_first_token_seconds</code> arrives only as a \
             native histogram of an exponential schema"
        ),
        "{status}"
    );
    assert!(
        !status.contains("series split across instances"),
        "{status}"
    );
    // Token-weighted ITL lacks the ITL sum and the TTFT count: withheld as incomplete, naming
    // the series it lacks and the form its histogram arrives in.
    let metrics = get(&state, "/metrics").await;
    let line = metrics
        .lines()
        .find(|l| {
            l.starts_with("vllm_corrector_family_info{")
                && l.contains("family=\"vllm_corrected_token_weighted_itl_seconds\"")
        })
        .unwrap_or_else(|| panic!("{metrics}"));
    assert!(line.contains("reason=\"incomplete\""), "{line}");
    assert!(
        line.contains("detail=\"vllm:inter_token_latency_seconds_sum\"")
            || line.contains("detail=\"vllm:time_to_first_token_seconds_count\""),
        "{line}"
    );
    assert!(
        line.ends_with(",arrives_as=\"native_histogram_exponential\"} 1"),
        "{line}"
    );
    // The families that read neither histogram are served; those that read either are withheld
    // with arrives_as.
    for (family, served) in [
        ("vllm_corrected_request_time_per_output_token_seconds", true),
        ("vllm_corrected_iteration_tokens_local_compute", true),
        ("vllm_corrected_token_weighted_itl_seconds", false),
        ("vllm_corrected_acceptance_corrected_itl_seconds", false),
        ("vllm_corrected_tokens_per_output", false),
    ] {
        let line = metrics
            .lines()
            .find(|l| {
                l.starts_with("vllm_corrector_family_info{")
                    && l.contains(&format!("family=\"{family}\""))
            })
            .unwrap_or_else(|| panic!("{family}: {metrics}"));
        assert_eq!(line.contains("state=\"served\""), served, "{line}");
        assert_eq!(
            line.contains("arrives_as=\"native_histogram_exponential\""),
            !served,
            "{line}"
        );
    }
}
