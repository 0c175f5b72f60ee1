//! `vllm-corrector rules` (Deploy issue, item 6): the recording rules pass `promtool check rules`
//! (2.42 and 3.5), and, loaded into a real Prometheus (2.42 and 3.5, `rule_files`) beside the
//! corrector's output for the same
//! simulated scrapes, every recorded series equals the corrector's series of the same name and
//! labels within 1e-9 relative, at instants where both have settled.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use test_support::promtool::Promtool;
use test_support::tools::{Tool, require};
use tools::promql_rules::{DEFAULT_PREFIX, RulesOptions, render};

use crate::simdata::{Row, SimData, now_ms};

/// The prefix the test records under, so the rules' series and the corrector's coexist.
const PREFIX: &str = "vllm_promql_";

#[derive(serde::Deserialize)]
struct RuleFile {
    groups: Vec<RuleGroup>,
}

#[derive(serde::Deserialize)]
struct RuleGroup {
    rules: Vec<Rule>,
}

#[derive(serde::Deserialize)]
struct Rule {
    record: String,
}

/// The recorded names of a rendered file, read back with a YAML parser.
fn records(text: &str) -> Vec<String> {
    let file: RuleFile = serde_saphyr::from_str(text).expect("the rules parse as YAML");
    file.groups
        .into_iter()
        .flat_map(|g| g.rules)
        .map(|r| r.record)
        .collect()
}

/// A row's identity: its labels without `__name__`, `le` written as the float it parses to.
fn key(labels: &BTreeMap<String, String>) -> String {
    labels
        .iter()
        .filter(|(n, _)| *n != "__name__")
        .map(|(n, v)| match (n.as_str(), v.parse::<f64>()) {
            ("le", Ok(le)) => format!("le={le}"),
            _ => format!("{n}={v}"),
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn by_key(rows: Vec<Row>) -> BTreeMap<String, f64> {
    rows.into_iter()
        .map(|(labels, value)| (key(&labels), value))
        .collect()
}

/// Compares every recorded series with the corrector's, at `time_s`. Errors: what differs.
fn compare(data: &SimData, recorded: &[String], time_s: f64) -> Result<usize, String> {
    let mut compared = 0;
    for record in recorded {
        let suffix = record
            .strip_prefix(PREFIX)
            .expect("every record has the prefix");
        let corrector_name = format!("{DEFAULT_PREFIX}{suffix}");
        let rules = by_key(data.query(record, time_s)?);
        let corrector = by_key(data.query(&corrector_name, time_s)?);
        if rules.is_empty() {
            return Err(format!("{record}: no series"));
        }
        if rules.keys().ne(corrector.keys()) {
            return Err(format!(
                "{record} and {corrector_name} have different series:\nrules:     {:?}\ncorrector: {:?}",
                rules.keys().collect::<Vec<_>>(),
                corrector.keys().collect::<Vec<_>>()
            ));
        }
        for (k, want) in &corrector {
            let have = rules[k];
            if (have - want).abs() > 1e-9 * have.abs().max(want.abs()) {
                return Err(format!(
                    "{record}{{{k}}} = {have}, the corrector's {corrector_name} = {want}"
                ));
            }
            compared += 1;
        }
    }
    Ok(compared)
}

/// Waits until every recorded series has a sample evaluated at or after `after_ms`.
fn wait_for_evaluation(data: &SimData, recorded: &[String], after_ms: i64) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut oldest: Option<f64> = None;
        for record in recorded {
            // timestamp() drops the name, so one record at a time.
            let expr = format!("min(timestamp({record}))");
            let t = data
                .query(&expr, now_ms() as f64 / 1000.0)?
                .first()
                .map_or(0.0, |r| r.1);
            oldest = Some(oldest.map_or(t, |o| o.min(t)));
        }
        if oldest.is_some_and(|t| t * 1000.0 >= after_ms as f64) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "no rule evaluation after {after_ms} ms within 20 s (oldest {oldest:?})"
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn rendered_rules_pass_promtool_check_rules_with_default_and_custom_names() {
    let custom = RulesOptions {
        name_prefix: PREFIX.to_string(),
        group_name: "test".to_string(),
        interval: Some("1s".to_string()),
    };
    for tool in [Tool::PROMTOOL_2, Tool::PROMTOOL_3] {
        let Some(promtool) = require(tool).map(Promtool::new) else {
            continue;
        };
        for options in [RulesOptions::default(), custom.clone()] {
            let text = render(&options);
            promtool.check_rules(&text).assert_success(&text);
        }
    }
}

#[test]
fn promql_rules_in_real_prometheus_equal_the_corrector_on_simulated_data() {
    rules_equal_the_corrector(Tool::PROMETHEUS_2);
}

#[test]
fn promql_rules_in_real_prometheus_3_equal_the_corrector_on_simulated_data() {
    rules_equal_the_corrector(Tool::PROMETHEUS_3);
}

fn rules_equal_the_corrector(prometheus: Tool) {
    let options = RulesOptions {
        name_prefix: PREFIX.to_string(),
        group_name: "vllm-promql-test".to_string(),
        interval: Some("1s".to_string()),
    };
    let text = render(&options);
    let recorded = records(&text);
    // Written out here, not taken from the renderer's input: the three TPOT series, and `_sum`
    // and `_count` of every other family PromQL can express (all but the acceptance-corrected
    // buckets), in registry order.
    let want: Vec<String> = [
        "request_time_per_output_token_seconds_bucket",
        "request_time_per_output_token_seconds_sum",
        "request_time_per_output_token_seconds_count",
        "token_weighted_itl_seconds_sum",
        "token_weighted_itl_seconds_count",
        "acceptance_corrected_itl_seconds_sum",
        "acceptance_corrected_itl_seconds_count",
        "iteration_tokens_local_compute_sum",
        "iteration_tokens_local_compute_count",
        "tokens_per_output_sum",
        "tokens_per_output_count",
    ]
    .iter()
    .map(|suffix| format!("{PREFIX}{suffix}"))
    .collect();
    assert_eq!(recorded, want);
    let Some(mut data) = SimData::start(prometheus, Some(&text)) else {
        return;
    };
    // Settled instants: a scrape is written, then the rules are evaluated after it, before the next.
    let mut compared = 0;
    for round in 0..3 {
        let ts = now_ms().max(data.last_step_ms + 1_000);
        data.step(ts);
        let written = now_ms();
        let outcome = wait_for_evaluation(&data, &recorded, written)
            .and_then(|()| compare(&data, &recorded, now_ms() as f64 / 1000.0));
        match outcome {
            Ok(n) => compared += n,
            Err(e) => panic!(
                "round {round}: {e}\n--- corrector log (tail) ---\n{}\n--- prometheus log ---\n{}",
                tail(&data.corrector.log_text(), 40),
                data.log_text()
            ),
        }
    }
    // Per round: TPOT for 3 engines (0.33 x2, 0.14; 0.10 has none) x (19 bounds + Inf + sum + count)
    // = 66, token-weighted ITL, acceptance-corrected and tokens-per-output sums/counts for 4
    // engines = 24, local-compute iteration tokens for the 2 engines of 0.33 = 4 (0.14 and 0.10
    // lack by-source).
    assert_eq!(
        compared,
        3 * (66 + 24 + 4),
        "series compared over three rounds"
    );
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
