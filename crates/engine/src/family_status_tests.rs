//! What the engine tells about each family of each group beyond "served or withheld" (issue 24):
//! the input series a withheld family lacks, a limit that refused the group's new series (reason
//! `limit` instead of `missing_input` or `incomplete`), the acceptance-corrected buckets served in
//! the degraded mean-weight mode, the duplicate and out-of-order samples of two senders, and the
//! `(family, reason)` pairs that can happen at all. Expected values are counted from the
//! hand-built scrape of `test_support::scrape`, not from the code.

use super::test_support::*;
use super::*;

/// Feeds `raw` stamped `ts`, received at `now`.
fn feed_scrape(engine: &mut Engine, raw: &[Raw], ts: i64, now: i64) -> IngestReport {
    write_at(engine, raw, ts, now).report
}

/// `scrape(e, k, true)` without the series named `name`.
fn scrape_without(e: &str, k: f64, name: &str) -> Vec<Raw> {
    let mut raw = scrape(e, k, true);
    raw.retain(|(labels, _)| labels[0].1 != name);
    raw
}

/// `(state, reason, detail)` of every family of the only group, in registry order.
fn states(engine: &Engine) -> Vec<(&'static str, Option<&'static str>, Option<&'static str>)> {
    let snapshot = engine.snapshot();
    assert_eq!(snapshot.len(), 1, "one group");
    snapshot[0]
        .families
        .iter()
        .map(|f| (f.state(), f.reason(), f.detail()))
        .collect()
}

#[test]
fn a_withheld_family_names_the_input_series_it_lacks() {
    // Without the TTFT count, every family that subtracts first outputs lacks it: token-weighted
    // ITL, the acceptance-corrected ITL and tokens per output. TPOT, iteration tokens and the
    // SLO counters of a TPOT-only SLO do not read it.
    let mut engine = Engine::new(config());
    let ttft = "vllm:time_to_first_token_seconds_count";
    feed_scrape(&mut engine, &scrape_without("0", 1.0, ttft), 1_000, 1_000);
    let lacks = ("withheld", Some("missing_input"), Some(ttft));
    assert_eq!(
        states(&engine),
        [
            ("served", None, None),
            lacks,
            lacks,
            ("served", None, None),
            lacks,
            ("served", None, None)
        ]
    );
    // Canonical TPOT without the token histogram at all names its le="1" bucket, and so do the
    // SLO counters (canonical TPOT events, and the requests that pass TPOT at 0 s).
    let mut engine = Engine::new(config());
    let mut raw = scrape("0", 1.0, true);
    raw.retain(|(labels, _)| !labels[0].1.starts_with("vllm:request_generation_tokens"));
    feed_scrape(&mut engine, &raw, 1_000, 1_000);
    let le1 = (
        "withheld",
        Some("missing_input"),
        Some("vllm:request_generation_tokens_bucket{le=\"1\"}"),
    );
    assert_eq!(states(&engine)[0], le1);
    assert_eq!(states(&engine)[5], le1);
    // An ITL histogram without its _count names the _count.
    let mut engine = Engine::new(config());
    let count = "vllm:inter_token_latency_seconds_count";
    feed_scrape(&mut engine, &scrape_without("0", 1.0, count), 1_000, 1_000);
    assert_eq!(
        states(&engine)[2],
        ("withheld", Some("missing_input"), Some(count))
    );
}

#[test]
fn a_group_without_any_itl_series_is_told_the_current_itl_name() {
    // A group with neither ITL name was told to send `vllm:time_per_output_token_seconds_*`,
    // the name vLLM dropped in 0.15.
    let mut engine = Engine::new(config());
    let mut raw = scrape("0", 1.0, true);
    raw.retain(|(labels, _)| !labels[0].1.starts_with("vllm:inter_token_latency_seconds"));
    feed_scrape(&mut engine, &raw, 1_000, 1_000);
    let details: Vec<&str> = states(&engine).iter().filter_map(|s| s.2).collect();
    assert!(!details.is_empty());
    assert!(
        details
            .iter()
            .all(|d| !d.starts_with("vllm:time_per_output_token_seconds")),
        "{details:?}"
    );
    assert!(
        details
            .iter()
            .any(|d| d.starts_with("vllm:inter_token_latency_seconds_")),
        "{details:?}"
    );
}

