//! The engine: classifies series, routes samples to their group, and keeps the counts for self-metrics.

use std::hash::{BuildHasher, Hasher};

use hashbrown::{HashMap, HashTable};

use super::classify::{classify, group_labels};
use super::group::{Group, Offer};
use super::*;
use crate::protocol::{Label, MetadataRef, MetricType, Sample, is_stale_marker};

/// A cached metadata entry (remote-write notes, checklist item 5).
#[derive(Debug, Clone, PartialEq)]
struct Metadata {
    metric_type: MetricType,
    help: String,
    unit: String,
}

#[derive(Debug)]
struct Entry {
    hash: u64,
    group: Group,
}

/// Series state, groups, frames and rules. Not thread-safe: the HTTP layer holds it in a mutex.
#[derive(Debug)]
pub struct Engine {
    config: EngineConfig,
    hasher: foldhash::fast::FixedState,
    groups: HashTable<Entry>,
    metadata: HashMap<String, Metadata>,
    frames_dropped: u64,
    counter_resets: u64,
    removed_stale: u64,
    removed_idle: u64,
    newest_sample_ms: Option<i64>,
}

impl Engine {
    /// Creates an empty engine.
    pub fn new(config: EngineConfig) -> Self {
        Engine {
            config,
            hasher: foldhash::fast::FixedState::with_seed(0x5eed_cafe),
            groups: HashTable::new(),
            metadata: HashMap::new(),
            frames_dropped: 0,
            counter_resets: 0,
            removed_stale: 0,
            removed_idle: 0,
            newest_sample_ms: None,
        }
    }

    /// Replaces the settings (idle timeout, pending frames); existing state is kept.
    pub fn set_config(&mut self, config: EngineConfig) {
        self.config = config;
    }

