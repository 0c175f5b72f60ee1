//! Applying one request: [`Engine::apply`], in two passes over its series under one borrow of the
//! engine's parts (docs/ENGINE.md, "The write path").
//!
//! 1. **Look up** every series by its key in the series index. A series the index does not hold
//!    has its labels decoded (once: [`WriteRequestRef::resolve`]), checked against the label
//!    limits and normalised, classified and its group found by hash, once; a malformed label or a
//!    request whose decoded labels pass their memory allowance refuses the request whole before
//!    anything is applied. Every group the request sends to is held, so none is evicted under it.
//! 2. **Apply** every series: samples stamped past receive time plus the future skew, or at or
//!    before the epoch, are refused; float samples go to their group's frames; custom-bucket
//!    native histograms go in as the classic series they stand for; metadata is cached.
//!
//! Every sample is counted in the outcome's report as applied or rejected with a reason
//! (docs/ENGINE.md, invariant 3). Groups whose series all went stale leave when the batch ends, so
//! a later sample of the same request (a real value beside a staleness marker) finds its group.

use std::cell::Cell;

use super::counters::Counters;
use super::events::Events;
use super::index::{SeriesIndex, Target};
use super::metadata::MetadataCache;
use super::retired::RetiredGroups;
use super::room::{self, Evictor};
use super::table::{GroupTable, group_label_bytes};
use super::*;
use crate::classify::{RoleKey, classify, may_be_read};
use crate::forms::{self, UnreadForm};
use crate::group::Offer;
use crate::observe::{EngineEvent, GroupMeta};
use crate::reasons::RemovalReason;
use protocol::histogram::{self, HistogramError, NativeHistogram};
use protocol::labels::LabelLimits;
use protocol::{LabelScratch, NameMemo, ProtocolError, WriteRequestRef, is_stale_marker};

mod admit;
mod feeds;
mod look_up;
mod native;
mod outcome;

pub use outcome::{IngestPolicy, Outcome, Refusal, RequestError, SERIES_BYTES, Written};

impl Engine {
    /// Applies one decoded request received at `now_ms` (wall clock, ms since the epoch: for the
    /// future-skew limit and the idle timeout), in two passes (module doc). `samples` is the
    /// request's sample count as the receiver counts it ([`WriteRequestRef::sample_count`]), kept
    /// current as series are walked (a series whose provisional key was exact only for a look-up
    /// may hold more samples than first read), so that a caller guarding the count through a
    /// panic counts what the outcome would have.
    ///
    /// # Errors
    /// [`RequestError`] when the request is refused whole: nothing was applied or counted.
    pub fn apply(
        &mut self,
        request: &mut WriteRequestRef<'_>,
        policy: &IngestPolicy<'_>,
        now_ms: i64,
        samples: &Cell<u64>,
    ) -> Result<Outcome, RequestError> {
        let mut batch = self.batch(now_ms, policy.label_epoch);
        let verdicts = batch.look_up(request, policy, samples)?;
        #[cfg(feature = "failpoints")]
        fail::fail_point!("ingest::under_lock");
        Ok(batch.apply_request(request, &verdicts, policy))
    }
}

/// The parts a batch borrows.
pub(super) struct Parts<'e> {
    pub(super) config: &'e EngineConfig,
    pub(super) table: &'e mut GroupTable,
    pub(super) index: &'e mut SeriesIndex,
    pub(super) retired: &'e mut RetiredGroups,
    pub(super) metadata: &'e mut MetadataCache,
    pub(super) counters: &'e mut Counters,
    pub(super) events: &'e mut Events,
    pub(super) room: &'e mut Evictor,
}

/// What pass 1 decided for one series.
#[derive(Debug, Clone, Copy)]
pub(super) enum Verdict {
    /// The index holds it: its labels stay as they came (pending for RW 1.0).
    Known(Target),
    /// Its labels are decoded, checked and normalised: a series no rule reads.
    Unused,
    /// Its labels are decoded, checked and normalised: a series of `role`, whose group has the
    /// group-label hash and count `group` (and is in `slot` if it was live in pass 1), and can
    /// feed a family with the request's series (`feeds`, [`Batch::judge`]).
    Input {
        role: RoleKey,
        group: (u64, usize),
        slot: Option<u32>,
        feeds: bool,
    },
    /// Decoded, checked and normalised, with native histograms: applied by labels. Its group
    /// as for [`Verdict::Input`].
    Histograms {
        group: (u64, usize),
        slot: Option<u32>,
    },
    /// Its labels were refused: every sample of it is rejected with this reason.
    Refused(protocol::LabelError),
}

