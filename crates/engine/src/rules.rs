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

/// The roles of the acceptance-corrected family: the ITL histogram, generation tokens and TTFT
/// `_count` (the tokens emitted after each first output), and with speculative decoding the
/// accepted drafts per position, which shape the buckets (not the count).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AcceptanceRoles {
    /// The ITL histogram (new name, else the old one).
    pub itl: HistRoles,
    /// `vllm:generation_tokens_total`.
    pub gen_total: usize,
    /// `vllm:time_to_first_token_seconds_count`.
    pub ttft_count: usize,
    /// `vllm:spec_decode_num_accepted_tokens_per_pos_total{position="0"}`, `"1"`, …: positions 0 to
    /// k − 1 in order, or empty (no speculative decoding, or a position missing).
    pub per_pos: Vec<usize>,
}

/// Which roles a family reads for one group.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Plan {
    /// Canonical TPOT: the request TPOT histogram and `generation_tokens_bucket{le="1"}`.
    CanonicalTpot { tpot: HistRoles, gen_le1: usize },
    /// Token-weighted ITL: ITL `_sum`, generation tokens, TTFT `_count`.
    TokenWeightedItl {
        itl_sum: usize,
        gen_total: usize,
        ttft_count: usize,
    },
    /// Acceptance-corrected ITL: see [`AcceptanceRoles`].
    AcceptanceCorrectedItl(AcceptanceRoles),
    /// Local-compute iteration tokens.
    IterationTokensLocalCompute {
        local: usize,
        gen_total: usize,
        iter_count: usize,
    },
}

impl Plan {
    /// Every role index the plan reads.
    pub fn roles(&self) -> Vec<usize> {
        match self {
            Plan::CanonicalTpot { tpot, gen_le1 } => hist_roles(tpot).chain([*gen_le1]).collect(),
            Plan::TokenWeightedItl {
                itl_sum,
                gen_total,
                ttft_count,
            } => vec![*itl_sum, *gen_total, *ttft_count],
            Plan::AcceptanceCorrectedItl(a) => hist_roles(&a.itl)
                .chain([a.gen_total, a.ttft_count])
                .chain(a.per_pos.iter().copied())
                .collect(),
            Plan::IterationTokensLocalCompute {
                local,
                gen_total,
                iter_count,
            } => vec![*local, *gen_total, *iter_count],
        }
    }
}

fn hist_roles(h: &HistRoles) -> impl Iterator<Item = usize> + '_ {
    h.buckets.iter().map(|(_, r)| *r).chain([h.sum, h.count])
}

/// Finds the learned role of `input` (non-bucket inputs).
fn find(learned: &[(RoleKey, usize)], input: Input) -> Option<usize> {
    learned
        .iter()
        .find(|(k, _)| k.input == input)
        .map(|(_, r)| *r)
}

/// The histogram roles of `make(part)`, or `None` when `_sum`, `_count` or the `+Inf` bucket is missing.
fn hist(learned: &[(RoleKey, usize)], make: fn(Part) -> Input) -> Option<HistRoles> {
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
fn itl_input(learned: &[(RoleKey, usize)]) -> fn(Part) -> Input {
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
fn per_pos(learned: &[(RoleKey, usize)]) -> Vec<usize> {
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
                None if find(learned, Input::GenCount).is_some() => {
                    return Err(WithheldReason::NoLeOneBound);
                }
                None => return Err(MissingInput),
            };
            Ok(Plan::CanonicalTpot { tpot, gen_le1 })
        }
        Family::TokenWeightedItl => Ok(Plan::TokenWeightedItl {
            itl_sum: find(learned, itl_input(learned)(Part::Sum)).ok_or(MissingInput)?,
            gen_total: find(learned, Input::GenTotal).ok_or(MissingInput)?,
            ttft_count: find(learned, Input::TtftCount).ok_or(MissingInput)?,
        }),
        Family::AcceptanceCorrectedItl => Ok(Plan::AcceptanceCorrectedItl(AcceptanceRoles {
            itl: hist(learned, itl_input(learned)).ok_or(MissingInput)?,
            gen_total: find(learned, Input::GenTotal).ok_or(MissingInput)?,
            ttft_count: find(learned, Input::TtftCount).ok_or(MissingInput)?,
            per_pos: per_pos(learned),
        })),
        Family::IterationTokensLocalCompute => Ok(Plan::IterationTokensLocalCompute {
            local: find(learned, Input::LocalCompute).ok_or(MissingInput)?,
            gen_total: find(learned, Input::GenTotal).ok_or(MissingInput)?,
            iter_count: find(learned, Input::IterCount).ok_or(MissingInput)?,
        }),
    }
}

