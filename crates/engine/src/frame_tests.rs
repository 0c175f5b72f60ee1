//! Engine-level tests: grouping, the frame join under shuffled arrival, duplicates, staleness,
//! idle timeout, counter resets, the ITL rename and incomplete frames, with the accounting
//! invariant. Expected numbers are worked by hand in comments; the scrapes are `test_support`'s.

use rand::SeedableRng;
use rand::seq::SliceRandom;

use super::test_support::*;
use super::*;

#[test]
fn hand_computed_values_after_two_scrapes() {
    let mut engine = Engine::new(crate::test_support::config());
    let mut report = IngestReport::default();
    feed(&mut engine, &two_scrapes(), &mut report);
    let out = outputs(&engine);
    // t2 (k = 2): TPOT buckets 6,18,20 minus tokens{le=1} 6 -> 0,12,14; Σ 0.84; count 20 - 6 = 14.
    assert_eq!(
        value_of(&out, Family::CanonicalTpot, "0"),
        DerivedValue::Histogram {
            buckets: vec![(0.01, 0.0), (0.05, 12.0), (f64::INFINITY, 14.0)],
            sum: 0.84,
            count: 14.0
        }
    );
    // Σ ITL 4.8 s over 160 - 80 = 80 tokens.
    assert_eq!(
        value_of(&out, Family::TokenWeightedItl, "1"),
        DerivedValue::SumCount {
            sum: 4.8,
            count: 80.0
        }
    );
    // 600 local + 240 generated over 500 iterations.
    assert_eq!(
        value_of(&out, Family::IterationTokensLocalCompute, "0"),
        DerivedValue::SumCount {
            sum: 840.0,
            count: 500.0
        }
    );
    // Engine 0 has spec decoding: both intervals have ΔN = 40 outputs carrying Δ(generation − TTFT)
    // = 120 − 40 = 80 tokens, so w = 2 each time.
    // Raw ITL deltas per interval at 0.025, 0.05, 0.1: 0, 10, 40. Per-token bucket at B = 2·F(2B):
    //   0.025 -> 2·F(0.05) = 20;  0.05 -> 2·F(0.1) = 80;  0.1 -> 2·F(0.2) = 80;  +Inf -> 80.
    // Two intervals: 40, 160, 160, 160. Exact: Σ 4.8 s, count 240 − 80 = 160 tokens.
    assert_eq!(
        value_of(&out, Family::AcceptanceCorrectedItl, "0"),
        DerivedValue::Histogram {
            buckets: vec![
                (0.025, 40.0),
                (0.05, 160.0),
                (0.1, 160.0),
                (f64::INFINITY, 160.0)
            ],
            sum: 4.8,
            count: 160.0
        }
    );
    // Engine 1 has none (160 − 80 = 80 tokens for 80 outputs, w = 1): its raw ITL histogram at t2.
    assert_eq!(
        value_of(&out, Family::AcceptanceCorrectedItl, "1"),
        DerivedValue::Histogram {
            buckets: vec![
                (0.025, 0.0),
                (0.05, 20.0),
                (0.1, 80.0),
                (f64::INFINITY, 80.0)
            ],
            sum: 4.8,
            count: 80.0
        }
    );
    // Accounting: per engine and scrape, the tokens bucket le=2.0, _created, by-source cache hit and
    // running series are unused; drafts are read by the completeness check, per-pos by the
    // acceptance-corrected buckets. 4 per engine => 4 * 2 * 2 = 16 unused samples.
    let total = two_scrapes().len() as u64;
    assert_eq!(report.received, total);
    assert_eq!(report.rejected[RejectReason::UnusedSeries.index()], 16);
    assert_eq!(report.applied + report.rejected_total(), report.received);
    assert_eq!(engine.stats().groups, 2);
}

