//! `inspect` on the vLLM 0.33 fixtures (`tests/fixtures/vllm-0.33/`, hand computation in their
//! `EXPECTED.md`) and on small hand-written dumps. Every expected value is worked in a comment.

use super::*;

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/../../tests/fixtures/vllm-0.33/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

fn run_texts(before: &str, after: &str) -> Result<Vec<GroupReport>, InspectError> {
    inspect(
        &Loaded::from_text("BEFORE", "before.prom", before.to_owned()),
        &Loaded::from_text("AFTER", "after.prom", after.to_owned()),
    )
}

fn engine<'r>(reports: &'r [GroupReport], e: &str) -> &'r GroupReport {
    reports
        .iter()
        .find(|r| r.labels.get("engine").map(String::as_str) == Some(e))
        .unwrap_or_else(|| panic!("no group with engine={e}: {reports:?}"))
}

#[track_caller]
fn close(got: Option<f64>, want: f64) {
    let got = got.unwrap_or_else(|| panic!("expected {want}, got null"));
    assert!(
        (got - want).abs() <= 1e-12 * want.abs(),
        "got {got}, want {want}"
    );
}

#[test]
fn fixture_interval_t1_to_t2_matches_the_hand_computation() {
    let reports = run_texts(&fixture("t1.prom"), &fixture("t2.prom")).unwrap();
    assert_eq!(reports.len(), 2);
    let e0 = engine(&reports, "0");
    assert_eq!(
        e0.labels,
        BTreeMap::from([
            ("engine".to_string(), "0".to_string()),
            ("model_name".to_string(), "Qwen/Qwen3-8B".to_string()),
        ])
    );
    // EXPECTED.md, engine 0 at t1 → t2:
    // raw TPOT (1.5 − 0.8) / (60 − 32) = 0.7 / 28 = 0.025;
    // canonical: the same sum over (60 − 7) − (32 − 4) = 53 − 28 = 25 requests = 0.028;
    // raw ITL (43 − 27) / (1000 − 600) = 16 / 400 = 0.04 s per output;
    // token-weighted 16 / ((1870 − 70) − (1240 − 40)) = 16 / 600;
    // acceptance-corrected 16 / ((1000 + 800) − (600 + 600)) = 16 / 600;
    // local-compute (9870 − 6240) / (1100 − 700) = 3630 / 400 = 9.075 tokens per iteration.
    close(e0.get("raw_tpot_mean_seconds"), 0.025);
    close(e0.get("canonical_tpot_mean_seconds"), 0.028);
    close(e0.get("raw_itl_mean_seconds"), 0.04);
    close(e0.get("token_weighted_itl_seconds"), 16.0 / 600.0);
    close(e0.get("acceptance_corrected_itl_seconds"), 16.0 / 600.0);
    close(e0.get("local_compute_iteration_tokens_mean"), 9.075);
    // Engine 1 (no spec decoding): raw TPOT (1.1 − 0.55) / (40 − 20) = 0.0275;
    // canonical 0.55 / (35 − 18) = 0.55 / 17; raw ITL (28 − 17.5) / (800 − 500) = 0.035;
    // token-weighted 10.5 / ((845 − 45) − (525 − 25)) = 10.5 / 300 = 0.035, and acceptance-
    // corrected equals raw ITL (no accepted tokens): 0.035;
    // local-compute (7345 − 4525) / (860 − 530) = 2820 / 330.
    let e1 = engine(&reports, "1");
    close(e1.get("raw_tpot_mean_seconds"), 0.0275);
    close(e1.get("canonical_tpot_mean_seconds"), 0.55 / 17.0);
    close(e1.get("raw_itl_mean_seconds"), 0.035);
    close(e1.get("token_weighted_itl_seconds"), 0.035);
    close(e1.get("acceptance_corrected_itl_seconds"), 0.035);
    close(
        e1.get("local_compute_iteration_tokens_mean"),
        2820.0 / 330.0,
    );
}

