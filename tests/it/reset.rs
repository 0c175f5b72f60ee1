//! (b) A counter reset: a third scrape after engine "0" restarted, with every counter smaller.

use crate::expected::{assert_group, fixture};
use crate::fixture::{Scrape, group, scrape_times};
use crate::harness::Corrector;

#[test]
fn counter_reset_restarts_every_family_from_the_new_values() {
    let [t1, t2, t3] = scrape_times();
    let corrector = Corrector::start();
    corrector.write(&Scrape::T1.points(t1));
    corrector.write(&Scrape::T2.points(t2));
    corrector.write(&Scrape::T3Restart.points(t3));
    let snapshot = corrector.snapshot();
    // Engine "0": EXPECTED.md "t3 (restart)": acceptance-corrected buckets restart from 0.
    assert_group(
        &snapshot,
        &group("0"),
        &fixture(Scrape::T3Restart, "0"),
        "after restart, engine 0",
    );
    // Engine "1" was idle (t3 = t2): an interval with ΔN = 0 adds nothing.
    assert_group(
        &snapshot,
        &group("1"),
        &fixture(Scrape::T3Restart, "1"),
        "idle interval, engine 1",
    );
}

#[test]
fn reset_in_split_requests_matches_reset_in_whole_scrapes() {
    // The restart scrape arriving one series per request must give what the whole scrape gives.
    let [t1, t2, t3] = scrape_times();
    let corrector = Corrector::start();
    corrector.write(&Scrape::T1.points(t1));
    corrector.write(&Scrape::T2.points(t2));
    let mut restart = Scrape::T3Restart.points(t3);
    restart.reverse();
    for point in restart.chunks(1) {
        corrector.write(point);
    }
    let snapshot = corrector.snapshot();
    assert_group(
        &snapshot,
        &group("0"),
        &fixture(Scrape::T3Restart, "0"),
        "split restart, engine 0",
    );
    assert_group(
        &snapshot,
        &group("1"),
        &fixture(Scrape::T3Restart, "1"),
        "split restart, engine 1",
    );
}
