//! What `inspect` prints of the SLOs per group: each SLI's attainment from the corrector's SLO
//! counters beside vLLM's own histogram at the threshold, and the goodput bounds beside the naive
//! reading, over the interval between the dumps (`crate::slo_readings`), as JSON objects
//! (`slos` of `--json`) and as a table under the families' table.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::slo_readings::SloInterval;
use crate::table::{Cell, Table, Tone};
use engine::slo::{Sli, SliNote, SloSpec};

/// One SLI of one SLO of one group (`--json`: an element of `slis`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SliReport {
    /// `ttft`, `tpot`, `e2el` or `itl_per_token`.
    pub sli: &'static str,
    /// The threshold, s, from the spec (`--config.file`, else the shipped default); `null` for
    /// an SLO it does not name.
    pub threshold_seconds: Option<f64>,
    /// The SLI's objective from the spec, a fraction; `null` as the threshold.
    pub objective: Option<f64>,
    /// Δ of `vllm_corrected_slo_events_total` (requests; tokens for `itl_per_token`); `null`
    /// when the SLI is not counted.
    pub events: Option<f64>,
    /// Δ of `vllm_corrected_slo_good_events_total`.
    pub good_events: Option<f64>,
    /// `good_events / events`; `null` without an event.
    pub attainment: Option<f64>,
    /// vLLM's own histogram at the threshold: its bucket's Δ over its `_count`'s (TPOT counts the
    /// requests of at most one output token as good; ITL one event per output); `null` when a
    /// dump lacks it or it has no bucket at the threshold.
    pub raw_attainment: Option<f64>,
    /// Why the SLI is not counted (`not_a_bucket_edge: …`, `incomplete: …`, as the engine says
    /// for raw dumps; `not in the dumps` for dumps of the corrector), or `null`.
    pub not_counted: Option<String>,
}

/// One SLO of one group (`--json`: an element of `slos`). Counts are increases between the
/// dumps, in requests; ratios are of those increases.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SloReport {
    /// The SLO's name, the `slo` label.
    pub slo: String,
    /// The SLO's objective from the spec; `null` for an SLO it does not name.
    pub objective: Option<f64>,
    /// Each SLI of the spec's SLO (and each SLI the dumps count that it does not name).
    pub slis: Vec<SliReport>,
    /// Δ of `vllm_corrected_slo_finished_requests_total`; `null` when the goodput is not served.
    pub finished_requests: Option<f64>,
    /// Δ of `vllm_corrected_goodput_requests_total{bound="lower"}`.
    pub goodput_lower_requests: Option<f64>,
    /// Δ of `vllm_corrected_goodput_requests_total{bound="upper"}`.
    pub goodput_upper_requests: Option<f64>,
    /// `goodput_lower_requests / finished_requests`.
    pub goodput_lower_ratio: Option<f64>,
    /// `goodput_upper_requests / finished_requests`.
    pub goodput_upper_ratio: Option<f64>,
    /// The naive goodput from vLLM's own histograms: the least `raw_attainment` over the SLO's
    /// TTFT, TPOT and E2EL; `null` unless each has one.
    pub naive_goodput_ratio: Option<f64>,
}

/// The reports of one group's SLOs: `read` from the dumps, labelled from `spec`, with the
/// engine's `notes` on SLIs it does not count (raw dumps; `None` for dumps of the corrector).
pub(crate) fn reports(
    read: &[SloInterval],
    spec: &SloSpec,
    notes: Option<&[SliNote]>,
) -> Vec<SloReport> {
    read.iter()
        .map(|s| {
            let slo = spec.get(&s.name);
            let mut slis: Vec<Sli> = slo
                .map(|slo| slo.slis.iter().map(|t| t.sli).collect())
                .unwrap_or_default();
            slis.extend(
                s.slis
                    .keys()
                    .filter(|k| !slis.contains(k))
                    .copied()
                    .collect::<Vec<_>>(),
            );
            slis.sort();
            let slis = slis
                .into_iter()
                .map(|sli| {
                    let target = slo.and_then(|slo| slo.target(sli));
                    let counted = s.slis.get(&sli);
                    let not_counted = counted.is_none().then(|| {
                        notes
                            .and_then(|n| n.iter().find(|n| n.slo == s.name && n.sli == sli))
                            .map_or_else(
                                || {
                                    if notes.is_some() {
                                        "not counted".to_owned()
                                    } else {
                                        "not in the dumps".to_owned()
                                    }
                                },
                                |n| format!("{}: {}", n.reason.as_str(), n.detail),
                            )
                    });
                    SliReport {
                        sli: sli.name(),
                        threshold_seconds: target.map(|t| t.threshold_seconds),
                        objective: target.map(|t| t.objective),
                        events: counted.map(|c| c.events),
                        good_events: counted.map(|c| c.good),
                        attainment: s.attainment(sli),
                        raw_attainment: s.raw_attainment(sli),
                        not_counted,
                    }
                })
                .collect();
            let g = s.goodput;
            SloReport {
                slo: s.name.clone(),
                objective: slo.map(|slo| slo.objective),
                slis,
                finished_requests: g.map(|g| g.finished),
                goodput_lower_requests: g.map(|g| g.lower),
                goodput_upper_requests: g.map(|g| g.upper),
                goodput_lower_ratio: g.and_then(|g| g.ratios()).map(|r| r.0),
                goodput_upper_ratio: g.and_then(|g| g.ratios()).map(|r| r.1),
                naive_goodput_ratio: slo.and_then(|slo| s.naive_goodput(slo)),
            }
        })
        .collect()
}

