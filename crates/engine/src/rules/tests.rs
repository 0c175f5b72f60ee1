//! Each rule against numbers worked by hand (the arithmetic is in the comments).

use super::*;
use crate::classify::RoleKey;
use crate::{DerivedValue, Family, WithheldReason};

/// The rule of `family` evaluated on `values`.
fn evaluate_stateless(
    family: Family,
    plan: &Plan,
    values: &[f64],
) -> Result<DerivedValue, WithheldReason> {
    match family.spec().evaluation {
        Evaluation::Frame(evaluate) => evaluate(plan, values),
        Evaluation::Stateful(_) => panic!("{family:?} is evaluated from its state"),
    }
}

/// The plan of `family` from `learned`.
fn plan(family: Family, learned: &[(RoleKey, usize)]) -> Result<Plan, WithheldReason> {
    let slos = crate::slo::SloSet::empty();
    let context = super::PlanContext::new(&[], &slos);
    (family.spec().plan)(learned, &context).map_err(|u| u.reason)
}

/// A plan of a histogram and single roles.
fn with(hist: Option<HistRoles>, scalars: &[usize]) -> Plan {
    Plan {
        hist,
        scalars: scalars.to_vec(),
        series: Vec::new(),
        layout: None,
    }
}

fn hist(bounds: &[f64], first_role: usize) -> HistRoles {
    // Roles: buckets first_role.., then sum, then count.
    let buckets = bounds
        .iter()
        .enumerate()
        .map(|(i, b)| (*b, first_role + i))
        .collect();
    HistRoles {
        buckets,
        sum: first_role + bounds.len(),
        count: first_role + bounds.len() + 1,
    }
}

#[test]
fn canonical_tpot_removes_short_requests_from_every_bucket_and_the_count() {
    // 10 finished requests; 3 had n <= 1 and were recorded as TPOT 0 (so sit in every bucket).
    // TPOT buckets le=0.01,0.025,0.05,+Inf: 3,5,9,10; sum 0.42 s; count 10. gen_tokens{le=1} = 3.
    // By hand: buckets 0,2,6,7; sum 0.42; count 7.
    let tpot = hist(&[0.01, 0.025, 0.05, f64::INFINITY], 0);
    let values = [3.0, 5.0, 9.0, 10.0, 0.42, 10.0, 3.0];
    let plan = with(Some(tpot), &[6]);
    let got = evaluate_stateless(Family::CanonicalTpot, &plan, &values).unwrap();
    let want = DerivedValue::Histogram {
        buckets: vec![(0.01, 0.0), (0.025, 2.0), (0.05, 6.0), (f64::INFINITY, 7.0)],
        sum: 0.42,
        count: 7.0,
    };
    assert_eq!(got, want);
}

#[test]
fn canonical_tpot_withholds_when_short_requests_exceed_a_bucket() {
    let tpot = hist(&[0.01, f64::INFINITY], 0);
    let values = [1.0, 4.0, 0.3, 4.0, 2.0];
    let plan = with(Some(tpot), &[4]);
    assert_eq!(
        evaluate_stateless(Family::CanonicalTpot, &plan, &values),
        Err(WithheldReason::InconsistentInputs)
    );
}

#[test]
fn canonical_tpot_withholds_when_the_inf_bucket_is_not_the_count() {
    // Found by the rw2 fuzz target: +Inf bucket 21 but _count 1.75e9. By hand the output would be
    // +Inf 18 vs count 1749999995.456: not a histogram, so the family is withheld.
    let tpot = hist(&[0.01, f64::INFINITY], 0);
    let values = [3.0, 21.0, 0.3, 1_749_999_998.456, 3.0];
    let plan = with(Some(tpot), &[4]);
    assert_eq!(
        evaluate_stateless(Family::CanonicalTpot, &plan, &values),
        Err(WithheldReason::InconsistentInputs)
    );
}

