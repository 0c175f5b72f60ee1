//! The engine: classifies series, routes samples to their group, and keeps the counts for self-metrics.

use std::hash::{BuildHasher, Hasher};

use hashbrown::{HashMap, HashTable};

use super::classify::{RoleKey, classify, group_labels, is_read_family, may_be_read};
use super::group::{Committed, Group, Offer};
use super::known::{KnownSeries, KnownTable};
use super::observe::{EngineEvent, EventQueue, GroupMeta, RemovalReason};
use super::*;
use protocol::labels::LabelLimits;
use protocol::{Label, MetadataRef, MetricType, Sample, SeriesKey, is_stale_marker};

mod evict;
pub(crate) mod persist;
mod sweep;
mod views;

/// A cached metadata entry (docs/REMOTE-WRITE.md, checklist item 5).
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
    /// Snapshot, event and missed-scrapes bookkeeping (`observe.rs`).
    meta: GroupMeta,
}

/// A place for one group. `generation` changes whenever the slot's group is removed, so cached
/// series that point at the slot can tell that their group is gone.
#[derive(Debug)]
struct GroupSlot {
    generation: u32,
    entry: Option<Entry>,
}

/// A series seen before: its full label set's 128-bit hash (two independent 64-bit hashes), its
/// group's slot, and its role, or `None` for a series of a readable name that no rule reads (a
/// token bucket whose `le` is not 1, another prompt-token source).
#[derive(Debug, Clone, Copy)]
struct CachedSeries {
    hash: u64,
    check: u64,
    slot: u32,
    generation: u32,
    key: Option<RoleKey>,
}

/// Series state, groups, frames and rules. Not thread-safe: the HTTP layer holds it in a mutex.
///
/// Hot path: a series whose name no rule reads is counted and dropped from its `__name__` alone.
/// A readable series is looked up by the hash of its full label set in a cache of known series,
/// which gives its group and role without classifying it or comparing group labels again; only a
/// new series (or one whose group was removed) takes the full path. The cache trusts a 128-bit
/// hash: two different label sets sharing it are the only way a sample could reach another
/// series' group (probability about n² / 2¹²⁹ for n series, 3·10⁻²⁷ at a million).
#[derive(Debug)]
pub struct Engine {
    config: EngineConfig,
    hasher: foldhash::fast::RandomState,
    /// Random per process (`protocol::independent_hashers`): fixed seeds would let crafted labels
    /// share both hashes.
    series_hashers: [foldhash::fast::SeedableRandomState; 2],
    slots: Vec<GroupSlot>,
    free_slots: Vec<u32>,
    /// Slot indices of the live groups, by group-label hash.
    groups: HashTable<u32>,
    series: HashTable<CachedSeries>,
    metadata: HashMap<String, Metadata>,
    frames_dropped: u64,
    counter_resets: u64,
    /// Outputs held above their computed value, by [`Family::index`] ([`super::hold`]).
    output_holds: [u64; FAMILIES],
    /// Outputs that restarted below what was served because an input of the family fell.
    output_resets: [u64; FAMILIES],
    removed_stale: u64,
    removed_idle: u64,
    /// Groups evicted to make room at `max_active_series` ([`evict`]).
    removed_evicted: u64,
    /// Eviction candidates `(slot, generation)` from the last scan, checked again when popped.
    evictable: Vec<(u32, u32)>,
    /// Receive time (ms) of the last scan for eviction candidates.
    evictable_scanned_ms: Option<i64>,
    newest_sample_ms: Option<i64>,
    /// Input series held across all groups (the quantity `max_active_series` caps).
    tracked_series: usize,
    /// Reused buffer: a label set's bytes, hashed in one call per hasher.
    scratch: Vec<u8>,
    /// What was decided per encoded label set, for the known-series fast path ([`Engine::ingest_known`]).
    known: KnownTable,
    /// Acceptance-corrected bucket state of groups removed for staleness, by group labels, with
    /// the receive time of removal (ms): resumed if the group returns within `idle_timeout_ms`.
    retired: HashMap<Vec<(String, String)>, (Committed, i64)>,
    /// Groups (slot, generation) that took samples since the last [`Engine::take_events`].
    touched: Vec<(u32, u32)>,
    /// Events not yet taken.
    events: EventQueue,
}

