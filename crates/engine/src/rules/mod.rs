//! The correction rules as data (`docs/ENGINE.md`, "The rule registry"): one file per rule, one
//! [`REGISTRY`] that every part of the product iterates.
//!
//! A rule is a [`Spec`]: what the corrected family is (its name, help, type and inputs), how it
//! decides a [`Plan`] from the roles a group has learned (which of its series it reads), and how
//! its value comes from the frames the plan reads ([`Evaluation`]): a function of one complete
//! frame, or a state of the rule's own the group advances frame by frame ([`stateful`]). How the
//! tools show a family is theirs (`crates/tools/src/presentation.rs`). Semantics:
//! `docs/METRICS.md`, "The corrected families".

mod acceptance;
mod acceptance_corrected_itl;
mod canonical_tpot;
mod iteration_tokens_local_compute;
mod slo_counters;
pub(crate) mod stateful;
mod token_weighted_itl;
mod tokens_per_output;

#[cfg(test)]
pub(crate) use acceptance::Committed;
#[cfg(test)]
pub(crate) use acceptance::ItlPoint;
#[cfg(test)]
pub(crate) use acceptance::{
    ESTIMATOR, Estimator, acceptance_interval, acceptance_interval_with, interpolate,
    interpolate_from,
};
pub(crate) use stateful::{RuleState, StatefulRule};

use crate::classify::{Input, Part, RoleKey};
use crate::reasons::WithheldReason;
use crate::values::{DerivedValue, FamilyKind};

/// One registry entry: what a corrected family is (its exposition name, help and type, and the raw
/// series it reads) and how its value is computed. How the tools show it is theirs
/// (`crates/tools/src/presentation.rs`).
#[derive(Debug)]
pub(crate) struct Spec {
    /// The exposed family name (`vllm_corrected_…`).
    pub(crate) name: &'static str,
    /// The `# HELP` text.
    pub(crate) help: &'static str,
    /// Histogram or sum/count.
    pub(crate) kind: FamilyKind,
    /// The raw vLLM series it reads, each a [`crate::READ_NAMES`] name or the histogram one is
    /// part of, with the label it selects on if any. Documentation, checked against `READ_NAMES`
    /// (the classifier's table) by `every_spec_input_is_a_series_the_classifier_reads`.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) inputs: &'static [&'static str],
    /// The reasons this rule withholds its family for beyond [`WithheldReason::COMMON`] (a
    /// missing input, an incomplete frame, settling, a limit), which every family can give:
    /// `no_le_1_bound` or `inconsistent_inputs` where its plan or evaluation returns them. The
    /// self-metric `vllm_corrector_groups_withheld` shows only the pairs that can happen
    /// (`only_the_withheld_reasons_a_rule_can_give_are_listed_for_its_family` checks them).
    pub(crate) withholds: &'static [WithheldReason],
    /// Decides the plan. Called when the group's role set changes, never per sample.
    pub(crate) plan: Planner,
    /// How the value comes from the frames the plan reads.
    pub(crate) evaluation: Evaluation,
    /// True when the family's bucket counts are estimates that may be fractional (token-weighted
    /// shares of outputs), false when every count is a difference or sum of vLLM's integer
    /// counters ([`crate::Family::fractional_buckets`]).
    pub(crate) fractional_buckets: bool,
    /// When the family, though served, is served in a degraded mode: the input whose absence
    /// degrades it (`degraded` on `/status` and the API).
    pub(crate) degrades: Option<Degrades>,
}

/// The input whose absence degrades a served family, given its plan and the group's learned
/// roles; `None` when it is served in full.
pub(crate) type Degrades = fn(&Plan, &[(RoleKey, usize)]) -> Option<Input>;

/// Decides a family's plan from the group's learned (non-stale) roles, `(key, role index)`, and
/// the group's [`PlanContext`].
///
/// # Errors
/// [`WithheldReason::MissingInput`] naming the required series never seen, or a more specific
/// reason (`no_le_1_bound`, `no_slo`).
pub(crate) type Planner = fn(&[(RoleKey, usize)], &PlanContext<'_>) -> Result<Plan, Unplanned>;

/// What a plan may depend on besides the learned roles: the group's labels, the SLOs the
/// engine counts (which of them cover the group) and the series the group sent that lapsed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PlanContext<'a> {
    /// The group's labels, sorted by name.
    pub(crate) labels: &'a [(String, String)],
    /// The engine's SLOs.
    pub(crate) slos: &'a crate::slo::SloSet,
    /// Series the group sent that lapsed (no sample over the frame window): a plan that sums the
    /// members of an input (the finish reasons) must not read the rest as the whole.
    pub(crate) lapsed: &'a [RoleKey],
}