#[test]
fn token_weighted_itl_counts_tokens_after_each_first() {
    // 1000 generated tokens over 40 requests' first outputs: 960 tokens after a first; Σ ITL = 12.5 s.
    let plan = with(None, &[0, 1, 2]);
    let got = evaluate_stateless(Family::TokenWeightedItl, &plan, &[12.5, 1000.0, 40.0]).unwrap();
    assert_eq!(
        got,
        DerivedValue::SumCount {
            sum: 12.5,
            count: 960.0
        }
    );
}

#[test]
fn local_compute_iteration_tokens_add_generated_to_local_prompt_tokens() {
    // 300 local-compute prompt tokens + 1000 generated = 1300 tokens over 250 iterations.
    let plan = with(None, &[0, 1, 2]);
    let got = evaluate_stateless(
        Family::IterationTokensLocalCompute,
        &plan,
        &[300.0, 1000.0, 250.0],
    )
    .unwrap();
    assert_eq!(
        got,
        DerivedValue::SumCount {
            sum: 1300.0,
            count: 250.0
        }
    );
}

const BOUNDS: [f64; 5] = [0.01, 0.025, 0.05, 0.075, 0.1];

/// A point whose outputs after the first carried `tokens` tokens (10 first outputs, so
/// `generation_tokens` = 10 + tokens).
fn point(finite: [f64; 5], count: f64, tokens: f64) -> ItlPoint {
    ItlPoint {
        finite: finite.to_vec(),
        count,
        sum: 0.0,
        generated: 10.0 + tokens,
        first_outputs: 10.0,
        per_pos: Vec::new(),
    }
}

#[test]
fn acceptance_interval_with_two_tokens_per_output_halves_each_duration() {
    // 40 outputs: 10 in (0.025, 0.05], 20 in (0.05, 0.075], 10 in (0.075, 0.1]; 80 tokens => w = 2.
    // Per-token bucket at B is 2·F(2B):
    //   B=0.01  -> F(0.02)  = 0 (0.01 and 0.025 both hold 0)           -> 0
    //   B=0.025 -> F(0.05)  = 10                                         -> 20
    //   B=0.05  -> F(0.1)   = 40                                         -> 80
    //   B=0.075 -> F(0.15)  = 40 (past the last finite bound)            -> 80
    //   B=0.1   -> F(0.2)   = 40                                         -> 80
    //   +Inf    -> the 80 tokens                                         -> 80
    let mut acc = vec![0.0; 6];
    acceptance_interval(
        &BOUNDS,
        None,
        &point([0.0, 0.0, 10.0, 30.0, 40.0], 40.0, 80.0),
        &mut acc,
    );
    assert_eq!(acc, [0.0, 20.0, 80.0, 80.0, 80.0, 80.0]);
}

#[test]
fn acceptance_interval_interpolates_inside_a_bucket() {
    // Same outputs, 60 tokens => w = 1.5.
    //   B=0.01  -> 1.5·F(0.015)  = 0
    //   B=0.025 -> 1.5·F(0.0375) = 1.5·(10·(0.0375−0.025)/0.025) = 1.5·5 = 7.5
    //   B=0.05  -> 1.5·F(0.075)  = 1.5·30 = 45
    //   B=0.075 -> 1.5·F(0.1125) = 1.5·40 = 60, and so is B=0.1; +Inf = 60 tokens
    let mut acc = vec![0.0; 6];
    acceptance_interval(
        &BOUNDS,
        None,
        &point([0.0, 0.0, 10.0, 30.0, 40.0], 40.0, 60.0),
        &mut acc,
    );
    let want = [0.0, 7.5, 45.0, 60.0, 60.0, 60.0];
    for (g, w) in acc.iter().zip(want) {
        assert!((g - w).abs() < 1e-12, "{acc:?} vs {want:?}");
    }
}

#[test]
fn acceptance_interval_without_spec_decoding_is_the_raw_histogram() {
    let mut acc = vec![0.0; 6];
    acceptance_interval(
        &BOUNDS,
        None,
        &point([1.0, 4.0, 10.0, 30.0, 40.0], 45.0, 45.0),
        &mut acc,
    );
    assert_eq!(acc, [1.0, 4.0, 10.0, 30.0, 40.0, 45.0]);
}

