//! `vllm-corrector rules corrections`: Prometheus recording rules that compute, in PromQL, the
//! corrections PromQL can express, for users who cannot run the remote-write receiver.
//! [`render`] returns a rule file (`groups:`, the format of Prometheus `rule_files` and of `promtool check rules`), serialised with
//! serde-saphyr, behind a comment block that lists what PromQL cannot express and why.
//!
//! The formulas are those of `docs/METRICS.md`, "The corrected families", on vLLM's series as
//! exposed by `vllm/v1/metrics/loggers.py`. Each family's expressions are in its presentation entry
//! (`crates/tools/src/presentation.rs`); this module only iterates the registry:
//!
//! | recorded (with the default prefix) | expression |
//! |---|---|
//! | `vllm_corrected_request_time_per_output_token_seconds_bucket` | TPOT `_bucket` − `request_generation_tokens_bucket{le="1"}` (`ignoring(le) group_left`) |
//! | `…_count` / `…_sum` | TPOT `_count` − the same bucket / TPOT `_sum` (where that bucket exists) |
//! | `vllm_corrected_token_weighted_itl_seconds_sum` / `_count` | ITL `_sum` / `generation_tokens_total − time_to_first_token_seconds_count` |
//! | `vllm_corrected_acceptance_corrected_itl_seconds_sum` / `_count` | the token-weighted `_sum` / `_count` (no buckets) |
//! | `vllm_corrected_iteration_tokens_local_compute_sum` / `_count` | `prompt_tokens_by_source_total{source="local_compute"}` + generation tokens / `iteration_tokens_total_count` |
//!
//! **Names.** By default the rules record the very names the corrector exports (`vllm_corrected_*`), so
//! `deploy/alerts/` and `deploy/grafana/` work unchanged on either. Run one or the other for a given
//! Prometheus, never both: the two would write the same series. [`RulesOptions::name_prefix`] records
//! under another prefix (for example to compare the two side by side).

use serde::Serialize;

use serde_saphyr::LitString;

use crate::presentation;

/// Options of [`render`]; also the flags of `vllm-corrector rules corrections`.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct RulesOptions {
    /// Prefix of every recorded name, in place of `vllm_corrected_`. The default records the names the
    /// corrector exports, so its alerts and dashboard work on the rules' output unchanged. Each
    /// recorded name must be a valid metric name, so the prefix matches `[a-zA-Z_:][a-zA-Z0-9_:]*`,
    /// and it must not begin with `vllm:`, vLLM's own namespace.
    #[arg(long = "rules.name-prefix", default_value = DEFAULT_PREFIX, value_parser = parse_prefix)]
    pub name_prefix: String,
    /// Name of the rule group (not empty: Prometheus refuses a group without a name).
    #[arg(long = "rules.group-name", default_value = DEFAULT_GROUP, value_parser = parse_group_name)]
    pub group_name: String,
    /// Evaluation interval of the group as a Prometheus duration (`15s`, `1m`), longer than 0s;
    /// default: the Prometheus `global.evaluation_interval`. Use the scrape interval of vLLM or
    /// less.
    #[arg(long = "rules.interval", value_parser = parse_interval)]
    pub interval: Option<String>,
}

/// The corrector's own family prefix.
pub const DEFAULT_PREFIX: &str = "vllm_corrected_";
const DEFAULT_GROUP: &str = "vllm-corrected.promql";

impl Default for RulesOptions {
    fn default() -> Self {
        RulesOptions {
            name_prefix: DEFAULT_PREFIX.to_string(),
            group_name: DEFAULT_GROUP.to_string(),
            interval: None,
        }
    }
}

