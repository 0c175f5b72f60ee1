//! Engine-level tests: grouping, the frame join under shuffled arrival, staleness, idle timeout,
//! counter resets and the accounting invariant. Expected numbers are worked by hand in comments.

use rand::SeedableRng;
use rand::seq::SliceRandom;

use super::*;
use protocol::{Label, STALE_NAN_BITS, Sample};

/// One raw series: labels (unsorted is fine, sorted here) and a value.
type Raw = (Vec<(&'static str, String)>, f64);

fn series(name: &'static str, engine: &str, extra: &[(&'static str, &str)], value: f64) -> Raw {
    let mut labels = vec![
        ("__name__", name.to_string()),
        ("engine", engine.to_string()),
        ("model_name", "m".to_string()),
    ];
    labels.extend(extra.iter().map(|(n, v)| (*n, v.to_string())));
    labels.sort();
    (labels, value)
}

fn hist(
    out: &mut Vec<Raw>,
    base: &'static str,
    engine: &str,
    bounds: &[&str],
    cumulative: &[f64],
    sum: f64,
) {
    let (b, s, c): (&'static str, &'static str, &'static str) = match base {
        "itl" => (
            "vllm:inter_token_latency_seconds_bucket",
            "vllm:inter_token_latency_seconds_sum",
            "vllm:inter_token_latency_seconds_count",
        ),
        "old" => (
            "vllm:time_per_output_token_seconds_bucket",
            "vllm:time_per_output_token_seconds_sum",
            "vllm:time_per_output_token_seconds_count",
        ),
        _ => (
            "vllm:request_time_per_output_token_seconds_bucket",
            "vllm:request_time_per_output_token_seconds_sum",
            "vllm:request_time_per_output_token_seconds_count",
        ),
    };
    for (le, v) in bounds.iter().zip(cumulative) {
        out.push(series(b, engine, &[("le", le)], *v));
    }
    out.push(series(s, engine, &[], sum));
    out.push(series(c, engine, &[], *cumulative.last().unwrap()));
}

/// A vLLM 0.33-shaped scrape of engine `e`, scaled by `k` (k = 1 at t1, 2 at t2).
///
/// ITL (bounds 0.025, 0.05, 0.1, +Inf): cumulative 0, 10k, 40k, 40k; Σ 2.4k s.
/// TPOT (bounds 0.01, 0.05, +Inf): cumulative 3k, 9k, 10k; Σ 0.42k. gen_tokens{le="1.0"} = 3k.
/// TTFT count 40k, local prompt tokens 300k, iterations 250k. With spec decoding 40k accepted, so
/// generation tokens = 40k first outputs + 40k ITL outputs + 40k accepted = 120k; without, 80k.
fn scrape(e: &str, k: f64, spec: bool) -> Vec<Raw> {
    let mut out = Vec::new();
    hist(
        &mut out,
        "itl",
        e,
        &["0.025", "0.05", "0.1", "+Inf"],
        &[0.0, 10.0 * k, 40.0 * k, 40.0 * k],
        2.4 * k,
    );
    hist(
        &mut out,
        "tpot",
        e,
        &["0.01", "0.05", "+Inf"],
        &[3.0 * k, 9.0 * k, 10.0 * k],
        0.42 * k,
    );
    out.push(series(
        "vllm:request_generation_tokens_bucket",
        e,
        &[("le", "1.0")],
        3.0 * k,
    ));
    out.push(series(
        "vllm:request_generation_tokens_bucket",
        e,
        &[("le", "2.0")],
        5.0 * k,
    ));
    out.push(series(
        "vllm:request_generation_tokens_count",
        e,
        &[],
        10.0 * k,
    ));
    out.push(series(
        "vllm:generation_tokens_total",
        e,
        &[],
        if spec { 120.0 * k } else { 80.0 * k },
    ));
    out.push(series("vllm:generation_tokens_created", e, &[], 1.7e9));
    out.push(series(
        "vllm:time_to_first_token_seconds_count",
        e,
        &[],
        40.0 * k,
    ));
    out.push(series(
        "vllm:prompt_tokens_by_source_total",
        e,
        &[("source", "local_compute")],
        300.0 * k,
    ));
    out.push(series(
        "vllm:prompt_tokens_by_source_total",
        e,
        &[("source", "local_cache_hit")],
        700.0 * k,
    ));
    out.push(series(
        "vllm:iteration_tokens_total_count",
        e,
        &[],
        250.0 * k,
    ));
    out.push(series("vllm:num_requests_running", e, &[], 4.0));
    if spec {
        out.push(series(
            "vllm:spec_decode_num_accepted_tokens_total",
            e,
            &[],
            40.0 * k,
        ));
        out.push(series(
            "vllm:spec_decode_num_drafts_total",
            e,
            &[],
            40.0 * k,
        ));
        // One draft per output, always accepted: 40k drafts reached position 0 (k = 1 draft).
        out.push(series(
            "vllm:spec_decode_num_accepted_tokens_per_pos_total",
            e,
            &[("position", "0")],
            40.0 * k,
        ));
    }
    out
}

