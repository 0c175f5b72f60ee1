//! Snapshot, events and missed-scrapes removal, with an explicit (deterministic) engine clock:
//! every `now_ms` is passed in, nothing reads the wall clock. It reuses the hand-worked
//! scrape of `test_support` (`scrape`).

use super::test_support::*;
use super::*;

/// Feeds one scrape of engine `e` (scaled by `k`) stamped `ts`, received at `now`.
fn scrape_at(engine: &mut Engine, e: &str, k: f64, spec: bool, ts: i64, now: i64) -> IngestReport {
    let mut report = IngestReport::default();
    for (labels, value) in scrape(e, k, spec) {
        ingest_series(
            engine,
            &labels,
            &[Sample {
                value,
                timestamp_ms: ts,
            }],
            now,
            &mut report,
        );
    }
    report
}

fn labels_of(e: &str) -> Vec<(String, String)> {
    vec![
        ("engine".into(), e.into()),
        ("model_name".into(), "m".into()),
    ]
}

#[test]
fn snapshot_reports_families_series_resets_and_scrape_interval() {
    let mut engine = Engine::new(crate::test_support::config());
    scrape_at(&mut engine, "0", 1.0, true, 1_000, 1_000);
    scrape_at(&mut engine, "0", 2.0, true, 16_000, 16_500);
    let snap = engine.snapshot();
    assert_eq!(snap.len(), 1);
    let g = &snap[0];
    assert_eq!(g.labels, labels_of("0").into());
    assert!(
        g.families.iter().all(|f| f.withheld.is_none()),
        "{:?}",
        g.families
    );
    // Read series: ITL 4 buckets + _sum + _count, TPOT 3 + 2, tokens{le="1.0"}, tokens _count,
    // generation tokens, TTFT _count, local compute, iterations, accepted, drafts, accepted at
    // position 0 = 6 + 5 + 9 = 20.
    assert_eq!(g.input_series, 20);
    assert_eq!(
        (g.last_sample_ms, g.scrape_interval_ms, g.last_received_ms),
        (Some(16_000), Some(15_000), 16_500)
    );
    assert_eq!((g.counter_resets, g.incomplete), (0, false));

    // Without spec decoding and without the by-source counter (vLLM < 0.16 has none).
    let mut old = Engine::new(crate::test_support::config());
    let mut report = IngestReport::default();
    for (labels, value) in scrape("1", 1.0, false) {
        if labels
            .iter()
            .any(|(_, v)| v == "vllm:prompt_tokens_by_source_total")
        {
            continue;
        }
        ingest_series(
            &mut old,
            &labels,
            &[Sample {
                value,
                timestamp_ms: 1_000,
            }],
            1_000,
            &mut report,
        );
    }
    let g = &old.snapshot()[0];
    let withheld: Vec<_> = g.families.iter().map(|f| (f.family, f.withheld)).collect();
    assert_eq!(withheld.len(), FAMILIES, "every family, in registry order");
    assert_eq!(
        withheld[..4],
        [
            (Family::CanonicalTpot, None),
            (Family::TokenWeightedItl, None),
            (Family::AcceptanceCorrectedItl, None),
            (
                Family::IterationTokensLocalCompute,
                Some(WithheldReason::MissingInput)
            ),
        ]
    );
    assert_eq!(g.scrape_interval_ms, None, "one scrape: no interval yet");
}

#[test]
fn first_complete_scrape_is_reported_once_over_many_scrapes() {
    let mut engine = Engine::new(crate::test_support::config());
    scrape_at(&mut engine, "0", 1.0, true, 1_000, 1_000);
    let events = engine.take_events();
    assert_eq!(
        events,
        [EngineEvent::FirstCompleteScrape {
            labels: labels_of("0").into(),
            served: Family::ALL.to_vec(),
            withheld: vec![]
        }]
    );
    for (i, k) in [2.0, 3.0, 4.0].into_iter().enumerate() {
        let ts = 1_000 + 15_000 * (i as i64 + 1);
        scrape_at(&mut engine, "0", k, true, ts, ts);
        assert_eq!(engine.take_events(), [], "scrape {k}");
    }
}

