//! The output hold: a corrected counter never goes below what was last served unless an input of
//! its family reset (`docs/RELIABILITY.md`, "Corrected counters never go backwards").
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
//! Prometheus expects of a counter reset. Nor when the family's set of input series changed (a
//! scrape still arriving across requests plans the family from fewer series first; a bucket layout
//! change; a series gone stale): a value computed from other inputs is no floor.
//!
//! After the hold, buckets are made non-decreasing in `le` and no bucket exceeds `_count`, and the
//! `+Inf` bucket is set to `_count`.

use super::DerivedValue;

/// A family's hold state in one group: the value last served and the input values it came from.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Hold {
    /// The last output of the family (after the hold), `None` before the first or after a reset.
    served: Option<DerivedValue>,
    /// `(role index, value)` of every input of the frame last evaluated, in the plan's order.
    inputs: Vec<(usize, f64)>,
}

impl Hold {
    /// True when an input shared with the last evaluated frame decreased (a counter reset). Role
    /// indices are stable within a group, so a plan that gained or lost roles compares the rest.
    fn input_reset(&self, inputs: &[(usize, f64)]) -> bool {
        inputs.iter().any(|(role, v)| self.inputs.iter().any(|(r, prev)| r == role && v < prev))
    }

    /// Records that the frame with `inputs` was evaluated; on an input reset, or when the family's
    /// input series changed (its plan gained or lost a series: a scrape still arriving, a bucket
    /// layout change, a series gone stale), the served floor is dropped and `true` returned: a
    /// value computed from other inputs is no floor for this one. Called for every evaluation,
    /// including one whose family is withheld.
    pub fn observe_inputs(&mut self, inputs: Vec<(usize, f64)>) -> bool {
        let same_inputs = self.inputs.is_empty() || (self.inputs.len() == inputs.len() && self.inputs.iter().zip(&inputs).all(|(a, b)| a.0 == b.0));
        let reset = self.input_reset(&inputs) || !same_inputs;
        if reset {
            self.served = None;
        }
        self.inputs = inputs;
        reset
    }

    /// Holds `value` at the last served value and records the result as served. Returns the
    /// output and whether any component was raised (a hold, counted by the caller).
    pub fn apply(&mut self, value: DerivedValue) -> (DerivedValue, bool) {
        let (mut out, held) = match &self.served {
            Some(served) => hold(served, value),
            None => (value, false),
        };
        if let DerivedValue::Histogram { buckets, count, .. } = &mut out {
            monotone(buckets, *count);
        }
        self.served = Some(out.clone());
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
        (DerivedValue::SumCount { sum: s0, count: c0 }, DerivedValue::SumCount { mut sum, mut count }) => {
            up(&mut sum, *s0);
            up(&mut count, *c0);
            (DerivedValue::SumCount { sum, count }, held)
        }
        (
            DerivedValue::Histogram { buckets: b0, sum: s0, count: c0 },
            DerivedValue::Histogram { mut buckets, mut sum, mut count },
        ) => {
            up(&mut sum, *s0);
            up(&mut count, *c0);
            for (le, c) in &mut buckets {
                if let Some((_, floor)) = b0.iter().find(|(l, _)| l == le) {
                    up(c, *floor);
                }
            }
            (DerivedValue::Histogram { buckets, sum, count }, held)
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

    fn h(buckets: &[(f64, f64)], sum: f64, count: f64) -> DerivedValue {
        DerivedValue::Histogram { buckets: buckets.to_vec(), sum, count }
    }

    #[test]
    fn lower_components_are_held_and_higher_ones_pass() {
        let served = h(&[(0.01, 4.0), (0.05, 10.0), (INF, 12.0)], 1.0, 12.0);
        // 0.01 fell 4 -> 3 (held at 4), 0.05 rose 10 -> 11, count fell 12 -> 11 (held at 12).
        let (out, held) = hold(&served, h(&[(0.01, 3.0), (0.05, 11.0), (INF, 11.0)], 1.5, 11.0));
        assert!(held);
        // +Inf is held at 12 with the count.
        assert_eq!(out, h(&[(0.01, 4.0), (0.05, 11.0), (INF, 12.0)], 1.5, 12.0));
        let (out, held) = hold(&served, h(&[(0.01, 5.0), (0.05, 10.0), (INF, 13.0)], 1.0, 13.0));
        assert!(!held, "nothing fell");
        assert_eq!(out, h(&[(0.01, 5.0), (0.05, 10.0), (INF, 13.0)], 1.0, 13.0));
    }

    #[test]
    fn buckets_are_made_monotone_with_inf_equal_to_the_count() {
        let mut hold = Hold::default();
        let (out, held) = hold.apply(h(&[(0.01, 5.0), (0.05, 4.0), (0.1, 9.0), (INF, 8.0)], 1.0, 8.0));
        assert!(!held);
        assert_eq!(out, h(&[(0.01, 5.0), (0.05, 5.0), (0.1, 8.0), (INF, 8.0)], 1.0, 8.0));
    }

    #[test]
    fn an_input_reset_drops_the_floor() {
        let mut hold = Hold::default();
        assert!(!hold.observe_inputs(vec![(0, 10.0), (1, 5.0)]));
        let _ = hold.apply(DerivedValue::SumCount { sum: 10.0, count: 5.0 });
        assert!(!hold.observe_inputs(vec![(0, 12.0), (1, 6.0)]));
        assert_eq!(hold.apply(DerivedValue::SumCount { sum: 9.0, count: 6.0 }), (DerivedValue::SumCount { sum: 10.0, count: 6.0 }, true));
        assert!(hold.observe_inputs(vec![(0, 1.0), (1, 6.0)]), "role 0 fell");
        assert_eq!(hold.apply(DerivedValue::SumCount { sum: 1.0, count: 0.5 }), (DerivedValue::SumCount { sum: 1.0, count: 0.5 }, false));
        assert!(!hold.observe_inputs(vec![(0, 2.0), (1, 7.0)]));
        let _ = hold.apply(DerivedValue::SumCount { sum: 2.0, count: 1.0 });
        // A third input series joined the plan: the floor from two inputs is dropped.
        assert!(hold.observe_inputs(vec![(0, 2.0), (1, 7.0), (2, 1.0)]), "the input set changed");
        assert_eq!(hold.apply(DerivedValue::SumCount { sum: 1.5, count: 1.0 }), (DerivedValue::SumCount { sum: 1.5, count: 1.0 }, false));
    }
}