fn feed(engine: &mut Engine, raw: &[(Raw, i64)], report: &mut IngestReport) {
    for ((labels, value), ts) in raw {
        let labels: Vec<Label<'_>> = labels
            .iter()
            .map(|(n, v)| Label { name: n, value: v })
            .collect();
        engine.ingest(
            &labels,
            &[Sample {
                value: *value,
                timestamp_ms: *ts,
            }],
            0,
            report,
        );
    }
}

/// Every derived value: family, group labels, value.
type Outputs = Vec<(Family, Vec<(String, String)>, DerivedValue)>;

fn outputs(engine: &Engine) -> Outputs {
    let mut out = Vec::new();
    for family in Family::ALL {
        engine.for_each_derived(family, |labels, value| {
            out.push((family, labels.to_vec(), value.clone()))
        });
    }
    out
}

fn two_scrapes() -> Vec<(Raw, i64)> {
    let mut all = Vec::new();
    for (ts, k) in [(1_000, 1.0), (16_000, 2.0)] {
        for e in ["0", "1"] {
            all.extend(scrape(e, k, e == "0").into_iter().map(|r| (r, ts)));
        }
    }
    all
}

fn value_of(out: &Outputs, family: Family, engine: &str) -> DerivedValue {
    out.iter()
        .find(|(f, l, _)| *f == family && l.iter().any(|(n, v)| n == "engine" && v == engine))
        .unwrap()
        .2
        .clone()
}

#[test]
fn hand_computed_values_after_two_scrapes() {
    let mut engine = Engine::new(EngineConfig::default());
    let mut report = IngestReport::default();
    feed(&mut engine, &two_scrapes(), &mut report);
    let out = outputs(&engine);
    // t2 (k = 2): TPOT buckets 6,18,20 minus tokens{le=1} 6 -> 0,12,14; Σ 0.84; count 20 - 6 = 14.
    assert_eq!(
        value_of(&out, Family::CanonicalTpot, "0"),
        DerivedValue::Histogram {
            buckets: vec![(0.01, 0.0), (0.05, 12.0), (f64::INFINITY, 14.0)],
            sum: 0.84,
            count: 14.0
        }
    );
    // Σ ITL 4.8 s over 160 - 80 = 80 tokens.
    assert_eq!(
        value_of(&out, Family::TokenWeightedItl, "1"),
        DerivedValue::SumCount {
            sum: 4.8,
            count: 80.0
        }
    );
    // 600 local + 240 generated over 500 iterations.
    assert_eq!(
        value_of(&out, Family::IterationTokensLocalCompute, "0"),
        DerivedValue::SumCount {
            sum: 840.0,
            count: 500.0
        }
    );
    // Engine 0 has spec decoding: both intervals have ΔN = 40 outputs carrying Δ(generation − TTFT)
    // = 120 − 40 = 80 tokens, so w = 2 each time.
    // Raw ITL deltas per interval at 0.025, 0.05, 0.1: 0, 10, 40. Per-token bucket at B = 2·F(2B):
    //   0.025 -> 2·F(0.05) = 20;  0.05 -> 2·F(0.1) = 80;  0.1 -> 2·F(0.2) = 80;  +Inf -> 80.
    // Two intervals: 40, 160, 160, 160. Exact: Σ 4.8 s, count 240 − 80 = 160 tokens.
    assert_eq!(
        value_of(&out, Family::AcceptanceCorrectedItl, "0"),
        DerivedValue::Histogram {
            buckets: vec![
                (0.025, 40.0),
                (0.05, 160.0),
                (0.1, 160.0),
                (f64::INFINITY, 160.0)
            ],
            sum: 4.8,
            count: 160.0
        }
    );
    // Engine 1 has none (160 − 80 = 80 tokens for 80 outputs, w = 1): its raw ITL histogram at t2.
    assert_eq!(
        value_of(&out, Family::AcceptanceCorrectedItl, "1"),
        DerivedValue::Histogram {
            buckets: vec![
                (0.025, 0.0),
                (0.05, 20.0),
                (0.1, 80.0),
                (f64::INFINITY, 80.0)
            ],
            sum: 4.8,
            count: 80.0
        }
    );
    // Accounting: per engine and scrape, the tokens bucket le=2.0, _created, by-source cache hit and
    // running series are unused; drafts are read by the completeness check, per-pos by the
    // acceptance-corrected buckets. 4 per engine => 4 * 2 * 2 = 16 unused samples.
    let total = two_scrapes().len() as u64;
    assert_eq!(report.received, total);
    assert_eq!(report.rejected[RejectReason::UnusedSeries.index()], 16);
    assert_eq!(report.applied + report.rejected_total(), report.received);
    assert_eq!(engine.stats().groups, 2);
}

