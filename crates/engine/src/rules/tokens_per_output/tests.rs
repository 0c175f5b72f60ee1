//! Tests of `tokens_per_output.rs`.

use crate::{DerivedValue, Engine, Family, IngestReport};
use protocol::{Label, Sample};
use sim::{SimConfig, Simulator, SpecConfig};

const FAMILY: Family = Family::named("vllm_corrected_tokens_per_output");

/// One series of a scrape: `(__name__, labels beside the engine's, value)`.
type Series = (&'static str, &'static [(&'static str, &'static str)], f64);

/// Feeds `(name, extra labels, value)` of engine `e` at `ts` (ms).
fn feed(engine: &mut Engine, e: &str, ts: i64, series: &[Series]) {
    let mut report = IngestReport::default();
    for (name, extra, value) in series {
        let mut labels = vec![
            Label {
                name: "__name__",
                value: name,
            },
            Label {
                name: "engine",
                value: e,
            },
        ];
        labels.extend(extra.iter().map(|(name, value)| Label { name, value }));
        labels.sort_by(|a, b| a.name.cmp(b.name));
        let sample = Sample {
            value: *value,
            timestamp_ms: ts,
        };
        engine.ingest(&labels, &[sample], ts, &mut report);
    }
    assert_eq!(report.applied, series.len() as u64, "{report:?}");
}

/// One engine's series at one scrape: (generation tokens, TTFT count, ITL count), with the
/// ITL `_sum` and `+Inf` bucket the ITL histogram needs and the iteration count every engine has.
fn scrape(generated: f64, first: f64, outputs: f64) -> Vec<Series> {
    vec![
        ("vllm:generation_tokens_total", &[], generated),
        ("vllm:time_to_first_token_seconds_count", &[], first),
        (
            "vllm:inter_token_latency_seconds_bucket",
            &[("le", "+Inf")],
            outputs,
        ),
        ("vllm:inter_token_latency_seconds_sum", &[], outputs * 0.02),
        ("vllm:inter_token_latency_seconds_count", &[], outputs),
    ]
}

fn value(engine: &Engine, e: &str) -> Option<(f64, f64)> {
    let mut out = None;
    engine.for_each_derived(FAMILY, |labels, v| {
        if labels.iter().any(|(n, x)| n == "engine" && x == e)
            && let DerivedValue::SumCount { sum, count } = v
        {
            out = Some((*sum, *count));
        }
    });
    out
}

#[test]
fn sum_is_tokens_after_each_first_and_count_is_the_outputs_that_carried_them() {
    // Scrape 1: 40 requests started (40 first outputs), 1000 tokens generated, 384 outputs
    // after the first: 960 tokens over 384 outputs, 2.5 tokens per output.
    // Scrape 2: +10 first outputs, +410 tokens, +160 outputs: 1360 over 544 = 2.5.
    let mut engine = Engine::new(crate::test_support::config());
    feed(&mut engine, "0", 1_000, &scrape(1000.0, 40.0, 384.0));
    assert_eq!(value(&engine, "0"), Some((960.0, 384.0)));
    feed(&mut engine, "0", 2_000, &scrape(1410.0, 50.0, 544.0));
    assert_eq!(value(&engine, "0"), Some((1360.0, 544.0)));
    // Without speculative decoding every output holds one token: the ratio is 1.
    feed(&mut engine, "1", 1_000, &scrape(130.0, 30.0, 100.0));
    assert_eq!(value(&engine, "1"), Some((100.0, 100.0)));
}

