//! The output hold: a corrected counter never goes below what was last served unless an input of
//! its family reset (`docs/FAMILIES.md`, "Corrected counters never go backwards").
//!
//! Every corrected family is cumulative: each bucket, `_sum` and `_count` is a counter to
//! Prometheus, which reads any decrease as a counter reset and adds the whole value again in
//! `rate()`. The rules can compute a lower value than the previous scrape's while no input fell,
//! when vLLM's series advance inconsistently between two scrapes:
//!
//! * a torn update: request TPOT observations of n ≤ 1 requests (exactly 0 s) are recorded in one
//!   scrape, and the `vllm:request_generation_tokens_bucket{le="1"}` that cancels them only in the
//!   next, so canonical TPOT's buckets and `_count` first rise, then fall back;
//! * aborts: `vllm:time_to_first_token_seconds_count` rising faster than
//!   `vllm:generation_tokens_total`, so `generation_tokens − TTFT count` falls.
//!
//! **Hold.** Each component (every bucket by its `le`, `_sum`, `_count`) of a new output is
//! raised to the value last served for it, when it came out lower.
//!
//! **Carry.** The amount a served component exceeds its freshly computed value (served − computed,
//! ≥ 0) is its carry. It is not stored or added anywhere: the served value stays put while the
//! computed one grows, the carry shrinks by each increase, and once the computed value reaches the
//! served one the output is the computed value again, exactly. So a hold delays increases by at
//! most the carry, and never adds or loses any: the held output converges to the rule's value as
//! soon as the inputs catch up.
//!
//! **Input reset.** When any input series of the family decreased since the frame the last output
//! was computed from (a vLLM restart: a counter reset), nothing is held: the output falls, as
//! Prometheus expects of a counter reset. The floor is what was served for older scrapes: evaluations of
//! one scrape while its series arrive replace each other (see [`Hold::apply`]).
//!
//! After the hold, buckets are made non-decreasing in `le` and no bucket exceeds `_count`, and the
//! `+Inf` bucket is set to `_count`.

use std::sync::Arc;

use super::classify::RoleKey;
use super::values::DerivedValue;

/// A family's hold state in one group: the value last served and the input values it came from.
/// Handed over with a retired group and stored by `--storage.path`, so that a group coming back
/// resumes at or above what it served.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Hold {
    /// The last output of the family (after the hold), `None` before the first or after a reset.
    /// The same allocation as the group's current output while that is this value.
    served: Option<Arc<DerivedValue>>,
    /// Timestamp (ms) of the frame `served` was computed from.
    served_ts: Option<i64>,
    /// What was served for the newest frame older than `served_ts`: the floor of `served_ts`'s
    /// evaluations. `None` before a second frame or after a reset.
    floor: Option<Arc<DerivedValue>>,
    /// `(role, value)` of every input of the frame last evaluated, sorted by role. By role, not
    /// by the role's position in its group, so a hold handed to the same group coming back (with
    /// its series in another order) compares the same inputs ([`super::group::Retired`]).
    inputs: Vec<(RoleKey, f64)>,
}

impl Hold {
    /// Heap bytes the hold holds, for the engine's memory accounting (a served value shared with
    /// the group's output is counted here too: an upper bound).
    pub(crate) fn heap_bytes(&self) -> usize {
        // An `Arc`'s allocation: its counts and the value inline.
        let arc = 16 + size_of::<DerivedValue>();
        let value = |v: &Option<Arc<DerivedValue>>| v.as_ref().map_or(0, |v| arc + v.heap_bytes());
        value(&self.served) + value(&self.floor) + self.inputs.capacity() * 32
    }

    /// True when no served value or input is negative (checked on a restored state: every
    /// corrected family counts, and every input is a counter).
    pub(crate) fn is_non_negative(&self) -> bool {
        let value = |v: &Option<Arc<DerivedValue>>| v.as_ref().is_none_or(|v| v.is_non_negative());
        value(&self.served) && value(&self.floor) && self.inputs.iter().all(|(_, v)| *v >= 0.0)
    }

    /// True when every number is finite and the inputs sorted, as an engine writes them
    /// (checked on a restored state).
    pub(crate) fn is_valid(&self) -> bool {
        let value = |v: &Option<Arc<DerivedValue>>| v.as_ref().is_none_or(|v| v.is_finite());
        value(&self.served)
            && value(&self.floor)
            && self.inputs.iter().all(|(_, v)| v.is_finite())
            && self.inputs.windows(2).all(|w| w[0].0 < w[1].0)
    }

    /// True when an input shared with the last evaluated frame decreased (a counter reset); a plan
    /// that gained or lost roles compares the rest. Both lists are sorted by role: one merge pass,
    /// linear in the inputs (a 60 000-bucket histogram has as many).
    fn input_reset(&self, inputs: &[(RoleKey, f64)]) -> bool {
        let (mut old, mut new) = (self.inputs.iter().peekable(), inputs.iter().peekable());
        while let (Some((a, prev)), Some((b, v))) = (old.peek(), new.peek()) {
            match a.cmp(b) {
                std::cmp::Ordering::Less => {
                    old.next();
                }
                std::cmp::Ordering::Greater => {
                    new.next();
                }
                std::cmp::Ordering::Equal => {
                    if v < prev {
                        return true;
                    }
                    old.next();
                    new.next();
                }
            }
        }
        false
    }

