//! The engine's state budget (`EngineConfig::max_state_bytes`, docs/RELIABILITY.md, "The memory
//! budget"): new series past it are refused with their own reason while known ones flow; retired
//! states make room first, the oldest samples first, and never take more than a quarter of it.

use super::test_support::*;
use super::*;

/// Engine `e`'s scrape at `k`, at `ts`, into `engine`; the report.
fn send(engine: &mut Engine, e: &str, k: f64, ts: i64) -> IngestReport {
    write_at(engine, &scrape(e, k, true), ts, ts).report
}

fn budget(bytes: usize) -> EngineConfig {
    EngineConfig {
        max_state_bytes: bytes,
        ..crate::test_support::config()
    }
}

#[test]
fn new_series_past_the_state_budget_are_refused_and_known_ones_keep_flowing() {
    // Measure what one engine's state takes, then allow a little more than two engines'.
    let mut probe = Engine::new(budget(usize::MAX));
    send(&mut probe, "0", 1.0, 1_000);
    let two = 2 * probe.state_bytes();
    let mut engine = Engine::new(budget(two + two / 4));
    for e in ["0", "1"] {
        let r = send(&mut engine, e, 1.0, 1_000);
        assert_eq!(
            r.rejected[RejectReason::MemoryBudget.index()],
            0,
            "engine {e}"
        );
    }
    let third = send(&mut engine, "2", 1.0, 1_000);
    let refused = third.rejected[RejectReason::MemoryBudget.index()];
    assert!(refused > 0, "{third:?}");
    assert!(engine.state_bytes() <= two + two / 4);
    // The two engines held keep every sample of their next scrape.
    for e in ["0", "1"] {
        let r = send(&mut engine, e, 2.0, 16_000);
        assert_eq!(
            r.rejected[RejectReason::MemoryBudget.index()],
            0,
            "engine {e}"
        );
        assert_eq!(
            r.received,
            r.applied + r.rejected[RejectReason::UnusedSeries.index()]
        );
    }
}

/// Staleness markers for every series of engine `e` at `ts`: the group leaves, its state retired.
fn leave(engine: &mut Engine, e: &str, ts: i64) {
    let stale = f64::from_bits(STALE_NAN_BITS);
    let markers: Vec<Raw> = scrape(e, 1.0, true)
        .into_iter()
        .map(|(l, _)| (l, stale))
        .collect();
    feed_at(engine, &markers, ts, ts, &mut IngestReport::default());
}

/// The derived values of engine `e` alone.
fn of_engine(out: Outputs, e: &str) -> Outputs {
    out.into_iter()
        .filter(|(_, l, _)| l.iter().any(|(n, v)| n == "engine" && v == e))
        .collect()
}

/// "a" and "b" send a scrape and leave, in that order; then "c" sends one. Returns the retired
/// states' bytes before "c".
fn a_b_leave_then_c(engine: &mut Engine) -> (usize, IngestReport) {
    send(engine, "a", 1.0, 1_000);
    leave(engine, "a", 2_000);
    send(engine, "b", 1.0, 3_000);
    leave(engine, "b", 4_000);
    let retired = engine.stats().memory.retired;
    (retired, send(engine, "c", 1.0, 5_000))
}

#[test]
fn retired_states_make_room_for_new_series_the_oldest_first() {
    // Unbounded, the sequence ends with two retired states and "c": allow half a retired state
    // less, so "c" fits only once one retired state goes.
    let mut probe = Engine::new(budget(usize::MAX));
    let (retired, _) = a_b_leave_then_c(&mut probe);
    assert_eq!(probe.retired_engines(), ["a", "b"]);
    let limit = probe.state_bytes() - retired / 4;
    let mut engine = Engine::new(budget(limit));
    let (_, r) = a_b_leave_then_c(&mut engine);
    assert_eq!(r.rejected[RejectReason::MemoryBudget.index()], 0, "{r:?}");
    // "a"'s retired state went, the oldest, before "b"'s, and was counted.
    assert_eq!(engine.retired_engines(), ["b"]);
    assert_eq!(engine.stats().retired_dropped, [0, 1]);
    assert_eq!(probe.stats().retired_dropped, [0, 0]);
    assert!(engine.state_bytes() <= limit);
    assert!(
        engine.stats().memory.retired <= limit / 4,
        "{:?}",
        engine.stats().memory
    );
    // "a"'s next scrape starts afresh, as in an engine that never saw it ("c" leaves first to
    // make room for it).
    leave(&mut engine, "c", 6_000);
    let mut fresh = Engine::new(budget(usize::MAX));
    send(&mut fresh, "a", 2.0, 16_000);
    let r = send(&mut engine, "a", 2.0, 16_000);
    assert_eq!(r.rejected[RejectReason::MemoryBudget.index()], 0, "{r:?}");
    let back = of_engine(outputs(&engine), "a");
    assert!(!back.is_empty());
    assert_eq!(
        back,
        of_engine(outputs(&fresh), "a"),
        "a's state was dropped"
    );
}

#[test]
fn the_state_budget_holds_when_the_group_slots_and_the_series_index_double() {
    // Found by the engine fuzzer: at 256 KiB, the 17th group doubled the group slots past the
    // budget (274 610 B accounted). For every budget, the accounted state after each scrape of a
    // new engine stays within it, however many engines are refused.
    for limit in [64 * 1024, 256 * 1024, 1024 * 1024] {
        let mut engine = Engine::new(budget(limit));
        let mut refused = 0;
        for e in 0..64 {
            let r = send(&mut engine, &e.to_string(), 1.0, 1_000);
            refused += r.rejected[RejectReason::MemoryBudget.index()];
            let used = engine.state_bytes();
            assert!(used <= limit, "engine {e}: {used} B over {limit} B");
        }
        assert!(
            refused > 0,
            "{limit} B held 64 engines: the test tests nothing"
        );
    }
}
