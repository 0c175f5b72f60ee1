//! Profile differences, the exposition against Python `prometheus_client` as an oracle,
//! numpy percentiles, determinism, remote-write bodies and the HTTP endpoints.

use super::families::bounds_1_2_5;
use super::metrics::Fam;
use super::trace_tests::{hand_config, r0, r1_r2};
use super::truth::{median, percentile_linear};
use super::*;

fn hand_sim(profile: Profile) -> Simulator {
    let mut script = vec![r0()];
    script.extend(r1_r2());
    let mut sim = Simulator::with_script(hand_config(profile), script).unwrap();
    sim.advance_to(3.0);
    sim
}

#[test]
fn hand_trace_exposition_matches_prometheus_client_byte_for_byte() {
    // testdata/oracle.py feeds the hand-computed observations of this trace to prometheus_client
    // 0.26 with vLLM 0.33's families; its generate_latest() output is the fixture.
    let expected = include_str!("testdata/hand_trace_0.33.prom");
    let got = hand_sim(Profile::V0_33).render_text();
    for (i, (g, e)) in got.lines().zip(expected.lines()).enumerate() {
        assert_eq!(g, e, "line {} differs", i + 1);
    }
    assert_eq!(got.lines().count(), expected.lines().count());
}

#[test]
fn profile_0_10_has_only_the_old_itl_name_and_no_request_tpot() {
    let sim = hand_sim(Profile::V0_10);
    let text = sim.render_text();
    assert!(text.contains("# TYPE vllm:time_per_output_token_seconds histogram"));
    assert!(!text.contains("vllm:inter_token_latency_seconds"));
    assert!(!text.contains("vllm:request_time_per_output_token_seconds"));
    assert!(!text.contains("vllm:prompt_tokens_by_source"));
    assert!(text.contains("# TYPE vllm:gpu_cache_usage_perc gauge"));
    // R0's three ITL samples (0.016, 0.016, 0.014) sit under the old name.
    let old = sim.metrics().hist(0, Fam::OldTpot).unwrap();
    assert_eq!(old.count(), 3);
    // 0.10 has no "error" finish reason: R2 (n = 0) finishes "abort".
    let l = [
        ("model_name", "m"),
        ("engine", "0"),
        ("finished_reason", "abort"),
    ];
    assert_eq!(
        sim.snapshot().value("vllm:request_success_total", &l),
        Some(1.0)
    );
    assert!(!text.contains("finished_reason=\"error\""));
}

#[test]
fn profile_0_14_emits_both_itl_names_with_identical_samples() {
    let sim = hand_sim(Profile::V0_14);
    let (old, new) = (
        sim.metrics().hist(0, Fam::OldTpot).unwrap(),
        sim.metrics().hist(0, Fam::Itl).unwrap(),
    );
    assert_eq!(old, new);
    assert_eq!(new.count(), 3);
    assert!(sim.metrics().has(Fam::RequestTpot));
    assert!(!sim.metrics().has(Fam::PromptTokensBySource));
}

#[test]
fn iteration_tokens_include_cache_hits_and_kv_transfer_on_0_22_but_not_on_0_33() {
    // R0's prefill step: 100 prompt tokens (60 computed, 32 hit, 8 transferred) + 1 generated.
    // 0.22 observes 101 (le 128, index 5); 0.33 observes 61 (le 64, index 4).
    // Whole trace sums (see truth_window_splits_at_step_end_times): 0.22 = 138, 0.33 = 98.
    let old = hand_sim(Profile::V0_22);
    let new = hand_sim(Profile::V0_33);
    let (ho, hn) = (
        old.metrics().hist(0, Fam::IterationTokens).unwrap(),
        new.metrics().hist(0, Fam::IterationTokens).unwrap(),
    );
    assert_eq!((ho.sum, hn.sum), (138.0, 98.0));
    assert_eq!((ho.counts[5], ho.counts[4]), (1, 0));
    assert_eq!((hn.counts[5], hn.counts[4]), (0, 1));
    // Both expose the by-source counter, whose local_compute + generation equals the 0.33 sum:
    // 90 + 8 = 98.
    let lc = [
        ("model_name", "m"),
        ("engine", "0"),
        ("source", "local_compute"),
    ];
    for sim in [&old, &new] {
        let s = sim.snapshot();
        let local = s.value("vllm:prompt_tokens_by_source_total", &lc).unwrap();
        let generated = s
            .value(
                "vllm:generation_tokens_total",
                &[("model_name", "m"), ("engine", "0")],
            )
            .unwrap();
        assert_eq!(local + generated, 98.0);
    }
}

#[test]
fn request_token_bounds_follow_build_1_2_5_buckets_and_print_1e06() {
    // build_1_2_5_buckets(100) = [1, 2, 5, 10, 20, 50, 100] (vLLM docstring example).
    assert_eq!(
        bounds_1_2_5(100),
        vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]
    );
    // max_model_len 1 048 576 reaches 1 000 000, printed le="1e+06".
    let cfg = SimConfig {
        max_model_len: 1 << 20,
        ..SimConfig::default()
    };
    let text = Simulator::new(cfg).unwrap().render_text();
    assert!(text.contains("vllm:request_generation_tokens_bucket{engine=\"0\",le=\"1e+06\",model_name=\"sim-model\"} 0.0"));
    assert!(text.contains("le=\"500000.0\""));
}