#[test]
fn shuffled_split_arrival_gives_the_same_output_as_in_order_arrival() {
    let ordered = two_scrapes();
    let mut reference = Engine::new(crate::test_support::config());
    feed(&mut reference, &ordered, &mut IngestReport::default());
    let want = outputs(&reference);
    assert_eq!(want.len(), 2 * FAMILIES, "every family of both engines");
    for seed in 0..50u64 {
        // Shuffle all samples, then restore per-series order (Prometheus keeps one series in order):
        // t1 and t2 of different series interleave freely.
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut shuffled = ordered.clone();
        shuffled.shuffle(&mut rng);
        let mut seen = std::collections::HashSet::new();
        let shuffled: Vec<_> = shuffled
            .iter()
            .map(|((labels, _), _)| {
                let first = seen.insert(labels.clone());
                ordered
                    .iter()
                    .filter(|((l, _), _)| l == labels)
                    .nth(usize::from(!first))
                    .unwrap()
                    .clone()
            })
            .collect();
        let mut engine = Engine::new(crate::test_support::config());
        feed(&mut engine, &shuffled, &mut IngestReport::default());
        // Every family is the same but the goodput bounds of the SLO counters: those add each
        // interval once as its frame completes (`FrameRule::FORWARD_ONLY`), and a frame first
        // complete under a plan that lacked some series counts that interval loosely (every
        // finished request to the upper bound, none to the lower, and nothing to the SLI rows).
        // Their finished requests are the same, their SLI rows at most the in-order ones, and
        // the bounds still contain the in-order ones.
        let got = outputs(&engine);
        assert_eq!(got.len(), want.len(), "seed {seed}");
        for (g, w) in got.iter().zip(&want) {
            match (g, w) {
                (
                    (f, l, DerivedValue::Counters { values: v, .. }),
                    (f2, l2, DerivedValue::Counters { values: v2, .. }),
                ) => {
                    assert_eq!((f, l), (f2, l2), "seed {seed}");
                    // Rows: TPOT events, good events, finished, lower, upper.
                    assert_eq!(v[2], v2[2], "seed {seed}");
                    assert!(v[0] <= v2[0] && v[1] <= v2[1], "seed {seed}: {v:?} {v2:?}");
                    assert!(v[3] <= v2[3] && v2[4] <= v[4], "seed {seed}: {v:?} {v2:?}");
                }
                _ => assert_eq!(g, w, "seed {seed}"),
            }
        }
    }
}

#[test]
fn duplicates_and_out_of_order_samples_are_counted_not_applied() {
    let mut engine = Engine::new(crate::test_support::config());
    let mut report = IngestReport::default();
    let tokens = series("vllm:generation_tokens_total", "0", &[], 10.0);
    feed(
        &mut engine,
        &[
            (tokens.clone(), 2_000),
            (tokens.clone(), 2_000),
            (tokens.clone(), 1_000),
            (tokens, 3_000),
        ],
        &mut report,
    );
    assert_eq!(report.applied, 2);
    assert_eq!(report.rejected[RejectReason::DuplicateSample.index()], 1);
    assert_eq!(report.rejected[RejectReason::OutOfOrder.index()], 1);
    let nan = series("vllm:generation_tokens_total", "0", &[], f64::NAN);
    feed(&mut engine, &[(nan, 4_000)], &mut report);
    assert_eq!(report.rejected[RejectReason::NanValue.index()], 1);
    assert_eq!(report.applied + report.rejected_total(), report.received);
}

#[test]
fn stale_markers_for_every_series_remove_the_group() {
    let mut engine = Engine::new(crate::test_support::config());
    let mut report = IngestReport::default();
    let first = scrape("0", 1.0, true);
    feed(
        &mut engine,
        &first
            .iter()
            .cloned()
            .map(|r| (r, 1_000))
            .collect::<Vec<_>>(),
        &mut report,
    );
    assert_eq!(outputs(&engine).len(), FAMILIES, "every family");
    let stale = f64::from_bits(STALE_NAN_BITS);
    let markers: Vec<_> = first
        .into_iter()
        .map(|(l, _)| ((l, stale), 2_000))
        .collect();
    let (head, tail) = markers.split_at(3);
    feed(&mut engine, head, &mut report);
    assert_eq!(engine.stats().groups, 1, "still some live series");
    feed(&mut engine, tail, &mut report);
    assert_eq!(engine.stats().groups, 0);
    assert!(outputs(&engine).is_empty());
    assert_eq!(
        engine.stats().groups_removed(crate::RemovalReason::Stale),
        1
    );
    assert_eq!(report.applied + report.rejected_total(), report.received);
}

