//! Every response is bounded: `/status` and `/api/v1/groups` page within
//! [`super::page::PAGE_BYTES`], `/metrics` is written in chunks, and at most
//! [`super::renders::MAX_CONCURRENT_RENDERS`] responses of each kind are served at once.

use std::collections::HashSet;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use axum::response::Response;
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

use super::page::{MAX_PAGE_GROUPS, PAGE_BYTES};
use super::renders::{CHUNK_BYTES, MAX_CONCURRENT_RENDERS, RenderKind, RenderSlots};
use super::{AppState, app};
use crate::config::Limits;
use engine::{Engine, EngineConfig, IngestReport};
use protocol::{Label, Sample};

/// A state with `n` one-series groups (`vllm:generation_tokens_total`), `instance` numbered
/// from 0 and zero-padded (so label order is number order), and `pad` a value of `pad` bytes.
fn groups_state(n: usize, pad: usize) -> AppState {
    let state = AppState::new(
        Engine::new(EngineConfig {
            settle_scrapes: 0,
            max_active_series: 1_000_000,
            max_state_bytes: usize::MAX / 4,
            ..EngineConfig::default()
        }),
        Limits::default(),
    );
    let padding = "p".repeat(pad);
    let mut engine = state.lock_engine();
    let mut report = IngestReport::default();
    for i in 0..n {
        let instance = format!("{i:06}");
        let labels = [
            Label {
                name: "__name__",
                value: "vllm:generation_tokens_total",
            },
            Label {
                name: "instance",
                value: &instance,
            },
            Label {
                name: "pad",
                value: &padding,
            },
        ];
        let sample = Sample {
            value: 1.0,
            timestamp_ms: 1_000,
        };
        engine.ingest(&labels, &[sample], 1_000, &mut report);
    }
    assert_eq!(engine.snapshot_page(None, 1).summary.groups, n);
    drop(engine);
    state
}

/// A state with `n` groups serving token-weighted ITL (its three inputs at two scrapes).
fn served_groups(n: usize) -> AppState {
    served_groups_with(n, |_| 0)
}

/// [`served_groups`], group `i` carrying a label `pad` of `pad(i)` bytes when that is not 0.
pub(super) fn served_groups_with(n: usize, pad: impl Fn(usize) -> usize) -> AppState {
    let state = groups_state(0, 0);
    let mut engine = state.lock_engine();
    let mut report = IngestReport::default();
    for i in 0..n {
        let instance = format!("{i:06}");
        let padding = "x".repeat(pad(i));
        for (ts, k) in [(1_000_i64, 1.0), (16_000, 2.0)] {
            for (name, v) in [
                ("vllm:inter_token_latency_seconds_sum", 2.4 * k),
                ("vllm:generation_tokens_total", 1000.0 * k),
                ("vllm:time_to_first_token_seconds_count", 40.0 * k),
            ] {
                let mut labels = vec![
                    Label {
                        name: "__name__",
                        value: name,
                    },
                    Label {
                        name: "instance",
                        value: &instance,
                    },
                ];
                if !padding.is_empty() {
                    labels.push(Label {
                        name: "pad",
                        value: &padding,
                    });
                }
                let sample = Sample {
                    value: v,
                    timestamp_ms: ts,
                };
                engine.ingest(&labels, &[sample], ts, &mut report);
            }
        }
    }
    assert_eq!(report.applied, n as u64 * 6, "{report:?}");
    drop(engine);
    state
}

async fn request(state: &AppState, path: &str) -> Response {
    let request = Request::builder().uri(path).body(Body::empty()).unwrap();
    app(state.clone()).oneshot(request).await.unwrap()
}

async fn text(response: Response) -> String {
    let body = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(body.to_vec()).unwrap()
}

