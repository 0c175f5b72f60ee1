//! The multi-window, multi-burn-rate table (Google SRE workbook, "Alerting on SLOs"), scaled to
//! an SLO's window.
//!
//! For a 30-day SLO: page when the error ratio exceeds 14.4 × the error budget over 1 h and 5 m
//! (2 % of the budget spent in 1 h) or 6 × over 6 h and 30 m (5 % in 6 h); ticket at 3 × over 1 d
//! and 2 h (10 % in 1 d) or 1 × over 3 d and 6 h (10 % in 3 d). For another window W every
//! duration (long and short windows, `for`) is multiplied by W / 30 d, rounded to the nearest
//! minute and never below 1 m, so each pair still catches the same fraction of the budget and the
//! factors stay; the short windows of an SLO under a day hit that floor.

use engine::slo::DEFAULT_WINDOW_MS;

/// Who is told: a page (`severity: critical`) or a ticket (`severity: warning`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Severity {
    /// Fast burn: wake someone.
    Page,
    /// Slow burn: a ticket.
    Ticket,
}

impl Severity {
    /// The `severity` label (the kube-prometheus convention).
    pub(crate) fn label(self) -> &'static str {
        match self {
            Severity::Page => "critical",
            Severity::Ticket => "warning",
        }
    }
}

/// One window pair of the table, scaled to an SLO window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct BurnWindow {
    /// Page or ticket.
    pub(crate) severity: Severity,
    /// The long window, ms.
    pub(crate) long_ms: u64,
    /// The short window, ms (the alert stops soon after the burn does).
    pub(crate) short_ms: u64,
    /// The burn-rate factor: the error ratio must exceed `factor` × the error budget.
    pub(crate) factor: f64,
    /// The share of the budget spent over the long window at that rate, in percent.
    pub(crate) budget_percent: f64,
    /// The alert's `for`, ms.
    pub(crate) for_ms: u64,
}

const MINUTE: u64 = 60_000;
const HOUR: u64 = 60 * MINUTE;
const DAY: u64 = 24 * HOUR;

/// The 30-day table: (severity, long, short, factor, budget %, for).
const TABLE_30D: [(Severity, u64, u64, f64, f64, u64); 4] = [
    (Severity::Page, HOUR, 5 * MINUTE, 14.4, 2.0, 2 * MINUTE),
    (Severity::Page, 6 * HOUR, 30 * MINUTE, 6.0, 5.0, 2 * MINUTE),
    (Severity::Ticket, DAY, 2 * HOUR, 3.0, 10.0, 15 * MINUTE),
    (Severity::Ticket, 3 * DAY, 6 * HOUR, 1.0, 10.0, 15 * MINUTE),
];

/// `ms` of the 30-day table scaled to `window_ms`: × window / 30 d, to the nearest minute
/// (halves up), at least 1 minute.
pub(crate) fn scale(ms: u64, window_ms: u64) -> u64 {
    let scaled = u128::from(ms) * u128::from(window_ms);
    let denominator = u128::from(DEFAULT_WINDOW_MS) * u128::from(MINUTE);
    let minutes = (scaled + denominator / 2) / denominator;
    u64::try_from(minutes).unwrap_or(u64::MAX / MINUTE).max(1) * MINUTE
}

/// The four window pairs for an SLO of `window_ms`, pages first.
pub(crate) fn burn_windows(window_ms: u64) -> [BurnWindow; 4] {
    TABLE_30D.map(
        |(severity, long, short, factor, budget_percent, for_ms)| BurnWindow {
            severity,
            long_ms: scale(long, window_ms),
            short_ms: scale(short, window_ms),
            factor,
            budget_percent,
            for_ms: scale(for_ms, window_ms),
        },
    )
}

/// Every distinct window of the pairs, shortest first: the ranges of the recorded error ratios.
pub(crate) fn ratio_windows(window_ms: u64) -> Vec<u64> {
    let mut windows: Vec<u64> = burn_windows(window_ms)
        .iter()
        .flat_map(|w| [w.long_ms, w.short_ms])
        .collect();
    windows.sort_unstable();
    windows.dedup();
    windows
}
