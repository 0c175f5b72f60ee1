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
}

impl Default for InputSection {
    fn default() -> Self {
        InputSection {
            metric_prefix: engine::DEFAULT_METRIC_PREFIX.to_owned(),
        }
    }
}

/// Most bytes of `input.metric_prefix`.
const MAX_PREFIX_BYTES: usize = 64;

/// Checks `input.metric_prefix`: a non-empty start of a metric name (`[a-zA-Z_:][a-zA-Z0-9_:]*`,
/// Prometheus' metric-name syntax), at most 64 bytes.
///
/// # Errors
/// [`ConfigError::Invalid`] naming `input.metric_prefix`, with the accepted form.
pub(crate) fn validate_input(section: &InputSection) -> Result<String, ConfigError> {
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
