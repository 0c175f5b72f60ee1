//! The alerts that cannot fire, against the arithmetic of the burn-rate table: an alert at factor
//! `f` needs an error ratio above `f × (1 − objective)`, and a ratio is at most 1.

use super::*;
use engine::slo::{Sli, SliTarget};

const DAY: u64 = 86_400_000;

fn slo(window_ms: u64, objectives: &[(Sli, f64)]) -> Slo {
    Slo {
        name: "chat".to_owned(),
        description: String::new(),
        objective: 0.99,
        window_ms,
        matchers: Vec::new(),
        by: Vec::new(),
        slis: objectives
            .iter()
            .map(|(sli, objective)| SliTarget {
                sli: *sli,
                threshold_seconds: 0.05,
                objective: *objective,
            })
            .collect(),
    }
}

#[test]
fn an_objective_below_93_06_percent_warns_that_the_fast_page_never_fires() {
    // 14.4 × 0.1 = 1.44 > 1: the 14.4x page is silent; 6 × 0.1 = 0.6 fires.
    let w = alert_warnings(&slo(30 * DAY, &[(Sli::Ttft, 0.9)]));
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("ttft at 90 %: 1 of its alerts"), "{}", w[0]);
    assert!(
        w[0].contains("14.4x over 1h needs an error ratio above 1.44"),
        "{}",
        w[0]
    );
    // 1 − 1/14.4 = 0.930555…, up to a hundredth of a percent.
    assert!(w[0].contains("at least 93.06 %"), "{}", w[0]);
    // At 93.06 % the ratio needed is 14.4 × 0.0694 = 0.99936 < 1: every alert can fire.
    assert!(alert_warnings(&slo(30 * DAY, &[(Sli::Ttft, 0.9306)])).is_empty());
}

#[test]
fn an_objective_of_80_percent_silences_both_pages_and_not_the_tickets() {
    // 14.4 × 0.2 = 2.88 and 6 × 0.2 = 1.2 exceed 1; 3 × 0.2 = 0.6 and 1 × 0.2 do not.
    let w = alert_warnings(&slo(30 * DAY, &[(Sli::Tpot, 0.99), (Sli::E2el, 0.8)]));
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("e2el at 80 %: 2 of its alerts"), "{}", w[0]);
    assert!(
        w[0].contains("6x over 6h needs an error ratio above 1.2"),
        "{}",
        w[0]
    );
    assert!(!w[0].contains("warning alert"), "{}", w[0]);
}

#[test]
fn a_7_day_window_warns_of_its_1_minute_windows_and_30_days_does_not() {
    // 5m × 7/30 = 70 s, rounded to 1m; every other window is 5 minutes or more.
    let w = alert_warnings(&slo(7 * DAY, &[(Sli::Tpot, 0.99)]));
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("its 7d window scales the alert windows down to 1m:"),
        "{}",
        w[0]
    );
    assert!(w[0].contains("every 15s or faster"), "{}", w[0]);
    assert!(alert_warnings(&slo(30 * DAY, &[(Sli::Tpot, 0.99)])).is_empty());
    // A 1-day SLO: 5m, 30m, 1h, 2h of 30 days scale to 10 s (the 1m floor), 1m, 2m and 4m.
    let w = alert_warnings(&slo(DAY, &[(Sli::Tpot, 0.99)]));
    assert!(w[0].contains("down to 1m, 2m, 4m:"), "{}", w[0]);
}

#[test]
fn wrap_keeps_every_word_under_100_columns() {
    let text = "word ".repeat(60);
    let out = wrap(&text, "#   ");
    assert!(out.lines().all(|l| l.len() <= 100 && l.starts_with("#   ")));
    assert_eq!(out.split_whitespace().filter(|w| *w == "word").count(), 60);
}

/// One SLI at threshold `t` seconds.
fn at(sli: Sli, t: f64) -> Slo {
    let mut slo = slo(30 * DAY, &[(sli, 0.99)]);
    slo.slis[0].threshold_seconds = t;
    slo
}

#[test]
fn a_threshold_off_vllms_default_edges_names_the_nearest_ones() {
    // vLLM's default TTFT edges include 0.25 and 0.5, TPOT's 0.05 and 0.075.
    let w = edge_warnings(&at(Sli::Ttft, 0.4));
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with(
            "SLO chat: ttft 0.4 s is not one of vLLM's default bucket edges (nearest: 0.25 \
             below, 0.5 above)"
        ),
        "{}",
        w[0]
    );
    assert!(w[0].contains("--custom-histogram-buckets"), "{}", w[0]);
    assert!(edge_warnings(&at(Sli::Tpot, 0.05)).is_empty());
    assert!(edge_warnings(&at(Sli::Ttft, 0.5)).is_empty());
}

#[test]
fn a_threshold_written_in_milliseconds_says_so() {
    for (sli, ms) in [
        (Sli::Ttft, 500.0),
        (Sli::Tpot, 50.0),
        (Sli::E2el, 20_000.0),
        (Sli::ItlPerToken, 30.0),
    ] {
        let w = unit_warnings(&at(sli, ms));
        assert_eq!(
            w,
            [format!(
                "SLO chat: {sli} {ms} s looks like milliseconds: thresholds are seconds ({} for \
                 {ms} ms).",
                ms / 1000.0
            )],
            "{sli}"
        );
    }
    // Seconds as vLLM users write them: nothing.
    for (sli, s) in [
        (Sli::Ttft, 10.0),
        (Sli::Tpot, 0.5),
        (Sli::E2el, 600.0),
        (Sli::ItlPerToken, 0.2),
    ] {
        assert!(unit_warnings(&at(sli, s)).is_empty(), "{sli} {s}");
    }
    // 40 s is one of vLLM's TPOT edges: only the unit warning says anything.
    let tpot_40 = at(Sli::Tpot, 40.0);
    assert!(edge_warnings(&tpot_40).is_empty());
    assert_eq!(spec_warnings(&tpot_40).len(), 1);
}