/// Follows `next` from `first` to the last page; returns every page's body and the instances in
/// the order listed.
async fn all_json_pages(state: &AppState, first: &str) -> (Vec<String>, Vec<String>) {
    let (mut pages, mut instances) = (Vec::new(), Vec::new());
    let mut path = first.to_owned();
    loop {
        let response = request(state, &path).await;
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        let body = text(response).await;
        let v: Value = serde_json::from_str(&body).unwrap();
        for g in v["data"].as_array().unwrap() {
            instances.push(g["labels"]["instance"].as_str().unwrap().to_owned());
        }
        pages.push(body);
        match v["next"].as_str() {
            Some(next) => path = format!("/api/v1/groups?limit=1000&after={next}"),
            None => break,
        }
    }
    (pages, instances)
}

fn assert_each_once(instances: &[String], n: usize) {
    assert_eq!(instances.len(), n, "every group listed");
    let expected: Vec<String> = (0..n).map(|i| format!("{i:06}")).collect();
    assert_eq!(instances, expected, "once each, in label order");
}

#[tokio::test]
async fn groups_api_pages_100000_groups_within_the_page_budget() {
    let state = groups_state(100_000, 0);
    let (pages, instances) = all_json_pages(&state, "/api/v1/groups?limit=1000").await;
    assert_each_once(&instances, 100_000);
    assert_eq!(pages.len(), 100_000 / MAX_PAGE_GROUPS);
    for page in &pages {
        assert!(page.len() <= PAGE_BYTES, "{} bytes", page.len());
        assert!(
            page.contains("\"total\":100000"),
            "{}",
            &page[page.len() - 200..]
        );
    }
    // Without a limit, the default page.
    let v: Value =
        serde_json::from_str(&text(request(&state, "/api/v1/groups").await).await).unwrap();
    assert_eq!(
        v["data"].as_array().unwrap().len(),
        super::page::DEFAULT_PAGE_GROUPS
    );
}

#[tokio::test]
async fn a_page_stops_at_the_byte_budget_before_the_group_limit() {
    // 1,000 groups of about 2 KiB of labels: 2.1 MB of JSON and 2.2 MB of HTML at the limit.
    let state = groups_state(3_000, 2_000);
    let (pages, instances) = all_json_pages(&state, "/api/v1/groups?limit=1000").await;
    assert_each_once(&instances, 3_000);
    assert!(
        pages.len() > 3,
        "the byte budget cut pages short: {}",
        pages.len()
    );
    for page in &pages {
        assert!(page.len() <= PAGE_BYTES, "{} bytes", page.len());
    }
    let mut path = "/status?limit=1000".to_owned();
    let mut rows = 0;
    let mut html_pages = 0;
    loop {
        let body = text(request(&state, &path).await).await;
        assert!(body.len() <= PAGE_BYTES, "{} bytes", body.len());
        rows += body.matches("<tr class=\"group\">").count();
        html_pages += 1;
        let Some(at) = body.find("<a id=\"next-page\" href=\"") else {
            break;
        };
        let href = &body[at + 24..];
        path = format!("/{}", href[..href.find('"').unwrap()].replace("&amp;", "&"));
    }
    assert_eq!((rows, html_pages > 3), (3_000, true));
}

#[tokio::test]
async fn status_page_paginates() {
    let state = groups_state(5, 0);
    let response = request(&state, "/status?limit=2").await;
    let length: usize = response.headers()[header::CONTENT_LENGTH]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let first = text(response).await;
    assert_eq!(length, first.len(), "a page is sent with its length");
    assert!(
        first.contains("<p id=\"summary\">5 group(s): <span class=\"served\">0</span> serving at least one family, 5 serving none"),
        "{first}"
    );
    assert!(first.contains("Groups 1–2 of 5."), "{first}");
    assert!(!first.contains("first page"), "{first}");
    let mut seen = Vec::new();
    let mut body = first;
    for page in 1.. {
        for cell in body.split("<span class=\"label\">instance=&quot;").skip(1) {
            seen.push(cell[..6].to_owned());
        }
        if page > 1 {
            assert!(!body.contains("id=\"summary\""), "summary on page 1 only");
            assert!(body.contains("<a id=\"first-page\" href=\"status?limit=2\">"));
        }
        let Some(at) = body.find("<a id=\"next-page\" href=\"") else {
            assert!(
                body.contains("last page") && body.contains("Groups 5–5 of 5."),
                "{body}"
            );
            assert_eq!(page, 3);
            break;
        };
        let href = &body[at + 24..];
        let path = format!("/{}", href[..href.find('"').unwrap()].replace("&amp;", "&"));
        assert!(path.starts_with("/status?limit=2&after="), "{path}");
        body = text(request(&state, &path).await).await;
    }
    assert_each_once(&seen, 5);
    let bad = request(&state, "/status?after=not-a-cursor").await;
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    let bad = request(&state, "/api/v1/groups?limit=0").await;
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
}

