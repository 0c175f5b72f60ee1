//! The acceptance-corrected family's arithmetic (`docs/METRICS.md`, "Acceptance-corrected ITL"):
//! the raw point a frame holds, the state committed between frames, and how one interval's
//! per-output durations become per-token bucket counts.

/// The acceptance-corrected buckets' committed state: everything up to one frame. Also what a
/// group removed by staleness leaves behind, so that the same group, back after a failed scrape,
/// continues its buckets instead of re-seeding them, and what `--storage.path` stores.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Committed {
    /// Timestamp (ms) of the newest frame the state includes.
    pub(crate) ts: Option<i64>,
    /// The raw cumulative inputs at that frame.
    pub(crate) point: Option<ItlPoint>,
    /// The finite ITL `le` bounds `acc` belongs to, ascending.
    pub(crate) bounds: Vec<f64>,
    /// Accumulated buckets (finite bounds then `+Inf`) since the last counter reset.
    pub(crate) acc: Vec<f64>,
}

impl Committed {
    /// True when no accumulated bucket or raw input is negative (every one counts; checked on a
    /// restored state).
    pub(crate) fn is_non_negative(&self) -> bool {
        let point = self.point.as_ref().is_none_or(|p| {
            [p.count, p.sum, p.generated, p.first_outputs]
                .iter()
                .chain(&p.finite)
                .chain(&p.per_pos)
                .all(|v| *v >= 0.0)
        });
        point && self.acc.iter().all(|v| *v >= 0.0)
    }

    /// Heap bytes held (its vectors), for the engine's memory accounting.
    pub(crate) fn heap_bytes(&self) -> usize {
        let point = self
            .point
            .as_ref()
            .map_or(0, |p| (p.finite.capacity() + p.per_pos.capacity()) * 8);
        (self.bounds.capacity() + self.acc.capacity()) * 8 + point
    }

    /// True when every number is finite (JSON, the storage format, has no other numbers).
    pub(crate) fn is_finite(&self) -> bool {
        let point = self.point.as_ref().is_none_or(|p| {
            [p.count, p.sum, p.generated, p.first_outputs]
                .iter()
                .chain(&p.finite)
                .chain(&p.per_pos)
                .all(|v| v.is_finite())
        });
        point && self.acc.iter().chain(&self.bounds).all(|v| v.is_finite())
    }

    /// True when the shapes agree (one bucket per finite bound plus `+Inf`, a point with one count
    /// per bound), as a state this engine wrote does; a restored state is checked with it.
    pub(crate) fn is_consistent(&self) -> bool {
        self.acc.len() == self.bounds.len() + 1
            && self
                .point
                .as_ref()
                .is_none_or(|p| p.finite.len() == self.bounds.len())
    }

    /// Adds the interval from the state's point to `point` (at `ts`). A point that decreased
    /// from the previous one restarts the buckets from 0 (a counter reset: returns true); an
    /// invalid point ([`ItlPoint::is_valid`]) is skipped and leaves the state as it was.
    pub(crate) fn advance(&mut self, point: ItlPoint, ts: i64) -> bool {
        if !point.is_valid() {
            return false;
        }
        let reset = self.point.as_ref().is_some_and(|p| point.is_reset_from(p));
        if reset {
            self.acc.iter_mut().for_each(|a| *a = 0.0);
            self.point = None;
        }
        acceptance_interval(&self.bounds, self.point.as_ref(), &point, &mut self.acc);
        self.point = Some(point);
        self.ts = Some(ts);
        reset
    }
}

/// Cumulative raw inputs of the acceptance-corrected family at one frame.
///
/// Plain fields only (floats and vectors of floats), so that the committed state can be stored
/// (`--storage.path`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct ItlPoint {
    /// Raw cumulative ITL bucket counts at the finite bounds, ascending (same order as the plan).
    pub(crate) finite: Vec<f64>,
    /// ITL `_count` (non-first outputs).
    pub count: f64,
    /// ITL `_sum`, seconds.
    pub(crate) sum: f64,
    /// `vllm:generation_tokens_total` (every emitted token, first outputs included).
    pub(crate) generated: f64,
    /// `vllm:time_to_first_token_seconds_count` (first outputs).
    pub(crate) first_outputs: f64,
    /// Accepted drafts per position (position 0 first): drafts whose first i + 1 tokens were
    /// accepted. Empty without speculative decoding.
    pub(crate) per_pos: Vec<f64>,
}

impl ItlPoint {
    /// Tokens emitted after each request's first output: `generation_tokens − TTFT count`, the
    /// token-weighted family's count (`docs/METRICS.md`, "Accepted drafts are counted before
    /// truncation"); 0
    /// when the TTFT count runs ahead.
    pub(crate) fn tokens(&self) -> f64 {
        (self.generated - self.first_outputs).max(0.0)
    }

    /// False when a value is negative, infinite or NaN: no counter vLLM exposes can hold it, and
    /// the interval arithmetic would turn it into NaN buckets. Such a frame is not used.
    pub(crate) fn is_valid(&self) -> bool {
        let ok = |v: &f64| v.is_finite() && *v >= 0.0;
        [self.count, self.sum, self.generated, self.first_outputs]
            .iter()
            .all(ok)
            && self.finite.iter().all(ok)
            && self.per_pos.iter().all(ok)
    }

    /// True when any cumulative input decreased from `prev`: a counter reset (vLLM restarted).
    /// `generation_tokens − TTFT count` falling while neither input fell is not a reset.
    pub(crate) fn is_reset_from(&self, prev: &ItlPoint) -> bool {
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
        // Each class reads F at B·j for ascending B: its search resumes where the last one ended.
        let mut from = vec![0_usize; classes.len()];
        for (b, bound) in bounds.iter().enumerate() {
            let below: f64 = classes
                .iter()
                .zip(&mut from)
                .map(|((j, n), from)| n * j * interpolate_from(bounds, &delta, bound * j, from))
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
#[cfg(test)]
pub(crate) fn interpolate(bounds: &[f64], cumulative: &[f64], v: f64) -> f64 {
    interpolate_from(bounds, cumulative, v, &mut 0)
}

/// [`interpolate`], searching `bounds` from index `from` on, and leaving in `from` the index
/// where this search ended. Every bound below `from` must be below `v`: true when the calls on
/// one `from` come with non-decreasing `v`, which then give what [`interpolate`] gives, bit for
/// bit (the same segment, the same arithmetic), in one pass over `bounds` in all.
pub(crate) fn interpolate_from(
    bounds: &[f64],
    cumulative: &[f64],
    v: f64,
    from: &mut usize,
) -> f64 {
    let start = (*from).min(bounds.len()).min(cumulative.len());
    let mut lower = match start {
        0 => (0.0, 0.0),
        i => (bounds[i - 1], cumulative[i - 1]),
    };
    for (i, (b, c)) in bounds.iter().zip(cumulative).enumerate().skip(start) {
        if v <= *b {
            *from = i;
            if *b == lower.0 {
                return *c;
            }
            return lower.1 + (c - lower.1) * (v - lower.0) / (b - lower.0);
        }
        lower = (*b, *c);
    }
    *from = bounds.len().min(cumulative.len());
    lower.1
}
