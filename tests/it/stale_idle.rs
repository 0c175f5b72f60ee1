//! (c) Staleness markers and (d) the idle timeout remove a group's derived series.

use std::time::{Duration, Instant};

use crate::expected::{FAMILIES, assert_group, assert_group_absent, fixture};
use crate::fixture::{Scrape, group, scrape_times};
use crate::harness::Corrector;

#[test]
fn stale_markers_on_all_series_of_a_group_remove_its_derived_series() {
    let [t1, t2, t3] = scrape_times();
    let corrector = Corrector::start_unsettled();
    corrector.write(&Scrape::T1.points(t1));
    corrector.write(&Scrape::T2.points(t2));
    let before = corrector.snapshot();
    assert_group(
        &before,
        &group("1"),
        &fixture(Scrape::T2, "1"),
        "engine 1 before it goes stale",
    );

    // Scrape t3: engine "1" disappeared (Prometheus writes a staleness marker for each of its
    // series); engine "0" is scraped again with unchanged values.
    let t3_points: Vec<_> = Scrape::T2
        .points(t3)
        .into_iter()
        .map(|p| {
            if p.label("engine") == Some("1") {
                p.stale_at(t3)
            } else {
                p
            }
        })
        .collect();
    assert!(
        t3_points.iter().any(|p| p.value.is_nan()),
        "some markers are sent"
    );
    corrector.write(&t3_points);

    let after = corrector.snapshot();
    assert_group_absent(&after, &group("1"), "engine 1 after staleness markers");
    assert_group(
        &after,
        &group("0"),
        &fixture(Scrape::T2, "0"),
        "engine 0 unaffected",
    );
}

/// Writes scrapes T1 and T2 (both engines), checks that they are served, and returns how long
/// after the last write every derived series of both groups was gone. Fails if any is still
/// served 10 s after it: with `idle_timeout: 2s` the binary sweeps four times per timeout, so they
/// are gone by 2.5 s, and 10 s leaves room for a slow CI. Also fails if they went before 1.5 s
/// (removed by the timeout, not by anything sooner; 0.5 s of room for clock granularity).
fn silent_groups_removed_after(corrector: &Corrector) -> Duration {
    let [t1, t2, _] = scrape_times();
    corrector.write(&Scrape::T1.points(t1));
    corrector.write(&Scrape::T2.points(t2));
    let last_write = Instant::now();
    let served = corrector.snapshot();
    for engine in ["0", "1"] {
        assert_group(
            &served,
            &group(engine),
            &fixture(Scrape::T2, engine),
            "right after the writes",
        );
    }
    let gone_after = loop {
        let snapshot = corrector.snapshot();
        let any_left = ["0", "1"]
            .iter()
            .any(|e| FAMILIES.iter().any(|f| snapshot.has(f, &group(e))));
        if !any_left {
            break last_write.elapsed();
        }
        assert!(
            last_write.elapsed() < Duration::from_secs(10),
            "groups still served 10 s after the last sample with idle_timeout 2s\n{}",
            snapshot.text
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        gone_after >= Duration::from_millis(1500),
        "groups removed after only {gone_after:?}"
    );
    gone_after
}

#[test]
fn idle_timeout_from_the_config_file_removes_a_silent_group() {
    let corrector =
        Corrector::start_with_config(Some("engine:\n  idle_timeout: 2s\n  settle_scrapes: 0\n"));
    silent_groups_removed_after(&corrector);
}

#[test]
fn a_reload_that_shortens_the_idle_timeout_sweeps_at_the_new_pace() {
    // Started with the default timeout (10 min): the sweeper's pause is 15 s, so a group would
    // stay until the first sweep, about 15 s after start, if the pace were not read again.
    let corrector = Corrector::start_unsettled();
    corrector.reload_config("engine:\n  idle_timeout: 2s\n  settle_scrapes: 0\n");
    silent_groups_removed_after(&corrector);
}

#[test]
fn the_binary_logs_each_group_event_once_with_its_labels() {
    let [t1, t2, t3] = scrape_times();
    let corrector = Corrector::start_unsettled();
    corrector.write(&Scrape::T1.points(t1));
    corrector.write(&Scrape::T2.points(t2));
    // A resent batch (duplicates) and a third scrape change nothing worth a line.
    corrector.write(&Scrape::T2.points(t2));
    let stale: Vec<_> = Scrape::T2
        .points(t3)
        .into_iter()
        .map(|p| {
            if p.label("engine") == Some("1") {
                p.stale_at(t3)
            } else {
                p
            }
        })
        .collect();
    corrector.write(&stale);
    let log = corrector.log_text();
    let lines = |needle: &str| {
        log.lines()
            .filter(|l| l.contains(needle))
            .collect::<Vec<_>>()
    };
    let first = lines("group: first complete scrape");
    assert_eq!(first.len(), 2, "one per engine:\n{log}");
    assert!(
        first
            .iter()
            .all(|l| l.contains("level=info") && l.contains("model_name")),
        "{first:?}"
    );
    let removed = lines("group removed from /metrics");
    assert_eq!(removed.len(), 1, "engine 1 only:\n{log}");
    assert!(
        removed[0].contains("reason=stale") && removed[0].contains("engine=\\\"1\\\""),
        "{}",
        removed[0]
    );
}
