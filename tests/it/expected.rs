//! The hand-computed values of `tests/fixtures/vllm-0.33/EXPECTED.md`, transcribed (not produced by
//! the code under test), and the assertion that `/metrics` serves them.

use crate::fixture::Scrape;
use crate::metrics::{Histogram, Snapshot};

/// The output families' names.
pub(crate) const CANONICAL_TPOT: &str = "vllm_corrected_request_time_per_output_token_seconds";
/// Token-weighted ITL.
pub(crate) const TOKEN_WEIGHTED_ITL: &str = "vllm_corrected_token_weighted_itl_seconds";
/// Acceptance-corrected ITL.
pub(crate) const ACCEPTANCE_ITL: &str = "vllm_corrected_acceptance_corrected_itl_seconds";
/// Local-compute iteration tokens.
pub(crate) const LOCAL_COMPUTE: &str = "vllm_corrected_iteration_tokens_local_compute";
/// Tokens per streamed output.
pub(crate) const TOKENS_PER_OUTPUT: &str = "vllm_corrected_tokens_per_output";
/// All five, in exposition order.
pub(crate) const FAMILIES: [&str; 5] = [
    CANONICAL_TPOT,
    TOKEN_WEIGHTED_ITL,
    ACCEPTANCE_ITL,
    LOCAL_COMPUTE,
    TOKENS_PER_OUTPUT,
];

/// vLLM's ITL and request-TPOT bounds (docs/METRICS.md, "Default bucket bounds"), without `+Inf`.
pub(crate) const ITL_BOUNDS: [f64; 19] = [
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];

/// Every family's values for one group.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Expected {
    /// Canonical TPOT, or `None` when it must be absent.
    pub canonical: Option<Histogram>,
    /// Token-weighted ITL `(_sum, _count)`.
    pub token_weighted: (f64, f64),
    /// Acceptance-corrected ITL.
    pub acceptance: Histogram,
    /// Local-compute iteration tokens `(_sum, _count)`, or `None` when it must be absent.
    pub local_compute: Option<(f64, f64)>,
    /// Tokens per output `(_sum, _count)`.
    pub tokens_per_output: (f64, f64),
}

/// A histogram over [`ITL_BOUNDS`] and `+Inf`: `head` gives the first bounds' cumulative counts,
/// every later bound (and `+Inf`) holds `tail`.
pub(crate) fn itl_histogram(head: &[f64], tail: f64, sum: f64, count: f64) -> Histogram {
    let mut buckets: Vec<(f64, f64)> = ITL_BOUNDS
        .iter()
        .enumerate()
        .map(|(i, b)| (*b, head.get(i).copied().unwrap_or(tail)))
        .collect();
    buckets.push((f64::INFINITY, tail));
    Histogram {
        buckets,
        sum,
        count,
    }
}

/// EXPECTED.md, for `engine` ("0" or "1") after `scrape`.
pub(crate) fn fixture(scrape: Scrape, engine: &str) -> Expected {
    let h = itl_histogram;
    match (scrape, engine) {
        // §1: TPOT buckets − G(4); §2: 1240 − 40; §3: interval 0→t1, classes 300/100/100/100 of
        // 1/2/3/4 tokens; §4: 5000 + 1240; §5: 1240 − 40 over N = 600.
        (Scrape::T1, "0") => Expected {
            canonical: Some(h(&[2.0, 16.0, 26.0, 27.0], 28.0, 0.8, 28.0)),
            token_weighted: (27.0, 1200.0),
            acceptance: h(
                &[
                    610.0 / 3.0,
                    730.0,
                    1005.0,
                    1119.625,
                    1160.0,
                    1182.25,
                    1191.5,
                    1197.0,
                    1198.5,
                ],
                1200.0,
                27.0,
                1200.0,
            ),
            local_compute: Some((6240.0, 700.0)),
            tokens_per_output: (1200.0, 600.0),
        },
        // §1: − G(7); §2: 1870 − 70; §3: t1 + interval 2 (classes 280/60/40/20); §4: 8000 + 1870;
        // §5: 1870 − 70 over N = 1000.
        (Scrape::T2, "0") => Expected {
            canonical: Some(h(&[3.0, 31.0, 48.0, 51.0, 52.0], 53.0, 1.5, 53.0)),
            token_weighted: (43.0, 1800.0),
            acceptance: h(
                &[
                    3902.0 / 15.0,
                    986.0,
                    1445.0,
                    1654.275,
                    1727.4,
                    1766.75,
                    1783.9,
                    1794.2,
                    1797.1,
                ],
                1800.0,
                43.0,
                1800.0,
            ),
            local_compute: Some((9870.0, 1100.0)),
            tokens_per_output: (1800.0, 1000.0),
        },
        // Restart: every family from the t3 values alone; §3 buckets restart from 0 (classes
        // 50/20/10/20).
        (Scrape::T3Restart, "0") => Expected {
            canonical: Some(h(&[0.0, 2.0], 5.0, 0.15, 5.0)),
            token_weighted: (4.5, 200.0),
            acceptance: h(
                &[529.0 / 15.0, 121.0, 169.5, 188.0, 195.0, 197.5],
                200.0,
                4.5,
                200.0,
            ),
            local_compute: Some((1108.0, 120.0)),
            tokens_per_output: (200.0, 100.0),
        },
        // No spec decode: acceptance-corrected ITL = raw ITL, one token per output (§5: 500 / 500).
        (Scrape::T1, "1") => Expected {
            canonical: Some(h(&[0.0, 8.0, 17.0], 18.0, 0.55, 18.0)),
            token_weighted: (17.5, 500.0),
            acceptance: h(
                &[0.0, 150.0, 400.0, 470.0, 490.0, 496.0, 499.0],
                500.0,
                17.5,
                500.0,
            ),
            local_compute: Some((4525.0, 530.0)),
            tokens_per_output: (500.0, 500.0),
        },
        // t3 repeats t2 for engine "1": an interval with ΔN = 0 adds nothing.
        (Scrape::T2 | Scrape::T3Restart, "1") => Expected {
            canonical: Some(h(&[0.0, 17.0, 33.0, 34.0], 35.0, 1.1, 35.0)),
            token_weighted: (28.0, 800.0),
            acceptance: h(
                &[10.0, 250.0, 650.0, 760.0, 790.0, 796.0, 799.0],
                800.0,
                28.0,
                800.0,
            ),
            local_compute: Some((7345.0, 860.0)),
            tokens_per_output: (800.0, 800.0),
        },
        _ => panic!("no fixture engine {engine:?}"),
    }
}

