//! The accumulator drives any stateful rule: a rule defined here, which the engine does not
//! know, is replayed, committed, retired, stored and resumed as the acceptance-corrected family
//! is, so a second stateful family costs its own file and its registry line only.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::*;
use crate::rules::stateful::{FrameRule, FrameState};
use crate::rules::{HistRoles, Plan, StatefulRule};

/// A stateful rule of the test only: the sum, over complete frames, of the increase of one
/// counter (role 0) since the previous frame, the increase across a counter reset being the value
/// after it (so the sum never falls). Its state is the last frame's value and the running sum.
struct Increase;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Sum {
    ts: Option<i64>,
    last: Option<f64>,
    total: f64,
}

impl FrameState for Sum {
    fn ts(&self) -> Option<i64> {
        self.ts
    }
    fn has_frame(&self) -> bool {
        self.last.is_some()
    }
    fn heap_bytes(&self) -> usize {
        0
    }
    fn validate(&self, _latest_ms: i64) -> Result<(), &'static str> {
        Ok(())
    }
}

impl FrameRule for Increase {
    type State = Sum;
    fn check(_plan: &Plan, values: &[f64]) -> Result<(), WithheldReason> {
        if values[0] >= 0.0 {
            Ok(())
        } else {
            Err(WithheldReason::InconsistentInputs)
        }
    }
    fn seed(_plan: &Plan) -> Sum {
        Sum {
            ts: None,
            last: None,
            total: 0.0,
        }
    }
    fn fits(_plan: &Plan, _state: &Sum) -> bool {
        true
    }
    fn advance(_plan: &Plan, state: &mut Sum, values: &[f64], ts: i64) -> bool {
        let v = values[0];
        let reset = state.last.is_some_and(|last| v < last);
        state.total += match state.last {
            Some(last) if !reset => v - last,
            _ => v,
        };
        state.last = Some(v);
        state.ts = Some(ts);
        reset
    }
    fn output(_plan: &Plan, state: &Sum) -> Result<DerivedValue, WithheldReason> {
        Ok(DerivedValue::SumCount {
            sum: state.total,
            count: 1.0,
        })
    }
}

const RULE: StatefulRule = StatefulRule::of::<Increase>();

fn plan() -> (Plan, PlanRoles) {
    let plan = Plan {
        hist: None::<HistRoles>,
        scalars: vec![0],
        series: Vec::new(),
        layout: None,
    };
    (plan, PlanRoles::new(vec![0], |r| r))
}

fn frame(ts: i64, v: f64) -> Frame {
    let mut f = Frame::new(ts, 1);
    f.values[0] = v;
    f.present = 1;
    f
}

fn sum(value: Result<DerivedValue, WithheldReason>) -> f64 {
    match value {
        Ok(DerivedValue::SumCount { sum, .. }) => sum,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_rule_the_engine_does_not_name_is_replayed_committed_retired_stored_and_resumed() {
    let (plan, roles) = plan();
    let mut a = Accumulator::default();
    let mut frames: VecDeque<Frame> = [frame(1, 10.0), frame(2, 15.0)].into();
    let resets = std::cell::Cell::new(0);
    let mut count = |_: i64| resets.set(resets.get() + 1);
    // Replayed from the seed over both kept frames: 10 (from 0) + 5.
    assert_eq!(
        sum(a.evaluate(&RULE, &plan, &roles, &frames, 1, &mut count)),
        15.0
    );
    // The oldest frame leaves: committed. A counter reset at the new frame adds its value: 15 + 4.
    let oldest = frames.pop_front().unwrap();
    a.commit(&RULE, &plan, &roles, &oldest);
    frames.push_back(frame(3, 4.0));
    assert_eq!(
        sum(a.evaluate(&RULE, &plan, &roles, &frames, 1, &mut count)),
        19.0
    );
    assert_eq!(resets.get(), 1);
    // Retired, stored and read back as the state file does, then resumed by a fresh group state.
    let kept = a.take_latest().expect("the state behind the output");
    let stored = kept.save();
    let back = (RULE.load)(stored).expect("it reads back");
    assert_eq!(back, kept);
    let mut resumed = Accumulator::default();
    resumed.resume(back);
    let later: VecDeque<Frame> = [frame(4, 6.0)].into();
    assert_eq!(
        sum(resumed.evaluate(&RULE, &plan, &roles, &later, 0, &mut count)),
        21.0
    );
    // An inconsistent frame is refused by the rule's check, not by the accumulator.
    let bad: VecDeque<Frame> = [frame(5, -1.0)].into();
    assert_eq!(
        resumed.evaluate(&RULE, &plan, &roles, &bad, 0, &mut count),
        Err(WithheldReason::InconsistentInputs)
    );
}

#[test]
fn a_state_of_another_rule_does_not_fit_and_is_seeded_again() {
    let (plan, roles) = plan();
    let mut a = Accumulator::default();
    let foreign = crate::rules::RuleState::new(crate::rules::Committed::default());
    a.resume(foreign);
    let frames: VecDeque<Frame> = [frame(1, 7.0)].into();
    assert_eq!(
        sum(a.evaluate(&RULE, &plan, &roles, &frames, 0, &mut |_| {})),
        7.0
    );
}
