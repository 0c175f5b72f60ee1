//! Does a group's set of input series look like something vLLM exposes? A pure function over the
//! group's role keys, used for the self-metric `vllm_corrector_groups_incomplete`.
//!
//! Every vLLM release from 0.10 to 0.33 (`vllm/v1/metrics/loggers.py`, `PrometheusStatLogger.__init__`)
//! registers these families unconditionally and together, for every engine:
//! `generation_tokens` (counter), `time_to_first_token_seconds`, `iteration_tokens_total`,
//! `request_generation_tokens` and the ITL histogram (`inter_token_latency_seconds` from 0.10.2,
//! `time_per_output_token_seconds` up to 0.14). From 0.11 `request_time_per_output_token_seconds` is
//! registered beside `request_generation_tokens`; with speculative decoding the `spec_decode_num_drafts`
//! and `spec_decode_num_accepted_tokens` counters are registered together
//! (`vllm/v1/spec_decode/metrics.py`). `prometheus_client` prints every histogram child with all its
//! `_bucket{le}` (ending in `+Inf`), `_sum` and `_count`. So a group that holds some of these series
//! but not the rest did not get them from a vLLM scrape: its series were split between corrector
//! instances (remote-write sharding by series, see `docs/DEPLOY.md`, "Scaling out") or filtered by a
//! `write_relabel_configs` that keeps only some `vllm:*` series.
//!
//! The check is structural: it reads only which role keys are present, never values.

use super::classify::{Dim, Input, READ_NAMES, ReadName, Registered, RoleKey, histogram_of};

/// The first reason found why a role set cannot come from any vLLM version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Incomplete {
    /// A histogram (named) has `_bucket` series but no `+Inf` bucket.
    NoInfBucket(&'static str),
    /// A histogram (named) has some of `_bucket`, `_sum`, `_count` but not all three (or, for
    /// the token histogram of which only `le="1"` is read, that bucket without `_count`).
    MissingHistogramPart(&'static str),
    /// A series vLLM always registers with every other one is absent (generation tokens counter,
    /// TTFT `_count`, iteration tokens `_count`, `request_generation_tokens_count`, or any ITL
    /// histogram).
    MissingCoreSeries(Input),
    /// A series (named) without the series vLLM registers it beside (request TPOT without
    /// `request_generation_tokens`).
    WithoutPartner(&'static str),
    /// One of the spec-decode counters (drafts, accepted tokens) without the other.
    SpecDecodeCounterAlone,
}

/// The entries of [`READ_NAMES`] that are parts of the histogram `base`.
fn parts_of(base: &'static str) -> impl Iterator<Item = usize> {
    READ_NAMES
        .iter()
        .enumerate()
        .filter(move |(_, r)| histogram_of(r) == Some(base))
        .map(|(i, _)| i)
}

/// Checks a group's (non-stale) role keys against what [`READ_NAMES`] says vLLM registers
/// together. `Ok(())` for an empty set and for every set some vLLM release exposes; otherwise the
/// first problem found.
///
/// # Errors
/// The [`Incomplete`] reason, in this order: histogram structure (in table order: ITL, old ITL,
/// request TPOT), the token histogram's `le="1"` bucket without its `_count`, a series without its
/// partner, the series every release has, an ITL histogram under either name, spec-decode counters
/// apart.
pub(crate) fn check(keys: impl IntoIterator<Item = RoleKey>) -> Result<(), Incomplete> {
    const N: usize = READ_NAMES.len();
    let (mut present, mut inf, mut any) = ([false; N], [false; N], false);
    for key in keys {
        any = true;
        if let Some(i) = READ_NAMES.iter().position(|r| r.input == key.input) {
            present[i] = true;
            inf[i] |= key.bound() == f64::INFINITY;
        }
    }
    if !any {
        return Ok(());
    }
    let entries = || READ_NAMES.iter().enumerate();
    // A full classic histogram: buckets up to `+Inf`, `_sum` and `_count`.
    for (i, read) in entries().filter(|(_, r)| r.dim == Dim::Le) {
        let Some(base) = histogram_of(read) else {
            continue;
        };
        let some = parts_of(base).any(|j| present[j]);
        if some && !parts_of(base).all(|j| present[j]) {
            return Err(Incomplete::MissingHistogramPart(base));
        }
        if some && !inf[i] {
            return Err(Incomplete::NoInfBucket(base));
        }
    }
    // The `le="1"` bucket may be absent (custom buckets from 0.33: `no_le_1_bound`), `_count` may not.
    for (i, read) in entries().filter(|(_, r)| r.dim == Dim::LeIsOne) {
        let Some(base) = histogram_of(read) else {
            continue;
        };
        if present[i] && !parts_of(base).all(|j| present[j] || READ_NAMES[j].dim == Dim::LeIsOne) {
            return Err(Incomplete::MissingHistogramPart(base));
        }
    }
    let alone = |(i, read): &(usize, &ReadName)| match read.registered {
        Registered::Beside(partner) => present[*i] && !parts_of(partner).any(|j| present[j]),
        _ => false,
    };
    if let Some((_, read)) = entries().find(alone) {
        return Err(Incomplete::WithoutPartner(read.name));
    }
    let is = |read: &ReadName, registered| read.registered == registered;
    if let Some((_, read)) = entries().find(|(i, r)| is(r, Registered::Always) && !present[*i]) {
        return Err(Incomplete::MissingCoreSeries(read.input));
    }
    let itl = || entries().filter(|(_, r)| is(r, Registered::Itl));
    if !itl().any(|(i, _)| present[i])
        && let Some((_, count)) = itl().find(|(_, r)| r.name.ends_with("_count"))
    {
        return Err(Incomplete::MissingCoreSeries(count.input));
    }
    let spec = || entries().filter(|(_, r)| is(r, Registered::SpecDecode));
    if spec().any(|(i, _)| present[i]) && !spec().all(|(i, _)| present[i]) {
        return Err(Incomplete::SpecDecodeCounterAlone);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::{Part, classify};
    use crate::{Engine, EngineConfig, IngestReport};
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
            keys.extend(classify(&s.name, &labels));
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
            let labels: Vec<Label<'_>> = owned
                .iter()
                .map(|(n, v)| Label { name: n, value: v })
                .collect();
            engine.ingest(
                &labels,
                &[Sample {
                    value: s.value,
                    timestamp_ms: snapshot.timestamp_ms,
                }],
                0,
                &mut report,
            );
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
        let (mut engine, mut sim) = (Engine::new(EngineConfig::default()), spec_sim());
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
        let (mut engine, mut sim) = (Engine::new(EngineConfig::default()), spec_sim());
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
                Input::Itl(_)
                    | Input::Tpot(_)
                    | Input::LocalCompute
                    | Input::Accepted
                    | Input::Drafts
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
}