/// A metric-name prefix: `[a-zA-Z_:][a-zA-Z0-9_:]*` (Prometheus data model), non-empty, so that
/// every recorded name (prefix + a `[a-z_]+` suffix) is a valid metric name; and not in vLLM's
/// namespace `vllm:`, where the recorded series would mix with the raw ones they are computed from
/// (and match every `vllm:.*` selector meant for vLLM's own series).
fn parse_prefix(s: &str) -> Result<String, String> {
    let mut chars = s.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':');
    if !(first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')) {
        return Err(format!(
            "{s:?} is not a valid metric name prefix ([a-zA-Z_:][a-zA-Z0-9_:]*)"
        ));
    }
    if s.starts_with("vllm:") {
        return Err(format!(
            "{s:?} begins with \"vllm:\", vLLM's own namespace: the recorded series would mix with \
             the raw vllm:* series; use another prefix such as {DEFAULT_PREFIX} or vllm_promql_"
        ));
    }
    Ok(s.to_string())
}

/// A rule group name: any text but the empty (or blank) one, which Prometheus refuses
/// ("Groupname must not be empty").
fn parse_group_name(s: &str) -> Result<String, String> {
    if s.trim().is_empty() {
        return Err("the rule group name must not be empty".to_string());
    }
    Ok(s.to_string())
}

/// A Prometheus duration: one or more `<digits><unit>` with unit ms, s, m, h, d, w or y (`1m30s`).
pub(crate) fn parse_interval(s: &str) -> Result<String, String> {
    let mut rest = s;
    let mut parts = 0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit_len = ["ms", "s", "m", "h", "d", "w", "y"]
            .iter()
            .find(|u| rest[digits..].starts_with(**u))
            .map(|u| u.len());
        match unit_len {
            Some(n) if digits > 0 => rest = &rest[digits + n..],
            _ => {
                return Err(format!(
                    "{s:?} is not a Prometheus duration such as 15s or 1m"
                ));
            }
        }
        parts += 1;
    }
    if parts == 0 {
        return Err("the interval is empty".to_string());
    }
    if s.chars().all(|c| !c.is_ascii_digit() || c == '0') {
        return Err(format!(
            "{s:?} is zero, which Prometheus reads as the global evaluation_interval: leave \
             --rules.interval out for that, or give a duration longer than 0s"
        ));
    }
    Ok(s.to_string())
}

/// One recording rule of the Prometheus rule file format.
#[derive(Debug, Serialize)]
struct RecordingRule {
    record: String,
    expr: LitString,
}

#[derive(Debug, Serialize)]
struct RuleGroup {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    interval: Option<String>,
    rules: Vec<RecordingRule>,
}

#[derive(Debug, Serialize)]
struct RuleFile {
    groups: Vec<RuleGroup>,
}

/// `(recorded name suffix, PromQL)` of every rule, in registry order: each family's own
/// PromQL ([`presentation::Presentation::promql`]), recorded under the family name less
/// `vllm_corrected_`.
fn rules() -> Vec<(String, &'static str)> {
    presentation::shown()
        .flat_map(|f| {
            let base = f.name().strip_prefix(DEFAULT_PREFIX).unwrap_or(f.name());
            presentation::of(f)
                .promql
                .iter()
                .map(move |(suffix, expr)| (format!("{base}{suffix}"), *expr))
        })
        .collect()
}

/// The header's list of recorded families, one line per family PromQL can express:
/// `#   <prefix>name_{parts}   note`, the notes aligned.
fn recorded_lines() -> String {
    let mut out = String::new();
    for f in presentation::shown() {
        let shown = presentation::of(f);
        if shown.promql.is_empty() {
            continue;
        }
        let base = f.name().strip_prefix(DEFAULT_PREFIX).unwrap_or(f.name());
        let parts: Vec<&str> = shown
            .promql
            .iter()
            .map(|(suffix, _)| suffix.trim_start_matches('_'))
            .collect();
        let recorded = format!("<prefix>{base}_{{{}}}", parts.join(","));
        out.push_str(&format!("#   {recorded:<67}{}\n", shown.promql_note));
    }
    out
}

