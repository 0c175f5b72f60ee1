//! The goodput bounds of one SLO in one group: how many finished requests met every threshold of
//! the SLO at once, bounded below and above from vLLM's marginal histograms (docs/GOODPUT.md).
//!
//! Facts relied on (`vllm/v1/metrics/loggers.py` and `stats.py`, 0.14 to 0.34): vLLM observes the
//! request TPOT, E2E latency and generation-token histograms together when a request finishes (the
//! same requests in each), and TTFT when its first token is produced, in the same or an earlier
//! `record()` call. A request with no output token has no TTFT observation and is counted in
//! `request_generation_tokens_bucket{le="1"}`. `vllm bench serve --goodput` counts a request good
//! when each given metric is at most its threshold, with TPOT 0 for a request of at most one
//! output token (so it passes), which is what vLLM's raw TPOT histogram records for it too.
//!
//! Per interval between two consistent frames, over the `n` requests that finished in it:
//! * finish-time SLIs (TPOT, E2EL) concern those same `n` requests, so by the Fréchet bounds the
//!   requests good on all of them are at least `max(0, n − Σ bad_i)` and at most `min_i good_i`;
//! * TTFT observations belong to other requests than the interval's finishes (a request's TTFT is
//!   observed at or before its finish). The lower bound spends a budget of bad TTFT observations
//!   not yet matched to a finished request (each may belong to one of this interval's good ones);
//!   the upper bound a budget of good ones (each good request needs one). Both budgets are capped
//!   by the requests in flight with a TTFT observed, `N_ttft − (N_finished − N_short)`.
//!
//! Both bounds only grow (each interval adds a non-negative amount), and `0 ≤ lower ≤ upper ≤
//! finished` at every frame. A counter reset (any input below the previous frame's) makes the
//! interval's deltas the current values and empties the budgets.

use serde::{Deserialize, Serialize};

/// The cumulative inputs of one SLO at one frame, in requests. `None` where the SLO has no
/// threshold for the SLI.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct Inputs {
    /// Finished requests: the request TPOT histogram's `_count` (one observation per finished
    /// request).
    pub(crate) finished: f64,
    /// Finished requests of at most one output token: `request_generation_tokens_bucket{le="1"}`.
    pub(crate) short: f64,
    /// `request_generation_tokens_count`: the finished requests again, observed in the same loop
    /// as the request TPOT; a frame where the two differ was scraped in the middle of it.
    #[serde(default)]
    pub(crate) generated: f64,
    /// TPOT: the raw request TPOT histogram's buckets at the largest edge ≤ T and the smallest
    /// edge ≥ T (`_count` for `+Inf`); equal when T is an edge.
    pub(crate) tpot: Option<Bracket>,
    /// E2EL: the E2E latency histogram's `_count`, and its buckets around T.
    pub(crate) e2el: Option<(f64, Bracket)>,
    /// TTFT: the TTFT histogram's `_count`, and its buckets around T.
    pub(crate) ttft: Option<(f64, Bracket)>,
    /// Finished requests whose `finished_reason` is `abort` or `error`
    /// (`vllm:request_success_total`): the only ones that may lack a TTFT observation. `None`
    /// when the group does not send them: then every request of at most one token may.
    #[serde(default)]
    pub(crate) abnormal: Option<f64>,
    /// An SLI of the SLO lacks its input (a series the pipeline drops): its good requests cannot
    /// be bounded below, and every finished request may be good.
    #[serde(default)]
    pub(crate) degraded: bool,
    /// TTFT, TPOT and E2EL: the threshold is an edge of the histogram, so its bucket counts the
    /// SLI's good events exactly (only then are they counted in [`Goodput::sli`]).
    #[serde(default)]
    pub(crate) exact: [bool; 3],
}

/// A histogram's cumulative counts at the edges around a threshold T: `lo` at the largest edge
/// ≤ T (0 when there is none), `hi` at the smallest edge ≥ T.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct Bracket {
    /// Observations ≤ the edge below T: all surely ≤ T.
    pub(crate) lo: f64,
    /// Observations ≤ the edge above T: all that may be ≤ T.
    pub(crate) hi: f64,
}

