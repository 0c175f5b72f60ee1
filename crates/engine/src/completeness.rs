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

use super::classify::{Input, Part, RoleKey};

/// The first reason found why a role set cannot come from any vLLM version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Incomplete {
    /// A histogram has `_bucket` series but no `+Inf` bucket.
    NoInfBucket(Hist),
    /// A histogram has some of `_bucket`, `_sum`, `_count` but not all three.
    MissingHistogramPart(Hist),
    /// A series vLLM always registers with every other one is absent (generation tokens counter,
    /// TTFT `_count`, iteration tokens `_count`, `request_generation_tokens`, or any ITL histogram).
    MissingCoreSeries(Input),
    /// `request_time_per_output_token_seconds` without `request_generation_tokens` beside it.
    TpotWithoutGenerationTokens,
    /// One of the spec-decode counters (drafts, accepted tokens) without the other.
    SpecDecodeCounterAlone,
}

/// The histograms whose parts the engine classifies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hist {
    /// `vllm:inter_token_latency_seconds`.
    Itl,
    /// `vllm:time_per_output_token_seconds` (old ITL name).
    OldItl,
    /// `vllm:request_time_per_output_token_seconds`.
    Tpot,
    /// `vllm:request_generation_tokens`: only its `le="1"` bucket and `_count` are classified.
    GenerationTokens,
}

/// Which parts of one histogram are present.
#[derive(Debug, Clone, Copy, Default)]
struct Parts {
    buckets: bool,
    inf: bool,
    sum: bool,
    count: bool,
}

impl Parts {
    fn any(self) -> bool {
        self.buckets || self.sum || self.count
    }

    /// A full classic histogram: buckets up to `+Inf`, `_sum` and `_count`.
    fn check(self, hist: Hist) -> Result<(), Incomplete> {
        if !self.any() {
            return Ok(());
        }
        if !(self.buckets && self.sum && self.count) {
            return Err(Incomplete::MissingHistogramPart(hist));
        }
        if !self.inf {
            return Err(Incomplete::NoInfBucket(hist));
        }
        Ok(())
    }

    fn add(&mut self, part: Part, key: RoleKey) {
        match part {
            Part::Bucket => {
                self.buckets = true;
                self.inf |= key.bound() == f64::INFINITY;
            }
            Part::Sum => self.sum = true,
            Part::Count => self.count = true,
        }
    }
}

/// Checks a group's (non-stale) role keys. `Ok(())` for an empty set and for every set some vLLM
/// release exposes; otherwise the first problem found.
///
/// # Errors
/// The [`Incomplete`] reason, in this order: histogram structure (ITL, old ITL, request TPOT, then
/// the token histogram, whose only classified parts are `le="1"` and `_count`), the series every
/// release has, TPOT without the token histogram, spec-decode counters apart.
pub(crate) fn check(keys: impl IntoIterator<Item = RoleKey>) -> Result<(), Incomplete> {
    let (mut itl, mut old_itl, mut tpot) = (Parts::default(), Parts::default(), Parts::default());
    let (mut gen_le1, mut gen_count, mut gen_total, mut ttft_count) = (false, false, false, false);
    let (mut iter_count, mut accepted, mut drafts, mut any) = (false, false, false, false);
    for key in keys {
        any = true;
        match key.input {
            Input::Itl(part) => itl.add(part, key),
            Input::OldItl(part) => old_itl.add(part, key),
            Input::Tpot(part) => tpot.add(part, key),
            Input::GenLe1 => gen_le1 = true,
            Input::GenCount => gen_count = true,
            Input::GenTotal => gen_total = true,
            Input::TtftCount => ttft_count = true,
            Input::LocalCompute => {}
            Input::IterCount => iter_count = true,
            Input::Accepted => accepted = true,
            // Registered with the other spec-decode counters; their pairing is checked on those.
            Input::AcceptedPerPos => {}
            Input::Drafts => drafts = true,
        }
    }
    if !any {
        return Ok(());
    }
    itl.check(Hist::Itl)?;
    old_itl.check(Hist::OldItl)?;
    tpot.check(Hist::Tpot)?;
    // The `le="1"` bucket may be absent (custom buckets from 0.33: `no_le_1_bound`), `_count` may not.
    if gen_le1 && !gen_count {
        return Err(Incomplete::MissingHistogramPart(Hist::GenerationTokens));
    }
    let core = [
        (gen_total, Input::GenTotal),
        (ttft_count, Input::TtftCount),
        (iter_count, Input::IterCount),
        (itl.any() || old_itl.any(), Input::Itl(Part::Count)),
    ];
    if let Some((_, input)) = core.iter().find(|(present, _)| !present) {
        return Err(Incomplete::MissingCoreSeries(*input));
    }
    if tpot.any() && !gen_count {
        return Err(Incomplete::TpotWithoutGenerationTokens);
    }
    if !gen_count {
        return Err(Incomplete::MissingCoreSeries(Input::GenCount));
    }
    if accepted != drafts {
        return Err(Incomplete::SpecDecodeCounterAlone);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::classify;
    use crate::{Engine, EngineConfig, IngestReport};
    use protocol::{Label, Sample};
    use sim::{Profile, SimConfig, Simulator, SpecConfig};

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
        assert_eq!(
            check(no_count),
            Err(Incomplete::MissingHistogramPart(Hist::Itl))
        );
        let no_sum = without(&full(), |k| k.input == Input::Tpot(Part::Sum));
        assert_eq!(
            check(no_sum),
            Err(Incomplete::MissingHistogramPart(Hist::Tpot))
        );
        let no_buckets = without(&full(), |k| k.input == Input::Itl(Part::Bucket));
        assert_eq!(
            check(no_buckets),
            Err(Incomplete::MissingHistogramPart(Hist::Itl))
        );
        let no_inf = without(&full(), |k| *k == bucket(Input::Tpot, f64::INFINITY));
        assert_eq!(check(no_inf), Err(Incomplete::NoInfBucket(Hist::Tpot)));
        let gen_bucket_alone = without(&full(), |k| k.input == Input::GenCount);
        assert_eq!(
            check(gen_bucket_alone),
            Err(Incomplete::MissingHistogramPart(Hist::GenerationTokens))
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
            Err(Incomplete::TpotWithoutGenerationTokens)
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
