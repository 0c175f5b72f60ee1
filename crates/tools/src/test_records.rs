//! Test support: the simulator's finished requests as the SLO tests read them, from the outputs'
//! engine timestamps (seconds), independently of the tools' own truth (`compare::slo`) and of the
//! simulator's accessors, to count an SLI's events and good events over a window.

use sim::Simulator;

use crate::slo_readings::Count;

/// One finished request: its times from its outputs, s.
#[derive(Debug, Clone)]
pub(crate) struct Req {
    /// The `engine` label.
    pub(crate) engine: String,
    /// First output.
    pub(crate) first_s: f64,
    /// Last output (the finish).
    pub(crate) finish_s: f64,
    /// First output − arrival.
    pub(crate) ttft: f64,
    /// vLLM's request TPOT: (last − first output) / (n − 1), 0 for at most one output token.
    pub(crate) tpot: f64,
    /// Finish − arrival.
    pub(crate) e2el: f64,
    /// Output tokens.
    pub(crate) n: u32,
}

/// Every request `sim` has finished.
pub(crate) fn finished(sim: &Simulator) -> Vec<Req> {
    sim.truth()
        .requests()
        .iter()
        .map(|r| {
            let first = r.outputs[0].time_s;
            let finish = r.outputs.last().map_or(first, |o| o.time_s);
            Req {
                engine: r.engine.clone(),
                first_s: first,
                finish_s: finish,
                ttft: first - r.arrival_s,
                tpot: if r.n > 1 {
                    (finish - first) / f64::from(r.n - 1)
                } else {
                    0.0
                },
                e2el: finish - r.arrival_s,
                n: r.n,
            }
        })
        .collect()
}

/// The requests `keep` selects as events, those `good` selects among them as good events.
pub(crate) fn count(
    reqs: &[Req],
    keep: impl Fn(&Req) -> bool,
    good: impl Fn(&Req) -> bool,
) -> Count {
    let kept: Vec<&Req> = reqs.iter().filter(|r| keep(r)).collect();
    Count {
        events: kept.len() as f64,
        good: kept.iter().filter(|r| good(r)).count() as f64,
    }
}
