//! What the engine shows of its state, read-only or draining queues: derived values for
//! `/metrics`, group snapshots for `/status` and `/api/v1/groups`, events for the event log, and
//! the self-metrics counts. A child of `state.rs` (the write side).

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;

use hashbrown::HashMap;

use super::table::Entry;
use super::*;
use crate::observe::{AllGroups, GroupFilter, GroupMeta, GroupOutputs, GroupsPage, GroupsSummary};

/// A group's entry ordered by its labels alone (unique per group), for [`Engine::snapshot_page`].
struct ByLabels<'a>(&'a Entry);

impl PartialEq for ByLabels<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for ByLabels<'_> {}

impl PartialOrd for ByLabels<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ByLabels<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.group.labels[..].cmp(&other.0.group.labels[..])
    }
}

/// What `/status` shows of one group ([`Engine::snapshot`], [`Engine::snapshot_page`]).
fn entry_snapshot(Entry { group, meta, .. }: &Entry) -> GroupSnapshot {
    let limited = meta.limited_at(group.last_seen_ms);
    let incomplete = limited.is_none() && group.incomplete();
    GroupSnapshot {
        labels: Arc::clone(&group.labels),
        families: Family::ALL.map(|family| family_status(group, meta, family)),
        last_sample_ms: meta.newest_ts,
        last_received_ms: meta.last_new_ms,
        scrape_interval_ms: meta.interval_ms,
        input_series: group.active_series(),
        counter_resets: meta.counter_resets,
        incomplete,
        unread: unread(group, meta, incomplete),
        limited: limited.and_then(RejectReason::limit_name),
        looks_like: group.looks_like(),
        recent_rejects: meta.rejects.recent(group.last_seen_ms),
        slo_notes: group.slo_notes(),
    }
}

/// The histograms `group` lacks a needed part of that arrive in a form no rule reads, when it is
/// `incomplete` (`crate::forms::unread`); nothing otherwise.
fn unread(group: &Group, meta: &GroupMeta, incomplete: bool) -> Vec<crate::UnreadHistogram> {
    if !incomplete {
        return Vec::new();
    }
    crate::forms::unread(meta.forms, group.live_keys())
}

/// How `group` (with its bookkeeping `meta`) shows `family`: served, degraded or withheld, with
/// the missing input or the limit. A family that lacks an input or a complete frame while a limit
/// refuses the group's new series is withheld for [`WithheldReason::Limit`], naming the limit.
fn family_status(group: &Group, meta: &GroupMeta, family: Family) -> FamilyStatus {
    let limited = meta.limited_at(group.last_seen_ms);
    let withheld = shown_reason(group, limited.is_some(), family);
    let limit = limited
        .filter(|_| withheld == Some(WithheldReason::Limit))
        .and_then(RejectReason::limit_name);
    FamilyStatus {
        family,
        withheld,
        degraded: withheld.is_none() && group.degraded(family),
        missing_input: group.missing_input(family).filter(|_| limit.is_none()),
        limit,
    }
}

/// Why `group` withholds `family` as every view shows it (the family info series, the withheld
/// gauge, `/status`): a family lacking an input or a complete frame while a limit refuses the
/// group's new series is withheld for [`WithheldReason::Limit`]; one lacking an input of a group
/// whose set of series no vLLM version exposes ([`Group::incomplete`]: split across correctors or
/// filtered) for [`WithheldReason::Incomplete`], so a broken pipeline is not mistaken for an old
/// vLLM; otherwise the group's own reason.
fn shown_reason(group: &Group, limited: bool, family: Family) -> Option<WithheldReason> {
    match group.withheld(family) {
        Some(WithheldReason::MissingInput | WithheldReason::Incomplete) if limited => {
            Some(WithheldReason::Limit)
        }
        Some(WithheldReason::MissingInput) if group.incomplete() => {
            Some(WithheldReason::Incomplete)
        }
        other => other,
    }
}

impl Engine {
    fn live_groups(&self) -> impl Iterator<Item = &Group> {
        self.table.iter().map(|(_, e)| &e.group)
    }

    /// Calls `f` with each live group's labels, the timestamp (ms) of the frame its output of
    /// `family` was computed from, and that output, in no particular order (for invariant checks).
    pub fn for_each_output_at(
        &self,
        family: Family,
        mut f: impl FnMut(&[(String, String)], i64, &DerivedValue),
    ) {
        for group in self.live_groups() {
            if let (Some(ts), Some(value)) = (group.output_ts(family), group.output(family)) {
                f(&group.labels, ts, value);
            }
        }
    }

