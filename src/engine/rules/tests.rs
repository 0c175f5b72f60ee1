//! Each rule against numbers worked by hand (the arithmetic is in the comments).

use super::*;

fn hist(bounds: &[f64], first_role: usize) -> HistRoles {
    // Roles: buckets first_role.., then sum, then count.
    let buckets = bounds.iter().enumerate().map(|(i, b)| (*b, first_role + i)).collect();
    HistRoles { buckets, sum: first_role + bounds.len(), count: first_role + bounds.len() + 1 }
}

#[test]
fn canonical_tpot_removes_short_requests_from_every_bucket_and_the_count() {
    // 10 finished requests; 3 had n <= 1 and were recorded as TPOT 0 (so sit in every bucket).
    // TPOT buckets le=0.01,0.025,0.05,+Inf: 3,5,9,10; sum 0.42 s; count 10. gen_tokens{le=1} = 3.
    // By hand: buckets 0,2,6,7; sum 0.42; count 7.
    let tpot = hist(&[0.01, 0.025, 0.05, f64::INFINITY], 0);
    let values = [3.0, 5.0, 9.0, 10.0, 0.42, 10.0, 3.0];
    let plan = Plan::CanonicalTpot { tpot, gen_le1: 6 };
    let got = evaluate_stateless(&plan, &values).unwrap();
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
    let plan = Plan::CanonicalTpot { tpot, gen_le1: 4 };
    assert_eq!(evaluate_stateless(&plan, &values), Err(WithheldReason::InconsistentInputs));
}

#[test]
fn canonical_tpot_withholds_when_the_inf_bucket_is_not_the_count() {
    // Found by the rw2 fuzz target: +Inf bucket 21 but _count 1.75e9. By hand the output would be
    // +Inf 18 vs count 1749999995.456: not a histogram, so the family is withheld.
    let tpot = hist(&[0.01, f64::INFINITY], 0);
    let values = [3.0, 21.0, 0.3, 1_749_999_998.456, 3.0];
    let plan = Plan::CanonicalTpot { tpot, gen_le1: 4 };
    assert_eq!(evaluate_stateless(&plan, &values), Err(WithheldReason::InconsistentInputs));
}

#[test]
fn token_weighted_itl_counts_tokens_after_each_first() {
    // 1000 generated tokens over 40 requests' first outputs: 960 tokens after a first; Σ ITL = 12.5 s.
    let plan = Plan::TokenWeightedItl { itl_sum: 0, gen_total: 1, ttft_count: 2 };
    let got = evaluate_stateless(&plan, &[12.5, 1000.0, 40.0]).unwrap();
    assert_eq!(got, DerivedValue::SumCount { sum: 12.5, count: 960.0 });
}

#[test]
fn local_compute_iteration_tokens_add_generated_to_local_prompt_tokens() {
    // 300 local-compute prompt tokens + 1000 generated = 1300 tokens over 250 iterations.
    let plan = Plan::IterationTokensLocalCompute { local: 0, gen_total: 1, iter_count: 2 };
    let got = evaluate_stateless(&plan, &[300.0, 1000.0, 250.0]).unwrap();
    assert_eq!(got, DerivedValue::SumCount { sum: 1300.0, count: 250.0 });
}

const BOUNDS: [f64; 5] = [0.01, 0.025, 0.05, 0.075, 0.1];

/// A point whose outputs after the first carried `tokens` tokens (10 first outputs, so
/// `generation_tokens` = 10 + tokens).
fn point(finite: [f64; 5], count: f64, tokens: f64) -> ItlPoint {
    ItlPoint { finite: finite.to_vec(), count, sum: 0.0, generated: 10.0 + tokens, first_outputs: 10.0, per_pos: Vec::new() }
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
    acceptance_interval(&BOUNDS, None, &point([0.0, 0.0, 10.0, 30.0, 40.0], 40.0, 80.0), &mut acc);
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
    acceptance_interval(&BOUNDS, None, &point([0.0, 0.0, 10.0, 30.0, 40.0], 40.0, 60.0), &mut acc);
    let want = [0.0, 7.5, 45.0, 60.0, 60.0, 60.0];
    for (g, w) in acc.iter().zip(want) {
        assert!((g - w).abs() < 1e-12, "{acc:?} vs {want:?}");
    }
}

#[test]
fn acceptance_interval_without_spec_decoding_is_the_raw_histogram() {
    let mut acc = vec![0.0; 6];
    acceptance_interval(&BOUNDS, None, &point([1.0, 4.0, 10.0, 30.0, 40.0], 45.0, 45.0), &mut acc);
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
    let k = |input, le: f64| RoleKey { input, le_bits: le.to_bits() };
    let plain = |input| RoleKey { input, le_bits: 0 };
    let old = vec![
        (k(Input::OldItl(Part::Bucket), f64::INFINITY), 0),
        (plain(Input::OldItl(Part::Sum)), 1),
        (plain(Input::OldItl(Part::Count)), 2),
        (plain(Input::GenTotal), 3),
        (plain(Input::TtftCount), 4),
    ];
    let Ok(Plan::TokenWeightedItl { itl_sum, .. }) = plan(Family::TokenWeightedItl, &old) else { panic!() };
    assert_eq!(itl_sum, 1);
    let mut both = old.clone();
    both.push((plain(Input::Itl(Part::Sum)), 5));
    let Ok(Plan::TokenWeightedItl { itl_sum, .. }) = plan(Family::TokenWeightedItl, &both) else { panic!() };
    assert_eq!(itl_sum, 5, "the new name wins; never both");
}

#[test]
fn canonical_tpot_reasons_for_withholding() {
    use super::super::classify::{Input, Part, RoleKey};
    let plain = |input| RoleKey { input, le_bits: 0 };
    let tpot = vec![
        (RoleKey { input: Input::Tpot(Part::Bucket), le_bits: f64::INFINITY.to_bits() }, 0),
        (plain(Input::Tpot(Part::Sum)), 1),
        (plain(Input::Tpot(Part::Count)), 2),
    ];
    assert_eq!(plan(Family::CanonicalTpot, &tpot), Err(WithheldReason::MissingInput));
    let mut no_le1 = tpot.clone();
    no_le1.push((plain(Input::GenCount), 3));
    assert_eq!(plan(Family::CanonicalTpot, &no_le1), Err(WithheldReason::NoLeOneBound));
    assert_eq!(plan(Family::CanonicalTpot, &[]), Err(WithheldReason::MissingInput));
}
