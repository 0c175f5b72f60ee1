//! The output hold ([`crate::hold`]) on the engine: torn updates and aborts replayed with
//! hand-computed outputs, and a simulator run with torn scrapes that converges to the truth.

use super::test_support::*;
use super::*;
use sim::{SimConfig, Simulator, SpecConfig};

const INF: f64 = f64::INFINITY;

/// The canonical-TPOT inputs of engine `e` at one scrape: TPOT buckets at 0.01, 0.05, `+Inf`
/// (cumulative), its `_sum`, and `request_generation_tokens{le="1"}`.
fn tpot_scrape(tpot: [f64; 3], sum: f64, gen_le1: f64) -> Vec<Raw> {
    let mut out = Vec::new();
    hist(&mut out, "tpot", "0", &["0.01", "0.05", "+Inf"], &tpot, sum);
    out.push(series(
        "vllm:request_generation_tokens_bucket",
        "0",
        &[("le", "1.0")],
        gen_le1,
    ));
    out.push(series(
        "vllm:request_generation_tokens_count",
        "0",
        &[],
        tpot[2],
    ));
    out
}

fn at(raw: Vec<Raw>, ts: i64) -> Vec<(Raw, i64)> {
    raw.into_iter().map(|r| (r, ts)).collect()
}

fn tpot_of(engine: &Engine) -> DerivedValue {
    value_of(&outputs(engine), Family::CanonicalTpot, "0")
}

fn holds(engine: &Engine, family: Family) -> u64 {
    engine.stats().output_holds[family.index()]
}

#[test]
fn canonical_tpot_never_falls_after_a_torn_update() {
    let mut engine = Engine::new(crate::test_support::config());
    let mut report = IngestReport::default();
    // t1: TPOT 3, 9, 10 (Σ 0.42) minus 3 requests with n ≤ 1 -> 0, 6, 7.
    feed(
        &mut engine,
        &at(tpot_scrape([3.0, 9.0, 10.0], 0.42, 3.0), 1_000),
        &mut report,
    );
    assert_eq!(
        tpot_of(&engine),
        DerivedValue::Histogram {
            buckets: vec![(0.01, 0.0), (0.05, 6.0), (INF, 7.0)],
            sum: 0.42,
            count: 7.0
        }
    );
    // t2, torn: two n ≤ 1 requests recorded their TPOT of 0 s (every bucket + 2) but not yet their
    // tokens{le="1"}: 5 − 3, 11 − 3, 12 − 3 = 2, 8, 9.
    feed(
        &mut engine,
        &at(tpot_scrape([5.0, 11.0, 12.0], 0.42, 3.0), 16_000),
        &mut report,
    );
    assert_eq!(
        tpot_of(&engine),
        DerivedValue::Histogram {
            buckets: vec![(0.01, 2.0), (0.05, 8.0), (INF, 9.0)],
            sum: 0.42,
            count: 9.0
        }
    );
    // t3: tokens{le="1"} catches up to 5, so the rule gives 0, 6, 7 again: every bucket would fall
    // by 2. Held at 2, 8, 9 (carry 2 on each).
    feed(
        &mut engine,
        &at(tpot_scrape([5.0, 11.0, 12.0], 0.42, 5.0), 31_000),
        &mut report,
    );
    assert_eq!(
        tpot_of(&engine),
        DerivedValue::Histogram {
            buckets: vec![(0.01, 2.0), (0.05, 8.0), (INF, 9.0)],
            sum: 0.42,
            count: 9.0
        }
    );
    assert_eq!(holds(&engine, Family::CanonicalTpot), 1);
    // t4: four real requests (1 under 0.01 s, 1 more under 0.05 s, 2 above; Σ +0.1): TPOT 6, 13,
    // 16 − 5 -> 1, 8, 11. 0.01 is still held at 2 (carry 1), 0.05 is released at 8, +Inf at 11.
    feed(
        &mut engine,
        &at(tpot_scrape([6.0, 13.0, 16.0], 0.52, 5.0), 46_000),
        &mut report,
    );
    assert_eq!(
        tpot_of(&engine),
        DerivedValue::Histogram {
            buckets: vec![(0.01, 2.0), (0.05, 8.0), (INF, 11.0)],
            sum: 0.52,
            count: 11.0
        }
    );
    assert_eq!(holds(&engine, Family::CanonicalTpot), 2);
    // t5: three more under 0.01 s: 9, 16, 19 − 5 -> 4, 11, 14. Everything is above what was
    // served: the output is the rule's value again, exactly.
    feed(
        &mut engine,
        &at(tpot_scrape([9.0, 16.0, 19.0], 0.55, 5.0), 61_000),
        &mut report,
    );
    assert_eq!(
        tpot_of(&engine),
        DerivedValue::Histogram {
            buckets: vec![(0.01, 4.0), (0.05, 11.0), (INF, 14.0)],
            sum: 0.55,
            count: 14.0
        }
    );
    assert_eq!(holds(&engine, Family::CanonicalTpot), 2);
    assert_eq!(report.received, report.applied + report.rejected_total());
}

