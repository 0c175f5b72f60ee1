//! A group: the series of one vLLM engine (label set minus rule dimensions), its pending frames, and
//! the families derived from them.
//!
//! A frame holds the group's samples that carry one timestamp. Only values of one frame are ever
//! combined (docs/ENGINE.md, invariant 1). Prometheus shards by series, so one scrape's series arrive in any
//! order across requests, while each series stays in order: a family is evaluated on the newest frame
//! that holds every role its [`Plan`] reads, and the stateful families are recomputed over the
//! kept frames in timestamp order, so arrival order across series never changes the output.

use std::collections::VecDeque;
use std::sync::Arc;

use hashbrown::HashMap;

use super::Family;
use super::classify::RoleKey;
use super::completeness;
use super::hold::Hold;
use super::observe::GroupLabels;
use super::reasons::WithheldReason;
use super::rules::FAMILIES;
use super::rules::{Evaluation, Plan, PlanContext, Unplanned, servable};
use super::slo::SloSet;
use super::values::DerivedValue;

mod accumulator;
mod frame;
mod plans;
mod retired;
mod status;

use accumulator::Accumulator;
use frame::{Frame, MASK_ROLES, PlanRoles};
use plans::plan_of;
pub(crate) use plans::plans_a_family;
pub(crate) use retired::Retired;

/// One input series of the group.
#[derive(Debug, Clone)]
struct Role {
    key: RoleKey,
    /// Newest timestamp seen (ms), stale markers included.
    newest_ts: i64,
    /// Left out of the plans: the series lapsed (no sample over the whole frame window), until
    /// its next real sample. A staleness marker alone does not make a series stale
    /// (docs/ENGINE.md, "Staleness markers").
    stale: bool,
    /// True when the sample at `newest_ts` is a staleness marker, which a real value of the same
    /// timestamp replaces ([`Group::offer`]).
    newest_is_marker: bool,
}

/// Per-family state: its plan (cached while the role set is unchanged) and its current output.
#[derive(Debug, Clone, Default)]
struct Slot {
    /// Boxed: most groups of a cardinality flood never plan a family, and an inline plan would
    /// make every group 4 × 144 bytes larger (`docs/PERFORMANCE.md`, "Memory per group").
    plan: Option<Result<Box<(Plan, PlanRoles)>, Unplanned>>,
    /// Shared with the hold (it is what was served) and with `/metrics` snapshots taken since
    /// ([`Group::shared_output`]): each evaluation replaces it, never mutates it.
    output: Option<Arc<DerivedValue>>,
    /// Timestamp of the frame `output` was computed from.
    output_ts: Option<i64>,
    /// Why the last evaluation produced no output (`inconsistent_inputs`, or `incomplete` when the
    /// state of a stateful family had nothing to continue from).
    refused: Option<WithheldReason>,
    /// What was last served and the inputs behind it, so `output` never falls without an input
    /// reset ([`super::hold`]). Kept while the family is withheld or has lost an input. Boxed and
    /// created at the first evaluation, so a group that never evaluates pays 8 bytes.
    hold: Option<Box<Hold>>,
    /// The rule's state, for a stateful family ([`Evaluation::Stateful`]); boxed and created at
    /// its first evaluation or resume.
    accumulator: Option<Box<Accumulator>>,
}

/// What happened to one sample offered to a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Offer {
    /// Stored in its frame.
    Applied,
    /// A staleness marker was applied.
    Stale,
    /// Same timestamp as the series' newest sample: an idempotent no-op.
    Duplicate,
    /// Older than the series' newest sample.
    OutOfOrder,
    /// Older than every kept frame while the window is full.
    FrameEvicted,
}

/// Counters a group reports back to the engine.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct GroupEvents {
    pub frames_dropped: u64,
    pub counter_resets: u64,
    /// Evaluations whose output was held above the computed value, by [`Family::index`].
    pub(crate) holds: [u64; FAMILIES],
    /// Evaluations that found an input of the family lower than at the previous one (so the
    /// output may fall), by [`Family::index`].
    pub output_resets: [u64; FAMILIES],
}