impl<'a> PlanContext<'a> {
    /// The context of a group labelled `labels` (sorted by name), counting `slos`, with no lapsed
    /// series; [`crate::group`] fills `lapsed` when it plans.
    pub(crate) fn new(
        labels: &'a [(String, String)],
        slos: &'a crate::slo::SloSet,
    ) -> PlanContext<'a> {
        PlanContext {
            labels,
            slos,
            lapsed: &[],
        }
    }
}

/// Why a family has no plan: the reason, and the input series it lacks when that is the reason
/// (the name as vLLM exposes it, with the label a rule selects on: shown by `/status`, the API,
/// the log and `vllm_corrector_family_info{detail}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unplanned {
    /// Why.
    pub(crate) reason: WithheldReason,
    /// The series the plan lacks, for [`WithheldReason::MissingInput`] ([`input_name`] names
    /// it). An input, not its name: a group caches one per family, and this keeps it 4 bytes.
    pub(crate) missing: Option<Input>,
}

impl From<WithheldReason> for Unplanned {
    fn from(reason: WithheldReason) -> Unplanned {
        Unplanned {
            reason,
            missing: None,
        }
    }
}

/// [`WithheldReason::MissingInput`] for the series `input`.
pub(crate) fn missing(input: Input) -> Unplanned {
    Unplanned {
        reason: WithheldReason::MissingInput,
        missing: Some(input),
    }
}

/// The series name of `input` as vLLM exposes it, with the label value a rule selects on where
/// it selects one (`vllm:request_generation_tokens_bucket{le="1"}`).
pub(crate) fn input_name(input: Input) -> &'static str {
    match input {
        Input::GenLe1 => "vllm:request_generation_tokens_bucket{le=\"1\"}",
        Input::LocalCompute => "vllm:prompt_tokens_by_source_total{source=\"local_compute\"}",
        // A group that has neither ITL name is told the current one (vLLM ≥ 0.15), not the old.
        Input::OldItl(part) => input_name(Input::Itl(part)),
        _ => crate::classify::READ_NAMES
            .iter()
            .find(|r| r.input == input)
            .map_or("an input series", |r| r.name),
    }
}

/// How a family's value comes from the frames its plan reads.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Evaluation {
    /// A function of one complete frame (`values[role]`, cumulative since the inputs' last
    /// reset), called once per completed frame. Errors:
    /// [`WithheldReason::InconsistentInputs`] when the inputs cannot give a valid value.
    Frame(fn(&Plan, &[f64]) -> Result<DerivedValue, WithheldReason>),
    /// A value that depends on earlier frames: the rule's own per-group state, advanced by each
    /// complete frame in timestamp order ([`stateful`]).
    Stateful(&'static StatefulRule),
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
    /// What a rule's plan holds beyond the roles, of the rule's own type (the SLO counters:
    /// which buckets each SLO reads, the rows served, the notes): `None` for most rules.
    pub(crate) layout: Option<std::sync::Arc<dyn Layout>>,
}

/// A rule's own part of its [`Plan`] ([`Plan::layout`]): decided with the plan, read by its
/// evaluation. Nothing outside the rule names its type.
pub(crate) trait Layout: std::fmt::Debug + Send + Sync + std::any::Any {
    /// Why SLIs of the SLOs covering the group are not counted; empty for a rule with none.
    fn notes(&self) -> &std::sync::Arc<[crate::slo::SliNote]>;
    /// True when `other` is a layout of the same type equal to this one.
    fn same(&self, other: &dyn Layout) -> bool;
    /// The layout as `Any`, for the rule to read its own type back.
    fn as_any(&self) -> &dyn std::any::Any;
}

impl PartialEq for dyn Layout {
    fn eq(&self, other: &dyn Layout) -> bool {
        self.same(other)
    }
}

impl Plan {
    /// Every role index the plan reads.
    pub(crate) fn roles(&self) -> Vec<usize> {
        self.each_role().collect()
    }

