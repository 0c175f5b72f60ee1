//! The Grafana dashboard (Deploy issue, item 5): every panel query, and every template variable's
//! `label_values`, runs against a real Prometheus (2.42 and 3.5) holding simulated vLLM data and
//! the corrector's output for it ([`crate::simdata`]), with the SLO rules of `vllm-corrector
//! rules` for the corrector's SLOs loaded, and none may fail or come back empty.

use serde_json::Value;

use test_support::tools::Tool;

use crate::simdata::{NAMESPACE, SimData, now_ms};

const DASHBOARD: &str = include_str!("../../deploy/grafana/vllm-corrector.json");

/// Grafana's built-in interval variables, as a 15 s scrape interval and a 10 min range give them.
const BUILT_INS: [(&str, &str); 3] = [
    ("__rate_interval", "1m"),
    ("__interval", "30s"),
    ("__range", "10m"),
];

/// `(name, value)` of every template variable: `.*` (the `allValue`) for multi-value variables
/// with "All", else the current value.
fn variables(dashboard: &Value) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = BUILT_INS
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    for var in dashboard["templating"]["list"]
        .as_array()
        .expect("templating.list")
    {
        let name = var["name"].as_str().expect("variable name").to_string();
        let value = if var["includeAll"].as_bool() == Some(true) {
            var["allValue"].as_str().unwrap_or(".*").to_string()
        } else {
            match &var["current"]["value"] {
                Value::String(s) => s.clone(),
                _ => continue, // the data source variable appears in no expression
            }
        };
        out.push((name, value));
    }
    // Longest names first, so that `$pod` never eats the start of a longer `$pods`.
    out.sort_by_key(|(n, _)| std::cmp::Reverse(n.len()));
    out
}

/// `expr` with every `${name}` and `$name` replaced. Panics on a variable the dashboard lacks.
fn substitute(expr: &str, vars: &[(String, String)]) -> String {
    let mut out = expr.to_string();
    for (name, value) in vars {
        out = out
            .replace(&format!("${{{name}}}"), value)
            .replace(&format!("${name}"), value);
    }
    assert!(!out.contains('$'), "unknown variable left in {out}");
    out
}

/// Every `(panel title, refId, expr)` of the dashboard's panels.
fn targets(dashboard: &Value) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            out.push((
                panel["title"].as_str().unwrap_or_default().to_string(),
                target["refId"].as_str().unwrap_or_default().to_string(),
                target["expr"]
                    .as_str()
                    .expect("a target without expr")
                    .to_string(),
            ));
        }
    }
    out
}

/// Splits `label_values(selector, label)` or `label_values(label)`.
fn label_values_call(query: &str) -> (Option<String>, String) {
    let inner = query
        .trim()
        .strip_prefix("label_values(")
        .and_then(|q| q.strip_suffix(')'))
        .unwrap_or_else(|| panic!("template query {query} is not label_values(...)"));
    match inner.rsplit_once(',') {
        Some((selector, label)) => (Some(selector.trim().to_string()), label.trim().to_string()),
        None => (None, inner.trim().to_string()),
    }
}

#[test]
fn dashboard_is_well_formed_and_uses_its_data_source_variable() {
    let dashboard: Value = serde_json::from_str(DASHBOARD).expect("the dashboard is JSON");
    assert!(dashboard["uid"].is_string() && dashboard["title"].is_string());
    let mut ids = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        ids.push(panel["id"].as_u64().expect("panel id"));
        let grid = &panel["gridPos"];
        let (x, w) = (grid["x"].as_u64().unwrap(), grid["w"].as_u64().unwrap());
        assert!(
            x + w <= 24,
            "{} overflows the 24-column grid",
            panel["title"]
        );
        if panel["type"] == "row" {
            continue;
        }
        assert_eq!(
            panel["datasource"]["uid"], "${datasource}",
            "{}",
            panel["title"]
        );
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{} has no query", panel["title"]);
        for t in targets {
            assert_eq!(
                t["datasource"]["uid"], "${datasource}",
                "{}",
                panel["title"]
            );
        }
    }
    let count = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), count, "panel ids are unique");
    let names: Vec<&str> = dashboard["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    for wanted in ["datasource", "namespace", "model_name", "pod"] {
        assert!(names.contains(&wanted), "template variable {wanted}");
    }
}

#[test]
fn every_panel_query_returns_data_from_prometheus_fed_with_simulated_vllm() {
    every_panel_query_returns_data(Tool::PROMETHEUS_2);
}

#[test]
fn every_panel_query_returns_data_from_prometheus_3_fed_with_simulated_vllm() {
    every_panel_query_returns_data(Tool::PROMETHEUS_3);
}

/// The corrector's SLOs in the dashboard tests: one SLO of three SLIs on vLLM's default edges.
const SLO_CONFIG: &str =
    "slos:\n  - name: chat\n    objective: 0.99\n    ttft: 0.5\n    tpot: 0.1\n    e2el: 20\n";