/// The samples of one request being applied. Groups whose series all went stale during the batch
/// are removed when it is dropped.
pub(super) struct Batch<'e> {
    parts: Parts<'e>,
    /// Receive wall clock, ms since the epoch (for the idle timeout only).
    now_ms: i64,
    /// Whether this batch reads and fills the series index ([`SeriesIndex::admit`]).
    indexed: bool,
    /// Groups whose series all went stale during the batch: removed when it ends, unless a later
    /// sample of the batch revived them.
    stale: Vec<GroupRef>,
    /// Groups (hash and label count) pass 1 found able to feed a family with the request's
    /// series, which were not already feeding one ([`Batch::judge`]).
    feeding: Vec<(u64, usize)>,
}

/// A series the index does not hold, once classified: its role, its group's hash and label
/// count, and whether the group can feed a family with the request's series.
struct New {
    role: RoleKey,
    group: (u64, usize),
    feeds: bool,
}

/// The role of a series named `name` with normalised `labels` under `config`'s metric prefix,
/// when a rule reads it.
pub(super) fn read_role(
    config: &EngineConfig,
    name: &str,
    labels: &[Label<'_>],
) -> Option<RoleKey> {
    if may_be_read(name, &config.metric_prefix) {
        classify(name, &config.metric_prefix, labels)
            .filter(|key| crate::classify::wanted(key.input, &config.slos))
    } else {
        None
    }
}

/// Where a series goes, once its labels are read.
enum Route {
    /// A series the engine does not hold, refused at `max_active_series`, past the state budget
    /// or past [`crate::MAX_SERIES_PER_INPUT`], for this reason.
    Limited(RejectReason),
    /// The group in this slot.
    Group(u32),
}

/// Samples of `report` the receiver accepted (see [`Written`]).
fn accepted(report: &IngestReport) -> u64 {
    report.applied
        + report.rejected[RejectReason::UnusedSeries.index()]
        + report.rejected[RejectReason::DuplicateSample.index()]
}

impl<'e> Batch<'e> {
    /// Begins applying one request at `now_ms` whose labels are checked under `epoch`.
    pub(super) fn begin(parts: Parts<'e>, now_ms: i64, epoch: u64) -> Batch<'e> {
        parts.table.begin_batch();
        let indexed = parts.index.admit(epoch);
        Batch {
            parts,
            now_ms,
            indexed,
            stale: Vec::new(),
            feeding: Vec::new(),
        }
    }

    /// Pass 2 (module doc).
    fn apply_request(
        &mut self,
        request: &WriteRequestRef<'_>,
        verdicts: &[Verdict],
        policy: &IngestPolicy<'_>,
    ) -> Outcome {
        let mut outcome = Outcome::default();
        let latest = self.now_ms.saturating_add(policy.max_future_skew_ms);
        let mut in_time: Vec<Sample> = Vec::new();
        // Samples the classic series of native histograms had accepted, which are not float
        // samples written (`Written::samples` is the accepted samples less these).
        let mut classic_accepted = 0;
        for (position, (series, &verdict)) in request.series.iter().zip(verdicts).enumerate() {
            let report = &mut outcome.report;
            if let Verdict::Refused(error) = verdict {
                let reason = RejectReason::Label(error);
                report.reject(reason, series.sample_count());
                outcome.refuse(position, reason.into());
                continue;
            }
            let (samples, mut refused) =
                samples_in_time(series.samples.as_slice(), latest, &mut in_time, report);
            let labels = request.labels_of(series);
            let limited = match verdict {
                Verdict::Known(target) => {
                    outcome.known_series += 1;
                    if samples.is_empty() {
                        None
                    } else {
                        self.apply_known(target, samples, report);
                        None
                    }
                }
                Verdict::Unused => {
                    report.reject(RejectReason::UnusedSeries, samples.len() as u64);
                    // A part of a read histogram is remembered once its group knows it came.
                    let told = self.record_form(labels, UnreadForm::UnreadParts);
                    if let Some(key) = series.labels.key().filter(|_| self.indexed && told) {
                        let room = self.state_room();
                        self.parts.index.insert_unused(key, self.now_ms, room);
                    }
                    None
                }
                Verdict::Input {
                    role,
                    group,
                    slot,
                    feeds,
                } if !samples.is_empty() => {
                    let key = series.labels.key();
                    let new = New { role, group, feeds };
                    self.apply_new(key, labels, new, slot, samples, report)
                }
                Verdict::Input { .. } => None,
                Verdict::Histograms { .. } => {
                    let limited = if samples.is_empty() {
                        None
                    } else {
                        self.apply_labelled(series.labels.key(), labels, samples, report)
                    };
                    for h in &series.histograms {
                        let (applied, refusal) = self.apply_histogram(labels, h, latest);
                        classic_accepted += accepted(&applied);
                        report.merge(&applied);
                        match refusal {
                            Ok(true) => outcome.written.histograms += 1,
                            Ok(false) => {}
                            Err(r) => refused = refused.or(Some(r)),
                        }
                    }
                    limited
                }
                Verdict::Refused(_) => unreachable!("handled above"),
            };
            if let Some(reason) = limited {
                refused = refused.or(Some(reason.into()));
            }
            if let Some(refusal) = refused {
                outcome.refuse(position, refusal);
            }
            if series.metadata.is_some()
                && let Some(metadata) = request.family_metadata(series)
                && let Err(reason) = self
                    .parts
                    .metadata
                    .record(&metadata, &self.parts.config.metric_prefix)
            {
                outcome.metadata_dropped.add(reason);
            }
        }
        outcome.written.samples = accepted(&outcome.report) - classic_accepted;
        for metadata in &request.metadata {
            if let Err(reason) = self
                .parts
                .metadata
                .record(metadata, &self.parts.config.metric_prefix)
            {
                outcome.metadata_dropped.add(reason);
            }
        }
        outcome
    }

    /// Applies one series' samples by its labels (normalised), looked up by `key` first and
    /// remembered under it: what [`Engine::ingest`] and the classic series of native histograms
    /// take. Returns the limit that refused the series, if one did.
    pub(super) fn apply_labelled(
        &mut self,
        key: Option<SeriesKey>,
        labels: &[Label<'_>],
        samples: &[Sample],
        report: &mut IngestReport,
    ) -> Option<RejectReason> {
        if let Some(target) = key.and_then(|k| self.known(k)) {
            self.apply_known(target, samples, report);
            return None;
        }
        match self.route_new(labels, false) {
            Verdict::Input {
                role, group, slot, ..
            } => {
                let feeds = self.feeding.contains(&group) || self.could_feed(slot, &[role]);
                let new = New { role, group, feeds };
                self.apply_new(key, labels, new, slot, samples, report)
            }
            _ => {
                report.reject(RejectReason::UnusedSeries, samples.len() as u64);
                let told = self.record_form(labels, UnreadForm::UnreadParts);
                if let Some(key) = key.filter(|_| self.indexed && told) {
                    let room = self.state_room();
                    self.parts.index.insert_unused(key, self.now_ms, room);
                }
                None
            }
        }
    }

    /// Applies one series' samples to what the index holds for it.
    #[inline]
    fn apply_known(&mut self, target: Target, samples: &[Sample], report: &mut IngestReport) {
        match target {
            Target::Unused { .. } => {
                report.reject(RejectReason::UnusedSeries, samples.len() as u64)
            }
            Target::Group {
                slot,
                generation,
                position,
            } => {
                // No group a batch holds leaves before the batch ends.
                debug_assert!(self.parts.table.live(slot, generation), "a held group left");
                self.apply_routed(slot, Role::At(usize::from(position)), samples, report);
            }
        }
    }

    /// Applies the samples of a series the index does not hold, `new`, whose group was live in
    /// `slot` in pass 1 if it was; remembers it under `key` once it has its place in the group.
    /// Returns the limit that refused it, if one did.
    fn apply_new(
        &mut self,
        key: Option<SeriesKey>,
        labels: &[Label<'_>],
        new: New,
        slot: Option<u32>,
        samples: &[Sample],
        report: &mut IngestReport,
    ) -> Option<RejectReason> {
        // A group pass 1 found is live still: a group the batch holds does not leave before it
        // ends. One created since (by an earlier series of the request) is found by its hash.
        let dropped = &self.parts.config.drop_labels;
        let slot = slot.or_else(|| self.parts.table.find(new.group, labels, dropped));
        let slot = match self.route(slot, labels, &new, !samples.is_empty()) {
            Route::Limited(reason) => {
                report.reject(reason, samples.len() as u64);
                return Some(reason);
            }
            Route::Group(slot) => slot,
        };
        let position = self.apply_routed(slot, Role::Key(new.role, new.feeds), samples, report);
        // Remembered once the series has its place in the group (not when its samples were all
        // refused before the group took it: the next request routes it again).
        if let (Some(key), Some(position), true) = (key, position, self.indexed) {
            let generation = self.parts.table.generation(slot);
            let room = self.state_room();
            self.parts
                .index
                .insert_group(key, slot, generation, position, room);
        }
        None
    }

    /// The samples of a series routed to the group in `slot` as `role`. Returns the series'
    /// position among the group's roles when it has one (its first sample may create it).
    fn apply_routed(
        &mut self,
        slot: u32,
        mut role: Role,
        samples: &[Sample],
        report: &mut IngestReport,
    ) -> Option<usize> {
        let config = self.parts.config;
        let (max_frames, settle) = (config.max_pending_frames.max(1), config.settle_scrapes);
        let new_role = match role {
            Role::Key(key, feeds) => {
                (!self.parts.table.at(slot).group.has_role(key)).then_some(feeds)
            }
            Role::At(_) => None,
        };
        let no_room = match new_role {
            Some(feeds) if !samples.is_empty() => {
                let bytes = self.parts.table.role_bytes();
                self.make_room(Some(slot), bytes, feeds).err()
            }
            _ => None,
        };
        let now_ms = self.now_ms;
        let generation = self.parts.table.generation(slot);
        let group_ref = GroupRef { slot, generation };
        if let Some(reason) = no_room {
            report.reject(reason, samples.len() as u64);
            self.mark_limited(slot, reason);
            return None;
        }
        let entry = self.parts.table.at_mut(slot);
        let (group, meta) = (&mut entry.group, &mut entry.meta);
        group.last_seen_ms = now_ms;
        let (series_before, changes_before) = (group.series(), group.role_set_changes());
        let mut newest_here = None;
        let (mut duplicates, mut out_of_order) = (0, 0);
        for sample in samples {
            if sample.value.is_nan() && !is_stale_marker(sample.value) {
                report.reject(RejectReason::NanValue, 1);
                continue;
            }
            let position = match role {
                Role::At(position) => position,
                Role::Key(key, _) => group.role_position(key, sample.timestamp_ms, settle),
            };
            role = Role::At(position);
            match group.offer(
                position,
                sample.timestamp_ms,
                sample.value,
                max_frames,
                settle,
            ) {
                Offer::Applied | Offer::Stale => {
                    report.apply(1);
                    self.parts.counters.sample_at(sample.timestamp_ms);
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
        let added = group.series() - series_before;
        let role_set_changed = group.role_set_changes() != changes_before;
        let events = std::mem::take(&mut group.events);
        self.parts.counters.absorb(&events);
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
            self.parts.events.push(EngineEvent::CounterReset {
                labels: group.labels.clone(),
            });
        }
        let all_stale = group.all_stale();
        self.parts.events.touch(group_ref, meta);
        if all_stale {
            self.stale.push(group_ref);
        }
        if added > 0 {
            self.parts.table.grew(slot, added);
        }
        if role_set_changed {
            self.parts.table.check_lone(slot);
        }
        self.bound_touched();
        match role {
            Role::At(position) => Some(position),
            Role::Key(..) => None,
        }
    }

    /// Removes the groups whose series all went stale during the batch (and stayed so), keeping
    /// what they leave for their return among the retired states.
    fn end(&mut self) {
        for group in std::mem::take(&mut self.stale) {
            let gone = self
                .parts
                .table
                .get(group)
                .is_none_or(|e| !e.group.all_stale());
            if gone {
                continue;
            }
            if let Some(labels) = leave(self.parts.table, self.parts.retired, group.slot, true) {
                self.parts.events.push(EngineEvent::GroupRemoved {
                    labels,
                    reason: RemovalReason::Stale,
                });
                self.parts.counters.removed(RemovalReason::Stale);
            }
        }
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        self.end();
    }
}

/// A series of a group: by its role, or by its position among the group's roles once it has one.
#[derive(Debug, Clone, Copy)]
enum Role {
    /// Its role, new to the group or not, and whether its group can feed a family with its
    /// request's series ([`Verdict::Input`]).
    Key(RoleKey, bool),
    /// Its position ([`crate::group::Group::role_position`]).
    At(usize),
}

/// The samples of one series stamped in `(0, latest]` (ms): `samples` itself when all are (the
/// common case, no copy), else those copied into `in_time`. The others are counted in `report`
/// as `future_timestamp` or `non_positive_timestamp`, and the first of those reasons is returned.
fn samples_in_time<'a>(
    samples: &'a [Sample],
    latest: i64,
    in_time: &'a mut Vec<Sample>,
    report: &mut IngestReport,
) -> (&'a [Sample], Option<Refusal>) {
    if !samples
        .iter()
        .any(|s| s.timestamp_ms > latest || s.timestamp_ms <= 0)
    {
        return (samples, None);
    }
    in_time.clear();
    in_time.extend(
        samples
            .iter()
            .filter(|s| s.timestamp_ms > 0 && s.timestamp_ms <= latest),
    );
    let future = samples.iter().filter(|s| s.timestamp_ms > latest).count() as u64;
    let early = (samples.len() - in_time.len()) as u64 - future;
    let mut refused = None;
    if future > 0 {
        report.reject(RejectReason::FutureTimestamp, future);
        refused = Some(RejectReason::FutureTimestamp.into());
    }
    if early > 0 {
        report.reject(RejectReason::NonPositiveTimestamp, early);
        refused = refused.or(Some(RejectReason::NonPositiveTimestamp.into()));
    }
    (in_time, refused)
}
