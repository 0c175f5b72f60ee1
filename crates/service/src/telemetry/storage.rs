//! Self-metrics of `--storage.path` ([`crate::storage`]): state files ignored at start and
//! failed writes. Registered by [`super::OpsMetrics::register`].

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family as MetricFamily;
use prometheus_client::registry::Registry;

/// Why a state file found at start was not used: the `reason` label of
/// `vllm_corrector_state_loads_ignored_total`.
pub(crate) const IGNORED_REASONS: [&str; 6] = [
    "corrupt",
    "version",
    "unreadable",
    "invalid",
    "too_large",
    "memory_budget",
];

/// Storage self-metrics.
#[derive(Debug, Default)]
pub(crate) struct StorageMetrics {
    ignored: MetricFamily<[(&'static str, &'static str); 1], Counter>,
    write_failures: Counter,
}

impl StorageMetrics {
    /// Creates the metrics with every reason at 0.
    pub(crate) fn new() -> Self {
        let m = StorageMetrics::default();
        for reason in IGNORED_REASONS {
            let _ = m.ignored.get_or_create(&[("reason", reason)]);
        }
        m
    }

    /// Registers both metrics in `registry`.
    pub(crate) fn register(&self, registry: &mut Registry) {
        registry.register(
            "vllm_corrector_state_loads_ignored",
            "State files (--storage.path) found at start and not used, by reason: corrupt (not a state file, or a fault that ended its reading), version (another format version), unreadable (an I/O error); and records of a state file not used: invalid (a timestamp out of range, a negative or non-finite number, an inconsistent shape, a label the receiver refuses), corrupt, too_large (a record longer than any group writes, 4 MiB), memory_budget (restored, then dropped with the oldest samples to keep the removed groups' states within their quarter of the state budget). Those groups then start afresh",
            self.ignored.clone(),
        );
        registry.register(
            "vllm_corrector_state_write_failures",
            "Writes of the state file (--storage.path) that failed; the previous file stays in place",
            self.write_failures.clone(),
        );
    }

    /// Counts a state file, or a record of one, ignored at start for `reason` (one of
    /// [`IGNORED_REASONS`]).
    pub(crate) fn load_ignored(&self, reason: &'static str) {
        self.ignored.get_or_create(&[("reason", reason)]).inc();
    }

    /// Counts `n` records of a state file ignored at start for `reason`.
    pub(crate) fn load_ignored_n(&self, reason: &'static str, n: u64) {
        if n > 0 {
            self.ignored.get_or_create(&[("reason", reason)]).inc_by(n);
        }
    }

    /// Counts a failed write.
    pub(crate) fn write_failed(&self) {
        self.write_failures.inc();
    }
}
