//! Tests of `slo_rules.rs`: the window table and its scaling, the `le` matcher against the
//! spellings Prometheus meets, names of two SLOs side by side, the Sloth and Pyrra fields, and the
//! shipped deploy/alerts files equal to the output for the shipped default.

use super::groups::Names;
use super::le::le_matcher;
use super::windows::{burn_windows, ratio_windows, scale};
use super::*;
use engine::slo::{LabelMatch, Sli, SliTarget, Slo};

const MIN: u64 = 60_000;
const DAY: u64 = 1440 * MIN;

/// The spec of a configuration file holding `text`. Each call writes its own file: tests run in
/// parallel, and two of them may parse the same text.
fn spec(text: &str) -> SloSpec {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("slo-rules-{}-{call}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("config.yml");
    std::fs::write(&path, text).unwrap();
    let spec = service::config::Config::from_file(&path).unwrap().slos;
    let _ = std::fs::remove_dir_all(dir);
    spec
}

fn yaml_value(text: &str) -> serde_json::Value {
    serde_saphyr::from_str(text).expect("the output parses as YAML")
}

#[test]
fn the_30_day_table_is_the_sre_workbook_one() {
    let w = burn_windows(30 * DAY);
    let got: Vec<(&str, u64, u64, f64, u64)> = w
        .iter()
        .map(|w| {
            (
                w.severity.label(),
                w.long_ms / MIN,
                w.short_ms / MIN,
                w.factor,
                w.for_ms / MIN,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("critical", 60, 5, 14.4, 2),
            ("critical", 360, 30, 6.0, 2),
            ("warning", 1440, 120, 3.0, 15),
            ("warning", 4320, 360, 1.0, 15),
        ]
    );
    // Each factor spends its share of the budget over its long window: 14.4 * 1h / 30d = 2 %.
    for w in &w {
        let spent = w.factor * w.long_ms as f64 / (30 * DAY) as f64 * 100.0;
        assert!((spent - w.budget_percent).abs() < 1e-9, "{w:?}: {spent}");
    }
    let minutes: Vec<u64> = ratio_windows(30 * DAY).iter().map(|w| w / MIN).collect();
    assert_eq!(minutes, [5, 30, 60, 120, 360, 1440, 4320]);
}

#[test]
fn windows_scale_with_the_slo_window_to_whole_minutes_at_least_one() {
    // 28 d: 5m * 28/30 = 4.67 -> 5m, 30m -> 28m, 1h -> 56m, 2h -> 112m, 6h -> 336m,
    // 1d -> 1344m, 3d -> 4032m.
    let minutes: Vec<u64> = ratio_windows(28 * DAY).iter().map(|w| w / MIN).collect();
    assert_eq!(minutes, [5, 28, 56, 112, 336, 1344, 4032]);
    // 7 d: 5m -> 1.17 -> 1m, 30m -> 7m, 1h -> 14m, 2h -> 28m, 6h -> 84m, 1d -> 336m, 3d -> 1008m.
    let minutes: Vec<u64> = ratio_windows(7 * DAY).iter().map(|w| w / MIN).collect();
    assert_eq!(minutes, [1, 7, 14, 28, 84, 336, 1008]);
    // 1 h: everything at the 1-minute floor but 3d -> 6m and 6h, 1d -> 0.5, 2m.
    assert_eq!(scale(5 * MIN, 60 * MIN), MIN);
    assert_eq!(scale(3 * DAY, 60 * MIN), 6 * MIN);
    // Halves round up: 2m * 45/30 = 3m exactly; 15m * 1/2 = 7.5 -> 8m.
    assert_eq!(scale(2 * MIN, 45 * DAY), 3 * MIN);
    assert_eq!(scale(15 * MIN, 15 * DAY), 8 * MIN);
}

#[test]
fn le_matchers_match_every_spelling_of_the_edge_and_no_other_value() {
    for (t, want, good, bad) in [
        (
            0.05,
            r#"le=~"0?[.]050*""#,
            &["0.05", ".05", "0.050", "0.0500"][..],
            &["0.5", "0.005", "0.051", "10.05", "5e-02"][..],
        ),
        (
            20.0,
            r#"le=~"20([.]0*)?""#,
            &["20", "20.0", "20.00"][..],
            &["2", "200", "20.5", "120.0", "2e+01"][..],
        ),
        (
            0.1,
            r#"le=~"0?[.]10*""#,
            &["0.1", "0.10", ".1"][..],
            &["1", "0.01", "0.11"][..],
        ),
        (
            2.5,
            r#"le=~"2[.]50*""#,
            &["2.5", "2.50"][..],
            &["25", "2.05", "12.5"][..],
        ),
        (
            0.00001,
            r#"le=~"0?[.]000010*|1([.]0*)?[eE]-0*5""#,
            &["0.00001", "1e-05", "1e-5", "1.0e-05"][..],
            &["1e-06", "1e+05", "0.0001"][..],
        ),
        (
            2e6,
            r#"le=~"2000000([.]0*)?|2([.]0*)?[eE][+]?0*6""#,
            &["2000000.0", "2e+06", "2e+006", "2e6"][..],
            &["2e+07", "200000.0"][..],
        ),
    ] {
        let matcher = le_matcher(t);
        assert_eq!(matcher, want);
        let inner = matcher.trim_start_matches("le=~\"").trim_end_matches('"');
        let re = regex::Regex::new(&format!("^(?:{inner})$")).unwrap();
        for s in good {
            assert!(re.is_match(s), "{t}: {matcher} should match {s}");
            let parsed: f64 = s.parse().unwrap();
            assert_eq!(parsed, t, "{s} is a spelling of {t}");
        }
        for s in bad {
            assert!(!re.is_match(s), "{t}: {matcher} should not match {s}");
        }
    }
}

const TWO: &str = "\
slos:
  - name: chat
    objective: 0.99
    window: 28d
    match: {model_name: \"meta-llama/.*\"}
    ttft: 0.5
    tpot: 0.05
    objectives: {ttft: 0.95}
  - name: chat_fast
    objective: 0.999
    by: [model_name]
    e2el: 20
";

#[test]
fn two_slos_coexist_under_their_own_names_with_their_own_objectives() {
    let spec = spec(TWO);
    let counters = SloRulesOptions {
        source: Source::Counters,
        ..SloRulesOptions::default()
    };
    let text = render(&spec, &counters);
    let doc = yaml_value(&text);
    let groups = doc["groups"].as_array().unwrap();
    let names: Vec<&str> = groups.iter().map(|g| g["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "vllm-slo-chat.sli",
            "vllm-slo-chat.budget",
            "vllm-slo-chat.alerts",
            "vllm-slo-chat_fast.sli",
            "vllm-slo-chat_fast.budget",
            "vllm-slo-chat_fast.alerts",
        ]
    );
    let rules = |group: usize, key: &str| -> Vec<String> {
        groups[group]["rules"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r[key].as_str().map(str::to_owned))
            .collect()
    };
    // The 28d window pairs, as in the scaling test.
    assert_eq!(
        rules(0, "record")[..7],
        ["5m", "28m", "56m", "1h52m", "5h36m", "22h24m", "2d19h12m"]
            .map(|w| format!("vllm_slo_chat:sli_error:ratio_rate{w}"))
    );
    assert!(rules(4, "record").contains(&"vllm_slo_chat_fast:sli_error:ratio_rate30d".to_owned()));
    assert_eq!(
        rules(2, "alert")
            .iter()
            .filter(|a| *a == "VllmSloChatErrorBudgetBurn")
            .count(),
        8,
        "4 pairs x 2 SLIs"
    );
    assert_eq!(rules(5, "alert")[0], "VllmSloChatFastErrorBudgetBurn");
    // ttft's own objective 0.95 in its thresholds; tpot keeps the SLO's 0.99.
    let alerts = groups[2]["rules"].as_array().unwrap();
    let expr = |i: usize| alerts[i]["expr"].as_str().unwrap().to_owned();
    assert!(
        expr(0).contains("ratio_rate56m{sli=\"ttft\"} > (14.4 * (1 - 0.95))"),
        "{}",
        expr(0)
    );
    assert!(
        expr(4).contains("ratio_rate56m{sli=\"tpot\"} > (14.4 * (1 - 0.99))"),
        "{}",
        expr(4)
    );
    assert_eq!(alerts[0]["labels"]["long_window"], "56m");
    assert_eq!(alerts[0]["for"], "2m");
    // by: [model_name] only, and the SLO's name in each selector.
    let fast = groups[3]["rules"][0]["expr"].as_str().unwrap();
    assert!(
        fast.contains("sum by (slo, sli, model_name) (rate(vllm_corrected_slo_good_events_total{slo=\"chat_fast\"}[5m]))"),
        "{fast}"
    );
    // The counters need no match: the corrector counts only the groups the SLO covers. Only
    // the naive reading of vLLM's own series (raw_good) carries it.
    for group in groups {
        for rule in group["rules"].as_array().unwrap() {
            let expr = rule["expr"].as_str().unwrap();
            let raw = rule["record"]
                .as_str()
                .is_some_and(|r| r.contains(":raw_good:"));
            assert_eq!(
                expr.contains("meta-llama"),
                raw && rule["labels"]["slo"] == "chat",
                "{expr}"
            );
        }
    }
    assert!(text.contains("# SLO chat: window 28d, per namespace, model_name; groups with model_name=~\"meta-llama/.*\"."));
}

#[test]
fn bucket_rules_carry_the_match_and_the_le_matcher_and_label_the_sli() {
    let options = SloRulesOptions {
        source: Source::Buckets,
        ..SloRulesOptions::default()
    };
    let doc = yaml_value(&render(&spec(TWO), &options));
    let rule = &doc["groups"][0]["rules"][0];
    assert_eq!(rule["record"], "vllm_slo_chat:sli_error:ratio_rate5m");
    assert_eq!(rule["labels"]["slo"], "chat");
    assert_eq!(rule["labels"]["sli"], "ttft");
    assert_eq!(
        rule["expr"].as_str().unwrap(),
        "1 - (\n    sum by (namespace, model_name) (rate(vllm:time_to_first_token_seconds_bucket{model_name=~\"meta-llama/.*\",le=~\"0?[.]50*\"}[5m]))\n  /\n    sum by (namespace, model_name) (rate(vllm:time_to_first_token_seconds_count{model_name=~\"meta-llama/.*\"}[5m]))\n)\n"
    );
    let text = serde_json::to_string(&doc).unwrap();
    assert!(!text.contains("goodput"), "no goodput from buckets");
}

#[test]
fn sloth_specs_hold_one_slo_per_sli_with_percent_objectives_per_window() {
    let options = SloRulesOptions {
        format: Format::Sloth,
        source: Source::Counters,
        ..SloRulesOptions::default()
    };
    let text = render(&spec(TWO), &options);
    let docs: Vec<&str> = text.split("\n---\n").skip(1).collect();
    assert_eq!(docs.len(), 2, "a 28d and a 30d document\n{text}");
    assert!(docs[0].starts_with(
        "# SLOs with a 28d window: sloth generate -i <this document> --default-slo-period 28d"
    ));
    let chat = yaml_value(docs[0]);
    assert_eq!(chat["version"], "prometheus/v1");
    let slos = chat["slos"].as_array().unwrap();
    assert_eq!(slos.len(), 2);
    assert_eq!(slos[0]["name"], "chat-ttft");
    assert_eq!(slos[0]["objective"], 95.0);
    assert_eq!(slos[1]["objective"], 99.0);
    assert_eq!(
        slos[1]["sli"]["events"]["total_query"].as_str().unwrap(),
        "sum by (namespace, model_name) (rate(vllm_corrected_slo_events_total{slo=\"chat\",sli=\"tpot\"}[{{.window}}]))\n"
    );
    assert_eq!(
        slos[1]["alerting"]["page_alert"]["labels"]["severity"],
        "critical"
    );
    assert_eq!(yaml_value(docs[1])["slos"][0]["objective"], 99.9);
}

#[test]
fn pyrra_objects_read_the_recorded_bad_events_or_the_buckets() {
    let options = SloRulesOptions {
        format: Format::Pyrra,
        source: Source::Counters,
        ..SloRulesOptions::default()
    };
    let text = render(&spec(TWO), &options);
    let docs: Vec<serde_json::Value> = text.split("\n---\n").skip(1).map(yaml_value).collect();
    assert_eq!(docs.len(), 4, "the helper rule and 3 SLO objects");
    assert_eq!(
        docs[0]["spec"]["groups"][0]["rules"][0]["expr"],
        "vllm_corrected_slo_events_total - vllm_corrected_slo_good_events_total\n"
    );
    let ttft = &docs[1];
    assert_eq!(ttft["metadata"]["name"], "chat-ttft");
    assert_eq!(
        ttft["metadata"]["labels"]["release"],
        "kube-prometheus-stack"
    );
    assert_eq!(ttft["spec"]["target"], "95");
    assert_eq!(ttft["spec"]["window"], "28d");
    assert_eq!(
        ttft["spec"]["indicator"]["ratio"]["errors"]["metric"],
        "vllm_slo:bad_events:total{slo=\"chat\",sli=\"ttft\"}"
    );
    assert_eq!(docs[3]["metadata"]["name"], "chat-fast-e2el");
    assert_eq!(docs[3]["spec"]["target"], "99.9");
    let options = SloRulesOptions {
        format: Format::Pyrra,
        source: Source::Buckets,
        ..SloRulesOptions::default()
    };
    let text = render(&spec(TWO), &options);
    let docs: Vec<serde_json::Value> = text.split("\n---\n").skip(1).map(yaml_value).collect();
    assert_eq!(docs.len(), 3, "no helper rule");
    let e2el = &docs[2]["spec"]["indicator"]["latency"];
    // Written as vLLM prints the edge: 20.0.
    assert_eq!(
        e2el["success"]["metric"],
        "vllm:e2e_request_latency_seconds_bucket{le=\"20.0\"}"
    );
    assert_eq!(e2el["grouping"], serde_json::json!(["model_name"]));
}

#[test]
fn names_are_camel_case_alerts_and_snake_case_records() {
    let slo = Slo {
        name: "chat_fast_2".into(),
        description: String::new(),
        objective: 0.9,
        window_ms: 30 * DAY,
        matchers: vec![LabelMatch {
            label: "pod".into(),
            regex: "a\\.b\"".into(),
        }],
        by: vec![],
        slis: vec![SliTarget {
            sli: Sli::Ttft,
            threshold_seconds: 1.0,
            objective: 0.9,
        }],
    };
    let names = Names::of(&slo);
    assert_eq!(names.alert, "VllmSloChatFast2");
    assert_eq!(
        names.ratio(DAY),
        "vllm_slo_chat_fast_2:sli_error:ratio_rate1d"
    );
    // PromQL string escapes: a\.b" is written "a\\.b\"".
    assert_eq!(groups::match_matchers(&slo), ["pod=~\"a\\\\.b\\\"\""]);
}

#[test]
fn an_empty_spec_prints_no_groups() {
    let doc = yaml_value(&render(
        &SloSpec { slos: vec![] },
        &SloRulesOptions::default(),
    ));
    assert_eq!(doc["groups"], serde_json::json!([]));
}

/// `deploy/alerts/` ships the output for the shipped default, as a rule file and a PrometheusRule.
#[test]
fn deploy_alerts_slo_files_are_the_rendered_default() {
    let base = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/alerts/");
    let spec = SloSpec::shipped_default();
    // The counters (the default source) and, for deploy/alerts/tests/slo-buckets.test.yml, the
    // buckets.
    for (file, format, source) in [
        ("slo.rules.yml", Format::Rules, Source::Counters),
        (
            "slo-prometheusrule.yaml",
            Format::PrometheusRule,
            Source::Counters,
        ),
        (
            "tests/slo-buckets.rules.yml",
            Format::Rules,
            Source::Buckets,
        ),
    ] {
        let path = format!("{base}{file}");
        let options = SloRulesOptions {
            format,
            source,
            ..SloRulesOptions::default()
        };
        let want = render(&spec, &options);
        if std::env::var_os("VLLM_CORRECTOR_BLESS").is_some() {
            std::fs::write(&path, &want).expect("write the rules file");
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "{path} is not the output for the shipped default: regenerate it with\n  \
             vllm-corrector rules --format {} --source {} > deploy/alerts/{file}\nor\n  \
             VLLM_CORRECTOR_BLESS=1 cargo test -p vllm-corrector-tools slo_rules",
            match format {
                Format::Rules => "rules",
                _ => "prometheusrule",
            },
            match source {
                Source::Counters => "counters",
                Source::Buckets => "buckets",
            }
        );
    }
    // The PrometheusRule holds exactly the rule file's groups.
    let rules = yaml_value(&std::fs::read_to_string(format!("{base}slo.rules.yml")).unwrap());
    let object =
        yaml_value(&std::fs::read_to_string(format!("{base}slo-prometheusrule.yaml")).unwrap());
    assert_eq!(object["spec"]["groups"], rules["groups"]);
    assert_eq!(object["kind"], "PrometheusRule");
}

#[test]
fn bucket_rules_warn_of_a_threshold_that_is_no_default_vllm_bucket_edge() {
    // vLLM's default TPOT edges around 0.06 are 0.05 and 0.075 (docs/METRICS.md), so a 60 ms
    // threshold matches no bucket; 0.1 s and TTFT's 0.5 s are edges, E2EL's 12 s is not.
    let text = "slos:\n  - name: chat\n    objective: 0.99\n    tpot: 0.06\n    ttft: 0.5\n    \
                e2el: 12\n  - name: batch\n    objective: 0.9\n    tpot: 0.1\n";
    let warnings = |source| {
        let options = SloRulesOptions {
            source,
            ..SloRulesOptions::default()
        };
        render(&spec(text), &options)
            .lines()
            .filter(|l| l.contains("WARNING") && l.contains("bucket edges"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        warnings(Source::Buckets),
        [
            "#   WARNING: 0.06 s is not one of vLLM's default TPOT bucket edges: these rules",
            "#   WARNING: 12 s is not one of vLLM's default E2EL bucket edges: these rules",
        ]
    );
    // The counters say what the corrector does with such a threshold.
    assert_eq!(
        warnings(Source::Counters),
        [
            "#   WARNING: 0.06 s is not one of vLLM's default TPOT bucket edges: the corrector",
            "#   WARNING: 12 s is not one of vLLM's default E2EL bucket edges: the corrector",
        ]
    );
    let counters = render(&spec(text), &SloRulesOptions::default());
    assert!(counters.contains("#   withholds this SLI (reason not_a_bucket_edge)"));
}

/// The counters' goodput ratio divides the bounds' rates by the finished requests' rate, each
/// summed by the `by` labels first, keeping `bound`; the naive reading beside it is vLLM's own
/// bucket at each goodput SLI's threshold (the `match:` applied: those series are not the
/// corrector's), and none for ITL per token.
#[test]
fn counter_rules_record_the_goodput_bounds_and_the_raw_reading_beside_them() {
    let doc = yaml_value(&render(&spec(TWO), &SloRulesOptions::default()));
    let rules = doc["groups"][0]["rules"].as_array().unwrap();
    let rule = |name: &str, sli: Option<&str>| -> String {
        rules
            .iter()
            .find(|r| r["record"] == name && sli.is_none_or(|s| r["labels"]["sli"] == s))
            .unwrap_or_else(|| panic!("no {name} {sli:?}"))["expr"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        rule("vllm_slo_chat:goodput:ratio_rate1h", None),
        "sum by (slo, bound, namespace, model_name) (rate(vllm_corrected_goodput_requests_total{slo=\"chat\"}[1h]))\n\
         / ignoring (bound) group_left\n\
         sum by (slo, namespace, model_name) (rate(vllm_corrected_slo_finished_requests_total{slo=\"chat\"}[1h]))\n"
    );
    assert_eq!(
        rule("vllm_slo_chat:raw_good:ratio_rate5m", Some("ttft")),
        "sum by (namespace, model_name) (rate(vllm:time_to_first_token_seconds_bucket{model_name=~\"meta-llama/.*\",le=~\"0?[.]50*\"}[5m]))\n\
         /\n\
         sum by (namespace, model_name) (rate(vllm:time_to_first_token_seconds_count{model_name=~\"meta-llama/.*\"}[5m]))\n"
    );
    assert!(
        rule("vllm_slo_chat:raw_good:ratio_rate1h", Some("tpot"))
            .contains("rate(vllm:request_time_per_output_token_seconds_bucket{model_name=~\"meta-llama/.*\",le=~\"0?[.]050*\"}[1h])")
    );
    let raw_slis: Vec<&str> = rules
        .iter()
        .filter(|r| r["record"] == "vllm_slo_chat:raw_good:ratio_rate5m")
        .map(|r| r["labels"]["sli"].as_str().unwrap())
        .collect();
    assert_eq!(
        raw_slis,
        ["ttft", "tpot"],
        "chat has no E2EL; ITL is no goodput SLI"
    );
    // The SLO window's goodput ratio is in the budget group.
    let budget = serde_json::to_string(&doc["groups"][1]).unwrap();
    assert!(budget.contains("vllm_slo_chat:goodput:ratio_rate28d"));
}

#[test]
fn bucket_rules_read_vllms_histograms_under_the_config_files_input_prefix() {
    let dir = std::env::temp_dir().join(format!("slo-rules-prefix-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("config.yml");
    std::fs::write(
        &path,
        "input:\n  metric_prefix: \"kserve_vllm:\"\nslos:\n  - name: chat\n    objective: 0.99\n    ttft: 0.5\n    e2el: 20\n    tpot: 0.05\n",
    )
    .unwrap();
    let args = |source| RulesArgs {
        command: None,
        slo: SloRulesOptions {
            config_file: Some(path.clone()),
            source,
            ..SloRulesOptions::default()
        },
    };
    let text = run(&args(Source::Buckets)).unwrap().text;
    // The counters' naive reading reads vLLM's histograms under the prefix too.
    let counters = run(&args(Source::Counters)).unwrap().text;
    let _ = std::fs::remove_dir_all(dir);
    assert!(counters.contains("rate(kserve_vllm:request_time_per_output_token_seconds_bucket{"));
    assert!(!counters.replace("kserve_vllm:", "").contains("vllm:"));
    assert!(text.contains("rate(kserve_vllm:time_to_first_token_seconds_bucket{"));
    assert!(text.contains("rate(kserve_vllm:e2e_request_latency_seconds_count["));
    assert!(
        !text.replace("kserve_vllm:", "").contains("vllm:"),
        "no series under vLLM's own prefix"
    );
    // The corrector's own families keep their names.
    assert!(text.contains("rate(vllm_corrected_request_time_per_output_token_seconds_bucket{"));
}
