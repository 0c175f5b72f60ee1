//! What the engine tells about each group, read-only: a snapshot per group (for `/status` and
//! `/api/v1/groups`), and the events that changed a group (for the service's log). The engine never
//! logs: it returns these values and the HTTP layer renders or logs them (`crates/service/src/http/status.rs`,
//! `service::telemetry::events::EventLog`).

use std::sync::Arc;

use super::Family;
use super::reasons::WithheldReason;
use super::reasons::{RejectReason, RemovalReason};
use super::rules::FAMILIES;
use super::values::DerivedValue;

/// A group's labels: the input labels minus `__name__`, `le`, `source`, `position` and
/// `finished_reason`, as `(name, value)` sorted by name. Shared by the group and every snapshot
/// taken of it, so a snapshot copies a pointer.
pub type GroupLabels = Arc<[(String, String)]>;

/// Where a live group is in the engine, as [`super::Engine::group_refs`] lists it: 8 bytes that
/// hold nothing of the group. [`super::Engine::output_of`] and [`super::Engine::snapshot_of`]
/// answer `None` once the group is removed, also when another group has taken its place since. A
/// `/metrics` response keeps one per group for its whole life (the order it writes them in), so
/// however slowly it is read it keeps no group's labels or outputs alive after the group leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupRef {
    pub(crate) slot: u32,
    pub(crate) generation: u32,
}

/// What `/metrics` shows of one group: its labels and its current output of each family, both
/// shared with the engine (taking one copies pointers, never buckets), built for every group by
/// [`super::Engine::outputs`], or for one family by a `/metrics` window from
/// [`super::Engine::output_of`]. The engine replaces an output when it evaluates the family again
/// and never changes one in place, so a copy keeps what it saw while writes go on (and keeps the
/// replaced output alive while it lives: `/metrics` drops each window once it is formatted).
#[derive(Debug, Clone, PartialEq)]
pub struct GroupOutputs {
    /// The group's labels.
    pub labels: GroupLabels,
    /// The output of each family, by [`Family::index`] (in [`Family::ALL`] order); `None` where
    /// the group withholds the family.
    pub values: [Option<Arc<DerivedValue>>; FAMILIES],
}

impl GroupOutputs {
    /// Sorts `groups` in ascending label order (labels compared pair by pair, name then value):
    /// the order `/metrics` shows groups in within each family. Group labels are unique, so the
    /// order is total. Meant to run after the engine lock is released.
    pub fn sort(groups: &mut [GroupOutputs]) {
        groups.sort_unstable_by(|a, b| a.labels.cmp(&b.labels));
    }
}

/// One family of one group as the status page, the API, the log and
/// `vllm_corrector_family_info` show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FamilyStatus {
    /// The family (its corrected metric name is [`Family::name`]).
    pub family: Family,
    /// `None` when the family is served on `/metrics`, else why it is withheld.
    pub withheld: Option<WithheldReason>,
    /// Served, but in a degraded mode: the acceptance-corrected buckets of a group with
    /// speculative decoding and no per-position accepted-tokens series, one mean weight per
    /// interval (docs/ACCURACY.md).
    pub degraded: bool,
    /// The input series whose absence withholds ([`WithheldReason::MissingInput`]) or degrades
    /// the family, as vLLM names it (with the label a rule selects on).
    pub missing_input: Option<&'static str>,
    /// The limit that refused the group's new series, as its configuration field
    /// ([`RejectReason::limit_name`]), when the family is withheld for [`WithheldReason::Limit`].
    pub limit: Option<&'static str>,
}

impl FamilyStatus {
    /// `served`, `withheld` or `degraded`: the `state` of `vllm_corrector_family_info` and of the
    /// API.
    pub fn state(&self) -> &'static str {
        match (self.withheld, self.degraded) {
            (Some(_), _) => "withheld",
            (None, true) => "degraded",
            (None, false) => "served",
        }
    }

    /// Why the family is withheld or degraded (a [`WithheldReason::as_str`]; `missing_input` for
    /// a degraded family), `None` when it is served in full.
    pub fn reason(&self) -> Option<&'static str> {
        match (self.withheld, self.degraded) {
            (Some(r), _) => Some(r.as_str()),
            (None, true) => Some(WithheldReason::MissingInput.as_str()),
            (None, false) => None,
        }
    }

    /// What the reason is about: the missing input series, or the limit's configuration field.
    pub fn detail(&self) -> Option<&'static str> {
        self.missing_input.or(self.limit)
    }
}

