//! Local-compute iteration tokens (`docs/METRICS.md`, "Local-compute iteration tokens"): the
//! tokens an engine iteration computed here, without prompt tokens from the prefix cache or a KV
//! transfer, which vLLM 0.16–0.22 count in `vllm:iteration_tokens_total`.

use super::{Evaluation, Plan, Spec, Unplanned, need};
use crate::classify::{Input, RoleKey};
use crate::reasons::WithheldReason;
use crate::values::{DerivedValue, FamilyKind};

/// The registry entry.
pub(super) const SPEC: Spec = Spec {
    name: "vllm_corrected_iteration_tokens_local_compute",
    help: "Tokens computed locally per engine iteration: _sum is local-compute prompt tokens plus generated tokens, _count is iterations.",
    kind: FamilyKind::SumCount,
    inputs: &[
        "vllm:prompt_tokens_by_source_total{source=\"local_compute\"}",
        "vllm:generation_tokens_total",
        "vllm:iteration_tokens_total_count",
    ],
    // A negative or non-finite value is withheld as for every family (`rules::servable`).
    withholds: &[WithheldReason::InconsistentInputs],
    plan,
    evaluation: Evaluation::Frame(evaluate),
    fractional_buckets: false,
    degrades: None,
};

/// Plan: scalars `[prompt tokens {source="local_compute"}, generation tokens, iterations]`.
fn plan(learned: &[(RoleKey, usize)], _: &super::PlanContext<'_>) -> Result<Plan, Unplanned> {
    Ok(Plan {
        hist: None,
        scalars: vec![
            need(learned, Input::LocalCompute)?,
            need(learned, Input::GenTotal)?,
            need(learned, Input::IterCount)?,
        ],
        series: Vec::new(),
        layout: None,
    })
}

/// `local_compute + generation_tokens` over iterations.
fn evaluate(plan: &Plan, values: &[f64]) -> Result<DerivedValue, WithheldReason> {
    let v = |i: usize| values[plan.scalars[i]];
    Ok(DerivedValue::SumCount {
        sum: v(0) + v(1),
        count: v(2),
    })
}
