//! The correction rules as data (`docs/ENGINE.md`, "The rule registry"): one file per rule, one
//! [`REGISTRY`] that every part of the product iterates.
//!
//! A rule has a [`Spec`] (what the corrected family is: its name, help, type and inputs),
//! decides a [`Plan`] from the roles a group has learned (which of its series it reads), and
//! evaluates a complete frame. A stateful rule also gives [`Stateful`] hooks: its state, how it is
//! seeded for a bucket layout, and how one frame advances it; the group replays and commits frames
//! through those hooks alone (`super::group`). Semantics: `docs/METRICS.md`, "The corrected
//! families".

mod acceptance;
mod acceptance_corrected_itl;
mod canonical_tpot;
mod iteration_tokens_local_compute;
mod token_weighted_itl;
mod tokens_per_output;

pub(crate) use acceptance::Committed;
#[cfg(test)]
pub(crate) use acceptance::ItlPoint;
#[cfg(test)]
pub(crate) use acceptance::{
    ESTIMATOR, Estimator, acceptance_interval, acceptance_interval_with, interpolate,
    interpolate_from,
};

use crate::classify::{Input, Part, RoleKey};
use crate::values::{DerivedValue, FamilyKind, WithheldReason};

/// One registry entry: the family's spec, its rule, and the stateful hooks if it has state.
pub(crate) struct Registered {
    /// What the family is.
    pub(crate) spec: Spec,
    /// The stateless part: plan and (for stateless families) evaluation.
    pub(crate) rule: &'static dyn Rule,
    /// Hooks of a stateful family; `None` for a function of one frame.
    pub(crate) stateful: Option<&'static dyn Stateful>,
}

/// What a corrected family is: its exposition name, help and type, and the raw series it reads.
/// How the tools show it is theirs (`crates/tools/src/presentation.rs`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Spec {
    /// The exposed family name (`vllm_corrected_…`).
    pub(crate) name: &'static str,
    /// The `# HELP` text.
    pub(crate) help: &'static str,
    /// Histogram or sum/count.
    pub(crate) kind: FamilyKind,
    /// The raw vLLM series it reads (for documentation; [`crate::READ_NAMES`] is the
    /// classifier's table).
    pub(crate) inputs: &'static [&'static str],
}

/// A histogram's roles: `(le, role)` ascending with the `+Inf` bucket last, plus `_sum` and `_count`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HistRoles {
    /// `(upper bound, role index)`, ascending; the last bound is `+Inf`.
    pub(crate) buckets: Vec<(f64, usize)>,
    /// Role index of `_sum`.
    pub(crate) sum: usize,
    /// Role index of `_count`.
    pub count: usize,
}

impl HistRoles {
    fn roles(&self) -> impl Iterator<Item = usize> + '_ {
        self.buckets
            .iter()
            .map(|(_, r)| *r)
            .chain([self.sum, self.count])
    }

    /// The finite `le` bounds, ascending.
    pub(crate) fn finite_bounds(&self) -> Vec<f64> {
        self.buckets[..self.buckets.len() - 1]
            .iter()
            .map(|(le, _)| *le)
            .collect()
    }
}

/// Which of a group's roles a family reads, laid out as its rule defines: an optional histogram,
/// single series in the rule's own order, and a list of series of one labelled family (the
/// accepted drafts per position).
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Plan {
    /// The histogram the rule reads, if any.
    pub(crate) hist: Option<HistRoles>,
    /// Single series, in the order the rule's evaluation reads them.
    pub(crate) scalars: Vec<usize>,
    /// Series of one labelled family in label order (may be empty).
    pub(crate) series: Vec<usize>,
}

impl Plan {
    /// Every role index the plan reads.
    pub(crate) fn roles(&self) -> Vec<usize> {
        let hist = self.hist.iter().flat_map(HistRoles::roles);
        hist.chain(self.scalars.iter().copied())
            .chain(self.series.iter().copied())
            .collect()
    }

    /// The histogram of the plan. Only called by rules whose plans always have one.
    pub(crate) fn histogram(&self) -> Result<&HistRoles, WithheldReason> {
        self.hist.as_ref().ok_or(WithheldReason::Incomplete)
    }
}

/// A correction rule. Implementations are unit structs listed in [`REGISTRY`]; the engine calls
/// them through `&'static dyn Rule` once per plan decision and once per completed frame.
pub(crate) trait Rule: Sync {
    /// Decides the plan from the group's learned (non-stale) roles, `(key, role index)`.
    ///
    /// # Errors
    /// [`WithheldReason::MissingInput`] when a required series was never seen, or a more
    /// specific reason (`no_le_1_bound`).
    fn plan(&self, learned: &[(RoleKey, usize)]) -> Result<Plan, WithheldReason>;

    /// Evaluates one complete frame (`values[role]`, cumulative since the inputs' last reset).
    /// A stateful rule is evaluated through its [`Stateful`] hooks instead.
    ///
    /// # Errors
    /// [`WithheldReason::InconsistentInputs`] when the inputs cannot give a valid value.
    fn evaluate(&self, plan: &Plan, values: &[f64]) -> Result<DerivedValue, WithheldReason>;
}

