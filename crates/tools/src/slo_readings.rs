//! What two dumps say about each SLO over the interval between them (docs/SLO.md, "SLO
//! counters"): per SLI the increases of the corrector's event and good-event counters, beside the
//! reading of vLLM's own histogram at the threshold; the increases of the finished requests and
//! of the goodput bounds, beside the naive goodput reading.
//!
//! Every value is an increase `after − before`, as PromQL's `increase()` without extrapolation;
//! a ratio is a ratio of increases, as `rate(good[w]) / rate(events[w])`. The counters are read
//! as the corrector serves them (`vllm_corrected_slo_events_total{slo, sli}`, …), whether a dump
//! held them or the engine computed them from a raw dump; the raw readings need the SLO's
//! thresholds, so they come from the spec (`--config.file`, else the shipped default) and only
//! for the SLOs it names.

use std::collections::BTreeMap;

use engine::slo::{Sli, Slo, SloSet, SloSpec};
use engine::{CounterMetric, DEFAULT_METRIC_PREFIX};

use crate::presentation::SLO;
use crate::readings::{Dump, GroupSeries, Hist};

/// The events and good events of one SLI over an interval: requests, or tokens for
/// `itl_per_token`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Count {
    /// Events.
    pub(crate) events: f64,
    /// Events at most the threshold.
    pub(crate) good: f64,
}

impl Count {
    /// `good / events`: the SLI's attainment; `None` without an event.
    pub(crate) fn ratio(&self) -> Option<f64> {
        (self.events > 0.0).then(|| self.good / self.events)
    }

    fn add(&mut self, other: &Count) {
        self.events += other.events;
        self.good += other.good;
    }
}

/// The goodput counters' increases over an interval, in requests.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Goodput {
    /// Finished requests (`vllm_corrected_slo_finished_requests_total`).
    pub(crate) finished: f64,
    /// Requests surely good on every threshold (`bound="lower"`).
    pub(crate) lower: f64,
    /// Requests possibly good on every threshold (`bound="upper"`).
    pub(crate) upper: f64,
}

impl Goodput {
    /// `(lower, upper) / finished`: the goodput bounds as fractions of the finished requests;
    /// `None` when none finished.
    pub(crate) fn ratios(&self) -> Option<(f64, f64)> {
        (self.finished > 0.0).then(|| (self.lower / self.finished, self.upper / self.finished))
    }

    fn add(&mut self, other: &Goodput) {
        self.finished += other.finished;
        self.lower += other.lower;
        self.upper += other.upper;
    }
}

/// One SLO over an interval, in one group or summed over groups.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SloInterval {
    /// The SLO's name (the `slo` label).
    pub(crate) name: String,
    /// The corrector's counters of each SLI it counts.
    pub(crate) slis: BTreeMap<Sli, Count>,
    /// vLLM's own histograms at each threshold of the spec's SLO of that name, where the
    /// histogram has a bucket at the threshold ([`SLO`]'s `raw`).
    pub(crate) raw: BTreeMap<Sli, Count>,
    /// The goodput counters, when the corrector serves them for the SLO.
    pub(crate) goodput: Option<Goodput>,
}

/// The SLIs `vllm bench serve --goodput` judges a request by.
pub(crate) const GOODPUT_SLIS: [Sli; 3] = [Sli::Ttft, Sli::Tpot, Sli::E2el];

impl SloInterval {
    /// The corrector's attainment of `sli`: good / events.
    pub(crate) fn attainment(&self, sli: Sli) -> Option<f64> {
        self.slis.get(&sli)?.ratio()
    }

    /// vLLM's raw reading of `sli` at the threshold: its bucket / its `_count`.
    pub(crate) fn raw_attainment(&self, sli: Sli) -> Option<f64> {
        self.raw.get(&sli)?.ratio()
    }

    /// The naive goodput a user reads from vLLM's own series: the least raw attainment over the
    /// SLO's goodput SLIs (TTFT, TPOT, E2EL) in `slo`; `None` unless each has one.
    pub(crate) fn naive_goodput(&self, slo: &Slo) -> Option<f64> {
        let mut least: Option<f64> = None;
        for target in slo.slis.iter().filter(|t| GOODPUT_SLIS.contains(&t.sli)) {
            let raw = self.raw_attainment(target.sli)?;
            least = Some(least.map_or(raw, |l| l.min(raw)));
        }
        least
    }

    fn add(&mut self, other: &SloInterval) {
        for (map, theirs) in [(&mut self.slis, &other.slis), (&mut self.raw, &other.raw)] {
            for (sli, count) in theirs {
                map.entry(*sli).or_default().add(count);
            }
        }
        match (&mut self.goodput, &other.goodput) {
            (Some(mine), Some(theirs)) => mine.add(theirs),
            (None, Some(theirs)) => self.goodput = Some(*theirs),
            _ => {}
        }
    }
}

/// The increase of one counter row (`name` with row labels `dims`), `None` when a dump lacks it
/// or it fell (a counter reset).
fn delta(
    before: &GroupSeries,
    after: &GroupSeries,
    name: &str,
    dims: &[(&str, &str)],
) -> Option<f64> {
    let (b, a) = (before.get(name, dims)?, after.get(name, dims)?);
    (a.value >= b.value).then_some(a.value - b.value)
}

fn counter(metric: CounterMetric) -> String {
    format!("{}_total", metric.name())
}

