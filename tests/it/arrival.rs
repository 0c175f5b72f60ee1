//! (a) The fixtures' two scrapes, split into small requests and shuffled: exact hand values, and
//! the same output as in-order arrival (docs/ENGINE.md, invariant 2).

use std::collections::VecDeque;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::expected::{assert_group, fixture};
use crate::fixture::{Scrape, group, scrape_times};
use crate::harness::Corrector;
use crate::rw::Point;

/// Posts t1 then t2, each scrape whole in one request.
fn post_in_order(corrector: &Corrector, [t1, t2, _]: [i64; 3]) {
    corrector.write(&Scrape::T1.points(t1));
    corrector.write(&Scrape::T2.points(t2));
}

/// t1's and t2's points merged in a random order that keeps each series' t1 before its t2 (as one
/// Prometheus shard does), cut into requests of 1 to 12 points.
fn shuffled_requests(seed: u64, [t1, t2, _]: [i64; 3]) -> Vec<Vec<Point>> {
    let mut queues: Vec<VecDeque<Point>> = Scrape::T1
        .points(t1)
        .into_iter()
        .zip(Scrape::T2.points(t2))
        .map(|(a, b)| {
            assert_eq!(
                a.labels, b.labels,
                "t1.prom and t2.prom list the same series in the same order"
            );
            VecDeque::from([a, b])
        })
        .collect();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut merged = Vec::new();
    while !queues.is_empty() {
        let i = rng.random_range(0..queues.len());
        merged.push(queues[i].pop_front().unwrap());
        if queues[i].is_empty() {
            queues.swap_remove(i);
        }
    }
    let mut requests = Vec::new();
    let mut rest = merged.as_slice();
    while !rest.is_empty() {
        let n = rng.random_range(1..=12).min(rest.len());
        requests.push(rest[..n].to_vec());
        rest = &rest[n..];
    }
    requests
}

#[test]
fn shuffling_keeps_per_series_order_and_interleaves_the_scrapes() {
    let times = scrape_times();
    let requests = shuffled_requests(7, times);
    let flat: Vec<&Point> = requests.iter().flatten().collect();
    assert_eq!(flat.len(), 2 * Scrape::T1.points(times[0]).len());
    assert!(
        requests.len() > 50,
        "many small requests, got {}",
        requests.len()
    );
    let first_t2 = flat
        .iter()
        .position(|p| p.timestamp_ms == times[1])
        .unwrap();
    let last_t1 = flat
        .iter()
        .rposition(|p| p.timestamp_ms == times[0])
        .unwrap();
    assert!(first_t2 < last_t1, "t1 and t2 interleave");
    for (i, p) in flat
        .iter()
        .enumerate()
        .filter(|(_, p)| p.timestamp_ms == times[1])
    {
        let t1_at = flat
            .iter()
            .position(|q| q.labels == p.labels && q.timestamp_ms == times[0])
            .unwrap();
        assert!(t1_at < i, "series {:?}: t1 must precede t2", p.labels);
    }
}

#[test]
fn in_order_scrapes_serve_the_hand_values_at_t1_then_t2() {
    let times = scrape_times();
    let corrector = Corrector::start_unsettled();
    corrector.write(&Scrape::T1.points(times[0]));
    let at_t1 = corrector.snapshot();
    for engine in ["0", "1"] {
        assert_group(
            &at_t1,
            &group(engine),
            &fixture(Scrape::T1, engine),
            &format!("t1 engine {engine}"),
        );
    }
    corrector.write(&Scrape::T2.points(times[1]));
    let at_t2 = corrector.snapshot();
    for engine in ["0", "1"] {
        assert_group(
            &at_t2,
            &group(engine),
            &fixture(Scrape::T2, engine),
            &format!("t2 engine {engine}"),
        );
    }
}

#[test]
fn split_and_shuffled_arrival_serves_the_hand_values_identical_to_in_order() {
    let times = scrape_times();
    let reference = {
        let corrector = Corrector::start_unsettled();
        post_in_order(&corrector, times);
        corrector.snapshot().derived_lines()
    };
    assert!(
        !reference.is_empty(),
        "in-order arrival serves corrected families"
    );
    for seed in [1, 7, 42, 1234, 99_991] {
        let corrector = Corrector::start_unsettled();
        for request in shuffled_requests(seed, times) {
            corrector.write(&request);
        }
        let snapshot = corrector.snapshot();
        for engine in ["0", "1"] {
            assert_group(
                &snapshot,
                &group(engine),
                &fixture(Scrape::T2, engine),
                &format!("seed {seed} engine {engine}"),
            );
        }
        assert_eq!(
            snapshot.derived_lines(),
            reference,
            "seed {seed}: output differs from in-order arrival"
        );
    }
}