#[test]
fn acceptance_intervals_accumulate_with_each_interval_own_acceptance_length() {
    // Interval 1 as in the w = 2 test: [0, 20, 80, 80, 80 | 80].
    // Interval 2: 40 more outputs, 20 in (0.05,0.075] and 20 in (0.075,0.1]... cumulative raw
    // [0,0,10,50,80], count 80, tokens 80 + 40 = 120 (one each) => w = 1, adds the raw deltas
    // [0,0,0,20,40 | 40]. Total [0, 20, 80, 100, 120 | 120]; exact count 120 tokens.
    let p1 = point([0.0, 0.0, 10.0, 30.0, 40.0], 40.0, 80.0);
    let p2 = point([0.0, 0.0, 10.0, 50.0, 80.0], 80.0, 120.0);
    let mut acc = vec![0.0; 6];
    acceptance_interval(&BOUNDS, None, &p1, &mut acc);
    acceptance_interval(&BOUNDS, Some(&p1), &p2, &mut acc);
    assert_eq!(acc, [0.0, 20.0, 80.0, 100.0, 120.0, 120.0]);
    assert!(!p2.is_reset_from(&p1));
    assert!(p1.is_reset_from(&p2), "a decrease is a counter reset");
}

#[test]
fn old_itl_name_is_used_only_without_the_new_one() {
    use super::super::classify::{Input, Part, RoleKey};
    let k = |input, le: f64| RoleKey {
        input,
        le_bits: le.to_bits(),
    };
    let plain = |input| RoleKey { input, le_bits: 0 };
    let old = vec![
        (k(Input::OldItl(Part::Bucket), f64::INFINITY), 0),
        (plain(Input::OldItl(Part::Sum)), 1),
        (plain(Input::OldItl(Part::Count)), 2),
        (plain(Input::GenTotal), 3),
        (plain(Input::TtftCount), 4),
    ];
    let itl_sum = plan(Family::TokenWeightedItl, &old).unwrap().scalars[0];
    assert_eq!(itl_sum, 1);
    let mut both = old.clone();
    both.push((plain(Input::Itl(Part::Sum)), 5));
    let itl_sum = plan(Family::TokenWeightedItl, &both).unwrap().scalars[0];
    assert_eq!(itl_sum, 5, "the new name wins; never both");
}

#[test]
fn canonical_tpot_reasons_for_withholding() {
    use super::super::classify::{Input, Part, RoleKey};
    let plain = |input| RoleKey { input, le_bits: 0 };
    let tpot = vec![
        (
            RoleKey {
                input: Input::Tpot(Part::Bucket),
                le_bits: f64::INFINITY.to_bits(),
            },
            0,
        ),
        (plain(Input::Tpot(Part::Sum)), 1),
        (plain(Input::Tpot(Part::Count)), 2),
    ];
    assert_eq!(
        plan(Family::CanonicalTpot, &tpot),
        Err(WithheldReason::MissingInput)
    );
    let mut no_le1 = tpot.clone();
    no_le1.push((plain(Input::GenCount), 3));
    assert_eq!(
        plan(Family::CanonicalTpot, &no_le1),
        Err(WithheldReason::NoLeOneBound)
    );
    assert_eq!(
        plan(Family::CanonicalTpot, &[]),
        Err(WithheldReason::MissingInput)
    );
}

#[test]
fn acceptance_count_is_the_tokens_emitted_not_outputs_plus_accepted_drafts() {
    // 40 outputs whose requests' accepted drafts summed to 40, but 10 of those drafts were accepted
    // in requests' last steps beyond their last token: 70 tokens emitted after the first outputs.
    // The count is 70 (not 40 + 40 = 80), and w = 70/40 = 1.75:
    //   B=0.025 -> 1.75·F(0.04375) = 1.75·(10·(0.04375−0.025)/0.025) = 1.75·7.5 = 13.125
    //   B=0.05  -> 1.75·F(0.0875)  = 1.75·(30 + 10·(0.0875−0.075)/0.025) = 1.75·35 = 61.25
    //   B=0.075 -> 1.75·F(0.13125) = 1.75·40 = 70 (and so is B=0.1); +Inf = 70
    let mut acc = vec![0.0; 6];
    acceptance_interval_with(
        Estimator::MeanWeight,
        &BOUNDS,
        None,
        &point([0.0, 0.0, 10.0, 30.0, 40.0], 40.0, 70.0),
        &mut acc,
    );
    let want = [0.0, 13.125, 61.25, 70.0, 70.0, 70.0];
    for (g, w) in acc.iter().zip(want) {
        assert!((g - w).abs() < 1e-12, "{acc:?} vs {want:?}");
    }
}