#[test]
fn series_refused_by_the_active_series_limit_withhold_for_limit_naming_it() {
    // The scrape's series a rule reads, in order: ITL 6, TPOT 5, the le="1" token bucket, the
    // token count, generation tokens (14), then TTFT count, local compute, iterations and the
    // three spec-decode counters. At 14 series the last six are refused: canonical TPOT and the
    // SLO counters (TPOT only) have all they read; the four others lack TTFT count or local
    // compute, because of the limit.
    let mut engine = Engine::new(EngineConfig {
        max_active_series: 14,
        ..config()
    });
    let mut events = Vec::new();
    for (i, now) in [1_000, 16_000, 31_000].into_iter().enumerate() {
        let report = feed_scrape(&mut engine, &scrape("0", 1.0 + i as f64, true), now, now);
        assert_eq!(
            report.rejected[RejectReason::ActiveSeriesLimit.index()],
            6,
            "scrape {i}"
        );
        events.extend(engine.take_events());
    }
    let limit = ("withheld", Some("limit"), Some("limits.max_active_series"));
    assert_eq!(
        states(&engine),
        [
            ("served", None, None),
            limit,
            limit,
            limit,
            limit,
            ("served", None, None)
        ]
    );
    let snapshot = &engine.snapshot()[0];
    assert_eq!(snapshot.limited, Some("limits.max_active_series"));
    assert!(!snapshot.incomplete, "a limit, not a sharding problem");
    let stats = engine.stats();
    assert_eq!(stats.groups_incomplete, 0);
    let limited: Vec<_> = stats
        .withheld
        .iter()
        .filter(|(_, r, _)| *r == WithheldReason::Limit)
        .map(|(f, _, n)| (*f, *n))
        .collect();
    assert_eq!(limited.len(), 4, "{:?}", stats.withheld);
    assert!(limited.iter().all(|(_, n)| *n == 1));
    // One warning naming the limit over the three scrapes, and no "incomplete" warning.
    let warnings: Vec<_> = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                EngineEvent::GroupLimited { .. } | EngineEvent::GroupIncomplete { .. }
            )
        })
        .collect();
    assert_eq!(
        warnings,
        [&EngineEvent::GroupLimited {
            labels: snapshot.labels.clone(),
            limit: "limits.max_active_series"
        }]
    );
    // The limit raised (a reload): the series are admitted and every family is served; the
    // refusal stays on the group for two scrape intervals (at least 30 s), and 46 s after it the
    // group is not limited.
    engine.set_config(config());
    feed_scrape(&mut engine, &scrape("0", 4.0, true), 46_000, 46_000);
    feed_scrape(&mut engine, &scrape("0", 5.0, true), 61_000, 61_000);
    assert!(states(&engine).iter().all(|s| s.0 == "served"));
    assert_eq!(
        engine.snapshot()[0].limited,
        Some("limits.max_active_series")
    );
    feed_scrape(&mut engine, &scrape("0", 6.0, true), 77_000, 77_000);
    assert_eq!(engine.snapshot()[0].limited, None);
}

#[test]
fn acceptance_buckets_without_per_position_series_are_served_degraded() {
    // Speculative decoding (drafts and accepted counters) without the per-position series: the
    // buckets fall back to one mean weight per interval, and say so, naming the series.
    let per_pos = "vllm:spec_decode_num_accepted_tokens_per_pos_total";
    let mut engine = Engine::new(config());
    feed_scrape(
        &mut engine,
        &scrape_without("0", 1.0, per_pos),
        1_000,
        1_000,
    );
    let served = ("served", None, None);
    assert_eq!(
        states(&engine),
        [
            served,
            served,
            ("degraded", Some("missing_input"), Some(per_pos)),
            served,
            served,
            served
        ]
    );
    assert!(engine.snapshot()[0].families[2].degraded);
    // With the per-position series it is served in full; without speculative decoding the mean
    // weight (1 token per output) is exact, so it is not degraded either.
    for spec in [true, false] {
        let mut engine = Engine::new(config());
        feed_scrape(&mut engine, &scrape("0", 1.0, spec), 1_000, 1_000);
        assert!(states(&engine).iter().all(|s| *s == served), "spec {spec}");
    }
}

