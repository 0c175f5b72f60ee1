//! `GET /metrics`: the corrected families, then the self-metrics, in the negotiated format.
//!
//! A scrape holds the engine lock, which every remote write needs, only to copy what it shows
//! ([`MetricsSnapshot::take`]: a pointer per group and per served family, and the self-metric
//! counts). Sorting and formatting happen after the lock is released ([`MetricsSnapshot::render`]),
//! so a group with a 60,000-bucket histogram does not stall the writers while its lines are
//! written (docs/PERFORMANCE.md, "/metrics: the lock hold").

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use engine::{EngineStats, GroupOutputs, GroupSnapshot};

use super::{AppState, negotiate};
use crate::exposition::{Format, info, render};
use crate::telemetry::SelfMetrics;
use crate::telemetry::memory::MemoryUse;

/// Renders the corrected families of every group (from the engine's snapshot: a scrape never
/// computes rules), then `vllm_corrector_family_info` (one series per group and family), then
/// the self-metrics with the engine gauges refreshed, in OpenMetrics 1.0.0
/// (ending with `# EOF`) or text 0.0.4, as [`negotiate::metrics_format`] chooses from `Accept`.
pub(crate) async fn handle(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let format = negotiate::metrics_format(headers.get(header::ACCEPT));
    let body = render_all(&state, format);
    ([(header::CONTENT_TYPE, format.content_type())], body).into_response()
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
    /// Every group's family states ([`engine::Engine::snapshot`]), for
    /// `vllm_corrector_family_info`, in no particular order.
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
    /// [`GroupOutputs::sort`]), then the self-metrics with the engine gauges set from this
    /// snapshot, then `# EOF` for OpenMetrics. Takes no lock.
    pub fn render(self, format: Format) -> String {
        let MetricsSnapshot {
            mut groups,
            mut statuses,
            stats,
            metadata_families,
            memory,
            metrics,
        } = self;
        GroupOutputs::sort(&mut groups);
        let mut out = String::with_capacity(16 * 1024);
        render::render_groups(&mut out, &groups, format);
        drop(groups);
        statuses.sort_unstable_by(|a, b| a.labels.cmp(&b.labels));
        let families: Vec<info::GroupFamilies<'_>> = statuses
            .iter()
            .map(|g| (&g.labels[..], &g.families[..]))
            .collect();
        info::render_family_info(&mut out, &families, format);
        drop(families);
        drop(statuses);
        metrics.observe_engine(&stats, metadata_families);
        metrics.memory.observe(&memory);
        // Writing into a String cannot fail.
        let _ = match format {
            Format::OpenMetrics => metrics.encode_openmetrics(&mut out),
            Format::Text => metrics.encode_text(&mut out),
        };
        if format == Format::OpenMetrics {
            out.push_str("# EOF\n");
        }
        out
    }
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