#[test]
fn shuffled_split_arrival_gives_the_same_output_as_in_order_arrival() {
    let ordered = two_scrapes();
    let mut reference = Engine::new(EngineConfig::default());
    feed(&mut reference, &ordered, &mut IngestReport::default());
    let want = outputs(&reference);
    assert_eq!(want.len(), 8);
    for seed in 0..50u64 {
        // Shuffle all samples, then restore per-series order (Prometheus keeps one series in order):
        // t1 and t2 of different series interleave freely.
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut shuffled = ordered.clone();
        shuffled.shuffle(&mut rng);
        let mut seen = std::collections::HashSet::new();
        let shuffled: Vec<_> = shuffled
            .iter()
            .map(|((labels, _), _)| {
                let first = seen.insert(labels.clone());
                ordered
                    .iter()
                    .filter(|((l, _), _)| l == labels)
                    .nth(usize::from(!first))
                    .unwrap()
                    .clone()
            })
            .collect();
        let mut engine = Engine::new(EngineConfig::default());
        feed(&mut engine, &shuffled, &mut IngestReport::default());
        assert_eq!(outputs(&engine), want, "seed {seed}");
    }
}

#[test]
fn duplicates_and_out_of_order_samples_are_counted_not_applied() {
    let mut engine = Engine::new(EngineConfig::default());
    let mut report = IngestReport::default();
    let tokens = series("vllm:generation_tokens_total", "0", &[], 10.0);
    feed(
        &mut engine,
        &[
            (tokens.clone(), 2_000),
            (tokens.clone(), 2_000),
            (tokens.clone(), 1_000),
            (tokens, 3_000),
        ],
        &mut report,
    );
    assert_eq!(report.applied, 2);
    assert_eq!(report.rejected[RejectReason::DuplicateSample.index()], 1);
    assert_eq!(report.rejected[RejectReason::OutOfOrder.index()], 1);
    let nan = series("vllm:generation_tokens_total", "0", &[], f64::NAN);
    feed(&mut engine, &[(nan, 4_000)], &mut report);
    assert_eq!(report.rejected[RejectReason::NanValue.index()], 1);
    assert_eq!(report.applied + report.rejected_total(), report.received);
}

#[test]
fn stale_markers_for_every_series_remove_the_group() {
    let mut engine = Engine::new(EngineConfig::default());
    let mut report = IngestReport::default();
    let first = scrape("0", 1.0, true);
    feed(
        &mut engine,
        &first
            .iter()
            .cloned()
            .map(|r| (r, 1_000))
            .collect::<Vec<_>>(),
        &mut report,
    );
    assert_eq!(outputs(&engine).len(), 4);
    let stale = f64::from_bits(STALE_NAN_BITS);
    let markers: Vec<_> = first
        .into_iter()
        .map(|(l, _)| ((l, stale), 2_000))
        .collect();
    let (head, tail) = markers.split_at(3);
    feed(&mut engine, head, &mut report);
    assert_eq!(engine.stats().groups, 1, "still some live series");
    feed(&mut engine, tail, &mut report);
    assert_eq!(engine.stats().groups, 0);
    assert!(outputs(&engine).is_empty());
    assert_eq!(engine.stats().groups_removed_stale, 1);
    assert_eq!(report.applied + report.rejected_total(), report.received);
}

#[test]
fn idle_groups_leave_after_the_timeout() {
    let mut engine = Engine::new(EngineConfig {
        idle_timeout_ms: 60_000,
        ..EngineConfig::default()
    });
    let mut report = IngestReport::default();
    let labels: Vec<(&str, String)> = series("vllm:generation_tokens_total", "0", &[], 0.0).0;
    let labels: Vec<Label<'_>> = labels
        .iter()
        .map(|(n, v)| Label { name: n, value: v })
        .collect();
    engine.ingest(
        &labels,
        &[Sample {
            value: 1.0,
            timestamp_ms: 5,
        }],
        100_000,
        &mut report,
    );
    assert_eq!(
        engine.sweep_idle(160_000),
        0,
        "exactly at the timeout it stays"
    );
    assert_eq!(engine.sweep_idle(160_001), 1);
    assert_eq!(engine.stats().groups, 0);
}

