//! A stateful family's state in one group ([`crate::rules::StatefulRule`]), driven the same way
//! for every such family: the committed state (every frame that left the window), the state
//! behind the current output, and the newest counter reset counted.
//!
//! One implementation serves both paths that add frames to a state: a replay (each output: the
//! kept complete frames after a base state, on a copy) and a commit (the oldest frame leaving the
//! window, into the committed state). Both first re-seed a state whose layout is not the plan's.
//!
//! The base of a replay is the state behind the previous output while that is still the committed
//! state plus every complete kept frame up to its own, else the committed state (docs/ENGINE.md,
//! "The stateful families' replay"). In steady state that adds one interval per output instead of
//! one per kept frame. Debug builds also replay from the committed state and compare the two.
//!
//! The state's handover is here too, in one place: [`Accumulator::take_latest`] when the group is
//! retired (the engine keeps it among its retired states), [`Accumulator::latest`] when it is
//! stored (`--storage.path`), and [`Accumulator::resume`] when a retired or restored state comes
//! back to its group.

use std::collections::VecDeque;

use super::frame::{Frame, PlanRoles};
use crate::reasons::WithheldReason;
use crate::rules::{Plan, RuleState, StatefulRule};
use crate::values::DerivedValue;

/// One stateful family's state in one group.
#[derive(Debug, Clone, Default)]
pub(crate) struct Accumulator {
    /// Everything before the oldest kept frame (or what a retired group left behind); `None`
    /// before the first frame is committed or a state resumed.
    committed: Option<RuleState>,
    /// The state behind the current output, handed over when the group is retired: by the time
    /// every series is stale, the plan that produced it is gone.
    latest: Option<RuleState>,
    /// True while `latest` equals the committed state plus every complete kept frame up to
    /// `latest`'s frame, under the current plan: a replay may then start from `latest`. Cleared
    /// when the plan changes ([`Accumulator::plan_changed`]) or the committed state is replaced.
    latest_is_base: bool,
}

/// Adds every frame of `frames` newer than `state`'s own frame and complete for the plan, in
/// timestamp order, after re-seeding `state` if its layout is not the plan's; calls `on_reset`
/// with the timestamp of each frame at which an input fell (a counter reset).
fn advance_over<'f>(
    rule: &StatefulRule,
    plan: &Plan,
    roles: &PlanRoles,
    state: &mut RuleState,
    frames: impl Iterator<Item = &'f Frame>,
    mut on_reset: impl FnMut(i64),
) {
    if !(rule.fits)(plan, state) {
        *state = (rule.seed)(plan);
    }
    let after = state.ts();
    for frame in frames.filter(|f| after.is_none_or(|t| f.ts > t) && f.holds_plan(roles)) {
        if (rule.advance)(plan, state, &frame.values, frame.ts) {
            on_reset(frame.ts);
        }
    }
}

impl Accumulator {
    /// The output at frame `frame`: the committed state plus every kept complete frame replayed
    /// after it. Calls `on_reset` with the timestamp of each frame of the replay at which an input
    /// fell (the group counts a reset once, at a frame newer than the last it counted).
    ///
    /// # Errors
    /// [`WithheldReason::InconsistentInputs`] when `frame` holds a value no counter can hold;
    /// [`WithheldReason::Incomplete`] when there is neither a usable frame nor a committed state.
    pub(crate) fn evaluate(
        &mut self,
        rule: &StatefulRule,
        plan: &Plan,
        roles: &PlanRoles,
        frames: &VecDeque<Frame>,
        frame: usize,
        on_reset: &mut dyn FnMut(i64),
    ) -> Result<DerivedValue, WithheldReason> {
        (rule.check)(plan, &frames[frame].values)?;
        if rule.forward_only {
            return self.evaluate_forward(rule, plan, roles, frames, on_reset);
        }
        // A replay over another set of frames (the plan gained or lost a role) can give a lower
        // value than what an older scrape served; the output hold (`crate::hold`) keeps it.
        let committed = match &mut self.committed {
            Some(c) if (rule.fits)(plan, c) => c,
            slot => {
                self.latest_is_base = false;
                slot.insert((rule.seed)(plan))
            }
        };
        let base = match &self.latest {
            // A frame committed after `latest` was computed is in the committed state only.
            Some(latest) if self.latest_is_base && latest.ts() >= committed.ts() => latest,
            _ => committed,
        };
        let mut state = base.clone();
        advance_over(rule, plan, roles, &mut state, frames.iter(), on_reset);
        #[cfg(debug_assertions)]
        {
            let mut full = committed.clone();
            advance_over(rule, plan, roles, &mut full, frames.iter(), |_| {});
            debug_assert!(
                state == full,
                "a replay from the previous output's state diverged"
            );
        }
        if !state.has_frame() {
            return Err(WithheldReason::Incomplete);
        }
        let value = (rule.output)(plan, &state)?;
        self.latest = Some(state);
        self.latest_is_base = true;
        Ok(value)
    }