/// A read-only copy of one group's state, built by [`super::Engine::snapshot`].
#[derive(Debug, Clone, PartialEq)]
pub struct GroupSnapshot {
    /// Group labels (the input labels minus `__name__`, `le`, `source`, `position`,
    /// `finished_reason`), sorted by name, shared with the group.
    pub labels: GroupLabels,
    /// Every family, in [`Family::ALL`] order.
    pub families: [FamilyStatus; FAMILIES],
    /// Newest sample timestamp applied to the group (ms since the epoch, the sender's scrape
    /// time); `None` before the first applied sample.
    pub last_sample_ms: Option<i64>,
    /// Receive wall clock (ms since the epoch) when the group last got a new sample.
    pub(crate) last_received_ms: i64,
    /// The gap between the group's two newest scrape timestamps (ms): its observed scrape
    /// interval, `None` before a second scrape.
    pub scrape_interval_ms: Option<i64>,
    /// Input series (series a rule reads) that are not stale.
    pub input_series: usize,
    /// Counter resets seen in the group's inputs since the group appeared.
    pub counter_resets: u64,
    /// The group's set of input series can come from no vLLM version, and stayed so over more
    /// than one scrape (`vllm_corrector_groups_incomplete`), and no limit refused its series
    /// meanwhile (then `limited` says so instead).
    pub incomplete: bool,
    /// The limit (its configuration field, [`RejectReason::limit_name`]) that refused a new series
    /// of the group within its last two scrape intervals (at least 30 s), if any.
    pub limited: Option<&'static str>,
    /// The histograms an incomplete group lacks a needed part of that arrive in a form the rules
    /// do not read (an exponential native histogram, only unread parts: [`crate::UnreadForm`]):
    /// the cause of its incompleteness, not sharding. Empty for a complete group.
    pub unread: Vec<crate::UnreadHistogram>,
    /// The vLLM releases the group's set of input series looks like (`0.10.0–0.10.1`, `0.10.2`,
    /// `0.11–0.14`, `0.12–0.15`, `0.16 and later`: docs/METRICS.md, "What the corrector serves per
    /// version"), from which series exist, not from a version the target reports; `None` when it
    /// looks like none (an incomplete group, a combination no release has).
    pub looks_like: Option<&'static str>,
    /// Samples of the group refused as `duplicate_sample` and as `out_of_order` over the last one
    /// to two minutes of receive time before the group's newest sample (`RecentRejects`). Both
    /// steady and non-zero: two senders with the same labels (an HA pair of Prometheus servers
    /// with the same external labels writing one corrector); a single burst: a resent batch.
    pub recent_rejects: [u64; 2],
    /// The SLIs of the SLOs covering the group that it does not count, and why (a threshold that
    /// is not a bucket edge, a missing input); empty when it counts every one.
    pub slo_notes: Option<Arc<[crate::slo::SliNote]>>,
}

/// Counts over every live group, taken with a [`GroupsPage`]: the summary `/status` shows above
/// its first page.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupsSummary {
    /// Live groups.
    pub groups: usize,
    /// Groups serving at least one family.
    pub serving: usize,
    /// Groups whose state is incomplete ([`GroupSnapshot::incomplete`]).
    pub incomplete: usize,
}

/// Which groups a page lists ([`super::Engine::snapshot_page_where`]): a test of a group's
/// labels, then, for a group whose labels pass and only when [`GroupFilter::reads_families`], of
/// its families as `/status` shows them. Both pass by default.
pub trait GroupFilter {
    /// Whether a group with these labels (sorted by name) may be listed.
    fn labels(&self, labels: &[(String, String)]) -> bool {
        let _ = labels;
        true
    }
    /// Whether [`GroupFilter::families`] tests anything: when false the families of a group are
    /// not computed for the filter (O(families) plan look-ups per group).
    fn reads_families(&self) -> bool {
        false
    }
    /// Whether a group whose families show these statuses (in [`Family::ALL`] order) and whose
    /// SLO counters leave out these SLIs (each note a withheld SLI of
    /// [`Family::SloCounters`]) is listed.
    fn families(&self, families: &[FamilyStatus], notes: &[crate::slo::SliNote]) -> bool {
        let _ = (families, notes);
        true
    }
}

/// The filter that lists every group.
#[derive(Debug, Clone, Copy, Default)]
pub struct AllGroups;

impl GroupFilter for AllGroups {}

/// One page of group snapshots, built by [`super::Engine::snapshot_page`].
#[derive(Debug, Clone, PartialEq)]
pub struct GroupsPage {
    /// At most the requested number of groups whose labels sort after the cursor, in ascending
    /// label order.
    pub groups: Vec<GroupSnapshot>,
    /// Groups whose labels sort after the cursor (all of them without a cursor): `groups.len()`
    /// of them are on this page, the rest on later pages.
    pub remaining: usize,
    /// Counts over every live group.
    pub summary: GroupsSummary,
    /// Groups the filter lists, on every page (all live groups without a filter).
    pub matched: usize,
}

