//! Hand-worked traces: each expected number is computed in the comments from the step model
//! (engine time per step = base + per-token × computed tokens), never read from the code.

use super::metrics::Fam;
use super::*;

const L: [(&str, &str); 2] = [("model_name", "m"), ("engine", "0")];

/// One model `m`, one engine, no random arrivals, 10 ms + 2 ms per computed token,
/// k = 2 drafts, request-token bounds up to 100.
pub(super) fn hand_config(profile: Profile) -> SimConfig {
    SimConfig {
        profile,
        models: vec!["m".into()],
        arrival_rate: 0.0,
        spec: Some(SpecConfig {
            num_speculative_tokens: 2,
            acceptance_prob: 0.5,
            no_draft_fraction: 0.0,
        }),
        step_base_s: 0.010,
        step_per_token_s: 0.002,
        max_model_len: 100,
        ..SimConfig::default()
    }
}

fn prompt(total: u32, local_cache_hit: u32, external_kv_transfer: u32) -> PromptTokens {
    PromptTokens {
        total,
        local_compute: total - local_cache_hit - external_kv_transfer,
        local_cache_hit,
        external_kv_transfer,
    }
}

/// R0: arrives at 0, prompt 100 = 60 computed + 32 local hit + 8 transferred, n = 7, decode
/// steps (drafts, accepted) = (2,2), (2,0), (1,1): its last output is not cut (see
/// [`r_cut`] for one that is).
pub(super) fn r0() -> ScriptedRequest {
    ScriptedRequest {
        arrival_s: 0.0,
        model: 0,
        engine: 0,
        prompt: prompt(100, 32, 8),
        n: 7,
        finish_reason: None,
        decode_steps: vec![(2, 2), (2, 0), (1, 1)],
    }
}

/// R_cut: arrives at 0, prompt 10 (all computed), n = 3, decode steps (2, 2), (2, 2): its second
/// output would hold 3 tokens but only 2 are left.
pub(super) fn r_cut() -> ScriptedRequest {
    ScriptedRequest {
        arrival_s: 0.0,
        model: 0,
        engine: 0,
        prompt: prompt(10, 0, 0),
        n: 3,
        finish_reason: None,
        decode_steps: vec![(2, 2), (2, 2)],
    }
}

/// R1 at 1 s (prompt 10, n = 1) and R2 at 2 s (prompt 20, n = 0: engine-side error).
pub(super) fn r1_r2() -> Vec<ScriptedRequest> {
    let r = |t: f64, p: u32, n: u32| ScriptedRequest {
        arrival_s: t,
        model: 0,
        engine: 0,
        prompt: prompt(p, 0, 0),
        n,
        finish_reason: None,
        decode_steps: vec![],
    };
    vec![r(1.0, 10, 1), r(2.0, 20, 0)]
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * b.abs().max(1.0)
}

