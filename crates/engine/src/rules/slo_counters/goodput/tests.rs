//! The goodput bounds against per-request truth: random request streams observed as vLLM observes
//! them (TTFT when the first token comes, the rest at finish), scraped at random moments, with
//! counter resets and torn scrapes. At every scrape the true goodput since the baseline lies
//! within the bounds, and neither bound falls.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;

/// One request as the bench would record it.
#[derive(Debug, Clone)]
struct Request {
    /// When its first token came (s); `None` when it produced no token.
    first_s: Option<f64>,
    /// When it finished (s).
    finish_s: f64,
    ttft: f64,
    /// vLLM's and the bench's TPOT: 0 for at most one output token.
    tpot: f64,
    e2el: f64,
    /// At most one output token.
    short: bool,
    /// Finished by an abort or an error (every request without a token, and some others).
    abnormal: bool,
}

const EDGES: [f64; 5] = [0.05, 0.1, 0.5, 1.0, 5.0];

/// The cumulative count at the edges around `t` of the values `v`.
fn bracket(values: &[f64], t: f64) -> Bracket {
    let lo_edge = EDGES
        .iter()
        .copied()
        .filter(|e| *e <= t)
        .fold(f64::NAN, f64::max);
    let hi_edge = EDGES
        .iter()
        .copied()
        .find(|e| *e >= t)
        .unwrap_or(f64::INFINITY);
    let count = |e: f64| values.iter().filter(|v| **v <= e).count() as f64;
    Bracket {
        lo: if lo_edge.is_nan() {
            0.0
        } else {
            count(lo_edge)
        },
        hi: count(hi_edge),
    }
}

#[derive(Debug, Clone, Copy)]
struct Thresholds {
    ttft: Option<f64>,
    tpot: Option<f64>,
    e2el: Option<f64>,
    /// The group sends `request_success_total` by `finished_reason` (abort and error).
    reasons: bool,
}

impl Thresholds {
    fn good(&self, r: &Request) -> bool {
        // With a TTFT threshold a request without a first token is not good (it has no TTFT);
        // without one it passes on TPOT 0, as `vllm bench serve` counts it.
        self.ttft.is_none_or(|t| r.first_s.is_some() && r.ttft <= t)
            && self.tpot.is_none_or(|t| r.tpot <= t)
            && self.e2el.is_none_or(|t| r.e2el <= t)
    }
}

/// The inputs a scrape at `at_s` reads from the requests of one vLLM process.
fn inputs(reqs: &[Request], at_s: f64, th: Thresholds) -> Inputs {
    let done: Vec<&Request> = reqs.iter().filter(|r| r.finish_s <= at_s).collect();
    let first: Vec<f64> = reqs
        .iter()
        .filter(|r| r.first_s.is_some_and(|f| f <= at_s))
        .map(|r| r.ttft)
        .collect();
    let tpots: Vec<f64> = done.iter().map(|r| r.tpot).collect();
    let e2els: Vec<f64> = done.iter().map(|r| r.e2el).collect();
    Inputs {
        finished: done.len() as f64,
        short: done.iter().filter(|r| r.short).count() as f64,
        generated: done.len() as f64,
        tpot: th.tpot.map(|t| bracket(&tpots, t)),
        e2el: th.e2el.map(|t| (done.len() as f64, bracket(&e2els, t))),
        ttft: th.ttft.map(|t| (first.len() as f64, bracket(&first, t))),
        abnormal: (th.reasons && th.ttft.is_some())
            .then(|| done.iter().filter(|r| r.abnormal).count() as f64),
        degraded: false,
        exact: [th.ttft, th.tpot, th.e2el].map(|t| t.is_some_and(|t| EDGES.contains(&t))),
    }
}

fn random_requests(rng: &mut StdRng, n: usize, horizon_s: f64) -> Vec<Request> {
    (0..n)
        .map(|_| {
            let arrival = rng.random_range(0.0..horizon_s);
            let tokens: u32 = if rng.random_bool(0.1) {
                0
            } else if rng.random_bool(0.15) {
                1
            } else {
                rng.random_range(2..200)
            };
            // Heavy-tailed latencies so every threshold splits the requests.
            let ttft = 0.01 * (1.0 + rng.random_range(0.0f64..6.0).exp());
            let tpot_real = 0.005 * (1.0 + rng.random_range(0.0f64..4.5).exp());
            let decode = tpot_real * f64::from(tokens.saturating_sub(1));
            let e2el = ttft + decode;
            Request {
                first_s: (tokens > 0).then_some(arrival + ttft),
                finish_s: arrival + e2el.max(0.001),
                ttft,
                tpot: if tokens > 1 { tpot_real } else { 0.0 },
                e2el,
                short: tokens <= 1,
                abnormal: tokens == 0 || rng.random_bool(0.03),
            }
        })
        .collect()
}

