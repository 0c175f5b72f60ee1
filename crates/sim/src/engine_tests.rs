//! The simulator's snapshots fed straight into the corrector's engine: the corrected families
//! must equal the simulator's ground truth (cumulative from the start, so window `[0, t)`).

use super::*;
use ::engine::{DerivedValue, Engine, EngineConfig, Family, IngestReport};
use protocol::{Label, Sample};

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

fn derived(engine: &Engine, family: Family, model: &str, eng: &str) -> Option<DerivedValue> {
    let mut out = None;
    engine.for_each_derived(family, |labels, v| {
        let has = |k: &str, want: &str| labels.iter().any(|(n, x)| n == k && x == want);
        if has("model_name", model) && has("engine", eng) {
            out = Some(v.clone());
        }
    });
    out
}

#[test]
fn engine_corrected_families_equal_simulator_truth() {
    let cfg = SimConfig {
        models: vec!["a".into()],
        engines_per_model: 2,
        arrival_rate: 12.0,
        kv_transfer_prob: 0.3,
        spec: Some(SpecConfig {
            num_speculative_tokens: 3,
            acceptance_prob: 0.6,
            no_draft_fraction: 0.25,
        }),
        seed: 11,
        ..SimConfig::default()
    };
    let mut sim = Simulator::new(cfg).unwrap();
    let mut engine = Engine::new(EngineConfig::default());
    for t in 1..=20 {
        sim.advance_to(f64::from(t));
        ingest(&mut engine, &sim.snapshot());
    }
    let w = sim.truth_window(0, sim.now_ns());
    for g in &w.groups {
        let (m, e) = (
            g.model_name.as_deref().unwrap(),
            g.engine.as_deref().unwrap(),
        );
        let Some(DerivedValue::Histogram {
            buckets,
            sum,
            count,
        }) = derived(&engine, Family::CanonicalTpot, m, e)
        else {
            panic!("no canonical TPOT for {m}/{e}");
        };
        let t = &g.requests.canonical_tpot;
        assert!(
            t.count > 50
                && g.iterations.accepted_tokens > 0
                && g.iterations.zero_token_first_outputs > 0
        );
        assert_eq!(count, t.count as f64);
        assert!((sum - t.sum_seconds).abs() <= 1e-9 * t.sum_seconds);
        for (b, tb) in buckets.iter().zip(&t.buckets) {
            assert_eq!(b.1, tb.count as f64, "le {}", tb.le);
        }
        let it = &g.iterations;
        let Some(DerivedValue::SumCount { sum, count }) =
            derived(&engine, Family::TokenWeightedItl, m, e)
        else {
            panic!("no token-weighted ITL");
        };
        // The engine's count is generation − TTFT count = tokens after the first − n = 0 firsts.
        assert_eq!(
            count,
            (it.tokens_after_first - it.zero_token_first_outputs) as f64
        );
        assert!((sum - it.itl_sum_seconds).abs() <= 1e-9 * it.itl_sum_seconds);
        let Some(DerivedValue::Histogram { sum, count, .. }) =
            derived(&engine, Family::AcceptanceCorrectedItl, m, e)
        else {
            panic!("no acceptance-corrected ITL");
        };
        // Tokens emitted after the first (the token-weighted count), not ITL outputs + accepted
        // drafts: those count drafts accepted in a request's last step beyond its last token.
        assert_eq!(
            count,
            (it.tokens_after_first - it.zero_token_first_outputs) as f64
        );
        assert!(
            it.itl_count + it.accepted_tokens > it.tokens_after_first,
            "the run must cut some last outputs, or the old count would pass"
        );
        assert!((sum - it.itl_sum_seconds).abs() <= 1e-9 * it.itl_sum_seconds);
        let Some(DerivedValue::SumCount { sum, count }) =
            derived(&engine, Family::IterationTokensLocalCompute, m, e)
        else {
            panic!("no local-compute iteration tokens");
        };
        assert_eq!(
            (sum, count),
            (it.iteration_tokens_local_sum as f64, it.iterations as f64)
        );
    }
}