/// `actual` equals `expected` within 1e-9 relative (1e-9 absolute around 0).
pub(crate) fn close(actual: f64, expected: f64) -> bool {
    if expected == 0.0 {
        actual.abs() <= 1e-9
    } else {
        ((actual - expected) / expected).abs() <= 1e-9
    }
}

/// `Ok` when `actual` has exactly the bounds of `expected` and every value matches.
pub(crate) fn check_histogram(
    actual: &Histogram,
    expected: &Histogram,
    what: &str,
) -> Result<(), String> {
    let bounds = |h: &Histogram| h.buckets.iter().map(|(b, _)| *b).collect::<Vec<_>>();
    if bounds(actual) != bounds(expected) {
        return Err(format!(
            "{what}: served bounds {:?}, expected {:?}",
            bounds(actual),
            bounds(expected)
        ));
    }
    for ((le, a), (_, e)) in actual.buckets.iter().zip(&expected.buckets) {
        if !close(*a, *e) {
            return Err(format!(
                "{what}: bucket le={le}: served {a}, hand value {e}"
            ));
        }
    }
    if !close(actual.sum, expected.sum) {
        return Err(format!(
            "{what}: _sum served {}, hand value {}",
            actual.sum, expected.sum
        ));
    }
    if !close(actual.count, expected.count) {
        return Err(format!(
            "{what}: _count served {}, hand value {}",
            actual.count, expected.count
        ));
    }
    Ok(())
}

fn check_sum_count(
    snapshot: &Snapshot,
    family: &str,
    group: &[(String, String)],
    expected: Option<(f64, f64)>,
    what: &str,
) -> Result<(), String> {
    match (snapshot.sum_count(family, group), expected) {
        (Some((sum, count)), Some((es, ec))) if close(sum, es) && close(count, ec) => Ok(()),
        (None, None) if !snapshot.has(family, group) => Ok(()),
        (got, want) => Err(format!(
            "{what} {family}: served (_sum, _count) {got:?}, hand value {want:?}"
        )),
    }
}

/// `Ok` when `snapshot` serves exactly `expected` for `group`, absent families absent.
pub(crate) fn check_group(
    snapshot: &Snapshot,
    group: &[(String, String)],
    expected: &Expected,
    what: &str,
) -> Result<(), String> {
    match (
        snapshot.histogram(CANONICAL_TPOT, group),
        &expected.canonical,
    ) {
        (Some(h), Some(e)) => check_histogram(&h, e, &format!("{what} {CANONICAL_TPOT}"))?,
        (None, None) => {}
        (got, want) => {
            return Err(format!(
                "{what} {CANONICAL_TPOT}: served {got:?}, hand value {want:?}"
            ));
        }
    }
    check_sum_count(
        snapshot,
        TOKEN_WEIGHTED_ITL,
        group,
        Some(expected.token_weighted),
        what,
    )?;
    let acceptance = snapshot
        .histogram(ACCEPTANCE_ITL, group)
        .ok_or_else(|| format!("{what} {ACCEPTANCE_ITL}: absent"))?;
    check_histogram(
        &acceptance,
        &expected.acceptance,
        &format!("{what} {ACCEPTANCE_ITL}"),
    )?;
    check_sum_count(snapshot, LOCAL_COMPUTE, group, expected.local_compute, what)?;
    check_sum_count(
        snapshot,
        TOKENS_PER_OUTPUT,
        group,
        Some(expected.tokens_per_output),
        what,
    )
}

/// Panics (with the served text) unless `snapshot` serves exactly `expected` for `group`.
pub(crate) fn assert_group(
    snapshot: &Snapshot,
    group: &[(String, String)],
    expected: &Expected,
    what: &str,
) {
    if let Err(e) = check_group(snapshot, group, expected, what) {
        panic!("{e}\n--- served ---\n{}", snapshot.text);
    }
}

/// Panics unless `snapshot` serves no corrected family at all for `group`.
pub(crate) fn assert_group_absent(snapshot: &Snapshot, group: &[(String, String)], what: &str) {
    for family in FAMILIES {
        assert!(
            !snapshot.has(family, group),
            "{what}: {family} still served for {group:?}\n{}",
            snapshot.text
        );
    }
}
