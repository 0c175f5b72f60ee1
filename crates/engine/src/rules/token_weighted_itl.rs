//! Token-weighted ITL (`docs/METRICS.md`, "Token-weighted ITL"): Σ ITL over the tokens emitted
//! after each request's first output.

use super::{Evaluation, Plan, Spec, Unplanned, itl_input, need, sum_count};
use crate::classify::{Input, Part, RoleKey};
use crate::reasons::WithheldReason;
use crate::values::{DerivedValue, FamilyKind};

/// The registry entry.
pub(super) const SPEC: Spec = Spec {
    name: "vllm_corrected_token_weighted_itl_seconds",
    help: "Inter-token latency weighted by tokens: _sum is seconds of decode, _count is tokens generated after each request's first.",
    kind: FamilyKind::SumCount,
    inputs: &[
        "vllm:inter_token_latency_seconds_sum",
        "vllm:generation_tokens_total",
        "vllm:time_to_first_token_seconds_count",
    ],
    withholds: &[WithheldReason::InconsistentInputs],
    plan,
    evaluation: Evaluation::Frame(evaluate),
    fractional_buckets: false,
    degrades: None,
};

/// Plan: scalars `[ITL _sum, generation tokens, TTFT _count]`.
fn plan(learned: &[(RoleKey, usize)], _: &super::PlanContext<'_>) -> Result<Plan, Unplanned> {
    let itl_sum = need(learned, itl_input(learned)(Part::Sum))?;
    Ok(Plan {
        hist: None,
        scalars: vec![
            itl_sum,
            need(learned, Input::GenTotal)?,
            need(learned, Input::TtftCount)?,
        ],
        series: Vec::new(),
        layout: None,
    })
}

/// `Σ ITL` over `generation_tokens − TTFT count`.
fn evaluate(plan: &Plan, values: &[f64]) -> Result<DerivedValue, WithheldReason> {
    let v = |i: usize| values[plan.scalars[i]];
    sum_count(v(0), v(1) - v(2))
}
