//! The guard for per-token ITL (vllm#47382, open: each output's gap apportioned over its tokens,
//! as SGLang does). With [`ItlObservation::PerToken`] an output of k tokens records k ITL samples
//! of gap / k, so vLLM's ITL histogram would already be per token; the corrector must then leave
//! ITL as it is: acceptance-corrected buckets equal to the raw ones, tokens per output 1, and
//! token-weighted ITL what it is with per-output samples. Checked at every scrape of a run with
//! speculative decoding (the per-position counters move, so the acceptance mix would apply if the
//! engine did not see that outputs hold one token each), by feeding the simulator's snapshots
//! straight into the corrector's engine. Every expectation is read from the simulator's own
//! exposition (its raw series) or its truth, never from the engine's rules.

use super::*;
use ::engine::{DerivedValue, Engine, EngineConfig, Family, IngestReport};
use protocol::{Label, Sample};

/// Three drafts, acceptance 0.7, a fifth of the steps without drafts, two engines; no request
/// fails before its first token (see [`zero_token_failures_are_the_only_difference`]).
fn config(itl_observation: ItlObservation, zero_token_fraction: f64) -> SimConfig {
    SimConfig {
        models: vec!["m".into()],
        engines_per_model: 2,
        arrival_rate: 10.0,
        output_len: (2, 64),
        max_tokens: 64,
        zero_token_fraction,
        spec: Some(SpecConfig {
            num_speculative_tokens: 3,
            acceptance_prob: 0.7,
            no_draft_fraction: 0.2,
        }),
        itl_observation,
        seed: 47382,
        ..SimConfig::default()
    }
}

fn ingest(engine: &mut Engine, snap: &Snapshot) {
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
}

/// `vllm_corrected_tokens_per_output` (the engine names no constant for it).
fn tokens_per_output() -> Family {
    Family::ALL
        .into_iter()
        .find(|f| f.name() == "vllm_corrected_tokens_per_output")
        .expect("the fifth family")
}

/// The value of `name` for engine `eng` of model "m" in `snap`.
fn value(snap: &Snapshot, name: &str, eng: &str) -> Option<f64> {
    snap.value(name, &[("model_name", "m"), ("engine", eng)])
}

fn derived(engine: &Engine, family: Family, eng: &str) -> Option<DerivedValue> {
    let mut out = None;
    engine.for_each_derived(family, |labels, v| {
        if labels.iter().any(|(n, x)| n == "engine" && x == eng) {
            out = Some(v.clone());
        }
    });
    out
}