    /// The labels and current outputs of every live group that serves at least one family,
    /// shared with the engine, in no particular order ([`GroupOutputs::sort`] orders them): what
    /// `/metrics` shows, all at once ([`Engine::for_each_derived`], tests). O(groups × families)
    /// pointer copies: nothing is formatted, sorted or deep-copied here. `/metrics` itself takes
    /// them a window at a time ([`Engine::group_refs`], [`Engine::output_of`]), so that a slow
    /// response keeps no group alive.
    pub fn outputs(&self) -> Vec<GroupOutputs> {
        let mut out = Vec::with_capacity(self.table.len());
        for group in self.live_groups() {
            let values = Family::ALL.map(|f| group.shared_output(f).cloned());
            if values.iter().any(Option::is_some) {
                out.push(GroupOutputs {
                    labels: Arc::clone(&group.labels),
                    values,
                });
            }
        }
        out
    }

    /// Every live group's [`GroupRef`] with its labels (shared with the group), in no particular
    /// order: a `/metrics` response sorts these by labels after the engine lock is released and
    /// keeps only the refs. O(groups) pointer copies.
    pub fn group_refs(&self) -> Vec<(GroupRef, GroupLabels)> {
        self.table
            .iter()
            .map(|(group, entry)| (group, Arc::clone(&entry.group.labels)))
            .collect()
    }

    /// The labels of `group` and its current output of `family` (both shared with the engine, as
    /// in [`Engine::outputs`]); `None` when the group withholds the family or was removed.
    pub fn output_of(
        &self,
        group: GroupRef,
        family: Family,
    ) -> Option<(GroupLabels, Arc<DerivedValue>)> {
        let group = &self.table.get(group)?.group;
        let value = group.shared_output(family)?;
        Some((Arc::clone(&group.labels), Arc::clone(value)))
    }

    /// The labels of `group` and its samples refused as `duplicate_sample` and `out_of_order`
    /// over the last one to two minutes ([`GroupSnapshot::recent_rejects`]); `None` once the
    /// group was removed. O(1): for `/metrics`' per-group series of them.
    pub fn recent_rejects_of(&self, group: GroupRef) -> Option<(GroupLabels, [u64; 2])> {
        let Entry { group, meta, .. } = self.table.get(group)?;
        Some((
            Arc::clone(&group.labels),
            meta.rejects.recent(group.last_seen_ms),
        ))
    }

    /// [`Engine::snapshot`] of one group; `None` once the group was removed.
    pub fn snapshot_of(&self, group: GroupRef) -> Option<GroupSnapshot> {
        self.table.get(group).map(entry_snapshot)
    }

    /// Calls `f` with each group's labels (sorted by name, `__name__`/`le`/rule labels removed) and
    /// its current derived value of `family`, in ascending label order (as `/metrics` shows them,
    /// from [`Engine::outputs`]). Groups that withhold `family` are skipped.
    pub fn for_each_derived(
        &self,
        family: Family,
        mut f: impl FnMut(&[(String, String)], &DerivedValue),
    ) {
        let mut groups = self.outputs();
        GroupOutputs::sort(&mut groups);
        for group in &groups {
            if let Some(value) = &group.values[family.index()] {
                f(&group.labels, value);
            }
        }
    }

    /// Calls `f` with each group's labels (as [`Engine::for_each_derived`]) and the reason it
    /// withholds `family`, for every group that has no value of `family`, in ascending label order.
    pub fn for_each_withheld(
        &self,
        family: Family,
        mut f: impl FnMut(&[(String, String)], WithheldReason),
    ) {
        let mut rows: Vec<(&[(String, String)], WithheldReason)> = self
            .live_groups()
            .filter_map(|g| g.withheld(family).map(|r| (&g.labels[..], r)))
            .collect();
        rows.sort_unstable_by(|a, b| a.0.cmp(b.0));
        for (labels, reason) in rows {
            f(labels, reason);
        }
    }

    /// A read-only copy of every group's state (families served or withheld and why, newest
    /// sample, scrape interval, input series, counter resets, incompleteness), in no particular
    /// order: what `/status` and `/api/v1/groups` render, sorted by labels after the engine lock
    /// is released. O(groups × families), labels shared ([`crate::GroupLabels`]); a withheld
    /// family without a cached plan is planned again (O(roles)). Not for the hot path.
    pub fn snapshot(&self) -> Vec<GroupSnapshot> {
        self.table.iter().map(|(_, e)| entry_snapshot(e)).collect()
    }