#[test]
fn acceptance_mix_splits_outputs_by_accepted_drafts_per_position() {
    // 40 outputs, k = 2: 20 drafts reached position 0 and 10 of those position 1, so 20 outputs
    // held 1 token, 10 held 2 and 10 held 3: 20 + 20 + 30 = 70 tokens, the emitted count, so no
    // scaling. Raw cumulative ITL 0, 0, 10, 30, 40 (bounds 0.01 … 0.1). Class (j, n) puts
    // n·j·F(B·j)/40 tokens at or below B:
    //   B=0.025: j=1 F(0.025)=0; j=2 F(0.05)=10 -> 10·2·10/40 = 5; j=3 F(0.075)=30 -> 10·3·30/40 = 22.5
    //            -> 27.5
    //   B=0.05:  j=1 F(0.05)=10 -> 20·10/40 = 5; j=2 F(0.1)=40 -> 20; j=3 F(0.15)=40 -> 30 -> 55
    //   B=0.075: j=1 F(0.075)=30 -> 15; j=2 -> 20; j=3 -> 30 -> 65
    //   B=0.1:   j=1 40 -> 20; 20; 30 -> 70;  B=0.01: j=3 F(0.03) = 2 -> 10·3·2/40 = 1.5
    let mut p = point([0.0, 0.0, 10.0, 30.0, 40.0], 40.0, 70.0);
    p.per_pos = vec![20.0, 10.0];
    let mut acc = vec![0.0; 6];
    acceptance_interval_with(Estimator::AcceptanceMix, &BOUNDS, None, &p, &mut acc);
    let want = [1.5, 27.5, 55.0, 65.0, 70.0, 70.0];
    for (g, w) in acc.iter().zip(want) {
        assert!((g - w).abs() < 1e-12, "{acc:?} vs {want:?}");
    }
    // Without positions the mix is the mean weight.
    let (mut mix, mut mean) = (vec![0.0; 6], vec![0.0; 6]);
    let plain = point([0.0, 0.0, 10.0, 30.0, 40.0], 40.0, 70.0);
    acceptance_interval_with(Estimator::AcceptanceMix, &BOUNDS, None, &plain, &mut mix);
    acceptance_interval_with(Estimator::MeanWeight, &BOUNDS, None, &plain, &mut mean);
    assert_eq!(mix, mean);
}

#[test]
fn acceptance_mix_scales_drafts_accepted_beyond_the_last_token_to_the_emitted_count() {
    // Same mix (70 tokens by the positions) but only 56 emitted: every class is scaled by 56/70 =
    // 0.8: 1.2, 22, 44, 52, 56 | 56.
    let mut p = point([0.0, 0.0, 10.0, 30.0, 40.0], 40.0, 56.0);
    p.per_pos = vec![20.0, 10.0];
    let mut acc = vec![0.0; 6];
    acceptance_interval_with(Estimator::AcceptanceMix, &BOUNDS, None, &p, &mut acc);
    let want = [1.2, 22.0, 44.0, 52.0, 56.0, 56.0];
    for (g, w) in acc.iter().zip(want) {
        assert!((g - w).abs() < 1e-12, "{acc:?} vs {want:?}");
    }
}

