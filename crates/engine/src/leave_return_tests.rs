//! Groups that leave and come back, and series that go stale on their own (docs/ENGINE.md,
//! "Staleness markers" and "Groups that leave and come back"): a served counter never falls
//! without an input reset, and a frame is never evaluated or committed without a series whose
//! staleness marker may yet be followed by its real value.

use super::test_support::*;
use super::*;

/// Whether `raw` is the per-position accepted-drafts series.
fn is_per_pos(raw: &Raw) -> bool {
    raw.0
        .iter()
        .any(|(n, v)| *n == "__name__" && v == "vllm:spec_decode_num_accepted_tokens_per_pos_total")
}

fn stale_marker(raw: &Raw) -> Raw {
    (raw.0.clone(), f64::from_bits(STALE_NAN_BITS))
}

/// `raw` with every value scaled by `m` (every counter grows; no reset).
fn scaled(raw: &[Raw], m: f64) -> Vec<Raw> {
    raw.iter().map(|(l, v)| (l.clone(), v * m)).collect()
}

/// Feeds `rows` at `ts`, one series per call (each its own request).
fn send(engine: &mut Engine, rows: &[Raw], ts: i64) {
    let mut report = IngestReport::default();
    feed_at(engine, rows, ts, ts, &mut report);
    assert_eq!(report.received, report.applied + report.rejected_total());
}

/// Each histogram bucket (and `_sum`, `_count`) of `after` is at least `before`'s: a counter
/// that did not fall.
fn never_below(before: &DerivedValue, after: &DerivedValue) -> bool {
    match (before, after) {
        (
            DerivedValue::Histogram {
                buckets: b0,
                sum: s0,
                count: c0,
            },
            DerivedValue::Histogram {
                buckets: b1,
                sum: s1,
                count: c1,
            },
        ) => {
            s1 >= s0
                && c1 >= c0
                && b0
                    .iter()
                    .all(|(le, c)| b1.iter().any(|(l, v)| l == le && v >= c))
        }
        (
            DerivedValue::SumCount { sum: s0, count: c0 },
            DerivedValue::SumCount { sum: s1, count: c1 },
        ) => s1 >= s0 && c1 >= c0,
        (
            DerivedValue::Counters {
                rows: r0,
                values: v0,
            },
            DerivedValue::Counters {
                rows: r1,
                values: v1,
            },
        ) => r0 == r1 && v0.iter().zip(v1).all(|(a, b)| b >= a),
        _ => false,
    }
}

#[test]
fn a_staleness_marker_before_its_series_real_value_never_evaluates_or_commits_a_frame_without_it() {
    // Issue 23, item 5: the per-position series' marker arrived before the rest of a scrape, its
    // real value at the same timestamp after it; the frame was evaluated, and its oldest frame
    // committed, without the series, and the acceptance-corrected buckets fell.
    let t1 = scrape("0", 1.0, true);
    let t2 = t2_with_low_acceptance();
    let t3 = scaled(&t2, 1.5);
    for window in [1, 2, 16] {
        let config = EngineConfig {
            max_pending_frames: window,
            ..crate::test_support::config()
        };
        let mut in_order = Engine::new(config.clone());
        let mut marker_first = Engine::new(config);
        for (raw, ts) in [(&t1, 1_000), (&t2, 16_000), (&t3, 31_000)] {
            send(&mut in_order, raw, ts);
        }
        send(&mut marker_first, &t1, 1_000);
        let served = value_of(&outputs(&marker_first), Family::AcceptanceCorrectedItl, "0");
        let (per_pos, rest): (Vec<Raw>, Vec<Raw>) = t2.iter().cloned().partition(is_per_pos);
        send(&mut marker_first, &[stale_marker(&per_pos[0])], 16_000);
        send(&mut marker_first, &rest, 16_000);
        let meanwhile = value_of(&outputs(&marker_first), Family::AcceptanceCorrectedItl, "0");
        assert!(
            never_below(&served, &meanwhile),
            "window {window}: {served:?} then {meanwhile:?}"
        );
        send(&mut marker_first, &per_pos, 16_000);
        send(&mut marker_first, &t3, 31_000);
        assert_eq!(
            outputs(&marker_first),
            outputs(&in_order),
            "window {window}: the real value won, as if the marker never came"
        );
    }
}

