//! `vllm-corrector relabel`: the narrowest `write_relabel_configs` for the remote write that feeds
//! the corrector. It keeps exactly the series the rules read, from the engine's own vocabulary
//! ([`engine::READ_NAMES`]), so it cannot drift from what the engine reads: every
//! histogram series of ITL (both names) and request TPOT, only the `le="1"` bucket of the
//! generation-tokens histogram (printed `1` or `1.0` by different senders: both match), only the
//! `local_compute` source of the prompt-token counter, and the few counters the rules divide by;
//! and, for the SLO counters, the TTFT and E2E latency buckets while an SLO of `--config.file` has
//! a TTFT or E2EL threshold (the shipped default SLO, TPOT only, needs neither).
//!
//! A native histogram with custom buckets (NHCB: what Prometheus 3 sends with
//! `convert_classic_histograms_to_nhcb: true` and `send_native_histograms: true`) is one series
//! under the histogram's base name, with no `le`, carrying every bucket, `_sum` and `_count`; the
//! receiver reads it as those classic series. So the rule also keeps, for every histogram a rule
//! reads a part of, the series under its base name (`histogram_bases`). For the
//! generation-tokens, TTFT and iteration-tokens histograms that means every bucket travels where
//! the classic form sends one bucket or only `_count`: the receiver counts the buckets no rule
//! reads as `unused_series`.
//!
//! One `keep` rule over `[__name__, le, source]` joined by `;` (Prometheus' default separator),
//! whose regex Prometheus anchors at both ends (`relabel_config`, "regex", in the Prometheus
//! configuration reference). The regex is `vllm:(…)`, so it keeps nothing outside vLLM's
//! namespace and the corrector's own `/metrics`, scraped back, never loops into it.

use std::path::PathBuf;

use clap::Args;

use engine::slo::{Sli, SloSpec};
use engine::{DEFAULT_METRIC_PREFIX, READ_NAMES, ReadName};

/// Options of `vllm-corrector relabel`.
#[derive(Debug, Clone, Args)]
pub struct RelabelOptions {
    /// Print Prometheus Operator field names (`sourceLabels`), for `spec.remoteWrite[].writeRelabelConfigs`
    /// of a `Prometheus` resource or `prometheus.prometheusSpec.remoteWrite` of kube-prometheus-stack.
    #[arg(long)]
    pub(crate) operator: bool,
    /// The service's configuration file: the rule keeps the series under its
    /// `input.metric_prefix` (e.g. `kserve_vllm:`), and the series its `slos:` read. Without it,
    /// vLLM's own `vllm:` and the shipped SLO's (TPOT only).
    #[arg(long = "config.file", value_name = "PATH")]
    pub config_file: Option<PathBuf>,
    /// The input prefix the rule keeps: `input.metric_prefix` of `--config.file`, else `vllm:`.
    #[arg(skip = DEFAULT_METRIC_PREFIX.to_owned())]
    pub metric_prefix: String,
    /// The SLIs the SLOs of `--config.file` have thresholds for (else the shipped SLO's).
    #[arg(skip = slis(&SloSpec::shipped_default()))]
    pub slis: Vec<Sli>,
}

/// The SLIs some SLO of `spec` has a threshold for.
fn slis(spec: &SloSpec) -> Vec<Sli> {
    Sli::ALL
        .into_iter()
        .filter(|sli| spec.slos.iter().any(|s| s.target(*sli).is_some()))
        .collect()
}

/// True when the keep rule keeps `read` for SLOs with thresholds for `slis`: every series a
/// correction reads, and a series only the SLO counters read while an SLO needs it.
fn kept(read: &ReadName, slis: &[Sli]) -> bool {
    read.slo.is_none_or(|sli| slis.contains(&sli))
}

impl Default for RelabelOptions {
    fn default() -> Self {
        RelabelOptions {
            operator: false,
            config_file: None,
            metric_prefix: DEFAULT_METRIC_PREFIX.to_owned(),
            slis: slis(&SloSpec::shipped_default()),
        }
    }
}

