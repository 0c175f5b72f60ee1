//! (f) A token histogram without an `le="1"` bound: canonical TPOT withheld, with the reason.

use crate::expected::{CANONICAL_TPOT, assert_group, fixture};
use crate::fixture::{Scrape, group, scrape_times};
use crate::harness::Corrector;
use crate::rw::Point;

/// The fixture scrape without `vllm:request_generation_tokens_bucket{le="1.0"}` for engine "0"
/// (as with `--custom-histogram-buckets` starting at 2).
fn without_le_1(scrape: Scrape, timestamp_ms: i64) -> Vec<Point> {
    let points = scrape.points(timestamp_ms);
    let before = points.len();
    let kept: Vec<Point> = points
        .into_iter()
        .filter(|p| {
            !(p.label("__name__") == Some("vllm:request_generation_tokens_bucket")
                && p.label("le") == Some("1.0")
                && p.label("engine") == Some("0"))
        })
        .collect();
    assert_eq!(kept.len(), before - 1, "exactly one series removed");
    kept
}

#[test]
fn token_histogram_without_le_1_bound_withholds_canonical_tpot_and_counts_the_reason() {
    let [t1, t2, _] = scrape_times();
    let corrector = Corrector::start_unsettled();
    corrector.write(&without_le_1(Scrape::T1, t1));
    corrector.write(&without_le_1(Scrape::T2, t2));
    let snapshot = corrector.snapshot();

    let mut engine0 = fixture(Scrape::T2, "0");
    engine0.canonical = None; // withheld: no guess
    assert_group(&snapshot, &group("0"), &engine0, "engine 0 without le=1");
    assert_group(
        &snapshot,
        &group("1"),
        &fixture(Scrape::T2, "1"),
        "engine 1 untouched",
    );

    let withheld = snapshot.value(
        "vllm_corrector_groups_withheld",
        &[("family", CANONICAL_TPOT), ("reason", "no_le_1_bound")],
    );
    assert_eq!(
        withheld,
        Some(1.0),
        "one group withholds canonical TPOT for no_le_1_bound\n{}",
        snapshot.text
    );
}
