//! (e) The old ITL name `vllm:time_per_output_token_seconds`: used when it is the only ITL series of
//! a group (vLLM ≤ 0.10), never counted twice beside `vllm:inter_token_latency_seconds`
//! (0.10.2–0.14 emit both with identical values).
//!
//! Hand computation (the same raw values serve both groups):
//! - old/new ITL buckets at 0.01 / 0.025 / 0.05 / later: t1 0/0/100/100…, `_sum` 4, `_count` 100;
//!   t2 0/60/200/200…, `_sum` 7, `_count` 200. TTFT `_count` t1 10, t2 20. Generation tokens t1
//!   210 (= 10 + 100 + 100), t2 320 (= 20 + 200 + 100). Accepted tokens t1 100, t2 100.
//! - Token-weighted ITL at t2: `_sum` = 7, `_count` = 320 − 20 = 300.
//! - Acceptance-corrected ITL (no per-position series: one mean weight per interval). Interval
//!   0→t1: ΔN = 100, T = 210 − 10 = 200 tokens, w = 2; ΔC = 0, 0, 100, 100…; B = 0.01: 2·F(0.02) =
//!   2·0 = 0; B = 0.025: 2·F(0.05) = 200; B ≥ 0.05: 2·100 = 200; +Inf 200. Interval t1→t2: ΔN = 100,
//!   T = 300 − 200 = 100, w = 1; ΔC = 0, 60, 100, 100…; adds 0, 60, 100, 100…, +Inf 100.
//!   At t2: 0, 260, 300, 300…, +Inf 300; `_sum` 7; `_count` = 320 − 20 = 300.
//!   Counting both names would give `_sum` 14 and `_count` 500.
//! - Tokens per output at t2: `_sum` = 320 − 20 = 300 tokens after each first output, `_count` =
//!   the ITL `_count` 200 (one name; both would give 400).
//! - No request TPOT histogram and no by-source prompt tokens: canonical TPOT and local-compute
//!   iteration tokens are absent.

use crate::expected::{CANONICAL_TPOT, Expected, assert_group, itl_histogram};
use crate::fixture::{group_of, scrape_times};
use crate::harness::Corrector;
use crate::rw::Point;

const ITL_OLD: &str = "vllm:time_per_output_token_seconds";
const ITL_NEW: &str = "vllm:inter_token_latency_seconds";

/// Points of one synthetic group at one timestamp.
struct Group {
    model: &'static str,
    timestamp_ms: i64,
    points: Vec<Point>,
}

impl Group {
    fn new(model: &'static str, timestamp_ms: i64) -> Group {
        Group {
            model,
            timestamp_ms,
            points: Vec::new(),
        }
    }

    fn point(&mut self, name: &str, extra: Option<(&str, String)>, value: f64) {
        let mut labels: Vec<(String, String)> = group_of(self.model, "0");
        labels.push(("__name__".into(), name.into()));
        if let Some((n, v)) = extra {
            labels.push((n.into(), v));
        }
        labels.sort();
        self.points.push(Point {
            labels,
            value,
            timestamp_ms: self.timestamp_ms,
        });
    }

    /// A histogram: cumulative `counts` at `bounds`, `+Inf` = `_count` = the last count.
    fn histogram(&mut self, family: &str, bounds: &[&str], counts: &[f64], sum: f64) {
        for (le, c) in bounds.iter().zip(counts) {
            self.point(
                &format!("{family}_bucket"),
                Some(("le", le.to_string())),
                *c,
            );
        }
        let count = *counts.last().unwrap();
        self.point(
            &format!("{family}_bucket"),
            Some(("le", "+Inf".into())),
            count,
        );
        self.point(&format!("{family}_count"), None, count);
        self.point(&format!("{family}_sum"), None, sum);
    }
}

