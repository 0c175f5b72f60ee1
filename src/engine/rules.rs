//! The four correction rules (docs/METRICS.md, "The corrected families"), as pure functions of frames.
//!
//! A [`Plan`] says which of a group's roles a family reads, decided from the roles the group has
//! learned. A frame is usable by a family when it holds a value for every role of the plan.

use super::classify::{Input, Part, RoleKey};
use super::{DerivedValue, Family, WithheldReason};

/// A histogram's roles: `(le, role)` ascending with the `+Inf` bucket last, plus `_sum` and `_count`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HistRoles {
    /// `(upper bound, role index)`, ascending; the last bound is `+Inf`.
    pub buckets: Vec<(f64, usize)>,
    /// Role index of `_sum`.
    pub sum: usize,
    /// Role index of `_count`.
    pub count: usize,
}

/// Which roles a family reads for one group.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Plan {
    /// Canonical TPOT: the request TPOT histogram and `generation_tokens_bucket{le="1"}`.
    CanonicalTpot { tpot: HistRoles, gen_le1: usize },
    /// Token-weighted ITL: ITL `_sum`, generation tokens, TTFT `_count`.
    TokenWeightedItl { itl_sum: usize, gen_total: usize, ttft_count: usize },
    /// Acceptance-corrected ITL: the ITL histogram and, with spec decoding, accepted tokens.
    AcceptanceCorrectedItl { itl: HistRoles, accepted: Option<usize> },
    /// Local-compute iteration tokens.
    IterationTokensLocalCompute { local: usize, gen_total: usize, iter_count: usize },
}

impl Plan {
    /// Every role index the plan reads.
    pub fn roles(&self) -> Vec<usize> {
        match self {
            Plan::CanonicalTpot { tpot, gen_le1 } => hist_roles(tpot).chain([*gen_le1]).collect(),
            Plan::TokenWeightedItl { itl_sum, gen_total, ttft_count } => vec![*itl_sum, *gen_total, *ttft_count],
            Plan::AcceptanceCorrectedItl { itl, accepted } => hist_roles(itl).chain(*accepted).collect(),
            Plan::IterationTokensLocalCompute { local, gen_total, iter_count } => vec![*local, *gen_total, *iter_count],
        }
    }
}

fn hist_roles(h: &HistRoles) -> impl Iterator<Item = usize> + '_ {
    h.buckets.iter().map(|(_, r)| *r).chain([h.sum, h.count])
}

/// Finds the learned role of `input` (non-bucket inputs).
fn find(learned: &[(RoleKey, usize)], input: Input) -> Option<usize> {
    learned.iter().find(|(k, _)| k.input == input).map(|(_, r)| *r)
}

/// The histogram roles of `make(part)`, or `None` when `_sum`, `_count` or the `+Inf` bucket is missing.
fn hist(learned: &[(RoleKey, usize)], make: fn(Part) -> Input) -> Option<HistRoles> {
    let mut buckets: Vec<(f64, usize)> =
        learned.iter().filter(|(k, _)| k.input == make(Part::Bucket)).map(|(k, r)| (k.bound(), *r)).collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    if buckets.last().map(|(le, _)| *le) != Some(f64::INFINITY) {
        return None;
    }
    Some(HistRoles { buckets, sum: find(learned, make(Part::Sum))?, count: find(learned, make(Part::Count))? })
}

/// The ITL histogram of a group: `inter_token_latency_seconds` when any of its series is learned, else
/// the old name `time_per_output_token_seconds` (vLLM ≤ 0.14). Never both.
fn itl_input(learned: &[(RoleKey, usize)]) -> fn(Part) -> Input {
    if learned.iter().any(|(k, _)| matches!(k.input, Input::Itl(_))) { Input::Itl } else { Input::OldItl }
}

/// Decides the plan of `family` from the group's learned (non-stale) roles.
///
/// # Errors
/// [`WithheldReason::MissingInput`] when a required series was never seen, and
/// [`WithheldReason::NoLeOneBound`] when the token histogram exists without a `le="1"` bucket.
pub(crate) fn plan(family: Family, learned: &[(RoleKey, usize)]) -> Result<Plan, WithheldReason> {
    use WithheldReason::MissingInput;
    match family {
        Family::CanonicalTpot => {
            let tpot = hist(learned, Input::Tpot).ok_or(MissingInput)?;
            let gen_le1 = match find(learned, Input::GenLe1) {
                Some(r) => r,
                None if find(learned, Input::GenCount).is_some() => return Err(WithheldReason::NoLeOneBound),
                None => return Err(MissingInput),
            };
            Ok(Plan::CanonicalTpot { tpot, gen_le1 })
        }
        Family::TokenWeightedItl => Ok(Plan::TokenWeightedItl {
            itl_sum: find(learned, itl_input(learned)(Part::Sum)).ok_or(MissingInput)?,
            gen_total: find(learned, Input::GenTotal).ok_or(MissingInput)?,
            ttft_count: find(learned, Input::TtftCount).ok_or(MissingInput)?,
        }),
        Family::AcceptanceCorrectedItl => Ok(Plan::AcceptanceCorrectedItl {
            itl: hist(learned, itl_input(learned)).ok_or(MissingInput)?,
            accepted: find(learned, Input::Accepted),
        }),
        Family::IterationTokensLocalCompute => Ok(Plan::IterationTokensLocalCompute {
            local: find(learned, Input::LocalCompute).ok_or(MissingInput)?,
            gen_total: find(learned, Input::GenTotal).ok_or(MissingInput)?,
            iter_count: find(learned, Input::IterCount).ok_or(MissingInput)?,
        }),
    }
}