/// Where [`Engine::route`] sends a series.
enum Route {
    /// No rule reads it.
    Unused,
    /// A series the engine does not hold, refused at `max_active_series`.
    Limited,
    /// The group in this slot, as this role.
    Group(u32, RoleKey),
}

impl Engine {
    /// Creates an empty engine.
    pub fn new(config: EngineConfig) -> Self {
        Engine {
            config: config.clone(),
            hasher: foldhash::fast::RandomState::default(),
            series_hashers: protocol::independent_hashers().clone(),
            slots: Vec::new(),
            free_slots: Vec::new(),
            groups: HashTable::new(),
            series: HashTable::new(),
            metadata: HashMap::new(),
            frames_dropped: 0,
            counter_resets: 0,
            output_holds: [0; FAMILIES],
            output_resets: [0; FAMILIES],
            removed_stale: 0,
            removed_idle: 0,
            removed_evicted: 0,
            evictable: Vec::new(),
            evictable_scanned_ms: None,
            newest_sample_ms: None,
            tracked_series: 0,
            scratch: Vec::with_capacity(512),
            known: KnownTable::new(known_cap(&config)),
            retired: HashMap::new(),
            touched: Vec::new(),
            events: EventQueue::default(),
        }
    }

    /// The current idle timeout (ms): [`EngineConfig::idle_timeout_ms`] as given at start or by
    /// the last [`Engine::set_config`] (a reload).
    pub fn idle_timeout_ms(&self) -> i64 {
        self.config.idle_timeout_ms
    }

