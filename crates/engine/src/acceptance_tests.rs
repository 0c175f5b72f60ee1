//! Engine-level tests of the acceptance-corrected buckets (the stateful family): across stale
//! gaps and counter resets, retired state and its idle timeout, bucket layouts that change, plans
//! that change without a reset, and inputs that are not finite. Expected numbers are worked by
//! hand in comments; the scrapes are `test_support`'s.

use super::test_support::*;
use super::*;

#[test]
fn acceptance_buckets_continue_across_a_stale_gap() {
    // A failed scrape makes Prometheus write staleness markers for every series of the target;
    // the next scrape brings the group back. The acceptance-corrected buckets must then be those
    // of the uninterrupted run, not a re-seed from vLLM's cumulative counts. The t2 scrape has
    // 10 accepted tokens for 40 drafts in its interval (acceptance length 1.25, against 2 up to
    // t1), so a re-seed at t2 (cumulative acceptance length 1.625) gives other buckets.
    let t1 = scrape("0", 1.0, true);
    let t2 = t2_with_low_acceptance();
    let at = |raw: &[Raw], ts| raw.iter().cloned().map(|r| (r, ts)).collect::<Vec<_>>();
    let stale = f64::from_bits(STALE_NAN_BITS);
    let markers: Vec<_> = t1
        .iter()
        .map(|(l, _)| ((l.clone(), stale), 8_000))
        .collect();
    let run = |parts: &[&[(Raw, i64)]]| {
        let mut engine = Engine::new(crate::test_support::config());
        let mut report = IngestReport::default();
        for part in parts {
            feed(&mut engine, part, &mut report);
        }
        assert_eq!(report.applied + report.rejected_total(), report.received);
        (
            value_of(&outputs(&engine), Family::AcceptanceCorrectedItl, "0"),
            engine.stats(),
        )
    };
    let (uninterrupted, _) = run(&[&at(&t1, 1_000), &at(&t2, 16_000)]);
    let (gap, stats) = run(&[&at(&t1, 1_000), &markers, &at(&t2, 16_000)]);
    let (reseeded, _) = run(&[&at(&t2, 16_000)]);
    assert_eq!(
        stats.groups_removed(crate::RemovalReason::Stale),
        1,
        "the markers removed the group"
    );
    assert_eq!(gap, uninterrupted);
    assert_ne!(
        reseeded, uninterrupted,
        "the test needs a run where re-seeding differs"
    );
    // Count and sum: generation 210 − TTFT 80 = 130 tokens; the raw ITL sum.
    let DerivedValue::Histogram { sum, count, .. } = gap else {
        panic!("a histogram")
    };
    assert_eq!((sum, count), (4.8, 130.0));
}

#[test]
fn acceptance_buckets_restart_after_a_stale_gap_with_a_counter_reset() {
    // vLLM restarted during the gap: its counters are back at the k = 1 values, below t2. The
    // resumed group treats that as a reset, as a live group does: the buckets restart from the new
    // values (20, 80, 80, 80 as in `counter_reset_restarts_acceptance_buckets_from_the_new_values`).
    let mut all = two_scrapes();
    all.retain(|((labels, _), _)| labels.iter().any(|(n, v)| *n == "engine" && v == "0"));
    let stale = f64::from_bits(STALE_NAN_BITS);
    all.extend(
        scrape("0", 1.0, true)
            .into_iter()
            .map(|(l, _)| ((l, stale), 20_000)),
    );
    all.extend(scrape("0", 1.0, true).into_iter().map(|r| (r, 31_000)));
    let mut engine = Engine::new(crate::test_support::config());
    feed(&mut engine, &all, &mut IngestReport::default());
    assert_eq!(
        value_of(&outputs(&engine), Family::AcceptanceCorrectedItl, "0"),
        first_interval_at_k1()
    );
    assert_eq!(engine.stats().counter_resets, 1);
}