/// Evaluates a stateless family on one complete frame (`values[role]`, cumulative).
///
/// Canonical TPOT (§4.1): every bucket and `_count` minus `gen_le1`, `_sum` unchanged. Token-weighted
/// ITL (§4.2): `Σ ITL` over `generation_tokens − TTFT count`. Local-compute iteration tokens (§4.4):
/// `local_compute + generation_tokens` over iterations. The acceptance-corrected family's buckets are
/// stateful: see [`acceptance_interval`].
///
/// # Errors
/// [`WithheldReason::InconsistentInputs`] when a corrected count would be negative.
pub(crate) fn evaluate_stateless(plan: &Plan, values: &[f64]) -> Result<DerivedValue, WithheldReason> {
    let v = |r: usize| values[r];
    match plan {
        Plan::CanonicalTpot { tpot, gen_le1 } => {
            let short = v(*gen_le1);
            let count = v(tpot.count) - short;
            let buckets: Vec<(f64, f64)> = tpot.buckets.iter().map(|(le, r)| (*le, v(*r) - short)).collect();
            // A `+Inf` bucket that is not the `_count` (never from vLLM; found by the rw2 fuzz target)
            // would make an invalid histogram: withhold rather than expose it.
            let inf_is_count = buckets.last().is_some_and(|(_, c)| *c == count);
            if count < 0.0 || !inf_is_count || buckets.iter().any(|(_, c)| *c < 0.0) {
                return Err(WithheldReason::InconsistentInputs);
            }
            Ok(DerivedValue::Histogram { buckets, sum: v(tpot.sum), count })
        }
        Plan::TokenWeightedItl { itl_sum, gen_total, ttft_count } => {
            let count = v(*gen_total) - v(*ttft_count);
            if count < 0.0 {
                return Err(WithheldReason::InconsistentInputs);
            }
            Ok(DerivedValue::SumCount { sum: v(*itl_sum), count })
        }
        Plan::IterationTokensLocalCompute { local, gen_total, iter_count } => {
            Ok(DerivedValue::SumCount { sum: v(*local) + v(*gen_total), count: v(*iter_count) })
        }
        Plan::AcceptanceCorrectedItl { .. } => unreachable!("acceptance-corrected ITL is stateful"),
    }
}

/// Cumulative raw inputs of the acceptance-corrected family at one frame.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ItlPoint {
    /// Raw cumulative ITL bucket counts at the finite bounds, ascending (same order as the plan).
    pub finite: Vec<f64>,
    /// ITL `_count` (non-first outputs).
    pub count: f64,
    /// ITL `_sum`, seconds.
    pub sum: f64,
    /// Accepted draft tokens (0 without spec decoding).
    pub accepted: f64,
}

impl ItlPoint {
    /// Reads the point from a complete frame.
    pub fn read(itl: &HistRoles, accepted: Option<usize>, values: &[f64]) -> ItlPoint {
        let finite = itl.buckets[..itl.buckets.len() - 1].iter().map(|(_, r)| values[*r]).collect();
        ItlPoint { finite, count: values[itl.count], sum: values[itl.sum], accepted: accepted.map_or(0.0, |r| values[r]) }
    }

    /// True when any cumulative input decreased from `prev`: a counter reset (vLLM restarted).
    pub fn is_reset_from(&self, prev: &ItlPoint) -> bool {
        self.count < prev.count
            || self.sum < prev.sum
            || self.accepted < prev.accepted
            || self.finite.len() != prev.finite.len()
            || self.finite.iter().zip(&prev.finite).any(|(c, p)| c < p)
    }
}

/// Adds one interval's estimated per-token buckets to `acc` (finite bounds, then `+Inf` last).
///
/// Between `prev` (or zero) and `cur`: ΔN non-first outputs carried ΔN + ΔA tokens, so each output holds
/// w = (ΔN + ΔA)/ΔN tokens on average. An output of duration x becomes w tokens of x/w each: the
/// per-token cumulative count at bound B is w·F(B·w), where F interpolates the raw cumulative bucket
/// deltas linearly between bounds (from 0 below the first bound, flat past the last finite bound). The
/// `+Inf` bucket gains ΔN + ΔA, so it always equals the exact `_count`. Without spec decoding w = 1 and
/// the result is the raw ITL histogram exactly.
pub(crate) fn acceptance_interval(bounds: &[f64], prev: Option<&ItlPoint>, cur: &ItlPoint, acc: &mut [f64]) {
    let zero = |i: usize| prev.map_or(0.0, |p| p.finite[i]);
    let dn = cur.count - prev.map_or(0.0, |p| p.count);
    let da = cur.accepted - prev.map_or(0.0, |p| p.accepted);
    let inf = acc.len() - 1;
    acc[inf] += dn + da;
    if dn <= 0.0 {
        return;
    }
    let w = (dn + da) / dn;
    let delta: Vec<f64> = (0..bounds.len()).map(|i| cur.finite[i] - zero(i)).collect();
    for (j, bound) in bounds.iter().enumerate() {
        acc[j] += w * interpolate(bounds, &delta, bound * w);
    }
}

/// Linear interpolation of a cumulative count at value `v` over finite `bounds` (lower edge 0).
fn interpolate(bounds: &[f64], cumulative: &[f64], v: f64) -> f64 {
    let mut lower = (0.0, 0.0);
    for (b, c) in bounds.iter().zip(cumulative) {
        if v <= *b {
            if *b == lower.0 {
                return *c;
            }
            return lower.1 + (c - lower.1) * (v - lower.0) / (b - lower.0);
        }
        lower = (*b, *c);
    }
    lower.1
}

#[cfg(test)]
mod tests;