#[test]
fn json_objects_have_exactly_the_documented_keys() {
    let reports = run_texts(&fixture("t1.prom"), &fixture("t2.prom")).unwrap();
    let json = serde_json::to_value(&reports).unwrap();
    let keys: Vec<&str> = json[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    // The keys docs/TOOLS.md documents for `--json`: these, and one per further family.
    let documented = [
        "labels",
        "canonical_tpot_mean_seconds",
        "token_weighted_itl_seconds",
        "acceptance_corrected_itl_seconds",
        "local_compute_iteration_tokens_mean",
        "raw_tpot_mean_seconds",
        "raw_itl_mean_seconds",
        "slos",
        "note",
        "null_reasons",
    ];
    let readme = include_str!("../../../../docs/TOOLS.md");
    for key in &keys {
        assert!(
            readme.contains(&format!("`{key}`")),
            "docs/TOOLS.md does not name {key}"
        );
    }
    assert!(documented.iter().all(|k| keys.contains(k)), "{keys:?}");
    let families: Vec<&str> = crate::presentation::shown()
        .map(|f| crate::presentation::of(f).json_key)
        .collect();
    assert_eq!(keys.len(), 6 + families.len(), "{keys:?}");
    assert!(families.iter().all(|k| keys.contains(k)), "{keys:?}");
    assert_eq!(json[0]["labels"]["engine"], "0");
    // Each SLO object and each of its SLIs has the documented keys too (in any order: a
    // serde_json value sorts its keys).
    let slo = &json[0]["slos"][0];
    let sorted = |keys: Vec<&str>| {
        let mut keys: Vec<String> = keys.into_iter().map(str::to_owned).collect();
        keys.sort();
        keys
    };
    let keys_of =
        |v: &serde_json::Value| sorted(v.as_object().unwrap().keys().map(String::as_str).collect());
    let (slo_keys, sli_keys) = (keys_of(slo), keys_of(&slo["slis"][0]));
    assert_eq!(
        slo_keys,
        sorted(vec![
            "slo",
            "objective",
            "slis",
            "finished_requests",
            "goodput_lower_requests",
            "goodput_upper_requests",
            "goodput_lower_ratio",
            "goodput_upper_ratio",
            "naive_goodput_ratio"
        ])
    );
    assert_eq!(
        sli_keys,
        sorted(vec![
            "sli",
            "threshold_seconds",
            "objective",
            "events",
            "good_events",
            "attainment",
            "raw_attainment",
            "not_counted"
        ])
    );
    for key in slo_keys.iter().chain(&sli_keys) {
        assert!(
            readme.contains(&format!("`{key}`")),
            "docs/TOOLS.md does not name {key}"
        );
    }
}

#[test]
fn counter_reset_and_idle_engine_give_null_everywhere() {
    let reports = run_texts(&fixture("t2.prom"), &fixture("t3-restart.prom")).unwrap();
    let json = serde_json::to_value(&reports).unwrap();
    // Engine 0 restarted: `vllm:prefix_cache_queries_total` fell 14000 → 1000 on line 15 (the gauges
    // that fell on lines 3, 7 and 11 are not evidence). Engine 1 did nothing: every Δcount is 0.
    assert_eq!(engine(&reports, "0").note, "counter reset (AFTER line 15)");
    assert_eq!(
        engine(&reports, "1").note,
        "no new observation between the dumps (an idle engine, or the same scrape twice)"
    );
    for group in json.as_array().unwrap() {
        for (key, value) in group.as_object().unwrap() {
            if !matches!(key.as_str(), "labels" | "note" | "null_reasons" | "slos") {
                assert!(value.is_null(), "{key} = {value} for {}", group["labels"]);
            }
        }
    }
    // The restarted engine has no SLO reading, and says why; the idle one reads 0 events, so
    // no ratio.
    assert!(json[0]["slos"].is_null());
    assert_eq!(json[0]["null_reasons"]["slos"], "counter_reset");
    let idle = &json[1]["slos"][0];
    assert_eq!(idle["slis"][0]["events"], 0.0);
    for key in [
        "goodput_lower_ratio",
        "goodput_upper_ratio",
        "naive_goodput_ratio",
    ] {
        assert!(idle[key].is_null(), "{key}: {idle}");
    }
    assert!(idle["slis"][0]["attainment"].is_null());
    // The JSON tells the two nulls apart: the note, and a reason for each value.
    let (e0, e1) = (&json[0], &json[1]);
    assert_eq!(e0["note"], "counter reset (AFTER line 15)");
    assert_eq!(
        e1["note"],
        "no new observation between the dumps (an idle engine, or the same scrape twice)"
    );
    // (The reset group's reasons also name its null `slos`.)
    for (group, reason, more) in [(e0, "counter_reset", 1), (e1, "no_new_observation", 0)] {
        let reasons = group["null_reasons"].as_object().unwrap();
        assert_eq!(reasons.len(), value_keys().len() + more, "{reasons:?}");
        assert!(reasons.values().all(|r| r == reason), "{reasons:?}");
        assert!(reasons.contains_key("acceptance_corrected_itl_seconds"));
    }
}

#[test]
fn json_says_why_a_family_is_null_when_its_input_is_missing() {
    // Without `prompt_tokens_by_source_total` (vLLM < 0.16) the engine withholds local-compute
    // tokens for missing input; without the token histogram's le="1" bucket (custom buckets)
    // canonical TPOT is withheld for no_le_1_bound. The other values are there, with no reason.
    let strip = |t: String| -> String {
        t.lines()
            .filter(|l| {
                !l.starts_with("vllm:prompt_tokens_by_source_total{")
                    && (!l.starts_with("vllm:request_generation_tokens_bucket{")
                        || !l.contains("le=\"1.0\""))
            })
            .map(|l| format!("{l}\n"))
            .collect()
    };
    let reports = run_texts(&strip(fixture("t1.prom")), &strip(fixture("t2.prom"))).unwrap();
    let json = serde_json::to_value(&reports).unwrap();
    let e0 = &json[0];
    assert_eq!(e0["labels"]["engine"], "0");
    assert_eq!(
        e0["null_reasons"],
        serde_json::json!({
            "canonical_tpot_mean_seconds": "no_le_1_bound",
            "local_compute_iteration_tokens_mean": "missing_input",
        })
    );
    assert_eq!(
        e0["note"],
        "withheld: canonical TPOT no le 1 bound, local-compute tokens missing input"
    );
    assert!(e0["acceptance_corrected_itl_seconds"].is_f64());
    // A full pair of dumps: no note, no reason.
    let full =
        serde_json::to_value(run_texts(&fixture("t1.prom"), &fixture("t2.prom")).unwrap()).unwrap();
    assert!(full[0]["note"].is_null());
    assert_eq!(full[0]["null_reasons"], serde_json::json!({}));
}

#[test]
fn missing_input_is_null_for_its_family_only() {
    // Without `prompt_tokens_by_source_total` (vLLM < 0.16) local-compute tokens cannot be known.
    let strip = |t: String| -> String {
        t.lines()
            .filter(|l| !l.starts_with("vllm:prompt_tokens_by_source_total{"))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    let reports = run_texts(&strip(fixture("t1.prom")), &strip(fixture("t2.prom"))).unwrap();
    let e0 = engine(&reports, "0");
    assert_eq!(e0.get("local_compute_iteration_tokens_mean"), None);
    close(e0.get("canonical_tpot_mean_seconds"), 0.028);
    close(e0.get("token_weighted_itl_seconds"), 16.0 / 600.0);
}

/// A corrector `/metrics` dump (OpenMetrics) with engine 0's corrected values of t1 or t2
/// (EXPECTED.md §1 and §2) and a self-metric.
fn corrector_dump(tw: (f64, f64), tpot: (f64, f64, f64, f64)) -> String {
    let g = r#"engine="0",job="vllm",model_name="m""#;
    format!(
        "# HELP vllm_corrected_request_time_per_output_token_seconds TPOT.\n\
         # TYPE vllm_corrected_request_time_per_output_token_seconds histogram\n\
         vllm_corrected_request_time_per_output_token_seconds_bucket{{{g},le=\"0.025\"}} {}\n\
         vllm_corrected_request_time_per_output_token_seconds_bucket{{{g},le=\"+Inf\"}} {}\n\
         vllm_corrected_request_time_per_output_token_seconds_sum{{{g}}} {}\n\
         vllm_corrected_request_time_per_output_token_seconds_count{{{g}}} {}\n\
         # HELP vllm_corrected_token_weighted_itl_seconds ITL.\n\
         # TYPE vllm_corrected_token_weighted_itl_seconds summary\n\
         vllm_corrected_token_weighted_itl_seconds_sum{{{g}}} {}\n\
         vllm_corrected_token_weighted_itl_seconds_count{{{g}}} {}\n\
         # TYPE vllm_corrector_active_groups gauge\n\
         vllm_corrector_active_groups 1\n\
         # EOF\n",
        tpot.0, tpot.1, tpot.2, tpot.3, tw.0, tw.1
    )
}

#[test]
fn corrector_dumps_are_used_directly() {
    let before = corrector_dump((27.0, 1200.0), (16.0, 28.0, 0.8, 28.0));
    let after = corrector_dump((43.0, 1800.0), (31.0, 53.0, 1.5, 53.0));
    let reports = run_texts(&before, &after).unwrap();
    assert_eq!(reports.len(), 1, "the self-metric is no group");
    let r = &reports[0];
    assert_eq!(r.labels["job"], "vllm");
    // (1.5 − 0.8) / (53 − 28) = 0.028; (43 − 27) / (1800 − 1200) = 16 / 600.
    close(r.get("canonical_tpot_mean_seconds"), 0.028);
    close(r.get("token_weighted_itl_seconds"), 16.0 / 600.0);
    // Families the dump does not hold, and raw series it does not have.
    assert_eq!(r.get("acceptance_corrected_itl_seconds"), None);
    assert_eq!(r.get("local_compute_iteration_tokens_mean"), None);
    assert_eq!(r.get("raw_tpot_mean_seconds"), None);
    assert_eq!(r.get("raw_itl_mean_seconds"), None);
}

#[track_caller]
fn error(before: &str, after: &str) -> String {
    run_texts(before, after).unwrap_err().to_string()
}

#[test]
fn a_malformed_line_is_named() {
    let bad = fixture("t2.prom").replacen(
        "vllm:generation_tokens_total{model_name=\"Qwen/Qwen3-8B\",engine=\"0\"} 1870.0",
        "vllm:generation_tokens_total{model_name=\"Qwen/Qwen3-8B\",engine=\"0\"} abc",
        1,
    );
    assert_eq!(
        error(&fixture("t1.prom"), &bad),
        "AFTER after.prom: line 55: invalid sample value \"abc\""
    );
}

#[test]
fn a_repeated_series_is_named_with_both_lines() {
    // t2.prom has 386 lines; the copy of its line 55 becomes line 387.
    let twice = fixture("t2.prom")
        + "vllm:generation_tokens_total{model_name=\"Qwen/Qwen3-8B\",engine=\"0\"} 1.0\n";
    assert_eq!(
        error(&fixture("t1.prom"), &twice),
        "AFTER after.prom: line 387: series vllm:generation_tokens_total{model_name=\"Qwen/Qwen3-8B\",engine=\"0\"} appears twice (first on line 55)"
    );
}

#[test]
fn swapped_dumps_with_timestamps_are_refused() {
    // A real swap: the counter also fell, which must not pass for a counter reset.
    let before = "vllm:generation_tokens_total{engine=\"0\"} 20 2000\n";
    let after = "# a comment\nvllm:generation_tokens_total{engine=\"0\"} 10 1000\n";
    assert_eq!(
        error(before, after),
        "BEFORE before.prom and AFTER after.prom are swapped: vllm:generation_tokens_total{engine=\"0\"} is stamped 1970-01-01T00:00:01.000Z (1000 ms) in AFTER (line 2), older than 1970-01-01T00:00:02.000Z (2000 ms) in BEFORE (line 1); pass the earlier dump first"
    );
}

#[test]
fn swapped_fixture_dumps_are_refused_by_their_unchanged_created_times() {
    // t2 then t1: the first decreased series in label order is engine 0's e2e `+Inf` bucket, 60 on
    // line 328 of t2 and 32 on line 328 of t1, and its family's `_created` is 1.750000000123e+09
    // (2025-06-15T15:06:40.123Z) on line 357 of both.
    assert_eq!(
        error(&fixture("t2.prom"), &fixture("t1.prom")),
        "BEFORE before.prom and AFTER after.prom are swapped: vllm:e2e_request_latency_seconds_bucket{engine=\"0\",le=\"+Inf\",model_name=\"Qwen/Qwen3-8B\"} fell from 60 (BEFORE line 328) to 32 (AFTER line 328) while vllm:e2e_request_latency_seconds_created{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} = 1750000000.123 (2025-06-15T15:06:40.123Z) is the same in both (BEFORE line 357, AFTER line 357): the counter was not restarted, so AFTER is the older dump; pass the earlier dump first"
    );
}

#[test]
fn a_fallen_counter_is_a_swap_a_restart_or_undecided_by_its_created_time() {
    let dump = |tokens: u32, created: Option<u32>| {
        let mut text = format!("vllm:generation_tokens_total{{engine=\"0\"}} {tokens}\n");
        if let Some(c) = created {
            text += &format!("vllm:generation_tokens_created{{engine=\"0\"}} {c}\n");
        }
        text
    };
    // `_created` unchanged (100 s in both): the same counter fell, so the dumps are swapped.
    let swapped = error(&dump(20, Some(100)), &dump(10, Some(100)));
    assert!(
        swapped.contains("fell from 20 (BEFORE line 1) to 10 (AFTER line 1)")
            && swapped.contains("= 100 (1970-01-01T00:01:40.000Z) is the same in both"),
        "{swapped}"
    );
    // `_created` changed: a restart between the dumps, reported as a reset on line 1.
    let restart = run_texts(&dump(20, Some(100)), &dump(10, Some(200))).unwrap();
    assert_eq!(restart[0].note, "counter reset (AFTER line 1)");
    // No `_created`: a restart and a swap look the same, and the note says so.
    let undecided = run_texts(&dump(20, None), &dump(10, None)).unwrap();
    assert_eq!(
        undecided[0].note,
        "counter reset, or dumps swapped (AFTER line 1)"
    );
    assert_eq!(undecided[0].get("raw_itl_mean_seconds"), None);
}

#[test]
fn different_bucket_layouts_are_refused() {
    let dump = |le: &str, count: u32| {
        format!(
            "vllm:request_time_per_output_token_seconds_bucket{{engine=\"0\",le=\"{le}\"}} 1\n\
             vllm:request_time_per_output_token_seconds_bucket{{engine=\"0\",le=\"+Inf\"}} {count}\n\
             vllm:request_time_per_output_token_seconds_sum{{engine=\"0\"}} 0.1\n\
             vllm:request_time_per_output_token_seconds_count{{engine=\"0\"}} {count}\n"
        )
    };
    assert_eq!(
        error(&dump("0.01", 2), &dump("0.02", 3)),
        "AFTER after.prom: line 1: bucket vllm:request_time_per_output_token_seconds_bucket{engine=\"0\",le=\"0.02\"} is not in the other dump: the dumps have different bucket layouts"
    );
    // The same bound written two ways is one bucket: 1 request more, sum unchanged → mean 0.
    let same = run_texts(&dump("0.01", 2), &dump("1e-2", 3)).unwrap();
    assert_eq!(same[0].get("raw_tpot_mean_seconds"), Some(0.0));
}

#[test]
fn dumps_without_a_common_group_are_refused() {
    let e0 = "vllm:generation_tokens_total{engine=\"0\"} 10\n";
    let e1 = "vllm:generation_tokens_total{engine=\"1\"} 20\n";
    assert_eq!(
        error(e0, e1),
        "BEFORE and AFTER share no group of vLLM series: BEFORE has 1 group(s), AFTER has 1"
    );
}

/// A new user's report: AFTER from another target (another `model_name`) was accepted, and the
/// groups only in BEFORE showed dashes with no note, because the engine, run over both dumps,
/// gave AFTER corrected series for BEFORE's groups.
#[test]
fn dumps_of_two_targets_are_refused_even_though_the_engine_reads_both() {
    let other = fixture("t2.prom").replace("model_name=\"Qwen/Qwen3-8B\"", "model_name=\"other\"");
    assert_ne!(other, fixture("t2.prom"));
    assert_eq!(
        error(&fixture("t1.prom"), &other),
        "BEFORE and AFTER share no group of vLLM series: BEFORE has 2 group(s), AFTER has 2"
    );
    // One target in common: the other BEFORE-only group is reported as such.
    let engine_0_only: String = fixture("t2.prom")
        .lines()
        .filter(|l| !l.contains("engine=\"1\""))
        .map(|l| format!("{l}\n"))
        .collect();
    let reports = run_texts(&fixture("t1.prom"), &engine_0_only).unwrap();
    let notes: Vec<&str> = reports.iter().map(|r| r.note.as_str()).collect();
    assert!(notes.contains(&"only in BEFORE"), "{notes:?}");
}

#[test]
fn table_shows_milliseconds_and_factors_out_shared_labels() {
    let reports = run_texts(&fixture("t1.prom"), &fixture("t2.prom")).unwrap();
    let text = render_table("t1.prom", "t2.prom", &reports);
    assert!(
        text.contains("Labels of every group: model_name=\"Qwen/Qwen3-8B\""),
        "{text}"
    );
    let row = text
        .lines()
        .find(|l| l.starts_with("engine=\"0\""))
        .unwrap_or_else(|| panic!("{text}"));
    // 0.025 s, 0.028 s, 0.04 s, 16/600 s = 26.667 ms, 9.075 tokens; then one cell per further
    // family, and no note.
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells.len(), 1 + value_keys().len(), "{row}");
    assert_eq!(
        cells[..7],
        [
            "engine=\"0\"",
            "25.000",
            "28.000",
            "40.000",
            "26.667",
            "26.667",
            "9.07"
        ]
    );
}

#[tokio::test]
async fn dumps_are_fetched_over_http() {
    use axum::routing::get;
    let app = axum::Router::new()
        .route("/t1", get(|| async { fixture("t1.prom") }))
        .route("/t2", get(|| async { fixture("t2.prom") }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(axum::serve(listener, app).into_future());
    let before = load("BEFORE", &format!("http://{addr}/t1")).await.unwrap();
    let after = load("AFTER", &format!("http://{addr}/t2")).await.unwrap();
    let reports = inspect(&before, &after).unwrap();
    close(
        engine(&reports, "0").get("canonical_tpot_mean_seconds"),
        0.028,
    );
    let missing = load("AFTER", &format!("http://{addr}/nope"))
        .await
        .unwrap_err();
    assert_eq!(
        missing.to_string(),
        format!("AFTER http://{addr}/nope: answered 404 Not Found")
    );
    server.abort();
}

#[test]
fn identical_dumps_say_there_is_no_new_observation() {
    // The same scrape twice: every increase is 0, so no mean exists, and the note says why.
    let reports = run_texts(&fixture("t1.prom"), &fixture("t1.prom")).unwrap();
    assert!(!reports.is_empty());
    for r in &reports {
        assert_eq!(r.get("canonical_tpot_mean_seconds"), None);
        assert_eq!(r.get("raw_itl_mean_seconds"), None);
        assert!(r.note.starts_with("no new observation"), "{:?}", r.note);
    }
}

#[tokio::test]
async fn a_refused_connection_and_a_silent_server_are_told_apart() {
    // Nothing listens: the port of a listener just closed.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let refused = load("BEFORE", &format!("http://127.0.0.1:{port}/metrics"))
        .await
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        format!(
            "BEFORE http://127.0.0.1:{port}/metrics: connection refused: nothing listens at that address and port"
        )
    );
    // A listener that never accepts: the kernel completes the handshake, no answer ever comes.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    let timed_out = load_within(
        "AFTER",
        &format!("http://{addr}/metrics"),
        Duration::from_millis(300),
    )
    .await
    .unwrap_err();
    assert_eq!(
        timed_out.to_string(),
        format!(
            "AFTER http://{addr}/metrics: timed out after 300ms: the server did not answer in time"
        )
    );
    assert_eq!(FETCH_TIMEOUT, Duration::from_secs(30));
    drop(silent);
}

#[test]
fn an_empty_dump_says_it_has_no_vllm_series() {
    let err = run_texts("", &fixture("t2.prom")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "BEFORE before.prom: no vllm:* series in BEFORE (an empty dump, or not a vLLM /metrics)"
    );
    let err = run_texts(&fixture("t1.prom"), "# HELP up x\n# TYPE up gauge\nup 1\n").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("AFTER after.prom: no vllm:* series in AFTER"),
        "{err}"
    );
}

/// A new user's report: on real vLLM's one-token batch the table showed dashes with an empty note
/// (only `--json` said why). No request had a second token, so there is no TPOT, no ITL sample:
/// the note names those families.
#[test]
fn table_note_names_the_families_with_nothing_new_between_the_dumps() {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/real-vllm-0.32.0/one_token_d3/"
    );
    let read = |f: &str| std::fs::read_to_string(format!("{dir}{f}")).unwrap();
    let reports = run_texts(&read("before.prom"), &read("after.prom")).unwrap();
    assert_eq!(reports.len(), 1);
    // Every family read from the ITL or TPOT histograms, in table order, and raw ITL last; not
    // local-compute iteration tokens, which did grow.
    let note = &reports[0].note;
    let rest = note
        .strip_prefix("nothing new between the dumps for canonical TPOT, token-weighted ITL, acceptance-corrected ITL")
        .unwrap_or_else(|| panic!("{note}"));
    assert!(
        rest.ends_with(", raw ITL") && !rest.contains("local-compute"),
        "{note}"
    );
    assert_eq!(
        reports[0].get("raw_tpot_mean_seconds"),
        Some(0.0),
        "24 requests observed as 0 s"
    );
}