#[test]
fn duplicate_and_out_of_order_samples_of_a_second_sender_show_on_the_group() {
    // Two senders with the same labels: the second one's copy of each scrape is all duplicates
    // (20 series a rule reads), and a copy of an older scrape arriving late is all out of order.
    let mut engine = Engine::new(config());
    feed_scrape(&mut engine, &scrape("0", 1.0, true), 1_000, 1_000);
    feed_scrape(&mut engine, &scrape("0", 2.0, true), 16_000, 16_500);
    feed_scrape(&mut engine, &scrape("0", 2.0, true), 16_000, 17_000);
    feed_scrape(&mut engine, &scrape("0", 1.0, true), 1_000, 17_500);
    assert_eq!(engine.snapshot()[0].recent_rejects, [20, 20]);
    // One sender alone from then on: after two minutes of receive time nothing is recent.
    for (i, now) in [31_000, 91_000, 151_000].into_iter().enumerate() {
        feed_scrape(&mut engine, &scrape("0", 3.0 + i as f64, true), now, now);
    }
    assert_eq!(engine.snapshot()[0].recent_rejects, [0, 0]);
}

#[test]
fn only_the_withheld_reasons_a_rule_can_give_are_listed_for_its_family() {
    use WithheldReason::*;
    let common = [MissingInput, Incomplete, Settling, Limit];
    let with = |extra: &[WithheldReason]| {
        let mut all: Vec<_> = common.iter().chain(extra).copied().collect();
        all.sort_by_key(|r| WithheldReason::ALL.iter().position(|a| a == r));
        all
    };
    // Canonical TPOT: no le="1" bound, and a bucket above the count; every family refuses a
    // negative or non-finite value (`rules::servable`), iteration tokens' too (a negative input
    // counter).
    assert_eq!(
        Family::CanonicalTpot.withheld_reasons(),
        with(&[NoLeOneBound, InconsistentInputs])
    );
    for family in [
        Family::TokenWeightedItl,
        Family::AcceptanceCorrectedItl,
        Family::IterationTokensLocalCompute,
    ] {
        assert_eq!(family.withheld_reasons(), with(&[InconsistentInputs]));
    }
    // The SLO counters: no SLO covering the group, no le="1" bound, an inconsistent frame.
    assert_eq!(
        Family::named("vllm_corrected_slo").withheld_reasons(),
        with(&[NoLeOneBound, NoSlo, InconsistentInputs])
    );
    let pairs: usize = Family::ALL.iter().map(|f| f.withheld_reasons().len()).sum();
    assert_eq!(
        pairs,
        6 * 4 + 2 + 6 + 1,
        "4 common each, no_le_1_bound twice, inconsistent 6 times, no_slo once"
    );
}

#[test]
fn a_group_no_vllm_exposes_withholds_as_incomplete_not_as_an_old_vllm() {
    // Issue 31: every vLLM release has the TTFT count, so a group that keeps arriving without it
    // lost it in the pipeline (a keep rule, sharding by series). After the role set has held for
    // two later scrapes the group is incomplete, and its families say `incomplete` with the
    // missing series as detail, which the per-target alert covers; `missing_input` stays for an
    // input a vLLM release lacks (the by-source prompt counter, before 0.16).
    let ttft = "vllm:time_to_first_token_seconds_count";
    let mut engine = Engine::new(config());
    for (k, ts) in [(1.0, 1_000), (2.0, 16_000), (3.0, 31_000)] {
        feed_scrape(&mut engine, &scrape_without("0", k, ttft), ts, ts);
    }
    assert!(engine.snapshot()[0].incomplete);
    let split = ("withheld", Some("incomplete"), Some(ttft));
    assert_eq!(
        states(&engine),
        [
            ("served", None, None),
            split,
            split,
            ("served", None, None),
            split,
            ("served", None, None)
        ]
    );
    let stats = engine.stats();
    let incomplete: usize = stats
        .withheld
        .iter()
        .filter(|(_, r, _)| *r == WithheldReason::Incomplete)
        .map(|(_, _, n)| n)
        .sum();
    assert_eq!(incomplete, 3, "{:?}", stats.withheld);

    let source = "vllm:prompt_tokens_by_source_total";
    let mut engine = Engine::new(config());
    for (k, ts) in [(1.0, 1_000), (2.0, 16_000), (3.0, 31_000)] {
        feed_scrape(&mut engine, &scrape_without("0", k, source), ts, ts);
    }
    assert!(!engine.snapshot()[0].incomplete);
    let local = states(&engine)[3];
    let detail = "vllm:prompt_tokens_by_source_total{source=\"local_compute\"}";
    assert_eq!(local, ("withheld", Some("missing_input"), Some(detail)));
}