/// What one consistent scrape left: the bounds, and the truth since the stream began, counted
/// from the per-request records.
#[derive(Debug, Clone, Copy)]
struct Seen {
    lower: f64,
    upper: f64,
    /// Requests finished, and of those the good ones, since the stream began.
    finished: f64,
    good: f64,
    /// Requests whose TTFT was observed and that had not finished: the requests in flight that
    /// a window starting here may count.
    in_flight: f64,
}

/// Runs one stream through [`Goodput`], checks it against the truth at every scrape, and returns
/// the consistent scrapes for the window checks.
fn check(seed: u64, th: Thresholds) -> Vec<Seen> {
    let mut rng = StdRng::seed_from_u64(seed);
    // Two vLLM processes one after the other: the second starts its counters at 0 (a reset).
    let horizon = 60.0;
    let processes = [
        random_requests(&mut rng, 400, horizon),
        random_requests(&mut rng, 300, horizon),
    ];
    let mut goodput = Goodput::new();
    let mut baseline_good: Option<f64> = None;
    let mut baseline_finished = 0.0;
    let mut earlier_good = 0.0; // truth of processes already ended
    let mut earlier_finished = 0.0;
    let (mut last_lower, mut last_upper) = (0.0, 0.0);
    let mut seen = Vec::new();
    let mut key = 0;
    for (p, reqs) in processes.iter().enumerate() {
        // The corrector starts counting the first process mid-stream, with requests in flight
        // whose TTFT it never saw; the second from its start.
        let mut at = if p == 0 {
            rng.random_range(5.0..30.0)
        } else {
            0.0
        };
        // The newest consistent scrape of this process (0 until the first).
        let mut counted_at = 0.0;
        while at < horizon + 20.0 {
            at += rng.random_range(0.2..3.0);
            let mut now = inputs(reqs, at, th);
            // A torn scrape now and then (vLLM records a finished request's E2E, then its
            // tokens, then its TPOT, and a scrape can fall in between): the E2E histogram not yet
            // updated, or the TPOT histogram behind the token histogram.
            if let Some((count, b)) = &mut now.e2el
                && rng.random_bool(0.1)
                && *count > 0.0
            {
                *count -= 1.0;
                b.hi = b.hi.min(*count);
                b.lo = b.lo.min(b.hi);
            } else if now.finished > 0.0 && rng.random_bool(0.05) {
                now.finished -= 1.0;
                if let Some(b) = &mut now.tpot {
                    b.hi = b.hi.min(now.finished);
                    b.lo = b.lo.min(b.hi);
                }
            }
            // Now and then the group's layout changes (a series went stale and came back): that
            // interval is not compared bucket by bucket, and the bounds stay sound.
            if rng.random_bool(0.05) {
                key += 1;
            }
            goodput.advance(&now, key);
            // A torn scrape is skipped: the bounds are those of the last consistent one.
            if now.consistent() {
                counted_at = at;
            }
            let good_now = reqs
                .iter()
                .filter(|r| r.finish_s <= counted_at && th.good(r))
                .count() as f64
                + earlier_good;
            let finished_now =
                reqs.iter().filter(|r| r.finish_s <= counted_at).count() as f64 + earlier_finished;
            if now.consistent() && baseline_good.is_none() {
                baseline_good = Some(good_now);
                baseline_finished = finished_now;
            }
            let Some(base) = baseline_good else { continue };
            let truth = good_now - base;
            assert!(
                goodput.lower <= truth + 1e-9 && truth <= goodput.upper + 1e-9,
                "seed {seed} {th:?} process {p} at {at:.1}s: {} <= {truth} <= {}",
                goodput.lower,
                goodput.upper
            );
            assert!(goodput.lower >= last_lower && goodput.upper >= last_upper);
            assert!(goodput.lower <= goodput.upper && goodput.upper <= goodput.finished);
            if now.consistent() {
                assert_eq!(goodput.finished, finished_now - baseline_finished);
                let running = |r: &&Request| r.first_s.is_some_and(|f| f <= at) && r.finish_s > at;
                seen.push(Seen {
                    lower: goodput.lower,
                    upper: goodput.upper,
                    finished: finished_now,
                    good: good_now,
                    in_flight: reqs.iter().filter(running).count() as f64,
                });
            }
            (last_lower, last_upper) = (goodput.lower, goodput.upper);
        }
        // The process ends (a vLLM restart): what had not finished by its last scrape never
        // finishes.
        let seen = |r: &&Request| r.finish_s <= counted_at;
        earlier_good += reqs.iter().filter(seen).filter(|r| th.good(r)).count() as f64;
        earlier_finished += reqs.iter().filter(seen).count() as f64;
    }
    assert!(goodput.is_valid());
    seen
}

