//! Tests of `completeness.rs`.

use super::*;
use crate::classify::{Part, classify};
use crate::test_support::ingest_series;
use crate::{Engine, IngestReport};
use protocol::{Label, Sample};
use sim::{Profile, SimConfig, Simulator, SpecConfig};

const ITL: &str = "vllm:inter_token_latency_seconds";
const TPOT: &str = "vllm:request_time_per_output_token_seconds";
const GENERATION_TOKENS: &str = "vllm:request_generation_tokens";

fn plain(input: Input) -> RoleKey {
    RoleKey { input, le_bits: 0 }
}

fn bucket(make: fn(Part) -> Input, le: f64) -> RoleKey {
    RoleKey {
        input: make(Part::Bucket),
        le_bits: le.to_bits(),
    }
}

fn histogram(make: fn(Part) -> Input) -> Vec<RoleKey> {
    vec![
        bucket(make, 0.1),
        bucket(make, f64::INFINITY),
        plain(make(Part::Sum)),
        plain(make(Part::Count)),
    ]
}

/// The role set of a vLLM 0.33 engine with spec decoding, written from the table in docs/METRICS.md, "The input series".
fn full() -> Vec<RoleKey> {
    let mut keys = histogram(Input::Itl);
    keys.extend(histogram(Input::Tpot));
    keys.extend(
        [
            Input::GenLe1,
            Input::GenCount,
            Input::GenTotal,
            Input::TtftCount,
            Input::LocalCompute,
            Input::IterCount,
        ]
        .map(plain),
    );
    keys.extend([plain(Input::Accepted), plain(Input::Drafts)]);
    keys
}

fn without(keys: &[RoleKey], drop: impl Fn(&RoleKey) -> bool) -> Vec<RoleKey> {
    keys.iter().copied().filter(|k| !drop(k)).collect()
}

/// The role keys of every series the simulator exposes for `profile` (one engine).
fn simulated(profile: Profile, spec: bool) -> Vec<RoleKey> {
    let mut cfg = SimConfig {
        profile,
        ..SimConfig::default()
    };
    cfg.spec = spec.then_some(SpecConfig {
        num_speculative_tokens: 2,
        acceptance_prob: 0.7,
        no_draft_fraction: 0.0,
    });
    let sim = Simulator::new(cfg).expect("valid simulator config");
    let mut keys = Vec::new();
    for s in sim.snapshot().samples() {
        let labels: Vec<Label<'_>> = s
            .labels
            .iter()
            .map(|(n, v)| Label { name: n, value: v })
            .collect();
        keys.extend(classify(&s.name, crate::DEFAULT_METRIC_PREFIX, &labels));
    }
    keys
}

/// Feeds the simulator's snapshot at `t_s` seconds to `engine`, keeping the series `keep` selects
/// (by their position in the exposition).
fn feed(engine: &mut Engine, sim: &mut Simulator, t_s: f64, keep: impl Fn(usize) -> bool) {
    sim.advance_to(t_s);
    let snapshot = sim.snapshot();
    let mut report = IngestReport::default();
    for (_, s) in snapshot.samples().enumerate().filter(|(i, _)| keep(*i)) {
        let mut owned = s.labels.clone();
        owned.push(("__name__".to_string(), s.name.clone()));
        owned.sort();
        let sample = Sample {
            value: s.value,
            timestamp_ms: snapshot.timestamp_ms,
        };
        ingest_series(engine, &owned, &[sample], 0, &mut report);
    }
}

fn spec_sim() -> Simulator {
    let cfg = SimConfig {
        spec: Some(SpecConfig {
            num_speculative_tokens: 2,
            acceptance_prob: 0.7,
            no_draft_fraction: 0.0,
        }),
        ..SimConfig::default()
    };
    Simulator::new(cfg).expect("valid simulator config")
}

#[test]
fn half_of_a_target_is_reported_after_more_than_one_later_scrape() {
    // Even-numbered series only, as one of two series-sharded instances would get them.
    let (mut engine, mut sim) = (Engine::new(crate::test_support::config()), spec_sim());
    let mut seen = Vec::new();
    for t in [15.0, 30.0, 45.0, 60.0] {
        feed(&mut engine, &mut sim, t, |i| i % 2 == 0);
        seen.push(engine.stats().groups_incomplete);
    }
    // The role set is learned at 15 s; 30 s is one later scrape, 45 s the second: reported.
    assert_eq!(seen, [0, 0, 1, 1]);
}

#[test]
fn a_whole_target_is_never_reported_even_with_one_shard_a_scrape_behind() {
    let (mut engine, mut sim) = (Engine::new(crate::test_support::config()), spec_sim());
    let mut lagging = spec_sim();
    let mut seen = Vec::new();
    for t in [15.0, 30.0, 45.0, 60.0, 75.0] {
        // Shard "even" delivers scrape t, then shard "odd" delivers scrape t − 15 s.
        feed(&mut engine, &mut sim, t, |i| i % 2 == 0);
        seen.push(engine.stats().groups_incomplete);
        feed(&mut engine, &mut lagging, t - 15.0, |i| i % 2 == 1);
        seen.push(engine.stats().groups_incomplete);
    }
    assert_eq!(seen, [0; 10]);
    assert_eq!(engine.stats().groups, 1);
}