/// The hooks of a rule whose output depends on earlier frames (the acceptance-corrected buckets).
/// Its state is a [`Committed`]: everything up to one frame. The group keeps one committed state
/// per group, replays its kept frames after it for each output, commits the oldest frame when it
/// leaves the window, and hands the state over when the group is retired (`super::group`).
pub(crate) trait Stateful: Sync {
    /// Whether the frame's values can be used at all.
    ///
    /// # Errors
    /// [`WithheldReason::InconsistentInputs`] when a value no counter can hold is there.
    fn check(&self, plan: &Plan, values: &[f64]) -> Result<(), WithheldReason>;
    /// True when `state` belongs to the plan's layout (its bucket bounds); otherwise it is
    /// re-seeded with [`Stateful::seed`] before any frame is added.
    fn fits(&self, plan: &Plan, state: &Committed) -> bool;
    /// The empty state of the plan's layout.
    fn seed(&self, plan: &Plan) -> Committed;
    /// Adds the frame at `ts` to `state`. Returns true when an input fell since the state's
    /// frame (a counter reset: the state restarted from this frame).
    fn advance(&self, plan: &Plan, state: &mut Committed, values: &[f64], ts: i64) -> bool;
    /// The family's value from a state that holds at least one frame.
    ///
    /// # Errors
    /// [`WithheldReason::Incomplete`] when the state holds no frame.
    fn output(&self, plan: &Plan, state: &Committed) -> Result<DerivedValue, WithheldReason>;
}

/// Finds the learned role of `input` (non-bucket inputs).
pub(crate) fn find(learned: &[(RoleKey, usize)], input: Input) -> Option<usize> {
    learned
        .iter()
        .find(|(k, _)| k.input == input)
        .map(|(_, r)| *r)
}

/// [`find`], or [`WithheldReason::MissingInput`].
pub(crate) fn need(learned: &[(RoleKey, usize)], input: Input) -> Result<usize, WithheldReason> {
    find(learned, input).ok_or(WithheldReason::MissingInput)
}

/// The histogram roles of `make(part)`, or `None` when `_sum`, `_count` or the `+Inf` bucket is missing.
pub(crate) fn hist(learned: &[(RoleKey, usize)], make: fn(Part) -> Input) -> Option<HistRoles> {
    let mut buckets: Vec<(f64, usize)> = learned
        .iter()
        .filter(|(k, _)| k.input == make(Part::Bucket))
        .map(|(k, r)| (k.bound(), *r))
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    if buckets.last().map(|(le, _)| *le) != Some(f64::INFINITY) {
        return None;
    }
    Some(HistRoles {
        buckets,
        sum: find(learned, make(Part::Sum))?,
        count: find(learned, make(Part::Count))?,
    })
}

/// The ITL histogram of a group: `inter_token_latency_seconds` when any of its series is learned, else
/// the old name `time_per_output_token_seconds` (vLLM ≤ 0.14). Never both.
pub(crate) fn itl_input(learned: &[(RoleKey, usize)]) -> fn(Part) -> Input {
    if learned
        .iter()
        .any(|(k, _)| matches!(k.input, Input::Itl(_)))
    {
        Input::Itl
    } else {
        Input::OldItl
    }
}

/// The accepted-per-position roles ordered by position, when positions 0..k are all there (a gap
/// would misplace every later position: then none, and the mean weight is used).
pub(crate) fn per_pos(learned: &[(RoleKey, usize)]) -> Vec<usize> {
    let mut pos: Vec<(f64, usize)> = learned
        .iter()
        .filter(|(k, _)| k.input == Input::AcceptedPerPos)
        .map(|(k, r)| (k.bound(), *r))
        .collect();
    pos.sort_by(|a, b| a.0.total_cmp(&b.0));
    let contiguous = pos.iter().enumerate().all(|(i, (p, _))| *p == i as f64);
    if contiguous {
        pos.into_iter().map(|(_, r)| r).collect()
    } else {
        Vec::new()
    }
}

/// A sum/count value, withheld when the count is negative (an input ran ahead of another).
///
/// # Errors
/// [`WithheldReason::InconsistentInputs`] when `count < 0`.
pub(crate) fn sum_count(sum: f64, count: f64) -> Result<DerivedValue, WithheldReason> {
    if count < 0.0 {
        return Err(WithheldReason::InconsistentInputs);
    }
    Ok(DerivedValue::SumCount { sum, count })
}

/// Every rule, in exposition order. A family's [`crate::Family`] is its index here.
/// Adding a family is one file under `crates/engine/src/rules/` and one line here (`docs/ENGINE.md`,
/// "Adding a family").
pub(crate) const REGISTRY: &[Registered] = &[
    canonical_tpot::RULE,
    token_weighted_itl::RULE,
    acceptance_corrected_itl::RULE,
    iteration_tokens_local_compute::RULE,
    tokens_per_output::RULE,
];

/// Number of corrected families: the length of per-family arrays.
pub const FAMILIES: usize = REGISTRY.len();

// At most one stateful rule: the state document (`--storage.path`, format version 1) and the
// retired states hold one state per group. A second one needs a new format version.
const _: () = {
    let (mut i, mut stateful) = (0, 0);
    while i < REGISTRY.len() {
        if REGISTRY[i].stateful.is_some() {
            stateful += 1;
        }
        i += 1;
    }
    assert!(stateful <= 1, "at most one stateful rule (state format 1)");
    assert!(REGISTRY.len() < 64, "a family index fits in a u8");
};

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;