#[test]
fn four_outputs_of_1_3_1_2_tokens_give_exact_itl_tpot_and_counters() {
    // Step 1: prefill of 60 computed tokens: 10 + 2·60 = 130 ms → first output (1 token) at 0.130.
    // Step 2: decode 1 + 2 drafts = 3 tokens: 10 + 6 = 16 ms → 0.146, accepts 2 → 3 tokens.
    // Step 3: 3 tokens computed again: 16 ms → 0.162, accepts 0 → 1 token.
    // Step 4: 1 + 1 draft = 2 tokens: 10 + 2·2 = 14 ms → 0.176,
    //         accepts 1 → 2 tokens; n = 1 + 3 + 1 + 2 = 7 → finished (stop: 7 < max_tokens 256).
    let mut sim = Simulator::with_script(hand_config(Profile::V0_33), vec![r0()]).unwrap();
    sim.advance_to(1.0);
    let rec = &sim.truth().requests()[0];
    let times: Vec<f64> = rec.outputs.iter().map(|o| o.time_s).collect();
    let tokens: Vec<u32> = rec.outputs.iter().map(|o| o.tokens).collect();
    assert_eq!(times, vec![0.130, 0.146, 0.162, 0.176]);
    assert_eq!(tokens, vec![1, 3, 1, 2]);
    assert_eq!(rec.n, 7);
    assert_eq!(rec.finished_reason, "stop");
    // TPOT = (0.176 − 0.130) / (7 − 1) = 0.046 / 6.
    assert!(close(rec.tpot_s, 0.046 / 6.0));

    let m = sim.metrics();
    let itl = m.hist(0, Fam::Itl).unwrap();
    // ITL samples 0.016, 0.016, 0.014: all ≤ 0.025 and > 0.01 → bucket index 1 (le 0.025).
    assert_eq!(itl.count(), 3);
    assert_eq!(itl.counts[1], 3);
    assert!(close(itl.sum, 0.046));
    let tpot = m.hist(0, Fam::RequestTpot).unwrap();
    // One request, TPOT 0.00767 ≤ 0.01 → first bucket.
    assert_eq!((tpot.count(), tpot.counts[0]), (1, 1));
    assert_eq!(m.scalar(0, Fam::GenerationTokens, 0), Some(7.0));
    assert_eq!(m.scalar(0, Fam::PromptTokens, 0), Some(100.0));
    // by source: local_compute 60, local_cache_hit 32, external_kv_transfer 8.
    assert_eq!(m.scalar(0, Fam::PromptTokensBySource, 0), Some(60.0));
    assert_eq!(m.scalar(0, Fam::PromptTokensBySource, 1), Some(32.0));
    assert_eq!(m.scalar(0, Fam::PromptTokensBySource, 2), Some(8.0));
    // Drafts: 3 decode steps had drafts; draft tokens 2 + 2 + 1 = 5; accepted 2 + 0 + 1 = 3;
    // position 0 accepted in steps 2 and 4, position 1 in step 2.
    assert_eq!(m.scalar(0, Fam::SpecDrafts, 0), Some(3.0));
    assert_eq!(m.scalar(0, Fam::SpecDraftTokens, 0), Some(5.0));
    assert_eq!(m.scalar(0, Fam::SpecAccepted, 0), Some(3.0));
    assert_eq!(m.scalar(0, Fam::SpecAcceptedPerPos, 0), Some(2.0));
    assert_eq!(m.scalar(0, Fam::SpecAcceptedPerPos, 1), Some(1.0));
    // TTFT = 0.130 − 0 → bucket le 0.25 (index 8).
    let ttft = m.hist(0, Fam::Ttft).unwrap();
    assert_eq!((ttft.count(), ttft.counts[8]), (1, 1));
    // 0.33 iteration tokens: 60 + 1, 3, 1, 2 → sum 67 over 4 iterations.
    let it = m.hist(0, Fam::IterationTokens).unwrap();
    assert_eq!((it.count(), it.sum), (4, 67.0));
}

#[test]
fn accepted_drafts_are_counted_before_the_cut_at_the_last_token() {
    // Step 1: prefill of 10 tokens: 10 + 2·10 = 30 ms → first output (1 token) at 0.030.
    // Step 2: decode 1 + 2 drafts = 3 tokens: 10 + 2·3 = 16 ms → 0.046; both drafts accepted, but
    //         n = 3 leaves 2 tokens: the output holds 2 and the request finishes (stop). vLLM's
    //         scheduler has already counted the 2 accepted drafts: 1 ITL output + 2 accepted = 3,
    //         against 2 tokens emitted after the first.
    let mut sim = Simulator::with_script(hand_config(Profile::V0_33), vec![r_cut()]).unwrap();
    sim.advance_to(1.0);
    let rec = &sim.truth().requests()[0];
    let tokens: Vec<u32> = rec.outputs.iter().map(|o| o.tokens).collect();
    assert_eq!(tokens, vec![1, 2]);
    assert_eq!((rec.outputs[1].drafts, rec.outputs[1].accepted), (2, 2));
    assert_eq!((rec.n, rec.finished_reason), (3, "stop"));
    let m = sim.metrics();
    assert_eq!(m.scalar(0, Fam::GenerationTokens, 0), Some(3.0));
    assert_eq!(m.scalar(0, Fam::SpecAccepted, 0), Some(2.0));
    assert_eq!(m.scalar(0, Fam::SpecDrafts, 0), Some(1.0));
    assert_eq!(m.scalar(0, Fam::SpecAcceptedPerPos, 0), Some(1.0));
    assert_eq!(m.scalar(0, Fam::SpecAcceptedPerPos, 1), Some(1.0));
    assert_eq!(m.hist(0, Fam::Itl).unwrap().count(), 1);
    let it = sim.truth_window(0, sim.now_ns()).total.iterations;
    assert_eq!(
        (it.itl_count, it.accepted_tokens, it.tokens_after_first),
        (1, 2, 2)
    );
    // The truth per token is 0.016 s over the 2 emitted tokens, not over 1 + 2 = 3.
    assert!(close(
        it.acceptance_corrected_itl_seconds.unwrap(),
        0.016 / 2.0
    ));
    assert!(close(it.token_weighted_itl_seconds.unwrap(), 0.016 / 2.0));
}

