//! The release a series set looks like: the simulator's profiles of 0.10, 0.14 (with the hidden
//! old ITL name), 0.22, 0.33 and 0.34 through the engine, and the two combinations no profile
//! has, by their keys.

use super::*;
use crate::test_support::ingest_series;
use crate::{Engine, EngineConfig, IngestReport};
use protocol::Sample;
use sim::{Profile, SimConfig, Simulator};

/// What `/status` says of the one group the simulator's `profile` makes, after three scrapes.
fn of_profile(profile: Profile) -> Option<&'static str> {
    let mut sim = Simulator::new(SimConfig {
        profile,
        seed: 7,
        ..SimConfig::default()
    })
    .expect("simulator config");
    let mut engine = Engine::new(EngineConfig::default());
    let mut report = IngestReport::default();
    for t in [5_000_i64, 10_000, 15_000] {
        sim.advance_to(t as f64 / 1000.0);
        for s in sim.snapshot().samples() {
            let mut labels = vec![("__name__".to_owned(), s.name.clone())];
            labels.extend(s.labels.iter().cloned());
            let sample = Sample {
                value: s.value,
                timestamp_ms: t,
            };
            ingest_series(&mut engine, &labels, &[sample], t, &mut report);
        }
    }
    let groups = engine.snapshot();
    assert_eq!(groups.len(), 1, "{profile:?}: one engine");
    assert!(!groups[0].incomplete, "{profile:?}");
    groups[0].looks_like
}

#[test]
fn each_simulated_release_looks_like_its_own_range() {
    assert_eq!(of_profile(Profile::V0_10), Some("0.10.0–0.10.1"));
    assert_eq!(of_profile(Profile::V0_14), Some("0.11–0.14"));
    for p in [Profile::V0_22, Profile::V0_33, Profile::V0_34] {
        assert_eq!(of_profile(p), Some("0.16 and later"), "{p:?}");
    }
}

fn keys(inputs: &[Input]) -> Vec<RoleKey> {
    inputs
        .iter()
        .map(|&input| RoleKey { input, le_bits: 0 })
        .collect()
}

#[test]
fn the_releases_no_profile_simulates_are_told_apart_by_their_series() {
    let core = [
        Input::GenTotal,
        Input::TtftCount,
        Input::IterCount,
        Input::GenCount,
    ];
    let with = |more: &[Input]| {
        let mut all = core.to_vec();
        all.extend_from_slice(more);
        keys(&all)
    };
    let new = Input::Itl(Part::Count);
    let old = Input::OldItl(Part::Count);
    let tpot = Input::Tpot(Part::Count);
    // 0.10.2 registers both ITL names and no request TPOT.
    assert_eq!(looks_like(with(&[new, old])), Some("0.10.2"));
    // 0.12–0.15 without --show-hidden-metrics-for-version: the new name, request TPOT, no
    // by-source counter.
    assert_eq!(looks_like(with(&[new, tpot])), Some("0.12–0.15"));
    // No release has the old name with the by-source counter, or the new name alone without
    // request TPOT.
    assert_eq!(looks_like(with(&[old, tpot, Input::LocalCompute])), None);
    assert_eq!(looks_like(with(&[new])), None);
    assert_eq!(looks_like(Vec::new()), None);
}
