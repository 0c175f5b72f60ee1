//! The SLO family's plan: for each SLO that covers a group, which of the group's roles each of
//! its SLIs reads (the buckets at or around each threshold), the rows the family serves, and why
//! an SLI is not counted where it is not (docs/SLO.md, "SLO counters").

use std::sync::Arc;

use super::super::{Plan, PlanContext, Unplanned, acceptance_corrected_itl, find, missing};
use crate::classify::{Input, Part, RoleKey};
use crate::reasons::WithheldReason;
use crate::slo::{Sli, SliNote, SliNoteReason, Slo};
use crate::values::{CounterMetric, CounterRow};

/// The buckets around a threshold T in one histogram: the largest `le` ≤ T (`None`: T is below
/// every edge, 0 observations surely at most T) and the smallest `le` ≥ T (the `+Inf` bucket when
/// T is above every finite edge).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Edges {
    /// Role of the bucket at the largest edge ≤ T.
    pub(super) lo: Option<usize>,
    /// Role of the bucket at the smallest edge ≥ T.
    pub(super) hi: usize,
    /// T is an edge: `lo` and `hi` are that bucket, and the count at T is exact.
    pub(super) exact: bool,
}

/// A histogram an SLI reads: its `_count` role (the events) and the buckets around T.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Measured {
    /// Role of `_count`.
    pub(super) count: usize,
    /// The buckets around the threshold.
    pub(super) edges: Edges,
}

/// One SLO's layout in one group.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct PlannedSlo {
    /// The SLO's name, the `slo` label.
    pub(super) name: String,
    /// TTFT: `vllm:time_to_first_token_seconds`.
    pub(super) ttft: Option<Measured>,
    /// TPOT: the buckets of vLLM's request TPOT histogram (its `_count` is the finished requests).
    pub(super) tpot: Option<Edges>,
    /// E2EL: `vllm:e2e_request_latency_seconds`.
    pub(super) e2el: Option<Measured>,
    /// ITL per token: the index of the bucket at T in the acceptance-corrected ITL buckets, when
    /// T is one of its edges.
    pub(super) itl: Option<usize>,
    /// False when an SLI of the SLO lacks an input: its goodput then counts every request that
    /// finishes in its upper bound and none in its lower one, until the input is back.
    pub(super) complete: bool,
    /// A fingerprint of the SLO's goodput inputs (thresholds, the edges around them, whether
    /// the finish reasons are read): frames of two keys are not compared bucket by bucket.
    pub(super) key: u64,
    /// The SLIs counted ([`PlannedSlo::exact`]'s length).
    pub(super) counted: usize,
}

impl PlannedSlo {
    /// The SLIs whose event counters are served, in [`Sli::ALL`] order.
    pub(super) fn exact(&self) -> Vec<Sli> {
        let mut out = Vec::new();
        if self.ttft.is_some_and(|m| m.edges.exact) {
            out.push(Sli::Ttft);
        }
        if self.tpot.is_some_and(|e| e.exact) {
            out.push(Sli::Tpot);
        }
        if self.e2el.is_some_and(|m| m.edges.exact) {
            out.push(Sli::E2el);
        }
        if self.itl.is_some() {
            out.push(Sli::ItlPerToken);
        }
        out
    }
}

/// The SLO family's plan beyond the roles (its [`Layout`](super::super::Layout), [`Plan::layout`]).
#[derive(Debug, PartialEq)]
pub(crate) struct SloPlan {
    /// Each SLO covering the group, in file order.
    pub(super) slos: Vec<PlannedSlo>,
    /// The rows served, in [`rows`] order.
    pub(super) rows: Arc<[CounterRow]>,
    /// Role of the request TPOT `_count`: one observation per finished request.
    pub(super) finished: usize,
    /// Role of `vllm:request_generation_tokens_bucket{le="1"}`: finished requests of at most one
    /// output token.
    pub(super) short: usize,
    /// Role of `vllm:request_generation_tokens_count`: observed for each finished request in the
    /// same loop as the request TPOT, so a frame where the two disagree is torn.
    pub(super) generated: usize,
    /// Roles of `vllm:request_success_total{finished_reason="abort"|"error"}` the group sends,
    /// when an SLO has a TTFT threshold and they count every abnormal finish
    /// ([`abnormal_finishes`]); empty otherwise.
    pub(super) abnormal: Vec<usize>,
    /// The acceptance-corrected ITL plan, when an SLO reads ITL per token.
    pub(super) acceptance: Option<Plan>,
    /// Why SLIs of the SLOs are not counted, in SLO then SLI order.
    pub(super) notes: Arc<[SliNote]>,
    /// A fingerprint of the layout (names, thresholds, edges): a state of another layout is
    /// re-seeded, and no value is held across layouts ([`CounterRow::layout`]).
    pub(super) layout: u64,
}