#[test]
fn exposition_lines_of_the_four_output_request() {
    let mut sim = Simulator::with_script(hand_config(Profile::V0_33), vec![r0()]).unwrap();
    sim.advance_to(1.0);
    let text = sim.render_text();
    // Values from the hand computation above; floats printed as Python repr.
    for line in [
        "vllm:generation_tokens_total{engine=\"0\",model_name=\"m\"} 7.0",
        "vllm:inter_token_latency_seconds_bucket{engine=\"0\",le=\"0.01\",model_name=\"m\"} 0.0",
        "vllm:inter_token_latency_seconds_bucket{engine=\"0\",le=\"0.025\",model_name=\"m\"} 3.0",
        "vllm:inter_token_latency_seconds_count{engine=\"0\",model_name=\"m\"} 3.0",
        "vllm:inter_token_latency_seconds_sum{engine=\"0\",model_name=\"m\"} 0.046",
        // 0.046 / 6 = 0.0076666…, Python repr 0.007666666666666666.
        "vllm:request_time_per_output_token_seconds_sum{engine=\"0\",model_name=\"m\"} 0.007666666666666666",
        "vllm:request_generation_tokens_bucket{engine=\"0\",le=\"10.0\",model_name=\"m\"} 1.0",
        "vllm:request_generation_tokens_bucket{engine=\"0\",le=\"5.0\",model_name=\"m\"} 0.0",
        "vllm:prompt_tokens_by_source_total{engine=\"0\",model_name=\"m\",source=\"external_kv_transfer\"} 8.0",
        "vllm:request_success_total{engine=\"0\",finished_reason=\"stop\",model_name=\"m\"} 1.0",
        "vllm:generation_tokens_created{engine=\"0\",model_name=\"m\"} 1.7e+09",
        "# TYPE vllm:iteration_tokens_total histogram",
        "vllm:iteration_tokens_total_sum{engine=\"0\",model_name=\"m\"} 67.0",
    ] {
        assert!(text.lines().any(|l| l == line), "missing line: {line}");
    }
}

#[test]
fn zero_and_one_token_requests_observe_tpot_zero_and_land_in_le_1() {
    let mut sim = Simulator::with_script(hand_config(Profile::V0_33), r1_r2()).unwrap();
    sim.advance_to(3.0);
    let m = sim.metrics();
    // R1: one step 1.000 → 1.030 (10 + 2·10 ms), 1 token, finishes stop.
    // R2: one step 2.000 → 2.050 (10 + 2·20 ms), 0 tokens, finishes error (0.33 has "error").
    let tpot = m.hist(0, Fam::RequestTpot).unwrap();
    assert_eq!((tpot.count(), tpot.sum, tpot.counts[0]), (2, 0.0, 2));
    let n = m.hist(0, Fam::RequestGenerationTokens).unwrap();
    assert_eq!((n.count(), n.counts[0], n.sum), (2, 2, 1.0)); // le="1.0" holds n = 0 and n = 1
    assert!(m.hist(0, Fam::Itl).unwrap().count() == 0);
    // Both first outputs are TTFT observations (0.030 and 0.050), and generation_tokens = 1.
    let ttft = m.hist(0, Fam::Ttft).unwrap();
    assert_eq!(ttft.count(), 2);
    assert!(close(ttft.sum, 0.08));
    assert_eq!(m.scalar(0, Fam::GenerationTokens, 0), Some(1.0));
    // request_success: stop = 1 (child 0), error = 1 (child 3).
    assert_eq!(m.scalar(0, Fam::RequestSuccess, 0), Some(1.0));
    assert_eq!(m.scalar(0, Fam::RequestSuccess, 3), Some(1.0));
    let t = sim.truth_window(0, sim.now_ns()).total;
    assert_eq!(
        (
            t.requests.finished,
            t.requests.n_le_1,
            t.requests.canonical_tpot.count
        ),
        (2, 2, 0)
    );
    assert_eq!(t.requests.canonical_tpot.mean_seconds, None);
    assert_eq!(t.iterations.zero_token_first_outputs, 1);
}

