//! One refresh of the demo: raw, corrected and true values of the same window side by side, as
//! a terminal table or as plain `key=value` lines.

use std::fmt::Write as _;

pub(crate) mod slo;

use super::presentation::{self, Measured, Unit};
use super::readings::Interval;
use super::table::{Cell, Table, Tone};
use sim::truth::GroupTruth;

/// One compared quantity.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    /// Stable key of the plain output, e.g. `tpot_mean_seconds`.
    pub key: &'static str,
    /// Label in the table.
    pub label: &'static str,
    /// True for seconds (shown as ms), false for tokens.
    pub(crate) seconds: bool,
    /// True when the corrected value is an estimate from buckets (a quantile), not exact: its
    /// error is shown uncoloured.
    pub(crate) estimate: bool,
    /// vLLM's raw reading.
    pub raw: Option<f64>,
    /// The corrector's value.
    pub(crate) corrected: Option<f64>,
    /// The simulator's truth.
    pub truth: Option<f64>,
    /// The finite bucket bounds an estimate row's values come from, ascending (empty for an
    /// exact row): an estimate in the same bucket as the truth is shown as "same bucket", since
    /// buckets cannot tell the two apart (issue 24: a p99 error of +33.59 % beside a raw +31.35 %
    /// read as if the correction made p99 worse).
    pub(crate) bounds: Vec<f64>,
}

impl Row {
    /// True when `value` and the truth lie in the same bucket of [`Row::bounds`] (`(lower,
    /// upper]`, the last one above every bound): the row's error is then bucket resolution.
    pub(crate) fn same_bucket_as_truth(&self, value: f64) -> bool {
        let (Some(truth), false) = (self.truth, self.bounds.is_empty()) else {
            return false;
        };
        let bucket = |v: f64| self.bounds.iter().position(|le| v <= *le);
        bucket(value) == bucket(truth)
    }
}

/// One refresh: the window and every row.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Comparison {
    /// Seconds since the demo started, at the window's end.
    pub(crate) at_s: f64,
    /// Window length, seconds.
    pub(crate) window_s: f64,
    /// Requests finished in the window.
    pub finished: u64,
    /// Of which with n ≤ 1 output tokens.
    pub n_le_1: u64,
    /// First outputs with 0 tokens in the window (n = 0 requests).
    pub zero_token_first_outputs: u64,
    /// True acceptance length `1 + accepted / drafts` in the window.
    pub acceptance_length: Option<f64>,
    /// One row per family in registry order (its mean), and its p99 after it where the family
    /// shows one ([`presentation::Presentation::demo_p99`]).
    pub(crate) rows: Vec<Row>,
    /// Why a row is held or shows no difference, printed under the table.
    pub(crate) notes: Vec<String>,
    /// Each SLO's attainment per SLI and goodput over the same window, printed after the table.
    pub(crate) slos: Vec<slo::SloComparison>,
}

/// Requests with more than one output token a window needs before its TPOT p99 row is shown:
/// below 100, the 99th percentile is the window's largest observation, and its bucket estimate
/// swings by a whole bucket from one refresh to the next.
pub(crate) const MIN_P99_REQUESTS: u64 = 100;

impl Comparison {
    /// The row with `key`.
    #[cfg(test)]
    pub(crate) fn row(&self, key: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.key == key)
    }
}

/// The rows from the raw and corrected intervals and the truth of the same window.
pub(crate) fn comparison(
    raw: &Interval,
    corrected: &Interval,
    truth: &GroupTruth,
    at_s: f64,
    window_s: f64,
) -> Comparison {
    let mut rows = Vec::new();
    for family in presentation::shown() {
        let shown = presentation::of(family);
        let (sum, count) = shown.truth;
        let (label, key) = shown.demo;
        rows.push(Row {
            key,
            label,
            seconds: shown.unit == Unit::Seconds,
            estimate: false,
            bounds: Vec::new(),
            raw: raw.raw_mean(family),
            corrected: corrected.mean(family),
            truth: ratio(measured(truth, sum), measured(truth, count)),
        });
        if let Some(p99) = shown.demo_p99 {
            rows.push(Row {
                key: p99.key,
                label: p99.label,
                seconds: shown.unit == Unit::Seconds,
                estimate: true,
                bounds: corrected
                    .family(family)
                    .map(|h| h.buckets.iter().map(|b| b.0).filter(|le| le.is_finite()))
                    .into_iter()
                    .flatten()
                    .collect(),
                raw: raw.raw_hist[family.index()]
                    .as_ref()
                    .and_then(|h| h.quantile(0.99)),
                corrected: corrected.family(family).and_then(|h| h.quantile(0.99)),
                truth: measured(truth, p99.truth),
            });
        }
    }
    let (req, it) = (&truth.requests, &truth.iterations);
    let mut notes = Vec::new();
    let with_tpot = req.finished.saturating_sub(req.n_le_1);
    if with_tpot < MIN_P99_REQUESTS {
        if let Some(p99) = rows.iter_mut().find(|r| r.key == "tpot_p99_seconds") {
            (p99.raw, p99.corrected, p99.truth) = (None, None, None);
        }
        notes.push(format!(
            "TPOT p99 held until the window has {MIN_P99_REQUESTS} requests with n > 1 (it has {with_tpot}): the p99 of fewer is their maximum."
        ));
    }
    if let Some(iter) = rows.iter().find(|r| r.key == "iteration_tokens_mean") {
        match (iter.raw, iter.corrected) {
            (Some(raw), Some(corrected)) if (raw - corrected).abs() <= 1e-9 * raw.abs() => notes.push(
                "iteration tokens: raw = corrected, as it should be: this vLLM version counts only the prompt tokens it computed. Up to vLLM 0.22 it also counted cached and transferred ones: --profile 0.22 shows the difference."
                    .to_owned(),
            ),
            (Some(_), None) => notes.push(
                "iteration tokens: no corrected value: before vLLM 0.16 there is no by-source prompt counter, so the family is withheld rather than guessed."
                    .to_owned(),
            ),
            _ => {}
        }
    }
    Comparison {
        at_s,
        window_s,
        finished: req.finished,
        n_le_1: req.n_le_1,
        zero_token_first_outputs: it.zero_token_first_outputs,
        acceptance_length: it.acceptance_length,
        rows,
        notes,
        slos: Vec::new(),
    }
}

