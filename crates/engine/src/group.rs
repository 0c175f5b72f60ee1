//! A group: the series of one vLLM engine (label set minus rule dimensions), its pending frames, and
//! the families derived from them.
//!
//! A frame holds the group's samples that carry one timestamp. Only values of one frame are ever
//! combined (docs/ENGINE.md, invariant 1). Prometheus shards by series, so one scrape's series arrive in any
//! order across requests, while each series stays in order: a family is evaluated on the newest frame
//! that holds every role its [`Plan`] reads, and the acceptance-corrected buckets are recomputed over the
//! kept frames in timestamp order, so arrival order across series never changes the output.

use std::collections::VecDeque;

use hashbrown::HashMap;

use super::classify::RoleKey;
use super::completeness;
use super::hold::Hold;
use super::rules::{self, AcceptanceRoles, ItlPoint, Plan};
use super::{DerivedValue, Family, WithheldReason};

/// One input series of the group.
#[derive(Debug, Clone)]
struct Role {
    key: RoleKey,
    /// Newest timestamp seen (ms), stale markers included.
    newest_ts: i64,
    /// True after a staleness marker, until the next real sample.
    stale: bool,
    /// True when the sample at `newest_ts` is a staleness marker, which a real value of the same
    /// timestamp replaces ([`Group::offer`]).
    newest_is_marker: bool,
}

/// The group's samples at one timestamp: `values[role]`, NaN where the role has no sample yet.
#[derive(Debug, Clone)]
struct Frame {
    ts: i64,
    values: Vec<f64>,
    /// Bit `r` set when `values[r]` holds a sample, for roles below [`MASK_ROLES`].
    present: RoleMask,
}

/// A set of role indices below [`MASK_ROLES`], one bit each.
type RoleMask = u128;

/// Roles that the masks cover. A group with more roles (never seen from vLLM: 51 series per engine,
/// 73 with both ITL names) falls back to scanning the values.
const MASK_ROLES: usize = RoleMask::BITS as usize;

/// The mask of `roles`, or `None` when one of them is beyond [`MASK_ROLES`].
fn mask_of(roles: &[usize]) -> Option<RoleMask> {
    roles
        .iter()
        .try_fold(0, |m, &r| (r < MASK_ROLES).then(|| m | (1 << r)))
}

impl Frame {
    fn new(ts: i64, roles: usize) -> Frame {
        Frame {
            ts,
            values: vec![f64::NAN; roles],
            present: 0,
        }
    }

    fn holds(&self, roles: &[usize]) -> bool {
        roles
            .iter()
            .all(|r| self.values.get(*r).is_some_and(|v| !v.is_nan()))
    }

    /// [`Frame::holds`] in one test when the plan's roles fit in a mask.
    fn holds_plan(&self, plan: &PlanRoles) -> bool {
        match plan.mask {
            Some(mask) => self.present & mask == mask,
            None => self.holds(&plan.roles),
        }
    }
}

/// The roles a plan reads, as a list and (when they fit) as a mask.
#[derive(Debug, Clone, PartialEq)]
struct PlanRoles {
    roles: Vec<usize>,
    mask: Option<RoleMask>,
}

impl PlanRoles {
    fn new(roles: Vec<usize>) -> PlanRoles {
        PlanRoles {
            mask: mask_of(&roles),
            roles,
        }
    }

    fn contains(&self, role: usize) -> bool {
        match self.mask {
            Some(mask) if role < MASK_ROLES => mask & (1 << role) != 0,
            Some(_) => false,
            None => self.roles.contains(&role),
        }
    }
}

/// Per-family state: its plan (cached while the role set is unchanged) and its current output.
#[derive(Debug, Clone, Default)]
struct Slot {
    /// Boxed: most groups of a cardinality flood never plan a family, and an inline plan would
    /// make every group 4 × 144 bytes larger (`docs/PERFORMANCE.md`, "Memory per group").
    plan: Option<Result<Box<(Plan, PlanRoles)>, WithheldReason>>,
    output: Option<DerivedValue>,
    /// Timestamp of the frame `output` was computed from.
    output_ts: Option<i64>,
    /// Why the last evaluation produced no output (`inconsistent_inputs`, or `incomplete` when the
    /// acceptance-corrected state had nothing to continue from).
    refused: Option<WithheldReason>,
    /// What was last served and the inputs behind it, so `output` never falls without an input
    /// reset ([`super::hold`]). Kept while the family is withheld or has lost an input. Boxed and
    /// created at the first evaluation, so a group that never evaluates pays 8 bytes.
    hold: Option<Box<Hold>>,
}

