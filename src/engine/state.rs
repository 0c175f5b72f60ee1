//! The engine: series and groups. (Stub, being implemented.)

use super::*;
use crate::protocol::{Label, MetadataRef, Sample};

/// Series state, groups, frames and rules. Not thread-safe: the HTTP layer holds it in a mutex.
#[derive(Debug)]
pub struct Engine {
    config: EngineConfig,
}

impl Engine {
    /// Creates an empty engine.
    pub fn new(config: EngineConfig) -> Self {
        Engine { config }
    }

    /// Replaces the settings (idle timeout, pending frames); existing state is kept.
    pub fn set_config(&mut self, config: EngineConfig) {
        self.config = config;
    }

    /// Applies one series' samples. `labels` must be normalised ([`crate::protocol::normalize_labels`]):
    /// sorted by name, no empty values, with `__name__`. `now_ms` is the receive wall clock (ms), used
    /// for the idle timeout only. Every sample is counted in `report` as applied or rejected.
    pub fn ingest(&mut self, labels: &[Label<'_>], samples: &[Sample], now_ms: i64, report: &mut IngestReport) {
        let _ = (labels, samples, now_ms, report);
        todo!()
    }

    /// Caches one metadata entry by family name (last one wins). Never fails.
    pub fn record_metadata(&mut self, metadata: &MetadataRef<'_>) {
        let _ = metadata;
        todo!()
    }

    /// Number of metadata families cached.
    pub fn metadata_families(&self) -> usize {
        todo!()
    }

    /// Drops groups that received no sample for longer than the idle timeout. Returns how many.
    pub fn sweep_idle(&mut self, now_ms: i64) -> usize {
        let _ = now_ms;
        todo!()
    }

    /// Calls `f` with each group's labels (sorted by name, `__name__`/`le`/rule labels removed) and
    /// its current derived value of `family`. Groups that withhold `family` are skipped.
    pub fn for_each_derived(&self, family: Family, mut f: impl FnMut(&[(String, String)], &DerivedValue)) {
        let _ = (family, &mut f);
        todo!()
    }

    /// Counts for self-metrics.
    pub fn stats(&self) -> EngineStats {
        todo!()
    }
}