#[test]
fn a_series_that_flaps_for_one_scrape_never_moves_a_served_value_down() {
    // Present at t1, a staleness marker at t2 (no value), present again at t3.
    let t1 = scrape("0", 1.0, true);
    let t2 = t2_with_low_acceptance();
    let t3 = scaled(&t2, 1.5);
    let flapped: Vec<Raw> = t2
        .iter()
        .map(|r| {
            if is_per_pos(r) {
                stale_marker(r)
            } else {
                r.clone()
            }
        })
        .collect();
    for window in [1, 2, 16] {
        let config = EngineConfig {
            max_pending_frames: window,
            ..crate::test_support::config()
        };
        let mut engine = Engine::new(config.clone());
        let mut served = Vec::new();
        for (raw, ts) in [(&t1, 1_000), (&flapped, 16_000), (&t3, 31_000)] {
            send(&mut engine, raw, ts);
            served.push(value_of(
                &outputs(&engine),
                Family::AcceptanceCorrectedItl,
                "0",
            ));
        }
        for w in served.windows(2) {
            assert!(never_below(&w[0], &w[1]), "window {window}: {served:?}");
        }
        // The flapped scrape is skipped for the family that reads the series: t1 → t3 is one
        // interval, as for an engine that never saw t2.
        let mut skipped = Engine::new(config);
        send(&mut skipped, &t1, 1_000);
        send(&mut skipped, &t3, 31_000);
        assert_eq!(
            served[2],
            value_of(&outputs(&skipped), Family::AcceptanceCorrectedItl, "0"),
            "window {window}"
        );
    }
}

/// Engine 0's scrapes where aborted requests move the TTFT count ahead of the generated tokens:
/// token-weighted ITL's count (generated − TTFT count) is 80 at t1 and would be 65 at t2 while
/// no input fell, so t2 is held at 80.
fn with_aborts() -> (Vec<Raw>, Vec<Raw>) {
    let t1 = scrape("0", 1.0, true);
    let mut t2 = scaled(&t1, 1.0);
    for (labels, value) in &mut t2 {
        let name = labels
            .iter()
            .find(|(n, _)| *n == "__name__")
            .unwrap()
            .1
            .as_str();
        match name {
            "vllm:generation_tokens_total" => *value = 125.0,
            "vllm:time_to_first_token_seconds_count" => *value = 60.0,
            "vllm:inter_token_latency_seconds_sum" => *value = 2.5,
            _ => {}
        }
    }
    (t1, t2)
}

#[test]
fn a_held_counter_does_not_fall_when_its_group_leaves_and_comes_back() {
    // Issue 23, item 4: after a hold, a failed scrape (staleness markers for every series)
    // removed the group; when it came back, token-weighted ITL's `_count` fell 80 → 65.
    let (t1, t2) = with_aborts();
    let mut engine = Engine::new(crate::test_support::config());
    send(&mut engine, &t1, 1_000);
    send(&mut engine, &t2, 16_000);
    let held = value_of(&outputs(&engine), Family::TokenWeightedItl, "0");
    assert_eq!(
        held,
        DerivedValue::SumCount {
            sum: 2.5,
            count: 80.0
        },
        "held at 80"
    );
    let markers: Vec<Raw> = t2.iter().map(stale_marker).collect();
    send(&mut engine, &markers, 31_000);
    assert_eq!(engine.stats().groups, 0, "the group left");
    // Back with the inputs of t2 plus one generated token: computed 66, still below 80.
    let mut back = t2.clone();
    for (labels, value) in &mut back {
        if labels
            .iter()
            .any(|(n, v)| *n == "__name__" && v == "vllm:generation_tokens_total")
        {
            *value += 1.0;
        }
    }
    send(&mut engine, &back, 46_000);
    let after = value_of(&outputs(&engine), Family::TokenWeightedItl, "0");
    assert!(never_below(&held, &after), "{held:?} then {after:?}");
    assert_eq!(
        after,
        DerivedValue::SumCount {
            sum: 2.5,
            count: 80.0
        }
    );
    // Every family the group served before it left comes back at or above it.
    let mut before_leaving = Engine::new(crate::test_support::config());
    send(&mut before_leaving, &t1, 1_000);
    send(&mut before_leaving, &t2, 16_000);
    for (family, _, value) in outputs(&before_leaving) {
        let now = value_of(&outputs(&engine), family, "0");
        assert!(
            never_below(&value, &now),
            "{family:?}: {value:?} then {now:?}"
        );
    }
}

#[test]
fn a_group_that_comes_back_after_its_inputs_reset_starts_afresh() {
    // The hold gives way to an input reset: a vLLM restart while the group was away.
    let (t1, t2) = with_aborts();
    let mut engine = Engine::new(crate::test_support::config());
    send(&mut engine, &t1, 1_000);
    send(&mut engine, &t2, 16_000);
    let markers: Vec<Raw> = t2.iter().map(stale_marker).collect();
    send(&mut engine, &markers, 31_000);
    send(&mut engine, &scaled(&t1, 0.5), 46_000);
    assert_eq!(
        value_of(&outputs(&engine), Family::TokenWeightedItl, "0"),
        DerivedValue::SumCount {
            sum: 1.2,
            count: 40.0
        },
        "restarted from the reset inputs: 60 − 20"
    );
}