/// Evaluates a stateless family on one complete frame (`values[role]`, cumulative).
///
/// Canonical TPOT: every bucket and `_count` minus `gen_le1`, `_sum` unchanged. Token-weighted ITL:
/// `Σ ITL` over `generation_tokens − TTFT count`. Local-compute iteration tokens:
/// `local_compute + generation_tokens` over iterations (each in `docs/METRICS.md`, "The corrected
/// families", under its own heading). The acceptance-corrected family's buckets are stateful: see
/// [`acceptance_interval`].
///
/// # Errors
/// [`WithheldReason::InconsistentInputs`] when a corrected count would be negative.
pub(crate) fn evaluate_stateless(
    plan: &Plan,
    values: &[f64],
) -> Result<DerivedValue, WithheldReason> {
    let v = |r: usize| values[r];
    match plan {
        Plan::CanonicalTpot { tpot, gen_le1 } => {
            let short = v(*gen_le1);
            let count = v(tpot.count) - short;
            let buckets: Vec<(f64, f64)> = tpot
                .buckets
                .iter()
                .map(|(le, r)| (*le, v(*r) - short))
                .collect();
            // A `+Inf` bucket that is not the `_count` (never from vLLM; found by the rw2 fuzz target)
            // would make an invalid histogram: withhold rather than expose it.
            let inf_is_count = buckets.last().is_some_and(|(_, c)| *c == count);
            if count < 0.0 || !inf_is_count || buckets.iter().any(|(_, c)| *c < 0.0) {
                return Err(WithheldReason::InconsistentInputs);
            }
            Ok(DerivedValue::Histogram {
                buckets,
                sum: v(tpot.sum),
                count,
            })
        }
        Plan::TokenWeightedItl {
            itl_sum,
            gen_total,
            ttft_count,
        } => {
            let count = v(*gen_total) - v(*ttft_count);
            if count < 0.0 {
                return Err(WithheldReason::InconsistentInputs);
            }
            Ok(DerivedValue::SumCount {
                sum: v(*itl_sum),
                count,
            })
        }
        Plan::IterationTokensLocalCompute {
            local,
            gen_total,
            iter_count,
        } => Ok(DerivedValue::SumCount {
            sum: v(*local) + v(*gen_total),
            count: v(*iter_count),
        }),
        // Stateful (see `acceptance_interval`): the group never asks for it here. Withheld rather
        // than a panic, should it ever do.
        Plan::AcceptanceCorrectedItl { .. } => Err(WithheldReason::Incomplete),
    }
}

/// Cumulative raw inputs of the acceptance-corrected family at one frame.
///
/// Plain fields only (floats and vectors of floats), so that the committed state can be stored
/// (`--storage.path`, [`super::persist`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct ItlPoint {
    /// Raw cumulative ITL bucket counts at the finite bounds, ascending (same order as the plan).
    pub finite: Vec<f64>,
    /// ITL `_count` (non-first outputs).
    pub count: f64,
    /// ITL `_sum`, seconds.
    pub sum: f64,
    /// `vllm:generation_tokens_total` (every emitted token, first outputs included).
    pub generated: f64,
    /// `vllm:time_to_first_token_seconds_count` (first outputs).
    pub first_outputs: f64,
    /// Accepted drafts per position (position 0 first): drafts whose first i + 1 tokens were
    /// accepted. Empty without speculative decoding.
    pub per_pos: Vec<f64>,
}