/// One group's state.
#[derive(Debug)]
pub(crate) struct Group {
    /// Group labels, sorted by name; shared with snapshots ([`GroupLabels`]).
    pub labels: GroupLabels,
    /// Receive wall clock (ms) of the newest sample, for the idle timeout.
    pub(crate) last_seen_ms: i64,
    roles: Vec<Role>,
    /// Roles that are not stale, kept with every change of [`Role::stale`]: `Engine::stats` asks
    /// every group on every `/metrics` scrape, under the engine lock, and counting walked every
    /// role (most of that hold at 10,000 groups, docs/PERFORMANCE.md).
    active_roles: usize,
    /// Roles that are not stale and whose newest sample is a staleness marker: when every active
    /// role has one, the group is gone ([`Group::all_stale`]). Kept as [`Role::newest_is_marker`]
    /// changes, so the check costs nothing per sample.
    marked_roles: usize,
    index: HashMap<RoleKey, usize>,
    frames: VecDeque<Frame>,
    slots: [Slot; FAMILIES],
    pub(crate) events: GroupEvents,
    /// Sample timestamp (ms) at which the learned role set last changed.
    roles_changed_ts: i64,
    /// Scrapes (new newest frames) since then, for [`Group::incomplete`].
    scrapes_since_roles_changed: u32,
    /// Changes of the learned role set since the group was created ([`Group::role_set_changes`]).
    role_set_changes: u32,
    /// A series the group never had arrived fewer than `EngineConfig::settle_scrapes` newer
    /// scrapes ago: no family is evaluated (docs/ENGINE.md, "Settling"). Prometheus and vmagent
    /// shard remote write by series, and a shard whose request failed resends it after a backoff
    /// while the others go on, so the first frames after a corrector restart, or of a new
    /// target, can hold only some of a histogram's buckets. Evaluating them would serve a layout
    /// that changes a scrape later, and quantiles over a few buckets. A known series that goes
    /// stale and comes back does not settle: a series that flaps would hold the output forever.
    settling: bool,
    /// Sample timestamp (ms) at which a series the group never had last arrived.
    new_role_ts: i64,
    /// Scrapes (new newest frames) since then, for the settling.
    scrapes_since_new_role: u32,
    /// For each role, the families whose plan reads it (bit [`Family::index`]), decided once per
    /// role set: a sample offers itself only to those ([`Group::after_insert`]).
    readers: Option<Vec<u32>>,
    /// [`completeness::check`] failed on the learned role set: decided once per role set (it
    /// cost ~16 000 instructions per group, and every group that took samples is asked after
    /// every request, `Engine::take_events`), cleared with the plans when the role set changes.
    structurally_incomplete: std::cell::OnceCell<bool>,
    /// The engine's SLOs, for the SLO family's plan.
    slos: SloSet,
    /// The SLOs of `slos` that cover the group, as bits by index ([`SloSet::covering_mask`]),
    /// for `vllm_corrector_slo_groups`.
    slo_mask: u64,
    /// Timestamp (ms) of the newest frame at which a stateful family counted a counter reset.
    last_reset_ts: Option<i64>,
}

impl Group {
    /// Creates an empty group with these (sorted) labels.
    pub(crate) fn new(labels: Vec<(String, String)>, now_ms: i64) -> Group {
        Group {
            labels: labels.into(),
            last_seen_ms: now_ms,
            roles: Vec::new(),
            active_roles: 0,
            marked_roles: 0,
            index: HashMap::new(),
            frames: VecDeque::new(),
            slots: Default::default(),
            events: GroupEvents::default(),
            roles_changed_ts: i64::MIN,
            scrapes_since_roles_changed: 0,
            role_set_changes: 0,
            settling: false,
            new_role_ts: i64::MIN,
            scrapes_since_new_role: 0,
            readers: None,
            structurally_incomplete: std::cell::OnceCell::new(),
            slos: SloSet::empty(),
            slo_mask: 0,
            last_reset_ts: None,
        }
    }

    /// The SLOs that cover the group, as bits by their index in the configuration.
    pub(crate) fn slo_mask(&self) -> u64 {
        self.slo_mask
    }

    /// Number of input series the group holds state for, stale ones included.
    pub(crate) fn series(&self) -> usize {
        self.roles.len()
    }

    /// True when the group already holds the series `key`.
    pub(crate) fn has_role(&self, key: RoleKey) -> bool {
        self.index.contains_key(&key)
    }

    /// Number of series the group holds of `key`'s input (the buckets of its histogram, every
    /// position of a per-position counter), stale ones included. O(series); called for new
    /// series only.
    pub(crate) fn series_of_input(&self, key: RoleKey) -> usize {
        self.roles
            .iter()
            .filter(|r| r.key.input == key.input)
            .count()
    }

    /// Number of input series that are not stale.
    pub(crate) fn active_series(&self) -> usize {
        debug_assert_eq!(
            self.active_roles,
            self.roles.iter().filter(|r| !r.stale).count()
        );
        self.active_roles
    }

