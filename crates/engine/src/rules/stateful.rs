//! Rules whose value depends on earlier frames ([`Evaluation::Stateful`](super::Evaluation)):
//! each declares its per-group state ([`FrameRule::State`]) and how a complete frame advances it;
//! the group keeps one state per such family and drives it the same way for every one
//! (`crate::group`'s `Accumulator`: replayed over the kept frames for each output, committed as
//! frames leave the window, handed over when the group is retired, written to the state file).
//!
//! A new stateful family is one file implementing [`FrameRule`] and one registry line with
//! [`StatefulRule::of`]: nothing else in the engine names it (docs/ENGINE.md, "Adding a family").

use std::any::Any;
use std::fmt::Debug;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::Plan;
use crate::reasons::WithheldReason;
use crate::values::DerivedValue;

/// What a stateful rule keeps per group: everything up to one frame.
pub(crate) trait FrameState:
    Clone + PartialEq + Debug + Serialize + DeserializeOwned + Send + Sync + 'static
{
    /// Timestamp (ms) of the newest frame the state includes; `None` for a seed.
    fn ts(&self) -> Option<i64>;
    /// True when the state includes at least one frame (a seed does not).
    fn has_frame(&self) -> bool;
    /// Heap bytes held, for the engine's memory accounting.
    fn heap_bytes(&self) -> usize;
    /// Why the state is not one an engine writes (checked on a state restored from a file):
    /// a non-finite or negative number, an inconsistent shape, a timestamp after `latest_ms`.
    ///
    /// # Errors
    /// What is wrong, in a few words.
    fn validate(&self, latest_ms: i64) -> Result<(), &'static str>;
}

/// A rule evaluated from state. Every function is given the family's plan ([`Plan`]) and a
/// complete frame's values (`values[role]`, cumulative since the inputs' last reset).
pub(crate) trait FrameRule {
    /// What a group keeps for the family.
    type State: FrameState;

    /// True when the state only ever moves forward: each complete frame newer than the state is
    /// added in the order the frames complete, and a change of the plan never rewinds the state
    /// to replay the kept frames. The state's own newest frame is offered again at the next
    /// evaluation (its series may have completed a fuller plan since): `advance` must add a
    /// frame it already holds as nothing more than what the fuller plan adds. For a state that counts what happened between frames
    /// (the SLO counters): a replay under a plan that gained a role would skip the kept frames
    /// that lack it, and an interval with a counter reset in it would lose what came before
    /// the reset. False (the default): replayed over every complete kept frame.
    const FORWARD_ONLY: bool = false;

    /// Whether a complete frame's values can be used at all.
    ///
    /// # Errors
    /// [`WithheldReason::InconsistentInputs`] when a value no counter can hold is there.
    fn check(plan: &Plan, values: &[f64]) -> Result<(), WithheldReason>;

    /// The empty state of the plan's layout.
    fn seed(plan: &Plan) -> Self::State;

    /// True when `state` belongs to the plan's layout; otherwise it is re-seeded before any frame
    /// is added (the group came back with another layout, or the plan changed).
    fn fits(plan: &Plan, state: &Self::State) -> bool;

    /// Adds the frame at `ts` (ms). Returns true when an input fell since the state's frame (a
    /// counter reset).
    fn advance(plan: &Plan, state: &mut Self::State, values: &[f64], ts: i64) -> bool;

    /// The family's value from a state that includes at least one frame.
    ///
    /// # Errors
    /// [`WithheldReason::Incomplete`] when the state holds no frame.
    fn output(plan: &Plan, state: &Self::State) -> Result<DerivedValue, WithheldReason>;
}