/// What `vllm-corrector relabel` prints: [`render`] under the input prefix of
/// `options.config_file` when given.
///
/// # Errors
/// The configuration error (naming the file and field) when `--config.file` is unreadable or
/// invalid.
pub fn run(options: &RelabelOptions) -> Result<String, service::config::ConfigError> {
    let mut options = options.clone();
    if let Some(path) = &options.config_file {
        let config = service::config::Config::from_file(path)?;
        options.metric_prefix = config.engine.metric_prefix;
        options.slis = slis(&config.slos);
    }
    Ok(render(&options))
}

/// The label names the rule joins, in order.
pub(crate) const SOURCE_LABELS: [&str; 3] = ["__name__", "le", "source"];

/// The base names (without `vllm:`) of the histograms whose `_bucket`, `_sum` or `_count` a rule
/// reads (for SLOs with thresholds for `slis`), in [`READ_NAMES`] order, each once: the names
/// their NHCB series carry.
pub(crate) fn histogram_bases(slis: &[Sli]) -> Vec<&'static str> {
    let mut bases: Vec<&'static str> = Vec::new();
    for read in READ_NAMES.iter().filter(|r| kept(r, slis)) {
        let name = read
            .name
            .strip_prefix("vllm:")
            .expect("every read name is in vLLM's namespace");
        let base = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix));
        if let Some(base) = base
            && !bases.contains(&base)
        {
            bases.push(base);
        }
    }
    bases
}

/// The keep regex over `__name__;le;source` (RE2 syntax, anchored by Prometheus), for the input
/// prefix `prefix` (a metric-name start: no character RE2 treats specially) and SLOs with
/// thresholds for `slis`.
pub(crate) fn keep_regex(prefix: &str, slis: &[Sli]) -> String {
    let mut plain = Vec::new();
    let mut restricted = Vec::new();
    for read in READ_NAMES.iter().filter(|r| kept(r, slis)) {
        let name = read
            .name
            .strip_prefix("vllm:")
            .expect("every read name is in vLLM's namespace");
        match read.only {
            None => plain.push(name),
            Some(("le", le)) => restricted.push(format!("{name};{le};.*")),
            Some(("source", source)) => restricted.push(format!("{name};[^;]*;{source}")),
            // Every child of `request_success_total` is kept (its `finished_reason` is not among
            // the rule's source labels): a few series per target, the unread ones counted unused.
            Some(("finished_reason", _)) => plain.push(name),
            Some((label, _)) => unreachable!("no rule restricts {label}"),
        }
    }
    plain.extend(histogram_bases(slis));
    let mut alternatives = vec![format!("({});[^;]*;.*", plain.join("|"))];
    alternatives.extend(restricted);
    format!("{prefix}({})", alternatives.join("|"))
}

/// The relabel list as YAML, with a comment block saying what it keeps.
pub fn render(options: &RelabelOptions) -> String {
    let (source_labels, note) = if options.operator {
        (
            "sourceLabels",
            "spec.remoteWrite[].writeRelabelConfigs (Prometheus Operator)",
        )
    } else {
        (
            "source_labels",
            "remote_write[].write_relabel_configs (prometheus.yml)",
        )
    };
    format!(
        "# Generated by `vllm-corrector relabel{flag}` (vllm-corrector {version}), for\n\
         # {note}\n\
         # of the remote write that feeds vllm-corrector: it keeps exactly the {n} series names\n\
         # the rules read{under}; of request_generation_tokens_bucket only le=\"1\" (or \"1.0\"), of\n\
         # prompt_tokens_by_source_total only source=\"local_compute\". It also keeps the\n\
         # {bases} histograms under their base names: the native histograms with custom buckets\n\
         # Prometheus 3 sends with convert_classic_histograms_to_nhcb. Anything else sent\n\
         # would be dropped unread (counted as samples_rejected_total{{reason=\"unused_series\"}}).\n\
         - {source_labels}: [{labels}]\n  separator: \";\"\n  regex: '{regex}'\n  action: keep\n",
        flag = if options.operator { " --operator" } else { "" },
        version = protocol::VERSION,
        n = READ_NAMES.iter().filter(|r| kept(r, &options.slis)).count(),
        bases = histogram_bases(&options.slis).len(),
        labels = SOURCE_LABELS.join(", "),
        regex = keep_regex(&options.metric_prefix, &options.slis),
        under = format_args!(" under the prefix {}", options.metric_prefix),
    )
}

#[cfg(test)]
mod tests;