    /// Records that a frame with `inputs` (sorted by role) was evaluated; on an input reset the
    /// floor is dropped and `true` returned. Called for every evaluation, including one whose
    /// family is withheld. Inputs of the same roles as the last frame's (the steady state) are
    /// compared and replaced in place.
    pub(crate) fn observe_inputs(
        &mut self,
        inputs: impl ExactSizeIterator<Item = (RoleKey, f64)> + Clone,
    ) -> bool {
        let same_roles = inputs.len() == self.inputs.len()
            && inputs
                .clone()
                .zip(&self.inputs)
                .all(|((a, _), (b, _))| a == *b);
        let reset = if same_roles {
            let mut reset = false;
            for ((_, v), (_, prev)) in inputs.zip(self.inputs.iter_mut()) {
                reset |= v < *prev;
                *prev = v;
            }
            reset
        } else {
            let inputs: Vec<(RoleKey, f64)> = inputs.collect();
            debug_assert!(inputs.windows(2).all(|w| w[0].0 < w[1].0), "sorted inputs");
            let reset = self.input_reset(&inputs);
            self.inputs = inputs;
            reset
        };
        if reset {
            self.served = None;
            self.served_ts = None;
            self.floor = None;
        }
        reset
    }

    /// Holds `value`, computed from the frame at `ts` (ms), at what was served for older frames,
    /// and records the result as served. Returns the output (shared with the record: a new
    /// allocation each time, so a value handed out before is never changed) and whether any
    /// component was raised (a hold, counted by the caller).
    ///
    /// The floor is what was served for the newest *older* frame, not an earlier evaluation of
    /// the same frame: while one scrape's series arrive (split over requests), the frame is
    /// evaluated again as the group learns each new input, and each evaluation replaces the one
    /// before, so the output at `ts` does not depend on the order its series arrived in
    /// (`docs/ENGINE.md`, invariants 2 and 7).
    pub(crate) fn apply(&mut self, ts: i64, value: DerivedValue) -> (Arc<DerivedValue>, bool) {
        if self.served_ts != Some(ts) {
            self.floor = self.served.take();
        }
        let (mut out, held) = match &self.floor {
            Some(floor) => hold(floor, value),
            None => (value, false),
        };
        if let DerivedValue::Histogram { buckets, count, .. } = &mut out {
            monotone(buckets, *count);
        }
        let out = Arc::new(out);
        self.served = Some(Arc::clone(&out));
        self.served_ts = Some(ts);
        (out, held)
    }
}

/// `value` with every component raised to `served`'s where lower (buckets matched by `le`; a
/// bound `served` lacks is not held). [`Hold::apply`] then makes the buckets monotone.
pub(crate) fn hold(served: &DerivedValue, value: DerivedValue) -> (DerivedValue, bool) {
    let mut held = false;
    let mut up = |v: &mut f64, floor: f64| {
        if *v < floor {
            *v = floor;
            held = true;
        }
    };
    match (served, value) {
        (
            DerivedValue::SumCount { sum: s0, count: c0 },
            DerivedValue::SumCount { mut sum, mut count },
        ) => {
            up(&mut sum, *s0);
            up(&mut count, *c0);
            (DerivedValue::SumCount { sum, count }, held)
        }
        (
            DerivedValue::Histogram {
                buckets: b0,
                sum: s0,
                count: c0,
            },
            DerivedValue::Histogram {
                mut buckets,
                mut sum,
                mut count,
            },
        ) => {
            up(&mut sum, *s0);
            up(&mut count, *c0);
            // Both ascending in `le`: one merge pass, linear in the buckets.
            let mut served = b0.iter().peekable();
            for (le, c) in &mut buckets {
                while served.next_if(|(l, _)| l < le).is_some() {}
                if let Some((_, floor)) = served.next_if(|(l, _)| l == le) {
                    up(c, *floor);
                }
            }
            (
                DerivedValue::Histogram {
                    buckets,
                    sum,
                    count,
                },
                held,
            )
        }
        // Counters of the same rows are held one by one (rows of another plan are not held: the
        // SLO spec changed). Each pair that is ordered in both values (good ≤ events, lower ≤
        // upper ≤ finished) stays ordered: the maximum of ordered pairs is ordered.
        (
            DerivedValue::Counters {
                rows: r0,
                values: v0,
            },
            DerivedValue::Counters { rows, mut values },
        ) if Arc::ptr_eq(r0, &rows) || *r0 == rows => {
            for (v, floor) in values.iter_mut().zip(v0) {
                up(v, *floor);
            }
            (DerivedValue::Counters { rows, values }, held)
        }
        (_, value) => (value, false),
    }
}

