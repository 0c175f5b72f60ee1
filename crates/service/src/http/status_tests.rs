//! `/`, `/status` and `/api/v1/groups` through the real router, with label values that try to
//! inject HTML.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

use super::{AppState, app};
use crate::config::Limits;
use engine::{Engine, EngineConfig, IngestReport};
use protocol::{Label, Sample};

/// A label value that closes the cell and opens a script, and one that breaks out of an attribute.
const SCRIPT: &str = "</td><script>alert(1)</script>";
const ATTRIBUTE: &str = "\"><img src=x onerror=alert(2)>";

fn fed_state() -> AppState {
    fed_state_with(SCRIPT)
}

/// One group serving token-weighted ITL, with `instance` [`ATTRIBUTE`] and `model_name` `model`.
fn fed_state_with(model: &str) -> AppState {
    let state = AppState::new(
        Engine::new(EngineConfig {
            // One scrape per test: evaluated at once (the settling has its own tests).
            settle_scrapes: 0,
            ..EngineConfig::default()
        }),
        Limits::default(),
    );
    state.set_ready(true);
    let mut engine = state.lock_engine();
    let mut report = IngestReport::default();
    // Token-weighted ITL's three inputs at two scrapes, 15 s apart.
    for (ts, k) in [(1_000_i64, 1.0), (16_000, 2.0)] {
        for (name, v) in [
            ("vllm:inter_token_latency_seconds_sum", 2.4 * k),
            ("vllm:generation_tokens_total", 1000.0 * k),
            ("vllm:time_to_first_token_seconds_count", 40.0 * k),
        ] {
            let labels = [
                Label {
                    name: "__name__",
                    value: name,
                },
                Label {
                    name: "instance",
                    value: ATTRIBUTE,
                },
                Label {
                    name: "model_name",
                    value: model,
                },
            ];
            engine.ingest(
                &labels,
                &[Sample {
                    value: v,
                    timestamp_ms: ts,
                }],
                ts,
                &mut report,
            );
        }
    }
    drop(engine);
    state
}

async fn get(state: &AppState, path: &str) -> (StatusCode, String, String) {
    let request = Request::builder().uri(path).body(Body::empty()).unwrap();
    let response = app(state.clone()).oneshot(request).await.unwrap();
    let status = response.status();
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        content_type,
        String::from_utf8(body.to_vec()).unwrap(),
    )
}

#[tokio::test]
async fn landing_page_links_every_page_and_shows_the_version() {
    let (status, content_type, body) = get(&fed_state(), "/").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type, "text/html; charset=utf-8");
    for link in [
        "href=\"metrics\"",
        "href=\"status\"",
        "href=\"api/v1/groups\"",
        "href=\"docs\"",
    ] {
        assert!(body.contains(link), "{link} in {body}");
    }
    assert!(
        body.contains(env!("CARGO_PKG_VERSION"))
            && body.contains(env!("VLLM_CORRECTOR_GIT_COMMIT")),
        "{body}"
    );
    let (status, _, docs) = get(&fed_state(), "/docs").await;
    assert_eq!(status, StatusCode::OK);
    assert!(docs.starts_with("# vllm-corrector"), "the README");
}

#[tokio::test]
async fn groups_api_reports_each_family_and_the_group_state() {
    let (status, content_type, body) = get(&fed_state(), "/api/v1/groups").await;
    assert_eq!(
        (status, content_type.as_str()),
        (StatusCode::OK, "application/json")
    );
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["status"], "success");
    let data = v["data"].as_array().unwrap();
    assert_eq!(data.len(), 1);
    let g = &data[0];
    assert_eq!(
        g["labels"]["instance"], ATTRIBUTE,
        "JSON carries the raw value"
    );
    assert_eq!(g["labels"]["model_name"], SCRIPT);
    let families = &g["families"];
    assert_eq!(
        families["vllm_corrected_token_weighted_itl_seconds"]["state"],
        "served"
    );
    assert_eq!(
        families["vllm_corrected_request_time_per_output_token_seconds"]["state"],
        "withheld"
    );
    assert_eq!(
        families["vllm_corrected_request_time_per_output_token_seconds"]["reason"],
        "missing_input"
    );
    assert_eq!(
        families["vllm_corrected_acceptance_corrected_itl_seconds"]["reason"],
        "missing_input"
    );
    // The missing input is named: TPOT has no histogram at all (no +Inf bucket), iteration
    // tokens no local-compute prompt counter (the first of its inputs it lacks).
    assert_eq!(
        families["vllm_corrected_request_time_per_output_token_seconds"]["input"],
        "vllm:request_time_per_output_token_seconds_bucket"
    );
    assert_eq!(
        families["vllm_corrected_iteration_tokens_local_compute"]["input"],
        "vllm:prompt_tokens_by_source_total{source=\"local_compute\"}"
    );
    assert_eq!(families.as_object().unwrap().len(), engine::FAMILIES);
    assert_eq!(g["limited"], Value::Null);
    assert_eq!(
        g["recentRejects"],
        serde_json::json!({"duplicate_sample": 0, "out_of_order": 0})
    );
    assert_eq!(g["lastScrapeTimestampMs"], 16_000);
    assert_eq!(g["scrapeIntervalMs"], 15_000);
    assert_eq!(g["inputSeries"], 3);
    assert_eq!(g["counterResets"], 0);
    assert!(g["incomplete"].is_boolean());
}