    /// True when every series of the group that has not lapsed ended in a staleness marker (a
    /// failed scrape, a target gone): the group should be removed.
    pub(crate) fn all_stale(&self) -> bool {
        debug_assert_eq!(
            self.marked_roles,
            self.roles
                .iter()
                .filter(|r| !r.stale && r.newest_is_marker)
                .count()
        );
        self.marked_roles == self.active_roles
    }

    /// Current output of `family`, if any.
    pub(crate) fn output(&self, family: Family) -> Option<&DerivedValue> {
        self.slots[family.index()].output.as_deref()
    }

    /// Current output of `family`, if any, as the engine holds it: a clone is a pointer copy,
    /// and stays as it is while later evaluations replace the group's output.
    pub(crate) fn shared_output(&self, family: Family) -> Option<&Arc<DerivedValue>> {
        self.slots[family.index()].output.as_ref()
    }

    /// Timestamp (ms) of the frame `family`'s output was computed from.
    pub(crate) fn output_ts(&self, family: Family) -> Option<i64> {
        self.slots[family.index()].output_ts
    }

    /// Why `family` has no output, or `None` when it has one. Uses the cached plan where it is
    /// decided: `stats` asks for every group and family under the engine lock on every `/metrics`
    /// scrape, and planning again copies the group's role list.
    pub(crate) fn withheld(&self, family: Family) -> Option<WithheldReason> {
        let slot = &self.slots[family.index()];
        if slot.output.is_some() {
            return None;
        }
        if let Some(reason) = slot.refused {
            return Some(reason);
        }
        let unplanned = match &slot.plan {
            Some(plan) => plan.as_ref().err().map(|u| u.reason),
            None => (family.spec().plan)(&self.learned(), &self.plan_context())
                .err()
                .map(|u| u.reason),
        };
        match unplanned {
            Some(reason) => Some(reason),
            None if self.settling => Some(WithheldReason::Settling),
            None => Some(WithheldReason::Incomplete),
        }
    }

    /// True when the learned role set cannot come from any vLLM version
    /// ([`completeness::check`]) and has stayed unchanged over more than one later scrape, so a
    /// scrape split across requests (or one shard lagging by a scrape) is not reported.
    pub(crate) fn incomplete(&self) -> bool {
        self.scrapes_since_roles_changed >= 2
            && *self.structurally_incomplete.get_or_init(|| {
                completeness::check(self.roles.iter().filter(|r| !r.stale).map(|r| r.key)).is_err()
            })
    }

    /// True when the learned role set plans no family (every plan is an error):
    /// the group's series can feed nothing. Uses the cached plans where they are decided.
    pub(crate) fn feeds_no_family(&self) -> bool {
        let learned = std::cell::OnceCell::new();
        Family::ALL
            .iter()
            .all(|f| match &self.slots[f.index()].plan {
                Some(plan) => plan.is_err(),
                None => {
                    (f.spec().plan)(learned.get_or_init(|| self.learned()), &self.plan_context())
                        .is_err()
                }
            })
    }

    /// True when the group, given the series of `more` (sorted, distinct) besides those it
    /// holds (a stale one among them back), would plan at least one family: whether a request's
    /// new series join a group that can feed a family (`crate::state::room`).
    pub(crate) fn could_feed(&self, more: &[RoleKey]) -> bool {
        let mut learned: Vec<(RoleKey, usize)> = self
            .roles
            .iter()
            .enumerate()
            .filter(|(_, r)| !r.stale || more.binary_search(&r.key).is_ok())
            .map(|(i, r)| (r.key, i))
            .collect();
        let unknown = more.iter().filter(|k| !self.has_role(**k));
        learned.extend(unknown.enumerate().map(|(i, k)| (*k, self.roles.len() + i)));
        plans_a_family(&learned)
    }

    /// Changes of the learned role set (a series new to the group, one that lapsed or came back)
    /// since the group was created: when it moves, whether the group feeds a family may have
    /// changed.
    pub(crate) fn role_set_changes(&self) -> u32 {
        self.role_set_changes
    }

    fn roles_changed(&mut self, ts: i64) {
        self.roles_changed_ts = ts;
        self.scrapes_since_roles_changed = 0;
        self.role_set_changes = self.role_set_changes.wrapping_add(1);
    }

    /// A series the group never had arrived at sample time `ts` (ms): families wait for the
    /// set to settle.
    fn new_role(&mut self, ts: i64, settle_scrapes: u32) {
        self.roles_changed(ts);
        self.new_role_ts = ts;
        self.scrapes_since_new_role = 0;
        self.settling = settle_scrapes > 0;
    }

