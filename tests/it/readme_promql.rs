//! Every PromQL example of README.md (its fenced `promql` blocks; within a block, each query is
//! the run of lines between comment lines) runs against a real Prometheus (2.42 and 3.5) holding fifteen minutes
//! of simulated vLLM scrapes and the corrector's output for them ([`crate::simdata`]). Each must
//! parse and return at least one finite value, so a broken example fails CI.

use test_support::tools::Tool;

use crate::simdata::{SimData, now_ms};

const README: &str = include_str!("../../README.md");

/// The queries of every ```promql block, each with the comment line above it.
fn examples(markdown: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut in_block = false;
    let mut comment = String::new();
    let mut query = String::new();
    let flush = |comment: &str, query: &mut String, out: &mut Vec<(String, String)>| {
        if !query.trim().is_empty() {
            out.push((comment.to_string(), query.trim().to_string()));
        }
        query.clear();
    };
    for line in markdown.lines() {
        if !in_block {
            in_block = line.trim() == "```promql";
            continue;
        }
        if line.trim() == "```" {
            flush(&comment, &mut query, &mut out);
            in_block = false;
        } else if let Some(text) = line.trim().strip_prefix('#') {
            flush(&comment, &mut query, &mut out);
            comment = text.trim().to_string();
        } else {
            query.push_str(line);
            query.push('\n');
        }
    }
    out
}

#[test]
fn readme_blocks_split_into_queries() {
    let found =
        examples("x\n```promql\n# a\n  rate(x[5m])\n/ rate(y[5m])\n# b\nz\n```\n```sh\nls\n```\n");
    assert_eq!(
        found,
        [
            ("a".to_string(), "rate(x[5m])\n/ rate(y[5m])".to_string()),
            ("b".to_string(), "z".to_string())
        ]
    );
    assert!(
        examples(README).len() >= 3,
        "the README has its PromQL examples"
    );
}

#[test]
fn every_readme_promql_example_returns_data_from_prometheus_with_corrected_series() {
    every_readme_example_returns_data(Tool::PROMETHEUS_2);
}

#[test]
fn every_readme_promql_example_returns_data_from_prometheus_3_with_corrected_series() {
    every_readme_example_returns_data(Tool::PROMETHEUS_3);
}

fn every_readme_example_returns_data(prometheus: Tool) {
    let queries = examples(README);
    let Some(data) = SimData::start(prometheus, None) else {
        return;
    };
    let end = now_ms() as f64 / 1000.0;
    let mut failures = Vec::new();
    for (comment, query) in &queries {
        match data.query_range(query, end - 600.0, end, 30.0) {
            Ok(rows) if rows.iter().any(|(_, v)| v.is_finite()) => {}
            Ok(rows) => failures.push(format!(
                "{comment}: {} series, no finite value\n  {query}",
                rows.len()
            )),
            Err(e) => failures.push(format!("{comment}: {e}\n  {query}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} README queries failed:\n{}\n--- prometheus log ---\n{}",
        failures.len(),
        queries.len(),
        failures.join("\n"),
        data.log_text()
    );
}
