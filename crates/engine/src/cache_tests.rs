//! Tests of the known-series cache of [`Engine::ingest`]: a series seen before must reach the same
//! group and role as on first sight, and series of a removed group must start afresh. Expected
//! values by hand.

use super::*;
use protocol::{Label, STALE_NAN_BITS, Sample};

/// The three inputs of token-weighted ITL for engine "0": (name, value).
fn token_weighted_inputs(
    itl_sum: f64,
    generated: f64,
    first_outputs: f64,
) -> Vec<(&'static str, f64)> {
    vec![
        ("vllm:inter_token_latency_seconds_sum", itl_sum),
        ("vllm:generation_tokens_total", generated),
        ("vllm:time_to_first_token_seconds_count", first_outputs),
        // Read by no rule, but its name is readable: cached as unused beside the group.
        ("vllm:request_generation_tokens_bucket", 7.0),
    ]
}

fn feed(
    engine: &mut Engine,
    inputs: &[(&str, f64)],
    ts: i64,
    now_ms: i64,
    report: &mut IngestReport,
) {
    feed_engine(engine, "0", inputs, ts, now_ms, report);
}

fn feed_engine(
    engine: &mut Engine,
    vllm_engine: &str,
    inputs: &[(&str, f64)],
    ts: i64,
    now_ms: i64,
    report: &mut IngestReport,
) {
    for (name, value) in inputs {
        let mut labels = vec![
            Label {
                name: "__name__",
                value: name,
            },
            Label {
                name: "engine",
                value: vllm_engine,
            },
            Label {
                name: "model_name",
                value: "m",
            },
        ];
        if name.ends_with("_bucket") {
            labels.push(Label {
                name: "le",
                value: "2.0",
            });
            labels.sort();
        }
        engine.ingest(
            &labels,
            &[Sample {
                value: *value,
                timestamp_ms: ts,
            }],
            now_ms,
            report,
        );
    }
}

fn token_weighted(engine: &Engine) -> Vec<DerivedValue> {
    let mut out = Vec::new();
    engine.for_each_derived(Family::TokenWeightedItl, |_, v| out.push(v.clone()));
    out
}

#[test]
fn cached_series_reach_the_group_and_role_of_their_first_sample() {
    let mut engine = Engine::new(crate::test_support::config());
    let mut report = IngestReport::default();
    // The second scrape is routed from the cache only.
    for (k, ts) in [(1.0, 1_000), (2.0, 16_000)] {
        feed(
            &mut engine,
            &token_weighted_inputs(2.4 * k, 1000.0 * k, 40.0 * k),
            ts,
            0,
            &mut report,
        );
    }
    // t2: Σ ITL 4.8 s over 2000 - 80 = 1920 tokens.
    assert_eq!(
        token_weighted(&engine),
        vec![DerivedValue::SumCount {
            sum: 4.8,
            count: 1920.0
        }]
    );
    assert_eq!(engine.stats().groups, 1);
    // The token bucket with le=2 is unused both times it is seen: 2 samples; 6 applied.
    assert_eq!(report.rejected[RejectReason::UnusedSeries.index()], 2);
    assert_eq!(report.applied, 6);
}

#[test]
fn series_of_a_group_removed_as_stale_start_a_fresh_group() {
    let mut engine = Engine::new(crate::test_support::config());
    let mut report = IngestReport::default();
    feed(
        &mut engine,
        &token_weighted_inputs(2.4, 1000.0, 40.0),
        1_000,
        0,
        &mut report,
    );
    let stale = f64::from_bits(STALE_NAN_BITS);
    feed(
        &mut engine,
        &token_weighted_inputs(stale, stale, stale)[..3],
        2_000,
        0,
        &mut report,
    );
    assert_eq!(engine.stats().groups, 0);
    // After a restart: Σ 1.2 s over 500 - 20 = 480 tokens, from the new samples alone.
    feed(
        &mut engine,
        &token_weighted_inputs(1.2, 500.0, 20.0),
        3_000,
        0,
        &mut report,
    );
    assert_eq!(engine.stats().groups, 1);
    assert_eq!(
        engine.stats().groups_removed(crate::RemovalReason::Stale),
        1
    );
    assert_eq!(
        token_weighted(&engine),
        vec![DerivedValue::SumCount {
            sum: 1.2,
            count: 480.0
        }]
    );
    assert_eq!(report.applied + report.rejected_total(), report.received);
}

#[test]
fn series_of_a_group_removed_as_idle_start_a_fresh_group() {
    let mut engine = Engine::new(EngineConfig {
        idle_timeout_ms: 60_000,
        ..crate::test_support::config()
    });
    let mut report = IngestReport::default();
    feed(
        &mut engine,
        &token_weighted_inputs(2.4, 1000.0, 40.0),
        1_000,
        100_000,
        &mut report,
    );
    assert_eq!(engine.sweep_idle(200_000), 1);
    // Older timestamps than before are accepted: the series' old state left with its group.
    feed(
        &mut engine,
        &token_weighted_inputs(0.6, 300.0, 10.0),
        500,
        210_000,
        &mut report,
    );
    // Σ 0.6 s over 300 - 10 = 290 tokens.
    assert_eq!(
        token_weighted(&engine),
        vec![DerivedValue::SumCount {
            sum: 0.6,
            count: 290.0
        }]
    );
    assert_eq!(report.rejected[RejectReason::OutOfOrder.index()], 0);
}

#[test]
fn a_slot_reused_by_another_group_never_receives_the_old_groups_series() {
    let mut engine = Engine::new(crate::test_support::config());
    let mut report = IngestReport::default();
    feed_engine(
        &mut engine,
        "0",
        &token_weighted_inputs(2.4, 1000.0, 40.0),
        1_000,
        0,
        &mut report,
    );
    let stale = f64::from_bits(STALE_NAN_BITS);
    feed_engine(
        &mut engine,
        "0",
        &token_weighted_inputs(stale, stale, stale)[..3],
        2_000,
        0,
        &mut report,
    );
    // Engine "1" takes the freed place; then engine "0" comes back.
    feed_engine(
        &mut engine,
        "1",
        &token_weighted_inputs(1.2, 500.0, 20.0),
        3_000,
        0,
        &mut report,
    );
    feed_engine(
        &mut engine,
        "0",
        &token_weighted_inputs(0.6, 300.0, 10.0),
        4_000,
        0,
        &mut report,
    );
    let mut out = Vec::new();
    engine.for_each_derived(Family::TokenWeightedItl, |labels, v| {
        out.push((labels[0].1.clone(), v.clone()))
    });
    // Engine 0: Σ 0.6 s over 300 - 10 = 290 tokens; engine 1: Σ 1.2 s over 500 - 20 = 480.
    assert_eq!(
        out,
        vec![
            (
                "0".to_string(),
                DerivedValue::SumCount {
                    sum: 0.6,
                    count: 290.0
                }
            ),
            (
                "1".to_string(),
                DerivedValue::SumCount {
                    sum: 1.2,
                    count: 480.0
                }
            ),
        ]
    );
}
