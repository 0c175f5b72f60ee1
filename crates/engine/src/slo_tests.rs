//! The SLO counters against the simulator's per-request truth (issue 30, "Proof"): every SLI
//! counted exactly on bucket edges, and the true goodput (as `vllm bench serve --goodput` counts
//! it: a request of at most one output token has TPOT 0 and passes) within the bounds at every
//! scrape, for every profile with a request TPOT histogram, with and without speculative
//! decoding, across a vLLM restart (counter reset) and a corrector restart with its state file.
//! The truth is counted here from the simulator's request records, never from the engine.

use super::test_support::{from_lines, ingest_series, to_lines};
use super::{DerivedValue, Engine, EngineConfig, Family, IngestReport};
use crate::slo::{Sli, Slo, SloSet, SloSpec};
use crate::values::CounterMetric;
use protocol::Sample;
use sim::{
    Profile, PromptTokens, RequestRecord, ScriptedRequest, SimConfig, Simulator, SpecConfig,
};

/// An SLO over every group with thresholds `(sli, seconds)`.
fn slo(name: &str, slis: &[(Sli, f64)]) -> Slo {
    Slo::with_thresholds(name, 0.99, slis)
}

/// Three SLOs on vLLM's default edges (TTFT 0.1 s, TPOT 0.05 s, E2EL 5 s; ITL 0.05 s) and one
/// with thresholds between edges (TTFT 0.3 s, TPOT 0.07 s, E2EL 4 s), whose goodput bounds use
/// the edges around them.
fn spec() -> SloSpec {
    SloSpec {
        slos: vec![
            slo("tpot", &[(Sli::Tpot, 0.05)]),
            slo(
                "all",
                &[(Sli::Ttft, 0.1), (Sli::Tpot, 0.05), (Sli::E2el, 5.0)],
            ),
            slo("tokens", &[(Sli::Ttft, 0.5), (Sli::ItlPerToken, 0.05)]),
            slo(
                "between",
                &[(Sli::Ttft, 0.3), (Sli::Tpot, 0.07), (Sli::E2el, 4.0)],
            ),
        ],
    }
}

fn new_engine() -> Engine {
    Engine::new(EngineConfig {
        settle_scrapes: 0,
        slos: SloSet::new(&spec(), |_| None),
        ..EngineConfig::default()
    })
}

fn simulator(profile: Profile, spec_decode: bool, seed: u64) -> Simulator {
    Simulator::new(SimConfig {
        profile,
        arrival_rate: 5.0,
        output_len: (2, 160),
        max_tokens: 160,
        single_token_fraction: 0.15,
        zero_token_fraction: 0.05,
        spec: spec_decode.then_some(SpecConfig {
            num_speculative_tokens: 3,
            acceptance_prob: 0.7,
            no_draft_fraction: 0.2,
        }),
        seed,
        ..SimConfig::default()
    })
    .expect("simulator config")
}

/// Feeds the simulator's scrape at `t_s` (+ `offset_ms` of sender time) to the engine.
fn scrape(engine: &mut Engine, sim: &mut Simulator, t_s: f64, offset_ms: i64) {
    scrape_without(engine, sim, t_s, offset_ms, "");
}