    /// The position of the series `key` among the group's roles, created if the group does not hold
    /// it yet (at sample time `ts`, ms; `settle_scrapes` is `EngineConfig::settle_scrapes`). A
    /// position is stable for the group's life: roles are never removed, only marked stale.
    pub(crate) fn role_position(&mut self, key: RoleKey, ts: i64, settle_scrapes: u32) -> usize {
        match self.index.get(&key) {
            Some(r) => *r,
            None => {
                self.roles.push(Role {
                    key,
                    newest_ts: i64::MIN,
                    stale: false,
                    newest_is_marker: false,
                });
                self.active_roles += 1;
                self.index.insert(key, self.roles.len() - 1);
                self.invalidate_plans();
                self.new_role(ts, settle_scrapes);
                self.roles.len() - 1
            }
        }
    }

    /// Offers one sample (`ts` in ms) of the series at position `role`
    /// ([`Group::role_position`]). `max_frames` bounds the pending window; `settle_scrapes` is
    /// `EngineConfig::settle_scrapes`. A position the group does not hold is refused as
    /// [`Offer::FrameEvicted`] (a caller's bug, never an input's).
    pub(crate) fn offer(
        &mut self,
        role: usize,
        ts: i64,
        value: f64,
        max_frames: usize,
        settle_scrapes: u32,
    ) -> Offer {
        if role >= self.roles.len() {
            debug_assert!(false, "role position {role} of {}", self.roles.len());
            return Offer::FrameEvicted;
        }
        let newest = self.roles[role].newest_ts;
        let marker = protocol::is_stale_marker(value);
        // A real value and a staleness marker of one series at one timestamp: the real value wins
        // whichever comes first (as VictoriaMetrics settled in its issue 10196), so the outcome
        // does not depend on how the sender batched them. A marker after the real value is a
        // duplicate; a real value after the marker replaces it.
        if ts == newest && (marker || !self.roles[role].newest_is_marker) {
            return Offer::Duplicate;
        }
        if ts < newest {
            return Offer::OutOfOrder;
        }
        if marker {
            // The series has no value at `ts`. It stays in the plans: a frame that lacks it is not
            // complete for the families that read it, so no family is evaluated or committed
            // without it (its real value at `ts` may yet arrive, from another shard). It leaves
            // the plans only when it lapses (no sample over the frame window, `evict_oldest`), or
            // with its group when every series of the group ended in a marker.
            let r = &mut self.roles[role];
            r.newest_ts = ts;
            if !r.newest_is_marker && !r.stale {
                self.marked_roles += 1;
            }
            r.newest_is_marker = true;
            return Offer::Stale;
        }
        let Some(frame) = self.frame_at(ts, max_frames, settle_scrapes) else {
            return Offer::FrameEvicted;
        };
        let r = &mut self.roles[role];
        r.newest_ts = ts;
        if r.newest_is_marker && !r.stale {
            self.marked_roles -= 1;
        }
        r.newest_is_marker = false;
        if self.roles[role].stale {
            self.roles[role].stale = false;
            self.active_roles += 1;
            self.invalidate_plans();
            self.roles_changed(ts);
        }
        let n_roles = self.roles.len();
        let values = &mut self.frames[frame].values;
        if values.len() < n_roles {
            values.resize(n_roles, f64::NAN);
        }
        values[role] = value;
        if role < MASK_ROLES && !value.is_nan() {
            self.frames[frame].present |= 1 << role;
        }
        self.after_insert(role, frame);
        Offer::Applied
    }

    /// Index of the frame at `ts`, created if needed; `None` if it would be older than a full window.
    /// A new newest frame counts one scrape since the last change of the role set and, when newer
    /// than the last new series, one towards the settling.
    fn frame_at(&mut self, ts: i64, max_frames: usize, settle_scrapes: u32) -> Option<usize> {
        match self.frames.binary_search_by_key(&ts, |f| f.ts) {
            Ok(i) => Some(i),
            Err(i) => {
                if i == 0 && self.frames.len() >= max_frames {
                    return None;
                }
                if i == self.frames.len() && ts > self.roles_changed_ts {
                    self.scrapes_since_roles_changed =
                        self.scrapes_since_roles_changed.saturating_add(1);
                }
                if i == self.frames.len() && ts > self.new_role_ts {
                    self.scrapes_since_new_role = self.scrapes_since_new_role.saturating_add(1);
                    if self.scrapes_since_new_role >= settle_scrapes {
                        self.settling = false;
                    }
                }
                self.frames.insert(i, Frame::new(ts, self.roles.len()));
                if self.frames.len() > max_frames {
                    self.evict_oldest();
                    return Some(i - 1);
                }
                Some(i)
            }
        }
    }