/// The acceptance-corrected histogram of a first interval from 0 to the k = 1 scrape: ITL deltas
/// cumulative 0, 10, 40 at 0.025, 0.05, 0.1; 120 − 40 = 80 tokens for 40 outputs, so w = 2 and
/// bound B holds w × the raw cumulative count at w · B: 2 × 10, 2 × 40, 2 × 40; `+Inf` 80.
fn first_interval_at_k1() -> DerivedValue {
    DerivedValue::Histogram {
        buckets: vec![
            (0.025, 20.0),
            (0.05, 80.0),
            (0.1, 80.0),
            (f64::INFINITY, 80.0),
        ],
        sum: 2.4,
        count: 80.0,
    }
}

#[test]
fn counter_reset_restarts_acceptance_buckets_from_the_new_values() {
    // After a vLLM restart the raw counters restart: the t3 scrape (k = 1 again) is below t2.
    // The family then equals a fresh first interval: the k = 1 values, 20, 80, 80, 80; count 80.
    let mut all = two_scrapes();
    all.extend(scrape("0", 1.0, true).into_iter().map(|r| (r, 31_000)));
    let mut engine = Engine::new(EngineConfig::default());
    feed(&mut engine, &all, &mut IngestReport::default());
    assert_eq!(
        value_of(&outputs(&engine), Family::AcceptanceCorrectedItl, "0"),
        first_interval_at_k1()
    );
    assert_eq!(engine.stats().counter_resets, 1);
}

#[test]
fn acceptance_buckets_survive_frame_eviction_unchanged() {
    // With a window of 2 frames, t1 is committed when t3 arrives; the result must equal a window of 16.
    let mut all = two_scrapes();
    all.extend(scrape("0", 3.0, true).into_iter().map(|r| (r, 31_000)));
    let run = |frames| {
        let mut engine = Engine::new(EngineConfig {
            max_pending_frames: frames,
            ..EngineConfig::default()
        });
        feed(&mut engine, &all, &mut IngestReport::default());
        value_of(&outputs(&engine), Family::AcceptanceCorrectedItl, "0")
    };
    // Three intervals with w = 2: 60, 240, 240, 240.
    let want = DerivedValue::Histogram {
        buckets: vec![
            (0.025, 60.0),
            (0.05, 240.0),
            (0.1, 240.0),
            (f64::INFINITY, 240.0),
        ],
        sum: 2.4 * 3.0, // passed through from the raw ITL _sum of t3
        count: 240.0,
    };
    assert_eq!(run(16), want);
    assert_eq!(run(2), want);
}

#[test]
fn old_itl_name_alone_feeds_itl_families_and_tpot_is_absent() {
    // vLLM 0.10: time_per_output_token_seconds only, no request TPOT histogram.
    let mut raw = Vec::new();
    hist(&mut raw, "old", "0", &["0.05", "+Inf"], &[5.0, 8.0], 0.3);
    raw.push(series("vllm:generation_tokens_total", "0", &[], 18.0));
    raw.push(series(
        "vllm:time_to_first_token_seconds_count",
        "0",
        &[],
        10.0,
    ));
    let mut engine = Engine::new(EngineConfig::default());
    feed(
        &mut engine,
        &raw.into_iter().map(|r| (r, 1_000)).collect::<Vec<_>>(),
        &mut IngestReport::default(),
    );
    let out = outputs(&engine);
    assert_eq!(
        value_of(&out, Family::TokenWeightedItl, "0"),
        DerivedValue::SumCount {
            sum: 0.3,
            count: 8.0
        }
    );
    assert!(out.iter().all(|(f, _, _)| *f != Family::CanonicalTpot));
    let stats = engine.stats();
    assert!(
        stats
            .withheld
            .contains(&(Family::CanonicalTpot, WithheldReason::MissingInput, 1))
    );
    assert!(stats.withheld.contains(&(
        Family::IterationTokensLocalCompute,
        WithheldReason::MissingInput,
        1
    )));
}

#[test]
fn both_itl_names_are_never_counted_twice() {
    // vLLM 0.10.2-0.14 emit both names with identical values: Σ must be 0.3, not 0.6. 18 tokens
    // − 10 first outputs = 8 tokens for 8 outputs: the acceptance-corrected family is raw ITL.
    let mut raw = Vec::new();
    hist(&mut raw, "old", "0", &["0.05", "+Inf"], &[5.0, 8.0], 0.3);
    hist(&mut raw, "itl", "0", &["0.05", "+Inf"], &[5.0, 8.0], 0.3);
    raw.push(series("vllm:generation_tokens_total", "0", &[], 18.0));
    raw.push(series(
        "vllm:time_to_first_token_seconds_count",
        "0",
        &[],
        10.0,
    ));
    let mut engine = Engine::new(EngineConfig::default());
    feed(
        &mut engine,
        &raw.into_iter().map(|r| (r, 1_000)).collect::<Vec<_>>(),
        &mut IngestReport::default(),
    );
    let out = outputs(&engine);
    assert_eq!(
        value_of(&out, Family::TokenWeightedItl, "0"),
        DerivedValue::SumCount {
            sum: 0.3,
            count: 8.0
        }
    );
    assert_eq!(
        value_of(&out, Family::AcceptanceCorrectedItl, "0"),
        DerivedValue::Histogram {
            buckets: vec![(0.05, 5.0), (f64::INFINITY, 8.0)],
            sum: 0.3,
            count: 8.0
        }
    );
}

