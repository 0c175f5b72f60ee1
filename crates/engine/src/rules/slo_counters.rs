//! The SLO counters (docs/SLO.md, "SLO counters"; the bounds: docs/GOODPUT.md): per group and
//! SLO, the events and good events of each SLI, the finished requests and the goodput bounds,
//! served as labelled counters ([`DerivedValue::Counters`]).
//!
//! The SLI counters are exact where the threshold is a bucket edge of the series as received
//! (compared as floats, so `0.1`, `0.10` and `1e-01` are one edge):
//! * TTFT counts `vllm:time_to_first_token_seconds`: events its `_count`, good its bucket at T;
//! * canonical TPOT counts vLLM's request TPOT histogram less the requests of at most one output
//!   token, which vLLM records as 0 s (`vllm/v1/metrics/stats.py`): events `_count − le1`, good
//!   `bucket(T) − le1`, where `le1` is `vllm:request_generation_tokens_bucket{le="1"}`;
//! * E2EL counts `vllm:e2e_request_latency_seconds`: events its `_count`, good its bucket at T;
//! * ITL per token counts the acceptance-corrected ITL histogram (the corrector's
//!   `vllm_corrected_acceptance_corrected_itl_seconds`): events its `_count` (tokens), good its
//!   bucket at T; estimated under speculative decoding, exact without.
//!
//! A threshold between edges has no SLI rows; a note says why ([`crate::slo::SliNote`]). The
//! goodput bounds depend on earlier frames ([`goodput`]), so the family is a stateful rule; the
//! ITL-per-token rows carry the acceptance-corrected state along.

mod goodput;
mod plan;

use serde::{Deserialize, Serialize};

use super::acceptance::Committed;
use super::acceptance_corrected_itl::AcceptanceCorrectedItl;
use super::stateful::{FrameRule, FrameState, StatefulRule};
use super::{Evaluation, Plan, Spec};
use crate::reasons::WithheldReason;
use crate::values::{DerivedValue, FamilyKind};
use goodput::{Bracket, Goodput, Inputs};
use plan::SloPlan;
use plan::{Edges, PlannedSlo};

/// The registry entry.
pub(super) const SPEC: Spec = Spec {
    name: "vllm_corrected_slo",
    help: "The SLO counters: events and good events per SLI, finished requests and goodput bounds per SLO.",
    kind: FamilyKind::Counters,
    inputs: &[
        "vllm:request_time_per_output_token_seconds",
        "vllm:request_generation_tokens_bucket{le=\"1\"}",
        "vllm:time_to_first_token_seconds",
        "vllm:e2e_request_latency_seconds",
        "vllm:inter_token_latency_seconds",
        "vllm:generation_tokens_total",
        "vllm:spec_decode_num_accepted_tokens_per_pos_total",
        "vllm:request_success_total{finished_reason=\"abort|error\"}",
    ],
    withholds: &[
        WithheldReason::NoSlo,
        WithheldReason::NoLeOneBound,
        WithheldReason::InconsistentInputs,
    ],
    plan: plan::plan,
    evaluation: Evaluation::Stateful(&RULE),
    fractional_buckets: false,
    degrades: None,
};

const RULE: StatefulRule = StatefulRule::of::<SloCounters>();

struct SloCounters;

/// What a group keeps for the family: each SLO's goodput, the newest frame's SLI counts and the
/// acceptance-corrected ITL state (when an SLO reads ITL per token).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SloState {
    /// Timestamp (ms) of the newest frame included.
    ts: Option<i64>,
    /// The layout ([`SloPlan`]'s fingerprint) the state belongs to.
    layout: u64,
    /// Each SLO's goodput, by name, in the order of the plan last advanced: an SLO added by a
    /// reload starts afresh, one removed is dropped, and a change of the group's inputs keeps
    /// the counts ([`Goodput::advance`] compares frames of one layout only).
    goodput: Vec<(String, Goodput)>,
    /// The acceptance-corrected ITL state.
    acceptance: Option<Committed>,
}

