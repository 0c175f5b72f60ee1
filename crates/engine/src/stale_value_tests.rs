//! A staleness marker and a real value of one series at one timestamp: the real value wins
//! however the two are batched (`docs/RELIABILITY.md`, "A staleness marker and a real value at
//! one timestamp").

use super::test_support::*;
use super::*;

/// One series of a request: its labels and its samples.
type SeriesRow = (Vec<(&'static str, String)>, Vec<Sample>);

/// Ingests each `(series, samples)` as one call, as one series of a request.
fn feed_series(engine: &mut Engine, rows: &[SeriesRow], report: &mut IngestReport) {
    for (labels, samples) in rows {
        ingest_series(engine, labels, samples, 0, report);
    }
}

fn reference() -> Outputs {
    let mut engine = Engine::new(crate::test_support::config());
    let mut report = IngestReport::default();
    feed(&mut engine, &two_scrapes_of_engine_0(), &mut report);
    outputs(&engine)
}

fn two_scrapes_of_engine_0() -> Vec<(Raw, i64)> {
    let mut all: Vec<(Raw, i64)> = scrape("0", 1.0, true)
        .into_iter()
        .map(|r| (r, 1_000))
        .collect();
    all.extend(scrape("0", 2.0, true).into_iter().map(|r| (r, 16_000)));
    all
}

/// Scrape 1 at 1 000 ms, then scrape 2 at 16 000 ms where every series also carries a staleness
/// marker at 16 000 ms: before its real value when `marker_first`, else after it.
fn run(marker_first: bool, split: bool) -> (Outputs, IngestReport, EngineStats) {
    let mut engine = Engine::new(crate::test_support::config());
    let mut report = IngestReport::default();
    feed(
        &mut engine,
        &scrape("0", 1.0, true)
            .into_iter()
            .map(|r| (r, 1_000))
            .collect::<Vec<_>>(),
        &mut report,
    );
    let stale = Sample {
        value: f64::from_bits(STALE_NAN_BITS),
        timestamp_ms: 16_000,
    };
    let second = scrape("0", 2.0, true);
    let real = |v: f64| Sample {
        value: v,
        timestamp_ms: 16_000,
    };
    if split {
        // Two requests: one with every series' marker (or real value), then the other.
        let markers: Vec<_> = second
            .iter()
            .map(|(l, _)| (l.clone(), vec![stale]))
            .collect();
        let reals: Vec<_> = second
            .iter()
            .map(|(l, v)| (l.clone(), vec![real(*v)]))
            .collect();
        let (a, b) = if marker_first {
            (markers, reals)
        } else {
            (reals, markers)
        };
        feed_series(&mut engine, &a, &mut report);
        feed_series(&mut engine, &b, &mut report);
    } else {
        // One request: each series carries both samples.
        let rows: Vec<_> = second
            .iter()
            .map(|(l, v)| {
                (
                    l.clone(),
                    if marker_first {
                        vec![stale, real(*v)]
                    } else {
                        vec![real(*v), stale]
                    },
                )
            })
            .collect();
        feed_series(&mut engine, &rows, &mut report);
    }
    (outputs(&engine), report, engine.stats())
}

#[test]
fn real_value_wins_over_a_staleness_marker_of_the_same_timestamp_in_one_request() {
    let want = reference();
    assert_eq!(want.len(), crate::FAMILIES, "every family");
    for marker_first in [true, false] {
        let (out, report, stats) = run(marker_first, false);
        assert_eq!(out, want, "marker first: {marker_first}");
        assert_eq!(stats.groups, 1);
        assert_eq!(
            stats.groups_removed(crate::RemovalReason::Stale),
            0,
            "marker first: {marker_first}"
        );
        // 24 series per scrape, 2 samples each in the second: 72 received.
        assert_eq!(report.received, 72);
        assert_eq!(report.applied + report.rejected_total(), report.received);
        // The real value is always applied, never a duplicate. Marker first, the marker is
        // applied too (then replaced); marker second, it is the duplicate: one for each of the 20
        // series a rule reads (24 minus le="2.0", `_created`, `local_cache_hit` and
        // `num_requests_running`; the per-position counter shapes the acceptance-corrected buckets).
        let duplicates = if marker_first { 0 } else { 20 };
        assert_eq!(
            report.rejected[RejectReason::DuplicateSample.index()],
            duplicates,
            "marker first: {marker_first}"
        );
    }
}

#[test]
fn real_value_wins_over_a_staleness_marker_of_the_same_timestamp_across_two_requests() {
    let want = reference();
    for marker_first in [true, false] {
        let (out, report, stats) = run(marker_first, true);
        assert_eq!(out, want, "marker first: {marker_first}");
        assert_eq!(stats.groups, 1, "marker first: {marker_first}");
        assert_eq!(report.applied + report.rejected_total(), report.received);
    }
}