    /// Replaces the settings (idle timeout, pending frames); existing state is kept.
    pub fn set_config(&mut self, config: EngineConfig) {
        self.known.cap = known_cap(&config);
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

    /// The two 64-bit hashes of the full label set: its bytes (name, 0xff, value, 0xff per label,
    /// an unambiguous encoding since label text is UTF-8, where 0xff never occurs) are gathered
    /// once, then hashed in one call per hasher.
    fn series_hash(&mut self, labels: &[Label<'_>]) -> (u64, u64) {
        self.scratch.clear();
        for l in labels {
            self.scratch.extend_from_slice(l.name.as_bytes());
            self.scratch.push(0xff);
            self.scratch.extend_from_slice(l.value.as_bytes());
            self.scratch.push(0xff);
        }
        let bytes = self.scratch.as_slice();
        (
            self.series_hashers[0].hash_one(bytes),
            self.series_hashers[1].hash_one(bytes),
        )
    }

    fn live(&self, slot: u32, generation: u32) -> bool {
        self.slots
            .get(slot as usize)
            .is_some_and(|s| s.generation == generation && s.entry.is_some())
    }

    /// The slot of the group of `labels`, created if `create`.
    fn group_slot(&mut self, labels: &[Label<'_>], now_ms: i64, create: bool) -> Option<u32> {
        let (hash, count) = self.group_hash(labels);
        let slots = &self.slots;
        let same = |i: &u32| {
            let e = slots[*i as usize]
                .entry
                .as_ref()
                .expect("indexed slots hold a group");
            e.hash == hash
                && e.group.labels.len() == count
                && e.group
                    .labels
                    .iter()
                    .zip(group_labels(labels))
                    .all(|((n, v), l)| n == l.name && v == l.value)
        };
        if let Some(i) = self.groups.find(hash, same) {
            return Some(*i);
        }
        if !create {
            return None;
        }
        let owned: Vec<(String, String)> = group_labels(labels)
            .map(|l| (l.name.to_owned(), l.value.to_owned()))
            .collect();
        let resumed = self.retired.remove(&owned);
        let mut group = Group::new(owned, now_ms);
        if let Some((state, _)) = resumed {
            group.resume_acceptance(state);
        }
        let entry = Entry {
            hash,
            group,
            meta: GroupMeta::new(now_ms),
        };
        let slot = match self.free_slots.pop() {
            Some(i) => {
                self.slots[i as usize].entry = Some(entry);
                i
            }
            None => {
                self.slots.push(GroupSlot {
                    generation: 0,
                    entry: Some(entry),
                });
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 groups")
            }
        };
        let slots = &self.slots;
        self.groups.insert_unique(hash, slot, |i| {
            slots[*i as usize].entry.as_ref().map_or(0, |e| e.hash)
        });
        Some(slot)
    }

    /// Removes the group in `slot`; cached series pointing at it become stale by generation.
    fn remove_group(&mut self, slot: u32) {
        let Some(entry) = self.slots[slot as usize].entry.take() else {
            return;
        };
        self.tracked_series -= entry.group.series();
        self.slots[slot as usize].generation = self.slots[slot as usize].generation.wrapping_add(1);
        if let Ok(found) = self.groups.find_entry(entry.hash, |i| *i == slot) {
            found.remove();
        }
        self.free_slots.push(slot);
    }

    /// Where the series `labels` goes. Cached per series; the first sample classifies it and finds
    /// (or creates) its group. A series the engine does not hold is refused without creating
    /// anything when `has_samples` and the engine holds `max_active_series` series. A `keyed` series
    /// is remembered in the known-series table instead of this cache (one entry per series, not two).
    fn route(
        &mut self,
        name: &str,
        labels: &[Label<'_>],
        has_samples: bool,
        now_ms: i64,
        keyed: bool,
    ) -> Route {
        let (hash, check) = if keyed {
            (0, 0)
        } else {
            self.series_hash(labels)
        };
        let found = if keyed {
            None
        } else {
            self.series
                .find(hash, |c| c.hash == hash && c.check == check)
                .copied()
        };
        if let Some(c) = found
            && self.live(c.slot, c.generation)
        {
            return c.key.map_or(Route::Unused, |key| Route::Group(c.slot, key));
        }
        let Some(key) = classify(name, labels) else {
            // Cached only beside an existing group (and forgotten with it).
            if !keyed && let Some(slot) = self.group_slot(labels, now_ms, false) {
                self.cache_series(hash, check, slot, None);
            }
            return Route::Unused;
        };
        let existing = self.group_slot(labels, now_ms, false);
        let known = existing.is_some_and(|slot| self.group(slot).has_role(key));
        if !known && has_samples && !self.make_room(existing, now_ms) {
            return Route::Limited;
        }
        let slot = match existing {
            Some(slot) => slot,
            None => self.group_slot(labels, now_ms, true).expect("created"),
        };
        if !keyed {
            self.cache_series(hash, check, slot, Some(key));
        }
        Route::Group(slot, key)
    }

    fn group(&self, slot: u32) -> &Group {
        &self.slots[slot as usize]
            .entry
            .as_ref()
            .expect("a live slot")
            .group
    }

    fn cache_series(&mut self, hash: u64, check: u64, slot: u32, key: Option<RoleKey>) {
        let cached = CachedSeries {
            hash,
            check,
            slot,
            generation: self.slots[slot as usize].generation,
            key,
        };
        match self
            .series
            .find_mut(hash, |c| c.hash == hash && c.check == check)
        {
            Some(c) => *c = cached,
            None => {
                self.series.insert_unique(hash, cached, |c| c.hash);
            }
        }
    }

    /// Applies one series' samples.
    ///
    /// `labels` must be normalised ([`protocol::normalize_labels`]): sorted by name, no empty
    /// values, with `__name__`. `samples` carry ms timestamps; `now_ms` is the receive wall clock (ms),
    /// used for the idle timeout only. Every sample is counted in `report` as applied or rejected:
    /// `unused_series` (no rule reads the series, `*_created` included), `duplicate_sample` (same
    /// timestamp as the series' newest: an idempotent no-op), `out_of_order`, `nan_value` (a NaN that is
    /// not the staleness marker), `frame_evicted`, or `active_series_limit` (a series the engine does
    /// not hold yet while it holds `max_active_series`). Staleness markers (by bits) are applied.
    pub fn ingest(
        &mut self,
        labels: &[Label<'_>],
        samples: &[Sample],
        now_ms: i64,
        report: &mut IngestReport,
    ) {
        self.ingest_keyed(None, labels, samples, now_ms, report);
    }

    /// [`Engine::ingest`], remembering what was decided for the series under `key` (the identity of
    /// its encoded labels, [`SeriesKey`]) when `key` is given: its labels passed the checks of
    /// `service::ingest::prepare` under these `LabelLimits`. Next time, [`Engine::known_series`] gives
    /// the decision back without the labels. Nothing is remembered for a series refused at
    /// `max_active_series`, or when the limits are not the ones [`Engine::use_label_limits`] set.
    pub fn ingest_keyed(
        &mut self,
        key: Option<(SeriesKey, LabelLimits)>,
        labels: &[Label<'_>],
        samples: &[Sample],
        now_ms: i64,
        report: &mut IngestReport,
    ) {
        let name = labels
            .iter()
            .find(|l| l.name == "__name__")
            .map_or("", |l| l.value);
        let route = if may_be_read(name) {
            self.route(name, labels, !samples.is_empty(), now_ms, key.is_some())
        } else {
            Route::Unused
        };
        if let Some((key, limits)) = key {
            let unused = KnownSeries::UNUSED;
            let known = match route {
                Route::Unused => Some((unused.slot, unused.generation, None)),
                Route::Limited => None,
                Route::Group(slot, role) => {
                    Some((slot, self.slots[slot as usize].generation, Some(role)))
                }
            };
            if let Some(known) = known {
                self.known.insert(key, known, limits, now_ms);
            }
        }
        let (slot, key) = match route {
            Route::Unused => {
                report.reject(RejectReason::UnusedSeries, samples.len() as u64);
                return;
            }
            Route::Limited => {
                report.reject(RejectReason::ActiveSeriesLimit, samples.len() as u64);
                return;
            }
            Route::Group(slot, key) => (slot, key),
        };
        self.apply_routed(slot, key, samples, now_ms, report);
    }

    /// Makes the known series valid for series checked under `limits` (call once per request,
    /// before [`Engine::known_series`]): when they differ from the limits the known series were
    /// checked under (a reload changed them), every known series is forgotten, so that each label
    /// set is checked again under the new limits.
    pub fn use_label_limits(&mut self, limits: LabelLimits) {
        self.known.use_limits(limits);
    }

    /// What was decided for the series whose encoded labels have `key`, if it is known and its
    /// group still lives (an entry of a removed group is forgotten here). `now_ms`: receive time
    /// (ms), which keeps a series no rule reads known for `idle_timeout_ms`.
    pub fn known_series(&mut self, key: SeriesKey, now_ms: i64) -> Option<KnownSeries> {
        let known = self.known.get(key, now_ms)?;
        if known.groupless() || self.live(known.slot, known.generation) {
            return Some(known);
        }
        self.known.remove(key);
        None
    }

    /// Applies one known series' samples, exactly as [`Engine::ingest`] would with its labels.
    /// Returns false, doing nothing, when its group was removed since [`Engine::known_series`]
    /// gave `known` (then call [`Engine::ingest_keyed`] with the labels).
    pub fn ingest_known(
        &mut self,
        known: KnownSeries,
        samples: &[Sample],
        now_ms: i64,
        report: &mut IngestReport,
    ) -> bool {
        if known.groupless() {
            report.reject(RejectReason::UnusedSeries, samples.len() as u64);
            return true;
        }
        if !self.live(known.slot, known.generation) {
            return false;
        }
        match self.known.role(known.role) {
            Some(role) => self.apply_routed(known.slot, role, samples, now_ms, report),
            None => report.reject(RejectReason::UnusedSeries, samples.len() as u64),
        }
        true
    }

    /// Number of known series held (for tests and memory accounting).
    pub fn known_series_count(&self) -> usize {
        self.known.len()
    }

    /// The samples of a series routed to the group in `slot` as role `key`.
    fn apply_routed(
        &mut self,
        slot: u32,
        key: RoleKey,
        samples: &[Sample],
        now_ms: i64,
        report: &mut IngestReport,
    ) {
        let max_frames = self.config.max_pending_frames.max(1);
        let settle = self.config.settle_scrapes;
        let new_role = !self.group(slot).has_role(key);
        let no_room = new_role && !samples.is_empty() && !self.make_room(Some(slot), now_ms);
        let generation = self.slots[slot as usize].generation;
        let Entry { group, meta, .. } = self.slots[slot as usize]
            .entry
            .as_mut()
            .expect("routed to a live group");
        if no_room {
            report.reject(RejectReason::ActiveSeriesLimit, samples.len() as u64);
            return;
        }
        group.last_seen_ms = now_ms;
        let series_before = group.series();
        let mut newest = self.newest_sample_ms;
        let mut newest_here = None;
        for sample in samples {
            if sample.value.is_nan() && !is_stale_marker(sample.value) {
                report.reject(RejectReason::NanValue, 1);
                continue;
            }
            match group.offer(key, sample.timestamp_ms, sample.value, max_frames, settle) {
                Offer::Applied | Offer::Stale => {
                    report.apply(1);
                    newest = newest.max(Some(sample.timestamp_ms));
                    if !is_stale_marker(sample.value) {
                        newest_here = newest_here.max(Some(sample.timestamp_ms));
                    }
                }
                Offer::Duplicate => report.reject(RejectReason::DuplicateSample, 1),
                Offer::OutOfOrder => report.reject(RejectReason::OutOfOrder, 1),
                Offer::FrameEvicted => report.reject(RejectReason::FrameEvicted, 1),
            }
        }
        self.newest_sample_ms = newest;
        self.tracked_series += group.series() - series_before;
        let events = std::mem::take(&mut group.events);
        let all_stale = group.all_stale();
        self.frames_dropped += events.frames_dropped;
        self.counter_resets += events.counter_resets;
        for (total, n) in self.output_holds.iter_mut().zip(events.holds) {
            *total += n;
        }
        for (total, n) in self.output_resets.iter_mut().zip(events.output_resets) {
            *total += n;
        }
        if let Some(ts) = newest_here {
            meta.applied(ts, now_ms);
        }
        if events.counter_resets > 0 {
            meta.counter_resets += events.counter_resets;
            self.events.push(EngineEvent::CounterReset {
                labels: group.labels.to_vec(),
            });
        }
        if !meta.touched {
            meta.touched = true;
            self.touched.push((slot, generation));
        }
        if all_stale {
            if let Some(state) = group.acceptance_state() {
                self.retired.insert(group.labels.to_vec(), (state, now_ms));
            }
            self.events.push(EngineEvent::GroupRemoved {
                labels: group.labels.to_vec(),
                reason: RemovalReason::Stale,
            });
            self.remove_group(slot);
            self.removed_stale += 1;
        }
        if self.touched.len() > self.slots.len() + super::observe::MAX_QUEUED_EVENTS {
            let slots = &self.slots;
            self.touched.retain(|(s, g)| {
                slots[*s as usize].generation == *g && slots[*s as usize].entry.is_some()
            });
        }
    }

    /// Caches one metadata entry by family name (last one wins) when the family's series are read
    /// by a rule ([`is_read_family`]: at most 15 names); other families' metadata is ignored, so
    /// the cache stays bounded and allocates only when a read family's entry is new or changed.
    /// Never fails.
    pub fn record_metadata(&mut self, metadata: &MetadataRef<'_>) {
        if !is_read_family(metadata.family_name) {
            return;
        }
        let same = |e: &Metadata| {
            e.metric_type == metadata.metric_type
                && e.help == metadata.help
                && e.unit == metadata.unit
        };
        let entry = || Metadata {
            metric_type: metadata.metric_type,
            help: metadata.help.to_owned(),
            unit: metadata.unit.to_owned(),
        };
        match self.metadata.get_mut(metadata.family_name) {
            Some(existing) if same(existing) => {}
            Some(existing) => *existing = entry(),
            None => {
                self.metadata
                    .insert(metadata.family_name.to_owned(), entry());
            }
        }
    }

    /// Number of metadata families cached: families a rule reads whose metadata was received.
    pub fn metadata_families(&self) -> usize {
        self.metadata.len()
    }
}

/// Most known series ([`Engine::known_series`]): 8 per series the engine may hold
/// (`max_active_series`; a vLLM engine sends about 6 series per one a rule reads), at least 65 536.
fn known_cap(config: &EngineConfig) -> usize {
    config.max_active_series.saturating_mul(8).max(1 << 16)
}