#[test]
fn retired_acceptance_state_expires_by_sample_time_past_the_idle_timeout() {
    // A stale group's state is kept while the engine's newest sample is within idle_timeout of the
    // group's own newest sample, whatever the wall clock; past it the group comes back re-seeded.
    let t2 = t2_with_low_acceptance();
    let stale = f64::from_bits(STALE_NAN_BITS);
    // test_support's feeding, each call with a report of its own.
    let feed_at = |engine: &mut Engine, raw: Vec<Raw>, ts: i64, now_ms: i64| {
        feed_at(engine, &raw, ts, now_ms, &mut IngestReport::default());
    };
    let run = |others_at: i64| {
        let mut engine = Engine::new(EngineConfig {
            idle_timeout_ms: 60_000,
            ..crate::test_support::config()
        });
        feed_at(&mut engine, scrape("0", 1.0, true), 1_000, 1_000);
        let markers = scrape("0", 1.0, true).into_iter().map(|(l, _)| (l, stale));
        feed_at(&mut engine, markers.collect(), 8_000, 8_000);
        // Another engine's samples move the sample clock on; the wall clock stays at 9 s.
        feed_at(&mut engine, scrape("1", 1.0, true), others_at, 9_000);
        engine.sweep_idle(9_000);
        feed_at(&mut engine, t2.clone(), others_at + 1_000, 9_000);
        value_of(&outputs(&engine), Family::AcceptanceCorrectedItl, "0")
    };
    let mut fresh = Engine::new(crate::test_support::config());
    feed_at(&mut fresh, t2.clone(), 16_000, 16_000);
    let reseeded = value_of(&outputs(&fresh), Family::AcceptanceCorrectedItl, "0");
    // Engine 0's newest sample is at 1 s (its markers carry no value).
    assert_ne!(run(61_000), reseeded, "60 s of sample time later: kept");
    assert_eq!(
        run(61_001),
        reseeded,
        "more than 60 s of sample time later: forgotten"
    );
}

/// Engine 0's k = 2 scrape with its ITL histogram replaced by one on `bounds` (cumulative
/// `cumulative`, the last one `+Inf` = the count), Σ 4.8 s.
fn scrape_with_itl_bounds(bounds: &[&str], cumulative: &[f64]) -> Vec<Raw> {
    let mut raw: Vec<Raw> = scrape("0", 2.0, true)
        .into_iter()
        .filter(|(l, _)| !l[0].1.starts_with("vllm:inter_token_latency_seconds"))
        .collect();
    hist(&mut raw, "itl", "0", bounds, cumulative, 4.8);
    raw
}

/// Issue 13, item 1: scrapes at t and t + 15 s, staleness markers for every series at t + 30 s,
/// then the same series with other ITL `le` bounds at t + 15 s again. The retired state's
/// committed timestamp (t + 15 s) used to survive the re-seed, hide the frame and panic.
#[test]
fn stale_group_returning_with_new_bucket_layout_does_not_panic() {
    let at = |raw: Vec<Raw>, ts| raw.into_iter().map(|r| (r, ts)).collect::<Vec<_>>();
    let stale = f64::from_bits(STALE_NAN_BITS);
    let markers: Vec<_> = scrape("0", 2.0, true)
        .into_iter()
        .map(|(l, _)| ((l, stale), 31_000))
        .collect();
    // The returning frame: 80 outputs, cumulative 0, 20, 50, 80 at 0.025, 0.05, 0.075, 0.1; tokens
    // 240 − 80 = 160, so w = 2 from 0 (a re-seed): 0.025 → 2·F(0.05) = 40, 0.05 → 2·F(0.1) = 160,
    // then 160 (flat past the last bound), `+Inf` = 160.
    let five = scrape_with_itl_bounds(
        &["0.025", "0.05", "0.075", "0.1", "+Inf"],
        &[0.0, 20.0, 50.0, 80.0, 80.0],
    );
    let want5 = DerivedValue::Histogram {
        buckets: vec![
            (0.025, 40.0),
            (0.05, 160.0),
            (0.075, 160.0),
            (0.1, 160.0),
            (f64::INFINITY, 160.0),
        ],
        sum: 4.8,
        count: 160.0,
    };
    // Same number of bounds, other values: 0.02 → 2·F(0.04) = 2·(20·0.02/0.03) = 80/3, then 160.
    let moved = scrape_with_itl_bounds(&["0.02", "0.05", "0.1", "+Inf"], &[0.0, 20.0, 80.0, 80.0]);
    let want_moved = DerivedValue::Histogram {
        buckets: vec![
            (0.02, 80.0 / 3.0),
            (0.05, 160.0),
            (0.1, 160.0),
            (f64::INFINITY, 160.0),
        ],
        sum: 4.8,
        count: 160.0,
    };
    for (returning, want) in [(five, want5), (moved, want_moved)] {
        let mut engine = Engine::new(crate::test_support::config());
        let mut report = IngestReport::default();
        feed(&mut engine, &at(scrape("0", 1.0, true), 1_000), &mut report);
        feed(
            &mut engine,
            &at(scrape("0", 2.0, true), 16_000),
            &mut report,
        );
        feed(&mut engine, &markers, &mut report);
        assert_eq!(
            engine.stats().groups_removed(crate::RemovalReason::Stale),
            1
        );
        feed(&mut engine, &at(returning, 16_000), &mut report);
        assert_eq!(report.applied + report.rejected_total(), report.received);
        let DerivedValue::Histogram {
            buckets,
            sum,
            count,
        } = value_of(&outputs(&engine), Family::AcceptanceCorrectedItl, "0")
        else {
            panic!("a histogram")
        };
        let DerivedValue::Histogram {
            buckets: wb,
            sum: ws,
            count: wc,
        } = &want
        else {
            unreachable!()
        };
        assert_eq!((sum, count), (*ws, *wc));
        assert_eq!(buckets.len(), wb.len());
        for ((le, c), (wle, w)) in buckets.iter().zip(wb) {
            assert!(le == wle && (c - w).abs() < 1e-9, "{buckets:?} vs {wb:?}");
        }
    }
}