fn percent(v: Option<f64>) -> String {
    v.map_or_else(|| "—".to_owned(), |v| format!("{:.2} %", v * 100.0))
}

fn count(v: Option<f64>) -> String {
    v.map_or_else(|| "—".to_owned(), |v| v.to_string())
}

/// The SLO table under the families' table: one row per group, SLO and SLI, then the goodput.
/// `groups` pairs each group's label text with its reports; empty when no group has an SLO.
pub(crate) fn render(groups: &[(String, &[SloReport])]) -> String {
    if groups.iter().all(|(_, r)| r.is_empty()) {
        return String::new();
    }
    let mut table = Table::new(&[
        "group, SLO, SLI",
        "raw vLLM",
        "corrected",
        "objective",
        "events",
        "note",
    ]);
    let mut notes = Vec::new();
    for (group, reports) in groups {
        for r in reports.iter() {
            for sli in &r.slis {
                let name = Sli::ALL
                    .into_iter()
                    .find(|s| s.name() == sli.sli)
                    .map_or(sli.sli, Sli::label);
                let what = match sli.threshold_seconds {
                    Some(t) => format!("{name} ≤ {t} s"),
                    None => name.to_owned(),
                };
                let tone = match (sli.attainment, sli.objective) {
                    (Some(a), Some(o)) if a >= o => Tone::Good,
                    (Some(_), Some(_)) => Tone::Bad,
                    _ => Tone::Plain,
                };
                table.push(vec![
                    Cell::plain(format!("{group}  {}  {what}", r.slo)),
                    Cell::plain(percent(sli.raw_attainment)),
                    Cell::new(percent(sli.attainment), tone),
                    Cell::plain(percent(sli.objective)),
                    Cell::plain(count(sli.events)),
                    Cell::plain(
                        sli.not_counted
                            .as_deref()
                            .map_or("", |n| n.split(':').next().unwrap_or(n)),
                    ),
                ]);
                if let Some(why) = &sli.not_counted {
                    notes.push(format!("{group} {} {name}: {why}", r.slo));
                }
            }
            if r.finished_requests.is_some() || r.naive_goodput_ratio.is_some() {
                let band = match (r.goodput_lower_ratio, r.goodput_upper_ratio) {
                    (Some(l), Some(u)) => format!("{:.2}–{:.2} %", l * 100.0, u * 100.0),
                    _ => "—".to_owned(),
                };
                table.push(vec![
                    Cell::plain(format!("{group}  {}  goodput", r.slo)),
                    Cell::plain(format!("{} naive", percent(r.naive_goodput_ratio))),
                    Cell::plain(band),
                    Cell::plain(""),
                    Cell::plain(count(r.finished_requests)),
                    Cell::plain("finished requests"),
                ]);
            }
        }
    }
    let mut out = String::from(
        "\nSLOs: attainment = Δgood / Δevents; goodput = the finished requests that met every TTFT, TPOT and\n\
         E2EL threshold (as vllm bench serve --goodput counts them), bounded below and above by the corrector;\n\
         raw vLLM = vLLM's own bucket at the threshold over its _count; naive = the least of those.\n",
    );
    out.push_str(&table.render(false));
    for note in notes {
        let _ = writeln!(out, "{note}");
    }
    out
}

/// Why each group's SLOs are what they are, keyed by the group labels: the engine's notes after
/// AFTER (raw dumps only).
pub(crate) type Notes = BTreeMap<Vec<(String, String)>, std::sync::Arc<[SliNote]>>;