/// The acceptance-corrected buckets' committed state: everything before the oldest kept frame.
/// Also what a group removed by staleness leaves behind ([`Group::acceptance_state`]), so that
/// the same group, back after a failed scrape, continues its buckets instead of re-seeding them.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct Committed {
    /// Timestamp (ms) of the newest frame the state includes.
    ts: Option<i64>,
    /// The raw cumulative inputs at that frame.
    point: Option<ItlPoint>,
    /// The finite ITL `le` bounds `acc` belongs to, ascending.
    bounds: Vec<f64>,
    /// Accumulated buckets (finite bounds then `+Inf`) since the last counter reset.
    acc: Vec<f64>,
}

impl Committed {
    /// True when every number is finite (JSON, the storage format, has no other numbers).
    pub(crate) fn is_finite(&self) -> bool {
        let point = self.point.as_ref().is_none_or(|p| {
            [p.count, p.sum, p.generated, p.first_outputs]
                .iter()
                .chain(&p.finite)
                .chain(&p.per_pos)
                .all(|v| v.is_finite())
        });
        point && self.acc.iter().chain(&self.bounds).all(|v| v.is_finite())
    }

    /// True when the shapes agree (one bucket per finite bound plus `+Inf`, a point with one count
    /// per bound), as a state this engine wrote does; a restored state is checked with it.
    pub(crate) fn is_consistent(&self) -> bool {
        self.acc.len() == self.bounds.len() + 1
            && self
                .point
                .as_ref()
                .is_none_or(|p| p.finite.len() == self.bounds.len())
    }
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
    pub holds: [u64; 4],
    /// Evaluations that found an input of the family lower than at the previous one (so the
    /// output may fall), by [`Family::index`].
    pub output_resets: [u64; 4],
}

fn learned(roles: &[Role]) -> Vec<(RoleKey, usize)> {
    roles
        .iter()
        .enumerate()
        .filter(|(_, r)| !r.stale)
        .map(|(i, r)| (r.key, i))
        .collect()
}

/// The cached plan of `family`, decided from the learned roles when the role set changed.
fn plan_of<'s>(
    slots: &'s mut [Slot; 4],
    roles: &[Role],
    family: Family,
) -> Result<&'s (Plan, PlanRoles), WithheldReason> {
    let slot = &mut slots[family.index()];
    let plan = slot.plan.get_or_insert_with(|| {
        rules::plan(family, &learned(roles)).map(|p| {
            let roles = PlanRoles::new(p.roles());
            Box::new((p, roles))
        })
    });
    match plan {
        Ok(p) => Ok(p),
        Err(e) => Err(*e),
    }
}

/// One group's state.
#[derive(Debug)]
pub(crate) struct Group {
    /// Group labels, sorted by name.
    pub labels: Vec<(String, String)>,
    /// Receive wall clock (ms) of the newest sample, for the idle timeout.
    pub last_seen_ms: i64,
    roles: Vec<Role>,
    index: HashMap<RoleKey, usize>,
    frames: VecDeque<Frame>,
    slots: [Slot; 4],
    committed: Committed,
    /// The acceptance-corrected state behind the current output (for [`Group::acceptance_state`]:
    /// by the time every series is stale, the plan that produced it is gone).
    latest_acceptance: Option<Committed>,
    last_reset_ts: i64,
    pub events: GroupEvents,
    /// Sample timestamp (ms) at which the learned role set last changed.
    roles_changed_ts: i64,
    /// Scrapes (new newest frames) since then, for [`Group::incomplete`].
    scrapes_since_roles_changed: u32,
}

impl Group {
    /// Creates an empty group with these (sorted) labels.
    pub fn new(labels: Vec<(String, String)>, now_ms: i64) -> Group {
        Group {
            labels,
            last_seen_ms: now_ms,
            roles: Vec::new(),
            index: HashMap::new(),
            frames: VecDeque::new(),
            slots: Default::default(),
            committed: Committed::default(),
            latest_acceptance: None,
            last_reset_ts: i64::MIN,
            events: GroupEvents::default(),
            roles_changed_ts: i64::MIN,
            scrapes_since_roles_changed: 0,
        }
    }