#[test]
fn percentiles_match_numpy_linear_interpolation() {
    // Values printed by numpy 2.x np.percentile(a, 99) and np.median(a).
    let mut a = vec![0.011, 0.05, 0.013, 0.2, 0.0125, 0.031, 0.07];
    a.sort_by(f64::total_cmp);
    assert_eq!(percentile_linear(&a, 99.0), 0.19219999999999995);
    assert_eq!(median(&a), 0.031);
    let mut b = vec![0.1, 0.3, 0.7, 0.2];
    b.sort_by(f64::total_cmp);
    assert_eq!(percentile_linear(&b, 99.0), 0.6879999999999998);
    assert_eq!(median(&b), 0.25);
    let mut c: Vec<f64> = (1..=250)
        .map(|i| i as f64 * 0.001 + 0.0001 * (i % 7) as f64)
        .collect();
    c.sort_by(f64::total_cmp);
    assert_eq!(percentile_linear(&c, 99.0), 0.24776099999999998);
    assert_eq!(median(&c), 0.1258);
}

fn busy_config(seed: u64) -> SimConfig {
    SimConfig {
        models: vec!["a".into(), "b".into()],
        engines_per_model: 2,
        arrival_rate: 20.0,
        kv_transfer_prob: 0.2,
        spec: Some(SpecConfig {
            num_speculative_tokens: 3,
            acceptance_prob: 0.6,
            no_draft_fraction: 0.2,
        }),
        seed,
        ..SimConfig::default()
    }
}

#[test]
fn same_seed_gives_identical_exposition_whatever_the_advance_steps() {
    let mut one = Simulator::new(busy_config(7)).unwrap();
    one.advance_to(20.0);
    let mut many = Simulator::new(busy_config(7)).unwrap();
    for i in 1..=200 {
        many.advance_to(f64::from(i) * 0.1);
    }
    assert_eq!(one.render_text(), many.render_text());
    let mut other = Simulator::new(busy_config(8)).unwrap();
    other.advance_to(20.0);
    assert_ne!(one.render_text(), other.render_text());
}

#[test]
fn random_run_counters_agree_with_truth_and_with_each_other() {
    let mut sim = Simulator::new(busy_config(3)).unwrap();
    sim.advance_to(30.0);
    let snap = sim.snapshot();
    let w = sim.truth_window(0, sim.now_ns());
    assert!(
        w.total.requests.finished > 500,
        "a busy run finishes many requests"
    );
    for g in &w.groups {
        let l = [
            ("model_name", g.model_name.as_deref().unwrap()),
            ("engine", g.engine.as_deref().unwrap()),
        ];
        let v = |name: &str| snap.value(name, &l).unwrap();
        let it = &g.iterations;
        assert_eq!(
            v("vllm:generation_tokens_total"),
            it.generation_tokens as f64
        );
        assert_eq!(
            v("vllm:inter_token_latency_seconds_count"),
            it.itl_count as f64
        );
        assert_eq!(
            v("vllm:time_to_first_token_seconds_count"),
            it.first_outputs as f64
        );
        assert_eq!(v("vllm:iteration_tokens_total_count"), it.iterations as f64);
        assert_eq!(
            v("vllm:iteration_tokens_total_sum"),
            it.iteration_tokens_local_sum as f64
        );
        assert_eq!(v("vllm:spec_decode_num_drafts_total"), it.drafts as f64);
        // Every non-first output holds 1 sampled token + its accepted drafts, except that a
        // request's last output is cut at its last token after the drafts were counted.
        assert!(it.tokens_after_first <= it.itl_count + it.accepted_tokens);
        // Canonical TPOT = raw request TPOT minus the n ≤ 1 requests (le="1.0" of the tokens).
        let le1 = snap
            .value(
                "vllm:request_generation_tokens_bucket",
                &[l[0], l[1], ("le", "1.0")],
            )
            .unwrap();
        let raw = v("vllm:request_time_per_output_token_seconds_count");
        assert_eq!(raw - le1, g.requests.canonical_tpot.count as f64);
        let rel = (v("vllm:request_time_per_output_token_seconds_sum")
            - g.requests.canonical_tpot.sum_seconds)
            .abs();
        assert!(rel <= 1e-9 * g.requests.canonical_tpot.sum_seconds);
        for b in &g.requests.canonical_tpot.buckets {
            let raw_b = snap.value(
                "vllm:request_time_per_output_token_seconds_bucket",
                &[l[0], l[1], ("le", &b.le)],
            );
            assert_eq!(raw_b.unwrap() - le1, b.count as f64, "bucket le={}", b.le);
        }
    }
}

