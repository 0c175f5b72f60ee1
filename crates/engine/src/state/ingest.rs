//! Applying samples: one [`Batch`] per request, which looks series up in the series index
//! ([`super::index`]), routes the ones it does not hold to their group, and applies each series'
//! samples to its group's frames (docs/ENGINE.md, "The series index" and "Frames").
//!
//! Every sample is counted in the caller's [`IngestReport`] as applied or rejected with a reason
//! (docs/ENGINE.md, invariant 3).

use super::*;
use crate::classify::{RoleKey, classify, may_be_read};
use crate::group::Offer;
use crate::observe::RemovalReason;
use index::Target;
use protocol::{Sample, SeriesKey, is_stale_marker};

/// What the engine decided for a series it found in its index: the handle [`Batch::lookup`] gives
/// and [`Batch::apply_known`] takes. Valid for the rest of the batch that gave it: no group a
/// batch looked up is removed before the batch ends (stale groups leave when it ends; eviction
/// spares groups the batch holds). 12 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownSeries(Target);

/// A series of a group: by its role, or by its position among the group's roles once it has one.
#[derive(Debug, Clone, Copy)]
enum RoleRef {
    /// Its role, new to the group or not.
    Key(RoleKey),
    /// Its position ([`crate::group::Group::role_position`]).
    At(usize),
}

/// Where a series goes, once its labels are read.
enum Route {
    /// No rule reads it.
    Unused,
    /// A series the engine does not hold, refused at `max_active_series`, past the state
    /// budget or past [`crate::MAX_SERIES_PER_INPUT`], for this reason.
    Limited(RejectReason),
    /// The group in this slot, as this role.
    Group(u32, RoleKey),
}

/// The samples of one request being applied ([`Engine::batch`]). Groups whose series all went
/// stale during the batch are removed when it is dropped, so that a later sample of the same
/// request (the real value of a series beside its staleness marker) finds its group, and so that
/// every [`KnownSeries`] of the batch stays valid.
#[derive(Debug)]
pub struct Batch<'e> {
    engine: &'e mut Engine,
    /// Receive wall clock, ms since the epoch (for the idle timeout only).
    now_ms: i64,
    /// Whether this batch reads and fills the series index ([`index::SeriesIndex::admit`]).
    indexed: bool,
}

