//! The settling (docs/ENGINE.md, "Settling"): after a series new to a group arrives, nothing is
//! evaluated until `EngineConfig::settle_scrapes` newer scrapes have begun without another new one.
//! The scrapes are `test_support`'s, one per second; expected values are worked by hand from its
//! `scrape` table (canonical TPOT at k: TPOT buckets 3k, 9k, 10k minus tokens{le="1"} 3k gives
//! 0, 6k, 7k; Σ 0.42k s; count 7k).

use super::test_support::*;
use super::*;

const TPOT_BUCKET: &str = "vllm:request_time_per_output_token_seconds_bucket";

fn label<'a>(raw: &'a Raw, name: &str) -> Option<&'a str> {
    raw.0
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.as_str())
}

/// True for the TPOT buckets a lagging shard carries in [`served_layouts`]: every finite one.
fn lagging(raw: &Raw) -> bool {
    label(raw, "__name__") == Some(TPOT_BUCKET) && label(raw, "le") != Some("+Inf")
}

/// Canonical TPOT of engine "1" at scrape factor `k`, by hand (module doc).
fn canonical_tpot_at(k: f64) -> DerivedValue {
    DerivedValue::Histogram {
        buckets: vec![(0.01, 0.0), (0.05, 6.0 * k), (f64::INFINITY, 7.0 * k)],
        sum: 0.42 * k,
        count: 7.0 * k,
    }
}

fn canonical_tpot(engine: &Engine) -> Option<DerivedValue> {
    outputs(engine)
        .into_iter()
        .find(|(f, _, _)| *f == Family::CanonicalTpot)
        .map(|(_, _, v)| v)
}

/// A corrector restart as vmagent's retry shows it: the shard holding engine "1"'s finite TPOT
/// buckets lost its request and resends scrapes 1 and 2 after the others delivered scrape 2; then
/// scrapes 3 to 5 arrive whole. Returns canonical TPOT after each delivery (`None`: not served).
fn served_layouts(config: EngineConfig) -> Vec<Option<DerivedValue>> {
    let mut engine = Engine::new(config);
    let mut report = IngestReport::default();
    let at = |k: f64| scrape("1", k, false);
    let mut served = Vec::new();
    for k in [1.0, 2.0] {
        let rest: Vec<Raw> = at(k).into_iter().filter(|r| !lagging(r)).collect();
        feed_at(&mut engine, &rest, k as i64 * 1_000, 0, &mut report);
        served.push(canonical_tpot(&engine));
    }
    for k in [1.0, 2.0] {
        let late: Vec<Raw> = at(k).into_iter().filter(lagging).collect();
        feed_at(&mut engine, &late, k as i64 * 1_000, 0, &mut report);
        served.push(canonical_tpot(&engine));
    }
    for k in [3.0, 4.0, 5.0] {
        feed_at(&mut engine, &at(k), k as i64 * 1_000, 0, &mut report);
        served.push(canonical_tpot(&engine));
    }
    assert_eq!(
        report.received,
        report.applied + report.rejected.iter().sum::<u64>()
    );
    served
}

#[test]
fn buckets_a_lagging_shard_resends_are_never_missing_from_a_served_histogram() {
    let served = served_layouts(settled_config());
    // Deliveries: 1 and 2 without the finite buckets, their late copies, then scrapes 3, 4, 5.
    // The late buckets grow the set at scrape 1's timestamp; scrapes 4 and 5 are the two newer
    // ones that begin with it unchanged, so the first output is scrape 4's frame.
    assert_eq!(
        served,
        vec![
            None,
            None,
            None,
            None,
            None,
            Some(canonical_tpot_at(4.0)),
            Some(canonical_tpot_at(5.0)),
        ]
    );
    // Without the settling, the first frame is served with `+Inf` alone, and a quantile over it
    // is anything up to the largest bound: what the vmagent accuracy chain saw after a restart.
    let unsettled = served_layouts(crate::test_support::config());
    assert_eq!(
        unsettled[0],
        Some(DerivedValue::Histogram {
            buckets: vec![(f64::INFINITY, 7.0)],
            sum: 0.42,
            count: 7.0,
        })
    );
}

#[test]
fn a_settling_group_reports_settling_and_then_serves_what_an_unsettled_engine_serves() {
    let mut settled = Engine::new(settled_config());
    let mut unsettled = Engine::new(crate::test_support::config());
    let mut report = IngestReport::default();
    for (i, k) in [1.0, 2.0, 3.0].into_iter().enumerate() {
        let ts = k as i64 * 1_000;
        for e in ["0", "1"] {
            feed_at(&mut settled, &scrape(e, k, e == "0"), ts, 0, &mut report);
            feed_at(&mut unsettled, &scrape(e, k, e == "0"), ts, 0, &mut report);
        }
        let withheld = settled.stats().withheld;
        if i < 2 {
            // Scrape 1 grew both groups; scrape 2 is the first newer one.
            assert!(outputs(&settled).is_empty(), "served at scrape {k}");
            assert!(
                withheld.contains(&(Family::CanonicalTpot, WithheldReason::Settling, 2)),
                "{withheld:?}"
            );
        } else {
            assert!(withheld.is_empty(), "{withheld:?}");
        }
    }
    // Settled at scrape 3: every family, the acceptance-corrected buckets (replayed over the
    // kept frames) included, equals what the engine that served from scrape 1 on serves.
    assert_eq!(outputs(&settled), outputs(&unsettled));
    assert_eq!(outputs(&settled).len(), outputs(&unsettled).len());
    assert_eq!(
        value_of(&outputs(&settled), Family::CanonicalTpot, "1"),
        canonical_tpot_at(3.0)
    );
}

