//! Self-metrics of the memory budget (`limits.max_memory_bytes`, docs/RELIABILITY.md, "The memory
//! budget"): what each accounted part holds and each budget allows, in bytes, set at scrape time.

use std::sync::atomic::Ordering;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family as MetricFamily;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use engine::MemoryParts;

/// The accounted memory at one instant, bytes, with the budgets it is held to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct MemoryUse {
    /// The engine's state by part ([`engine::Engine::state_bytes`]).
    pub(crate) state: MemoryParts,
    /// Removed groups whose state is kept for their return.
    pub(crate) retired_groups: usize,
    /// Retired states dropped since start, `[expired, memory_budget]`
    /// ([`engine::EngineStats::retired_dropped`]).
    pub(crate) retired_dropped: [u64; 2],
    /// Held by requests in flight (whole KiB).
    pub(crate) inflight: usize,
    /// `engine::EngineConfig::max_state_bytes`.
    pub(crate) state_budget: usize,
    /// `limits.max_inflight_bytes`.
    pub(crate) inflight_budget: usize,
    /// `limits.max_memory_bytes`.
    pub(crate) total_budget: usize,
}

type Label1 = [(&'static str, &'static str); 1];

/// `vllm_corrector_memory_bytes{part}`, `vllm_corrector_memory_budget_bytes{budget}`,
/// `vllm_corrector_retired_groups` and `vllm_corrector_retired_groups_dropped_total{reason}`.
#[derive(Debug, Default)]
pub(crate) struct MemoryMetrics {
    used: MetricFamily<Label1, Gauge>,
    budget: MetricFamily<Label1, Gauge>,
    retired_groups: Gauge,
    retired_dropped: MetricFamily<Label1, Counter>,
}

impl MemoryMetrics {
    /// Registers the metrics into `registry`.
    pub(crate) fn register(&self, registry: &mut Registry) {
        registry.register(
            "vllm_corrector_memory_bytes",
            "Memory accounted against limits.max_memory_bytes, bytes, by part: groups (groups with their labels, input series and frames), series_index (every series seen, by label set), retired_groups (state kept for removed groups' return) and inflight_requests (request bodies and their decoding)",
            self.used.clone(),
        );
        registry.register(
            "vllm_corrector_memory_budget_bytes",
            "Memory budgets, bytes: total (limits.max_memory_bytes), state (the engine's share: groups, series_index and retired_groups; new series past it are refused, reason memory_budget) and inflight_requests (limits.max_inflight_bytes)",
            self.budget.clone(),
        );
        registry.register(
            "vllm_corrector_retired_groups",
            "Removed groups whose served values and acceptance state are kept for their return",
            self.retired_groups.clone(),
        );
        registry.register(
            "vllm_corrector_retired_groups_dropped",
            "Kept states of removed groups dropped, by reason: expired (their newest sample is engine.idle_timeout behind the newest) or memory_budget (the oldest, to keep the retired states within a quarter of the state budget). A group whose state was dropped restarts its corrected counters when it returns",
            self.retired_dropped.clone(),
        );
    }

    /// Sets every gauge from `now`.
    pub(crate) fn observe(&self, now: &MemoryUse) {
        for (part, bytes) in [
            ("groups", now.state.groups),
            ("series_index", now.state.index),
            ("retired_groups", now.state.retired),
            ("inflight_requests", now.inflight),
        ] {
            self.used
                .get_or_create(&[("part", part)])
                .set(to_i64(bytes));
        }
        for (budget, bytes) in [
            ("total", now.total_budget),
            ("state", now.state_budget),
            ("inflight_requests", now.inflight_budget),
        ] {
            self.budget
                .get_or_create(&[("budget", budget)])
                .set(to_i64(bytes));
        }
        self.retired_groups.set(to_i64(now.retired_groups));
        for (reason, n) in ["expired", "memory_budget"]
            .into_iter()
            .zip(now.retired_dropped)
        {
            self.retired_dropped
                .get_or_create(&[("reason", reason)])
                .inner()
                .store(n, Ordering::Relaxed);
        }
    }
}

fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