#[test]
fn token_histogram_without_a_one_bound_withholds_canonical_tpot() {
    let mut raw: Vec<Raw> = scrape("0", 1.0, false)
        .into_iter()
        .filter(|(l, _)| !l.iter().any(|(n, v)| *n == "le" && v == "1.0"))
        .collect();
    raw.push(series(
        "vllm:request_generation_tokens_bucket",
        "0",
        &[("le", "5.0")],
        9.0,
    ));
    let mut engine = Engine::new(EngineConfig::default());
    feed(
        &mut engine,
        &raw.into_iter().map(|r| (r, 1_000)).collect::<Vec<_>>(),
        &mut IngestReport::default(),
    );
    assert!(
        outputs(&engine)
            .iter()
            .all(|(f, _, _)| *f != Family::CanonicalTpot)
    );
    assert!(engine.stats().withheld.contains(&(
        Family::CanonicalTpot,
        WithheldReason::NoLeOneBound,
        1
    )));
}

#[test]
fn a_frame_missing_an_input_never_emits() {
    // t1 complete; t2 lacks TTFT count: token-weighted ITL stays at t1 (Σ 2.4 s over 80 - 40 tokens).
    let mut raw: Vec<(Raw, i64)> = scrape("1", 1.0, false)
        .into_iter()
        .map(|r| (r, 1_000))
        .collect();
    raw.extend(
        scrape("1", 2.0, false)
            .into_iter()
            .filter(|(l, _)| {
                !l.iter()
                    .any(|(_, v)| v == "vllm:time_to_first_token_seconds_count")
            })
            .map(|r| (r, 16_000)),
    );
    let mut engine = Engine::new(EngineConfig::default());
    feed(&mut engine, &raw, &mut IngestReport::default());
    let out = outputs(&engine);
    assert_eq!(
        value_of(&out, Family::TokenWeightedItl, "1"),
        DerivedValue::SumCount {
            sum: 2.4,
            count: 40.0
        }
    );
    // Families that do not read the TTFT count moved on to t2: 600 local + 160 generated.
    assert_eq!(
        value_of(&out, Family::IterationTokensLocalCompute, "1"),
        DerivedValue::SumCount {
            sum: 760.0,
            count: 500.0
        }
    );
}

/// The k = 2 scrape of engine 0 with 50 accepted tokens instead of 80: 10 accepted for 40 drafts
/// since k = 1, an interval acceptance length of 1.25 against 2 before. Generation tokens follow:
/// 120 at t1 + 40 first outputs + 40 ITL outputs + 10 accepted = 210. The interval's 40 outputs
/// all took more than 0.05 s (ITL le="0.05" stays at 10), so its shape differs from the first's.
fn t2_with_low_acceptance() -> Vec<Raw> {
    let mut t2 = scrape("0", 2.0, true);
    for (labels, value) in &mut t2 {
        let le = labels
            .iter()
            .find(|(n, _)| *n == "le")
            .map(|(_, v)| v.as_str());
        match (labels[0].1.as_str(), le) {
            (
                "vllm:spec_decode_num_accepted_tokens_total"
                | "vllm:spec_decode_num_accepted_tokens_per_pos_total",
                _,
            ) => *value = 50.0,
            ("vllm:generation_tokens_total", _) => *value = 210.0,
            ("vllm:inter_token_latency_seconds_bucket", Some("0.05")) => *value = 10.0,
            _ => {}
        }
    }
    t2
}