/// The raw ITL histogram of engine `eng` in `snap`: `(finite (le, cumulative)), _sum, _count)`.
fn raw_itl(snap: &Snapshot, eng: &str) -> (Vec<(f64, f64)>, f64, f64) {
    let name = "vllm:inter_token_latency_seconds";
    let mut buckets: Vec<(f64, f64)> = Vec::new();
    for s in snap.samples() {
        let of_engine = s.labels.iter().any(|(k, v)| k == "engine" && v == eng);
        if s.name == format!("{name}_bucket") && of_engine {
            let le = &s.labels.iter().find(|(k, _)| k == "le").expect("le").1;
            if le != "+Inf" {
                buckets.push((le.parse().expect("a float le"), s.value));
            }
        }
    }
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let v = |n: &str| value(snap, n, eng).expect(n);
    (
        buckets,
        v(&format!("{name}_sum")),
        v(&format!("{name}_count")),
    )
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[test]
fn per_token_itl_records_one_sample_of_gap_over_k_per_token() {
    let (mut per_output, mut per_token) = (
        Simulator::new(config(ItlObservation::PerOutput, 0.0)).unwrap(),
        Simulator::new(config(ItlObservation::PerToken, 0.0)).unwrap(),
    );
    per_output.advance_to(30.0);
    per_token.advance_to(30.0);
    let (a, b) = (per_output.snapshot(), per_token.snapshot());
    for eng in ["0", "1"] {
        let generated = |s: &Snapshot| value(s, "vllm:generation_tokens_total", eng);
        let ttft = |s: &Snapshot| value(s, "vllm:time_to_first_token_seconds_count", eng);
        // The same trajectory: the observation rule draws nothing.
        assert_eq!(
            (generated(&a), ttft(&a)),
            (generated(&b), ttft(&b)),
            "engine {eng}"
        );
        let ((_, sum_out, n_out), (_, sum_tok, n_tok)) = (raw_itl(&a, eng), raw_itl(&b, eng));
        // One sample per token after each request's first: the tokens after the first.
        assert_eq!(
            Some(n_tok),
            Some(generated(&b).unwrap() - ttft(&b).unwrap()),
            "{eng}"
        );
        assert!(
            n_out < n_tok * 0.7,
            "{eng}: {n_out} outputs, {n_tok} tokens"
        );
        assert!(close(sum_tok, sum_out), "{eng}: Σ {sum_tok} vs {sum_out}");
    }
    // The truth counts the histogram's observations, with the same sum.
    let w = per_token.truth_window(0, per_token.now_ns());
    assert_eq!(
        w.total.iterations.itl_count,
        w.total.iterations.tokens_after_first
    );
    let raw_total: f64 = ["0", "1"].iter().map(|e| raw_itl(&b, e).2).sum();
    assert_eq!(w.total.iterations.itl_count as f64, raw_total);
}

#[test]
fn per_token_itl_is_left_alone_by_the_corrector_at_every_scrape() {
    let mut sim = Simulator::new(config(ItlObservation::PerToken, 0.0)).unwrap();
    let mut same = Simulator::new(config(ItlObservation::PerOutput, 0.0)).unwrap();
    let (mut engine, mut other) = (
        Engine::new(EngineConfig::default()),
        Engine::new(EngineConfig::default()),
    );
    let mut checked = 0;
    for t in (2..=60).step_by(2) {
        sim.advance_to(f64::from(t));
        same.advance_to(f64::from(t));
        let (snap, snap_out) = (sim.snapshot(), same.snapshot());
        ingest(&mut engine, &snap);
        ingest(&mut other, &snap_out);
        for eng in ["0", "1"] {
            let Some(DerivedValue::Histogram {
                buckets,
                sum,
                count,
            }) = derived(&engine, Family::AcceptanceCorrectedItl, eng)
            else {
                continue; // settling: nothing served yet
            };
            let (raw, raw_sum, raw_count) = raw_itl(&snap, eng);
            // Acceptance-corrected = the raw per-token histogram, bucket for bucket.
            assert_eq!((sum, count), (raw_sum, raw_count), "t {t} engine {eng}");
            assert_eq!(buckets.len(), raw.len() + 1, "t {t}");
            for ((le, got), (raw_le, want)) in buckets.iter().zip(&raw) {
                assert_eq!(le, raw_le);
                assert!(
                    close(*got, *want),
                    "t {t} engine {eng} le {le}: {got} vs {want}"
                );
            }
            assert_eq!(buckets.last(), Some(&(f64::INFINITY, raw_count)));
            // Tokens per output: 1.
            let Some(DerivedValue::SumCount { sum, count }) =
                derived(&engine, tokens_per_output(), eng)
            else {
                panic!("t {t}: no tokens per output beside acceptance-corrected ITL");
            };
            assert_eq!((sum, count), (raw_count, raw_count), "t {t} engine {eng}");
            // Token-weighted: Σ ITL over the tokens, as with per-output samples of the same run.
            let tw = |e: &Engine| match derived(e, Family::TokenWeightedItl, eng) {
                Some(DerivedValue::SumCount { sum, count }) => (sum, count),
                other => panic!("t {t}: token-weighted {other:?}"),
            };
            let ((s_tok, n_tok), (s_out, n_out)) = (tw(&engine), tw(&other));
            assert_eq!(n_tok, n_out, "t {t} engine {eng}");
            assert!(
                close(s_tok, s_out),
                "t {t} engine {eng}: {s_tok} vs {s_out}"
            );
            assert_eq!((s_tok, n_tok), (raw_sum, raw_count), "t {t} engine {eng}");
            checked += 1;
        }
    }
    assert!(checked >= 50, "{checked} scrapes checked");
    // The same run observed per output is corrected: its buckets differ from its raw ones, and
    // per-token ITL is not a case the guard passes by doing nothing anyway.
    let snap_out = same.snapshot();
    for eng in ["0", "1"] {
        let Some(DerivedValue::Histogram { buckets, .. }) =
            derived(&other, Family::AcceptanceCorrectedItl, eng)
        else {
            panic!("no acceptance-corrected ITL per output");
        };
        let (raw, _, raw_count) = raw_itl(&snap_out, eng);
        let moved = buckets
            .iter()
            .zip(&raw)
            .any(|((_, g), (_, r))| (g - r).abs() > 0.05 * r);
        assert!(
            moved && buckets.last().unwrap().1 > 1.3 * raw_count,
            "engine {eng}"
        );
    }
}

/// With requests that fail before their first token (n = 0), vLLM counts a first output that
/// holds none, so the corrector's token count, generation tokens − TTFT count, is short of the
/// tokens after each first by one per such request (`docs/METRICS.md`, "Token-weighted ITL":
/// exact up to first outputs that carry no token). With per-token ITL that is the only
/// difference from the raw histogram: the count is short by exactly those outputs, and each
/// bucket lies between the raw one less that shortfall and the raw one.
#[test]
fn zero_token_failures_are_the_only_difference() {
    let mut sim = Simulator::new(config(ItlObservation::PerToken, 0.05)).unwrap();
    let mut engine = Engine::new(EngineConfig::default());
    for t in (2..=60).step_by(2) {
        sim.advance_to(f64::from(t));
        ingest(&mut engine, &sim.snapshot());
    }
    let snap = sim.snapshot();
    let w = sim.truth_window(0, sim.now_ns());
    for g in &w.groups {
        let eng = g.engine.as_deref().expect("engine");
        let zero = g.iterations.zero_token_first_outputs as f64;
        assert!(zero > 0.0, "engine {eng}: no n = 0 request in the run");
        let (raw, raw_sum, raw_count) = raw_itl(&snap, eng);
        assert_eq!(raw_count, g.iterations.tokens_after_first as f64);
        let Some(DerivedValue::Histogram {
            buckets,
            sum,
            count,
        }) = derived(&engine, Family::AcceptanceCorrectedItl, eng)
        else {
            panic!("engine {eng}: no acceptance-corrected ITL");
        };
        assert_eq!((sum, count), (raw_sum, raw_count - zero), "engine {eng}");
        for ((le, got), (_, want)) in buckets.iter().zip(&raw) {
            assert!(
                *got <= want + 1e-9 && *got >= want - zero - 1e-9,
                "engine {eng} le {le}: {got} vs raw {want}, {zero} n = 0 requests"
            );
        }
    }
}

#[test]
fn simulate_itl_per_token_flag_selects_per_token_observation() {
    use clap::Parser;
    #[derive(Debug, Parser)]
    struct Command {
        #[command(flatten)]
        args: serve::SimulateArgs,
    }
    let observation = |argv: &[&str]| {
        let full = [&["simulate"], argv].concat();
        let args = Command::try_parse_from(full).expect("arguments parse").args;
        args.config(0).itl_observation
    };
    assert_eq!(observation(&["--itl-per-token"]), ItlObservation::PerToken);
    assert_eq!(observation(&[]), ItlObservation::PerOutput);
}