/// [`scrape`] without the series named `dropped` (none when empty), as a keep rule that drops
/// them sends it.
fn scrape_without(
    engine: &mut Engine,
    sim: &mut Simulator,
    t_s: f64,
    offset_ms: i64,
    dropped: &str,
) {
    sim.advance_to(t_s);
    let ts = (t_s * 1000.0) as i64 + offset_ms;
    let mut report = IngestReport::default();
    for s in sim.snapshot().samples().filter(|s| s.name != dropped) {
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

/// The SLO counters of the only group: `(metric, slo, sli or bound) -> value`.
fn counters(engine: &Engine) -> Vec<(CounterMetric, String, String, f64)> {
    let mut out = Vec::new();
    engine.for_each_derived(Family::SloCounters, |_, value| {
        let DerivedValue::Counters { rows, values } = value else {
            panic!("{value:?}");
        };
        for (row, v) in rows.iter().zip(values) {
            let label = |n: &str| {
                row.labels
                    .iter()
                    .find(|(k, _)| k == n)
                    .map_or(String::new(), |(_, v)| v.clone())
            };
            let second = if row.metric == CounterMetric::GoodputRequests {
                label("bound")
            } else {
                label("sli")
            };
            out.push((row.metric, label("slo"), second, *v));
        }
    });
    out
}

fn get(c: &[(CounterMetric, String, String, f64)], m: CounterMetric, slo: &str, x: &str) -> f64 {
    c.iter()
        .find(|(metric, s, second, _)| *metric == m && s == slo && second == x)
        .map(|e| e.3)
        .unwrap_or_else(|| panic!("no {m:?} {slo} {x} in {c:?}"))
}

/// True when `r` meets every threshold of `slo` as `vllm bench serve --goodput` counts it.
fn good(slo: &Slo, r: &RequestRecord) -> bool {
    slo.slis.iter().all(|t| match t.sli {
        Sli::Ttft => r.ttft_s().is_some_and(|v| v <= t.threshold_seconds),
        Sli::Tpot => r.tpot_s() <= t.threshold_seconds,
        Sli::E2el => r.e2el_s() <= t.threshold_seconds,
        Sli::ItlPerToken => true,
    })
}

/// Per SLO (goodput only): the good requests among `records` finished by `upto_ns`.
fn good_by(records: &[RequestRecord], upto_ns: u64) -> Vec<f64> {
    spec()
        .slos
        .iter()
        .map(|s| {
            records
                .iter()
                .filter(|r| r.finish_ns() <= upto_ns && good(s, r))
                .count() as f64
        })
        .collect()
}

/// Checks the bounds of every SLO against `truth` (good requests since the baseline).
fn check_bounds(engine: &Engine, truth: &[f64], what: &str) {
    let c = counters(engine);
    for (slo, t) in spec().slos.iter().zip(truth) {
        let lower = get(&c, CounterMetric::GoodputRequests, &slo.name, "lower");
        let upper = get(&c, CounterMetric::GoodputRequests, &slo.name, "upper");
        assert!(
            lower <= *t && *t <= upper,
            "{what}: SLO {}: {lower} <= {t} <= {upper}",
            slo.name
        );
    }
}

#[test]
fn the_true_goodput_lies_within_the_bounds_for_every_profile_with_and_without_drafts() {
    let mut widths = Vec::new();
    for profile in [
        Profile::V0_14,
        Profile::V0_22,
        Profile::V0_33,
        Profile::V0_34,
    ] {
        for spec_decode in [false, true] {
            for seed in [1, 2] {
                let what = format!("{profile:?} drafts {spec_decode} seed {seed}");
                let mut sim = simulator(profile, spec_decode, seed);
                let mut engine = new_engine();
                // The corrector starts with requests already in flight.
                let start = 20.0;
                scrape(&mut engine, &mut sim, start, 0);
                let base = good_by(sim.truth().requests(), sim.now_ns());
                let mut t = start;
                while t < 80.0 {
                    t += 1.0 + (t * 7.0) % 2.0;
                    scrape(&mut engine, &mut sim, t, 0);
                    let now = good_by(sim.truth().requests(), sim.now_ns());
                    let truth: Vec<f64> = now.iter().zip(&base).map(|(n, b)| n - b).collect();
                    check_bounds(&engine, &truth, &format!("{what} at {t}s"));
                }
                let c = counters(&engine);
                let width = get(&c, CounterMetric::GoodputRequests, "all", "upper")
                    - get(&c, CounterMetric::GoodputRequests, "all", "lower");
                let finished = get(&c, CounterMetric::SloFinishedRequests, "all", "");
                let all = &spec().slos[1];
                let done: Vec<&RequestRecord> = sim
                    .truth()
                    .requests()
                    .iter()
                    .filter(|r| r.finish_ns() > (start * 1e9) as u64)
                    .collect();
                let bad: Vec<f64> = all
                    .slis
                    .iter()
                    .map(|t| {
                        done.iter()
                            .filter(|r| !good(&slo("x", &[(t.sli, t.threshold_seconds)]), r))
                            .count() as f64
                    })
                    .collect();
                let frechet = bad.iter().sum::<f64>() - bad.iter().copied().fold(0.0, f64::max);
                eprintln!(
                    "WIDTH {what} width {width} finished {finished} done {} bad {bad:?} frechet {frechet}",
                    done.len()
                );
                widths.push(width / finished);
            }
        }
    }
    // The band is narrow where the stream allows it: at most a few percent of the requests on
    // average over the runs (docs/GOODPUT.md, "When the band is narrow").
    let mean = widths.iter().sum::<f64>() / widths.len() as f64;
    assert!(
        mean < 0.1,
        "mean band width {mean} of the finished: {widths:?}"
    );
}

/// A finite trace: 300 requests arriving over 25 s (a queue builds up) with 0 to 160 output tokens, so that by 150 s
/// every request has finished and the TTFT observations are those of the finished requests.
fn scripted() -> Simulator {
    let script = (0..300u32)
        .map(|i| {
            let n = match i % 20 {
                0 => 0,
                1 | 2 => 1,
                k => (i * 37 + k * 11) % 159 + 2,
            };
            ScriptedRequest {
                arrival_s: f64::from(i) * 25.0 / 300.0,
                model: 0,
                engine: 0,
                prompt: PromptTokens {
                    total: 64 + i % 200,
                    local_compute: 64 + i % 200,
                    local_cache_hit: 0,
                    external_kv_transfer: 0,
                },
                n,
                finish_reason: None,
                decode_steps: Vec::new(),
            }
        })
        .collect();
    let cfg = SimConfig {
        profile: Profile::V0_33,
        arrival_rate: 0.0,
        output_len: (2, 160),
        max_tokens: 160,
        // A slower engine with fewer seats, so every threshold splits the requests.
        step_per_token_s: 0.0006,
        max_num_seqs: 32,
        ..SimConfig::default()
    };
    Simulator::with_script(cfg, script).expect("script")
}

#[test]
fn every_sli_on_an_edge_is_counted_exactly_and_one_between_edges_is_not_counted() {
    let mut sim = scripted();
    let mut engine = new_engine();
    // From the first arrival: the SLI rows count from the first frame, before any request.
    for t in (0..=150).step_by(2) {
        scrape(&mut engine, &mut sim, f64::from(t), 0);
    }
    let c = counters(&engine);
    let records = sim.truth().requests();
    // Finish-time SLIs over the finished requests: canonical TPOT leaves out n <= 1.
    let long: Vec<&RequestRecord> = records.iter().filter(|r| r.n >= 2).collect();
    let splits = |n: f64, total: f64| n > 0.05 * total && n < 0.95 * total;
    let events = |sli| get(&c, CounterMetric::SloEvents, "all", sli);
    let good_events = |sli| get(&c, CounterMetric::SloGoodEvents, "all", sli);
    assert_eq!(events("tpot"), long.len() as f64);
    let tpot_good = long.iter().filter(|r| r.tpot_s() <= 0.05).count() as f64;
    assert_eq!(good_events("tpot"), tpot_good);
    assert_eq!(events("e2el"), records.len() as f64);
    let e2el_good = records.iter().filter(|r| r.e2el_s() <= 5.0).count() as f64;
    assert_eq!(good_events("e2el"), e2el_good);
    assert_eq!(records.len(), 300, "every request finished");
    // TTFT counts every first output: here all of them are the finished requests'.
    let ttft: Vec<f64> = records.iter().filter_map(RequestRecord::ttft_s).collect();
    assert_eq!(events("ttft"), ttft.len() as f64);
    let ttft_good = ttft.iter().filter(|v| **v <= 0.1).count() as f64;
    assert_eq!(good_events("ttft"), ttft_good);
    assert!(
        splits(ttft_good, ttft.len() as f64),
        "{ttft_good} of {}",
        ttft.len()
    );
    assert!(
        splits(tpot_good, long.len() as f64),
        "{tpot_good} of {}",
        long.len()
    );
    assert!(splits(e2el_good, records.len() as f64));
    // The SLO with thresholds between edges counts no SLI, and says why.
    assert!(
        !c.iter()
            .any(|(m, s, _, _)| s == "between" && *m == CounterMetric::SloEvents),
        "{c:?}"
    );
    let notes = engine.snapshot()[0].slo_notes.clone().expect("notes");
    let between: Vec<_> = notes.iter().filter(|n| n.slo == "between").collect();
    assert_eq!(
        between.iter().map(|n| n.sli).collect::<Vec<_>>(),
        [Sli::Ttft, Sli::Tpot, Sli::E2el]
    );
    assert!(
        between[1]
            .detail
            .contains("nearest: 0.05 below, 0.075 above")
            && between[1].detail.contains("\"inter_token_latency\""),
        "{}",
        between[1].detail
    );
    assert!(between[2].detail.contains("nearest: 2.5 below, 5 above"));
}

#[test]
fn itl_per_token_counts_the_acceptance_corrected_distribution() {
    let mut sim = simulator(Profile::V0_33, false, 4);
    let mut engine = new_engine();
    // The acceptance-corrected histogram's `_count` and its bucket at 0.05 s.
    let served = |engine: &Engine| {
        let mut acceptance = None;
        engine.for_each_derived(Family::AcceptanceCorrectedItl, |_, v| {
            acceptance = Some(v.clone())
        });
        let Some(DerivedValue::Histogram { buckets, count, .. }) = acceptance else {
            panic!("acceptance-corrected ITL served");
        };
        let at = buckets.iter().find(|(le, _)| *le == 0.05).expect("edge").1;
        (count, at)
    };
    scrape(&mut engine, &mut sim, 2.0, 0);
    let (count0, at0) = served(&engine);
    for t in (4..=40).step_by(2) {
        scrape(&mut engine, &mut sim, f64::from(t), 0);
    }
    let c = counters(&engine);
    let (count, at) = served(&engine);
    // Without drafts one output is one token: the ITL per token is vLLM's ITL histogram, whose
    // `_count` is the tokens after the first of every request; the rows count from the first
    // frame.
    assert!(count0 > 0.0, "tokens before the first frame, not counted");
    assert_eq!(
        get(&c, CounterMetric::SloEvents, "tokens", "itl_per_token"),
        count - count0
    );
    assert_eq!(
        get(&c, CounterMetric::SloGoodEvents, "tokens", "itl_per_token"),
        at - at0
    );
    assert!(at - at0 > 0.0 && at - at0 < count - count0);
}

#[test]
fn the_bounds_hold_across_a_vllm_restart_and_a_corrector_restart_with_its_state() {
    for spec_decode in [false, true] {
        let mut sim = simulator(Profile::V0_33, spec_decode, 11);
        let mut engine = new_engine();
        scrape(&mut engine, &mut sim, 10.0, 0);
        let base = good_by(sim.truth().requests(), sim.now_ns());
        let mut last = counters(&engine);
        let mut step =
            |engine: &mut Engine, sim: &mut Simulator, t: f64, offset, earlier: &[f64]| {
                scrape(engine, sim, t, offset);
                let now = good_by(sim.truth().requests(), sim.now_ns());
                let truth: Vec<f64> = (0..now.len())
                    .map(|i| now[i] + earlier[i] - base[i])
                    .collect();
                check_bounds(engine, &truth, &format!("drafts {spec_decode} at {t}s"));
                let c = counters(engine);
                for (m, s, x, v) in &c {
                    if matches!(
                        m,
                        CounterMetric::GoodputRequests | CounterMetric::SloFinishedRequests
                    ) {
                        let before = get(&last, *m, s, x);
                        assert!(*v >= before, "{m:?} {s} {x} fell: {before} -> {v}");
                    }
                }
                last = c;
            };
        let zero = vec![0.0; spec().slos.len()];
        for t in 11..=30 {
            step(&mut engine, &mut sim, f64::from(t), 0, &zero);
        }
        // The corrector restarts with its state file.
        let saved = to_lines(&engine);
        let mut engine2 = new_engine();
        let restored = from_lines(&mut engine2, &saved, 30_000).expect("restores");
        assert_eq!(restored, 1);
        for t in 31..=45 {
            step(&mut engine2, &mut sim, f64::from(t), 0, &zero);
        }
        // vLLM restarts: a new process, counters from 0, its own requests; the requests in
        // flight at the restart never finish. Sender time goes on after 45 s.
        let earlier = good_by(sim.truth().requests(), sim.now_ns());
        let mut sim2 = simulator(Profile::V0_33, spec_decode, 12);
        for t in 1..=30 {
            step(&mut engine2, &mut sim2, f64::from(t), 45_000, &earlier);
        }
        assert!(engine2.stats().counter_resets >= 1);
    }
}

#[test]
fn an_sli_between_edges_is_reported_once_at_the_next_scrape_not_while_its_buckets_arrive() {
    use crate::observe::EngineEvent;
    let spec = SloSpec {
        slos: vec![slo("chat", &[(Sli::Tpot, 0.07)])],
    };
    let mut engine = Engine::new(EngineConfig {
        settle_scrapes: 0,
        slos: SloSet::new(&spec, |_| None),
        ..EngineConfig::default()
    });
    let mut sim = simulator(Profile::V0_33, false, 3);
    let mut notes = Vec::new();
    let mut first_complete_at = None;
    for (k, t) in [5.0, 10.0, 15.0].into_iter().enumerate() {
        sim.advance_to(t);
        let ts = (t * 1000.0) as i64;
        // One series per request, the request TPOT histogram's finite buckets last (after its
        // `+Inf`, `_sum` and `_count`), as remote write's shards may send them.
        let snapshot = sim.snapshot();
        let mut samples: Vec<_> = snapshot.samples().collect();
        let finite_tpot_bucket = |s: &&sim::SnapshotSample| {
            s.name == "vllm:request_time_per_output_token_seconds_bucket"
                && s.labels.iter().any(|(n, v)| n == "le" && v != "+Inf")
        };
        samples.sort_by_key(|s| finite_tpot_bucket(s));
        for (i, s) in samples.into_iter().enumerate() {
            let mut labels = vec![("__name__".to_owned(), s.name.clone())];
            labels.extend(s.labels.iter().cloned());
            let sample = Sample {
                value: s.value,
                timestamp_ms: ts,
            };
            ingest_series(
                &mut engine,
                &labels,
                &[sample],
                ts,
                &mut IngestReport::default(),
            );
            for event in engine.take_events() {
                match event {
                    EngineEvent::FirstCompleteScrape { .. } => first_complete_at = Some((k, i)),
                    EngineEvent::SloNotes { notes: n, .. } => notes.push(((k, i), n)),
                    _ => {}
                }
            }
        }
    }
    let first = first_complete_at.expect("a first complete scrape");
    assert_eq!(notes.len(), 1, "{notes:?}");
    let (at, n) = &notes[0];
    assert!(
        *at >= first,
        "reported at {at:?}, first complete scrape at {first:?}"
    );
    assert_eq!(n.len(), 1);
    assert!(
        n[0].detail.contains("nearest: 0.05 below, 0.075 above"),
        "{}",
        n[0].detail
    );
}

#[test]
fn a_reload_that_changes_a_threshold_never_lowers_the_sli_rows() {
    let mut sim = scripted();
    let mut engine = new_engine();
    let tpot_rows = |engine: &Engine| {
        let c = counters(engine);
        (
            get(&c, CounterMetric::SloEvents, "tpot", "tpot"),
            get(&c, CounterMetric::SloGoodEvents, "tpot", "tpot"),
        )
    };
    for t in (0..=40).step_by(2) {
        scrape(&mut engine, &mut sim, f64::from(t), 0);
    }
    let before = tpot_rows(&engine);
    // The reload moves the `tpot` SLO's threshold from the 0.05 s edge to the 0.025 s one.
    let mut reloaded = spec();
    reloaded.slos[0].slis[0].threshold_seconds = 0.025;
    let mut config = engine.config().clone();
    config.slos = SloSet::new(&reloaded, |_| None);
    engine.set_config(config);
    let mut last = before;
    for t in (42..=150).step_by(2) {
        scrape(&mut engine, &mut sim, f64::from(t), 0);
        let now = tpot_rows(&engine);
        assert!(
            now.0 >= last.0 && now.1 >= last.1,
            "at {t} s: {last:?} -> {now:?}"
        );
        last = now;
    }
    // The reload re-plans the group, which evaluates its newest frame (40 s) again under the new
    // threshold: that step compares buckets of two thresholds and adds nothing. Every interval
    // from 40 s adds its requests of two or more tokens, good at the new threshold.
    let records = sim.truth().requests();
    let after: Vec<&RequestRecord> = records
        .iter()
        .filter(|r| r.n >= 2 && r.finish_ns() > 40_000_000_000)
        .collect();
    let good = after.iter().filter(|r| r.tpot_s() <= 0.025).count() as f64;
    assert!(
        good > 0.0 && good < after.len() as f64,
        "{good} of {}",
        after.len()
    );
    assert_eq!(last, (before.0 + after.len() as f64, before.1 + good));
}

#[test]
fn a_reload_whose_match_no_longer_covers_a_group_removes_its_slo_rows() {
    let mut sim = scripted();
    let mut engine = new_engine();
    for t in (0..=20).step_by(2) {
        scrape(&mut engine, &mut sim, f64::from(t), 0);
    }
    assert!(
        get(&counters(&engine), CounterMetric::SloEvents, "tpot", "tpot") > 0.0,
        "the SLO counts before the reload"
    );
    let slo_status = |engine: &Engine| {
        let groups = engine.snapshot();
        assert_eq!(groups.len(), 1);
        groups[0]
            .families
            .iter()
            .find(|f| f.family == Family::SloCounters)
            .unwrap()
            .withheld
    };
    assert_eq!(slo_status(&engine), None);
    // Every SLO now covers only a model the group is not.
    let mut narrowed = spec();
    for slo in &mut narrowed.slos {
        slo.matchers = vec![crate::slo::LabelMatch {
            label: "model_name".into(),
            regex: "zzz".into(),
        }];
    }
    let mut config = engine.config().clone();
    config.slos = SloSet::new(&narrowed, |_| Some(std::sync::Arc::new(|_: &[_]| false)));
    engine.set_config(config);
    for t in [22.0, 24.0] {
        scrape(&mut engine, &mut sim, t, 0);
        assert!(
            counters(&engine).is_empty(),
            "at {t} s: {:?}",
            counters(&engine)
        );
        assert_eq!(slo_status(&engine), Some(crate::WithheldReason::NoSlo));
    }
}

#[test]
fn an_sli_whose_input_the_pipeline_drops_leaves_the_other_slis_counting() {
    let mut sim = scripted();
    let mut engine = new_engine();
    // The shipped keep rule drops the TTFT buckets: the `all` SLO's TTFT has no input.
    for t in (0..=150).step_by(2) {
        let dropped = "vllm:time_to_first_token_seconds_bucket";
        scrape_without(&mut engine, &mut sim, f64::from(t), 0, dropped);
    }
    let c = counters(&engine);
    let records = sim.truth().requests();
    assert_eq!(records.len(), 300, "every request finished");
    let long: Vec<&RequestRecord> = records.iter().filter(|r| r.n >= 2).collect();
    let row = |m, sli| get(&c, m, "all", sli);
    assert_eq!(row(CounterMetric::SloEvents, "tpot"), long.len() as f64);
    let tpot_good = long.iter().filter(|r| r.tpot_s() <= 0.05).count() as f64;
    assert_eq!(row(CounterMetric::SloGoodEvents, "tpot"), tpot_good);
    assert_eq!(row(CounterMetric::SloEvents, "e2el"), records.len() as f64);
    let e2el_good = records.iter().filter(|r| r.e2el_s() <= 5.0).count() as f64;
    assert_eq!(row(CounterMetric::SloGoodEvents, "e2el"), e2el_good);
    assert!(
        !c.iter().any(|(m, slo, sli, _)| slo == "all"
            && sli == "ttft"
            && *m == CounterMetric::SloEvents),
        "{c:?}"
    );
    let notes = engine.snapshot()[0].slo_notes.clone().expect("notes");
    let ttft = notes
        .iter()
        .find(|n| n.slo == "all" && n.sli == Sli::Ttft)
        .expect("a note for the TTFT SLI");
    assert_eq!(ttft.reason, crate::slo::SliNoteReason::Incomplete);
}

#[test]
fn the_groups_each_slo_covers_are_counted_so_a_match_that_selects_none_shows() {
    let matching = |label: &str, regex: &str| {
        let (label, regex) = (label.to_owned(), regex.to_owned());
        move |labels: &[(String, String)]| labels.iter().any(|(n, v)| *n == label && *v == regex)
    };
    let mut spec = spec();
    spec.slos.truncate(3);
    // As the service builds a set: each SLO's matcher follows its `match:`.
    let set = |spec: &SloSpec, typo: &'static str| {
        let mut spec = spec.clone();
        spec.slos[1].matchers = vec![crate::slo::LabelMatch {
            label: typo.into(),
            regex: "0".into(),
        }];
        let spec = &spec;
        let zero = matching("engine", "0");
        let typo = matching(typo, "0");
        SloSet::new(spec, |slo| match slo.name.as_str() {
            "tpot" => Some(std::sync::Arc::new(zero.clone())),
            "all" => Some(std::sync::Arc::new(typo.clone())),
            _ => None,
        })
    };
    let mut engine = Engine::new(EngineConfig {
        slos: set(&spec, "enigne"),
        ..EngineConfig::default()
    });
    let mut report = IngestReport::default();
    for engine_label in ["0", "1"] {
        let labels = [
            ("__name__", "vllm:generation_tokens_total"),
            ("engine", engine_label),
        ];
        let sample = Sample {
            value: 1.0,
            timestamp_ms: 1_000,
        };
        ingest_series(&mut engine, &labels, &[sample], 1_000, &mut report);
    }
    assert_eq!(report.applied, 2);
    let counted = |engine: &Engine| engine.stats().slo_groups;
    let want = |n: [usize; 3]| {
        ["tpot", "all", "tokens"]
            .into_iter()
            .zip(n)
            .map(|(s, n)| (s.to_owned(), n))
            .collect::<Vec<_>>()
    };
    // `all` matches a label no group has: it covers none.
    assert_eq!(counted(&engine), want([1, 0, 2]));
    // A reload that fixes the typo covers engine "0".
    let mut config = engine.config().clone();
    config.slos = set(&spec, "engine");
    engine.set_config(config);
    assert_eq!(counted(&engine), want([1, 1, 2]));
}