/// Makes cumulative `buckets` non-decreasing in `le`, none above `count`, and the last (`+Inf`)
/// equal to `count`.
fn monotone(buckets: &mut [(f64, f64)], count: f64) {
    let mut floor = 0.0f64;
    for (_, c) in buckets.iter_mut() {
        *c = c.max(floor).min(count);
        floor = *c;
    }
    if let Some(last) = buckets.last_mut() {
        last.1 = count;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INF: f64 = f64::INFINITY;

    /// The `i`-th role of a test's inputs.
    fn k(i: u64) -> RoleKey {
        RoleKey {
            input: crate::classify::Input::GenTotal,
            le_bits: i,
        }
    }

    fn h(buckets: &[(f64, f64)], sum: f64, count: f64) -> DerivedValue {
        DerivedValue::Histogram {
            buckets: buckets.to_vec(),
            sum,
            count,
        }
    }

    #[test]
    fn lower_components_are_held_and_higher_ones_pass() {
        let served = h(&[(0.01, 4.0), (0.05, 10.0), (INF, 12.0)], 1.0, 12.0);
        // 0.01 fell 4 -> 3 (held at 4), 0.05 rose 10 -> 11, count fell 12 -> 11 (held at 12).
        let (out, held) = hold(
            &served,
            h(&[(0.01, 3.0), (0.05, 11.0), (INF, 11.0)], 1.5, 11.0),
        );
        assert!(held);
        // +Inf is held at 12 with the count.
        assert_eq!(out, h(&[(0.01, 4.0), (0.05, 11.0), (INF, 12.0)], 1.5, 12.0));
        let (out, held) = hold(
            &served,
            h(&[(0.01, 5.0), (0.05, 10.0), (INF, 13.0)], 1.0, 13.0),
        );
        assert!(!held, "nothing fell");
        assert_eq!(out, h(&[(0.01, 5.0), (0.05, 10.0), (INF, 13.0)], 1.0, 13.0));
    }

    #[test]
    fn buckets_are_made_monotone_with_inf_equal_to_the_count() {
        let mut hold = Hold::default();
        let (out, held) = hold.apply(
            1_000,
            h(
                &[(0.01, 5.0), (0.05, 4.0), (0.1, 9.0), (INF, 8.0)],
                1.0,
                8.0,
            ),
        );
        assert!(!held);
        assert_eq!(
            *out,
            h(
                &[(0.01, 5.0), (0.05, 5.0), (0.1, 8.0), (INF, 8.0)],
                1.0,
                8.0
            )
        );
    }

    #[test]
    fn a_plan_whose_roles_changed_compares_the_roles_it_kept() {
        let mut hold = Hold::default();
        assert!(!hold.observe_inputs([(k(0), 10.0), (k(1), 5.0)].into_iter()));
        // Role 1 gone, role 2 new (lower than anything seen): no reset.
        assert!(!hold.observe_inputs([(k(0), 12.0), (k(2), 1.0)].into_iter()));
        // The same roles again: role 0 fell.
        assert!(hold.observe_inputs([(k(0), 11.0), (k(2), 1.0)].into_iter()));
    }

    #[test]
    fn an_input_reset_drops_the_floor() {
        let sc = |sum, count| DerivedValue::SumCount { sum, count };
        let mut hold = Hold::default();
        assert!(!hold.observe_inputs([(k(0), 10.0), (k(1), 5.0)].into_iter()));
        let _ = hold.apply(1_000, sc(10.0, 5.0));
        assert!(!hold.observe_inputs([(k(0), 12.0), (k(1), 6.0)].into_iter()));
        assert_eq!(
            hold.apply(16_000, sc(9.0, 6.0)),
            (Arc::new(sc(10.0, 6.0)), true)
        );
        assert!(
            hold.observe_inputs([(k(0), 1.0), (k(1), 6.0)].into_iter()),
            "role 0 fell"
        );
        assert_eq!(
            hold.apply(31_000, sc(1.0, 0.5)),
            (Arc::new(sc(1.0, 0.5)), false)
        );
    }

    #[test]
    fn a_scrape_evaluated_again_as_its_series_arrive_is_held_only_at_older_scrapes() {
        let sc = |sum, count| DerivedValue::SumCount { sum, count };
        let mut hold = Hold::default();
        // First scrape, evaluated before and after its last input arrived: the second, lower
        // value replaces the first, so the output does not depend on arrival order.
        assert_eq!(
            hold.apply(1_000, sc(10.0, 5.0)),
            (Arc::new(sc(10.0, 5.0)), false)
        );
        assert_eq!(
            hold.apply(1_000, sc(7.0, 5.0)),
            (Arc::new(sc(7.0, 5.0)), false)
        );
        // The next scrape is held at what the first one served last (7), not at 10.
        assert_eq!(
            hold.apply(16_000, sc(6.0, 6.0)),
            (Arc::new(sc(7.0, 6.0)), true)
        );
        // Evaluated again within that scrape: still floored by the first scrape, not by itself.
        assert_eq!(
            hold.apply(16_000, sc(8.0, 5.5)),
            (Arc::new(sc(8.0, 5.5)), false)
        );
        assert_eq!(
            hold.apply(16_000, sc(6.5, 4.0)),
            (Arc::new(sc(7.0, 5.0)), true)
        );
    }
}