    /// Number of input series the group holds state for, stale ones included.
    pub fn series(&self) -> usize {
        self.roles.len()
    }

    /// True when the group already holds the series `key`.
    pub fn has_role(&self, key: RoleKey) -> bool {
        self.index.contains_key(&key)
    }

    /// Number of input series that are not stale.
    pub fn active_series(&self) -> usize {
        self.roles.iter().filter(|r| !r.stale).count()
    }

    /// True when every series of the group has gone stale: the group should be removed.
    pub fn all_stale(&self) -> bool {
        self.roles.iter().all(|r| r.stale)
    }

    /// Current output of `family`, if any.
    pub fn output(&self, family: Family) -> Option<&DerivedValue> {
        self.slots[family.index()].output.as_ref()
    }

    /// Timestamp (ms) of the frame `family`'s output was computed from.
    pub(crate) fn output_ts(&self, family: Family) -> Option<i64> {
        self.slots[family.index()].output_ts
    }

    /// Why `family` has no output, or `None` when it has one.
    pub fn withheld(&self, family: Family) -> Option<WithheldReason> {
        let slot = &self.slots[family.index()];
        if slot.output.is_some() {
            return None;
        }
        if let Some(reason) = slot.refused {
            return Some(reason);
        }
        match rules::plan(family, &self.learned()) {
            Err(reason) => Some(reason),
            Ok(_) => Some(WithheldReason::Incomplete),
        }
    }

    /// True when the learned role set cannot come from any vLLM version
    /// ([`completeness::check`]) and has stayed unchanged over more than one later scrape, so a
    /// scrape split across requests (or one shard lagging by a scrape) is not reported.
    pub fn incomplete(&self) -> bool {
        self.scrapes_since_roles_changed >= 2
            && completeness::check(self.roles.iter().filter(|r| !r.stale).map(|r| r.key)).is_err()
    }

    /// True when the learned role set plans none of the four families (every plan is an error):
    /// the group's series can feed nothing. Uses the cached plans where they are decided.
    pub fn feeds_no_family(&self) -> bool {
        let learned = std::cell::OnceCell::new();
        Family::ALL
            .iter()
            .all(|f| match &self.slots[f.index()].plan {
                Some(plan) => plan.is_err(),
                None => rules::plan(*f, learned.get_or_init(|| self.learned())).is_err(),
            })
    }

    fn roles_changed(&mut self, ts: i64) {
        self.roles_changed_ts = ts;
        self.scrapes_since_roles_changed = 0;
    }