#[test]
fn truth_window_splits_at_step_end_times() {
    let mut script = vec![r0()];
    script.extend(r1_r2());
    let mut sim = Simulator::with_script(hand_config(Profile::V0_22), script).unwrap();
    sim.advance_to(3.0);
    let w = |a: f64, b: f64| {
        sim.truth_window(model::secs_to_ns(a), model::secs_to_ns(b))
            .total
    };
    // [0, 0.146): only step 1 (0.130): 1 iteration, 1 first output, no ITL.
    let a = w(0.0, 0.146);
    assert_eq!(
        (
            a.iterations.iterations,
            a.iterations.first_outputs,
            a.iterations.itl_count
        ),
        (1, 1, 0)
    );
    // [0.146, 0.177): steps at 0.146, 0.162, 0.176 → ITL sum 0.046 over 3 outputs holding
    // 3 + 1 + 2 = 6 tokens (accepted 3, none cut) → exact per-token 0.046 / 6.
    let b = w(0.146, 0.177);
    assert_eq!(
        (
            b.iterations.itl_count,
            b.iterations.tokens_after_first,
            b.iterations.accepted_tokens
        ),
        (3, 6, 3)
    );
    assert!(close(
        b.iterations.token_weighted_itl_seconds.unwrap(),
        0.046 / 6.0
    ));
    assert!(close(
        b.iterations.acceptance_corrected_itl_seconds.unwrap(),
        0.046 / 6.0
    ));
    assert!(close(
        b.iterations.raw_itl_mean_seconds.unwrap(),
        0.046 / 3.0
    ));
    // AL = 1 + 3 accepted / 3 drafts = 2.
    assert_eq!(b.iterations.acceptance_length, Some(2.0));
    // R0 finished at 0.176 → in b, with its TPOT the only canonical sample.
    assert_eq!(b.requests.canonical_tpot.count, 1);
    assert!(close(
        b.requests.canonical_tpot.p99_seconds.unwrap(),
        0.046 / 6.0
    ));
    // Whole run: local compute 60 + 10 + 20 = 90 prompt tokens, generated 7 + 1 + 0 = 8, over
    // 4 + 1 + 1 = 6 iterations; the 0.22 raw sum credits every prompt token: 130 + 8 = 138.
    let all = w(0.0, 3.0);
    assert_eq!(all.iterations.iteration_tokens_local_sum, 98);
    assert_eq!(all.iterations.iteration_tokens_all_sum, 138);
    assert_eq!(all.iterations.iterations, 6);
    let raw = sim.metrics().hist(0, Fam::IterationTokens).unwrap();
    assert_eq!(raw.sum, 138.0);
}

#[test]
fn batching_makes_itl_grow_with_the_batch() {
    // Two requests arrive together (prompts of 5 computed tokens, n = 3, no drafts).
    // Step 1: both prefills, 10 + 2·10 = 30 ms → first outputs at 0.030.
    // Step 2: both decode, 2 tokens computed: 10 + 4 = 14 ms → 0.044 (ITL 0.014 each).
    // Compare a lone request: decode step = 10 + 2 = 12 ms (ITL 0.012).
    let req = |engine_tokens: u32| ScriptedRequest {
        arrival_s: 0.0,
        model: 0,
        engine: 0,
        prompt: prompt(engine_tokens, 0, 0),
        n: 3,
        finish_reason: None,
        decode_steps: vec![],
    };
    let mut two =
        Simulator::with_script(hand_config(Profile::V0_33), vec![req(5), req(5)]).unwrap();
    two.advance_to(1.0);
    let outs: Vec<f64> = two.truth().requests()[0]
        .outputs
        .iter()
        .map(|o| o.time_s)
        .collect();
    assert_eq!(outs, vec![0.030, 0.044, 0.058]);
    let mut one = Simulator::with_script(hand_config(Profile::V0_33), vec![req(5)]).unwrap();
    one.advance_to(1.0);
    // Lone prefill 10 + 2·5 = 20 ms, then 12 ms decodes.
    let outs: Vec<f64> = one.truth().requests()[0]
        .outputs
        .iter()
        .map(|o| o.time_s)
        .collect();
    assert_eq!(outs, vec![0.020, 0.032, 0.044]);
}

#[test]
fn snapshot_holds_only_steps_ended_before_the_instant() {
    let mut sim = Simulator::with_script(hand_config(Profile::V0_33), vec![r0()]).unwrap();
    // At exactly 0.130 the first step has not been applied yet ([from, to) windows).
    sim.advance_to(0.130);
    assert_eq!(
        sim.snapshot().value("vllm:generation_tokens_total", &L),
        Some(0.0)
    );
    sim.advance_to(0.131);
    assert_eq!(
        sim.snapshot().value("vllm:generation_tokens_total", &L),
        Some(1.0)
    );
    // Timestamp = epoch 1 700 000 000 000 ms + 131 ms.
    assert_eq!(sim.snapshot().timestamp_ms, 1_700_000_000_131);
}