/// A group of engine 0 at `ts`: ITL (0.025, 0.05, 0.1, +Inf) cumulative `itl`, generation tokens
/// `generated` over 10 first outputs, and, when given, accepted drafts per position.
fn acceptance_frame(
    itl: [f64; 3],
    generated: f64,
    per_pos: Option<[f64; 3]>,
    ts: i64,
) -> Vec<(Raw, i64)> {
    let mut raw = Vec::new();
    hist(
        &mut raw,
        "itl",
        "0",
        &["0.025", "0.05", "0.1", "+Inf"],
        &[itl[0], itl[1], itl[2], itl[2]],
        itl[2] * 0.05,
    );
    raw.push(series("vllm:generation_tokens_total", "0", &[], generated));
    raw.push(series(
        "vllm:time_to_first_token_seconds_count",
        "0",
        &[],
        10.0,
    ));
    for (p, v) in per_pos.iter().flat_map(|v| v.iter().enumerate()) {
        let pos = ["0", "1", "2"][p];
        raw.push(series(
            "vllm:spec_decode_num_accepted_tokens_per_pos_total",
            "0",
            &[("position", pos)],
            *v,
        ));
    }
    raw.into_iter().map(|r| (r, ts)).collect()
}

#[test]
fn acceptance_buckets_never_fall_when_the_plan_changes_without_a_reset() {
    // t1: 10 outputs in (0.025, 0.05], 10 tokens (w = 1). t2: 10 more in (0.05, 0.1] with 30
    // tokens (w = 3). At t2, le 0.05 holds 1·F1(0.05) + 3·F2(0.15) = 10 + 30 = 40.
    // t3: nothing new, but the per-position series appear (10 outputs accepted 3 drafts): the plan
    // now needs them, t1 and t2 no longer count, and a replay from 0 to t3 gives classes j = 1
    // (10 outputs) and j = 4 (10), 50 tokens scaled to the 40 emitted: le 0.05 = 0.8·(10·F(0.05) +
    // 40·F(0.2))/20 = 0.8·(100 + 800)/20 = 36 < 40. No input fell: the bucket must stay at 40.
    let mut engine = Engine::new(crate::test_support::config());
    let mut report = IngestReport::default();
    feed(
        &mut engine,
        &acceptance_frame([0.0, 10.0, 10.0], 20.0, None, 1_000),
        &mut report,
    );
    feed(
        &mut engine,
        &acceptance_frame([0.0, 10.0, 20.0], 50.0, None, 16_000),
        &mut report,
    );
    let at_t2 = value_of(&outputs(&engine), Family::AcceptanceCorrectedItl, "0");
    let DerivedValue::Histogram { buckets, .. } = &at_t2 else {
        panic!("a histogram")
    };
    assert_eq!(buckets[1], (0.05, 40.0));
    feed(
        &mut engine,
        &acceptance_frame([0.0, 10.0, 20.0], 50.0, Some([10.0, 10.0, 10.0]), 31_000),
        &mut report,
    );
    let DerivedValue::Histogram { buckets, count, .. } =
        value_of(&outputs(&engine), Family::AcceptanceCorrectedItl, "0")
    else {
        panic!("a histogram")
    };
    let DerivedValue::Histogram {
        buckets: before, ..
    } = at_t2
    else {
        unreachable!()
    };
    assert!(
        buckets.iter().zip(&before).all(|(a, b)| a.1 >= b.1),
        "{before:?} -> {buckets:?}"
    );
    assert_eq!(buckets[1], (0.05, 40.0), "held, not 36");
    assert_eq!((buckets[3].1, count), (40.0, 40.0));
    assert_eq!(engine.stats().counter_resets, 0);
}