#[test]
fn family_withheld_and_served_again_are_reported_once_each() {
    let mut engine = Engine::new(crate::test_support::config());
    scrape_at(&mut engine, "0", 1.0, true, 1_000, 1_000);
    assert_eq!(engine.take_events().len(), 1);
    let is_local = |l: &[(&str, String)]| l.iter().any(|(_, v)| v == "local_compute");
    // Scrapes without the local-compute counter (its first one carries a staleness marker): the
    // family keeps what it served while the series may yet come back, and is withheld once the
    // series has no sample in the whole frame window: when the frame window (16 frames) has moved
    // past its marker's frame, at the 18th scrape after the first.
    let stale = f64::from_bits(STALE_NAN_BITS);
    let mut events = Vec::new();
    for i in 1..=18 {
        let ts = 1_000 + i * 15_000;
        let mut report = IngestReport::default();
        for (labels, value) in scrape("0", 1.0 + i as f64, true) {
            let value = match (is_local(&labels), i) {
                (false, _) => value,
                (true, 1) => stale,
                (true, _) => continue,
            };
            let sample = Sample {
                value,
                timestamp_ms: ts,
            };
            ingest_series(&mut engine, &labels, &[sample], ts, &mut report);
        }
        if i < 18 {
            assert_eq!(engine.take_events(), [], "scrape {i}: nothing withheld yet");
        } else {
            events = engine.take_events();
        }
    }
    // The event names the series that went missing: the one this test stopped sending.
    let withheld = EngineEvent::FamilyWithheld {
        labels: labels_of("0").into(),
        status: FamilyStatus {
            family: Family::IterationTokensLocalCompute,
            withheld: Some(WithheldReason::MissingInput),
            degraded: false,
            missing_input: Some("vllm:prompt_tokens_by_source_total{source=\"local_compute\"}"),
            limit: None,
        },
    };
    assert_eq!(events, [withheld]);
    // The next scrape carries the series again: the family is back, reported once.
    scrape_at(&mut engine, "0", 20.0, true, 400_000, 400_000);
    assert_eq!(
        engine.take_events(),
        [EngineEvent::FamilyServed {
            labels: labels_of("0").into(),
            family: Family::IterationTokensLocalCompute
        }]
    );
    scrape_at(&mut engine, "0", 21.0, true, 415_000, 415_000);
    assert_eq!(engine.take_events(), []);
}

#[test]
fn counter_reset_and_stale_removal_are_reported_once() {
    let mut engine = Engine::new(crate::test_support::config());
    // Whole multiples, so that every count stays an integer as vLLM's do.
    scrape_at(&mut engine, "0", 4.0, true, 1_000, 1_000);
    scrape_at(&mut engine, "0", 2.0, true, 16_000, 16_000); // every counter halves: a restart
    let events = engine.take_events();
    let resets: Vec<_> = events
        .iter()
        .filter(|e| matches!(e, EngineEvent::CounterReset { .. }))
        .collect();
    assert_eq!(
        resets,
        [&EngineEvent::CounterReset {
            labels: labels_of("0").into()
        }]
    );
    assert_eq!(engine.snapshot()[0].counter_resets, 1);
    scrape_at(&mut engine, "0", 3.0, true, 31_000, 31_000);
    assert_eq!(engine.take_events(), []);
    // A failed scrape: staleness markers for every series.
    let stale = f64::from_bits(STALE_NAN_BITS);
    let mut report = IngestReport::default();
    for (labels, _) in scrape("0", 1.0, true) {
        ingest_series(
            &mut engine,
            &labels,
            &[Sample {
                value: stale,
                timestamp_ms: 46_000,
            }],
            46_000,
            &mut report,
        );
    }
    assert_eq!(
        engine.take_events(),
        [EngineEvent::GroupRemoved {
            labels: labels_of("0").into(),
            reason: RemovalReason::Stale
        }]
    );
    assert!(engine.snapshot().is_empty());
}

