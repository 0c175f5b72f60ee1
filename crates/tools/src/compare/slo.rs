//! The demo's SLO rows: per SLO, each SLI's attainment from vLLM's own histogram, from the
//! corrector's counters and from the simulator's per-request records over the same window; the
//! goodput bounds beside the naive reading and the true goodput, as `vllm bench serve --goodput`
//! counts it.
//!
//! The truth of each SLI counts what vLLM observes in the window `[from, to)` of the two
//! snapshots: TTFT over the requests whose first output came in it (finished or still running),
//! TPOT (requests with at least 2 output tokens) and E2EL over those that finished in it, ITL per
//! token over the tokens of the non-first outputs in it, each of an output of k tokens after a
//! gap g taking g / k. The true goodput is over the requests that finished in the window: good
//! when each of the SLO's TTFT, TPOT and E2EL is at most its threshold, a request of at most one
//! output token having TPOT 0.

use std::fmt::Write as _;

use engine::slo::{Sli, Slo, SloSpec};
use sim::Simulator;

use crate::slo_readings::{Count, GOODPUT_SLIS, Goodput, SloInterval};
use crate::table::{Cell, Table, Tone};

/// One SLI of one SLO over the window.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SliRow {
    /// The SLI.
    pub(crate) sli: Sli,
    /// Its threshold, s.
    pub(crate) threshold: f64,
    /// Its objective, a fraction.
    pub(crate) objective: f64,
    /// vLLM's own histogram at the threshold.
    pub(crate) raw: Option<Count>,
    /// The corrector's counters.
    pub(crate) corrected: Option<Count>,
    /// The simulator's records.
    pub(crate) truth: Count,
}

/// The goodput of one SLO over the window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct GoodputRow {
    /// The corrector's counters (finished, lower, upper).
    pub(crate) corrected: Option<Goodput>,
    /// The naive reading: the least raw attainment over the SLO's goodput SLIs.
    pub(crate) naive: Option<f64>,
    /// Requests that finished in the window.
    pub(crate) truth_finished: u64,
    /// Of those, the ones good on every threshold.
    pub(crate) truth_good: u64,
    /// Requests in flight at the window's start with their first token already out: by how many
    /// the bounds' increase over a window may miss the truth when the window does not start at
    /// the corrector's first scrape (its baseline) and the SLO has a TTFT threshold
    /// (docs/GOODPUT.md, "Goodput over a window"). `None` when the window starts at the baseline or
    /// the SLO has no TTFT threshold: then the bounds bracket the truth exactly.
    pub(crate) slack: Option<u64>,
}

/// One SLO over the window.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SloComparison {
    /// The SLO's name.
    pub(crate) name: String,
    /// The SLO's objective.
    pub(crate) objective: f64,
    /// Its SLIs, in [`Sli::ALL`] order.
    pub(crate) slis: Vec<SliRow>,
    /// Its goodput, when it has a TTFT, TPOT or E2EL threshold.
    pub(crate) goodput: Option<GoodputRow>,
}

/// What the simulator's records say of `slo` over `[from_ns, to_ns)`, counting the requests of
/// the engines `covered` accepts (by `engine` label): each SLI's count, then the finished and
/// good requests, then the requests in flight at `from_ns` with a first token.
fn truth(
    sim: &Simulator,
    slo: &Slo,
    covered: &dyn Fn(&str) -> bool,
    (from_ns, to_ns): (u64, u64),
) -> (Vec<Count>, u64, u64, u64) {
    let window = |ns: u64| (from_ns..to_ns).contains(&ns);
    let records: Vec<_> = sim
        .truth()
        .requests()
        .iter()
        .filter(|r| covered(&r.engine))
        .collect();
    let records = &records[..];
    let running: Vec<_> = sim
        .running_requests()
        .filter(|(engine, _)| covered(&engine.to_string()))
        .map(|(_, r)| r)
        .collect();
    let threshold = |sli: Sli| slo.target(sli).map(|t| t.threshold_seconds);
    let mut counts = Vec::new();
    for target in &slo.slis {
        let t = target.threshold_seconds;
        let mut c = Count::default();
        let mut add = |n: f64, good: bool| {
            c.events += n;
            c.good += if good { n } else { 0.0 };
        };
        match target.sli {
            Sli::Ttft => {
                for r in records {
                    if let (Some(first), Some(ttft)) = (r.first_output_ns(), r.ttft_s())
                        && window(first)
                    {
                        add(1.0, ttft <= t);
                    }
                }
                for r in &running {
                    if let (Some(first), Some(ttft)) = (r.first_output_ns(), r.ttft_s())
                        && window(first)
                    {
                        add(1.0, ttft <= t);
                    }
                }
            }
            Sli::Tpot => {
                for r in records.iter().filter(|r| window(r.finish_ns()) && r.n > 1) {
                    add(1.0, r.tpot_s() <= t);
                }
            }
            Sli::E2el => {
                for r in records.iter().filter(|r| window(r.finish_ns())) {
                    add(1.0, r.e2el_s() <= t);
                }
            }
            Sli::ItlPerToken => {
                let (from_s, to_s) = (from_ns as f64 / 1e9, to_ns as f64 / 1e9);
                let outputs = records
                    .iter()
                    .map(|r| &r.outputs)
                    .chain(running.iter().map(|r| &r.outputs));
                for outputs in outputs {
                    for pair in outputs.windows(2) {
                        let (before, o) = (&pair[0], &pair[1]);
                        if (from_s..to_s).contains(&o.time_s) && o.tokens > 0 {
                            let gap = o.time_s - before.time_s;
                            add(f64::from(o.tokens), gap / f64::from(o.tokens) <= t);
                        }
                    }
                }
            }
        }
        counts.push(c);
    }
    // A request without a TTFT fails a TTFT threshold (the bench has no TTFT to compare).
    let good = |ttft: Option<f64>, tpot: f64, e2el: f64| {
        threshold(Sli::Ttft).is_none_or(|t| ttft.is_some_and(|ttft| ttft <= t))
            && threshold(Sli::Tpot).is_none_or(|t| tpot <= t)
            && threshold(Sli::E2el).is_none_or(|t| e2el <= t)
    };
    let finished: Vec<_> = records.iter().filter(|r| window(r.finish_ns())).collect();
    let good_count = finished
        .iter()
        .filter(|r| good(r.ttft_s(), r.tpot_s(), r.e2el_s()))
        .count() as u64;
    let in_flight = records
        .iter()
        .filter(|r| r.first_output_ns().is_some_and(|f| f < from_ns) && r.finish_ns() >= from_ns)
        .count()
        + running
            .iter()
            .filter(|r| r.first_output_ns().is_some_and(|f| f < from_ns))
            .count();
    (counts, finished.len() as u64, good_count, in_flight as u64)
}