#[tokio::test]
async fn status_page_escapes_label_values_and_lists_families_with_reasons() {
    let (status, content_type, body) = get(&fed_state(), "/status").await;
    assert_eq!(
        (status, content_type.as_str()),
        (StatusCode::OK, "text/html; charset=utf-8")
    );
    assert!(
        !body.contains("<script>") && !body.contains("<img"),
        "raw markup from a label value\n{body}"
    );
    assert!(
        body.contains("&lt;/td&gt;&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{body}"
    );
    assert!(
        body.contains("&quot;&gt;&lt;img src=x onerror=alert(2)&gt;"),
        "{body}"
    );
    assert_eq!(body.matches("<tr class=\"group\">").count(), 1);
    assert!(
        body.contains("<code>vllm_corrected_token_weighted_itl_seconds</code>: served"),
        "{body}"
    );
    assert!(
        body.contains("<code>vllm_corrected_iteration_tokens_local_compute</code>: withheld, <span class=\"reason\">missing_input</span> \
             (missing <code class=\"input\">vllm:prompt_tokens_by_source_total{source=&quot;local_compute&quot;}</code>)"),
        "{body}"
    );
    assert!(body.contains("<td class=\"state\">ok</td>"), "{body}");
    assert_eq!(body.matches("<td class=\"lag\"").count(), 1);
}

#[tokio::test]
async fn status_page_without_groups_says_so() {
    let state = AppState::new(
        Engine::new(EngineConfig {
            // One scrape per test: evaluated at once (the settling has its own tests).
            settle_scrapes: 0,
            ..EngineConfig::default()
        }),
        Limits::default(),
    );
    let (status, _, body) = get(&state, "/status").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("id=\"no-groups\""), "{body}");
    let (_, _, json) = get(&state, "/api/v1/groups").await;
    assert_eq!(
        json,
        r#"{"status":"success","data":[],"total":0,"next":null}"#
    );
}

#[tokio::test]
async fn status_page_shows_label_values_escaped_as_promql_does() {
    // A quote, a newline and a backslash: `a"b<newline>c\d`.
    let (status, _, body) = get(&fed_state_with("a\"b\nc\\d"), "/status").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        body.contains("model_name=&quot;a\\&quot;b\\nc\\\\d&quot;"),
        "shown as a\\\"b\\nc\\\\d, HTML-escaped\n{body}"
    );
    assert!(!body.contains("b\nc"), "no raw newline in a value");
}

#[tokio::test]
async fn a_group_sent_twice_shows_two_senders_on_status_and_api() {
    // A second sender with the same labels sends the 16 s scrape again (3 duplicates) and the
    // 1 s scrape late (3 out of order), as an HA pair of Prometheus servers would.
    let state = fed_state();
    {
        let mut engine = state.lock_engine();
        let mut report = IngestReport::default();
        for ts in [16_000, 1_000] {
            for name in [
                "vllm:inter_token_latency_seconds_sum",
                "vllm:generation_tokens_total",
                "vllm:time_to_first_token_seconds_count",
            ] {
                let labels = [
                    Label {
                        name: "__name__",
                        value: name,
                    },
                    Label {
                        name: "instance",
                        value: ATTRIBUTE,
                    },
                    Label {
                        name: "model_name",
                        value: SCRIPT,
                    },
                ];
                let sample = Sample {
                    value: 1.0,
                    timestamp_ms: ts,
                };
                engine.ingest(&labels, &[sample], 17_000, &mut report);
            }
        }
        assert_eq!(report.rejected_total(), 6);
    }
    let (_, _, json) = get(&state, "/api/v1/groups").await;
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        v["data"][0]["recentRejects"],
        serde_json::json!({"duplicate_sample": 3, "out_of_order": 3})
    );
    let (_, _, body) = get(&state, "/status").await;
    assert!(
        body.contains(
            "<span class=\"senders\">two senders?</span> 3 duplicate and 3 out-of-order samples"
        ),
        "{body}"
    );
    // And per group on /metrics, for an alert to name the target: this group's two series, no
    // other group's.
    let (_, _, metrics) = get(&state, "/metrics").await;
    let lines: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("vllm_corrector_group_recent_rejected_samples{"))
        .collect();
    let group = format!(
        "instance=\"{}\",model_name=\"{}\"",
        ATTRIBUTE.replace('"', "\\\""),
        SCRIPT.replace('"', "\\\"")
    );
    assert_eq!(
        lines,
        [
            format!(
                "vllm_corrector_group_recent_rejected_samples{{{group},reason=\"duplicate_sample\"}} 3"
            ),
            format!(
                "vllm_corrector_group_recent_rejected_samples{{{group},reason=\"out_of_order\"}} 3"
            ),
        ],
        "{metrics}"
    );
}

#[tokio::test]
async fn a_group_with_no_rejects_has_no_recent_rejects_series() {
    let state = fed_state();
    let (_, _, metrics) = get(&state, "/metrics").await;
    assert!(
        !metrics.contains("vllm_corrector_group_recent_rejected_samples"),
        "{metrics}"
    );
}