#[test]
fn incomplete_group_is_reported_once() {
    // A target without its TTFT count: no vLLM version exposes that set (its series are split
    // across correctors, or filtered), yet it feeds a family, so it is warned about. (A group
    // that feeds no family is not: `evict_tests.rs`.)
    let mut engine = Engine::new(crate::test_support::config());
    let mut warnings = 0;
    for i in 0..6 {
        let ts = 1_000 + 15_000 * i;
        let mut report = IngestReport::default();
        for (labels, value) in scrape("0", 1.0 + i as f64, false) {
            if labels
                .iter()
                .any(|(_, v)| v == "vllm:time_to_first_token_seconds_count")
            {
                continue;
            }
            ingest_series(
                &mut engine,
                &labels,
                &[Sample {
                    value,
                    timestamp_ms: ts,
                }],
                ts,
                &mut report,
            );
        }
        warnings += engine
            .take_events()
            .iter()
            .filter(|e| matches!(e, EngineEvent::GroupIncomplete { .. }))
            .count();
    }
    assert_eq!(warnings, 1);
    assert!(engine.snapshot()[0].incomplete);
}

#[test]
fn group_missing_three_scrape_intervals_leaves_before_the_idle_timeout() {
    // 15 s scrapes: 3 × 15 s = 45 s > the 30 s floor. Last new sample received at 16 000.
    let mut engine = Engine::new(crate::test_support::config());
    scrape_at(&mut engine, "0", 1.0, true, 1_000, 1_000);
    scrape_at(&mut engine, "0", 2.0, true, 16_000, 16_000);
    // A resent batch (duplicates) is not a new sample.
    let resent = scrape_at(&mut engine, "0", 2.0, true, 16_000, 40_000);
    assert_eq!(
        (
            resent.applied,
            resent.rejected[RejectReason::DuplicateSample.index()]
        ),
        (0, 20),
        "one duplicate for each of the 20 series a rule reads"
    );
    engine.take_events();
    assert_eq!(
        engine.sweep_idle(16_000 + 45_000),
        0,
        "exactly three intervals: still there"
    );
    assert_eq!(engine.sweep_idle(16_000 + 45_001), 1);
    assert_eq!(
        engine.take_events(),
        [EngineEvent::GroupRemoved {
            labels: labels_of("0").into(),
            reason: RemovalReason::MissedScrapes
        }]
    );
    assert_eq!(
        engine
            .stats()
            .groups_removed(crate::RemovalReason::MissedScrapes),
        1
    );
    assert_eq!(
        engine.stats().groups_removed(crate::RemovalReason::Idle),
        0,
        "missed scrapes, not idle: one word"
    );
    assert_eq!(engine.stats().groups, 0);
}

#[test]
fn missed_scrapes_wait_at_least_the_floor_and_can_be_turned_off() {
    // 1 s scrapes: 3 s is below the 30 s floor, which applies.
    let mut engine = Engine::new(crate::test_support::config());
    scrape_at(&mut engine, "0", 1.0, true, 1_000, 1_000);
    scrape_at(&mut engine, "0", 2.0, true, 2_000, 2_000);
    assert_eq!(engine.sweep_idle(2_000 + 30_000), 0);
    assert_eq!(engine.sweep_idle(2_000 + 30_001), 1);

    let off = EngineConfig {
        missed_scrapes: 0,
        ..crate::test_support::config()
    };
    let mut engine = Engine::new(off);
    scrape_at(&mut engine, "0", 1.0, true, 1_000, 1_000);
    scrape_at(&mut engine, "0", 2.0, true, 16_000, 16_000);
    assert_eq!(
        engine.sweep_idle(16_000 + 9 * 60_000),
        0,
        "off: only the 10 min idle timeout"
    );
    assert_eq!(engine.sweep_idle(16_000 + 10 * 60_000 + 1), 1);

    // One scrape only: no interval is known, so only the idle timeout removes it.
    let mut engine = Engine::new(crate::test_support::config());
    scrape_at(&mut engine, "0", 1.0, true, 1_000, 1_000);
    assert_eq!(engine.sweep_idle(1_000 + 5 * 60_000), 0);
}