#[test]
fn tokens_per_output_never_fall_when_the_ttft_count_runs_ahead() {
    // Scrape 2 counts 5 more first outputs whose tokens arrive in scrape 3 (aborts, a torn
    // update): the computed sum falls 960 -> 955, the served one is held at 960, then 975.
    let mut engine = Engine::new(crate::test_support::config());
    feed(&mut engine, "0", 1_000, &scrape(1000.0, 40.0, 384.0));
    feed(&mut engine, "0", 2_000, &scrape(1000.0, 45.0, 390.0));
    assert_eq!(value(&engine, "0"), Some((960.0, 390.0)));
    assert_eq!(engine.stats().output_holds[FAMILY.index()], 1);
    feed(&mut engine, "0", 3_000, &scrape(1025.0, 50.0, 395.0));
    assert_eq!(value(&engine, "0"), Some((975.0, 395.0)));
    // A counter reset (vLLM restarted): the family restarts from the new counts.
    feed(&mut engine, "0", 4_000, &scrape(12.0, 2.0, 4.0));
    assert_eq!(value(&engine, "0"), Some((10.0, 4.0)));
}

#[test]
fn old_itl_name_counts_the_outputs_when_the_new_one_is_absent() {
    let mut engine = Engine::new(crate::test_support::config());
    let series: Vec<Series> = vec![
        ("vllm:generation_tokens_total", &[], 300.0),
        ("vllm:time_to_first_token_seconds_count", &[], 20.0),
        (
            "vllm:time_per_output_token_seconds_bucket",
            &[("le", "+Inf")],
            140.0,
        ),
        ("vllm:time_per_output_token_seconds_sum", &[], 3.0),
        ("vllm:time_per_output_token_seconds_count", &[], 140.0),
    ];
    feed(&mut engine, "0", 1_000, &series);
    assert_eq!(value(&engine, "0"), Some((280.0, 140.0)));
}

#[test]
fn tokens_per_output_equal_the_simulator_truth_per_engine_over_a_window() {
    // Speculative decoding with 3 drafts, a quarter of the steps without drafts: the truth is
    // the simulator's own count of tokens carried by outputs after each first, and of those
    // outputs, per engine, between two scrapes.
    let cfg = SimConfig {
        models: vec!["a".into()],
        engines_per_model: 2,
        arrival_rate: 12.0,
        spec: Some(SpecConfig {
            num_speculative_tokens: 3,
            acceptance_prob: 0.6,
            no_draft_fraction: 0.25,
        }),
        seed: 5,
        ..SimConfig::default()
    };
    let mut sim = Simulator::new(cfg).expect("simulator config");
    let mut engine = Engine::new(crate::test_support::config());
    fn at(sim: &mut Simulator, engine: &mut Engine, t: f64) -> [(f64, f64); 2] {
        sim.advance_to(t);
        let snap = sim.snapshot();
        let mut report = IngestReport::default();
        for s in snap.samples() {
            let mut labels = vec![Label {
                name: "__name__",
                value: &s.name,
            }];
            labels.extend(s.labels.iter().map(|(k, v)| Label { name: k, value: v }));
            let sample = Sample {
                value: s.value,
                timestamp_ms: snap.timestamp_ms,
            };
            engine.ingest(&labels, &[sample], snap.timestamp_ms, &mut report);
        }
        ["0", "1"].map(|e| value(engine, e).expect("served"))
    }
    let before = at(&mut sim, &mut engine, 10.0);
    let after = at(&mut sim, &mut engine, 30.0);
    let window = sim.truth_window(10_000_000_000, 30_000_000_000);
    let mut ratios = Vec::new();
    for (i, e) in ["0", "1"].iter().enumerate() {
        let truth = window
            .groups
            .iter()
            .find(|g| g.engine.as_deref() == Some(e))
            .expect("engine truth");
        let (sum, count) = (after[i].0 - before[i].0, after[i].1 - before[i].1);
        // vLLM counts the first output of an n = 0 request (aborted or failed before its
        // first token) in the TTFT count with no token, so generation − TTFT count is the
        // tokens after each first less those outputs, as for the token-weighted count.
        let it = &truth.iterations;
        assert_eq!(
            sum,
            (it.tokens_after_first - it.zero_token_first_outputs) as f64,
            "engine {e}"
        );
        assert_eq!(count, truth.iterations.itl_count as f64, "engine {e}");
        ratios.push(sum / count);
    }
    // With drafts on three steps in four the client sees more than one token per output.
    assert!(ratios.iter().all(|r| *r > 1.2), "{ratios:?}");
}

