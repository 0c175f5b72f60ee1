//! Readings and intervals against numbers worked by hand (the arithmetic is in the comments).

use super::*;

fn s(name: &str, labels: &[(&str, &str)], value: f64, line: usize) -> DumpSample {
    DumpSample {
        name: name.into(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        value,
        timestamp_ms: None,
        line,
        cumulative: !name.ends_with("_created") && cumulative_by_suffix(name),
    }
}

fn hist(buckets: &[(f64, f64)], sum: f64, count: f64) -> Hist {
    Hist {
        buckets: buckets.to_vec(),
        sum,
        count,
    }
}

const INF: f64 = f64::INFINITY;

#[test]
fn histogram_quantile_interpolates_inside_the_bucket_like_prometheus() {
    // Cumulative 2, 6, 9, 10 at 0.01, 0.025, 0.05, +Inf.
    let h = hist(
        &[(0.01, 2.0), (0.025, 6.0), (0.05, 9.0), (INF, 10.0)],
        0.3,
        10.0,
    );
    // q = 0.5: rank 5 lands in (0.01, 0.025], which holds 6 − 2 = 4; 3 of them below the rank:
    // 0.01 + 0.015 · 3/4 = 0.02125.
    assert!((h.quantile(0.5).unwrap() - 0.02125).abs() < 1e-15);
    // q = 0.1: rank 1 in the first bucket, from 0: 0.01 · 1/2 = 0.005.
    assert!((h.quantile(0.1).unwrap() - 0.005).abs() < 1e-15);
    // q = 0.99: rank 9.9 > 9, only +Inf holds it: the highest finite bound, 0.05.
    assert_eq!(h.quantile(0.99), Some(0.05));
    // No observations: PromQL's NaN.
    let empty = hist(&[(0.01, 0.0), (INF, 0.0)], 0.0, 0.0);
    assert_eq!(empty.quantile(0.5), None);
}

#[test]
fn increase_is_none_after_a_counter_reset_or_a_bucket_layout_change() {
    let t1 = hist(&[(0.01, 2.0), (INF, 4.0)], 0.1, 4.0);
    let t2 = hist(&[(0.01, 5.0), (INF, 9.0)], 0.35, 9.0);
    // 5 − 2 = 3, 9 − 4 = 5, sum 0.35 − 0.1 = 0.25 (to float precision).
    let d = t2.minus(&t1).unwrap();
    assert_eq!(d.buckets, vec![(0.01, 3.0), (INF, 5.0)]);
    assert!((d.sum - 0.25).abs() < 1e-15);
    assert_eq!(d.count, 5.0);
    assert_eq!(t1.minus(&t2), None, "every count decreased: a reset");
    let other = hist(&[(0.02, 5.0), (INF, 9.0)], 0.35, 9.0);
    assert_eq!(other.minus(&t1), None, "different bounds");
    let sc = SumCount {
        sum: 3.0,
        count: 2.0,
    };
    assert_eq!(
        sc.minus(&SumCount {
            sum: 4.0,
            count: 1.0
        }),
        None
    );
    assert_eq!(
        SumCount {
            sum: 1.0,
            count: 0.0
        }
        .mean(),
        None
    );
}

#[test]
fn groups_drop_rule_dimensions_and_le_is_one_bound_whatever_its_text() {
    let dump = Dump::from_samples([
        s(
            "vllm:request_generation_tokens_bucket",
            &[("engine", "0"), ("le", "1.0"), ("pod", "")],
            3.0,
            1,
        ),
        s(
            "vllm:prompt_tokens_by_source_total",
            &[("source", "local_compute"), ("engine", "0")],
            50.0,
            2,
        ),
        s("vllm_corrector_active_groups", &[("engine", "0")], 1.0, 3),
    ])
    .unwrap();
    // One group {engine="0"}: `pod=""` is no label, `le` and `source` are series dimensions, and the
    // self-metric is not a vLLM series.
    assert_eq!(dump.groups.len(), 1);
    let g = &dump.groups[&vec![("engine".to_string(), "0".to_string())]];
    assert_eq!(g.series.len(), 2);
    let le1 = g.get("vllm:request_generation_tokens_bucket", &[("le", "1")]);
    assert_eq!(le1.map(|r| (r.value, r.line)), Some((3.0, 1)));
}

#[test]
fn a_series_twice_in_one_dump_names_both_lines() {
    let err = Dump::from_samples([
        s("vllm:generation_tokens_total", &[("engine", "0")], 1.0, 4),
        s("vllm:generation_tokens_total", &[("engine", "0")], 2.0, 9),
    ])
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "line 9: series vllm:generation_tokens_total{engine=\"0\"} appears twice (first on line 4)"
    );
}

