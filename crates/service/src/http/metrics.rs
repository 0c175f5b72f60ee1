//! `GET /metrics`: the corrected families, then `vllm_corrector_family_info` (one series per group
//! and family, `crate::exposition::info`), then the self-metrics, in the negotiated format.
//!
//! A scrape holds the engine lock, which every remote write needs, only to copy what it shows
//! ([`MetricsSnapshot::take`]: a pointer per group and per served family, and the self-metric
//! counts). Sorting and formatting happen after the lock is released ([`MetricsSnapshot::render`]),
//! so a group with a 60,000-bucket histogram does not stall the writers while its lines are
//! written (docs/PERFORMANCE.md, "/metrics: the lock hold"). The body is written in chunks of
//! about [`super::renders::CHUNK_BYTES`] as the client reads it ([`MetricsChunks`]), so a page of any size holds
//! one chunk at a time, and at most [`super::renders::MAX_CONCURRENT_RENDERS`] scrapes are served
//! at once ([`super::renders`]).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use engine::{EngineStats, GroupOutputs, GroupSnapshot};

use super::renders::{CHUNK_BYTES, Chunks, RenderKind};
use super::{AppState, HttpError, negotiate};
use crate::exposition::render::RenderCursor;
use crate::exposition::{Format, info};
use crate::telemetry::SelfMetrics;
use crate::telemetry::memory::MemoryUse;