    /// Every role index the plan reads, without collecting them.
    pub(crate) fn each_role(&self) -> impl Iterator<Item = usize> + '_ {
        let hist = self.hist.iter().flat_map(HistRoles::roles);
        hist.chain(self.scalars.iter().copied())
            .chain(self.series.iter().copied())
    }

    /// Why SLIs of the SLOs covering the group are not counted (a rule's [`Layout::notes`]);
    /// `None` for a plan without a layout.
    pub(crate) fn notes(&self) -> Option<&std::sync::Arc<[crate::slo::SliNote]>> {
        self.layout.as_ref().map(|l| l.notes())
    }

    /// The histogram of the plan. Only called by rules whose plans always have one.
    pub(crate) fn histogram(&self) -> Result<&HistRoles, WithheldReason> {
        self.hist.as_ref().ok_or(WithheldReason::Incomplete)
    }
}

/// Finds the learned role of `input` (non-bucket inputs).
pub(crate) fn find(learned: &[(RoleKey, usize)], input: Input) -> Option<usize> {
    learned
        .iter()
        .find(|(k, _)| k.input == input)
        .map(|(_, r)| *r)
}

/// [`find`], or [`WithheldReason::MissingInput`] naming `input`.
pub(crate) fn need(learned: &[(RoleKey, usize)], input: Input) -> Result<usize, Unplanned> {
    find(learned, input).ok_or_else(|| missing(input))
}

/// [`hist`], or [`WithheldReason::MissingInput`] naming the first part it lacks: the `+Inf`
/// bucket (named by its `_bucket` series), `_sum` or `_count`.
pub(crate) fn need_hist(
    learned: &[(RoleKey, usize)],
    make: fn(Part) -> Input,
) -> Result<HistRoles, Unplanned> {
    hist(learned, make).ok_or_else(|| {
        let has_inf = learned
            .iter()
            .any(|(k, _)| k.input == make(Part::Bucket) && k.bound() == f64::INFINITY);
        let lacking = [Part::Sum, Part::Count]
            .into_iter()
            .find(|p| find(learned, make(*p)).is_none());
        match (has_inf, lacking) {
            (false, _) | (true, None) => missing(make(Part::Bucket)),
            (true, Some(part)) => missing(make(part)),
        }
    })
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

/// A value a family may serve: every number (bucket counts, `_sum`, `_count`) finite and none
/// negative, and, unless the family's buckets are fractional by design (`fractional_buckets`,
/// [`Spec::fractional_buckets`]), every bucket count and `_count` an integer. Applied
/// to every family's value after its evaluation, so that an infinite input (remote write carries
/// `±Inf` as readily as any value), inputs that run apart, or a count no vLLM counter can hold
/// (a fractional `_bucket` or `_count`: OpenMetrics 1.0 requires integer histogram counts, so one
/// such group would make the whole page unparsable to a strict parser) never reach `/metrics`
/// (docs/METRICS.md, "The corrected families").
///
/// # Errors
/// [`WithheldReason::InconsistentInputs`] when a number is negative, infinite or NaN, or a count
/// that must be an integer is not.
pub(crate) fn servable(
    value: DerivedValue,
    fractional_buckets: bool,
) -> Result<DerivedValue, WithheldReason> {
    let counts = fractional_buckets || value.has_integer_counts();
    if value.is_finite() && value.is_non_negative() && counts {
        Ok(value)
    } else {
        Err(WithheldReason::InconsistentInputs)
    }
}

/// Every rule, in exposition order. A family's [`crate::Family`] is its index here.
/// Adding a family is one file under `crates/engine/src/rules/` and one line here, and one entry in
/// the tools' presentation table (`docs/ENGINE.md`, "Adding a family").
pub(crate) const REGISTRY: &[Spec] = &[
    canonical_tpot::SPEC,
    token_weighted_itl::SPEC,
    acceptance_corrected_itl::SPEC,
    iteration_tokens_local_compute::SPEC,
    tokens_per_output::SPEC,
    slo_counters::SPEC,
];

/// Number of corrected families: the length of per-family arrays.
pub const FAMILIES: usize = REGISTRY.len();

// A family index fits in the `u8` of [`crate::Family`] and a bit of a group's `u32` reader masks.
const _: () = assert!(
    REGISTRY.len() <= 32,
    "a family index fits a u32 mask (group readers)"
);

#[cfg(test)]
mod tests;