impl Inputs {
    /// True when the finish-time histograms agree on the finished requests and every count is
    /// within its histogram: only such frames close an interval; a torn one is skipped and the
    /// next consistent one covers both. vLLM serves `/metrics` from a worker thread while its
    /// output loop records (`vllm/entrypoints/serve/instrumentator/metrics.py`), so a scrape can
    /// fall between the histograms of one finished request.
    pub(crate) fn consistent(&self) -> bool {
        let within = |b: &Bracket, count: f64| 0.0 <= b.lo && b.lo <= b.hi && b.hi <= count;
        let finish_ok = self
            .e2el
            .is_none_or(|(count, b)| count == self.finished && within(&b, count));
        let tpot_ok = self.tpot.is_none_or(|b| within(&b, self.finished));
        let ttft_ok = self.ttft.is_none_or(|(count, b)| within(&b, count));
        let values = [self.finished, self.short, self.abnormal.unwrap_or(0.0)];
        values.iter().all(|v| v.is_finite() && *v >= 0.0)
            && self.generated == self.finished
            && self.short <= self.finished
            && self.abnormal.is_none_or(|a| a <= self.finished)
            && finish_ok
            && tpot_ok
            && ttft_ok
    }

    /// True when a count of `self` is below the same count of `prev` (the same layout): a
    /// counter reset.
    fn fell_from(&self, prev: &Inputs) -> bool {
        let below = |now: f64, then: f64| now < then;
        let bracket =
            |now: &Bracket, then: &Bracket| below(now.lo, then.lo) || below(now.hi, then.hi);
        let histogram =
            |now: Option<(f64, Bracket)>, then: Option<(f64, Bracket)>| match (now, then) {
                (Some((c, b)), Some((c0, b0))) => below(c, c0) || bracket(&b, &b0),
                _ => false,
            };
        below(self.finished, prev.finished)
            || below(self.short, prev.short)
            || matches!((self.abnormal, prev.abnormal), (Some(a), Some(a0)) if a < a0)
            || matches!((&self.tpot, &prev.tpot), (Some(b), Some(b0)) if bracket(b, b0))
            || histogram(self.e2el, prev.e2el)
            || histogram(self.ttft, prev.ttft)
    }

    /// Finished requests that may lack a TTFT observation, at most: those of at most one output
    /// token, and of those only the aborted or failed ones when the group sends them.
    fn may_lack_ttft(&self) -> f64 {
        self.abnormal.map_or(self.short, |a| a.min(self.short))
    }

    /// Requests in flight whose TTFT was observed, at most: `N_ttft − (finished − those that may
    /// lack one)`.
    fn in_flight_cap(&self) -> f64 {
        match self.ttft {
            Some((count, _)) => (count - (self.finished - self.may_lack_ttft())).max(0.0),
            None => 0.0,
        }
    }
}

/// What one SLO's goodput has counted in one group since its baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Goodput {
    /// The previous consistent frame's inputs; `None` before the first.
    prev: Option<Inputs>,
    /// Requests finished since the baseline.
    pub(crate) finished: f64,
    /// Requests surely good on every threshold.
    pub(crate) lower: f64,
    /// Requests possibly good on every threshold.
    pub(crate) upper: f64,
    /// Bad TTFT observations not yet matched to a finished request.
    bad_ttft: f64,
    /// Good TTFT observations not yet matched to a finished request.
    good_ttft: f64,
    /// The layout of the inputs of `prev` (which SLIs, the edges around each threshold, whether
    /// the finish reasons are sent; [`super::plan`]): a frame of another layout cannot be
    /// compared bucket by bucket with `prev`.
    #[serde(default)]
    key: u64,
    /// The SLI events and good events counted since the baseline, `(events, good)` for TTFT,
    /// canonical TPOT and E2EL: the same intervals as the bounds, so they never fall (a vLLM
    /// restart adds what the new process counted), and an interval that cannot be compared (a
    /// threshold changed by a reload, an input that went stale) adds nothing to them.
    #[serde(default)]
    pub(crate) sli: [(f64, f64); 3],
    /// ITL per token, counted the same way from the acceptance-corrected estimate.
    #[serde(default)]
    pub(crate) itl: ItlCount,
}