/// The SLO names of the counter rows in `group`.
fn names_in(group: &GroupSeries) -> Vec<String> {
    let mut names: Vec<String> = group
        .series
        .keys()
        .filter(|(name, _)| SLO.is_counter(name))
        .filter_map(|(_, dims)| {
            dims.iter()
                .find(|(k, _)| k == "slo")
                .map(|(_, v)| v.clone())
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The increase of vLLM's histogram of `sli` in its bucket at `threshold`: `None` when a dump
/// lacks the histogram, it has no bucket there, or it was reset.
fn raw_count(before: &GroupSeries, after: &GroupSeries, sli: Sli, threshold: f64) -> Option<Count> {
    let mut family = format!("{DEFAULT_METRIC_PREFIX}{}", SLO.raw_histogram(sli));
    if sli == Sli::ItlPerToken && !after.has_family(&family) {
        family = format!("{DEFAULT_METRIC_PREFIX}time_per_output_token_seconds");
    }
    let h: Hist = after.hist(&family)?.minus(&before.hist(&family)?)?;
    let good = h.buckets.iter().find(|(le, _)| *le == threshold)?.1;
    Some(Count {
        events: h.count,
        good,
    })
}

/// vLLM's own readings of each threshold of `slo` over the interval of one group.
pub(crate) fn raw_between(
    before: &GroupSeries,
    after: &GroupSeries,
    slo: &Slo,
) -> BTreeMap<Sli, Count> {
    slo.slis
        .iter()
        .filter_map(|t| Some((t.sli, raw_count(before, after, t.sli, t.threshold_seconds)?)))
        .collect()
}

/// Each SLO whose counters the group holds, in `spec` order (SLOs the spec does not name after
/// them, by name), over the interval from `before` to `after` of one group.
pub(crate) fn between(
    before: &GroupSeries,
    after: &GroupSeries,
    spec: &SloSpec,
) -> Vec<SloInterval> {
    let mut names = names_in(after);
    let rank = |n: &String| {
        spec.slos
            .iter()
            .position(|s| s.name == *n)
            .unwrap_or(usize::MAX)
    };
    names.sort_by_key(|n| (rank(n), n.clone()));
    let (events, good) = (
        counter(CounterMetric::SloEvents),
        counter(CounterMetric::SloGoodEvents),
    );
    let finished = counter(CounterMetric::SloFinishedRequests);
    let goodput = counter(CounterMetric::GoodputRequests);
    names
        .into_iter()
        .map(|name| {
            let mut slis = BTreeMap::new();
            for sli in Sli::ALL {
                let dims = [("sli", sli.name()), ("slo", name.as_str())];
                if let (Some(e), Some(g)) = (
                    delta(before, after, &events, &dims),
                    delta(before, after, &good, &dims),
                ) {
                    slis.insert(sli, Count { events: e, good: g });
                }
            }
            let of = [("slo", name.as_str())];
            let bound = |b: &str| delta(before, after, &goodput, &[("bound", b), ("slo", &name)]);
            let goodput = match (
                delta(before, after, &finished, &of),
                bound("lower"),
                bound("upper"),
            ) {
                (Some(finished), Some(lower), Some(upper)) => Some(Goodput {
                    finished,
                    lower,
                    upper,
                }),
                _ => None,
            };
            let raw = spec
                .get(&name)
                .map(|slo| raw_between(before, after, slo))
                .unwrap_or_default();
            SloInterval {
                name,
                slis,
                raw,
                goodput,
            }
        })
        .collect()
}

/// [`between`] summed over every group of both dumps, per SLO: numerators and denominators are
/// summed, never ratios. A group that lacks an SLI (not counted there) adds nothing to it.
pub(crate) fn total(before: &Dump, after: &Dump, spec: &SloSpec) -> Vec<SloInterval> {
    let mut out: Vec<SloInterval> = Vec::new();
    for (key, a) in &after.groups {
        let Some(b) = before.groups.get(key) else {
            continue;
        };
        for slo in between(b, a, spec) {
            match out.iter_mut().find(|s| s.name == slo.name) {
                Some(sum) => sum.add(&slo),
                None => out.push(slo),
            }
        }
    }
    out
}

/// One reading per SLO of `spec`, in its order: the counters' increases between the dumps of
/// `counters` ([`total`]; none for an SLO they do not hold) and vLLM's own readings between the
/// dumps of `raw` ([`raw_total`]). The demo reads its corrector's `/metrics` and the simulator's
/// as two pairs of dumps.
pub(crate) fn for_spec(
    spec: &SloSpec,
    set: &SloSet,
    counters: (&Dump, &Dump),
    raw: (&Dump, &Dump),
) -> Vec<SloInterval> {
    let counted = total(counters.0, counters.1, spec);
    spec.slos
        .iter()
        .map(|slo| {
            let mut read = counted
                .iter()
                .find(|c| c.name == slo.name)
                .cloned()
                .unwrap_or_else(|| SloInterval {
                    name: slo.name.clone(),
                    slis: BTreeMap::new(),
                    raw: BTreeMap::new(),
                    goodput: None,
                });
            read.raw = raw_total(raw.0, raw.1, slo, |labels| set.covers(&slo.name, labels));
            read
        })
        .collect()
}

/// [`raw_between`] summed over the groups of both dumps that `covered` (the SLO's `match:`)
/// accepts.
pub(crate) fn raw_total(
    before: &Dump,
    after: &Dump,
    slo: &Slo,
    covered: impl Fn(&[(String, String)]) -> bool,
) -> BTreeMap<Sli, Count> {
    let mut out: BTreeMap<Sli, Count> = BTreeMap::new();
    for (key, a) in after.groups.iter().filter(|(key, _)| covered(key)) {
        if let Some(b) = before.groups.get(key) {
            for (sli, count) in raw_between(b, a, slo) {
                out.entry(sli).or_default().add(&count);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