    /// Hash of the group labels of `labels`, and how many there are.
    fn group_hash(&self, labels: &[Label<'_>]) -> (u64, usize) {
        let mut h = self.hasher.build_hasher();
        let mut count = 0;
        for l in group_labels(labels) {
            h.write(l.name.as_bytes());
            h.write_u8(0xff);
            h.write(l.value.as_bytes());
            h.write_u8(0xff);
            count += 1;
        }
        (h.finish(), count)
    }

    /// Applies one series' samples.
    ///
    /// `labels` must be normalised ([`crate::protocol::normalize_labels`]): sorted by name, no empty
    /// values, with `__name__`. `samples` carry ms timestamps; `now_ms` is the receive wall clock (ms),
    /// used for the idle timeout only. Every sample is counted in `report` as applied or rejected:
    /// `unused_series` (no rule reads the series, `*_created` included), `duplicate_sample` (same
    /// timestamp as the series' newest: an idempotent no-op), `out_of_order`, `nan_value` (a NaN that is
    /// not the staleness marker) or `frame_evicted`. Staleness markers (by bits) are applied.
    pub fn ingest(&mut self, labels: &[Label<'_>], samples: &[Sample], now_ms: i64, report: &mut IngestReport) {
        let name = labels.iter().find(|l| l.name == "__name__").map_or("", |l| l.value);
        let Some(key) = classify(name, labels) else {
            report.reject(RejectReason::UnusedSeries, samples.len() as u64);
            return;
        };
        let (hash, count) = self.group_hash(labels);
        let same = |e: &Entry| {
            e.hash == hash
                && e.group.labels.len() == count
                && e.group.labels.iter().zip(group_labels(labels)).all(|((n, v), l)| n == l.name && v == l.value)
        };
        let entry = match self.groups.find_mut(hash, same) {
            Some(entry) => entry,
            None => {
                let owned = group_labels(labels).map(|l| (l.name.to_owned(), l.value.to_owned())).collect();
                let entry = Entry { hash, group: Group::new(owned, now_ms) };
                self.groups.insert_unique(hash, entry, |e| e.hash).into_mut()
            }
        };
        let group = &mut entry.group;
        group.last_seen_ms = now_ms;
        let max_frames = self.config.max_pending_frames.max(1);
        for sample in samples {
            if sample.value.is_nan() && !is_stale_marker(sample.value) {
                report.reject(RejectReason::NanValue, 1);
                continue;
            }
            match group.offer(key, sample.timestamp_ms, sample.value, max_frames) {
                Offer::Applied | Offer::Stale => {
                    report.apply(1);
                    self.newest_sample_ms = self.newest_sample_ms.max(Some(sample.timestamp_ms));
                }
                Offer::Duplicate => report.reject(RejectReason::DuplicateSample, 1),
                Offer::OutOfOrder => report.reject(RejectReason::OutOfOrder, 1),
                Offer::FrameEvicted => report.reject(RejectReason::FrameEvicted, 1),
            }
        }
        let events = std::mem::take(&mut group.events);
        self.frames_dropped += events.frames_dropped;
        self.counter_resets += events.counter_resets;
        if group.all_stale() {
            if let Ok(entry) = self.groups.find_entry(hash, same) {
                entry.remove();
                self.removed_stale += 1;
            }
        }
    }

    /// Caches one metadata entry by family name (last one wins). Never fails.
    pub fn record_metadata(&mut self, metadata: &MetadataRef<'_>) {
        let entry = Metadata { metric_type: metadata.metric_type, help: metadata.help.to_owned(), unit: metadata.unit.to_owned() };
        match self.metadata.get_mut(metadata.family_name) {
            Some(existing) if *existing == entry => {}
            Some(existing) => *existing = entry,
            None => {
                self.metadata.insert(metadata.family_name.to_owned(), entry);
            }
        }
    }

    /// Number of metadata families cached.
    pub fn metadata_families(&self) -> usize {
        self.metadata.len()
    }

    /// Drops groups that received no sample for longer than the idle timeout. Returns how many.
    ///
    /// `now_ms` is the wall clock in ms since the epoch, as passed to [`Engine::ingest`].
    pub fn sweep_idle(&mut self, now_ms: i64) -> usize {
        let cutoff = now_ms.saturating_sub(self.config.idle_timeout_ms);
        let before = self.groups.len();
        self.groups.retain(|e| e.group.last_seen_ms >= cutoff);
        let removed = before - self.groups.len();
        self.removed_idle += removed as u64;
        removed
    }

    /// Calls `f` with each group's labels (sorted by name, `__name__`/`le`/rule labels removed) and
    /// its current derived value of `family`, in ascending label order. Groups that withhold `family`
    /// are skipped.
    pub fn for_each_derived(&self, family: Family, mut f: impl FnMut(&[(String, String)], &DerivedValue)) {
        let mut rows: Vec<(&[(String, String)], &DerivedValue)> = self
            .groups
            .iter()
            .filter_map(|e| e.group.output(family).map(|v| (e.group.labels.as_slice(), v)))
            .collect();
        rows.sort_by(|a, b| a.0.cmp(b.0));
        for (labels, value) in rows {
            f(labels, value);
        }
    }

    /// Counts for self-metrics.
    pub fn stats(&self) -> EngineStats {
        let mut withheld: HashMap<(Family, WithheldReason), usize> = HashMap::new();
        for e in self.groups.iter() {
            for family in Family::ALL {
                if let Some(reason) = e.group.withheld(family) {
                    *withheld.entry((family, reason)).or_default() += 1;
                }
            }
        }
        let mut withheld: Vec<(Family, WithheldReason, usize)> = withheld.into_iter().map(|((f, r), n)| (f, r, n)).collect();
        withheld.sort();
        EngineStats {
            active_series: self.groups.iter().map(|e| e.group.active_series()).sum(),
            groups: self.groups.len(),
            withheld,
            frames_dropped: self.frames_dropped,
            groups_removed_stale: self.removed_stale,
            groups_removed_idle: self.removed_idle,
            counter_resets: self.counter_resets,
            newest_sample_ms: self.newest_sample_ms,
        }
    }
}