fn limited(state: &AppState, limit: &str) -> String {
    let text = super::metrics::render_all(state, crate::exposition::Format::Text);
    let line = format!("vllm_corrector_requests_limited_total{{limit=\"{limit}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&line))
        .unwrap_or_else(|| panic!("{line} in\n{text}"))
        .to_owned()
}

/// Four responses of `path` whose bodies are not read hold every slot; a fifth waits, then gets
/// 503 with `Retry-After: 1`, counted under `limit`; once one body is dropped, it is served.
async fn fifth_gets_503(path: &str, limit: &str) {
    let mut state = groups_state(3, 0);
    state.renders = RenderSlots::with_times(Duration::from_millis(50), Duration::from_secs(60));
    let mut held = Vec::new();
    for _ in 0..MAX_CONCURRENT_RENDERS {
        let response = request(&state, path).await;
        assert_eq!(response.status(), StatusCode::OK);
        held.push(response);
    }
    let fifth = request(&state, path).await;
    assert_eq!(fifth.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(fifth.headers()[header::RETRY_AFTER], "1");
    assert_eq!(limited(&state, limit), "1");
    // The other kind of response has its own slots.
    let other = if path == "/metrics" {
        "/status"
    } else {
        "/metrics"
    };
    assert_eq!(request(&state, other).await.status(), StatusCode::OK);
    drop(held.pop());
    let sixth = request(&state, path).await;
    assert_eq!(sixth.status(), StatusCode::OK);
    assert!(!text(sixth).await.is_empty());
}

#[tokio::test]
async fn a_fifth_concurrent_status_render_gets_503() {
    fifth_gets_503("/status", "concurrent_pages").await;
    fifth_gets_503("/api/v1/groups", "concurrent_pages").await;
}

#[tokio::test]
async fn a_fifth_concurrent_scrape_gets_503() {
    fifth_gets_503("/metrics", "concurrent_scrapes").await;
}

#[tokio::test]
async fn metrics_is_written_in_chunks_of_the_chunk_size() {
    let state = served_groups(3_000);
    let whole = super::metrics::render_all(&state, crate::exposition::Format::Text);
    let mut body = request(&state, "/metrics").await.into_body();
    let (mut chunks, mut joined) = (Vec::new(), Vec::new());
    while let Some(frame) = body.frame().await {
        let data = frame.unwrap().into_data().unwrap();
        joined.extend_from_slice(&data);
        chunks.push(data.len());
    }
    assert!(chunks.len() > 3, "{chunks:?}");
    assert!(
        chunks.iter().all(|&len| len <= CHUNK_BYTES + 4096),
        "{chunks:?}"
    );
    // The same page as rendered whole (but the self-metrics the scrape itself changed).
    let joined = String::from_utf8(joined).unwrap();
    let families = |t: &str| -> HashSet<String> {
        t.lines()
            .filter(|l| l.starts_with("vllm_corrected_"))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(families(&joined), families(&whole));
    assert!(families(&whole).len() > 3_000);
    // `vllm_corrector_family_info`, after the corrected families: one header, then one series per
    // group and family, 3 000 × 5.
    let info: Vec<&str> = joined
        .lines()
        .filter(|l| l.starts_with("vllm_corrector_family_info{"))
        .collect();
    assert_eq!(info.len(), 3_000 * engine::FAMILIES);
    assert_eq!(
        joined
            .matches("# TYPE vllm_corrector_family_info gauge\n")
            .count(),
        1
    );
    let last_corrected = joined.rfind("\nvllm_corrected_").unwrap();
    assert!(joined.find("\nvllm_corrector_family_info{").unwrap() > last_corrected);
}

/// Four responses whose bodies are never read hold every slot. Once they have sent nothing for the
/// stall time, a fifth request takes the slot of the oldest, which is cut: its body ends with an
/// error, not as a whole page. The other three are still served whole.
async fn stalled_reader_yields_its_slot(path: &str) {
    let mut state = groups_state(3, 0);
    state.renders = RenderSlots::with_times(Duration::from_secs(5), Duration::from_millis(100));
    let mut held = Vec::new();
    for _ in 0..MAX_CONCURRENT_RENDERS {
        held.push(request(&state, path).await);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(150)).await;
    let started = std::time::Instant::now();
    let fifth = request(&state, path).await;
    assert_eq!(fifth.status(), StatusCode::OK);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "no wait for the 5 s"
    );
    assert!(!text(fifth).await.is_empty());
    let mut held = held.into_iter();
    let oldest = held.next().unwrap().into_body().collect().await;
    assert!(oldest.is_err(), "the oldest stalled response is cut");
    for response in held {
        assert!(!text(response).await.is_empty(), "the others are whole");
    }
    assert_eq!(limited(&state, "concurrent_pages"), "0");
    assert_eq!(limited(&state, "concurrent_scrapes"), "0");
}

#[tokio::test]
async fn a_client_that_stops_reading_yields_its_slot_to_the_next_request() {
    stalled_reader_yields_its_slot("/status").await;
    stalled_reader_yields_its_slot("/metrics").await;
}

/// Writes `value` at `ts` to the lone series of group `instance` (as [`groups_state`] makes them).
fn write_lone(state: &AppState, instance: &str, value: f64, ts: i64) {
    let labels = [
        Label {
            name: "__name__",
            value: "vllm:generation_tokens_total",
        },
        Label {
            name: "instance",
            value: instance,
        },
        Label {
            name: "pad",
            value: "",
        },
    ];
    let sample = Sample {
        value,
        timestamp_ms: ts,
    };
    let mut report = IngestReport::default();
    state
        .lock_engine()
        .ingest(&labels, &[sample], ts, &mut report);
}

#[tokio::test]
async fn a_group_that_leaves_or_arrives_between_pages_moves_no_other_group() {
    let state = groups_state(5, 0);
    let first: Value =
        serde_json::from_str(&text(request(&state, "/api/v1/groups?limit=2").await).await).unwrap();
    let next = first["next"].as_str().unwrap().to_owned();
    // The group the cursor names leaves (staleness marker), one arrives before it.
    write_lone(
        &state,
        "000001",
        f64::from_bits(protocol::STALE_NAN_BITS),
        2_000,
    );
    write_lone(&state, "000000b", 1.0, 2_000);
    let mut instances = Vec::new();
    let mut path = format!("/api/v1/groups?limit=2&after={next}");
    loop {
        let v: Value = serde_json::from_str(&text(request(&state, &path).await).await).unwrap();
        assert_eq!(v["total"], 5, "one left, one arrived");
        for g in v["data"].as_array().unwrap() {
            instances.push(g["labels"]["instance"].as_str().unwrap().to_owned());
        }
        match v["next"].as_str() {
            Some(next) => path = format!("/api/v1/groups?limit=2&after={next}"),
            None => break,
        }
    }
    assert_eq!(instances, ["000002", "000003", "000004"]);
}

#[tokio::test]
async fn served_responses_leave_no_entry_behind_in_the_render_slots() {
    // Each response used to leave a weak entry until a request found every slot taken: one per
    // scrape for as long as the process ran.
    let state = groups_state(3, 0);
    for path in ["/metrics", "/status", "/api/v1/groups"] {
        for _ in 0..20 {
            let response = request(&state, path).await;
            assert_eq!(response.status(), StatusCode::OK);
            assert!(!text(response).await.is_empty());
        }
    }
    // The last response of each kind may still be counted until the next one prunes it.
    assert!(state.renders.held_entries(RenderKind::Scrape) <= 1);
    assert!(state.renders.held_entries(RenderKind::Page) <= 1);
}