    /// Offers one sample of the series `key`. `max_frames` bounds the pending window.
    pub fn offer(&mut self, key: RoleKey, ts: i64, value: f64, max_frames: usize) -> Offer {
        let role = match self.index.get(&key) {
            Some(r) => *r,
            None => {
                self.roles.push(Role {
                    key,
                    newest_ts: i64::MIN,
                    stale: false,
                    newest_is_marker: false,
                });
                self.index.insert(key, self.roles.len() - 1);
                self.invalidate_plans();
                self.roles_changed(ts);
                self.roles.len() - 1
            }
        };
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
            self.roles[role].newest_ts = ts;
            self.roles[role].newest_is_marker = true;
            if !self.roles[role].stale {
                self.roles[role].stale = true;
                self.on_role_set_shrunk();
                self.roles_changed(ts);
            }
            return Offer::Stale;
        }
        let Some(frame) = self.frame_at(ts, max_frames) else {
            return Offer::FrameEvicted;
        };
        self.roles[role].newest_ts = ts;
        self.roles[role].newest_is_marker = false;
        if self.roles[role].stale {
            self.roles[role].stale = false;
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
    fn frame_at(&mut self, ts: i64, max_frames: usize) -> Option<usize> {
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
                self.frames.insert(i, Frame::new(ts, self.roles.len()));
                if self.frames.len() > max_frames {
                    self.evict_oldest();
                    return Some(i - 1);
                }
                Some(i)
            }
        }
    }

    fn invalidate_plans(&mut self) {
        for slot in &mut self.slots {
            slot.plan = None;
        }
    }

    fn learned(&self) -> Vec<(RoleKey, usize)> {
        learned(&self.roles)
    }

    fn plan(&mut self, family: Family) -> Result<&(Plan, PlanRoles), WithheldReason> {
        plan_of(&mut self.slots, &self.roles, family)
    }

    /// A role went stale: families that lost a required input leave `/metrics`.
    fn on_role_set_shrunk(&mut self) {
        self.invalidate_plans();
        for family in Family::ALL {
            if self.plan(family).is_err() {
                let slot = &mut self.slots[family.index()];
                slot.output = None;
                slot.output_ts = None;
            }
        }
    }

    /// Re-evaluates every family that reads `role` and for which frame `frame` is now complete.
    fn after_insert(&mut self, role: usize, frame: usize) {
        for family in Family::ALL {
            let Ok((_, roles)) = plan_of(&mut self.slots, &self.roles, family) else {
                continue;
            };
            if !roles.contains(role) || !self.frames[frame].holds_plan(roles) {
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
        let Ok((plan, roles)) = self.plan(family) else {
            return;
        };
        let (plan, roles) = (plan.clone(), roles.roles.clone());
        let ts = self.frames[frame].ts;
        let inputs: Vec<(usize, f64)> = roles
            .iter()
            .map(|r| (*r, self.frames[frame].values[*r]))
            .collect();
        let result = match &plan {
            Plan::AcceptanceCorrectedItl(roles) => self.acceptance(roles, frame),
            _ => rules::evaluate_stateless(&plan, &self.frames[frame].values),
        };
        let slot = &mut self.slots[family.index()];
        slot.output_ts = Some(ts);
        slot.refused = result.as_ref().err().copied();
        let hold = slot.hold.get_or_insert_with(Box::default);
        if hold.observe_inputs(inputs) {
            self.events.output_resets[family.index()] += 1;
        }
        slot.output = result.ok().map(|value| {
            let (value, held) = hold.apply(ts, value);
            if held {
                self.events.holds[family.index()] += 1;
            }
            value
        });
    }

    /// The acceptance-corrected histogram: committed buckets plus every kept complete frame's interval.
    ///
    /// # Errors
    /// [`WithheldReason::InconsistentInputs`] when the complete frame `frame` holds a value no
    /// counter can hold (negative, infinite); [`WithheldReason::Incomplete`] when there is neither a
    /// usable frame nor a committed state to show.
    fn acceptance(
        &mut self,
        roles: &AcceptanceRoles,
        frame: usize,
    ) -> Result<DerivedValue, WithheldReason> {
        if !ItlPoint::read(roles, &self.frames[frame].values).is_valid() {
            return Err(WithheldReason::InconsistentInputs);
        }
        // A replay over another set of frames (the plan gained or lost a role) can estimate a
        // bucket lower than what an older scrape served; the output hold (`super::hold`) keeps it.
        let state = self
            .replay_acceptance(roles)
            .ok_or(WithheldReason::Incomplete)?;
        let Some(point) = state.point.as_ref() else {
            return Err(WithheldReason::Incomplete);
        };
        let count = *state.acc.last().ok_or(WithheldReason::Incomplete)?;
        let sum = point.sum;
        let buckets = roles
            .itl
            .buckets
            .iter()
            .map(|(le, _)| *le)
            .zip(state.acc.iter().copied())
            .collect();
        self.latest_acceptance = Some(state);
        Ok(DerivedValue::Histogram {
            buckets,
            sum,
            count,
        })
    }

    /// The acceptance-corrected buckets of the current output, with the raw point and timestamp
    /// of the frame they were computed from, to be handed to [`Group::resume_acceptance`] if this
    /// group comes back after it is removed for staleness. `None` when it never had that output.
    pub(crate) fn acceptance_state(&mut self) -> Option<Committed> {
        self.latest_acceptance.take()
    }

    /// The acceptance-corrected state behind the current output, left in place (for
    /// `--storage.path`): what [`Group::acceptance_state`] would hand over now. `None` when the
    /// group never had that output.
    pub(crate) fn acceptance_snapshot(&self) -> Option<&Committed> {
        self.latest_acceptance.as_ref()
    }

    /// Continues the acceptance-corrected buckets from `state`, which the same group left when it
    /// was removed for staleness: the next complete frame adds its interval from `state`'s point
    /// (or restarts the buckets if the raw counters reset meanwhile), exactly as if the group had
    /// never left. A failed scrape makes Prometheus write staleness markers for every series of
    /// the target, so without this every failed scrape would re-seed the buckets from vLLM's
    /// cumulative counts at the current acceptance length, and a bucket that came out lower would
    /// read as a counter reset in Prometheus.
    pub(crate) fn resume_acceptance(&mut self, state: Committed) {
        self.committed = state;
    }

    /// Replays the kept complete frames after the committed state: the accumulated buckets, the
    /// newest point and its timestamp. `None` when there is neither a usable complete frame nor a
    /// committed point.
    fn replay_acceptance(&mut self, acceptance: &AcceptanceRoles) -> Option<Committed> {
        let roles = PlanRoles::new(Plan::AcceptanceCorrectedItl(acceptance.clone()).roles());
        let bounds = finite_bounds(&acceptance.itl);
        reseed_if_layout_changed(&mut self.committed, &acceptance.itl);
        let mut state = self.committed.clone();
        let committed_ts = self.committed.ts;
        let frames = self
            .frames
            .iter()
            .filter(|f| committed_ts.is_none_or(|t| f.ts > t) && f.holds_plan(&roles));
        for frame in frames {
            let point = ItlPoint::read(acceptance, &frame.values);
            if advance(&mut state, &bounds, point, frame.ts) && frame.ts > self.last_reset_ts {
                self.last_reset_ts = frame.ts;
                self.events.counter_resets += 1;
            }
        }
        state.point.is_some().then_some(state)
    }

    /// Drops the oldest frame; the acceptance-corrected buckets commit its interval first.
    fn evict_oldest(&mut self) {
        let Some(oldest) = self.frames.pop_front() else {
            return;
        };
        let incomplete =
            Family::ALL.iter().any(|f| matches!(plan_of(&mut self.slots, &self.roles, *f), Ok((_, roles)) if !oldest.holds_plan(roles)));
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
            lapsed.iter().for_each(|i| self.roles[*i].stale = true);
            self.on_role_set_shrunk();
            let newest = self.frames.back().map_or(oldest.ts, |f| f.ts);
            self.roles_changed(newest);
        }
        let Ok((Plan::AcceptanceCorrectedItl(acceptance), roles)) =
            self.plan(Family::AcceptanceCorrectedItl).cloned()
        else {
            return;
        };
        if !oldest.holds_plan(&roles) || self.committed.ts.is_some_and(|t| oldest.ts <= t) {
            return;
        }
        reseed_if_layout_changed(&mut self.committed, &acceptance.itl);
        let point = ItlPoint::read(&acceptance, &oldest.values);
        advance(
            &mut self.committed,
            &finite_bounds(&acceptance.itl),
            point,
            oldest.ts,
        );
    }
}