fn itl_scrape(itl_sum: f64, generation: f64, ttft_count: f64) -> Vec<Raw> {
    vec![
        series("vllm:inter_token_latency_seconds_sum", "0", &[], itl_sum),
        series("vllm:generation_tokens_total", "0", &[], generation),
        series(
            "vllm:time_to_first_token_seconds_count",
            "0",
            &[],
            ttft_count,
        ),
    ]
}

#[test]
fn token_weighted_itl_count_never_falls_when_aborts_outpace_generation_tokens() {
    let mut engine = Engine::new(crate::test_support::config());
    let mut report = IngestReport::default();
    let tw = |engine: &Engine| value_of(&outputs(engine), Family::TokenWeightedItl, "0");
    // t1: 200 tokens − 20 first tokens = 180.
    feed(
        &mut engine,
        &at(itl_scrape(1.8, 200.0, 20.0), 1_000),
        &mut report,
    );
    assert_eq!(
        tw(&engine),
        DerivedValue::SumCount {
            sum: 1.8,
            count: 180.0
        }
    );
    // t2: 25 aborted requests raised the TTFT count before their tokens were counted:
    // 204 − 45 = 159 < 180. Held at 180 (carry 21); the sum rose and passes.
    feed(
        &mut engine,
        &at(itl_scrape(1.9, 204.0, 45.0), 16_000),
        &mut report,
    );
    assert_eq!(
        tw(&engine),
        DerivedValue::SumCount {
            sum: 1.9,
            count: 180.0
        }
    );
    // t3: 260 − 45 = 215 > 180: released, exactly the rule's value.
    feed(
        &mut engine,
        &at(itl_scrape(2.4, 260.0, 45.0), 31_000),
        &mut report,
    );
    assert_eq!(
        tw(&engine),
        DerivedValue::SumCount {
            sum: 2.4,
            count: 215.0
        }
    );
    assert_eq!(holds(&engine, Family::TokenWeightedItl), 1);
    // t4: vLLM restarted (every input fell): a counter reset, so the output falls with it.
    feed(
        &mut engine,
        &at(itl_scrape(0.1, 10.0, 2.0), 46_000),
        &mut report,
    );
    assert_eq!(
        tw(&engine),
        DerivedValue::SumCount {
            sum: 0.1,
            count: 8.0
        }
    );
    assert_eq!(
        holds(&engine, Family::TokenWeightedItl),
        1,
        "a reset is not a hold"
    );
}