/// The reason `family` is withheld for engine `e`, if it is.
fn withheld(engine: &Engine, family: Family, e: &str) -> Option<crate::WithheldReason> {
    let mut out = None;
    engine.for_each_withheld(family, |labels, reason| {
        if labels.iter().any(|(n, x)| n == "engine" && x == e) {
            out = Some(reason);
        }
    });
    out
}

#[test]
fn no_family_serves_a_negative_or_non_finite_count() {
    // Issue 23 item 9: an ITL `_count` of −Inf (remote write carries it like any value) was
    // served as tokens per output's `_count`; an iteration count of −5 as local-compute
    // iteration tokens' `_count`. Both are withheld as inconsistent inputs instead.
    let mut engine = Engine::new(crate::test_support::config());
    let inf = f64::NEG_INFINITY;
    feed(&mut engine, "0", 1_000, &scrape(1000.0, 40.0, inf));
    assert_eq!(value(&engine, "0"), None);
    assert_eq!(
        withheld(&engine, FAMILY, "0"),
        Some(crate::WithheldReason::InconsistentInputs)
    );
    // NaN arises from +Inf − +Inf: generation tokens and TTFT count both +Inf.
    feed(
        &mut engine,
        "1",
        1_000,
        &scrape(f64::INFINITY, f64::INFINITY, 10.0),
    );
    assert_eq!(value(&engine, "1"), None);

    let local = Family::named("vllm_corrected_iteration_tokens_local_compute");
    let iterations = |count: f64| -> Vec<Series> {
        vec![
            (
                "vllm:prompt_tokens_by_source_total",
                &[("source", "local_compute")],
                700.0,
            ),
            ("vllm:generation_tokens_total", &[], 300.0),
            ("vllm:iteration_tokens_total_count", &[], count),
        ]
    };
    feed(&mut engine, "2", 1_000, &iterations(-5.0));
    let mut served = None;
    engine.for_each_derived(local, |labels, v| {
        if labels.iter().any(|(n, x)| n == "engine" && x == "2") {
            served = Some(v.clone());
        }
    });
    assert_eq!(served, None);
    assert_eq!(
        withheld(&engine, local, "2"),
        Some(crate::WithheldReason::InconsistentInputs)
    );
    // The same group with a real count is served: 700 + 300 tokens over 50 iterations.
    feed(&mut engine, "2", 2_000, &iterations(50.0));
    engine.for_each_derived(local, |labels, v| {
        if labels.iter().any(|(n, x)| n == "engine" && x == "2") {
            served = Some(v.clone());
        }
    });
    assert_eq!(
        served,
        Some(DerivedValue::SumCount {
            sum: 1000.0,
            count: 50.0
        })
    );
}

#[test]
fn a_fractional_count_is_withheld_so_the_openmetrics_page_stays_strict() {
    // One sender's fractional counter (an ITL `_count` of 29.5, which no vLLM counter holds) put a
    // fractional `_count` on `/metrics`: OpenMetrics 1.0 requires integer counts, so a strict
    // parser refused the whole page, every group's families with it.
    let mut engine = Engine::new(crate::test_support::config());
    feed(&mut engine, "0", 1_000, &scrape(1000.0, 40.0, 29.5));
    assert_eq!(value(&engine, "0"), None);
    assert_eq!(
        withheld(&engine, FAMILY, "0"),
        Some(crate::WithheldReason::InconsistentInputs)
    );
    // The same inputs with an integer count are served.
    feed(&mut engine, "1", 1_000, &scrape(1000.0, 40.0, 30.0));
    assert!(value(&engine, "1").is_some());
}