impl ItlPoint {
    /// Reads the point from a complete frame.
    pub fn read(roles: &AcceptanceRoles, values: &[f64]) -> ItlPoint {
        let itl = &roles.itl;
        let finite = itl.buckets[..itl.buckets.len() - 1]
            .iter()
            .map(|(_, r)| values[*r])
            .collect();
        ItlPoint {
            finite,
            count: values[itl.count],
            sum: values[itl.sum],
            generated: values[roles.gen_total],
            first_outputs: values[roles.ttft_count],
            per_pos: roles.per_pos.iter().map(|r| values[*r]).collect(),
        }
    }

    /// Tokens emitted after each request's first output: `generation_tokens − TTFT count`, the
    /// token-weighted family's count (`docs/METRICS.md`, "Accepted drafts are counted before
    /// truncation"); 0
    /// when the TTFT count runs ahead.
    pub fn tokens(&self) -> f64 {
        (self.generated - self.first_outputs).max(0.0)
    }

    /// False when a value is negative, infinite or NaN: no counter vLLM exposes can hold it, and
    /// the interval arithmetic would turn it into NaN buckets. Such a frame is not used.
    pub fn is_valid(&self) -> bool {
        let ok = |v: &f64| v.is_finite() && *v >= 0.0;
        [self.count, self.sum, self.generated, self.first_outputs]
            .iter()
            .all(ok)
            && self.finite.iter().all(ok)
            && self.per_pos.iter().all(ok)
    }

    /// True when any cumulative input decreased from `prev`: a counter reset (vLLM restarted).
    /// `generation_tokens − TTFT count` falling while neither input fell is not a reset.
    pub fn is_reset_from(&self, prev: &ItlPoint) -> bool {
        let fell = |cur: &[f64], old: &[f64]| cur.iter().zip(old).any(|(c, p)| c < p);
        self.count < prev.count
            || self.sum < prev.sum
            || self.generated < prev.generated
            || self.first_outputs < prev.first_outputs
            || self.finite.len() != prev.finite.len()
            || fell(&self.finite, &prev.finite)
            || fell(&self.per_pos, &prev.per_pos)
    }
}

/// How an interval's per-output durations become per-token durations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Estimator {
    /// Every output of the interval holds the interval's mean tokens per output. Measured against
    /// [`Estimator::AcceptanceMix`] only (`distribution_tests`); the engine falls back to the same
    /// arithmetic without positions.
    #[cfg_attr(not(test), allow(dead_code))]
    MeanWeight,
    /// Outputs hold 1 + a tokens in the proportions the accepted-per-position counters give
    /// (n outputs with at least a accepted = Δ per_pos[a − 1]); the mean weight without them.
    AcceptanceMix,
}

/// The estimator the engine uses (`docs/ACCURACY.md`, "The per-token distribution").
pub(crate) const ESTIMATOR: Estimator = Estimator::AcceptanceMix;

/// Adds one interval's estimated per-token buckets to `acc` (finite bounds, then `+Inf` last),
/// with [`ESTIMATOR`].
pub(crate) fn acceptance_interval(
    bounds: &[f64],
    prev: Option<&ItlPoint>,
    cur: &ItlPoint,
    acc: &mut [f64],
) {
    acceptance_interval_with(ESTIMATOR, bounds, prev, cur, acc);
}

