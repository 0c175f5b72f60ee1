//! Tokens per streamed output (`docs/METRICS.md`, "Tokens per output"): the tokens emitted after
//! each request's first output over the outputs that carried them. `rate(_sum) / rate(_count)` is
//! the acceptance length as the client sees it, and exactly the factor by which the raw ITL mean
//! overstates the time per token.

use super::{Evaluation, Plan, Spec, Unplanned, itl_input, need};
use crate::classify::{Input, Part, RoleKey};
use crate::reasons::WithheldReason;
use crate::values::{DerivedValue, FamilyKind};

/// The registry entry.
pub(super) const SPEC: Spec = Spec {
    name: "vllm_corrected_tokens_per_output",
    help: "Tokens per streamed output after each request's first: _sum is tokens generated after each request's first output, _count is those outputs; the ratio is the acceptance length as the client sees it.",
    kind: FamilyKind::SumCount,
    inputs: &[
        "vllm:generation_tokens_total",
        "vllm:time_to_first_token_seconds_count",
        "vllm:inter_token_latency_seconds_count",
    ],
    withholds: &[WithheldReason::InconsistentInputs],
    plan,
    evaluation: Evaluation::Frame(evaluate),
    fractional_buckets: false,
    degrades: None,
};

/// Plan: scalars `[generation tokens, TTFT _count, ITL _count]` (the ITL of the new name when
/// the group has it, else the old one).
fn plan(learned: &[(RoleKey, usize)], _: &super::PlanContext<'_>) -> Result<Plan, Unplanned> {
    let itl_count = need(learned, itl_input(learned)(Part::Count))?;
    Ok(Plan {
        hist: None,
        scalars: vec![
            need(learned, Input::GenTotal)?,
            need(learned, Input::TtftCount)?,
            itl_count,
        ],
        series: Vec::new(),
        layout: None,
    })
}

/// `generation_tokens − TTFT count` over the ITL count.
fn evaluate(plan: &Plan, values: &[f64]) -> Result<DerivedValue, WithheldReason> {
    let v = |i: usize| values[plan.scalars[i]];
    let sum = v(0) - v(1);
    if sum < 0.0 {
        return Err(WithheldReason::InconsistentInputs);
    }
    Ok(DerivedValue::SumCount { sum, count: v(2) })
}

#[cfg(test)]
mod tests;