impl FrameState for SloState {
    fn ts(&self) -> Option<i64> {
        self.ts
    }
    fn has_frame(&self) -> bool {
        self.ts.is_some()
    }
    fn heap_bytes(&self) -> usize {
        self.goodput.capacity() * size_of::<(String, Goodput)>()
            + self
                .goodput
                .iter()
                .map(|(n, _)| n.capacity())
                .sum::<usize>()
            + self.acceptance.as_ref().map_or(0, Committed::heap_bytes)
    }
    fn validate(&self, latest_ms: i64) -> Result<(), &'static str> {
        if self.ts.is_some_and(|t| !(0..=latest_ms).contains(&t)) {
            return Err("SLO state time out of range");
        }
        if !self.goodput.iter().all(|(_, g)| g.is_valid()) {
            return Err("goodput bounds out of order");
        }
        if let Some(a) = &self.acceptance {
            FrameState::validate(a, latest_ms)?;
        }
        Ok(())
    }
}

fn slo_plan(plan: &Plan) -> Option<&SloPlan> {
    plan.layout.as_deref()?.as_any().downcast_ref()
}

/// One SLO's goodput inputs at a frame: cumulative counts in requests.
fn inputs(p: &SloPlan, s: &PlannedSlo, values: &[f64]) -> Inputs {
    let at = |r: Option<usize>| r.map_or(0.0, |r| values[r]);
    let bracket = |e: Edges| Bracket {
        lo: at(e.lo),
        hi: values[e.hi],
    };
    Inputs {
        finished: values[p.finished],
        short: values[p.short],
        generated: values[p.generated],
        tpot: s.tpot.map(bracket),
        e2el: s.e2el.map(|m| (values[m.count], bracket(m.edges))),
        ttft: s.ttft.map(|m| (values[m.count], bracket(m.edges))),
        abnormal: (s.ttft.is_some() && !p.abnormal.is_empty())
            .then(|| p.abnormal.iter().map(|r| values[*r]).sum()),
        degraded: !s.complete,
        exact: [
            s.ttft.is_some_and(|m| m.edges.exact),
            s.tpot.is_some_and(|e| e.exact),
            s.e2el.is_some_and(|m| m.edges.exact),
        ],
    }
}

impl FrameRule for SloCounters {
    type State = SloState;

    /// Each interval between frames is counted once, in the order the frames complete: a replay
    /// under a plan that gained a role would skip the kept frames that lack it, and lose the
    /// requests they saw finish when a counter reset follows.
    const FORWARD_ONLY: bool = true;

    /// # Errors
    /// [`WithheldReason::InconsistentInputs`] when a value the plan reads is negative or not
    /// finite; [`WithheldReason::Incomplete`] without an SLO plan.
    fn check(plan: &Plan, values: &[f64]) -> Result<(), WithheldReason> {
        slo_plan(plan).ok_or(WithheldReason::Incomplete)?;
        let ok = plan
            .each_role()
            .all(|r| values.get(r).is_some_and(|v| v.is_finite() && *v >= 0.0));
        if ok {
            Ok(())
        } else {
            Err(WithheldReason::InconsistentInputs)
        }
    }

    fn seed(plan: &Plan) -> SloState {
        let p = slo_plan(plan);
        SloState {
            ts: None,
            layout: p.map_or(0, |p| p.layout),
            goodput: Vec::new(),
            acceptance: p
                .and_then(|p| p.acceptance.as_ref())
                .map(<AcceptanceCorrectedItl as FrameRule>::seed),
        }
    }

    /// Every SLO state fits: the goodput of each SLO is kept by name across layouts (a role
    /// that goes stale, a reload that changes a threshold), and the acceptance-corrected state
    /// is re-seeded inside when its own layout changes. Re-seeding all of it would restart the
    /// goodput counts, and the output hold would then keep the upper bound below the truth.
    fn fits(plan: &Plan, _: &SloState) -> bool {
        slo_plan(plan).is_some()
    }