#[test]
fn idle_groups_leave_after_the_timeout() {
    let mut engine = Engine::new(EngineConfig {
        idle_timeout_ms: 60_000,
        ..crate::test_support::config()
    });
    let mut report = IngestReport::default();
    let labels: Vec<(&str, String)> = series("vllm:generation_tokens_total", "0", &[], 0.0).0;
    let labels: Vec<Label<'_>> = labels
        .iter()
        .map(|(n, v)| Label { name: n, value: v })
        .collect();
    engine.ingest(
        &labels,
        &[Sample {
            value: 1.0,
            timestamp_ms: 5,
        }],
        100_000,
        &mut report,
    );
    assert_eq!(
        engine.sweep_idle(160_000),
        0,
        "exactly at the timeout it stays"
    );
    assert_eq!(engine.sweep_idle(160_001), 1);
    assert_eq!(engine.stats().groups, 0);
}

#[test]
fn counter_reset_restarts_acceptance_buckets_from_the_new_values() {
    // After a vLLM restart the raw counters restart: the t3 scrape (k = 1 again) is below t2.
    // The family then equals a fresh first interval: the k = 1 values, 20, 80, 80, 80; count 80.
    let mut all = two_scrapes();
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
fn acceptance_buckets_survive_frame_eviction_unchanged() {
    // With a window of 2 frames, t1 is committed when t3 arrives; the result must equal a window of 16.
    let mut all = two_scrapes();
    all.extend(scrape("0", 3.0, true).into_iter().map(|r| (r, 31_000)));
    let run = |frames| {
        let mut engine = Engine::new(EngineConfig {
            max_pending_frames: frames,
            ..crate::test_support::config()
        });
        feed(&mut engine, &all, &mut IngestReport::default());
        value_of(&outputs(&engine), Family::AcceptanceCorrectedItl, "0")
    };
    // Three intervals with w = 2: 60, 240, 240, 240.
    let want = DerivedValue::Histogram {
        buckets: vec![
            (0.025, 60.0),
            (0.05, 240.0),
            (0.1, 240.0),
            (f64::INFINITY, 240.0),
        ],
        sum: 2.4 * 3.0, // passed through from the raw ITL _sum of t3
        count: 240.0,
    };
    assert_eq!(run(16), want);
    assert_eq!(run(2), want);
}

#[test]
fn old_itl_name_alone_feeds_itl_families_and_tpot_is_absent() {
    // vLLM 0.10: time_per_output_token_seconds only, no request TPOT histogram.
    let mut raw = Vec::new();
    hist(&mut raw, "old", "0", &["0.05", "+Inf"], &[5.0, 8.0], 0.3);
    raw.push(series("vllm:generation_tokens_total", "0", &[], 18.0));
    raw.push(series(
        "vllm:time_to_first_token_seconds_count",
        "0",
        &[],
        10.0,
    ));
    let mut engine = Engine::new(crate::test_support::config());
    feed(
        &mut engine,
        &raw.into_iter().map(|r| (r, 1_000)).collect::<Vec<_>>(),
        &mut IngestReport::default(),
    );
    let out = outputs(&engine);
    assert_eq!(
        value_of(&out, Family::TokenWeightedItl, "0"),
        DerivedValue::SumCount {
            sum: 0.3,
            count: 8.0
        }
    );
    assert!(out.iter().all(|(f, _, _)| *f != Family::CanonicalTpot));
    let stats = engine.stats();
    assert!(
        stats
            .withheld
            .contains(&(Family::CanonicalTpot, WithheldReason::MissingInput, 1))
    );
    assert!(stats.withheld.contains(&(
        Family::IterationTokensLocalCompute,
        WithheldReason::MissingInput,
        1
    )));
}

#[test]
fn both_itl_names_are_never_counted_twice() {
    // vLLM 0.10.2-0.14 emit both names with identical values: Σ must be 0.3, not 0.6. 18 tokens
    // − 10 first outputs = 8 tokens for 8 outputs: the acceptance-corrected family is raw ITL.
    let mut raw = Vec::new();
    hist(&mut raw, "old", "0", &["0.05", "+Inf"], &[5.0, 8.0], 0.3);
    hist(&mut raw, "itl", "0", &["0.05", "+Inf"], &[5.0, 8.0], 0.3);
    raw.push(series("vllm:generation_tokens_total", "0", &[], 18.0));
    raw.push(series(
        "vllm:time_to_first_token_seconds_count",
        "0",
        &[],
        10.0,
    ));
    let mut engine = Engine::new(crate::test_support::config());
    feed(
        &mut engine,
        &raw.into_iter().map(|r| (r, 1_000)).collect::<Vec<_>>(),
        &mut IngestReport::default(),
    );
    let out = outputs(&engine);
    assert_eq!(
        value_of(&out, Family::TokenWeightedItl, "0"),
        DerivedValue::SumCount {
            sum: 0.3,
            count: 8.0
        }
    );
    assert_eq!(
        value_of(&out, Family::AcceptanceCorrectedItl, "0"),
        DerivedValue::Histogram {
            buckets: vec![(0.05, 5.0), (f64::INFINITY, 8.0)],
            sum: 0.3,
            count: 8.0
        }
    );
}

#[test]
fn token_histogram_without_a_one_bound_withholds_canonical_tpot() {
    let mut raw: Vec<Raw> = scrape("0", 1.0, false)
        .into_iter()
        .filter(|(l, _)| !l.iter().any(|(n, v)| *n == "le" && v == "1.0"))
        .collect();
    raw.push(series(
        "vllm:request_generation_tokens_bucket",
        "0",
        &[("le", "5.0")],
        9.0,
    ));
    let mut engine = Engine::new(crate::test_support::config());
    feed(
        &mut engine,
        &raw.into_iter().map(|r| (r, 1_000)).collect::<Vec<_>>(),
        &mut IngestReport::default(),
    );
    assert!(
        outputs(&engine)
            .iter()
            .all(|(f, _, _)| *f != Family::CanonicalTpot)
    );
    assert!(engine.stats().withheld.contains(&(
        Family::CanonicalTpot,
        WithheldReason::NoLeOneBound,
        1
    )));
}

#[test]
fn a_frame_missing_an_input_never_emits() {
    // t1 complete; t2 lacks TTFT count: token-weighted ITL stays at t1 (Σ 2.4 s over 80 - 40 tokens).
    let mut raw: Vec<(Raw, i64)> = scrape("1", 1.0, false)
        .into_iter()
        .map(|r| (r, 1_000))
        .collect();
    raw.extend(
        scrape("1", 2.0, false)
            .into_iter()
            .filter(|(l, _)| {
                !l.iter()
                    .any(|(_, v)| v == "vllm:time_to_first_token_seconds_count")
            })
            .map(|r| (r, 16_000)),
    );
    let mut engine = Engine::new(crate::test_support::config());
    feed(&mut engine, &raw, &mut IngestReport::default());
    let out = outputs(&engine);
    assert_eq!(
        value_of(&out, Family::TokenWeightedItl, "1"),
        DerivedValue::SumCount {
            sum: 2.4,
            count: 40.0
        }
    );
    // Families that do not read the TTFT count moved on to t2: 600 local + 160 generated.
    assert_eq!(
        value_of(&out, Family::IterationTokensLocalCompute, "1"),
        DerivedValue::SumCount {
            sum: 760.0,
            count: 500.0
        }
    );
}