    /// One page of [`Engine::snapshot`]: the `limit` groups with the smallest labels after
    /// `after` (labels compared pair by pair, name then value; all groups without it), in
    /// ascending label order, with how many groups sort after `after` and counts over every
    /// group. One pass over the groups keeping the `limit` smallest in a heap: O(groups × log
    /// limit) label comparisons and O(limit) memory, whatever the number of groups, so a page
    /// costs the same on the first and the last page. Group labels are unique, so the order is
    /// total and paging by the last labels shown lists every group exactly once.
    pub fn snapshot_page(&self, after: Option<&[(String, String)]>, limit: usize) -> GroupsPage {
        self.snapshot_page_where(after, limit, &AllGroups)
    }

    /// [`Engine::snapshot_page`] of the groups `filter` lists: `remaining` and `matched` count
    /// only those, the summary every group. A filter that reads families costs O(families) plan
    /// look-ups for each group whose labels pass, under the engine lock (as
    /// [`Engine::stats`] does on every scrape).
    pub fn snapshot_page_where(
        &self,
        after: Option<&[(String, String)]>,
        limit: usize,
        filter: &dyn GroupFilter,
    ) -> GroupsPage {
        let mut summary = GroupsSummary::default();
        let (mut remaining, mut matched) = (0, 0);
        // A max-heap on labels: its top is the largest of the `limit` smallest seen so far.
        let mut heap: BinaryHeap<ByLabels<'_>> = BinaryHeap::with_capacity(limit.min(4096) + 1);
        for (_, entry) in self.table.iter() {
            let group = &entry.group;
            summary.groups += 1;
            summary.incomplete += usize::from(group.incomplete());
            summary.serving += usize::from(Family::ALL.iter().any(|&f| group.output(f).is_some()));
            if !filter.labels(&group.labels)
                || (filter.reads_families()
                    && !filter.families(
                        &Family::ALL.map(|f| family_status(group, &entry.meta, f)),
                        group.slo_notes().as_deref().unwrap_or_default(),
                    ))
            {
                continue;
            }
            matched += 1;
            if after.is_some_and(|after| &group.labels[..] <= after) {
                continue;
            }
            remaining += 1;
            if heap.len() < limit {
                heap.push(ByLabels(entry));
            } else if heap
                .peek()
                .is_some_and(|top| group.labels[..] < top.0.group.labels[..])
            {
                heap.pop();
                heap.push(ByLabels(entry));
            }
        }
        GroupsPage {
            groups: heap
                .into_sorted_vec()
                .into_iter()
                .map(|e| entry_snapshot(e.0))
                .collect(),
            remaining,
            summary,
            matched,
        }
    }