impl super::super::Layout for SloPlan {
    /// Why SLIs of the SLOs are not counted, in SLO then SLI order.
    fn notes(&self) -> &Arc<[SliNote]> {
        &self.notes
    }
    fn same(&self, other: &dyn super::super::Layout) -> bool {
        other.as_any().downcast_ref::<SloPlan>() == Some(self)
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The buckets of `input` as `(le, role)`, ascending, ending with `+Inf`; `None` without `+Inf`.
fn buckets(learned: &[(RoleKey, usize)], input: Input) -> Option<Vec<(f64, usize)>> {
    let mut b: Vec<(f64, usize)> = learned
        .iter()
        .filter(|(k, _)| k.input == input)
        .map(|(k, r)| (k.bound(), *r))
        .collect();
    b.sort_by(|a, b| a.0.total_cmp(&b.0));
    (b.last()?.0 == f64::INFINITY).then_some(b)
}

/// The buckets of `buckets` around `t`, and the `le` values of those edges.
fn edges(buckets: &[(f64, usize)], t: f64) -> (Edges, Option<f64>, f64) {
    let lo = buckets.iter().rev().find(|(le, _)| *le <= t).copied();
    let hi = buckets
        .iter()
        .find(|(le, _)| *le >= t)
        .copied()
        .unwrap_or(buckets[buckets.len() - 1]);
    let e = Edges {
        lo: lo.map(|(_, r)| r),
        hi: hi.1,
        exact: lo.is_some_and(|(le, _)| le == t),
    };
    (e, lo.map(|(le, _)| le), hi.0)
}

/// FNV-1a over the layout's bytes: stable across builds, so a state file's state fits the same
/// layout after a restart.
#[derive(Debug)]
struct Fingerprint(u64);

impl Fingerprint {
    fn new() -> Fingerprint {
        Fingerprint(0xcbf2_9ce4_8422_2325)
    }
    fn bytes(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn f64(&mut self, v: f64) {
        self.bytes(&v.to_bits().to_le_bytes());
    }
}

/// The vLLM histogram an SLI reads its buckets from, and its `--custom-histogram-buckets` key.
fn source(sli: Sli) -> (&'static str, &'static str) {
    match sli {
        Sli::Ttft => ("vllm:time_to_first_token_seconds", "time_to_first_token"),
        Sli::Tpot => (
            "vllm:request_time_per_output_token_seconds",
            "inter_token_latency",
        ),
        Sli::E2el => ("vllm:e2e_request_latency_seconds", "request_latency"),
        Sli::ItlPerToken => ("vllm:inter_token_latency_seconds", "inter_token_latency"),
    }
}

/// The note of a threshold between two edges: the nearest edges and how to add T as an edge.
fn not_an_edge(slo: &str, sli: Sli, t: f64, lo: Option<f64>, hi: f64) -> SliNote {
    let (histogram, key) = source(sli);
    let fmt = protocol::float::format_value;
    let below = lo.map_or_else(|| "none".to_owned(), fmt);
    let above = if hi.is_infinite() {
        "+Inf".to_owned()
    } else {
        fmt(hi)
    };
    SliNote {
        slo: slo.to_owned(),
        sli,
        reason: SliNoteReason::NotABucketEdge,
        detail: format!(
            "{t} s is not an le of {histogram} (nearest: {below} below, {above} above): add it \
             to vLLM's --custom-histogram-buckets under \"{key}\", or use an edge; the goodput \
             bounds use the edges around it",
            t = fmt(t)
        ),
    }
}

/// The note of an SLI whose input series the group lacks.
fn lacking(slo: &str, sli: Sli, input: Input) -> SliNote {
    SliNote {
        slo: slo.to_owned(),
        sli,
        reason: SliNoteReason::Incomplete,
        detail: format!(
            "no {}: regenerate the keep rule with `vllm-corrector relabel --config.file` so it \
             sends what the SLOs read; meanwhile the SLO's goodput counts every request that \
             finishes in its upper bound and none in its lower one",
            super::super::input_name(input)
        ),
    }
}

/// Plans one histogram SLI: its `_count` and buckets around `t`, or a note.
fn measured(
    learned: &[(RoleKey, usize)],
    slo: &str,
    (sli, t): (Sli, f64),
    (bucket, count): (Input, Input),
    notes: &mut Vec<SliNote>,
    print: &mut Fingerprint,
) -> Result<Measured, ()> {
    let found = buckets(learned, bucket).ok_or(bucket).and_then(|b| {
        let count = find(learned, count).ok_or(count)?;
        Ok((b, count))
    });
    match found {
        Ok((b, count)) => {
            let (e, lo, hi) = edges(&b, t);
            if !e.exact {
                notes.push(not_an_edge(slo, sli, t, lo, hi));
            }
            print.f64(lo.unwrap_or(f64::NAN));
            print.f64(hi);
            Ok(Measured { count, edges: e })
        }
        Err(input) => {
            notes.push(lacking(slo, sli, input));
            Err(())
        }
    }
}

/// Plans one SLO in a group.
fn plan_slo(
    learned: &[(RoleKey, usize)],
    context: &PlanContext<'_>,
    slo: &Slo,
    tpot: &[(f64, usize)],
    acceptance: &mut Option<Result<Plan, Unplanned>>,
    notes: &mut Vec<SliNote>,
    print: &mut Fingerprint,
) -> PlannedSlo {
    print.bytes(slo.name.as_bytes());
    let mut planned = PlannedSlo {
        name: slo.name.clone(),
        ttft: None,
        tpot: None,
        e2el: None,
        itl: None,
        complete: true,
        key: 0,
        counted: 0,
    };
    for target in &slo.slis {
        let t = target.threshold_seconds;
        print.bytes(target.sli.name().as_bytes());
        print.f64(t);
        let name = &slo.name;
        let sli = (target.sli, t);
        match target.sli {
            Sli::Ttft => {
                let inputs = (Input::TtftBucket, Input::TtftCount);
                planned.ttft = measured(learned, name, sli, inputs, notes, print).ok();
                planned.complete &= planned.ttft.is_some();
            }
            Sli::E2el => {
                let inputs = (Input::E2eBucket, Input::E2eCount);
                planned.e2el = measured(learned, name, sli, inputs, notes, print).ok();
                planned.complete &= planned.e2el.is_some();
            }
            Sli::Tpot => {
                let (e, lo, hi) = edges(tpot, t);
                if !e.exact {
                    notes.push(not_an_edge(name, Sli::Tpot, t, lo, hi));
                }
                print.f64(lo.unwrap_or(f64::NAN));
                print.f64(hi);
                planned.tpot = Some(e);
            }
            Sli::ItlPerToken => {
                let plan = acceptance
                    .get_or_insert_with(|| acceptance_corrected_itl::plan(learned, context));
                match plan {
                    Ok(p) => {
                        let bounds: Vec<(f64, usize)> = p
                            .hist
                            .iter()
                            .flat_map(|h| h.buckets.iter().enumerate().map(|(i, (le, _))| (*le, i)))
                            .collect();
                        let (e, lo, hi) = edges(&bounds, t);
                        if e.exact {
                            planned.itl = Some(e.hi);
                        } else {
                            notes.push(not_an_edge(name, Sli::ItlPerToken, t, lo, hi));
                        }
                        print.f64(lo.unwrap_or(f64::NAN));
                        print.f64(hi);
                    }
                    Err(u) => notes.push(lacking(
                        name,
                        Sli::ItlPerToken,
                        u.missing.unwrap_or(Input::Itl(Part::Bucket)),
                    )),
                }
            }
        }
    }
    print.bytes(&[u8::from(planned.complete)]);
    planned.key = print.0;
    planned.counted = planned.exact().len();
    planned
}

/// The rows of `slos` in serving order: per SLO the events and then the good events of each
/// counted SLI, then the finished requests and the lower and upper goodput bounds.
fn rows(slos: &[PlannedSlo], layout: u64) -> Vec<CounterRow> {
    let label = |name: &str, value: &str| (name.to_owned(), value.to_owned());
    let mut rows = Vec::new();
    for s in slos {
        let exact = s.exact();
        for metric in [CounterMetric::SloEvents, CounterMetric::SloGoodEvents] {
            for sli in &exact {
                rows.push(CounterRow {
                    metric,
                    labels: vec![label("slo", &s.name), label("sli", sli.name())],
                    layout,
                });
            }
        }
        rows.push(CounterRow {
            metric: CounterMetric::SloFinishedRequests,
            labels: vec![label("slo", &s.name)],
            layout,
        });
        for bound in ["lower", "upper"] {
            rows.push(CounterRow {
                metric: CounterMetric::GoodputRequests,
                labels: vec![label("bound", bound), label("slo", &s.name)],
                layout,
            });
        }
    }
    rows
}

/// Plan: the request TPOT histogram (its `_count` is the finished requests) and
/// `generation_tokens_bucket{le="1"}` always; per SLO covering the group the buckets around each
/// threshold and the `_count` of the TTFT and E2E histograms; the acceptance-corrected ITL plan
/// when an SLO has an ITL-per-token threshold.
///
/// # Errors
/// [`WithheldReason::NoSlo`] when no SLO covers the group; a missing request TPOT histogram or
/// `le="1"` token bucket ([`WithheldReason::NoLeOneBound`] when the token histogram has no 1).
pub(super) fn plan(
    learned: &[(RoleKey, usize)],
    context: &PlanContext<'_>,
) -> Result<Plan, Unplanned> {
    let covering: Vec<&Slo> = context.slos.covering(context.labels).collect();
    if covering.is_empty() {
        return Err(WithheldReason::NoSlo.into());
    }
    let tpot = super::super::need_hist(learned, Input::Tpot)?;
    let short = match find(learned, Input::GenLe1) {
        Some(r) => r,
        None if find(learned, Input::GenCount).is_some() => {
            return Err(WithheldReason::NoLeOneBound.into());
        }
        None => return Err(missing(Input::GenLe1)),
    };
    let generated = super::super::need(learned, Input::GenCount)?;
    let mut notes = Vec::new();
    let mut print = Fingerprint::new();
    let mut acceptance = None;
    let mut slos: Vec<PlannedSlo> = covering
        .into_iter()
        .map(|slo| {
            let tpot = &tpot.buckets;
            let mut mine = Fingerprint::new();
            let planned = plan_slo(
                learned,
                context,
                slo,
                tpot,
                &mut acceptance,
                &mut notes,
                &mut mine,
            );
            print.bytes(&planned.key.to_le_bytes());
            planned
        })
        .collect();
    let acceptance = acceptance.and_then(Result::ok);
    if let Some(h) = acceptance.as_ref().and_then(|p| p.hist.as_ref()) {
        for b in h.finite_bounds() {
            print.f64(b);
        }
    }
    let abnormal = if slos.iter().any(|s| s.ttft.is_some()) {
        abnormal_finishes(learned, context.lapsed)
    } else {
        Vec::new()
    };
    let read = [u8::try_from(abnormal.len()).unwrap_or(u8::MAX)];
    print.bytes(&read);
    for s in slos.iter_mut().filter(|s| s.ttft.is_some()) {
        let mut mine = Fingerprint(s.key);
        mine.bytes(&read);
        s.key = mine.0;
    }
    let mut series: Vec<usize> = abnormal.clone();
    series.push(generated);
    for s in &slos {
        for m in s.ttft.iter().chain(s.e2el.iter()) {
            series.extend(m.edges.lo.iter().copied().chain([m.edges.hi, m.count]));
        }
    }
    series.extend(acceptance.iter().flat_map(Plan::roles));
    series.sort_unstable();
    series.dedup();
    let slo = SloPlan {
        rows: rows(&slos, print.0).into(),
        finished: tpot.count,
        short,
        generated,
        slos,
        abnormal,
        acceptance,
        notes: notes.into(),
        layout: print.0,
    };
    Ok(Plan {
        hist: Some(tpot),
        scalars: vec![short],
        series,
        layout: Some(Arc::new(slo)),
    })
}

/// The roles of the abnormal finish reasons (`abort`, `error`) when together they count every
/// request that may finish without a token; empty when they may not, and every request of at most
/// one token is then taken as one that may lack a TTFT observation (docs/GOODPUT.md, "The facts the
/// bounds rest on"). They may not when `abort`, which every vLLM release sends, is missing (a
/// relabeling that drops it), or when one of them lapsed while the group kept sending the rest:
/// read as the whole, the rest would count too few. (A release before `error` existed sends
/// `abort` alone, which is the whole.)
pub(super) fn abnormal_finishes(learned: &[(RoleKey, usize)], lapsed: &[RoleKey]) -> Vec<usize> {
    let abnormal = |k: &RoleKey| k.input == Input::AbnormalFinishes;
    // `abort` is the first of `classify::FINISHED_ABNORMALLY`: its key holds index 0.
    let abort = RoleKey {
        input: Input::AbnormalFinishes,
        le_bits: 0f64.to_bits(),
    };
    if lapsed.iter().any(abnormal) || !learned.iter().any(|(k, _)| *k == abort) {
        return Vec::new();
    }
    learned
        .iter()
        .filter(|(k, _)| abnormal(k))
        .map(|(_, r)| *r)
        .collect()
}