const ITL_LE: [&str; 19] = [
    "0.01", "0.025", "0.05", "0.075", "0.1", "0.15", "0.2", "0.3", "0.4", "0.5", "0.75", "1.0",
    "2.5", "5.0", "7.5", "10.0", "20.0", "40.0", "80.0",
];

/// One scrape (1 = t1, 2 = t2) of a vLLM 0.10-shaped group with the given ITL names.
fn scrape(model: &'static str, itl_names: &[&str], which: u8, timestamp_ms: i64) -> Vec<Point> {
    let (itl_head, itl_n, itl_sum, ttft, generation, accepted, iterations) = match which {
        1 => (
            [0.0, 0.0, 100.0],
            100.0,
            4.0,
            [3.0, 8.0, 10.0],
            210.0,
            100.0,
            [0.0, 50.0, 60.0],
        ),
        _ => (
            [0.0, 60.0, 200.0],
            200.0,
            7.0,
            [6.0, 16.0, 20.0],
            320.0,
            100.0,
            [0.0, 90.0, 110.0],
        ),
    };
    let itl: Vec<f64> = (0..ITL_LE.len())
        .map(|i| itl_head.get(i).copied().unwrap_or(itl_n))
        .collect();
    let mut g = Group::new(model, timestamp_ms);
    g.histogram(
        "vllm:time_to_first_token_seconds",
        &["0.1", "0.5", "1.0"],
        &ttft,
        ttft[2] * 0.2,
    );
    for name in itl_names {
        g.histogram(name, &ITL_LE, &itl, itl_sum);
    }
    g.point("vllm:generation_tokens_total", None, generation);
    g.point("vllm:prompt_tokens_total", None, 10.0 * generation);
    g.histogram(
        "vllm:iteration_tokens_total",
        &["1.0", "8.0", "16.0"],
        &iterations,
        11.0 * generation,
    );
    g.point("vllm:spec_decode_num_drafts_total", None, 0.8 * accepted);
    g.point(
        "vllm:spec_decode_num_draft_tokens_total",
        None,
        2.4 * accepted,
    );
    g.point("vllm:spec_decode_num_accepted_tokens_total", None, accepted);
    g.points
}

fn expected_at_t2() -> Expected {
    Expected {
        canonical: None,
        token_weighted: (7.0, 300.0),
        acceptance: itl_histogram(&[0.0, 260.0], 300.0, 7.0, 300.0),
        local_compute: None,
        tokens_per_output: (300.0, 200.0),
    }
}

#[test]
fn old_itl_name_alone_feeds_token_weighted_and_acceptance_corrected_itl() {
    let [t1, t2, _] = scrape_times();
    let corrector = Corrector::start_unsettled();
    corrector.write(&scrape("vllm-0.10", &[ITL_OLD], 1, t1));
    corrector.write(&scrape("vllm-0.10", &[ITL_OLD], 2, t2));
    let snapshot = corrector.snapshot();
    assert_group(
        &snapshot,
        &group_of("vllm-0.10", "0"),
        &expected_at_t2(),
        "0.10-shaped group",
    );
    let withheld = snapshot.value(
        "vllm_corrector_groups_withheld",
        &[("family", CANONICAL_TPOT), ("reason", "missing_input")],
    );
    assert_eq!(
        withheld,
        Some(1.0),
        "no request TPOT: canonical TPOT withheld as missing_input\n{}",
        snapshot.text
    );
}

#[test]
fn group_with_both_itl_names_never_double_counts() {
    let [t1, t2, _] = scrape_times();
    let corrector = Corrector::start_unsettled();
    corrector.write(&scrape("vllm-0.13", &[ITL_OLD, ITL_NEW], 1, t1));
    corrector.write(&scrape("vllm-0.13", &[ITL_OLD, ITL_NEW], 2, t2));
    let snapshot = corrector.snapshot();
    assert_group(
        &snapshot,
        &group_of("vllm-0.13", "0"),
        &expected_at_t2(),
        "group with both ITL names",
    );
}