    /// The events since the last call, each reported once: counter resets and removals as they
    /// happened, then, for every group that took samples, its first complete scrape (the first
    /// time it serves a family), families withheld or served again since, and the group becoming
    /// incomplete. At most `super::events::MAX_QUEUED_EVENTS` are held; older ones are dropped.
    pub fn take_events(&mut self) -> Vec<EngineEvent> {
        for touched in self.events.take_touched() {
            let Some(entry) = self.table.get_mut(touched) else {
                continue;
            };
            let lone = entry.lone();
            let Entry { group, meta, .. } = entry;
            meta.touched = false;
            let served = Family::ALL.map(|f| group.output(f).is_some());
            if !meta.first_complete {
                if served.iter().any(|s| *s) {
                    meta.first_complete = true;
                    self.events.push(EngineEvent::FirstCompleteScrape {
                        labels: group.labels.clone(),
                        served: Family::ALL
                            .into_iter()
                            .filter(|f| served[f.index()])
                            .collect(),
                        withheld: Family::ALL
                            .into_iter()
                            .map(|f| family_status(group, meta, f))
                            .filter(|f| f.withheld.is_some())
                            .collect(),
                    });
                }
            } else {
                for family in Family::ALL {
                    match (meta.served[family.index()], served[family.index()]) {
                        (true, false) => {
                            let mut status = family_status(group, meta, family);
                            status.withheld = status.withheld.or(Some(WithheldReason::Incomplete));
                            self.events.push(EngineEvent::FamilyWithheld {
                                labels: group.labels.clone(),
                                status,
                            });
                        }
                        (false, true) => self.events.push(EngineEvent::FamilyServed {
                            labels: group.labels.clone(),
                            family,
                        }),
                        _ => {}
                    }
                }
            }
            meta.served = served;
            note_slos(group, meta, &mut self.events);
            let limited = meta.limited_at(group.last_seen_ms);
            match limited.and_then(RejectReason::limit_name) {
                Some(limit) if !meta.limit_reported => {
                    self.events.push(EngineEvent::GroupLimited {
                        labels: group.labels.clone(),
                        limit,
                    });
                }
                _ => {}
            }
            meta.limit_reported = limited.is_some();
            // A group that can feed no family (a flood's lone series) is not a target split
            // across instances: its series are refused or evicted, counted under their own reason.
            let incomplete = limited.is_none() && !lone && group.incomplete();
            if incomplete && !meta.incomplete_reported {
                self.events.push(EngineEvent::GroupIncomplete {
                    labels: group.labels.clone(),
                    unread: unread(group, meta, incomplete),
                });
            }
            meta.incomplete_reported = incomplete;
            let recent_rejects = meta.rejects.recent(group.last_seen_ms);
            if meta.rejects.steady(group.last_seen_ms) && !meta.senders_reported {
                meta.senders_reported = true;
                self.events.push(EngineEvent::TwoSenders {
                    labels: group.labels.clone(),
                    recent_rejects,
                });
            } else if recent_rejects == [0; 2] {
                meta.senders_reported = false;
            }
        }
        self.events.take()
    }

    /// Counts for self-metrics, in one pass over the groups (it runs under the engine lock on
    /// every `/metrics` scrape).
    pub fn stats(&self) -> EngineStats {
        let mut withheld: HashMap<(Family, WithheldReason), usize> = HashMap::new();
        let (mut active_series, mut groups_incomplete) = (0, 0);
        let mut slo_groups: Vec<(String, usize)> = self
            .config
            .slos
            .names()
            .map(|n| (n.to_owned(), 0))
            .collect();
        for (_, Entry { group, meta, .. }) in self.table.iter() {
            active_series += group.active_series();
            let mask = group.slo_mask();
            for (i, (_, n)) in slo_groups.iter_mut().enumerate().take(64) {
                *n += usize::from(mask & (1 << i) != 0);
            }
            let limited = meta.limited_at(group.last_seen_ms).is_some();
            groups_incomplete += usize::from(!limited && group.incomplete());
            for family in Family::ALL {
                if let Some(reason) = shown_reason(group, limited, family) {
                    *withheld.entry((family, reason)).or_default() += 1;
                }
            }
        }
        let mut withheld: Vec<(Family, WithheldReason, usize)> =
            withheld.into_iter().map(|((f, r), n)| (f, r, n)).collect();
        withheld.sort();
        EngineStats {
            memory: self.memory_parts(),
            retired_groups: self.retired.len(),
            retired_dropped: self.retired.dropped(),
            active_series,
            groups: self.table.len(),
            withheld,
            frames_dropped: self.counters.frames_dropped,
            groups_removed: self.counters.removed,
            counter_resets: self.counters.counter_resets,
            output_holds: self.counters.output_holds,
            output_resets: self.counters.output_resets,
            newest_sample_ms: self.counters.newest_sample_ms,
            groups_incomplete,
            slo_groups,
        }
    }
}

/// Reports the SLI notes of `group` ([`EngineEvent::SloNotes`]) once the same notes hold at a
/// newer scrape than the one they first held at: while a scrape's series arrive, a partial bucket
/// list makes notes that the next request takes back.
fn note_slos(
    group: &crate::group::Group,
    meta: &mut GroupMeta,
    events: &mut super::events::Events,
) {
    let notes = group.slo_notes();
    let newest = meta.newest_ts;
    if notes == meta.notes_reported {
        meta.notes_pending = None;
        return;
    }
    match &meta.notes_pending {
        Some((pending, since)) if *pending == notes && newest > Some(*since) => {
            if let Some(notes) = &notes {
                events.push(EngineEvent::SloNotes {
                    labels: group.labels.clone(),
                    notes: notes.clone(),
                });
            }
            meta.notes_reported = notes;
            meta.notes_pending = None;
        }
        Some((pending, _)) if *pending == notes => {}
        _ => meta.notes_pending = newest.map(|ts| (notes, ts)),
    }
}