/// Every invariant of the family's buckets after one more interval: finite, monotone across
/// bounds, at most `+Inf`, never below the previous buckets, `+Inf` = the held token count.
#[track_caller]
fn check_invariants(acc: &[f64], before: &[f64], held: f64) {
    assert!(acc.iter().all(|a| a.is_finite() && *a >= 0.0), "{acc:?}");
    assert!(
        acc.windows(2).all(|w| w[0] <= w[1]),
        "not monotone: {acc:?}"
    );
    assert!(
        acc.iter().zip(before).all(|(a, b)| a >= b),
        "a bucket fell: {before:?} -> {acc:?}"
    );
    assert_eq!(acc[acc.len() - 1], held, "+Inf is the count");
}

#[test]
fn bad_intervals_keep_the_buckets_monotone_and_never_nan() {
    let base = point([0.0, 0.0, 10.0, 30.0, 40.0], 40.0, 80.0);
    let mut acc = vec![0.0; 6];
    acceptance_interval(&BOUNDS, None, &base, &mut acc);
    let after_first = acc.clone();
    // ΔN = 0 with 20 more tokens: they go to +Inf only (no output says how long they took).
    let mut no_outputs = base.clone();
    no_outputs.generated += 20.0;
    acceptance_interval(&BOUNDS, Some(&base), &no_outputs, &mut acc);
    check_invariants(&acc, &after_first, 100.0);
    assert_eq!(acc[..5], after_first[..5]);
    // Fewer tokens than outputs (0-token first outputs): 40 outputs, 20 tokens: r = 0.5, w = 1,
    // so each bound gains 0.5·ΔC: 0, 0, 5, 15, 20 | 20.
    let mut few = no_outputs.clone();
    few.count += 40.0;
    few.finite = vec![0.0, 0.0, 20.0, 60.0, 80.0];
    few.generated += 20.0;
    let before = acc.clone();
    acceptance_interval(&BOUNDS, Some(&no_outputs), &few, &mut acc);
    check_invariants(&acc, &before, 120.0);
    let gained: Vec<f64> = acc.iter().zip(&before).map(|(a, b)| a - b).collect();
    assert_eq!(gained, [0.0, 0.0, 5.0, 15.0, 20.0, 20.0]);
    // Tokens falling with no input falling (the TTFT count moved first): the count holds, nothing
    // is added; when the tokens pass the held count again only the excess is new.
    let mut torn = few.clone();
    torn.first_outputs += 30.0;
    let before = acc.clone();
    acceptance_interval(&BOUNDS, Some(&few), &torn, &mut acc);
    check_invariants(&acc, &before, 120.0);
    assert_eq!(acc, before);
    // A raw finite bucket above the ITL count, and one below the bound before it: clamped.
    let mut broken = torn.clone();
    broken.count += 10.0;
    broken.generated += 1e6;
    broken.finite = vec![1e9, 1e9, 1e9 - 5.0, 1e9, 1e9];
    let before = acc.clone();
    acceptance_interval(&BOUNDS, Some(&torn), &broken, &mut acc);
    check_invariants(&acc, &before, broken.tokens());
}