const SETS: [Thresholds; 6] = [
    Thresholds {
        ttft: None,
        tpot: Some(0.1),
        e2el: None,
        reasons: false,
    },
    Thresholds {
        ttft: None,
        tpot: Some(0.1),
        e2el: Some(5.0),
        reasons: false,
    },
    Thresholds {
        ttft: Some(0.5),
        tpot: None,
        e2el: None,
        reasons: false,
    },
    Thresholds {
        ttft: Some(0.5),
        tpot: Some(0.05),
        e2el: Some(5.0),
        reasons: false,
    },
    // Thresholds between edges: the bounds widen to the edges around them.
    Thresholds {
        ttft: Some(0.3),
        tpot: Some(0.07),
        e2el: Some(2.0),
        reasons: false,
    },
    Thresholds {
        ttft: Some(0.1),
        tpot: Some(1.0),
        e2el: None,
        reasons: false,
    },
];

#[test]
fn the_true_goodput_lies_within_the_bounds_at_every_scrape_across_resets_and_torn_scrapes() {
    for seed in 0..20 {
        for th in SETS {
            for reasons in [false, true] {
                check(seed, Thresholds { reasons, ..th });
            }
        }
    }
}

/// The bounds' increase over a window between two scrapes a < b brackets the good requests that
/// finished in it, give or take the requests in flight at a (docs/GOODPUT.md, "Goodput over a
/// window"): each bound carries TTFT observations across scrapes, at most one per request in
/// flight, and a window starting at a may see those spent before a. Without a TTFT threshold
/// nothing is carried, and the window's increase brackets the truth exactly.
#[test]
fn a_windows_increase_brackets_the_good_requests_finished_in_it_up_to_those_in_flight_at_its_start()
{
    for seed in 0..12 {
        for th in SETS.map(|th| Thresholds {
            reasons: seed % 2 == 1,
            ..th
        }) {
            let seen = check(seed, th);
            for (i, a) in seen.iter().enumerate() {
                for b in &seen[i + 1..] {
                    let truth = b.good - a.good;
                    let slack = if th.ttft.is_some() { a.in_flight } else { 0.0 };
                    let (lower, upper) = (b.lower - a.lower, b.upper - a.upper);
                    assert!(
                        lower - slack <= truth + 1e-9 && truth <= upper + slack + 1e-9,
                        "seed {seed} {th:?}: {lower} - {slack} <= {truth} <= {upper} + {slack}"
                    );
                    assert!(truth <= b.finished - a.finished);
                }
            }
        }
    }
}

/// The bounds are at least as tight as the sound bounds from the same cumulative counts since
/// the baseline: `max(0, finished − Σ bad)` below, where TTFT's bad are its bad observations plus
/// the requests in flight at the baseline (their TTFT came before it) and those of at most one
/// token (which may have none); `min(good)` above, where TTFT's good are its good observations plus
/// the requests in flight at the baseline.
#[test]
fn the_bounds_are_at_least_as_tight_as_the_cumulative_frechet_bounds() {
    for seed in 0..20 {
        for th in SETS.map(|th| Thresholds {
            reasons: seed % 2 == 1,
            ..th
        }) {
            let mut rng = StdRng::seed_from_u64(seed);
            let reqs = random_requests(&mut rng, 400, 60.0);
            let mut goodput = Goodput::new();
            let mut base: Option<Inputs> = None;
            let mut at = rng.random_range(0.0..30.0);
            while at < 80.0 {
                at += rng.random_range(0.2..3.0);
                let now = inputs(&reqs, at, th);
                goodput.advance(&now, 1);
                let Some(b) = base else {
                    base = Some(now);
                    continue;
                };
                let n = now.finished - b.finished;
                let mut bad = 0.0;
                let mut good = n;
                if let (Some(x), Some(y)) = (now.tpot, b.tpot) {
                    bad += n - (x.lo - y.lo);
                    good = good.min(x.hi - y.hi);
                }
                if let (Some((c, x)), Some((c0, y))) = (now.e2el, b.e2el) {
                    bad += (c - c0) - (x.lo - y.lo);
                    good = good.min(x.hi - y.hi);
                }
                if let (Some((c, x)), Some((c0, y))) = (now.ttft, b.ttft) {
                    let in_flight = b.in_flight_cap();
                    let lacking = |i: &Inputs| i.abnormal.map_or(i.short, |a| a.min(i.short));
                    bad += (c - c0) - (x.lo - y.lo) + in_flight + (lacking(&now) - lacking(&b));
                    good = good.min(x.hi - y.hi + in_flight);
                }
                let frechet_lower = (n - bad).max(0.0);
                assert!(
                    goodput.lower >= frechet_lower - 1e-9,
                    "seed {seed} {th:?} at {at}"
                );
                assert!(
                    goodput.upper <= good.max(0.0) + 1e-9,
                    "seed {seed} {th:?} at {at}"
                );
            }
        }
    }
}

