//! Acceptance-corrected ITL (`docs/METRICS.md`, "Acceptance-corrected ITL"): the per-token ITL
//! histogram under speculative decoding. Its `_sum` and `_count` are exact; its buckets are
//! estimated per scrape interval and accumulated, so its value depends on earlier frames: a
//! stateful rule ([`FrameRule`]) whose per-group state is a [`Committed`], and the arithmetic is in
//! [`super::acceptance`].

use super::acceptance::{Committed, ItlPoint};
use super::stateful::{FrameRule, FrameState, StatefulRule};
use super::{Evaluation, HistRoles, Plan, Spec, Unplanned, itl_input, need, need_hist, per_pos};
use crate::classify::{Input, RoleKey};
use crate::reasons::WithheldReason;
use crate::values::{DerivedValue, FamilyKind};

/// The registry entry.
pub(super) const SPEC: Spec = Spec {
    name: "vllm_corrected_acceptance_corrected_itl_seconds",
    help: "Inter-token latency per token under speculative decoding: exact _sum and _count, buckets estimated per scrape interval.",
    kind: FamilyKind::Histogram,
    inputs: &[
        "vllm:inter_token_latency_seconds",
        "vllm:generation_tokens_total",
        "vllm:time_to_first_token_seconds_count",
        "vllm:spec_decode_num_accepted_tokens_per_pos_total",
    ],
    withholds: &[WithheldReason::InconsistentInputs],
    plan,
    evaluation: Evaluation::Stateful(&RULE),
    fractional_buckets: true,
    degrades: Some(degrades),
};

/// The rule's functions, for the registry.
const RULE: StatefulRule = StatefulRule::of::<AcceptanceCorrectedItl>();

/// The acceptance-corrected ITL rule (also driven by the SLO counters for ITL per token).
pub(super) struct AcceptanceCorrectedItl;

/// Served in a degraded mode when the group runs speculative decoding (it sends the drafts or
/// accepted-tokens counter) without a contiguous
/// `vllm:spec_decode_num_accepted_tokens_per_pos_total`: every output of an interval gets the one
/// mean weight (up to 38 % off per docs/ACCURACY.md) instead of the per-position split. Without
/// speculative decoding the mean weight is exact, and nothing is degraded.
fn degrades(plan: &Plan, learned: &[(RoleKey, usize)]) -> Option<Input> {
    let speculative = learned
        .iter()
        .any(|(k, _)| matches!(k.input, Input::Accepted | Input::Drafts));
    (speculative && plan.series.is_empty()).then_some(Input::AcceptedPerPos)
}

/// Plan: the ITL histogram (new name, else the old one); scalars `[generation tokens, TTFT
/// _count]`; series the accepted drafts per position 0..k − 1, or none (no speculative decoding,
/// or a position missing), which shape the buckets, never the count.
pub(super) fn plan(
    learned: &[(RoleKey, usize)],
    _: &super::PlanContext<'_>,
) -> Result<Plan, Unplanned> {
    Ok(Plan {
        hist: Some(need_hist(learned, itl_input(learned))?),
        scalars: vec![
            need(learned, Input::GenTotal)?,
            need(learned, Input::TtftCount)?,
        ],
        series: per_pos(learned),
        layout: None,
    })
}

impl FrameRule for AcceptanceCorrectedItl {
    type State = Committed;

    /// Whether the frame's values can be used at all.
    ///
    /// # Errors
    /// [`WithheldReason::InconsistentInputs`] when a value no counter can hold is there
    /// ([`ItlPoint::is_valid`]); [`WithheldReason::Incomplete`] when the plan has no histogram.
    fn check(plan: &Plan, values: &[f64]) -> Result<(), WithheldReason> {
        let itl = plan.histogram()?;
        if point(plan, itl, values).is_valid() {
            Ok(())
        } else {
            Err(WithheldReason::InconsistentInputs)
        }
    }