#[test]
fn every_simulated_vllm_profile_is_complete() {
    for profile in [
        Profile::V0_10,
        Profile::V0_14,
        Profile::V0_22,
        Profile::V0_33,
    ] {
        for spec in [false, true] {
            let keys = simulated(profile, spec);
            assert!(
                keys.len() > 20,
                "{profile:?}: the simulator exposes the classified series"
            );
            assert_eq!(check(keys), Ok(()), "{profile:?} spec={spec}");
        }
    }
}

#[test]
fn hand_written_full_sets_are_complete() {
    assert_eq!(check(full()), Ok(()));
    assert_eq!(check(Vec::new()), Ok(()), "no role at all is not a problem");
    // vLLM 0.10: old ITL name only, no request TPOT, no by-source prompt tokens, no spec decoding.
    let v010 = without(&full(), |k| {
        matches!(
            k.input,
            Input::Itl(_) | Input::Tpot(_) | Input::LocalCompute | Input::Accepted | Input::Drafts
        )
    });
    let mut v010 = v010;
    v010.extend(histogram(Input::OldItl));
    assert_eq!(check(v010), Ok(()));
    // Custom token buckets without a `1` bound (0.33): withheld as no_le_1_bound, not incomplete.
    assert_eq!(
        check(without(&full(), |k| k.input == Input::GenLe1)),
        Ok(())
    );
}

#[test]
fn broken_histograms_are_incomplete() {
    let no_count = without(&full(), |k| k.input == Input::Itl(Part::Count));
    assert_eq!(check(no_count), Err(Incomplete::MissingHistogramPart(ITL)));
    let no_sum = without(&full(), |k| k.input == Input::Tpot(Part::Sum));
    assert_eq!(check(no_sum), Err(Incomplete::MissingHistogramPart(TPOT)));
    let no_buckets = without(&full(), |k| k.input == Input::Itl(Part::Bucket));
    assert_eq!(
        check(no_buckets),
        Err(Incomplete::MissingHistogramPart(ITL))
    );
    let no_inf = without(&full(), |k| *k == bucket(Input::Tpot, f64::INFINITY));
    assert_eq!(check(no_inf), Err(Incomplete::NoInfBucket(TPOT)));
    let gen_bucket_alone = without(&full(), |k| k.input == Input::GenCount);
    assert_eq!(
        check(gen_bucket_alone),
        Err(Incomplete::MissingHistogramPart(GENERATION_TOKENS))
    );
}

#[test]
fn series_registered_together_must_arrive_together() {
    let no_gen_total = without(&full(), |k| k.input == Input::GenTotal);
    assert_eq!(
        check(no_gen_total),
        Err(Incomplete::MissingCoreSeries(Input::GenTotal))
    );
    let no_ttft = without(&full(), |k| k.input == Input::TtftCount);
    assert_eq!(
        check(no_ttft),
        Err(Incomplete::MissingCoreSeries(Input::TtftCount))
    );
    let no_iterations = without(&full(), |k| k.input == Input::IterCount);
    assert_eq!(
        check(no_iterations),
        Err(Incomplete::MissingCoreSeries(Input::IterCount))
    );
    let no_itl = without(&full(), |k| matches!(k.input, Input::Itl(_)));
    assert_eq!(
        check(no_itl),
        Err(Incomplete::MissingCoreSeries(Input::Itl(Part::Count)))
    );
    let tpot_alone = without(&full(), |k| {
        matches!(k.input, Input::GenCount | Input::GenLe1)
    });
    assert_eq!(
        check(tpot_alone),
        Err(Incomplete::WithoutPartner(
            "vllm:request_time_per_output_token_seconds_bucket"
        ))
    );
    let no_token_histogram = without(&full(), |k| {
        matches!(k.input, Input::GenCount | Input::GenLe1 | Input::Tpot(_))
    });
    assert_eq!(
        check(no_token_histogram),
        Err(Incomplete::MissingCoreSeries(Input::GenCount))
    );
    let accepted_alone = without(&full(), |k| k.input == Input::Drafts);
    assert_eq!(
        check(accepted_alone),
        Err(Incomplete::SpecDecodeCounterAlone)
    );
    let drafts_alone = without(&full(), |k| k.input == Input::Accepted);
    assert_eq!(check(drafts_alone), Err(Incomplete::SpecDecodeCounterAlone));
}

#[test]
fn a_reported_half_target_is_cleared_when_the_other_half_arrives() {
    // The verdict of `completeness::check` is kept per role set (group.rs); a role set that
    // grows must be checked again. Even-numbered series for three scrapes (reported from the
    // third, as above), then the whole target: the role set changed, and the whole set is
    // complete, so nothing is reported from then on, however many scrapes follow.
    let (mut engine, mut sim) = (Engine::new(crate::test_support::config()), spec_sim());
    let mut seen = Vec::new();
    for t in [15.0, 30.0, 45.0] {
        feed(&mut engine, &mut sim, t, |i| i % 2 == 0);
        seen.push(engine.stats().groups_incomplete);
    }
    for t in [60.0, 75.0, 90.0, 105.0] {
        feed(&mut engine, &mut sim, t, |_| true);
        seen.push(engine.stats().groups_incomplete);
    }
    assert_eq!(seen, [0, 0, 1, 0, 0, 0, 0]);
}