#[test]
fn without_ttft_and_with_thresholds_on_edges_a_single_sli_is_counted_exactly() {
    // One finish-time SLI on an edge: lower = upper = the good requests, by the Fréchet bounds.
    let th = Thresholds {
        ttft: None,
        tpot: Some(0.1),
        e2el: None,
        reasons: false,
    };
    let mut rng = StdRng::seed_from_u64(7);
    let reqs = random_requests(&mut rng, 300, 30.0);
    let mut goodput = Goodput::new();
    goodput.advance(&inputs(&reqs, 0.0, th), 1);
    for at in 1..=60 {
        goodput.advance(&inputs(&reqs, f64::from(at), th), 1);
    }
    let done = |r: &&Request| r.finish_s <= 60.0;
    let truth = reqs.iter().filter(done).filter(|r| th.good(r)).count() as f64;
    assert_eq!(goodput.lower, truth);
    assert_eq!(goodput.upper, truth);
    assert_eq!(goodput.finished, reqs.iter().filter(done).count() as f64);
    assert!(
        truth > 100.0 && truth < goodput.finished,
        "a threshold that splits: {truth}"
    );
}

#[test]
fn a_torn_frame_adds_nothing_and_the_next_consistent_one_covers_both_intervals() {
    let b = |lo, hi| Bracket { lo, hi };
    let frame = |finished: f64, e2e_count: f64| Inputs {
        finished,
        short: 0.0,
        generated: finished,
        tpot: Some(b(finished, finished)),
        e2el: Some((e2e_count, b(e2e_count, e2e_count))),
        ttft: None,
        abnormal: None,
        degraded: false,
        exact: [false, true, true],
    };
    let mut goodput = Goodput::new();
    goodput.advance(&frame(10.0, 10.0), 1);
    goodput.advance(&frame(14.0, 12.0), 1);
    assert_eq!(
        (goodput.finished, goodput.lower, goodput.upper),
        (0.0, 0.0, 0.0)
    );
    goodput.advance(&frame(15.0, 15.0), 1);
    assert_eq!(
        (goodput.finished, goodput.lower, goodput.upper),
        (5.0, 5.0, 5.0)
    );
}

/// With the finish reasons, a request of one output token finished by `stop` or `length` had a
/// first token: only the aborted or failed ones may lack a TTFT observation, so the lower bound
/// no longer counts every short request as possibly bad on TTFT.
#[test]
fn finish_reasons_narrow_the_band_of_a_ttft_threshold() {
    let mut widths = [0.0; 2];
    for seed in 0..10 {
        for (k, reasons) in [false, true].into_iter().enumerate() {
            let th = Thresholds {
                ttft: Some(0.5),
                tpot: Some(0.1),
                e2el: None,
                reasons,
            };
            let mut rng = StdRng::seed_from_u64(seed);
            let reqs = random_requests(&mut rng, 400, 60.0);
            let mut goodput = Goodput::new();
            for at in 0..=90 {
                goodput.advance(&inputs(&reqs, f64::from(at), th), 1);
            }
            widths[k] += (goodput.upper - goodput.lower) / goodput.finished;
        }
    }
    // A quarter of the requests have at most one token (10 % none): without the reasons each of
    // them may lack a TTFT; with them only the aborted ones (every tokenless request, 3 % more).
    // The rest of the band is the TTFT violations themselves (a third of the requests here).
    assert!(widths[1] < 0.8 * widths[0], "{widths:?}");
}
