//! A cardinality flood at `max_active_series` (`crates/engine/src/state/room.rs`): lone series that can feed
//! no family must not lock a new vLLM engine out.

use super::test_support::*;
use super::*;

fn flood(n: usize) -> Vec<Raw> {
    (0..n)
        .map(|i| {
            series(
                "vllm:generation_tokens_total",
                &format!("flood-{i}"),
                &[],
                10.0,
            )
        })
        .collect()
}

fn config(max_active_series: usize) -> EngineConfig {
    EngineConfig {
        max_active_series,
        ..crate::test_support::config()
    }
}

/// The series of `scrape("0", …)` that a rule reads: 20 (24 minus le="2.0", `_created`,
/// `local_cache_hit` and `num_requests_running`).
const ENGINE_SERIES: u64 = 20;

#[test]
fn a_flood_of_lone_series_does_not_lock_out_a_new_engine() {
    let mut engine = Engine::new(config(100));
    let mut report = IngestReport::default();
    // 100 lone generation-token series fill the limit, scraped three times (15 s apart): each
    // group has kept a role set no vLLM produces over two later scrapes.
    for k in 0..3 {
        feed_at(
            &mut engine,
            &flood(100),
            1_000 + 15_000 * k,
            15_000 * k,
            &mut report,
        );
    }
    assert_eq!(engine.stats().active_series, 100);
    assert_eq!(report.rejected[RejectReason::ActiveSeriesLimit.index()], 0);
    // A new engine's two scrapes: every series gets in, each by evicting one flood group.
    let mut real = IngestReport::default();
    feed_at(
        &mut engine,
        &scrape("0", 1.0, true),
        46_000,
        45_000,
        &mut real,
    );
    feed_at(
        &mut engine,
        &scrape("0", 2.0, true),
        61_000,
        60_000,
        &mut real,
    );
    assert_eq!(real.rejected[RejectReason::ActiveSeriesLimit.index()], 0);
    let stats = engine.stats();
    assert_eq!(
        stats.groups_removed(crate::RemovalReason::Evicted),
        ENGINE_SERIES
    );
    assert_eq!(stats.active_series, 100);
    assert_eq!(
        outputs(&engine)
            .iter()
            .filter(|(_, l, _)| l.iter().any(|(n, v)| n == "engine" && v == "0"))
            .count(),
        crate::FAMILIES
    );
    // The flood goes on: its evicted series can only evict other flood groups, never the engine,
    // whose groups feed every family.
    feed_at(&mut engine, &flood(100), 76_000, 75_000, &mut report);
    let mut third = IngestReport::default();
    let mut t3 = scrape("0", 3.0, true);
    t3.retain(|(l, _)| {
        !l.iter()
            .any(|(n, v)| *n == "__name__" && v.ends_with("_created"))
    });
    feed_at(&mut engine, &t3, 91_000, 90_000, &mut third);
    assert_eq!(third.rejected[RejectReason::ActiveSeriesLimit.index()], 0);
    assert_eq!(third.applied, ENGINE_SERIES);
    assert_eq!(
        engine.stats().groups_removed(crate::RemovalReason::Evicted),
        2 * ENGINE_SERIES,
        "20 flood series came back by evicting 20 others"
    );
    assert_eq!(
        report.received + real.received + third.received,
        report.applied
            + real.applied
            + third.applied
            + report.rejected_total()
            + real.rejected_total()
            + third.rejected_total()
    );
}

#[test]
fn one_shot_lone_series_are_evicted_after_the_grace_period_and_complete_groups_never() {
    let mut engine = Engine::new(config(100));
    let mut report = IngestReport::default();
    // 80 lone series sent once, then a complete engine (20 series): the limit is full.
    feed_at(&mut engine, &flood(80), 1_000, 0, &mut report);
    feed_at(&mut engine, &scrape("1", 1.0, true), 1_000, 0, &mut report);
    assert_eq!(engine.stats().active_series, 100);
    // 10 s later a new engine's series are refused: the lone series are neither proven
    // incomplete by later scrapes nor silent for 30 s yet, and engine 1 feeds every family.
    let mut early = IngestReport::default();
    feed_at(
        &mut engine,
        &scrape("0", 1.0, true),
        11_000,
        10_000,
        &mut early,
    );
    assert_eq!(
        early.rejected[RejectReason::ActiveSeriesLimit.index()],
        ENGINE_SERIES
    );
    assert_eq!(
        engine.stats().groups_removed(crate::RemovalReason::Evicted),
        0
    );
    // 31 s after the lone series' only sample, they can go: the engine gets in.
    let mut later = IngestReport::default();
    feed_at(
        &mut engine,
        &scrape("0", 2.0, true),
        31_000,
        31_000,
        &mut later,
    );
    assert_eq!(later.rejected[RejectReason::ActiveSeriesLimit.index()], 0);
    assert_eq!(
        engine.stats().groups_removed(crate::RemovalReason::Evicted),
        ENGINE_SERIES
    );
    let engines: Vec<String> = outputs(&engine)
        .iter()
        .filter(|(f, _, _)| *f == Family::TokenWeightedItl)
        .map(|(_, l, _)| l.iter().find(|(n, _)| n == "engine").unwrap().1.clone())
        .collect();
    assert_eq!(engines, ["0", "1"]);
}