    /// Re-evaluates every family that reads `role` and for which frame `frame` is now complete.
    fn after_insert(&mut self, role: usize, frame: usize) {
        if self.settling {
            return;
        }
        let readers = self.readers_of(role);
        for family in Family::ALL {
            if readers & (1 << family.index()) == 0 {
                continue;
            }
            let Ok((_, roles)) = plan_of(
                &mut self.slots,
                &self.roles,
                &PlanContext::new(&self.labels, &self.slos),
                family,
            ) else {
                continue;
            };
            if !self.frames[frame].holds_plan(roles) {
                continue;
            }
            let ts = self.frames[frame].ts;
            if self.slots[family.index()].output_ts.is_some_and(|t| t > ts) {
                continue;
            }
            self.evaluate(family, frame);
        }
    }

    fn evaluate(&mut self, family: Family, frame: usize) {
        if self.plan(family).is_err() {
            return;
        }
        // The plan is taken out of its slot while the slot changes, and put back: no copy.
        let Some(Ok(planned)) = self.slots[family.index()].plan.take() else {
            return;
        };
        let (plan, roles) = &*planned;
        let ts = self.frames[frame].ts;
        let values = &self.frames[frame].values;
        let inputs = roles
            .by_key
            .iter()
            .map(|r| (self.roles[*r].key, values[*r]));
        let slot = &mut self.slots[family.index()];
        let hold = slot.hold.get_or_insert_with(Box::default);
        if hold.observe_inputs(inputs) {
            self.events.output_resets[family.index()] += 1;
        }
        let result = match family.spec().evaluation {
            Evaluation::Frame(evaluate) => evaluate(plan, values),
            Evaluation::Stateful(rule) => slot.accumulator.get_or_insert_default().evaluate(
                rule,
                plan,
                roles,
                &self.frames,
                frame,
                &mut |at| {
                    // Every stateful family of the group sees the same reset: counted once.
                    if self.last_reset_ts.is_none_or(|t| at > t) {
                        self.last_reset_ts = Some(at);
                        self.events.counter_resets += 1;
                    }
                },
            ),
        }
        .and_then(|value| servable(value, family.fractional_buckets()));
        slot.output_ts = Some(ts);
        slot.refused = result.as_ref().err().copied();
        let hold = slot.hold.get_or_insert_with(Box::default);
        slot.output = result.ok().map(|value| {
            let (value, held) = hold.apply(ts, value);
            if held {
                self.events.holds[family.index()] += 1;
            }
            value
        });
        slot.plan = Some(Ok(planned));
    }

    /// Drops the oldest frame; the stateful families commit it first.
    fn evict_oldest(&mut self) {
        let Some(oldest) = self.frames.pop_front() else {
            return;
        };
        let incomplete = Family::ALL.iter().any(|f| {
            let context = PlanContext::new(&self.labels, &self.slos);
            plan_of(&mut self.slots, &self.roles, &context, *f)
                .is_ok_and(|(_, roles)| !oldest.holds_plan(roles))
        });
        if incomplete {
            self.events.frames_dropped += 1;
        }
        // A series with no sample in the whole window has lapsed (it vanished without a staleness
        // marker, or lags by more than the window): stop waiting for it.
        let lapsed: Vec<usize> = self
            .roles
            .iter()
            .enumerate()
            .filter(|(_, r)| !r.stale && r.newest_ts < oldest.ts)
            .map(|(i, _)| i)
            .collect();
        if !lapsed.is_empty() {
            for i in &lapsed {
                let r = &mut self.roles[*i];
                r.stale = true;
                if r.newest_is_marker {
                    self.marked_roles -= 1;
                }
            }
            self.active_roles -= lapsed.len();
            self.replan();
            let newest = self.frames.back().map_or(oldest.ts, |f| f.ts);
            self.roles_changed(newest);
        }
        for family in Family::ALL {
            let Evaluation::Stateful(rule) = family.spec().evaluation else {
                continue;
            };
            if let Ok((plan, roles)) = plan_of(
                &mut self.slots,
                &self.roles,
                &PlanContext::new(&self.labels, &self.slos),
                family,
            ) {
                let (plan, roles) = (plan.clone(), roles.clone());
                let slot = &mut self.slots[family.index()];
                slot.accumulator
                    .get_or_insert_default()
                    .commit(rule, &plan, &roles, &oldest);
            }
        }
    }
}