/// Feeds one simulator snapshot; with `torn`, the series named in `lagging` carry their value
/// from `previous` instead (they were updated after the scrape).
fn ingest_snapshot(
    engine: &mut Engine,
    snap: &sim::Snapshot,
    previous: Option<&sim::Snapshot>,
    lagging: &[&str],
) {
    let mut report = IngestReport::default();
    let old: Vec<_> = previous.map(|p| p.samples().collect()).unwrap_or_default();
    for s in snap.samples() {
        let mut value = s.value;
        if lagging.contains(&s.name.as_str())
            && let Some(p) = old
                .iter()
                .find(|p| p.name == s.name && p.labels == s.labels)
        {
            value = p.value;
        }
        let mut labels = vec![("__name__", s.name.as_str())];
        labels.extend(s.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let sample = Sample {
            value,
            timestamp_ms: snap.timestamp_ms,
        };
        ingest_series(engine, &labels, &[sample], 0, &mut report);
    }
    assert_eq!(report.received, report.applied + report.rejected_total());
}

/// Largest amount by which `held` exceeds `clean` in any component (0 when equal).
fn excess(held: &DerivedValue, clean: &DerivedValue) -> f64 {
    match (held, clean) {
        (
            DerivedValue::SumCount { sum: a, count: b },
            DerivedValue::SumCount { sum: c, count: d },
        ) => (a - c).max(b - d).max(0.0),
        (
            DerivedValue::Histogram {
                buckets: a,
                sum: s,
                count: n,
            },
            DerivedValue::Histogram {
                buckets: b,
                sum: t,
                count: m,
            },
        ) => a
            .iter()
            .zip(b)
            .map(|(x, y)| x.1 - y.1)
            .fold((s - t).max(n - m).max(0.0), f64::max),
        _ => f64::INFINITY,
    }
}

#[test]
fn held_outputs_converge_to_the_simulator_truth_after_torn_scrapes() {
    let cfg = SimConfig {
        models: vec!["a".into()],
        engines_per_model: 2,
        arrival_rate: 12.0,
        spec: Some(SpecConfig {
            num_speculative_tokens: 3,
            acceptance_prob: 0.6,
            no_draft_fraction: 0.25,
        }),
        seed: 7,
        ..SimConfig::default()
    };
    let mut sim = Simulator::new(cfg).unwrap();
    let (mut clean, mut torn) = (
        Engine::new(crate::test_support::config()),
        Engine::new(crate::test_support::config()),
    );
    // Every third scrape is torn: the n ≤ 1 token bucket and the generation-token counter are read
    // one scrape late (what a scrape racing vLLM's metric updates sees).
    let lagging = [
        "vllm:request_generation_tokens_bucket",
        "vllm:generation_tokens_total",
    ];
    let mut previous = None;
    let mut max_excess = [0.0f64; FAMILIES];
    for t in 1..=60 {
        sim.advance_to(f64::from(t));
        let snap = sim.snapshot();
        ingest_snapshot(&mut clean, &snap, None, &[]);
        let torn_now = t % 3 == 2;
        ingest_snapshot(
            &mut torn,
            &snap,
            if torn_now { previous.as_ref() } else { None },
            &lagging,
        );
        let (c, h) = (outputs(&clean), outputs(&torn));
        for (family, labels, value) in &h {
            if let Some((_, _, cv)) = c.iter().find(|(f, l, _)| f == family && l == labels) {
                let e = &mut max_excess[family.index()];
                *e = e.max(excess(value, cv));
            }
        }
        previous = Some(snap);
    }
    let holds = torn.stats().output_holds;
    eprintln!("holds by family {holds:?}; largest carry by family {max_excess:?}");
    assert!(
        holds[Family::CanonicalTpot.index()] + holds[Family::TokenWeightedItl.index()] > 0,
        "the torn scrapes made the rules fall"
    );
    assert_eq!(
        clean.stats().output_holds,
        [0; FAMILIES],
        "consistent scrapes never hold"
    );
    // The last scrape is consistent. Token-weighted ITL and local-compute iteration tokens were
    // only ever held below the truth (at the value of the previous scrape), and are back at the
    // clean engine's values exactly, which equal the simulator's truth
    // (`engine_corrected_families_equal_simulator_truth`).
    let (c, h) = (outputs(&clean), outputs(&torn));
    for family in [
        Family::TokenWeightedItl,
        Family::IterationTokensLocalCompute,
    ] {
        let pick = |o: &Outputs| {
            o.iter()
                .filter(|(f, _, _)| *f == family)
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(pick(&h), pick(&c), "{family:?}");
        assert_eq!(pick(&h).len(), 2);
    }
    let w = sim.truth_window(0, sim.now_ns());
    for g in &w.groups {
        let e = g.engine.as_deref().unwrap();
        let DerivedValue::SumCount { count, .. } = value_of(&h, Family::TokenWeightedItl, e) else {
            panic!()
        };
        assert_eq!(
            count,
            (g.iterations.tokens_after_first - g.iterations.zero_token_first_outputs) as f64
        );
        // Canonical TPOT: a torn scrape over-counts (the n ≤ 1 requests are not subtracted yet),
        // and the hold keeps each bucket's highest value until the truth passes it. `_sum`,
        // `_count` and every bucket that kept growing are exact again; a bucket that barely grows
        // (le=0.01: only requests faster than 10 ms per token) keeps its carry, at most the
        // largest over-count seen.
        let DerivedValue::Histogram {
            buckets,
            sum,
            count,
        } = value_of(&h, Family::CanonicalTpot, e)
        else {
            panic!()
        };
        let DerivedValue::Histogram {
            buckets: clean_buckets,
            sum: clean_sum,
            count: clean_count,
        } = value_of(&c, Family::CanonicalTpot, e)
        else {
            panic!()
        };
        assert_eq!((sum, count), (clean_sum, clean_count));
        assert_eq!(count, g.requests.canonical_tpot.count as f64);
        let carries: Vec<(f64, f64)> = buckets
            .iter()
            .zip(&clean_buckets)
            .map(|(b, c)| (b.0, b.1 - c.1))
            .filter(|(_, d)| *d != 0.0)
            .collect();
        eprintln!(
            "engine {e}: canonical TPOT buckets still above the truth after 60 scrapes: {carries:?}"
        );
        assert!(
            carries
                .iter()
                .all(|(_, d)| *d > 0.0 && *d <= max_excess[Family::CanonicalTpot.index()]),
            "{carries:?}"
        );
        assert!(
            carries.len() <= 2,
            "all but the slowest buckets converged: {carries:?}"
        );
    }
}