    /// [`Accumulator::evaluate`] of a forward-only rule ([`crate::rules::stateful::FrameRule::FORWARD_ONLY`]):
    /// the state behind the previous output (or a resumed one) plus every complete frame newer
    /// than it, whatever the plan was when it was made.
    fn evaluate_forward(
        &mut self,
        rule: &StatefulRule,
        plan: &Plan,
        roles: &PlanRoles,
        frames: &VecDeque<Frame>,
        on_reset: &mut dyn FnMut(i64),
    ) -> Result<DerivedValue, WithheldReason> {
        let mut state = match self.latest.take().or_else(|| self.committed.take()) {
            Some(state) => state,
            None => (rule.seed)(plan),
        };
        if !(rule.fits)(plan, &state) {
            state = (rule.seed)(plan);
        }
        // The newest frame the state holds is offered again: a frame first added under a plan
        // that lacked some of its series (they were still arriving) gives the rest now; the
        // rule adds nothing twice.
        let after = state.ts();
        for frame in frames
            .iter()
            .filter(|f| after.is_none_or(|t| f.ts >= t) && f.holds_plan(roles))
        {
            if (rule.advance)(plan, &mut state, &frame.values, frame.ts) {
                on_reset(frame.ts);
            }
        }
        let value = if state.has_frame() {
            (rule.output)(plan, &state)
        } else {
            Err(WithheldReason::Incomplete)
        };
        self.latest = Some(state);
        value
    }

    /// The plan's roles or layout changed: the next replay starts from the committed state, since
    /// the set of complete frames behind `latest` may differ under the new plan.
    pub(crate) fn plan_changed(&mut self) {
        self.latest_is_base = false;
    }

    /// Commits the frame leaving the window into the committed state.
    pub(crate) fn commit(
        &mut self,
        rule: &StatefulRule,
        plan: &Plan,
        roles: &PlanRoles,
        frame: &Frame,
    ) {
        if rule.forward_only {
            // The state is advanced by each frame as it completes, never replayed: nothing to
            // commit. One that held no output yet keeps the frame for the next evaluation.
            return;
        }
        let committed = self.committed.get_or_insert_with(|| (rule.seed)(plan));
        advance_over(rule, plan, roles, committed, std::iter::once(frame), |_| {});
    }

    /// Takes the state behind the current output (the group is being retired); see
    /// [`Accumulator::latest`] for a group without one.
    pub(crate) fn take_latest(&mut self) -> Option<RuleState> {
        self.latest
            .take()
            .or_else(|| self.committed.take_if(|c| c.has_frame()))
    }

    /// The state behind the current output, left in place. A group with no output yet (settling,
    /// docs/ENGINE.md) gives its committed state when that holds a frame: a state it resumed or
    /// restored, or frames that left its window. So a state restored at start and written again
    /// before the group settles is not lost.
    pub(crate) fn latest(&self) -> Option<&RuleState> {
        self.latest
            .as_ref()
            .or_else(|| self.committed.as_ref().filter(|c| c.has_frame()))
    }

    /// Continues from `state`, which the same group left when it was retired.
    pub(crate) fn resume(&mut self, state: RuleState) {
        self.committed = Some(state);
        self.latest_is_base = false;
    }
}

#[cfg(test)]
mod tests;
