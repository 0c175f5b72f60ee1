//! Canonical TPOT (`docs/METRICS.md`, "Canonical TPOT"): the request TPOT histogram without the
//! requests of at most one output token, which vLLM records as TPOT 0 in every bucket.

use super::{Evaluation, Plan, Spec, Unplanned, find, missing, need_hist};
use crate::classify::{Input, RoleKey};
use crate::reasons::WithheldReason;
use crate::values::{DerivedValue, FamilyKind};

/// The registry entry.
pub(super) const SPEC: Spec = Spec {
    name: "vllm_corrected_request_time_per_output_token_seconds",
    help: "Per-request time per output token in seconds over requests with more than one output token, as vllm bench serve computes it.",
    kind: FamilyKind::Histogram,
    inputs: &[
        "vllm:request_time_per_output_token_seconds",
        "vllm:request_generation_tokens_bucket{le=\"1\"}",
    ],
    withholds: &[
        WithheldReason::NoLeOneBound,
        WithheldReason::InconsistentInputs,
    ],
    plan,
    evaluation: Evaluation::Frame(evaluate),
    fractional_buckets: false,
    degrades: None,
};

/// Plan: the request TPOT histogram; scalars `[generation_tokens_bucket{le="1"}]`.
fn plan(learned: &[(RoleKey, usize)], _: &super::PlanContext<'_>) -> Result<Plan, Unplanned> {
    let tpot = need_hist(learned, Input::Tpot)?;
    let gen_le1 = match find(learned, Input::GenLe1) {
        Some(r) => r,
        None if find(learned, Input::GenCount).is_some() => {
            return Err(WithheldReason::NoLeOneBound.into());
        }
        None => return Err(missing(Input::GenLe1)),
    };
    Ok(Plan {
        hist: Some(tpot),
        scalars: vec![gen_le1],
        series: Vec::new(),
        layout: None,
    })
}

/// Every bucket and `_count` minus `generation_tokens_bucket{le="1"}`, `_sum` unchanged.
fn evaluate(plan: &Plan, values: &[f64]) -> Result<DerivedValue, WithheldReason> {
    let tpot = plan.histogram()?;
    let short = values[plan.scalars[0]];
    let count = values[tpot.count] - short;
    let buckets: Vec<(f64, f64)> = tpot
        .buckets
        .iter()
        .map(|(le, r)| (*le, values[*r] - short))
        .collect();
    // A `+Inf` bucket that is not the `_count` (never from vLLM; found by the rw2 fuzz target)
    // would make an invalid histogram: withhold rather than expose it.
    let inf_is_count = buckets.last().is_some_and(|(_, c)| *c == count);
    if count < 0.0 || !inf_is_count || buckets.iter().any(|(_, c)| *c < 0.0) {
        return Err(WithheldReason::InconsistentInputs);
    }
    Ok(DerivedValue::Histogram {
        buckets,
        sum: values[tpot.sum],
        count,
    })
}