/// Something that changed a group, reported once by [`super::Engine::take_events`].
#[derive(Debug, Clone, PartialEq)]
pub enum EngineEvent {
    /// The group served a family for the first time: its first complete scrape.
    FirstCompleteScrape {
        /// Group labels.
        labels: GroupLabels,
        /// The families served.
        served: Vec<Family>,
        /// The families withheld, and why (with the missing input or the limit).
        withheld: Vec<FamilyStatus>,
    },
    /// A family the group served is withheld now.
    FamilyWithheld {
        /// Group labels.
        labels: GroupLabels,
        /// The family, why it is withheld, and the missing input or the limit.
        status: FamilyStatus,
    },
    /// A family the group had withheld since its first complete scrape is served again.
    FamilyServed {
        /// Group labels.
        labels: GroupLabels,
        /// The family.
        family: Family,
    },
    /// The group left `/metrics` and its memory was freed.
    GroupRemoved {
        /// Group labels.
        labels: GroupLabels,
        /// Why.
        reason: RemovalReason,
    },
    /// An input counter of the group went down: a vLLM restart.
    CounterReset {
        /// Group labels.
        labels: GroupLabels,
    },
    /// The group's series can come from no vLLM version, over more than one scrape (a logged
    /// warning: a target split across instances, filtered by relabelling, or a histogram that
    /// arrives in a form the rules do not read).
    GroupIncomplete {
        /// Group labels.
        labels: GroupLabels,
        /// The histograms it lacks a needed part of that arrive in a form the rules do not read
        /// ([`GroupSnapshot::unread`]); empty when none does (then sharding or relabelling).
        unread: Vec<crate::UnreadHistogram>,
    },
    /// The group does not count some SLIs of the SLOs covering it (a threshold between bucket
    /// edges, an input the keep rule drops): reported when its inputs or the SLOs change the
    /// notes, logged once per change.
    SloNotes {
        /// Group labels.
        labels: GroupLabels,
        /// The SLIs not counted, and why.
        notes: Arc<[crate::slo::SliNote]>,
    },
    /// A limit refused a new series of the group, so it holds only some of its series (a logged
    /// warning naming the limit). Reported once until no refusal happened for two of the group's
    /// scrape intervals (at least 30 s); reported instead of [`EngineEvent::GroupIncomplete`].
    GroupLimited {
        /// Group labels.
        labels: GroupLabels,
        /// The limit's configuration field ([`RejectReason::limit_name`]).
        limit: &'static str,
    },
    /// The group's samples were refused as duplicates or out of order in two consecutive
    /// minutes of receive time: two senders write it with the same labels (an HA pair of
    /// Prometheus servers with the same external labels writing one corrector). Reported once
    /// until no such refusal is recent (one to two minutes).
    TwoSenders {
        /// Group labels.
        labels: GroupLabels,
        /// `duplicate_sample` and `out_of_order` samples over the last one to two minutes.
        recent_rejects: [u64; 2],
    },
}

/// Per-group bookkeeping for the snapshot, the events and the missed-scrapes removal.
#[derive(Debug, Clone)]
pub(crate) struct GroupMeta {
    /// Newest applied sample timestamp (ms).
    pub(crate) newest_ts: Option<i64>,
    /// The gap between the two newest distinct sample timestamps (ms).
    pub(crate) interval_ms: Option<i64>,
    /// Receive wall clock (ms) of the newest sample that was applied (not a duplicate).
    pub(crate) last_new_ms: i64,
    /// Counter resets seen.
    pub counter_resets: u64,
    /// Families served when the events were last checked.
    pub(crate) served: [bool; FAMILIES],
    /// The first complete scrape was reported.
    pub(crate) first_complete: bool,
    /// The incomplete warning was reported (cleared once the group is complete again).
    pub(crate) incomplete_reported: bool,
    /// Queued in the engine's list of groups to check at the next `take_events`.
    pub(crate) touched: bool,
    /// The newest refusal of a new series of the group by a limit: why, and when (receive wall
    /// clock, ms).
    pub(crate) limited: Option<(RejectReason, i64)>,
    /// The [`EngineEvent::GroupLimited`] warning was reported (cleared once the refusals stop).
    pub(crate) limit_reported: bool,
    /// Duplicate and out-of-order samples of the group, per minute.
    pub(crate) rejects: RecentRejects,
    /// The [`EngineEvent::TwoSenders`] warning was reported (cleared once no reject is recent).
    pub(crate) senders_reported: bool,
    /// The read histograms the group received in a form no rule reads (`crate::forms`).
    pub(crate) forms: crate::forms::FormsSeen,
    /// The SLO notes last reported ([`EngineEvent::SloNotes`]).
    pub(crate) notes_reported: Option<Arc<[crate::slo::SliNote]>>,
    /// Notes that differ from the reported ones, and the newest sample timestamp when they were
    /// first seen: reported once they still hold at a newer scrape.
    pub(crate) notes_pending: Option<(Option<Arc<[crate::slo::SliNote]>>, i64)>,
}