#[test]
fn acceptance_buckets_continue_across_a_stale_gap() {
    // A failed scrape makes Prometheus write staleness markers for every series of the target;
    // the next scrape brings the group back. The acceptance-corrected buckets must then be those
    // of the uninterrupted run, not a re-seed from vLLM's cumulative counts. The t2 scrape has
    // 10 accepted tokens for 40 drafts in its interval (acceptance length 1.25, against 2 up to
    // t1), so a re-seed at t2 (cumulative acceptance length 1.625) gives other buckets.
    let t1 = scrape("0", 1.0, true);
    let t2 = t2_with_low_acceptance();
    let at = |raw: &[Raw], ts| raw.iter().cloned().map(|r| (r, ts)).collect::<Vec<_>>();
    let stale = f64::from_bits(STALE_NAN_BITS);
    let markers: Vec<_> = t1
        .iter()
        .map(|(l, _)| ((l.clone(), stale), 8_000))
        .collect();
    let run = |parts: &[&[(Raw, i64)]]| {
        let mut engine = Engine::new(EngineConfig::default());
        let mut report = IngestReport::default();
        for part in parts {
            feed(&mut engine, part, &mut report);
        }
        assert_eq!(report.applied + report.rejected_total(), report.received);
        (
            value_of(&outputs(&engine), Family::AcceptanceCorrectedItl, "0"),
            engine.stats(),
        )
    };
    let (uninterrupted, _) = run(&[&at(&t1, 1_000), &at(&t2, 16_000)]);
    let (gap, stats) = run(&[&at(&t1, 1_000), &markers, &at(&t2, 16_000)]);
    let (reseeded, _) = run(&[&at(&t2, 16_000)]);
    assert_eq!(
        stats.groups_removed_stale, 1,
        "the markers removed the group"
    );
    assert_eq!(gap, uninterrupted);
    assert_ne!(
        reseeded, uninterrupted,
        "the test needs a run where re-seeding differs"
    );
    // Count and sum: generation 210 − TTFT 80 = 130 tokens; the raw ITL sum.
    let DerivedValue::Histogram { sum, count, .. } = gap else {
        panic!("a histogram")
    };
    assert_eq!((sum, count), (4.8, 130.0));
}

#[test]
fn acceptance_buckets_restart_after_a_stale_gap_with_a_counter_reset() {
    // vLLM restarted during the gap: its counters are back at the k = 1 values, below t2. The
    // resumed group treats that as a reset, as a live group does: the buckets restart from the new
    // values (20, 80, 80, 80 as in `counter_reset_restarts_acceptance_buckets_from_the_new_values`).
    let mut all = two_scrapes();
    all.retain(|((labels, _), _)| labels.iter().any(|(n, v)| *n == "engine" && v == "0"));
    let stale = f64::from_bits(STALE_NAN_BITS);
    all.extend(
        scrape("0", 1.0, true)
            .into_iter()
            .map(|(l, _)| ((l, stale), 20_000)),
    );
    all.extend(scrape("0", 1.0, true).into_iter().map(|r| (r, 31_000)));
    let mut engine = Engine::new(EngineConfig::default());
    feed(&mut engine, &all, &mut IngestReport::default());
    assert_eq!(
        value_of(&outputs(&engine), Family::AcceptanceCorrectedItl, "0"),
        first_interval_at_k1()
    );
    assert_eq!(engine.stats().counter_resets, 1);
}

#[test]
fn retired_acceptance_state_expires_with_the_idle_timeout() {
    // Past idle_timeout the stale group's state is forgotten: the group comes back re-seeded.
    let t2 = t2_with_low_acceptance();
    let stale = f64::from_bits(STALE_NAN_BITS);
    let feed_at = |engine: &mut Engine, raw: Vec<Raw>, ts: i64, now_ms: i64| {
        for (labels, value) in raw {
            let labels: Vec<Label<'_>> = labels
                .iter()
                .map(|(n, v)| Label { name: n, value: v })
                .collect();
            engine.ingest(
                &labels,
                &[Sample {
                    value,
                    timestamp_ms: ts,
                }],
                now_ms,
                &mut IngestReport::default(),
            );
        }
    };
    let run = |sweep_at: i64| {
        let mut engine = Engine::new(EngineConfig {
            idle_timeout_ms: 60_000,
            ..EngineConfig::default()
        });
        feed_at(&mut engine, scrape("0", 1.0, true), 1_000, 1_000);
        feed_at(
            &mut engine,
            scrape("0", 1.0, true)
                .into_iter()
                .map(|(l, _)| (l, stale))
                .collect(),
            8_000,
            8_000,
        );
        engine.sweep_idle(sweep_at);
        feed_at(&mut engine, t2.clone(), 16_000, sweep_at);
        value_of(&outputs(&engine), Family::AcceptanceCorrectedItl, "0")
    };
    let mut fresh = Engine::new(EngineConfig::default());
    feed_at(&mut fresh, t2.clone(), 16_000, 16_000);
    let reseeded = value_of(&outputs(&fresh), Family::AcceptanceCorrectedItl, "0");
    assert_ne!(run(68_000), reseeded, "removed 60 s before the sweep: kept");
    assert_eq!(
        run(68_001),
        reseeded,
        "removed more than 60 s before the sweep: forgotten"
    );
}

