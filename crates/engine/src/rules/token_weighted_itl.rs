//! Token-weighted ITL (`docs/METRICS.md`, "Token-weighted ITL"): Σ ITL over the tokens emitted
//! after each request's first output.

use super::{
    ITL_COUNT, ITL_SUM, Measured, Plan, RawMean, Registered, Rule, Spec, Unit, find, itl_input,
    need, sum_count,
};
use crate::classify::{Input, Part, RoleKey};
use crate::values::{DerivedValue, FamilyKind, WithheldReason};

/// The registry entry.
pub(super) const RULE: Registered = Registered {
    spec: Spec {
        name: "vllm_corrected_token_weighted_itl_seconds",
        help: "Inter-token latency weighted by tokens: _sum is seconds of decode, _count is tokens generated after each request's first.",
        kind: FamilyKind::SumCount,
        inputs: &[
            "vllm:inter_token_latency_seconds_sum",
            "vllm:generation_tokens_total",
            "vllm:time_to_first_token_seconds_count",
        ],
        words: "token-weighted ITL",
        column: "ITL token-weighted ms",
        json_key: "token_weighted_itl_seconds",
        demo: (
            "ITL per token, token-weighted",
            "itl_token_weighted_seconds",
        ),
        demo_p99: None,
        unit: Unit::Seconds,
        raw: Some(RawMean {
            num: ITL_SUM,
            den: ITL_COUNT,
            offset: 0.0,
        }),
        truth: (Measured::ItlSum, Measured::TokensAfterFirst),
        promql: SUM_AND_COUNT_PROMQL,
        promql_note: "exact",
    },
    rule: &TokenWeightedItl,
    stateful: None,
};

/// Plan: scalars `[ITL _sum, generation tokens, TTFT _count]`.
struct TokenWeightedItl;

impl Rule for TokenWeightedItl {
    fn plan(&self, learned: &[(RoleKey, usize)]) -> Result<Plan, WithheldReason> {
        let itl_sum =
            find(learned, itl_input(learned)(Part::Sum)).ok_or(WithheldReason::MissingInput)?;
        Ok(Plan {
            hist: None,
            scalars: vec![
                itl_sum,
                need(learned, Input::GenTotal)?,
                need(learned, Input::TtftCount)?,
            ],
            series: Vec::new(),
        })
    }

    /// `Σ ITL` over `generation_tokens − TTFT count`.
    fn evaluate(&self, plan: &Plan, values: &[f64]) -> Result<DerivedValue, WithheldReason> {
        let v = |i: usize| values[plan.scalars[i]];
        sum_count(v(0), v(1) - v(2))
    }
}

/// The PromQL of the ITL `_sum` and of the tokens emitted after each request's first: the exact sum
/// and count of this family, shared by the acceptance-corrected ITL (the same sum and count).
pub(super) const SUM_AND_COUNT_PROMQL: &[(&str, &str)] = &[
    (
        "_sum",
        "(vllm:inter_token_latency_seconds_sum or vllm:time_per_output_token_seconds_sum)\n  and vllm:generation_tokens_total\n  and vllm:time_to_first_token_seconds_count",
    ),
    (
        "_count",
        "(vllm:generation_tokens_total - vllm:time_to_first_token_seconds_count)\n  and (vllm:inter_token_latency_seconds_sum or vllm:time_per_output_token_seconds_sum)",
    ),
];