/// Least time a limit's refusal stays current after it happened ([`GroupMeta::limited_at`]), ms.
pub(crate) const LIMITED_MIN_MS: i64 = 30_000;

/// A group's samples refused as duplicates (`[0]`) and out of order (`[1]`), counted per minute
/// of receive wall clock: the minute of the newest such sample and the one before it. Constant
/// size per group.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RecentRejects {
    /// The receive minute (ms / 60 000) `current` counts.
    minute: i64,
    current: [u64; 2],
    previous: [u64; 2],
}

impl RecentRejects {
    /// Adds `n` rejects of kind `kind` (0 duplicate, 1 out of order) received at `now_ms`.
    pub(crate) fn record(&mut self, kind: usize, n: u64, now_ms: i64) {
        let minute = now_ms.div_euclid(60_000);
        if minute != self.minute {
            self.previous = if minute == self.minute + 1 {
                self.current
            } else {
                [0; 2]
            };
            self.current = [0; 2];
            self.minute = minute;
        }
        self.current[kind] += n;
    }

    /// True when both the minute of `at_ms` and the one before it hold rejects (receive wall
    /// clock, ms): a steady stream, as two senders with the same labels make, rather than one
    /// resent batch.
    pub(crate) fn steady(&self, at_ms: i64) -> bool {
        at_ms.div_euclid(60_000) == self.minute
            && self.current.iter().sum::<u64>() > 0
            && self.previous.iter().sum::<u64>() > 0
    }

    /// The rejects of the minute of `at_ms` and the one before it (receive wall clock, ms).
    pub(crate) fn recent(&self, at_ms: i64) -> [u64; 2] {
        let minute = at_ms.div_euclid(60_000);
        if minute == self.minute {
            [
                self.current[0] + self.previous[0],
                self.current[1] + self.previous[1],
            ]
        } else if minute == self.minute + 1 {
            self.current
        } else {
            [0; 2]
        }
    }
}

impl GroupMeta {
    pub(crate) fn new(now_ms: i64) -> GroupMeta {
        GroupMeta {
            newest_ts: None,
            interval_ms: None,
            last_new_ms: now_ms,
            counter_resets: 0,
            served: [false; FAMILIES],
            first_complete: false,
            incomplete_reported: false,
            touched: false,
            limited: None,
            limit_reported: false,
            rejects: RecentRejects::default(),
            senders_reported: false,
            forms: crate::forms::FormsSeen::default(),
            notes_reported: None,
            notes_pending: None,
        }
    }

    /// The limit that refused a new series of the group within two of its scrape intervals (at
    /// least [`LIMITED_MIN_MS`]) before `at_ms` (receive wall clock, the group's newest sample).
    pub(crate) fn limited_at(&self, at_ms: i64) -> Option<RejectReason> {
        let (reason, when) = self.limited?;
        let window = self
            .interval_ms
            .unwrap_or(0)
            .saturating_mul(2)
            .max(LIMITED_MIN_MS);
        (at_ms.saturating_sub(when) <= window).then_some(reason)
    }

    /// Records that samples up to `newest` (ms) were applied at receive time `now_ms`.
    pub(crate) fn applied(&mut self, newest: i64, now_ms: i64) {
        self.last_new_ms = now_ms;
        match self.newest_ts {
            Some(prev) if newest > prev => {
                self.interval_ms = Some(newest - prev);
                self.newest_ts = Some(newest);
            }
            Some(_) => {}
            None => self.newest_ts = Some(newest),
        }
    }

    /// True when the group got no new sample for `missed` of its scrape intervals, and for at
    /// least `min_wait_ms`, at `now_ms`. Never before a second scrape (no interval is known).
    pub(crate) fn missed_scrapes(&self, now_ms: i64, missed: u32, min_wait_ms: i64) -> bool {
        let Some(interval) = self.interval_ms.filter(|_| missed > 0) else {
            return false;
        };
        let wait = interval.saturating_mul(i64::from(missed)).max(min_wait_ms);
        now_ms.saturating_sub(self.last_new_ms) > wait
    }
}