/// Engine 0's k = 2 scrape with its ITL histogram replaced by one on `bounds` (cumulative
/// `cumulative`, the last one `+Inf` = the count), Σ 4.8 s.
fn scrape_with_itl_bounds(bounds: &[&str], cumulative: &[f64]) -> Vec<Raw> {
    let mut raw: Vec<Raw> = scrape("0", 2.0, true)
        .into_iter()
        .filter(|(l, _)| !l[0].1.starts_with("vllm:inter_token_latency_seconds"))
        .collect();
    hist(&mut raw, "itl", "0", bounds, cumulative, 4.8);
    raw
}

/// Issue 13, item 1: scrapes at t and t + 15 s, staleness markers for every series at t + 30 s,
/// then the same series with other ITL `le` bounds at t + 15 s again. The retired state's
/// committed timestamp (t + 15 s) used to survive the re-seed, hide the frame and panic.
#[test]
fn stale_group_returning_with_new_bucket_layout_does_not_panic() {
    let at = |raw: Vec<Raw>, ts| raw.into_iter().map(|r| (r, ts)).collect::<Vec<_>>();
    let stale = f64::from_bits(STALE_NAN_BITS);
    let markers: Vec<_> = scrape("0", 2.0, true)
        .into_iter()
        .map(|(l, _)| ((l, stale), 31_000))
        .collect();
    // The returning frame: 80 outputs, cumulative 0, 20, 50, 80 at 0.025, 0.05, 0.075, 0.1; tokens
    // 240 − 80 = 160, so w = 2 from 0 (a re-seed): 0.025 → 2·F(0.05) = 40, 0.05 → 2·F(0.1) = 160,
    // then 160 (flat past the last bound), `+Inf` = 160.
    let five = scrape_with_itl_bounds(
        &["0.025", "0.05", "0.075", "0.1", "+Inf"],
        &[0.0, 20.0, 50.0, 80.0, 80.0],
    );
    let want5 = DerivedValue::Histogram {
        buckets: vec![
            (0.025, 40.0),
            (0.05, 160.0),
            (0.075, 160.0),
            (0.1, 160.0),
            (f64::INFINITY, 160.0),
        ],
        sum: 4.8,
        count: 160.0,
    };
    // Same number of bounds, other values: 0.02 → 2·F(0.04) = 2·(20·0.02/0.03) = 80/3, then 160.
    let moved = scrape_with_itl_bounds(&["0.02", "0.05", "0.1", "+Inf"], &[0.0, 20.0, 80.0, 80.0]);
    let want_moved = DerivedValue::Histogram {
        buckets: vec![
            (0.02, 80.0 / 3.0),
            (0.05, 160.0),
            (0.1, 160.0),
            (f64::INFINITY, 160.0),
        ],
        sum: 4.8,
        count: 160.0,
    };
    for (returning, want) in [(five, want5), (moved, want_moved)] {
        let mut engine = Engine::new(EngineConfig::default());
        let mut report = IngestReport::default();
        feed(&mut engine, &at(scrape("0", 1.0, true), 1_000), &mut report);
        feed(
            &mut engine,
            &at(scrape("0", 2.0, true), 16_000),
            &mut report,
        );
        feed(&mut engine, &markers, &mut report);
        assert_eq!(engine.stats().groups_removed_stale, 1);
        feed(&mut engine, &at(returning, 16_000), &mut report);
        assert_eq!(report.applied + report.rejected_total(), report.received);
        let DerivedValue::Histogram {
            buckets,
            sum,
            count,
        } = value_of(&outputs(&engine), Family::AcceptanceCorrectedItl, "0")
        else {
            panic!("a histogram")
        };
        let DerivedValue::Histogram {
            buckets: wb,
            sum: ws,
            count: wc,
        } = &want
        else {
            unreachable!()
        };
        assert_eq!((sum, count), (*ws, *wc));
        assert_eq!(buckets.len(), wb.len());
        for ((le, c), (wle, w)) in buckets.iter().zip(wb) {
            assert!(le == wle && (c - w).abs() < 1e-9, "{buckets:?} vs {wb:?}");
        }
    }
}

/// A group of engine 0 at `ts`: ITL (0.025, 0.05, 0.1, +Inf) cumulative `itl`, generation tokens
/// `generated` over 10 first outputs, and, when given, accepted drafts per position.
fn acceptance_frame(
    itl: [f64; 3],
    generated: f64,
    per_pos: Option<[f64; 3]>,
    ts: i64,
) -> Vec<(Raw, i64)> {
    let mut raw = Vec::new();
    hist(
        &mut raw,
        "itl",
        "0",
        &["0.025", "0.05", "0.1", "+Inf"],
        &[itl[0], itl[1], itl[2], itl[2]],
        itl[2] * 0.05,
    );
    raw.push(series("vllm:generation_tokens_total", "0", &[], generated));
    raw.push(series(
        "vllm:time_to_first_token_seconds_count",
        "0",
        &[],
        10.0,
    ));
    for (p, v) in per_pos.iter().flat_map(|v| v.iter().enumerate()) {
        let pos = ["0", "1", "2"][p];
        raw.push(series(
            "vllm:spec_decode_num_accepted_tokens_per_pos_total",
            "0",
            &[("position", pos)],
            *v,
        ));
    }
    raw.into_iter().map(|r| (r, ts)).collect()
}