/// Every SLO of `spec` over `[from_ns, to_ns)`: `corrected` holds the corrector's counters and
/// vLLM's raw readings per SLO ([`crate::slo_readings`]); `covered(slo, engine)` says whether the
/// SLO's `match:` covers the simulator's engine of that `engine` label; `baseline` is true when
/// the window starts at the corrector's first scrape.
pub(crate) fn comparisons(
    spec: &SloSpec,
    corrected: &[SloInterval],
    sim: &Simulator,
    covered: &dyn Fn(&Slo, &str) -> bool,
    window: (u64, u64),
    baseline: bool,
) -> Vec<SloComparison> {
    spec.slos
        .iter()
        .map(|slo| {
            let read = corrected.iter().find(|s| s.name == slo.name);
            let (counts, finished, good, in_flight) =
                truth(sim, slo, &|engine| covered(slo, engine), window);
            let slis = slo
                .slis
                .iter()
                .zip(counts)
                .map(|(target, truth)| SliRow {
                    sli: target.sli,
                    threshold: target.threshold_seconds,
                    objective: target.objective,
                    raw: read.and_then(|r| r.raw.get(&target.sli).copied()),
                    corrected: read.and_then(|r| r.slis.get(&target.sli).copied()),
                    truth,
                })
                .collect();
            let has_goodput = slo.slis.iter().any(|t| GOODPUT_SLIS.contains(&t.sli));
            let goodput = has_goodput.then(|| GoodputRow {
                corrected: read.and_then(|r| r.goodput),
                naive: read.and_then(|r| r.naive_goodput(slo)),
                truth_finished: finished,
                truth_good: good,
                slack: (!baseline && slo.target(Sli::Ttft).is_some()).then_some(in_flight),
            });
            SloComparison {
                name: slo.name.clone(),
                objective: slo.objective,
                slis,
                goodput,
            }
        })
        .collect()
}

fn percent(v: Option<f64>) -> String {
    v.map_or_else(|| "—".to_owned(), |v| format!("{:.2} %", v * 100.0))
}

/// An objective as a percentage without trailing zeros: 0.99 gives `99 %`, 0.995 `99.5 %`.
fn objective(fraction: f64) -> String {
    format!("{} %", (fraction * 100.0 * 1e6).round() / 1e6)
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "null".to_owned(), |v| v.to_string())
}

/// The row of one SLI: its threshold, raw, corrected and true attainment, and its events.
fn sli_row(slo: &SloComparison, row: &SliRow) -> Vec<Cell> {
    let corrected = row.corrected.and_then(|c| c.ratio());
    let truth = row.truth.ratio();
    let tone = match corrected {
        Some(c) if Some(c) == truth => Tone::Good,
        Some(_) => Tone::Bold,
        None => Tone::Dim,
    };
    let unit = if row.sli == Sli::ItlPerToken {
        " tokens"
    } else {
        ""
    };
    let own_objective = if row.objective == slo.objective {
        String::new()
    } else {
        format!(" (objective {})", objective(row.objective))
    };
    vec![
        Cell::plain(format!(
            "{} ≤ {} s{own_objective}",
            row.sli.label(),
            row.threshold
        )),
        Cell::plain(percent(row.raw.and_then(|c| c.ratio()))),
        Cell::new(percent(corrected), tone),
        Cell::plain(percent(truth)),
        Cell::plain(format!(
            "{} ({}){unit}",
            row.corrected
                .map_or_else(|| "—".to_owned(), |c| c.events.to_string()),
            row.truth.events
        )),
    ]
}

