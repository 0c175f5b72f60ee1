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

use engine::slo::Slo;

use super::groups::{duration, percent};
use super::windows::{burn_windows, ratio_windows};

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
