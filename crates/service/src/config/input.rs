//! The `input:` section of `--config.file`: how the input series are named
//! (docs/CONFIGURATION.md, "Inputs").

use serde::Deserialize;

use super::{ConfigError, invalid};

/// `input:` of the YAML file. Reloadable.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct InputSection {
    /// The prefix the input series' names carry: `vllm:` as vLLM exposes them, or a platform's
    /// renaming (KServe's LLMInferenceService monitors write `kserve_vllm:`). The series read are
    /// this prefix followed by the rest of vLLM's names (`kserve_vllm:inter_token_latency_seconds_bucket`);
    /// the corrected families keep their names (`vllm_corrected_…`). Default: `vllm:`.
    pub(crate) metric_prefix: String,
    /// Label names removed from every input series before grouping, so the corrected series do
    /// not carry them: the sender's external labels (Prometheus' `global.external_labels`, the
    /// Operator's `prometheus` and `prometheus_replica`), which its own TSDB's raw series lack, so
    /// that a join of raw and corrected series matches whatever the sender adds. Default: none.
    pub(crate) drop_labels: Vec<String>,
}

impl Default for InputSection {
    fn default() -> Self {
        InputSection {
            metric_prefix: engine::DEFAULT_METRIC_PREFIX.to_owned(),
            drop_labels: Vec::new(),
        }
    }
}

/// Most names in `input.drop_labels`.
const MAX_DROP_LABELS: usize = 64;

/// Most bytes of `input.metric_prefix`.
const MAX_PREFIX_BYTES: usize = 64;

/// The validated `input:` settings: the prefix and the labels dropped.
pub(crate) struct Input {
    /// `input.metric_prefix`.
    pub(crate) metric_prefix: String,
    /// `input.drop_labels`, each once.
    pub(crate) drop_labels: Vec<String>,
}

/// Checks `input:`: `metric_prefix` is a non-empty start of a metric name
/// (`[a-zA-Z_:][a-zA-Z0-9_:]*`, Prometheus' metric-name syntax) of at most 64 bytes;
/// `drop_labels` holds at most 64 label names (`[a-zA-Z_][a-zA-Z0-9_]*`, at most 128 bytes), none
/// `__name__` or another label the rules read (`le`, `source`, `position`, `finished_reason`).
///
/// # Errors
/// [`ConfigError::Invalid`] naming the field, with the accepted form.
pub(crate) fn validate_input(section: &InputSection) -> Result<Input, ConfigError> {
    Ok(Input {
        metric_prefix: validate_prefix(section)?,
        drop_labels: validate_drop_labels(&section.drop_labels)?,
    })
}

fn validate_drop_labels(names: &[String]) -> Result<Vec<String>, ConfigError> {
    if names.len() > MAX_DROP_LABELS {
        return Err(invalid(
            "input.drop_labels",
            format!("{} names; at most {MAX_DROP_LABELS}", names.len()),
        ));
    }
    let mut out: Vec<String> = Vec::new();
    for name in names {
        let valid = name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && name.len() <= 128;
        if !valid {
            return Err(invalid(
                "input.drop_labels",
                format!("{name:?} is not a label name ([a-zA-Z_][a-zA-Z0-9_]*, at most 128 bytes)"),
            ));
        }
        if engine::RULE_DIMENSIONS.contains(&name.as_str()) {
            return Err(invalid(
                "input.drop_labels",
                format!(
                    "{name:?} is a label the rules read (one of {}); it cannot be dropped",
                    engine::RULE_DIMENSIONS.join(", ")
                ),
            ));
        }
        if !out.contains(name) {
            out.push(name.clone());
        }
    }
    Ok(out)
}

fn validate_prefix(section: &InputSection) -> Result<String, ConfigError> {
    let prefix = &section.metric_prefix;
    let valid = prefix
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_' || b == b':')
        && prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':');
    if !valid || prefix.len() > MAX_PREFIX_BYTES {
        return Err(invalid(
            "input.metric_prefix",
            format!(
                "{prefix:?} is not the start of a metric name such as \"vllm:\" or \
                 \"kserve_vllm:\" ([a-zA-Z_:][a-zA-Z0-9_:]*, at most {MAX_PREFIX_BYTES} bytes)"
            ),
        ));
    }
    Ok(prefix.clone())
}
