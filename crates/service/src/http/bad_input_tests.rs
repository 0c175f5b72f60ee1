//! The bad-input table (issue 4, item 2): one row per input class, each sent to a fresh receiver
//! through the real router. Every row asserts the status, the reason in the body, the RW 2.0
//! `*-Written` headers (present on every RW 2.0 response, absent from every RW 1.0 one), the
//! per-reason counters (rejected samples, limited requests, dropped metadata), the metadata cache,
//! and the invariant received = applied + Σ rejected, all read back from the
//! self-metrics as `/metrics` renders them. Expected counts are worked out per row.

mod table;

use std::collections::BTreeMap;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use tower::ServiceExt;

use super::{AppState, app};
use crate::config::Limits;
use engine::{Engine, EngineConfig};
use protocol::MetadataDropReason;
use table::rows;

/// `Content-Type` of RW 1.0.
const V1: &str = "application/x-protobuf";
/// `Content-Type` of RW 2.0.
const V2: &str = "application/x-protobuf;proto=io.prometheus.write.v2.Request";
/// A series the rules read.
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
    /// The `vllm_corrector_metadata_dropped_total{reason}` that must be 1; every other is 0.
    metadata_dropped: Option<MetadataDropReason>,
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
            metadata_dropped: None,
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

/// Every `vllm_corrector_*` counter and gauge of the text exposition, by `name{labels}`.
fn self_metrics(state: &AppState) -> BTreeMap<String, f64> {
    let mut text = String::new();
    state.core.metrics.encode_text(&mut text).unwrap();
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
    let _slot = row
        .hold_slot
        .then(|| state.permits().try_acquire_owned().expect("the only slot"));
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
    for limit in crate::telemetry::RequestLimit::ALL.map(crate::telemetry::RequestLimit::as_str) {
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
    for reason in MetadataDropReason::ALL {
        let n = get(&format!(
            "vllm_corrector_metadata_dropped_total{{reason=\"{}\"}}",
            reason.as_str()
        ));
        let want = if row.metadata_dropped == Some(reason) {
            1.0
        } else {
            0.0
        };
        assert_eq!(n, want, "{name}: metadata dropped {}", reason.as_str());
    }
}

#[tokio::test]
async fn every_bad_input_class_gets_its_status_reason_and_accounting() {
    let rows = rows();
    // One row per input class of the issue, plus the RW 2.0, limit and dropped-metadata rows,
    // issues 23's and 24's reserved and metadata label names and timestamps of 0 or before, and
    // issue 32's metadata help past its cap and series of a group that can feed no family.
    assert_eq!(rows.len(), 43);
    for row in rows {
        run(row).await;
    }
}