/// The comment block printed above the rules (each line starts with `#`).
const HEADER: &str = "\
# Recording rules printed by `vllm-corrector rules corrections`: the corrections of
# vllm-corrector that PromQL can express, for Prometheus servers that cannot send remote write
# to the corrector. Load this file through rule_files (or a PrometheusRule's spec.groups).
# Evaluate it at the scrape interval of vLLM or faster. Formulas: README.md (The corrected
# families) and docs/DEPLOY.md.
#
# Recorded, with the corrector's names unless --rules.name-prefix says otherwise, and the labels
# of the vLLM series (le kept on buckets; source dropped):
";

/// The comment block after the list of recorded families.
const HEADER_TAIL: &str = "\
# With the default names, do not also run the corrector for the same Prometheus: both would
# write the same series.
#
# What PromQL cannot express, and why:
# - Acceptance-corrected ITL buckets. Each scrape interval's ITL bucket increases are rescaled
#   by that interval's tokens per output (d(generation - TTFT count)/d(ITL count)) and accumulated. That needs
#   the previous scrape of the same series and a running total that survives counter resets;
#   a recording rule sees one evaluation instant and keeps no state between evaluations.
#   Only the exact _sum and _count of that family are recorded here.
# - The same-timestamp join. The corrector combines only samples of one scrape (one timestamp)
#   of one vLLM engine. PromQL takes each series' newest sample within the lookback window (5m
#   by default), so when one scrape's series are ingested partly (a failed or late scrape, a
#   remote-write receiver that gets a scrape across several requests, an out-of-order
#   ingester), a rule may subtract the token bucket of one scrape from the TPOT buckets of
#   another: a transiently wrong, even negative, count. Directly scraped series of one target
#   are committed together, so the rules are exact on a Prometheus that scrapes vLLM itself.
# - The old/new ITL name choice per group. The corrector reads inter_token_latency_seconds for
#   a vLLM engine once any series of that name arrived, else time_per_output_token_seconds
#   (vLLM <= 0.14), per engine and for all its series together. The rules pick per series
#   and per evaluation with `or` (the new name wins when both exist); across an upgrade that
#   renames the histogram, the sum and count may come from different names for up to one
#   lookback window.
# - Withholding. The corrector exports nothing, and counts a reason, when inputs contradict each
#   other (more n <= 1 requests than TPOT requests) or when a histogram is incomplete; the
#   rules record whatever the arithmetic gives. Without a le=\"1\" token bucket (custom buckets)
#   the TPOT rules record nothing, as the corrector does.
";

/// Renders the recording rules as a Prometheus rule file: the comment block, then
/// `groups: [{name, interval?, rules: [{record, expr}]}]`, serialised with serde-saphyr (multi-line
/// expressions as `|` literal blocks). Deterministic; print-ready (ends with a newline).
///
/// Every recorded name is `options.name_prefix` followed by the corrector family's suffix, for example
/// `vllm_corrected_request_time_per_output_token_seconds_bucket` (seconds; `le` in seconds),
/// `…_token_weighted_itl_seconds_count` (tokens), `…_iteration_tokens_local_compute_count`
/// (iterations). Never fails: the options are validated by their clap parsers, and the serialiser
/// gets only strings.
pub fn render(options: &RulesOptions) -> String {
    let file = RuleFile {
        groups: vec![RuleGroup {
            name: options.group_name.clone(),
            interval: options.interval.clone(),
            rules: rules()
                .into_iter()
                .map(|(suffix, expr)| RecordingRule {
                    record: format!("{}{suffix}", options.name_prefix),
                    expr: LitString(format!("{expr}\n")),
                })
                .collect(),
        }],
    };
    let yaml_options = serde_saphyr::ser_options! { compact_list_indent: false };
    let body = serde_saphyr::to_string_with_options(&file, yaml_options)
        .expect("a rule file of plain strings always serialises");
    format!("{HEADER}{}{HEADER_TAIL}{body}", recorded_lines())
}

#[cfg(test)]
mod tests;