#[test]
fn reset_evidence_is_a_decreasing_counter_or_a_new_created_time_never_a_gauge() {
    let before = Dump::from_samples([
        s("vllm:num_requests_running", &[], 4.0, 1),
        s("vllm:generation_tokens_total", &[], 100.0, 2),
        s("vllm:generation_tokens_created", &[], 1.7e9, 3),
    ])
    .unwrap();
    let group = |d: &Dump| d.groups[&Vec::new()].clone();
    // The gauge fell (line 1) and the counter grew: no reset.
    let grown = Dump::from_samples([
        s("vllm:num_requests_running", &[], 1.0, 1),
        s("vllm:generation_tokens_total", &[], 150.0, 2),
        s("vllm:generation_tokens_created", &[], 1.7e9, 3),
    ])
    .unwrap();
    assert_eq!(group(&grown).reset_since(&group(&before)), None);
    // Recreated: `_created` moved (line 3) although the counter grew past its old value.
    let recreated = Dump::from_samples([
        s("vllm:generation_tokens_total", &[], 150.0, 2),
        s("vllm:generation_tokens_created", &[], 1.8e9, 3),
    ])
    .unwrap();
    assert_eq!(group(&recreated).reset_since(&group(&before)), Some(3));
    // Both signs: the first line wins.
    let both = Dump::from_samples([
        s("vllm:generation_tokens_total", &[], 20.0, 2),
        s("vllm:generation_tokens_created", &[], 1.8e9, 3),
    ])
    .unwrap();
    assert_eq!(group(&both).reset_since(&group(&before)), Some(2));
}

/// One engine's raw TPOT histogram and corrected token-weighted ITL at one instant.
fn engine_dump(engine: &str, tpot: [f64; 4], tw: [f64; 2]) -> Vec<DumpSample> {
    let l = |le: &'static str| vec![("engine", engine), ("le", le)];
    vec![
        s(&format!("{RAW_TPOT}_bucket"), &l("0.01"), tpot[0], 0),
        s(&format!("{RAW_TPOT}_bucket"), &l("+Inf"), tpot[1], 0),
        s(
            &format!("{RAW_TPOT}_sum"),
            &[("engine", engine)],
            tpot[2],
            0,
        ),
        s(
            &format!("{RAW_TPOT}_count"),
            &[("engine", engine)],
            tpot[3],
            0,
        ),
        s(
            "vllm_corrected_token_weighted_itl_seconds_sum",
            &[("engine", engine)],
            tw[0],
            0,
        ),
        s(
            "vllm_corrected_token_weighted_itl_seconds_count",
            &[("engine", engine)],
            tw[1],
            0,
        ),
    ]
}

#[test]
fn totals_add_numerators_and_denominators_never_ratios() {
    let before = Dump::from_samples(
        engine_dump("0", [1.0, 2.0, 0.02, 2.0], [1.0, 100.0])
            .into_iter()
            .chain(engine_dump("1", [0.0, 0.0, 0.0, 0.0], [0.0, 0.0])),
    )
    .unwrap();
    let after = Dump::from_samples(
        engine_dump("0", [3.0, 6.0, 0.1, 6.0], [3.0, 300.0])
            .into_iter()
            .chain(engine_dump("1", [0.0, 2.0, 0.5, 2.0], [2.0, 20.0])),
    )
    .unwrap();
    let total = Interval::total(&before, &after);
    // Raw TPOT: engine 0 adds sum 0.08 over 4, engine 1 adds 0.5 over 2: 0.58 / 6.
    // (The mean of the two means, (0.02 + 0.25) / 2 = 0.135, would be wrong.)
    let tpot = total.raw_tpot.clone().unwrap();
    assert_eq!(tpot.count, 6.0);
    assert_eq!(tpot.buckets, vec![(0.01, 2.0), (INF, 6.0)]);
    assert!((tpot.mean().unwrap() - 0.58 / 6.0).abs() < 1e-15);
    // Token-weighted: (2 + 2) s over (200 + 20) tokens.
    let tw = total.family(Family::TokenWeightedItl).unwrap();
    assert_eq!((tw.sum, tw.count), (4.0, 220.0));
    assert_eq!(
        total.family(Family::CanonicalTpot),
        None,
        "no dump holds it"
    );
}
