//! (g) `/metrics` passes `promtool check metrics` (2.42 and 3.5), and its OpenMetrics form
//! carries the same values; (h) the shipped alert rules pass their promtool unit tests; (i) the
//! SLO rules generated for a full spec, and the PromQL of their Sloth and Pyrra forms, pass
//! `promtool check rules`.

use std::process::{Command, Stdio};

use test_support::promtool::Promtool;
use test_support::tools::{Tool, require};

use crate::expected::{assert_group, fixture};
use crate::fixture::{Scrape, group, scrape_times};
use crate::harness::Corrector;
use crate::metrics::Snapshot;

#[test]
fn metrics_output_passes_promtool_check_metrics() {
    let [t1, t2, _] = scrape_times();
    let corrector = Corrector::start_unsettled();
    corrector.write(&Scrape::T1.points(t1));
    corrector.write(&Scrape::T2.points(t2));
    let text = corrector.metrics_text();
    assert!(
        text.contains("vllm_corrected_"),
        "corrected families are served\n{text}"
    );
    for tool in [Tool::PROMTOOL_2, Tool::PROMTOOL_3] {
        let Some(promtool) = require(tool).map(Promtool::new) else {
            continue;
        };
        let report = promtool.check_metrics(&text);
        assert!(
            report.success && report.lines().is_empty(),
            "{} found problems:\n{}\n--- served ---\n{text}",
            report.command,
            report.output
        );
    }
}

#[test]
fn openmetrics_output_parses_and_serves_the_same_hand_values() {
    let [t1, t2, _] = scrape_times();
    let corrector = Corrector::start_unsettled();
    corrector.write(&Scrape::T1.points(t1));
    corrector.write(&Scrape::T2.points(t2));
    let open_metrics = Snapshot::parse_openmetrics(&corrector.metrics_openmetrics());
    for engine in ["0", "1"] {
        assert_group(
            &open_metrics,
            &group(engine),
            &fixture(Scrape::T2, engine),
            &format!("OpenMetrics engine {engine}"),
        );
    }
}

/// Runs `promtool ARGS…`, failing the test with its output unless it succeeds.
fn promtool_ok(promtool: &std::path::Path, args: &[&std::ffi::OsStr], what: &str) {
    let out = Command::new(promtool)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::null())
        .output()
        .expect("run promtool");
    assert!(
        out.status.success(),
        "promtool failed on {what}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// (h) The shipped alert and SLO rules pass their promtool unit tests: every SLO alert of the
/// shipped default (fast page, slow page, tickets, budget) fires where the hand-computed inputs
/// say and stays silent elsewhere (`deploy/alerts/tests/*.test.yml`, as scripts/check-deploy.sh
/// runs them).
#[test]
fn shipped_alert_rules_pass_their_promtool_unit_tests() {
    for tool in [Tool::PROMTOOL_2, Tool::PROMTOOL_3] {
        let Some(promtool) = require(tool) else {
            continue;
        };
        shipped_alert_rules_pass_unit_tests_of(&promtool);
    }
}

/// (h) with one promtool binary.
fn shipped_alert_rules_pass_unit_tests_of(promtool: &std::path::Path) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/alerts/tests");
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".test.yml"))
        .collect();
    files.sort();
    assert!(
        files.iter().any(|f| f.ends_with("slo-default.test.yml")),
        "{files:?}"
    );
    let mut args = vec![std::ffi::OsStr::new("test"), std::ffi::OsStr::new("rules")];
    args.extend(files.iter().map(|f| f.as_os_str()));
    promtool_ok(promtool, &args, "deploy/alerts/tests");
}

/// (i) `vllm-corrector rules` for a spec with every field, in each source, passes `promtool check
/// rules`; so does the PromQL inside its Sloth and Pyrra outputs, wrapped in a rule file
/// (`{{.window}}` as 5m; Pyrra's selectors as expressions).
#[test]
fn generated_slo_rules_and_the_sloth_and_pyrra_queries_pass_promtool_check_rules() {
    let Some(promtool) = require(Tool::PROMTOOL_2) else {
        return;
    };
    let dir = crate::harness::TempDir::new("slo-rules");
    let config = dir.path().join("config.yml");
    std::fs::write(
        &config,
        "slos:\n  - name: chat\n    objective: 0.99\n    window: 28d\n    \
         match: {model_name: \"meta-llama/.*\", namespace: \"llm\\\\.prod|llm-\\\"x\\\"\"}\n    \
         ttft: 0.5\n    tpot: 0.05\n    e2el: 20\n    itl_per_token: 0.03\n    \
         objectives: {ttft: 0.95}\n  - name: batch\n    objective: 0.9\n    window: 7d\n    \
         by: []\n    e2el: 0.00001\n",
    )
    .unwrap();
    let bin = env!("CARGO_BIN_EXE_vllm-corrector");
    let render = |format: &str, source: &str| -> String {
        let out = Command::new(bin)
            .args(["rules", "--config.file"])
            .arg(&config)
            .args(["--format", format, "--source", source])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let mut queries = Vec::new();
    for source in ["counters", "buckets"] {
        let path = dir.path().join(format!("{source}.rules.yml"));
        std::fs::write(&path, render("rules", source)).unwrap();
        promtool_ok(
            &promtool,
            &["check".as_ref(), "rules".as_ref(), path.as_os_str()],
            &format!("the {source} rules"),
        );
        let docs = |text: String| -> Vec<serde_json::Value> {
            text.split("\n---\n")
                .skip(1)
                .map(|d| serde_saphyr::from_str(d).unwrap())
                .collect()
        };
        for doc in docs(render("sloth", source)) {
            for slo in doc["slos"].as_array().unwrap() {
                for key in ["error_query", "total_query"] {
                    let q = slo["sli"]["events"][key].as_str().unwrap();
                    queries.push(q.replace("{{.window}}", "5m"));
                }
            }
        }
        for doc in docs(render("pyrra", source)) {
            if doc["kind"] == "ServiceLevelObjective" {
                let indicator = &doc["spec"]["indicator"];
                let kind = if source == "counters" {
                    "ratio"
                } else {
                    "latency"
                };
                for part in ["errors", "success", "total"] {
                    if let Some(q) = indicator[kind][part]["metric"].as_str() {
                        queries.push(q.to_owned());
                    }
                }
            }
        }
    }
    // 2 x (5 Sloth SLOs x 2 queries) + (5 ratio + 5 latency indicators) x 2 selectors.
    assert_eq!(queries.len(), 40);
    let wrapped = serde_json::json!({"groups": [{"name": "sloth-pyrra-queries", "rules":
        queries.iter().enumerate().map(|(i, q)| serde_json::json!({"record": format!("q{i}"), "expr": q}))
            .collect::<Vec<_>>()}]});
    let path = dir.path().join("queries.rules.yml");
    // JSON is YAML: promtool reads it as a rule file.
    std::fs::write(&path, wrapped.to_string()).unwrap();
    promtool_ok(
        &promtool,
        &["check".as_ref(), "rules".as_ref(), path.as_os_str()],
        "the Sloth and Pyrra queries",
    );
}
