//! Operator-chosen bucket edges (vLLM 0.34's `--custom-histogram-buckets`, read in
//! `vllm/v1/metrics/buckets.py` and `vllm/config/observability.py`): the corrected histograms
//! follow whatever `le` edges arrive, canonical TPOT stays exact against the simulator's
//! per-request truth on those edges, and a `request_tokens` family without the edge 1 withholds
//! canonical TPOT as `no_le_1_bound` (docs/FAMILIES.md).

use std::collections::BTreeMap;

use super::test_support::ingest_series;
use super::{DerivedValue, Engine, EngineConfig, Family, IngestReport, WithheldReason};
use protocol::Sample;
use sim::{Profile, SimConfig, Simulator, SpecConfig};

/// ITL and request TPOT edges no vLLM default has (seconds).
const ITL_EDGES: [f64; 6] = [0.02, 0.03, 0.045, 0.07, 0.15, 0.6];

fn simulator(request_tokens: &[f64]) -> Simulator {
    let mut overrides = BTreeMap::new();
    overrides.insert("inter_token_latency".to_owned(), ITL_EDGES.to_vec());
    overrides.insert("request_tokens".to_owned(), request_tokens.to_vec());
    overrides.insert("time_to_first_token".to_owned(), vec![0.1, 0.5, 2.0]);
    Simulator::new(SimConfig {
        profile: Profile::V0_34,
        arrival_rate: 6.0,
        output_len: (2, 96),
        max_tokens: 96,
        single_token_fraction: 0.15,
        spec: Some(SpecConfig {
            num_speculative_tokens: 3,
            acceptance_prob: 0.7,
            no_draft_fraction: 0.2,
        }),
        seed: 34,
        bucket_overrides: overrides,
        ..SimConfig::default()
    })
    .expect("simulator config")
}

/// Feeds the simulator's scrape at `t_s` to the engine.
fn scrape(engine: &mut Engine, sim: &mut Simulator, t_s: f64) {
    sim.advance_to(t_s);
    let ts = (t_s * 1000.0) as i64;
    let mut report = IngestReport::default();
    for s in sim.snapshot().samples() {
        let mut labels = vec![("__name__".to_owned(), s.name.clone())];
        labels.extend(s.labels.iter().cloned());
        let sample = Sample {
            value: s.value,
            timestamp_ms: ts,
        };
        ingest_series(engine, &labels, &[sample], ts, &mut report);
    }
    assert_eq!(report.received, report.applied + report.rejected_total());
}

fn engine() -> Engine {
    Engine::new(EngineConfig {
        settle_scrapes: 0,
        ..EngineConfig::default()
    })
}

fn histogram(engine: &Engine, family: Family) -> Vec<(f64, f64)> {
    let mut out = None;
    engine.for_each_derived(family, |_, value| {
        if let DerivedValue::Histogram { buckets, .. } = value {
            out = Some(buckets.clone());
        }
    });
    out.unwrap_or_else(|| panic!("{} served", family.name()))
}

#[test]
fn corrected_histograms_follow_custom_edges_and_canonical_tpot_is_exact_on_them() {
    let mut sim = simulator(&[1.0, 3.0, 10.0, 100.0, 1000.0]);
    let mut engine = engine();
    for t in (5..=60).step_by(5) {
        scrape(&mut engine, &mut sim, f64::from(t));
    }
    let edges: Vec<f64> = ITL_EDGES.iter().copied().chain([f64::INFINITY]).collect();
    let tpot = histogram(&engine, Family::CanonicalTpot);
    assert_eq!(tpot.iter().map(|b| b.0).collect::<Vec<_>>(), edges);
    let truth = sim
        .truth_window(0, sim.now_ns() + 1)
        .total
        .requests
        .canonical_tpot;
    assert!(truth.count > 100, "enough requests: {}", truth.count);
    let expected: Vec<f64> = truth.buckets.iter().map(|b| b.count as f64).collect();
    assert_eq!(tpot.iter().map(|b| b.1).collect::<Vec<_>>(), expected);
    // The other histogram families read ITL's edges.
    let histograms: Vec<Family> = Family::ALL
        .into_iter()
        .filter(|f| f.kind() == super::FamilyKind::Histogram && *f != Family::CanonicalTpot)
        .collect();
    assert!(histograms.contains(&Family::AcceptanceCorrectedItl));
    for family in histograms {
        let bounds: Vec<f64> = histogram(&engine, family).iter().map(|b| b.0).collect();
        assert_eq!(bounds, edges, "{}", family.name());
    }
}

#[test]
fn request_tokens_edges_without_1_withhold_canonical_tpot_as_no_le_1_bound() {
    let mut sim = simulator(&[2.0, 10.0, 100.0, 1000.0]);
    let mut engine = engine();
    for t in (5..=30).step_by(5) {
        scrape(&mut engine, &mut sim, f64::from(t));
    }
    let mut reasons = Vec::new();
    engine.for_each_withheld(Family::CanonicalTpot, |_, reason| reasons.push(reason));
    assert_eq!(reasons, [WithheldReason::NoLeOneBound]);
}