/// An engine with the default settling after engine `e`'s scrapes at factors 1, 2 and 3 (with the
/// acceptance counters when `spec`), 1 s apart, and their report. It has settled: it serves
/// canonical TPOT at factor 3, which this asserts.
fn settled_after_three_scrapes(e: &str, spec: bool) -> (Engine, IngestReport) {
    let mut engine = Engine::new(settled_config());
    let mut report = IngestReport::default();
    for k in [1.0, 2.0, 3.0] {
        feed_at(
            &mut engine,
            &scrape(e, k, spec),
            k as i64 * 1_000,
            0,
            &mut report,
        );
    }
    assert_eq!(canonical_tpot(&engine), Some(canonical_tpot_at(3.0)));
    (engine, report)
}

#[test]
fn a_series_added_to_a_served_group_keeps_the_last_output_until_the_set_settles() {
    let (mut engine, mut report) = settled_after_three_scrapes("1", false);
    // From scrape 4 the target exposes one more TPOT bound, 0.025, with cumulative 5k, sent
    // first (sent last, scrape 4's frame would complete for the old set before it arrives).
    let with_bound = |k: f64| {
        let mut raw = scrape("1", k, false);
        raw.insert(0, series(TPOT_BUCKET, "1", &[("le", "0.025")], 5.0 * k));
        raw
    };
    for k in [4.0, 5.0] {
        feed_at(
            &mut engine,
            &with_bound(k),
            k as i64 * 1_000,
            0,
            &mut report,
        );
        assert_eq!(
            canonical_tpot(&engine),
            Some(canonical_tpot_at(3.0)),
            "scrape {k}"
        );
    }
    feed_at(&mut engine, &with_bound(6.0), 6_000, 0, &mut report);
    // 5k − 3k = 2k = 12 at the new bound.
    assert_eq!(
        canonical_tpot(&engine),
        Some(DerivedValue::Histogram {
            buckets: vec![
                (0.01, 0.0),
                (0.025, 12.0),
                (0.05, 36.0),
                (f64::INFINITY, 42.0)
            ],
            sum: 0.42 * 6.0,
            count: 42.0,
        })
    );
}

/// Engine "0"'s scrape at factor `k` with one more accepted-per-position counter, position 9,
/// present on odd `k` and a staleness marker on even `k` (a series that flaps, as any series does
/// that a target exposes only now and then). Canonical TPOT does not read it.
fn with_flapping_position(k: f64) -> Vec<Raw> {
    let mut raw = scrape("0", k, true);
    let value = if k as i64 % 2 == 1 {
        k
    } else {
        f64::from_bits(STALE_NAN_BITS)
    };
    raw.push(series(
        "vllm:spec_decode_num_accepted_tokens_per_pos_total",
        "0",
        &[("position", "9")],
        value,
    ));
    raw
}

#[test]
fn a_series_that_flaps_after_the_group_settled_never_freezes_its_output() {
    let (mut engine, mut report) = settled_after_three_scrapes("0", true);
    for k in 4..=12 {
        let k = f64::from(k);
        feed_at(
            &mut engine,
            &with_flapping_position(k),
            k as i64 * 1_000,
            0,
            &mut report,
        );
        // Position 9 first comes last in scrape 4 (as a staleness marker): scrape 4's frame is
        // already complete and served; scrapes 5 and 6 settle the new series (5 is held at 4).
        // From then on its flapping changes the set every scrape and never holds the output.
        let want = if k == 5.0 { 4.0 } else { k };
        assert_eq!(
            canonical_tpot(&engine),
            Some(canonical_tpot_at(want)),
            "after scrape {k}"
        );
    }
    assert_eq!(
        report.received,
        report.applied + report.rejected.iter().sum::<u64>()
    );
}

#[test]
fn a_new_group_with_a_series_that_flaps_from_its_first_scrape_still_settles() {
    let mut engine = Engine::new(settled_config());
    let mut report = IngestReport::default();
    for k in 1..=6 {
        let k = f64::from(k);
        feed_at(
            &mut engine,
            &with_flapping_position(k),
            k as i64 * 1_000,
            0,
            &mut report,
        );
        // Every series first came in scrape 1: scrapes 2 and 3 settle the set.
        let want = (k >= 3.0).then(|| canonical_tpot_at(k));
        assert_eq!(canonical_tpot(&engine), want, "after scrape {k}");
    }
}

/// The default configuration with the SLOs of the other engine tests (`test_support::test_slos`),
/// so a settled engine and the unsettled `test_support::config` engine count the same SLIs.
fn settled_config() -> EngineConfig {
    EngineConfig {
        slos: crate::test_support::test_slos(),
        ..EngineConfig::default()
    }
}