#[test]
fn inf_equals_count_exactly_and_buckets_stay_monotone_over_random_intervals() {
    // Random cumulative inputs (integer counts, as vLLM's), many intervals, both estimators: the
    // invariants must hold after every interval, in floating point, with no tolerance. The old
    // rescale w·F(B·w) with w = (ΔN + ΔA)/ΔN let finite buckets drift above +Inf (8078.000000000001
    // against 8078 on real vLLM 0.32); `old_overshoots` shows this input does reach that case.
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let mut old_overshoots = 0;
    for estimator in [Estimator::MeanWeight, Estimator::AcceptanceMix] {
        for _ in 0..200 {
            let mut acc = vec![0.0; 6];
            let mut old = [0.0; 6];
            let mut prev: Option<ItlPoint> = None;
            let mut cur = point([0.0; 5], 0.0, 0.0);
            cur.per_pos = vec![0.0; 3];
            for _ in 0..50 {
                let mut next = cur.clone();
                let dn = f64::from(rng.random_range(0..500u32));
                // Cumulative deltas up the bounds; every output is within the last finite bound
                // (vLLM's ITL bounds reach 80 s), so F is flat at ΔN past it.
                let mut c = 0.0;
                for (i, f) in next.finite.iter_mut().enumerate() {
                    c += if i == 4 {
                        dn - c
                    } else {
                        (f64::from(rng.random_range(0..100u32)) / 100.0 * (dn - c)).floor()
                    };
                    *f += c;
                }
                next.count += dn;
                let accepted = f64::from(rng.random_range(0..=3 * dn as u32));
                next.generated += dn + accepted
                    - f64::from(rng.random_range(0..=(accepted as u32).min(20)))
                    + 7.0;
                next.first_outputs += 7.0;
                let mut reach = accepted;
                for p in &mut next.per_pos {
                    reach = (reach / 2.0).floor();
                    *p += reach;
                }
                let before = acc.clone();
                acceptance_interval_with(estimator, &BOUNDS, prev.as_ref(), &next, &mut acc);
                check_invariants(&acc, &before, next.tokens());
                // The old formula on the same interval.
                let d = dn;
                if d > 0.0 {
                    let w = (d + accepted) / d;
                    let delta: Vec<f64> = (0..5)
                        .map(|i| next.finite[i] - prev.as_ref().map_or(0.0, |p| p.finite[i]))
                        .collect();
                    for (j, b) in BOUNDS.iter().enumerate() {
                        old[j] += w * interpolate(&BOUNDS, &delta, b * w);
                    }
                }
                old[5] += d + accepted;
                old_overshoots += old[..5].iter().filter(|o| **o > old[5]).count();
                prev = Some(next.clone());
                cur = next;
            }
        }
    }
    assert!(
        old_overshoots > 0,
        "the input never made the old formula drift: the test could not fail"
    );
}

#[test]
fn interpolation_resumed_from_the_last_segment_matches_a_search_from_the_first_bound() {
    // The acceptance interval reads F at B·j for ascending B, each class resuming where its last
    // search ended (`interpolate_from`). Worked values on bounds with a repeated bound:
    // bounds 0.1, 0.2, 0.2, 0.5; cumulative 2, 6, 7, 10.
    //   v = 0.05 -> 2·0.05/0.1 = 1;  v = 0.15 -> 2 + 4·0.5 = 4;  v = 0.2 -> 6 (the first 0.2);
    //   v = 0.35 -> 7 + 3·(0.15/0.3) = 8.5;  v = 0.5 -> 10;  v = 0.9 -> 10 (flat past the last).
    let bounds = [0.1, 0.2, 0.2, 0.5];
    let cumulative = [2.0, 6.0, 7.0, 10.0];
    let worked = [
        (0.0, 0.0),
        (0.05, 1.0),
        (0.15, 4.0),
        (0.2, 6.0),
        (0.35, 8.5),
        (0.5, 10.0),
        (0.9, 10.0),
    ];
    let mut from = 0;
    for (v, want) in worked {
        let resumed = interpolate_from(&bounds, &cumulative, v, &mut from);
        assert!(
            (resumed - want).abs() < 1e-12,
            "v = {v}: {resumed} vs {want}"
        );
        // Bit for bit what a search from the first bound gives.
        assert_eq!(
            resumed.to_bits(),
            interpolate(&bounds, &cumulative, v).to_bits()
        );
    }
    assert_eq!(from, bounds.len(), "past the last bound");
}

#[test]
fn every_spec_input_is_a_series_the_classifier_reads() {
    use crate::classify::{READ_NAMES, histogram_of};
    for family in Family::ALL {
        for input in family.spec().inputs {
            // `name` or `name{label="value"}`.
            let (name, selector) = match input.split_once('{') {
                Some((name, rest)) => (name, rest.strip_suffix('}')),
                None => (*input, None),
            };
            let read = READ_NAMES
                .iter()
                .find(|r| r.name == name || histogram_of(r) == Some(name));
            let read = read.unwrap_or_else(|| panic!("{family:?}: {input} is not read"));
            if let Some(selector) = selector {
                let label = selector.split('=').next();
                assert_eq!(read.only.map(|(l, _)| l), label, "{family:?}: {input}");
            }
        }
    }
}