    /// True when `state` belongs to the plan's layout: its buckets are the plan's ITL bounds.
    /// Otherwise (the group came back with other ITL bounds, or a bound appeared or went stale) it is
    /// re-seeded with [`seed`] before any frame is added. The committed timestamp goes with a
    /// re-seed: it belonged to the old layout, and kept it would hide every frame at or before it
    /// (issue 13, the panic of a retired group returning with new bounds and an older frame).
    fn fits(plan: &Plan, state: &Committed) -> bool {
        let Some(itl) = plan.hist.as_ref() else {
            return false;
        };
        let bounds = itl.finite_bounds();
        state.acc.len() == itl.buckets.len()
            && state.bounds == bounds
            && state
                .point
                .as_ref()
                .is_none_or(|p| p.finite.len() == bounds.len())
    }

    /// The empty state of the plan's layout: no frame, every bucket 0.
    fn seed(plan: &Plan) -> Committed {
        let itl = plan.hist.as_ref();
        Committed {
            ts: None,
            point: None,
            acc: vec![0.0; itl.map_or(1, |h| h.buckets.len())],
            bounds: itl.map(|h| h.finite_bounds()).unwrap_or_default(),
        }
    }

    /// Adds the frame at `ts` (ms) to `state`. Returns true when an input fell since the state's
    /// frame (a counter reset: the state restarted from this frame).
    fn advance(plan: &Plan, state: &mut Committed, values: &[f64], ts: i64) -> bool {
        let Some(itl) = plan.hist.as_ref() else {
            return false;
        };
        state.advance(point(plan, itl, values), ts)
    }

    /// The family's value from a state that holds at least one frame: buckets from the accumulated
    /// state, `_sum` the newest frame's ITL `_sum`, `_count` the held token count (`+Inf`).
    ///
    /// # Errors
    /// [`WithheldReason::Incomplete`] when the state holds no frame (or the plan no histogram).
    fn output(plan: &Plan, state: &Committed) -> Result<DerivedValue, WithheldReason> {
        let itl = plan.histogram()?;
        let point = state.point.as_ref().ok_or(WithheldReason::Incomplete)?;
        let count = *state.acc.last().ok_or(WithheldReason::Incomplete)?;
        let buckets = itl
            .buckets
            .iter()
            .map(|(le, _)| *le)
            .zip(state.acc.iter().copied())
            .collect();
        Ok(DerivedValue::Histogram {
            buckets,
            sum: point.sum,
            count,
        })
    }
}

impl FrameState for Committed {
    fn ts(&self) -> Option<i64> {
        self.ts
    }

    fn has_frame(&self) -> bool {
        self.point.is_some()
    }

    fn heap_bytes(&self) -> usize {
        Committed::heap_bytes(self)
    }

    fn validate(&self, latest_ms: i64) -> Result<(), &'static str> {
        if !self.is_finite() || !self.is_consistent() {
            return Err("a non-finite number or an inconsistent shape");
        }
        if self.ts.is_some_and(|ts| !(0..=latest_ms).contains(&ts)) {
            return Err("acceptance state time out of range");
        }
        if !self.is_non_negative() {
            return Err("a negative count in the acceptance state");
        }
        Ok(())
    }
}

/// Reads the raw point of a complete frame (ITL histogram; scalars generation tokens, TTFT count;
/// series the accepted drafts per position).
fn point(plan: &Plan, itl: &HistRoles, values: &[f64]) -> ItlPoint {
    let finite = itl.buckets[..itl.buckets.len() - 1]
        .iter()
        .map(|(_, r)| values[*r])
        .collect();
    ItlPoint {
        finite,
        count: values[itl.count],
        sum: values[itl.sum],
        generated: values[plan.scalars[0]],
        first_outputs: values[plan.scalars[1]],
        per_pos: plan.series.iter().map(|r| values[*r]).collect(),
    }
}