#[test]
fn remote_write_bodies_decode_back_to_the_snapshot() {
    use prost::Message;
    let sim = hand_sim(Profile::V0_33);
    let snap = sim.snapshot();
    let n = snap.samples().count();
    let reqs = remote_write::write_requests(&snap, &[("job".into(), "sim".into())], 100);
    assert_eq!(reqs.len(), n.div_ceil(100));
    let raw = snap::raw::Decoder::new()
        .decompress_vec(&remote_write::encode(&reqs[0]))
        .unwrap();
    let back = remote_write::WriteRequest::decode(raw.as_slice()).unwrap();
    let first = &back.timeseries[0];
    let names: Vec<&str> = first.labels.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, vec!["__name__", "engine", "job", "model_name"]);
    assert_eq!(first.labels[0].value, "vllm:spec_decode_num_drafts_total");
    assert_eq!(first.samples[0].value, 3.0);
    assert_eq!(first.samples[0].timestamp, 1_700_000_003_000);
    let md = remote_write::metadata_request(&snap);
    assert!(
        md.metadata
            .iter()
            .any(|m| m.metric_family_name == "vllm:iteration_tokens_total" && m.r#type == 3)
    );
}

#[tokio::test]
async fn http_serves_metrics_and_truth_windows() {
    let sim = Simulator::with_script(hand_config(Profile::V0_33), r1_r2()).unwrap();
    let live = serve::LiveSim::new(sim);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(axum::serve(listener, serve::router(live)).into_future());
    let client = reqwest::Client::new();
    let body = client
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(body.contains("# TYPE vllm:generation_tokens_total counter"));
    assert!(body.contains(serve::SNAPSHOT_TIME_METRIC));
    // Epoch 1 700 000 000 s; a window far in the past of every request is empty.
    let url = format!("http://{addr}/truth?from=1700000000&to=1700000000.5");
    let text = client.get(url).send().await.unwrap().text().await.unwrap();
    let truth: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(truth["total"]["requests"]["finished"], 0);
    assert_eq!(truth["from_unix_s"], 1_700_000_000.0);
    let bad = client
        .get(format!("http://{addr}/truth?from=x"))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    server.abort();
}

#[test]
fn profile_0_34_counts_cached_prompt_tokens_by_tier_and_otherwise_exposes_what_0_33_does() {
    let (new, old) = (hand_sim(Profile::V0_34), hand_sim(Profile::V0_33));
    let m = new.metrics();
    assert!(m.has(Fam::PromptTokensCachedBySource));
    assert!(!old.metrics().has(Fam::PromptTokensCachedBySource));
    // device = prefix-cache hits; external_unspecified = the connector's hits; the other tiers 0.
    let device = m.scalar(0, Fam::PromptTokensCachedBySource, 0).unwrap();
    assert_eq!(Some(device), m.scalar(0, Fam::PrefixHits, 0));
    assert_eq!(
        m.scalar(0, Fam::PromptTokensCachedBySource, 4),
        m.scalar(0, Fam::ExternalPrefixHits, 0)
    );
    for tier in 1..4 {
        assert_eq!(
            m.scalar(0, Fam::PromptTokensCachedBySource, tier),
            Some(0.0)
        );
    }
    // Everything else is 0.33's, line for line.
    let without = |text: String| -> Vec<String> {
        text.lines()
            .filter(|l| !l.contains("prompt_tokens_cached_by_source"))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(without(new.render_text()), without(old.render_text()));
}

#[test]
fn custom_histogram_buckets_replace_a_familys_bounds_and_are_checked_as_vllm_checks_them() {
    let mut cfg = hand_config(Profile::V0_34);
    cfg.bucket_overrides
        .insert("inter_token_latency".into(), vec![0.02, 0.5]);
    let mut sim = Simulator::with_script(cfg.clone(), vec![r0()]).unwrap();
    sim.advance_to(3.0);
    let text = sim.render_text();
    for name in [
        "inter_token_latency_seconds",
        "request_time_per_output_token_seconds",
    ] {
        let les: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with(&format!("vllm:{name}_bucket{{")))
            .filter_map(|l| l.split("le=\"").nth(1)?.split('"').next())
            .collect();
        assert_eq!(les, ["0.02", "0.5", "+Inf"], "{name}");
    }
    // TTFT keeps its defaults (22 bounds and +Inf).
    let ttft = text
        .lines()
        .filter(|l| l.starts_with("vllm:time_to_first_token_seconds_bucket{"))
        .count();
    assert_eq!(ttft, 23);

    for (family, bounds, profile) in [
        ("inter_token_latency", vec![0.5, 0.5], Profile::V0_34),
        ("inter_token_latency", vec![0.0, 0.5], Profile::V0_34),
        ("inter_token_latency", vec![], Profile::V0_34),
        ("no_such_family", vec![1.0], Profile::V0_34),
        ("inter_token_latency", vec![0.5], Profile::V0_33),
    ] {
        let mut bad = hand_config(profile);
        bad.bucket_overrides.insert(family.into(), bounds.clone());
        assert!(
            Simulator::with_script(bad, vec![r0()]).is_err(),
            "{family} {bounds:?} on {profile}"
        );
    }
    assert!(parse_bucket_overrides(r#"{"request_latency": [1, 2.5]}"#).is_ok());
    assert!(parse_bucket_overrides(r#"{"latency": [1]}"#).is_err());
    assert!(parse_bucket_overrides("[1, 2]").is_err());
}