/// The simulator's count of `m` over the window (`sim::truth`): what a family's `_sum` or
/// `_count` must have increased by.
fn measured(truth: &GroupTruth, m: Measured) -> Option<f64> {
    let (req, it) = (&truth.requests, &truth.iterations);
    Some(match m {
        Measured::TpotSum => req.canonical_tpot.sum_seconds,
        Measured::TpotRequests => req.canonical_tpot.count as f64,
        Measured::TpotP99 => req.canonical_tpot.p99_seconds?,
        Measured::ItlSum => it.itl_sum_seconds,
        Measured::ItlOutputs => it.itl_count as f64,
        Measured::TokensAfterFirst => it.tokens_after_first as f64,
        Measured::LocalIterationTokens => it.iteration_tokens_local_sum as f64,
        Measured::Iterations => it.iterations as f64,
    })
}

/// `sum / count`, `None` when the count is 0.
fn ratio(sum: Option<f64>, count: Option<f64>) -> Option<f64> {
    match (sum, count) {
        (Some(s), Some(c)) if c > 0.0 => Some(s / c),
        _ => None,
    }
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "null".to_owned(), |v| v.to_string())
}

fn relative_error(value: Option<f64>, truth: Option<f64>) -> Option<f64> {
    match (value, truth) {
        (Some(v), Some(t)) if t != 0.0 => Some((v - t) / t),
        _ => None,
    }
}

/// The plain `key=value` block of one refresh (values at full precision, `null` when missing).
pub(crate) fn plain_lines(c: &Comparison) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "at_s={:.3} window_s={:.3} finished={} n_le_1={} zero_token_first_outputs={} acceptance_length={}",
        c.at_s,
        c.window_s,
        c.finished,
        c.n_le_1,
        c.zero_token_first_outputs,
        opt(c.acceptance_length)
    );
    for r in &c.rows {
        let _ = writeln!(
            s,
            "at_s={:.3} quantity={} raw={} corrected={} truth={}",
            c.at_s,
            r.key,
            opt(r.raw),
            opt(r.corrected),
            opt(r.truth)
        );
    }
    s.push_str(&slo::plain_lines(&c.slos, c.at_s));
    s
}

/// The terminal table of one refresh.
pub(crate) fn render_table(c: &Comparison, color: bool) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "window: {:.1} s ending {:.1} s after start; {} requests finished ({} with n ≤ 1, {} with n = 0); acceptance length {}",
        c.window_s,
        c.at_s,
        c.finished,
        c.n_le_1,
        c.zero_token_first_outputs,
        c.acceptance_length
            .map_or_else(|| "—".to_owned(), |v| format!("{v:.2}"))
    );
    s.push('\n');
    let mut table = Table::new(&[
        "quantity",
        "raw vLLM",
        "corrected",
        "truth",
        "raw error",
        "corrected error",
    ]);
    for r in &c.rows {
        let value = |v: Option<f64>, tone| match v {
            Some(v) if r.seconds => Cell::new(format!("{:.3} ms", v * 1000.0), tone),
            Some(v) => Cell::new(format!("{v:.2}"), tone),
            None => Cell::new("—", Tone::Dim),
        };
        let error = |v: Option<f64>| match relative_error(v, r.truth) {
            Some(e) if v.is_some_and(|v| r.same_bucket_as_truth(v)) => {
                Cell::new(format!("{:+.2} % same bucket", e * 100.0), Tone::Dim)
            }
            Some(e) => {
                let tone = if r.estimate {
                    Tone::Plain
                } else if e.abs() < 0.005 {
                    Tone::Good
                } else if e.abs() > 0.05 {
                    Tone::Bad
                } else {
                    Tone::Plain
                };
                Cell::new(format!("{:+.2} %", e * 100.0), tone)
            }
            None => Cell::new("—", Tone::Dim),
        };
        table.push(vec![
            Cell::plain(r.label),
            value(r.raw, Tone::Plain),
            value(r.corrected, Tone::Bold),
            value(r.truth, Tone::Plain),
            error(r.raw),
            error(r.corrected),
        ]);
    }
    s.push_str(&table.render(color));
    s.push_str(
        "\nraw ITL is vLLM's per-output mean (one sample per output, whatever its tokens). Token-weighted ITL is\n\
         exact up to 0-token first outputs; p99 from buckets is exact only to within one bucket: \"same bucket\"\n\
         marks an error within the bucket that holds the truth, which the buckets cannot resolve.\n",
    );
    for note in &c.notes {
        let _ = writeln!(s, "{note}");
    }
    s.push_str(&slo::render(&c.slos, c.window_s, color));
    s
}