#[test]
fn an_infinite_or_negative_acceptance_input_withholds_the_family_instead_of_nan_buckets() {
    for bad in [f64::INFINITY, -5.0] {
        let mut engine = Engine::new(crate::test_support::config());
        let mut report = IngestReport::default();
        feed(
            &mut engine,
            &acceptance_frame([0.0, 10.0, 10.0], 20.0, None, 1_000),
            &mut report,
        );
        feed(
            &mut engine,
            &acceptance_frame([0.0, 10.0, 20.0], bad, None, 16_000),
            &mut report,
        );
        assert!(
            outputs(&engine)
                .iter()
                .all(|(f, _, _)| *f != Family::AcceptanceCorrectedItl),
            "{bad}"
        );
        assert!(engine.stats().withheld.contains(&(
            Family::AcceptanceCorrectedItl,
            WithheldReason::InconsistentInputs,
            1
        )));
        // A good scrape after it continues from t1, as if the bad frame had not been there:
        // t1 → t3 adds 10 outputs in (0.05, 0.1] with 30 tokens (w = 3): le 0.05 = 10 + 3·F(0.15) = 40.
        feed(
            &mut engine,
            &acceptance_frame([0.0, 10.0, 20.0], 50.0, None, 31_000),
            &mut report,
        );
        let DerivedValue::Histogram { buckets, count, .. } =
            value_of(&outputs(&engine), Family::AcceptanceCorrectedItl, "0")
        else {
            panic!("a histogram")
        };
        assert_eq!((buckets[1], count), ((0.05, 40.0), 40.0), "{bad}");
    }
}

/// A 64-bit linear congruential step (Knuth's MMIX constants): the test's reproducible dice.
fn lcg(state: &mut u64) -> u64 {
    *state = state
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    *state >> 33
}

#[test]
fn late_and_interleaved_scrapes_give_the_acceptance_buckets_of_in_order_scrapes() {
    // Each output is computed from the previous output's state plus the new frames when that
    // state still stands for the committed frames plus the complete kept ones (group/acceptance.rs).
    // Samples of two neighbouring scrapes arriving mixed (each series still in time order), with
    // a window of 2 frames so that frames are committed between outputs, must give the buckets of
    // the same scrapes sent one after the other. Cumulative inputs grow by random steps; the
    // count is checked by hand: generation tokens − TTFT count (10) at the last frame.
    let mut dice = 7_u64;
    let (mut itl, mut generated, mut per_pos) = ([0.0_f64; 3], 10.0_f64, [0.0_f64; 3]);
    let mut frames = Vec::new();
    for t in 0..24_i64 {
        let new = [lcg(&mut dice) % 5, lcg(&mut dice) % 7, lcg(&mut dice) % 3];
        itl[0] += new[0] as f64;
        itl[1] = (itl[1] + new[1] as f64).max(itl[0]);
        itl[2] = (itl[2] + new[2] as f64).max(itl[1]);
        let outputs = itl[2];
        per_pos[0] = (per_pos[0] + (lcg(&mut dice) % 4) as f64).min(outputs);
        per_pos[1] = (per_pos[1] + (lcg(&mut dice) % 3) as f64).min(per_pos[0]);
        per_pos[2] = (per_pos[2] + (lcg(&mut dice) % 2) as f64).min(per_pos[1]);
        generated = generated.max(10.0 + outputs + per_pos.iter().sum::<f64>());
        frames.push(acceptance_frame(
            itl,
            generated,
            Some(per_pos),
            1_000 + 15_000 * t,
        ));
    }
    let run = |max_pending_frames: usize, mixed: bool| {
        let mut engine = Engine::new(EngineConfig {
            max_pending_frames,
            ..crate::test_support::config()
        });
        let mut report = IngestReport::default();
        let mut dice = 11_u64;
        for pair in frames.chunks(2) {
            let mut order: Vec<(Raw, i64)> = pair.iter().flatten().cloned().collect();
            if mixed && pair.len() == 2 {
                // Interleave the two frames: series i of the newer frame after series i of the
                // older one, otherwise in random order.
                let n = pair[0].len();
                let (mut older, mut newer) = (0, 0);
                order.clear();
                while older < n || newer < n {
                    if newer < older && (older == n || lcg(&mut dice).is_multiple_of(2)) {
                        order.push(pair[1][newer].clone());
                        newer += 1;
                    } else {
                        order.push(pair[0][older].clone());
                        older += 1;
                    }
                }
            }
            feed(&mut engine, &order, &mut report);
        }
        assert_eq!(report.applied + report.rejected_total(), report.received);
        assert_eq!(report.applied, report.received, "{report:?}");
        value_of(&outputs(&engine), Family::AcceptanceCorrectedItl, "0")
    };
    let in_order = run(16, false);
    let DerivedValue::Histogram { count, buckets, .. } = &in_order else {
        panic!("a histogram")
    };
    assert_eq!(*count, generated - 10.0);
    assert!(buckets[0].1 > 0.0 && buckets[0].1 < *count, "{buckets:?}");
    assert_eq!(run(16, true), in_order);
    assert_eq!(run(2, false), in_order);
    assert_eq!(run(2, true), in_order);
}