/// A [`FrameState`] of any rule, as the group and the retired states hold it.
pub(crate) trait AnyState: Debug + Send + Sync {
    fn ts(&self) -> Option<i64>;
    fn has_frame(&self) -> bool;
    fn heap_bytes(&self) -> usize;
    fn validate(&self, latest_ms: i64) -> Result<(), &'static str>;
    fn boxed(&self) -> Box<dyn AnyState>;
    fn same(&self, other: &dyn AnyState) -> bool;
    fn save(&self) -> serde_json::Value;
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<S: FrameState> AnyState for S {
    fn ts(&self) -> Option<i64> {
        FrameState::ts(self)
    }
    fn has_frame(&self) -> bool {
        FrameState::has_frame(self)
    }
    fn heap_bytes(&self) -> usize {
        size_of::<S>() + FrameState::heap_bytes(self)
    }
    fn validate(&self, latest_ms: i64) -> Result<(), &'static str> {
        FrameState::validate(self, latest_ms)
    }
    fn boxed(&self) -> Box<dyn AnyState> {
        Box::new(self.clone())
    }
    fn same(&self, other: &dyn AnyState) -> bool {
        other.as_any().downcast_ref::<S>() == Some(self)
    }
    fn save(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// One rule's state, of the rule's own type ([`FrameRule::State`]) behind a box.
#[derive(Debug)]
pub(crate) struct RuleState(Box<dyn AnyState>);

impl Clone for RuleState {
    fn clone(&self) -> RuleState {
        RuleState(self.0.boxed())
    }
}

impl PartialEq for RuleState {
    fn eq(&self, other: &RuleState) -> bool {
        self.0.same(&*other.0)
    }
}

impl RuleState {
    /// A rule's state.
    pub(crate) fn new<S: FrameState>(state: S) -> RuleState {
        RuleState(Box::new(state))
    }

    /// The state as `S`, when it is one.
    pub(crate) fn get<S: FrameState>(&self) -> Option<&S> {
        self.0.as_any().downcast_ref()
    }

    fn get_mut<S: FrameState>(&mut self) -> Option<&mut S> {
        self.0.as_any_mut().downcast_mut()
    }

    /// Timestamp (ms) of the newest frame included.
    pub(crate) fn ts(&self) -> Option<i64> {
        self.0.ts()
    }

    /// True when at least one frame is included.
    pub(crate) fn has_frame(&self) -> bool {
        self.0.has_frame()
    }

    /// Heap bytes held: the boxed state and what it holds.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.0.heap_bytes()
    }

    /// [`FrameState::validate`].
    ///
    /// # Errors
    /// What is wrong.
    pub(crate) fn validate(&self, latest_ms: i64) -> Result<(), &'static str> {
        self.0.validate(latest_ms)
    }

    /// The state as JSON, for the state file.
    pub(crate) fn save(&self) -> serde_json::Value {
        self.0.save()
    }
}

/// A stateful rule's functions over [`RuleState`], built from its [`FrameRule`] by
/// [`StatefulRule::of`]: what the registry holds.
#[derive(Debug)]
pub(crate) struct StatefulRule {
    /// [`FrameRule::check`].
    pub(crate) check: fn(&Plan, &[f64]) -> Result<(), WithheldReason>,
    /// [`FrameRule::seed`].
    pub(crate) seed: fn(&Plan) -> RuleState,
    /// [`FrameRule::fits`]; false for a state of another rule.
    pub(crate) fits: fn(&Plan, &RuleState) -> bool,
    /// [`FrameRule::advance`] (a state of another rule is re-seeded first).
    pub(crate) advance: fn(&Plan, &mut RuleState, &[f64], i64) -> bool,
    /// [`FrameRule::output`].
    pub(crate) output: fn(&Plan, &RuleState) -> Result<DerivedValue, WithheldReason>,
    /// Reads a state written by [`RuleState::save`].
    pub(crate) load: fn(serde_json::Value) -> Result<RuleState, String>,
    /// [`FrameRule::FORWARD_ONLY`].
    pub(crate) forward_only: bool,
}

fn seed<R: FrameRule>(plan: &Plan) -> RuleState {
    RuleState::new(R::seed(plan))
}

fn fits<R: FrameRule>(plan: &Plan, state: &RuleState) -> bool {
    state.get::<R::State>().is_some_and(|s| R::fits(plan, s))
}

fn advance<R: FrameRule>(plan: &Plan, state: &mut RuleState, values: &[f64], ts: i64) -> bool {
    if state.get::<R::State>().is_none() {
        *state = seed::<R>(plan);
    }
    match state.get_mut::<R::State>() {
        Some(s) => R::advance(plan, s, values, ts),
        None => false,
    }
}

fn output<R: FrameRule>(plan: &Plan, state: &RuleState) -> Result<DerivedValue, WithheldReason> {
    let state = state.get::<R::State>().ok_or(WithheldReason::Incomplete)?;
    R::output(plan, state)
}

fn load<R: FrameRule>(value: serde_json::Value) -> Result<RuleState, String> {
    serde_json::from_value::<R::State>(value)
        .map(RuleState::new)
        .map_err(|e| e.to_string())
}

impl StatefulRule {
    /// The registry entry of rule `R`.
    pub(crate) const fn of<R: FrameRule>() -> StatefulRule {
        StatefulRule {
            check: R::check,
            seed: seed::<R>,
            fits: fits::<R>,
            advance: advance::<R>,
            output: output::<R>,
            load: load::<R>,
            forward_only: R::FORWARD_ONLY,
        }
    }
}