/// The ITL-per-token events and good events of one SLO since the baseline, from the
/// acceptance-corrected histogram's `_count` and its bucket at the threshold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct ItlCount {
    /// `(count, bucket at the threshold)` at the previous frame, and the bucket's index.
    prev: Option<(f64, f64, usize)>,
    /// Tokens, and tokens at most the threshold, since the baseline.
    pub(crate) events: f64,
    pub(crate) good: f64,
}

impl ItlCount {
    /// Adds the frame where the histogram's `_count` is `count` and its bucket `index` holds
    /// `good`: the increase since the previous frame, all of it after a fall (the estimate
    /// restarted with vLLM), nothing when the bucket is another one than before.
    pub(crate) fn advance(&mut self, count: f64, good: f64, index: usize) {
        if let Some((c0, g0, i0)) = self.prev
            && i0 == index
        {
            let (events, good) = if count < c0 || good < g0 {
                (count, good)
            } else {
                (count - c0, good - g0)
            };
            let events = events.max(0.0);
            self.events += events;
            self.good += good.clamp(0.0, events);
        }
        self.prev = Some((count, good, index));
    }

    fn is_valid(&self) -> bool {
        self.events.is_finite()
            && self.good.is_finite()
            && 0.0 <= self.good
            && self.good <= self.events
    }
}

impl Goodput {
    /// Nothing counted, no baseline yet.
    pub(crate) fn new() -> Goodput {
        Goodput {
            prev: None,
            finished: 0.0,
            lower: 0.0,
            upper: 0.0,
            bad_ttft: 0.0,
            good_ttft: 0.0,
            key: 0,
            sli: [(0.0, 0.0); 3],
            itl: ItlCount::default(),
        }
    }

    /// True when every number is finite and the bounds are ordered (a restored state).
    pub(crate) fn is_valid(&self) -> bool {
        let numbers = [
            self.finished,
            self.lower,
            self.upper,
            self.bad_ttft,
            self.good_ttft,
        ];
        let count = |(e, g): &(f64, f64)| e.is_finite() && g.is_finite() && 0.0 <= *g && g <= e;
        numbers.iter().all(|v| v.is_finite() && *v >= 0.0)
            && self.lower <= self.upper
            && self.upper <= self.finished
            && self.sli.iter().all(count)
            && self.itl.is_valid()
    }

    /// Adds to the SLI rows the events and good events between `prev` and `now`, two frames of
    /// one layout: per SLI whose threshold is an edge, the bucket at the threshold and the count
    /// (TPOT: the finished requests of two or more tokens), from `now` alone after a counter
    /// reset (`reset`).
    fn add_slis(&mut self, now: &Inputs, prev: &Inputs, reset: bool) {
        let histogram = |i: &Inputs, f: fn(&Inputs) -> Option<(f64, Bracket)>| {
            f(i).map(|(count, b)| (count, b.hi))
        };
        let tpot = |i: &Inputs| i.tpot.map(|b| (i.finished - i.short, b.hi - i.short));
        let rows = [
            (histogram(now, |i| i.ttft), histogram(prev, |i| i.ttft)),
            (tpot(now), tpot(prev)),
            (histogram(now, |i| i.e2el), histogram(prev, |i| i.e2el)),
        ];
        for ((total, (now, then)), exact) in self.sli.iter_mut().zip(rows).zip(now.exact) {
            let (Some((events, good)), Some((events0, good0)), true) = (now, then, exact) else {
                continue;
            };
            let (events, good) = if reset {
                (events, good)
            } else {
                (events - events0, good - good0)
            };
            // On inputs vLLM sends, 0 ≤ good ≤ events per interval; kept so on any.
            let events = events.max(0.0);
            total.0 += events;
            total.1 += good.clamp(0.0, events);
        }
    }