/// `vllm-corrector rules` for [`SLO_CONFIG`], every group evaluated at Prometheus' global
/// interval (1 s in [`SimData`]): the budget group's own 5 m would leave the budget panel empty
/// for up to 5 minutes after Prometheus starts.
fn slo_rules() -> String {
    let dir = crate::harness::TempDir::new("grafana-slo");
    let config = dir.path().join("config.yml");
    std::fs::write(&config, SLO_CONFIG).unwrap();
    let out = std::process::Command::new(crate::harness::BINARY)
        .args(["rules", "--config.file"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rules = String::from_utf8(out.stdout).unwrap();
    assert!(rules.contains("    interval: 5m\n"), "{rules}");
    rules.replace("    interval: 5m\n", "")
}

/// Waits (at most 30 s) until Prometheus has evaluated the SLO rules on the written history: the
/// budget and the naive goodput have a value.
fn wait_for_slo_rules(data: &SimData) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let wanted = [
        "vllm_slo_chat:error_budget:remaining_ratio",
        "vllm_slo_chat:raw_good:ratio_rate5m",
    ];
    loop {
        let end = now_ms() as f64 / 1000.0;
        let ready = wanted
            .iter()
            .all(|q| data.query(q, end).is_ok_and(|rows| !rows.is_empty()));
        if ready {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the SLO rules gave no value in 30 s\n{}",
            data.log_text()
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

fn every_panel_query_returns_data(prometheus: Tool) {
    let dashboard: Value = serde_json::from_str(DASHBOARD).expect("the dashboard is JSON");
    let vars = variables(&dashboard);
    let Some(data) = SimData::start_with(prometheus, Some(&slo_rules()), Some(SLO_CONFIG)) else {
        return;
    };
    wait_for_slo_rules(&data);
    let mut failures = Vec::new();

    for var in dashboard["templating"]["list"].as_array().unwrap() {
        if var["type"] != "query" {
            continue;
        }
        let query = var["query"]["query"]
            .as_str()
            .or(var["query"].as_str())
            .expect("variable query");
        let (selector, label) = label_values_call(query);
        let selector = selector.map(|s| substitute(&s, &vars));
        match data.label_values(&label, selector.as_deref()) {
            Ok(values) if !values.is_empty() => {
                if label == "namespace" {
                    assert_eq!(values, [NAMESPACE], "the simulated pods' namespace");
                }
            }
            Ok(_) => failures.push(format!("variable {}: {query} found no value", var["name"])),
            Err(e) => failures.push(format!("variable {}: {query}: {e}", var["name"])),
        }
    }

    let end = now_ms() as f64 / 1000.0;
    let all = targets(&dashboard);
    assert!(
        all.len() >= 20,
        "the dashboard has its panels ({} queries)",
        all.len()
    );
    for (title, ref_id, expr) in &all {
        let expr = substitute(expr, &vars);
        match data.query_range(&expr, end - 600.0, end, 30.0) {
            Ok(rows) if rows.iter().any(|(_, v)| v.is_finite()) => {}
            Ok(rows) => failures.push(format!(
                "{title} / {ref_id}: {} series, none with a finite value\n  {expr}",
                rows.len()
            )),
            Err(e) => failures.push(format!("{title} / {ref_id}: {e}\n  {expr}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} dashboard queries failed:\n{}\n--- prometheus log ---\n{}",
        failures.len(),
        all.len(),
        failures.join("\n"),
        data.log_text()
    );
}

#[test]
fn tokens_per_output_panel_reads_exactly_1_without_speculative_decoding() {
    // Issue 24 item 9: the panel showed 0.9998 for a model without speculative decoding (the
    // first outputs of requests that fail before their first token count in the TTFT count with
    // no token). Every output carries at least one token: the panel clamps at 1, so the two
    // models without drafts read exactly 1 and the one with 3 drafts reads above it.
    let dashboard: Value = serde_json::from_str(DASHBOARD).expect("the dashboard is JSON");
    let vars = variables(&dashboard);
    let (_, _, expr) = targets(&dashboard)
        .into_iter()
        .find(|(_, _, e)| e.contains("vllm_corrected_tokens_per_output_sum"))
        .expect("the tokens per output query");
    let Some(data) = SimData::start(Tool::PROMETHEUS_2, None) else {
        return;
    };
    let end = now_ms() as f64 / 1000.0;
    let rows = data
        .query(&substitute(&expr, &vars), end)
        .expect("the query runs");
    let of = |model: &str| {
        rows.iter()
            .find(|(labels, _)| labels.get("model_name").map(String::as_str) == Some(model))
            .map(|(_, v)| *v)
    };
    assert_eq!(of("llama-014"), Some(1.0), "{rows:?}");
    assert_eq!(of("llama-010"), Some(1.0), "{rows:?}");
    assert!(of("llama-spec").is_some_and(|v| v > 1.2), "{rows:?}");
}

/// The SLO row repeats once per SLO (`slo_name`), and every query under it, up to the next row,
/// selects that SLO: a repeated row whose panels read every SLO would show each SLO's data in
/// every copy.
#[test]
fn the_slo_row_repeats_per_slo_and_each_of_its_queries_selects_it() {
    let dashboard: Value = serde_json::from_str(DASHBOARD).expect("the dashboard is JSON");
    let panels = dashboard["panels"].as_array().unwrap();
    let row = panels
        .iter()
        .position(|p| p["type"] == "row" && p["repeat"] == "slo_name")
        .expect("a row repeated over slo_name");
    let under: Vec<&Value> = panels[row + 1..]
        .iter()
        .take_while(|p| p["type"] != "row")
        .collect();
    assert_eq!(
        under.len(),
        4,
        "attainment, budget, goodput band, goodput rate"
    );
    for panel in under {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            assert!(
                expr.contains("slo=~\"$slo_name\""),
                "{}: {expr}",
                panel["title"]
            );
        }
    }
    let goodput = panels
        .iter()
        .find(|p| {
            p["title"]
                .as_str()
                .is_some_and(|t| t.contains("lower–upper"))
        })
        .unwrap();
    let legends: Vec<&str> = goodput["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["legendFormat"].as_str().unwrap())
        .collect();
    assert_eq!(
        legends,
        [
            "{{model_name}} lower",
            "{{model_name}} upper",
            "{{model_name}} naive (raw vLLM)"
        ]
    );
}