/// The finite `le` bounds of a histogram plan, ascending.
fn finite_bounds(itl: &rules::HistRoles) -> Vec<f64> {
    itl.buckets[..itl.buckets.len() - 1]
        .iter()
        .map(|(le, _)| *le)
        .collect()
}

/// Starts the acceptance-corrected state over when its bucket layout is not `itl`'s (the group came
/// back with other ITL bounds, or a bound appeared or went stale). The committed timestamp goes
/// with it: it belonged to the old layout, and kept it would hide every frame at or before it
/// (issue 13, the panic of a retired group returning with new bounds and an older frame).
fn reseed_if_layout_changed(committed: &mut Committed, itl: &rules::HistRoles) {
    let bounds = finite_bounds(itl);
    let same = committed.acc.len() == itl.buckets.len()
        && committed.bounds == bounds
        && committed
            .point
            .as_ref()
            .is_none_or(|p| p.finite.len() == bounds.len());
    if !same {
        *committed = Committed {
            ts: None,
            point: None,
            acc: vec![0.0; itl.buckets.len()],
            bounds,
        };
    }
}

/// Adds the interval from `state`'s point to `point` (at `ts`) to `state`. A point that decreased
/// from the previous one restarts the buckets from 0 (a counter reset: returns true); an invalid
/// point ([`ItlPoint::is_valid`]) is skipped and leaves `state` as it was.
fn advance(state: &mut Committed, bounds: &[f64], point: ItlPoint, ts: i64) -> bool {
    if !point.is_valid() {
        return false;
    }
    let reset = state.point.as_ref().is_some_and(|p| point.is_reset_from(p));
    if reset {
        state.acc.iter_mut().for_each(|a| *a = 0.0);
        state.point = None;
    }
    rules::acceptance_interval(bounds, state.point.as_ref(), &point, &mut state.acc);
    state.point = Some(point);
    state.ts = Some(ts);
    reset
}