    fn advance(plan: &Plan, state: &mut SloState, values: &[f64], ts: i64) -> bool {
        let Some(p) = slo_plan(plan) else {
            return false;
        };
        let mut reset = false;
        // The SLOs of the plan last advanced, in its order (the steady state): in place.
        let same = state.goodput.len() == p.slos.len()
            && state
                .goodput
                .iter()
                .zip(&p.slos)
                .all(|((n, _), s)| *n == s.name);
        if !same {
            let mut kept = std::mem::take(&mut state.goodput);
            for s in &p.slos {
                let goodput = match kept.iter().position(|(n, _)| *n == s.name) {
                    Some(i) => kept.swap_remove(i).1,
                    None => Goodput::new(),
                };
                state.goodput.push((s.name.clone(), goodput));
            }
        }
        for (s, (_, goodput)) in p.slos.iter().zip(state.goodput.iter_mut()) {
            reset |= goodput.advance(&inputs(p, s, values), s.key);
        }
        state.layout = p.layout;
        type Acceptance = AcceptanceCorrectedItl;
        match &p.acceptance {
            Some(a_plan) if <Acceptance as FrameRule>::check(a_plan, values).is_ok() => {
                let a = state
                    .acceptance
                    .get_or_insert_with(|| <Acceptance as FrameRule>::seed(a_plan));
                if !<Acceptance as FrameRule>::fits(a_plan, a) {
                    *a = <Acceptance as FrameRule>::seed(a_plan);
                }
                // A frame offered again (FORWARD_ONLY) is added to the acceptance state once.
                if a.ts.is_none_or(|t| ts > t) {
                    reset |= <Acceptance as FrameRule>::advance(a_plan, a, values, ts);
                }
            }
            Some(_) => {}
            None => state.acceptance = None,
        }
        // ITL per token: each SLO's tokens and tokens at its threshold, from the estimate.
        if let (Some(a_plan), Some(a)) = (&p.acceptance, &state.acceptance)
            && p.slos.iter().any(|s| s.itl.is_some())
            && a.point.is_some()
            && let Ok(DerivedValue::Histogram { buckets, count, .. }) =
                <Acceptance as FrameRule>::output(a_plan, a)
        {
            for (s, (_, goodput)) in p.slos.iter().zip(state.goodput.iter_mut()) {
                if let Some(i) = s.itl {
                    goodput.itl.advance(count, buckets[i].1, i);
                }
            }
        }
        state.ts = Some(ts);
        reset
    }

    /// # Errors
    /// [`WithheldReason::Incomplete`] when the state holds no frame;
    /// [`WithheldReason::InconsistentInputs`] when an SLI count is negative or its good events
    /// exceed its events (inputs torn apart).
    fn output(plan: &Plan, state: &SloState) -> Result<DerivedValue, WithheldReason> {
        let p = slo_plan(plan).ok_or(WithheldReason::Incomplete)?;
        if !state.has_frame() {
            return Err(WithheldReason::Incomplete);
        }
        let mut values = Vec::with_capacity(p.rows.len());
        for (s, (name, g)) in p.slos.iter().zip(&state.goodput) {
            if *name != s.name {
                return Err(WithheldReason::Incomplete);
            }
            // The `(events, good)` of the SLO's counted SLIs, in `Sli::ALL` order; the rows list
            // every events, then every good events.
            let exact = [
                s.ttft.is_some_and(|m| m.edges.exact),
                s.tpot.is_some_and(|e| e.exact),
                s.e2el.is_some_and(|m| m.edges.exact),
            ];
            let itl = s.itl.map(|_| (g.itl.events, g.itl.good));
            let pairs = || {
                g.sli
                    .iter()
                    .zip(exact)
                    .filter(|(_, x)| *x)
                    .map(|(p, _)| *p)
                    .chain(itl)
            };
            values.extend(pairs().map(|(e, _)| e));
            values.extend(pairs().map(|(_, g)| g));
            values.extend([g.finished, g.lower, g.upper]);
        }
        if values.len() != p.rows.len() || values.iter().any(|v| *v < 0.0) {
            return Err(WithheldReason::InconsistentInputs);
        }
        Ok(DerivedValue::Counters {
            rows: p.rows.clone(),
            values,
        })
    }
}

#[cfg(test)]
mod tests;