/// Adds one interval's estimated per-token buckets to `acc` (finite bounds, then `+Inf` last).
///
/// `acc[+Inf]` is the family's exact `_count`: the highest `generation_tokens − TTFT count` seen
/// since the last counter reset (a running maximum, so it never falls; integers in `f64` add
/// exactly). The interval's token mass T is what that maximum gains (0 when the difference fell or
/// held still), over ΔN = Δ ITL `_count` outputs, with F the raw cumulative bucket deltas
/// interpolated linearly between bounds (from 0 below the first bound, flat past the last finite
/// bound). An output of duration x holding j tokens stands for j tokens of x/j each, so the
/// outputs of a class (j, n_j) put n_j·j·F(B·j)/ΔN tokens at or below bound B. The classes:
///
/// * [`Estimator::MeanWeight`]: one class, j = w = max(T/ΔN, 1), so bound B gets (T/ΔN)·F(B·w);
/// * [`Estimator::AcceptanceMix`]: j = 1 + a for a = 0..k, with n_k = ΔP_{k−1}, n_a = ΔP_{a−1} −
///   ΔP_a and n_0 = ΔN − ΔP_0 from the accepted-per-position deltas ΔP (made non-increasing and at
///   most ΔN); the mean weight when the point has no positions or they changed, or when T ≤ ΔN
///   (at most one token per output: nothing for the positions to describe).
///
/// The classes count drafts accepted before a request's last output was cut at its last token, so
/// they are scaled to hold exactly T tokens. Without speculative decoding j = 1, T = ΔN and the
/// result is the raw ITL histogram.
///
/// Every interval's finite parts are clamped into `[previous bound's part, T]`, so each part is
/// monotone and at most T; rounding to nearest is monotone, so the sums stay monotone across bounds
/// and never exceed `+Inf`, and a final clamp makes that hold even for non-integer inputs. No part
/// is negative, so no bucket ever decreases between intervals. Bad intervals: ΔN ≤ 0 (tokens but
/// no ITL output) adds T to `+Inf` only; a raw finite bucket above the count or below the previous
/// bound is clamped. `cur` must be [`ItlPoint::is_valid`] and not a reset from `prev`.
pub(crate) fn acceptance_interval_with(
    estimator: Estimator,
    bounds: &[f64],
    prev: Option<&ItlPoint>,
    cur: &ItlPoint,
    acc: &mut [f64],
) {
    let inf = acc.len() - 1;
    let held = acc[inf];
    let tokens = cur.tokens();
    acc[inf] = held.max(tokens);
    let mass = (tokens - held).max(0.0);
    let dn = cur.count - prev.map_or(0.0, |p| p.count);
    if dn > 0.0 && mass > 0.0 {
        let zero = |i: usize| prev.map_or(0.0, |p| p.finite[i]);
        let delta: Vec<f64> = (0..bounds.len()).map(|i| cur.finite[i] - zero(i)).collect();
        // At most one token per output (no spec decoding, or an ITL observed per token as
        // vllm#47382 proposes): the positions cannot describe the outputs.
        let classes = match estimator {
            Estimator::AcceptanceMix if mass > dn => position_classes(dn, prev, cur),
            _ => None,
        }
        .unwrap_or_else(|| vec![((mass / dn).max(1.0), dn)]);
        let in_classes: f64 = classes.iter().map(|(j, n)| j * n).sum();
        let scale = mass / in_classes / dn;
        let mut floor = 0.0_f64;
        for (b, bound) in bounds.iter().enumerate() {
            let below: f64 = classes
                .iter()
                .map(|(j, n)| n * j * interpolate(bounds, &delta, bound * j))
                .sum();
            let part = (scale * below).min(mass).max(floor);
            floor = part;
            acc[b] += part;
        }
    }
    let (mut below, top) = (0.0_f64, acc[inf]);
    for a in &mut acc[..inf] {
        *a = a.min(top).max(below);
        below = *a;
    }
}

/// `(tokens per output, outputs)` classes of one interval from the accepted-per-position deltas,
/// or `None` without positions (or when their number changed since `prev`).
fn position_classes(dn: f64, prev: Option<&ItlPoint>, cur: &ItlPoint) -> Option<Vec<(f64, f64)>> {
    if cur.per_pos.is_empty() || prev.is_some_and(|p| p.per_pos.len() != cur.per_pos.len()) {
        return None;
    }
    // Outputs with at least a + 1 accepted drafts: non-increasing in a, within [0, ΔN].
    let mut at_least = Vec::with_capacity(cur.per_pos.len());
    let mut cap = dn;
    for (i, c) in cur.per_pos.iter().enumerate() {
        let d = (c - prev.map_or(0.0, |p| p.per_pos[i])).clamp(0.0, cap);
        at_least.push(d);
        cap = d;
    }
    let mut classes = Vec::with_capacity(at_least.len() + 1);
    let mut above = dn;
    for (a, n) in at_least.iter().enumerate() {
        classes.push((a as f64 + 1.0, above - n));
        above = *n;
    }
    classes.push((at_least.len() as f64 + 1.0, above));
    Some(classes)
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