#[test]
fn acceptance_buckets_never_fall_when_the_plan_changes_without_a_reset() {
    // t1: 10 outputs in (0.025, 0.05], 10 tokens (w = 1). t2: 10 more in (0.05, 0.1] with 30
    // tokens (w = 3). At t2, le 0.05 holds 1·F1(0.05) + 3·F2(0.15) = 10 + 30 = 40.
    // t3: nothing new, but the per-position series appear (10 outputs accepted 3 drafts): the plan
    // now needs them, t1 and t2 no longer count, and a replay from 0 to t3 gives classes j = 1
    // (10 outputs) and j = 4 (10), 50 tokens scaled to the 40 emitted: le 0.05 = 0.8·(10·F(0.05) +
    // 40·F(0.2))/20 = 0.8·(100 + 800)/20 = 36 < 40. No input fell: the bucket must stay at 40.
    let mut engine = Engine::new(EngineConfig::default());
    let mut report = IngestReport::default();
    feed(
        &mut engine,
        &acceptance_frame([0.0, 10.0, 10.0], 20.0, None, 1_000),
        &mut report,
    );
    feed(
        &mut engine,
        &acceptance_frame([0.0, 10.0, 20.0], 50.0, None, 16_000),
        &mut report,
    );
    let at_t2 = value_of(&outputs(&engine), Family::AcceptanceCorrectedItl, "0");
    let DerivedValue::Histogram { buckets, .. } = &at_t2 else {
        panic!("a histogram")
    };
    assert_eq!(buckets[1], (0.05, 40.0));
    feed(
        &mut engine,
        &acceptance_frame([0.0, 10.0, 20.0], 50.0, Some([10.0, 10.0, 10.0]), 31_000),
        &mut report,
    );
    let DerivedValue::Histogram { buckets, count, .. } =
        value_of(&outputs(&engine), Family::AcceptanceCorrectedItl, "0")
    else {
        panic!("a histogram")
    };
    let DerivedValue::Histogram {
        buckets: before, ..
    } = at_t2
    else {
        unreachable!()
    };
    assert!(
        buckets.iter().zip(&before).all(|(a, b)| a.1 >= b.1),
        "{before:?} -> {buckets:?}"
    );
    assert_eq!(buckets[1], (0.05, 40.0), "held, not 36");
    assert_eq!((buckets[3].1, count), (40.0, 40.0));
    assert_eq!(engine.stats().counter_resets, 0);
}

#[test]
fn an_infinite_or_negative_acceptance_input_withholds_the_family_instead_of_nan_buckets() {
    for bad in [f64::INFINITY, -5.0] {
        let mut engine = Engine::new(EngineConfig::default());
        let mut report = IngestReport::default();
        feed(
            &mut engine,
            &acceptance_frame([0.0, 10.0, 10.0], 20.0, None, 1_000),
            &mut report,
        );
        feed(
            &mut engine,
            &acceptance_frame([0.0, 10.0, 20.0], bad, None, 16_000),
            &mut report,
        );
        assert!(
            outputs(&engine)
                .iter()
                .all(|(f, _, _)| *f != Family::AcceptanceCorrectedItl),
            "{bad}"
        );
        assert!(engine.stats().withheld.contains(&(
            Family::AcceptanceCorrectedItl,
            WithheldReason::InconsistentInputs,
            1
        )));
        // A good scrape after it continues from t1, as if the bad frame had not been there:
        // t1 → t3 adds 10 outputs in (0.05, 0.1] with 30 tokens (w = 3): le 0.05 = 10 + 3·F(0.15) = 40.
        feed(
            &mut engine,
            &acceptance_frame([0.0, 10.0, 20.0], 50.0, None, 31_000),
            &mut report,
        );
        let DerivedValue::Histogram { buckets, count, .. } =
            value_of(&outputs(&engine), Family::AcceptanceCorrectedItl, "0")
        else {
            panic!("a histogram")
        };
        assert_eq!((buckets[1], count), ((0.05, 40.0), 40.0), "{bad}");
    }
}

#[path = "hold_tests.rs"]
mod hold_tests;

#[path = "stale_value_tests.rs"]
mod stale_value_tests;

#[path = "observe_tests.rs"]
mod observe_tests;

#[path = "evict_tests.rs"]
mod evict_tests;

#[path = "persist_tests.rs"]
mod persist_tests;