fn acceptance(engine: &Engine) -> DerivedValue {
    let mut out = None;
    engine.for_each_derived(Family::AcceptanceCorrectedItl, |_, v| out = Some(v.clone()));
    out.expect("acceptance-corrected ITL served")
}

/// The `k = 3` scrape of engine 0 at 76 000 ms with another acceptance in its interval than the
/// two before: 340 generation tokens (interval 3 emits 100 − 40 first = 60 after the first, over
/// 40 outputs: 1.5 a output), 100 drafts accepted at position 0 (20 of the 40 outputs accepted
/// theirs), and all 40 new ITL samples in (0.025, 0.05] (cumulative 0, 60, 120).
fn third_scrape(engine: &mut Engine) {
    let mut report = IngestReport::default();
    for (labels, value) in scrape("0", 3.0, true) {
        let name = labels
            .iter()
            .find(|(n, _)| *n == "__name__")
            .map(|(_, v)| v.as_str());
        let le = labels
            .iter()
            .find(|(n, _)| *n == "le")
            .map(|(_, v)| v.as_str());
        let value = match (name, le) {
            (Some("vllm:generation_tokens_total"), _) => 340.0,
            (Some("vllm:spec_decode_num_accepted_tokens_per_pos_total"), _) => 100.0,
            (Some("vllm:inter_token_latency_seconds_bucket"), Some("0.05")) => 60.0,
            _ => value,
        };
        ingest_series(
            engine,
            &labels,
            &[Sample {
                value,
                timestamp_ms: 76_000,
            }],
            76_000,
            &mut report,
        );
    }
    // 24 series: the 20 a rule reads are applied; le="2.0", `_created`, `local_cache_hit` and
    // `num_requests_running` are unused.
    assert_eq!((report.received, report.applied), (24, 20));
}

#[test]
fn group_leaving_for_missed_scrapes_continues_its_acceptance_buckets_when_it_returns() {
    let feed_three = |engine: &mut Engine, sweep_between: bool| {
        scrape_at(engine, "0", 1.0, true, 1_000, 1_000);
        scrape_at(engine, "0", 2.0, true, 16_000, 16_000);
        if sweep_between {
            assert_eq!(engine.sweep_idle(70_000), 1, "left for missed scrapes");
        }
        third_scrape(engine);
    };
    let mut continued = Engine::new(crate::test_support::config());
    feed_three(&mut continued, true);
    let mut never_left = Engine::new(crate::test_support::config());
    feed_three(&mut never_left, false);
    let (DerivedValue::Histogram { buckets: a, .. }, DerivedValue::Histogram { buckets: b, .. }) =
        (acceptance(&continued), acceptance(&never_left))
    else {
        panic!("histograms")
    };
    assert_eq!(a, b, "the returning group continues exactly");
    // By hand (docs/METRICS.md, "Acceptance-corrected ITL"). Intervals 1 and 2: 40 outputs, 80
    // tokens, every output accepted its draft (2 tokens each), raw deltas 0, 10, 40 at 0.025,
    // 0.05, 0.1: le 0.025 gets 2·F(0.05) = 20 each. Interval 3: 20 outputs of 2 tokens and 20 of
    // 1, raw deltas 0, 40, 40: (20·2·F(0.05) + 20·1·F(0.025)) / 40 = 40. In all 20 + 20 + 40.
    assert_eq!(a[0], (0.025, 80.0));
    // A fresh start (no retired state) sees one interval from 0 to k = 3: 120 outputs, 100 of 2
    // tokens and 20 of 1, cumulative 0, 60, 120: (100·2·F(0.05) + 20·F(0.025)) / 120 = 100, a
    // different first bucket, so continuing is not the same as starting over.
    let mut fresh = Engine::new(crate::test_support::config());
    third_scrape(&mut fresh);
    let DerivedValue::Histogram { buckets: f, .. } = acceptance(&fresh) else {
        panic!("a histogram")
    };
    assert!((f[0].1 - 100.0).abs() < 1e-9, "{f:?}");
}