/// The two goodput rows of an SLO: as a share of the finished requests, and in requests per
/// second over `window_s`.
fn goodput_rows(g: &GoodputRow, window_s: f64) -> [Vec<Cell>; 2] {
    let truth = (g.truth_finished > 0).then(|| g.truth_good as f64 / g.truth_finished as f64);
    let band = g.corrected.and_then(|c| c.ratios());
    let inside = |lower: f64, upper: f64, v: f64| lower <= v && v <= upper;
    let tone = match (g.corrected, band) {
        (Some(c), Some(_)) if inside(c.lower, c.upper, g.truth_good as f64) => Tone::Good,
        (Some(_), Some(_)) => Tone::Bad,
        _ => Tone::Dim,
    };
    let rate = |v: f64| format!("{:.2}", v / window_s);
    [
        vec![
            Cell::plain("goodput, share of finished"),
            Cell::plain(format!("{} naive", percent(g.naive))),
            Cell::new(
                band.map_or_else(
                    || "—".to_owned(),
                    |(l, u)| format!("{:.2}–{:.2} %", l * 100.0, u * 100.0),
                ),
                tone,
            ),
            Cell::plain(percent(truth)),
            Cell::plain(format!(
                "{} ({})",
                g.corrected
                    .map_or_else(|| "—".to_owned(), |c| c.finished.to_string()),
                g.truth_finished
            )),
        ],
        vec![
            Cell::plain("goodput, requests/s"),
            Cell::plain(""),
            Cell::new(
                g.corrected.map_or_else(
                    || "—".to_owned(),
                    |c| format!("{}–{}", rate(c.lower), rate(c.upper)),
                ),
                tone,
            ),
            Cell::plain(rate(g.truth_good as f64)),
            Cell::plain(""),
        ],
    ]
}

/// The terminal table of the SLOs and the notes under it.
pub(crate) fn render(slos: &[SloComparison], window_s: f64, color: bool) -> String {
    let mut s = String::new();
    for slo in slos {
        let mut table = Table::new(&[
            &format!("SLO {}, objective {}", slo.name, objective(slo.objective)),
            "raw vLLM",
            "corrected",
            "truth",
            "events (truth)",
        ]);
        for row in &slo.slis {
            table.push(sli_row(slo, row));
        }
        if let Some(g) = &slo.goodput {
            for row in goodput_rows(g, window_s) {
                table.push(row);
            }
        }
        s.push('\n');
        s.push_str(&table.render(color));
        for row in slo.slis.iter().filter(|r| r.corrected.is_none()) {
            let _ = writeln!(
                s,
                "{} of SLO {} is not counted by the corrector: {} s is not a bucket edge, or an input is missing (/status says which).",
                row.sli.label(),
                slo.name,
                row.threshold
            );
        }
        if let Some(n) = slo.goodput.and_then(|g| g.slack) {
            let _ = writeln!(
                s,
                "The window starts after the corrector's first scrape: its goodput bounds may miss by up to the {n} requests in flight at the window's start."
            );
        }
    }
    if !slos.is_empty() {
        s.push_str(
            "\nAttainment = good / events over the window. Raw vLLM reads vLLM's own histogram at the threshold (its TPOT\n\
             counts requests of ≤ 1 token as 0 s, its ITL one event per output); goodput counts finished requests that met\n\
             every TTFT, TPOT and E2EL threshold as vllm bench serve --goodput does (a request of ≤ 1 token passes TPOT);\n\
             naive = the least raw attainment.\n",
        );
    }
    s
}

/// The plain `key=value` lines of the SLOs (values at full precision, `null` when missing).
pub(crate) fn plain_lines(slos: &[SloComparison], at_s: f64) -> String {
    let mut s = String::new();
    for slo in slos {
        for row in &slo.slis {
            let _ = writeln!(
                s,
                "at_s={at_s:.3} slo={} sli={} threshold={} objective={} raw={} corrected={} truth={} events={} truth_events={}",
                slo.name,
                row.sli,
                row.threshold,
                row.objective,
                opt(row.raw.and_then(|c| c.ratio())),
                opt(row.corrected.and_then(|c| c.ratio())),
                opt(row.truth.ratio()),
                opt(row.corrected.map(|c| c.events)),
                row.truth.events
            );
        }
        if let Some(g) = &slo.goodput {
            let _ = writeln!(
                s,
                "at_s={at_s:.3} slo={} goodput_lower={} goodput_upper={} finished={} naive={} truth_good={} truth_finished={} slack={}",
                slo.name,
                opt(g.corrected.map(|c| c.lower)),
                opt(g.corrected.map(|c| c.upper)),
                opt(g.corrected.map(|c| c.finished)),
                opt(g.naive),
                g.truth_good,
                g.truth_finished,
                g.slack.map_or_else(|| "null".to_owned(), |n| n.to_string())
            );
        }
    }
    s
}