    /// Adds the frame whose inputs are `now`, of the layout `key`. A torn frame
    /// ([`Inputs::consistent`]) adds nothing. The first consistent frame is the baseline: it
    /// counts nothing and seeds the budgets with the TTFT observations of requests still in
    /// flight. A frame of another layout than the previous one (an input that appeared or went
    /// stale, a threshold changed by a reload), or one that lacks an SLI's input, cannot be
    /// compared bucket by bucket: its interval adds its finished requests to the upper bound and
    /// nothing to the lower one, and the budgets become the most a request in flight can carry.
    /// Returns true when an input fell since the previous consistent frame (a counter reset).
    pub(crate) fn advance(&mut self, now: &Inputs, key: u64) -> bool {
        if !now.consistent() {
            return false;
        }
        let cap = now.in_flight_cap();
        let Some(prev) = self.prev.replace(*now) else {
            self.key = key;
            if let Some((count, b)) = now.ttft {
                self.bad_ttft = (count - b.lo).min(cap);
                self.good_ttft = b.hi.min(cap);
            }
            return false;
        };
        let same_layout = self.key == key;
        let comparable = same_layout && !now.degraded && !prev.degraded;
        self.key = key;
        let reset = now.finished < prev.finished
            || now.short < prev.short
            || (comparable && now.fell_from(&prev));
        // The SLI rows need only their own inputs at the same edges in both frames: an SLI whose
        // input the pipeline drops (a degraded SLO) does not stop the others counting.
        if same_layout {
            self.add_slis(now, &prev, reset || now.fell_from(&prev));
        }
        if !comparable {
            // After a reset the interval holds what the new process finished: its counts now.
            let n = if reset {
                now.finished
            } else {
                now.finished - prev.finished
            };
            self.finished += n;
            self.upper += n;
            // Any request in flight now may carry a bad (or a good) TTFT into a later interval.
            let carry = if now.ttft.is_some() { cap } else { 0.0 };
            (self.bad_ttft, self.good_ttft) = (carry, carry);
            return reset;
        }
        let base = if reset {
            self.bad_ttft = 0.0;
            self.good_ttft = 0.0;
            None
        } else {
            Some(prev)
        };
        let d = |f: fn(&Inputs) -> f64| f(now) - base.as_ref().map_or(0.0, f);
        let n = d(|i| i.finished);
        self.finished += n;
        // Finish-time SLIs: (surely good, possibly good) among the n.
        let mut finish: Vec<(f64, f64)> = Vec::new();
        if now.tpot.is_some() {
            let lo = d(|i| i.tpot.map_or(0.0, |b| b.lo));
            let hi = d(|i| i.tpot.map_or(0.0, |b| b.hi));
            finish.push((lo, hi));
        }
        if now.e2el.is_some() {
            let lo = d(|i| i.e2el.map_or(0.0, |(_, b)| b.lo));
            let hi = d(|i| i.e2el.map_or(0.0, |(_, b)| b.hi));
            finish.push((lo, hi));
        }
        let bad: f64 = finish.iter().map(|(lo, _)| n - lo).sum();
        let u = finish.iter().map(|(_, hi)| *hi).fold(n, f64::min).max(0.0);
        // Within vLLM's cumulative buckets the lower edge never gains more than the upper one,
        // so g ≤ u; inputs that contradict that (no vLLM sends them) still leave lower ≤ upper.
        let g = (n - bad).max(0.0).min(u);
        if now.ttft.is_none() {
            self.lower += g;
            self.upper += u;
            return reset;
        }
        self.bad_ttft += d(|i| i.ttft.map_or(0.0, |(count, b)| count - b.lo));
        self.good_ttft += d(|i| i.ttft.map_or(0.0, |(_, b)| b.hi));
        // Requests of at most one output token finishing now are the only ones that may lack a
        // TTFT observation, and of those only the aborted or failed ones when the group sends
        // them: counted as bad at no cost to the budget.
        let missing = match (now.abnormal, base.as_ref().map(|b| b.abnormal)) {
            (Some(a), Some(Some(a0))) => d(|i| i.short).min(a - a0),
            (Some(a), None) => d(|i| i.short).min(a),
            _ => d(|i| i.short),
        };
        let kills = g.min(missing + self.bad_ttft);
        self.bad_ttft -= (kills - missing).max(0.0);
        let matched = u.min(self.good_ttft);
        self.good_ttft -= matched;
        self.upper += matched;
        // Both bounds bracket the truth on inputs vLLM sends, so `lower ≤ upper` there; the
        // minimum keeps them ordered on inputs that contradict each other.
        self.lower = (self.lower + g - kills).min(self.upper);
        self.bad_ttft = self.bad_ttft.min(cap);
        self.good_ttft = self.good_ttft.min(cap);
        reset
    }
}

#[cfg(test)]
mod tests;