/// Renders the corrected families of every group (from the engine's snapshot: a scrape never
/// computes rules), then `vllm_corrector_family_info`, then the self-metrics with the engine gauges refreshed, in OpenMetrics 1.0.0
/// (ending with `# EOF`) or text 0.0.4, as [`negotiate::metrics_format`] chooses from `Accept`,
/// in chunks ([`MetricsChunks`]). Errors: [`HttpError::TooManyScrapes`] when no render slot frees
/// in time.
pub(crate) async fn handle(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, HttpError> {
    let format = negotiate::metrics_format(headers.get(header::ACCEPT));
    let slot = state
        .renders
        .acquire(RenderKind::Scrape, &state.metrics)
        .await?;
    let chunks = MetricsSnapshot::take(&state).chunks(format);
    Ok((
        [(header::CONTENT_TYPE, format.content_type())],
        slot.body(chunks),
    )
        .into_response())
}

/// The full `/metrics` body in `format`: [`MetricsSnapshot::take`], then
/// [`MetricsSnapshot::render`].
pub fn render_all(state: &AppState, format: Format) -> String {
    MetricsSnapshot::take(state).render(format)
}

/// What one `/metrics` response shows, copied under the engine lock: every group's labels and
/// outputs (shared with the engine, [`engine::Engine::outputs`]) and the engine's self-metric
/// counts. Holds no lock and no reference into the engine: writes go on while it is rendered,
/// and it keeps the values it was taken with.
#[derive(Debug)]
pub struct MetricsSnapshot {
    /// Groups serving at least one family, in no particular order.
    groups: Vec<GroupOutputs>,
    /// Every group's labels and the state of each family ([`engine::Engine::snapshot`]), for
    /// `vllm_corrector_family_info`; sorted by labels on the first chunk that reaches them.
    statuses: Vec<GroupSnapshot>,
    /// [`engine::Engine::stats`] at the same instant.
    stats: EngineStats,
    /// [`engine::Engine::metadata_families`] at the same instant.
    metadata_families: usize,
    /// The memory budget's parts at the same instant.
    memory: MemoryUse,
    /// The self-metrics rendered after the corrected families.
    metrics: Arc<SelfMetrics>,
}

impl MetricsSnapshot {
    /// Takes the engine lock, copies what a scrape shows, and releases it. The copy is O(groups ×
    /// families) pointer copies plus [`engine::Engine::stats`] (one pass over the groups and
    /// their series) and [`engine::Engine::snapshot`] (each family's state from its cached
    /// plan): nothing is sorted or formatted, and no bucket is copied.
    pub fn take(state: &AppState) -> MetricsSnapshot {
        let (inflight, inflight_budget) = state.inflight_bytes();
        let total_budget = state.limits().max_memory_bytes;
        let engine = state.lock_engine();
        let stats = engine.stats();
        MetricsSnapshot {
            groups: engine.outputs(),
            statuses: engine.snapshot(),
            memory: MemoryUse {
                state: stats.memory,
                retired_groups: stats.retired_groups,
                retired_dropped: stats.retired_dropped,
                inflight,
                state_budget: engine.config().max_state_bytes,
                inflight_budget,
                total_budget,
            },
            stats,
            metadata_families: engine.metadata_families(),
            metrics: Arc::clone(&state.metrics),
        }
    }

    /// The `/metrics` body in `format`: the corrected families (groups sorted by labels,
    /// [`GroupOutputs::sort`]), then `vllm_corrector_family_info` (groups sorted by labels), then
    /// the self-metrics with the engine gauges set from this snapshot, then `# EOF` for OpenMetrics. Takes no lock. The whole of [`Self::chunks`].
    pub fn render(self, format: Format) -> String {
        let mut chunks = self.chunks(format);
        let mut out = String::with_capacity(16 * 1024);
        while let Some(chunk) = chunks.next_chunk() {
            out.push_str(std::str::from_utf8(&chunk).expect("rendered as a String"));
        }
        out
    }

    /// The body of [`Self::render`] as chunks of about [`super::renders::CHUNK_BYTES`] (64 KiB), each rendered when asked
    /// for. The groups are sorted on the first.
    pub fn chunks(self, format: Format) -> MetricsChunks {
        MetricsChunks {
            snapshot: Some(self),
            format,
            cursor: RenderCursor::default(),
            sorted: false,
            info: None,
            block: String::new(),
        }
    }
}

/// A `/metrics` body being written ([`MetricsSnapshot::chunks`]): the snapshot and where the
/// rendering stopped. Holds one chunk at a time beside the snapshot (pointers to the outputs).
#[derive(Debug)]
pub struct MetricsChunks {
    /// `None` once the self-metrics are written: the end.
    snapshot: Option<MetricsSnapshot>,
    format: Format,
    cursor: RenderCursor,
    sorted: bool,
    /// The next group whose `vllm_corrector_family_info` is written, once the corrected families
    /// are done (`None` before).
    info: Option<usize>,
    /// A group's escaped labels, reused from group to group ([`info::render_group`]).
    block: String,
}

impl Chunks for MetricsChunks {
    fn next_chunk(&mut self) -> Option<Bytes> {
        let snapshot = self.snapshot.as_mut()?;
        if !self.sorted {
            GroupOutputs::sort(&mut snapshot.groups);
            self.sorted = true;
        }
        let mut out = String::with_capacity(CHUNK_BYTES + 4 * 1024);
        let next_info = match self.info {
            Some(next) => next,
            None => {
                if !self
                    .cursor
                    .write_until(&mut out, &snapshot.groups, self.format, CHUNK_BYTES)
                {
                    return Some(Bytes::from(out));
                }
                snapshot.groups = Vec::new();
                snapshot
                    .statuses
                    .sort_unstable_by(|a, b| a.labels.cmp(&b.labels));
                if !snapshot.statuses.is_empty() {
                    info::render_header(&mut out, self.format);
                }
                0
            }
        };
        let mut next = next_info;
        while let Some(group) = snapshot.statuses.get(next) {
            if out.len() >= CHUNK_BYTES {
                self.info = Some(next);
                return Some(Bytes::from(out));
            }
            info::render_group(&mut out, &mut self.block, &group.labels, &group.families);
            next += 1;
        }
        let MetricsSnapshot {
            stats,
            metadata_families,
            memory,
            metrics,
            ..
        } = self.snapshot.take()?;
        metrics.observe_engine(&stats, metadata_families);
        metrics.memory.observe(&memory);
        // Writing into a String cannot fail.
        let _ = match self.format {
            Format::OpenMetrics => metrics.encode_openmetrics(&mut out),
            Format::Text => metrics.encode_text(&mut out),
        };
        if self.format == Format::OpenMetrics {
            out.push_str("# EOF\n");
        }
        Some(Bytes::from(out))
    }
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