impl Engine {
    /// Begins applying one request received at `now_ms` (wall clock, ms since the epoch; used for
    /// the idle timeout only), whose labels the caller checked under `epoch`: an opaque number
    /// it raises whenever its label checks change (a reload of the label limits). Index entries
    /// of an older epoch are forgotten; a batch of an older epoch than the index's neither reads
    /// nor fills it.
    pub fn batch(&mut self, now_ms: i64, epoch: u64) -> Batch<'_> {
        self.batches += 1;
        let indexed = self.index.admit(epoch);
        Batch {
            engine: self,
            now_ms,
            indexed,
        }
    }

    /// The label-check epoch of the series index: a batch of this epoch reads and fills it.
    pub fn index_epoch(&self) -> u64 {
        self.index.epoch()
    }

    /// Applies one series' samples, as a batch of its own at the index's epoch: what tools and
    /// tests use. `labels` must be normalised ([`protocol::normalize_labels`]: sorted by name, no
    /// empty values, with `__name__`); they are looked up and remembered by the key of their
    /// text. See [`Batch::apply`] for the accounting.
    pub fn ingest(
        &mut self,
        labels: &[Label<'_>],
        samples: &[Sample],
        now_ms: i64,
        report: &mut IngestReport,
    ) {
        let mut scratch = std::mem::take(&mut self.scratch);
        let key = SeriesKey::of_labels(labels, &mut scratch);
        self.scratch = scratch;
        let epoch = self.index.epoch();
        self.batch(now_ms, epoch)
            .apply(Some(key), labels, samples, report);
    }

    /// Number of series the index holds (for tests and memory accounting).
    pub fn indexed_series(&self) -> usize {
        self.index.len()
    }

    /// Where the series `labels` goes: classified, and its group found (or created). A series
    /// the engine does not hold is refused without creating anything when `has_samples` and the
    /// engine holds `max_active_series` series.
    fn route(&mut self, name: &str, labels: &[Label<'_>], has_samples: bool, now_ms: i64) -> Route {
        let Some(key) = classify(name, labels) else {
            return Route::Unused;
        };
        let existing = self.group_slot(labels, now_ms, false);
        let known = existing.is_some_and(|slot| self.group(slot).has_role(key));
        if !known
            && existing.is_some_and(|slot| {
                self.group(slot).series_of_input(key) >= crate::MAX_SERIES_PER_INPUT
            })
        {
            return Route::Limited(RejectReason::TooManyBuckets);
        }
        if !known && has_samples {
            // A new series, and a new group when its group is not held yet.
            let group = match existing {
                Some(_) => 0,
                None => GROUP_BYTES + group_label_bytes(labels) + self.new_slot_growth(),
            };
            let bytes = self.role_bytes() + group;
            if let Err(reason) = self.make_room(existing, now_ms, bytes) {
                if let Some(slot) = existing {
                    self.mark_limited(slot, reason, now_ms);
                }
                return Route::Limited(reason);
            }
        }
        let slot = match existing {
            Some(slot) => slot,
            None => self.group_slot(labels, now_ms, true).expect("created"),
        };
        Route::Group(slot, key)
    }

    /// The samples of a series routed to the group in `slot` as `role`. Returns the series'
    /// position among the group's roles when it has one (its first sample may create it).
    fn apply_routed(
        &mut self,
        slot: u32,
        mut role: RoleRef,
        samples: &[Sample],
        now_ms: i64,
        report: &mut IngestReport,
    ) -> Option<usize> {
        let max_frames = self.config.max_pending_frames.max(1);
        let settle = self.config.settle_scrapes;
        let new_role = matches!(role, RoleRef::Key(key) if !self.group(slot).has_role(key));
        let no_room = if new_role && !samples.is_empty() {
            self.make_room(Some(slot), now_ms, self.role_bytes()).err()
        } else {
            None
        };
        let role_bytes = self.role_bytes();
        let generation = self.slots[slot as usize].generation;
        let Entry { group, meta, .. } = self.slots[slot as usize]
            .entry
            .as_mut()
            .expect("routed to a live group");
        if let Some(reason) = no_room {
            report.reject(reason, samples.len() as u64);
            meta.limited = Some((reason, now_ms));
            if !meta.touched {
                meta.touched = true;
                self.touched.push((slot, generation));
            }
            return None;
        }
        group.last_seen_ms = now_ms;
        let series_before = group.series();
        let mut newest = self.newest_sample_ms;
        let mut newest_here = None;
        let (mut duplicates, mut out_of_order) = (0, 0);
        for sample in samples {
            if sample.value.is_nan() && !is_stale_marker(sample.value) {
                report.reject(RejectReason::NanValue, 1);
                continue;
            }
            let position = match role {
                RoleRef::At(position) => position,
                RoleRef::Key(key) => group.role_position(key, sample.timestamp_ms, settle),
            };
            role = RoleRef::At(position);
            match group.offer(
                position,
                sample.timestamp_ms,
                sample.value,
                max_frames,
                settle,
            ) {
                Offer::Applied | Offer::Stale => {
                    report.apply(1);
                    newest = newest.max(Some(sample.timestamp_ms));
                    if !is_stale_marker(sample.value) {
                        newest_here = newest_here.max(Some(sample.timestamp_ms));
                    }
                }
                Offer::Duplicate => {
                    report.reject(RejectReason::DuplicateSample, 1);
                    duplicates += 1;
                }
                Offer::OutOfOrder => {
                    report.reject(RejectReason::OutOfOrder, 1);
                    out_of_order += 1;
                }
                Offer::FrameEvicted => report.reject(RejectReason::FrameEvicted, 1),
            }
        }
        self.newest_sample_ms = newest;
        let added = group.series() - series_before;
        self.tracked_series += added;
        self.groups_bytes += added * role_bytes;
        let events = std::mem::take(&mut group.events);
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
        for (kind, n) in [duplicates, out_of_order].into_iter().enumerate() {
            if n > 0 {
                meta.rejects.record(kind, n, now_ms);
            }
        }
        if events.counter_resets > 0 {
            meta.counter_resets += events.counter_resets;
            self.events.push(EngineEvent::CounterReset {
                labels: group.labels.clone(),
            });
        }
        if !meta.touched {
            meta.touched = true;
            self.touched.push((slot, generation));
        }
        if group.all_stale() {
            self.stale.push((slot, generation));
        }
        if self.touched.len() > self.slots.len() + crate::observe::MAX_QUEUED_EVENTS {
            let slots = &self.slots;
            self.touched.retain(|(s, g)| {
                slots[*s as usize].generation == *g && slots[*s as usize].entry.is_some()
            });
        }
        match role {
            RoleRef::At(position) => Some(position),
            RoleRef::Key(_) => None,
        }
    }

    /// Records that a limit (`reason`) refused a new series of the group in `slot` at `now_ms`,
    /// and queues the group for the next [`Engine::take_events`] (which reports it once).
    fn mark_limited(&mut self, slot: u32, reason: RejectReason, now_ms: i64) {
        let generation = self.slots[slot as usize].generation;
        if let Some(Entry { meta, .. }) = self.slots[slot as usize].entry.as_mut() {
            meta.limited = Some((reason, now_ms));
            if !meta.touched {
                meta.touched = true;
                self.touched.push((slot, generation));
            }
        }
    }

    /// Removes the groups whose series all went stale during the batch that ends (and stayed
    /// so), keeping what they leave for their return among the retired states.
    fn end_batch(&mut self) {
        for (slot, generation) in std::mem::take(&mut self.stale) {
            if !self.live(slot, generation) || !self.group(slot).all_stale() {
                continue;
            }
            let labels = self.group(slot).labels.clone();
            self.events.push(EngineEvent::GroupRemoved {
                labels,
                reason: RemovalReason::Stale,
            });
            self.remove_retiring(slot, true);
            self.removed_stale += 1;
        }
    }
}

impl Batch<'_> {
    /// What the index holds for `key`: `None` when it holds nothing (or only a dead entry of a
    /// removed group, which is forgotten here), and always for a batch that does not use the
    /// index. A group found is kept for the rest of the batch (never evicted).
    #[inline]
    pub fn lookup(&mut self, key: SeriesKey) -> Option<KnownSeries> {
        if !self.indexed {
            return None;
        }
        let engine = &mut *self.engine;
        let target = engine.index.get(key, self.now_ms)?;
        if let Target::Group {
            slot, generation, ..
        } = target
        {
            match engine.slots.get_mut(slot as usize) {
                Some(GroupSlot {
                    generation: g,
                    entry: Some(entry),
                }) if *g == generation => entry.batch = engine.batches,
                _ => {
                    engine.index.remove(key);
                    return None;
                }
            }
        }
        Some(KnownSeries(target))
    }

    /// Keeps the group of a series the index does not hold (`labels` normalised, as for
    /// [`Batch::apply`]) for the rest of the batch, as [`Batch::lookup`] keeps the group of one it
    /// holds: no group a request sends samples to is evicted while the request is applied, whether
    /// its series were known or not. Call it for every series not found, before applying any.
    pub fn hold(&mut self, labels: &[Label<'_>]) {
        let engine = &mut *self.engine;
        let name = labels
            .iter()
            .find(|l| l.name == "__name__")
            .map_or("", |l| l.value);
        if !may_be_read(name) || classify(name, labels).is_none() {
            return;
        }
        if let Some(slot) = engine.group_slot(labels, self.now_ms, false)
            && let Some(entry) = engine.slots[slot as usize].entry.as_mut()
        {
            entry.batch = engine.batches;
        }
    }

    /// Applies one series' samples to what [`Batch::lookup`] found for it in this batch, exactly
    /// as [`Batch::apply`] would with its labels. The accounting is [`Batch::apply`]'s.
    #[inline]
    pub fn apply_known(
        &mut self,
        known: KnownSeries,
        samples: &[Sample],
        report: &mut IngestReport,
    ) {
        let engine = &mut *self.engine;
        let (slot, generation, position) = match known.0 {
            Target::Unused { .. } => {
                report.reject(RejectReason::UnusedSeries, samples.len() as u64);
                return;
            }
            Target::Group {
                slot,
                generation,
                position,
            } => (slot, generation, position),
        };
        // No group a batch looked up leaves before the batch ends (`Batch`'s doc).
        debug_assert!(engine.live(slot, generation), "a known series' group left");
        let role = RoleRef::At(usize::from(position));
        engine.apply_routed(slot, role, samples, self.now_ms, report);
    }

    /// Applies one series' samples by its labels, remembering what was decided under `key` (the
    /// series' [`SeriesKey`], when it has one that is not provisional) for the rest of the epoch.
    ///
    /// `labels` must be normalised ([`protocol::normalize_labels`]): sorted by name, no empty
    /// values, with `__name__`. `samples` carry ms timestamps. Every sample is counted in `report`
    /// as applied or rejected: `unused_series` (no rule reads the series, `*_created` included),
    /// `duplicate_sample` (same timestamp as the series' newest: an idempotent no-op),
    /// `out_of_order`, `nan_value` (a NaN that is not the staleness marker), `frame_evicted`, or
    /// `active_series_limit` (a series the engine does not hold yet while it holds
    /// `max_active_series`; not remembered, so it is checked again next time). Staleness markers
    /// (by bits) are applied.
    pub fn apply(
        &mut self,
        key: Option<SeriesKey>,
        labels: &[Label<'_>],
        samples: &[Sample],
        report: &mut IngestReport,
    ) {
        if let Some(known) = key.and_then(|k| self.lookup(k)) {
            return self.apply_known(known, samples, report);
        }
        let (engine, now_ms) = (&mut *self.engine, self.now_ms);
        let name = labels
            .iter()
            .find(|l| l.name == "__name__")
            .map_or("", |l| l.value);
        let route = if may_be_read(name) {
            engine.route(name, labels, !samples.is_empty(), now_ms)
        } else {
            Route::Unused
        };
        let key = key.filter(|_| self.indexed);
        match route {
            Route::Unused => {
                report.reject(RejectReason::UnusedSeries, samples.len() as u64);
                if let Some(key) = key {
                    let room = engine.state_room();
                    engine.index.insert_unused(key, now_ms, room);
                }
            }
            Route::Limited(reason) => report.reject(reason, samples.len() as u64),
            Route::Group(slot, role) => {
                let role = RoleRef::Key(role);
                let position = engine.apply_routed(slot, role, samples, now_ms, report);
                // Remembered once the series has its place in the group (not when its samples
                // were all refused before the group took it: the next request routes it again).
                if let (Some(key), Some(position)) = (key, position) {
                    let generation = engine.slots[slot as usize].generation;
                    let room = engine.state_room();
                    engine
                        .index
                        .insert_group(key, slot, generation, position, room);
                }
            }
        }
    }

    /// Caches one metadata entry ([`Engine::record_metadata`]).
    pub fn record_metadata(&mut self, metadata: &protocol::MetadataRef<'_>) {
        self.engine.record_metadata(metadata);
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        self.engine.end_batch();
    }
}
