//! A flood of lone series (`crates/engine/src/state/room.rs`): groups that can feed no family
//! hold at most a quarter of the room, and a series of a group that can feed a family wins over
//! them, so a complete vLLM engine is served at its first scrape whatever the flood does.
//! Requests go through [`Engine::apply`], as the receiver sends them: whether a group can feed a
//! family is judged with its whole request.

use super::test_support::*;
use super::*;

/// `n` lone `vllm:generation_tokens_total` series, `engine="<tag>-<i>"`.
fn flood(tag: &str, n: usize) -> Vec<Raw> {
    (0..n)
        .map(|i| {
            series(
                "vllm:generation_tokens_total",
                &format!("{tag}-{i}"),
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

/// The series of `scrape("0", …, true)` that a rule reads: 20 (24 minus le="2.0", `_created`,
/// `local_cache_hit` and `num_requests_running`).
const ENGINE_SERIES: u64 = 20;

fn rejected(outcome: &Outcome, reason: RejectReason) -> u64 {
    outcome.report.rejected[reason.index()]
}

/// Families served for `engine="<e>"`.
fn served(engine: &Engine, e: &str) -> usize {
    outputs(engine)
        .iter()
        .filter(|(_, l, _)| l.iter().any(|(n, v)| n == "engine" && v == e))
        .count()
}

#[test]
fn a_complete_engine_is_served_at_once_during_a_flood_of_new_lone_series_each_write() {
    let mut engine = Engine::new(config(100));
    // Four engines (80 series) and a flood whose 40 new series of each write can feed nothing:
    // 20 fit, the others are refused as feeding no family.
    for e in ["e0", "e1", "e2", "e3"] {
        let outcome = write_at(&mut engine, &scrape(e, 1.0, true), 1_000, 1_000);
        assert_eq!(outcome.report.applied, ENGINE_SERIES);
    }
    let first = write_at(&mut engine, &flood("a", 40), 1_000, 1_000);
    assert_eq!(first.report.applied, 20);
    assert_eq!(rejected(&first, RejectReason::FeedsNoFamily), 20);
    assert_eq!(engine.stats().active_series, 100);
    // 15 s later (none of the lone groups silent for 30 s nor proven incomplete by later
    // scrapes) a new engine's one request evicts 20 of them: all its series get in.
    let new = write_at(&mut engine, &scrape("new", 1.0, true), 16_000, 16_000);
    assert_eq!(new.report.applied, ENGINE_SERIES);
    assert_eq!(
        new.report.rejected_total(),
        rejected(&new, RejectReason::UnusedSeries),
        "only the 4 series no rule reads"
    );
    assert_eq!(
        engine.stats().groups_removed(crate::RemovalReason::Evicted),
        ENGINE_SERIES
    );
    assert_eq!(
        served(&engine, "new"),
        served(&engine, "e0"),
        "as the others after one scrape"
    );
    // The flood's next write finds no room and evicts nothing: every series refused.
    let second = write_at(&mut engine, &flood("b", 40), 16_000, 16_000);
    assert_eq!(rejected(&second, RejectReason::FeedsNoFamily), 40);
    assert_eq!(rejected(&second, RejectReason::ActiveSeriesLimit), 0);
    // The engine's second scrape: every family served, no engine ever refused.
    let again = write_at(&mut engine, &scrape("new", 2.0, true), 31_000, 31_000);
    assert_eq!(again.report.applied, ENGINE_SERIES);
    assert_eq!(served(&engine, "new"), crate::FAMILIES);
    assert_eq!(engine.stats().active_series, 100);
}

#[test]
fn a_complete_engine_is_served_at_once_while_lone_series_are_resent_every_scrape() {
    let mut engine = Engine::new(config(100));
    for e in ["e0", "e1", "e2"] {
        write_at(&mut engine, &scrape(e, 1.0, true), 1_000, 1_000);
    }
    // 60 lone series re-sent every 15 s: the lone groups' quarter (25 series) fills, the other
    // 35 are refused each time, while 15 series of room stay free for engines.
    let mut refused = 0;
    for k in 0..3 {
        let ts = 1_000 + 15_000 * k;
        let outcome = write_at(&mut engine, &flood("f", 60), ts, ts);
        assert_eq!(outcome.report.applied, 25, "scrape {k}");
        refused += rejected(&outcome, RejectReason::FeedsNoFamily);
    }
    assert_eq!(refused, 3 * 35);
    assert_eq!(engine.stats().active_series, 85);
    // A new engine (20 series) needs 5 more: 5 lone groups go, those proven incomplete first.
    let new = write_at(&mut engine, &scrape("new", 1.0, true), 46_000, 46_000);
    assert_eq!(new.report.applied, ENGINE_SERIES);
    assert_eq!(
        engine.stats().groups_removed(crate::RemovalReason::Evicted),
        5
    );
    // The flood goes on: 20 of its groups left, every other series is refused; none of the
    // engine's is evicted.
    let flood_after = write_at(&mut engine, &flood("f", 60), 46_000, 46_000);
    assert_eq!(flood_after.report.applied, 20);
    assert_eq!(rejected(&flood_after, RejectReason::FeedsNoFamily), 40);
    let again = write_at(&mut engine, &scrape("new", 2.0, true), 61_000, 61_000);
    assert_eq!(again.report.applied, ENGINE_SERIES);
    assert_eq!(served(&engine, "new"), crate::FAMILIES);
    let report = &again.report;
    assert_eq!(report.received, report.applied + report.rejected_total());
}

#[test]
fn a_complete_engine_sent_series_by_series_is_judged_series_by_series() {
    // The same engine through `Engine::ingest`, one series per call: its first series alone
    // feeds no family, and the lone groups' share is full, so it gets no room. What makes a real
    // engine win is its request, not its labels.
    let mut engine = Engine::new(config(100));
    write_at(&mut engine, &flood("f", 25), 1_000, 1_000);
    let mut report = IngestReport::default();
    feed_at(
        &mut engine,
        &scrape("new", 1.0, true),
        1_000,
        1_000,
        &mut report,
    );
    assert_eq!(report.applied, 0);
    assert_eq!(
        report.rejected[RejectReason::FeedsNoFamily.index()],
        ENGINE_SERIES
    );
    let outcome = write_at(&mut engine, &scrape("new", 1.0, true), 1_000, 1_000);
    assert_eq!(outcome.report.applied, ENGINE_SERIES);
}

#[test]
fn lone_series_take_only_their_share_and_a_silent_lone_group_makes_room_for_another() {
    let mut engine = Engine::new(config(100));
    write_at(&mut engine, &scrape("1", 1.0, true), 1_000, 0);
    // 40 lone series sent once: 25 fit the lone groups' quarter of the 100 series.
    let first = write_at(&mut engine, &flood("a", 40), 1_000, 0);
    assert_eq!(first.report.applied, 25);
    assert_eq!(rejected(&first, RejectReason::FeedsNoFamily), 15);
    // 10 s later new lone series find the quarter full and nothing silent: refused, though 55
    // series of room are free for engines.
    let early = write_at(&mut engine, &flood("b", 5), 11_000, 10_000);
    assert_eq!(rejected(&early, RejectReason::FeedsNoFamily), 5);
    assert_eq!(
        engine.stats().groups_removed(crate::RemovalReason::Evicted),
        0
    );
    // 31 s after the first lone series' only sample they are silent: 5 go for 5 new ones. The
    // engine, which feeds every family, is never a candidate.
    let later = write_at(&mut engine, &flood("c", 5), 31_000, 31_000);
    assert_eq!(later.report.applied, 5);
    assert_eq!(
        engine.stats().groups_removed(crate::RemovalReason::Evicted),
        5
    );
    write_at(&mut engine, &scrape("1", 2.0, true), 16_000, 31_000);
    assert_eq!(served(&engine, "1"), crate::FAMILIES);
}

#[test]
fn lone_groups_hold_at_most_a_quarter_of_the_state_budget() {
    let max_state_bytes = 1 << 20;
    let mut engine = Engine::new(EngineConfig {
        max_state_bytes,
        ..crate::test_support::config()
    });
    // Lone groups with 8 labels of 2 000 bytes each: 1 024 bytes and 64 per frame of 16, the
    // SLO counters' share of the test's one SLO (3 072 + 16 × 7 for its name `default`), one
    // series of 512 + 16 × 16, and labels of 8 × (2 + 2 000 + 48) + (10 + 1 + 48) + (6 + 2 + 48)
    // bytes: 22 515 each (from h10 on, one more), so 11 fit in the quarter, 262 144 bytes.
    let pad = "p".repeat(2_000);
    let names = ["p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7"];
    let extra: Vec<(&'static str, &str)> = names.iter().map(|n| (*n, pad.as_str())).collect();
    let heavy: Vec<Raw> = (0..40)
        .map(|i| {
            series(
                "vllm:generation_tokens_total",
                &format!("h{i}"),
                &extra,
                1.0,
            )
        })
        .collect();
    let outcome = write_at(&mut engine, &heavy, 1_000, 1_000);
    assert_eq!(outcome.report.applied, 11);
    assert_eq!(rejected(&outcome, RejectReason::FeedsNoFamily), 29);
    // Three quarters stay free: a complete engine needs no eviction.
    let new = write_at(&mut engine, &scrape("new", 1.0, true), 1_000, 1_000);
    assert_eq!(new.report.applied, ENGINE_SERIES);
    assert_eq!(
        engine.stats().groups_removed(crate::RemovalReason::Evicted),
        0
    );
}

#[test]
fn a_lone_group_raises_no_incomplete_warning_and_a_split_engine_does() {
    let mut engine = Engine::new(crate::test_support::config());
    // A lone series and an engine without its TTFT count (no vLLM exposes that set; it still
    // feeds token-weighted ITL), each scraped four times.
    let mut warned = Vec::new();
    for k in 0..4 {
        let ts = 1_000 + 15_000 * k;
        let mut split = scrape("split", 1.0 + k as f64, true);
        split.retain(|(l, _)| {
            !l.iter()
                .any(|(_, v)| v == "vllm:time_to_first_token_seconds_count")
        });
        split.extend(flood("lone", 1));
        write_at(&mut engine, &split, ts, ts);
        for event in engine.take_events() {
            if let EngineEvent::GroupIncomplete { labels, .. } = event {
                warned.push(
                    labels
                        .iter()
                        .find(|(n, _)| n == "engine")
                        .unwrap()
                        .1
                        .clone(),
                );
            }
        }
    }
    assert_eq!(warned, ["split"]);
    assert!(
        served(&engine, "split") > 0,
        "the split engine feeds a family"
    );
}
