//! The engine's self-metrics, collected when a scrape encodes them: the counts of series, groups
//! and withheld families, the engine's running totals (frames dropped, input resets, output holds,
//! groups removed) and the memory budget's parts, all from one [`engine::EngineStats`] snapshot
//! taken for that scrape. Each scrape builds its own registry, so a scrape writes nothing shared
//! and two scrapes at once cannot interleave their values.

use prometheus_client::encoding::{prometheus_text, text};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family as MetricFamily;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::memory::{MemoryMetrics, MemoryUse};
use super::{Label1, Label2, to_i64};
use engine::{EngineStats, Family};

/// The engine's self-metrics of one scrape, ready to encode.
#[derive(Debug)]
pub(crate) struct ScrapeMetrics {
    registry: Registry,
}

/// A counter holding `value` (the engine owns the running total; the series is a counter).
fn counter(value: u64) -> Counter {
    let c = Counter::default();
    c.inc_by(value);
    c
}

impl ScrapeMetrics {
    /// Builds the metrics from `stats` (one [`engine::Engine::stats`] snapshot),
    /// `metadata_families` ([`engine::Engine::metadata_families`]) and the memory budget's parts
    /// at the same instant. Every `(family, reason)` pair of `vllm_corrector_groups_withheld` that
    /// can happen ([`Family::withheld_reasons`]), every family of `vllm_corrector_output_holds_total`
    /// and every reason of `vllm_corrector_groups_removed_total` is present, at 0 when none.
    pub(crate) fn collect(
        stats: &EngineStats,
        metadata_families: usize,
        memory: &MemoryUse,
    ) -> ScrapeMetrics {
        let active_series = Gauge::<i64>::default();
        active_series.set(to_i64(stats.active_series));
        let active_groups = Gauge::<i64>::default();
        active_groups.set(to_i64(stats.groups));
        let groups_incomplete = Gauge::<i64>::default();
        groups_incomplete.set(to_i64(stats.groups_incomplete));
        let metadata_families_gauge = Gauge::<i64>::default();
        metadata_families_gauge.set(to_i64(metadata_families));
        let groups_withheld: MetricFamily<Label2, Gauge> = MetricFamily::default();
        for family in Family::ALL {
            for reason in family.withheld_reasons() {
                let n: usize = stats
                    .withheld
                    .iter()
                    .filter(|(f, r, _)| *f == family && *r == reason)
                    .map(|(_, _, n)| *n)
                    .sum();
                groups_withheld
                    .get_or_create(&[("family", family.name()), ("reason", reason.as_str())])
                    .set(to_i64(n));
            }
        }
        let newest_sample_timestamp = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
        newest_sample_timestamp.set(stats.newest_sample_ms.map_or(0.0, |ms| ms as f64 / 1000.0));
        let frames_dropped = counter(stats.frames_dropped);
        let counter_resets = counter(stats.counter_resets);
        let output_holds: MetricFamily<Label1, Counter> = MetricFamily::default();
        for family in Family::ALL {
            output_holds
                .get_or_create(&[("family", family.name())])
                .inc_by(stats.output_holds[family.index()]);
        }
        let groups_removed: MetricFamily<Label1, Counter> = MetricFamily::default();
        for reason in engine::RemovalReason::ALL {
            groups_removed
                .get_or_create(&[("reason", reason.as_str())])
                .inc_by(stats.groups_removed(reason));
        }
        let slo_groups: MetricFamily<[(&'static str, String); 1], Gauge> = MetricFamily::default();
        for (slo, n) in &stats.slo_groups {
            slo_groups
                .get_or_create(&[("slo", slo.clone())])
                .set(to_i64(*n));
        }
        let metadata_families = metadata_families_gauge;
        let mut registry = Registry::default();
        let r = &mut registry;
        r.register(
            "vllm_corrector_active_series",
            "Input series currently tracked",
            active_series,
        );
        r.register(
            "vllm_corrector_active_groups",
            "Groups (one vLLM engine's label set) currently tracked",
            active_groups,
        );
        r.register(
            "vllm_corrector_groups_withheld",
            "Groups that currently withhold a corrected family, by family and reason (only the pairs that can happen; per group: vllm_corrector_family_info)",
            groups_withheld,
        );
        r.register(
            "vllm_corrector_slo_groups",
            "Groups (vLLM engines) each SLO of the configuration covers, by slo: 0 while groups are tracked means its match: selects none, so it counts nothing and its alerts cannot fire",
            slo_groups,
        );
        r.register(
            "vllm_corrector_groups_incomplete",
            "Groups whose set of input series no vLLM version exposes (for example a histogram without _count, or ITL without generation tokens) for more than one scrape: one target's series are split across instances or filtered",
            groups_incomplete,
        );
        r.register(
            "vllm_corrector_metadata_families",
            "Metric families whose remote-write metadata is cached",
            metadata_families,
        );
        r.register(
            "vllm_corrector_newest_sample_timestamp_seconds",
            "Timestamp of the newest sample applied, seconds since the Unix epoch (0 before the first)",
            newest_sample_timestamp,
        );
        r.register(
            "vllm_corrector_frames_dropped",
            "Frames (one scrape timestamp of one group) dropped before every input arrived",
            frames_dropped,
        );
        // Not `vllm_corrector_counter_resets`: promtool's lint refuses a metric name that contains a
        // type name ("counter"), and the output must pass `promtool check metrics`.
        r.register(
            "vllm_corrector_input_resets",
            "Counter resets seen in any input series",
            counter_resets,
        );
        r.register(
            "vllm_corrector_output_holds",
            "Corrected outputs held at the value last served because the rule computed a lower one while no input of the family reset (a torn update or aborts between two scrapes), by family",
            output_holds,
        );
        r.register(
            "vllm_corrector_groups_removed",
            "Groups removed, by reason: stale (every input got a staleness marker), idle (no sample within the idle timeout), missed_scrapes (no new sample for engine.missed_scrapes of its scrape intervals) or evicted (at limits.max_active_series, a group whose series can feed no corrected family, to make room for a new series)",
            groups_removed,
        );
        let memory_metrics = MemoryMetrics::default();
        memory_metrics.observe(memory);
        memory_metrics.register(r);
        ScrapeMetrics { registry }
    }

    /// Appends the metrics in OpenMetrics 1.0.0 text, without `# EOF`.
    ///
    /// # Errors
    /// Only the `fmt::Error` of the writer.
    pub(crate) fn encode_openmetrics(&self, out: &mut String) -> std::fmt::Result {
        text::encode_registry(out, &self.registry)
    }

    /// Appends the metrics in the Prometheus text format 0.0.4.
    ///
    /// # Errors
    /// Only the `fmt::Error` of the writer.
    pub(crate) fn encode_text(&self, out: &mut String) -> std::fmt::Result {
        prometheus_text::encode(out, &self.registry)
    }
}
