//! The workload model: configuration, request attributes and their seeded random draws.
//!
//! Every duration here is in seconds in the public configuration and converted once to integer
//! nanoseconds of simulated time, so that event order and window membership are exact.

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use super::profile::Profile;
use crate::error::SimError;

/// Speculative decoding: `k` draft tokens proposed per request per decode step, each accepted
/// with probability `p` while every earlier draft was accepted (a geometric prefix).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SpecConfig {
    /// Draft tokens per request per decode step (vLLM `num_speculative_tokens`), ≥ 1.
    pub num_speculative_tokens: u32,
    /// Per-draft acceptance probability in `[0, 1]`.
    pub acceptance_prob: f64,
    /// Fraction in `[0, 1]` of request decode steps that carry no drafts (those outputs hold one
    /// token and add nothing to the spec-decode counters).
    pub no_draft_fraction: f64,
}

/// How the ITL histograms (`inter_token_latency_seconds` and the old name) observe an output
/// after a request's first, of k tokens, that came g seconds after the request's previous output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ItlObservation {
    /// One sample of g per output, whatever k is: every vLLM release read (`docs/METRICS.md`, "The
    /// input series").
    #[default]
    PerOutput,
    /// k samples of g / k each (seconds): vllm#47382 (open) would apportion each output's gap over
    /// its tokens, as SGLang does. ITL `_count` then counts tokens, `_sum` is unchanged.
    PerToken,
}

/// Everything that defines a simulation run. Same config and seed → identical trajectory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimConfig {
    /// vLLM version profile to expose.
    pub profile: Profile,
    /// One `model_name` per simulated vLLM server; each has its own engines and arrivals.
    pub models: Vec<String>,
    /// Data-parallel engines per model (`engine="0"`, `"1"`, …), ≥ 1.
    pub engines_per_model: u32,
    /// Poisson arrival rate per model, requests per second; 0 disables random arrivals.
    pub arrival_rate: f64,
    /// Prompt length range in tokens, inclusive, uniform.
    pub prompt_len: (u32, u32),
    /// Probability that a prompt starts with a local prefix-cache hit (a uniform fraction of
    /// the prompt, in whole blocks of `block_size` tokens).
    pub prefix_hit_prob: f64,
    /// Probability that a request is a P/D decode-side request whose prompt KV (beyond the local
    /// hit, except the last token) arrives by external KV transfer.
    pub kv_transfer_prob: f64,
    /// KV block size in tokens (prefix hits are whole blocks).
    pub block_size: u32,
    /// Output length range in tokens for requests with n ≥ 2, inclusive, uniform.
    pub output_len: (u32, u32),
    /// Fraction of requests that fail engine-side after prefill with no token (n = 0).
    pub zero_token_fraction: f64,
    /// Fraction of requests that generate exactly one token (n = 1).
    pub single_token_fraction: f64,
    /// The `max_tokens` request parameter; a request whose n reaches it finishes `length`.
    pub max_tokens: u32,
    /// Speculative decoding, or `None` for plain autoregressive decoding.
    pub spec: Option<SpecConfig>,
    /// One ITL sample per output (vLLM so far) or one per token (vllm#47382).
    pub itl_observation: ItlObservation,
    /// Fixed engine time per step, seconds.
    pub step_base_s: f64,
    /// Engine time per token computed in a step (locally computed prompt tokens, plus 1 + drafts
    /// per decoding request), seconds.
    pub step_per_token_s: f64,
    /// Maximum requests running on one engine (vLLM `max_num_seqs`).
    pub max_num_seqs: u32,
    /// Token budget of one step (vLLM `max_num_batched_tokens`); a lone prefill may exceed it.
    pub max_num_batched_tokens: u32,
    /// KV cache capacity of one engine in tokens, for `kv_cache_usage_perc`.
    pub kv_cache_tokens: u64,
    /// `max_model_len`: the request-token histograms get bounds 1, 2, 5, 10, … ≤ this.
    pub max_model_len: u32,
    /// Seed of every random draw.
    pub seed: u64,
    /// Unix time in milliseconds of simulated time 0 (the `_created` value and the base of every
    /// sample timestamp).
    pub epoch_unix_ms: i64,
    /// `--custom-histogram-buckets` (profile 0.34): bucket family key
    /// ([`crate::BUCKET_FAMILIES`]) → upper bounds (positive, finite, strictly increasing), in
    /// place of that family's defaults for every histogram of it. Empty: every default.
    pub bucket_overrides: BTreeMap<String, Vec<f64>>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            profile: Profile::V0_33,
            models: vec!["sim-model".to_string()],
            engines_per_model: 1,
            arrival_rate: 4.0,
            prompt_len: (32, 1024),
            prefix_hit_prob: 0.3,
            kv_transfer_prob: 0.0,
            block_size: 16,
            output_len: (2, 256),
            zero_token_fraction: 0.02,
            single_token_fraction: 0.1,
            max_tokens: 256,
            spec: None,
            itl_observation: ItlObservation::PerOutput,
            step_base_s: 0.015,
            step_per_token_s: 0.0001,
            max_num_seqs: 64,
            max_num_batched_tokens: 4096,
            kv_cache_tokens: 200_000,
            max_model_len: 32_768,
            seed: 0,
            epoch_unix_ms: 1_700_000_000_000,
            bucket_overrides: BTreeMap::new(),
        }
    }
}

fn check(ok: bool, what: &str) -> Result<(), SimError> {
    if ok {
        Ok(())
    } else {
        Err(SimError::Config(what.to_string()))
    }
}

fn is_prob(p: f64) -> bool {
    (0.0..=1.0).contains(&p)
}

impl SimConfig {
    /// Checks every field's range. Errors: [`SimError::Config`] naming the first bad field.
    pub(crate) fn validate(&self) -> Result<(), SimError> {
        check(!self.models.is_empty(), "at least one model is needed")?;
        check(
            self.models.iter().all(|m| !m.is_empty()),
            "model names must be non-empty",
        )?;
        check(self.engines_per_model >= 1, "engines per model must be ≥ 1")?;
        check(
            self.arrival_rate.is_finite() && self.arrival_rate >= 0.0,
            "arrival rate must be ≥ 0",
        )?;
        check(
            self.prompt_len.0 >= 1 && self.prompt_len.0 <= self.prompt_len.1,
            "prompt length range",
        )?;
        check(
            self.output_len.0 >= 2 && self.output_len.0 <= self.output_len.1,
            "output length range (min ≥ 2)",
        )?;
        check(
            self.output_len.1 <= self.max_tokens,
            "output length max must be ≤ max_tokens",
        )?;
        check(is_prob(self.prefix_hit_prob), "prefix hit probability")?;
        check(is_prob(self.kv_transfer_prob), "KV transfer probability")?;
        check(self.block_size >= 1, "block size must be ≥ 1")?;
        check(
            is_prob(self.zero_token_fraction)
                && is_prob(self.single_token_fraction)
                && self.zero_token_fraction + self.single_token_fraction <= 1.0,
            "zero- and single-token fractions must be probabilities summing to ≤ 1",
        )?;
        if let Some(s) = self.spec {
            check(
                s.num_speculative_tokens >= 1,
                "num speculative tokens must be ≥ 1",
            )?;
            check(is_prob(s.acceptance_prob), "acceptance probability")?;
            check(is_prob(s.no_draft_fraction), "no-draft fraction")?;
        }
        check(
            self.step_base_s.is_finite() && self.step_base_s > 0.0,
            "step base time must be > 0",
        )?;
        check(
            self.step_per_token_s.is_finite() && self.step_per_token_s >= 0.0,
            "per-token time must be ≥ 0",
        )?;
        check(
            self.max_num_seqs >= 1 && self.max_num_batched_tokens >= 1,
            "scheduler limits must be ≥ 1",
        )?;
        check(
            self.kv_cache_tokens >= 1 && self.max_model_len >= 1,
            "KV cache size and max_model_len must be ≥ 1",
        )?;
        self.validate_bucket_overrides()
    }

    /// The checks of vLLM 0.34's `ObservabilityConfig` on `custom_histogram_buckets`.
    fn validate_bucket_overrides(&self) -> Result<(), SimError> {
        check(
            self.bucket_overrides.is_empty() || self.profile.has_custom_buckets(),
            "custom histogram buckets need profile 0.34",
        )?;
        for (family, bounds) in &self.bucket_overrides {
            check(
                crate::BUCKET_FAMILIES.contains(&family.as_str()),
                "custom histogram buckets: unknown bucket family",
            )?;
            check(
                !bounds.is_empty()
                    && bounds.iter().all(|b| b.is_finite() && *b > 0.0)
                    && bounds.windows(2).all(|w| w[0] < w[1]),
                "custom histogram buckets: bounds must be positive, finite and strictly increasing",
            )?;
        }
        Ok(())
    }

    /// The bounds of the `inter_token_latency` bucket family (ITL and request TPOT): custom or
    /// vLLM's defaults.
    pub fn itl_bounds(&self) -> Vec<f64> {
        self.bucket_overrides
            .get("inter_token_latency")
            .cloned()
            .unwrap_or_else(|| crate::metrics::ITL_BOUNDS.to_vec())
    }
}

/// Converts seconds of simulated time to integer nanoseconds (rounded).
pub fn secs_to_ns(s: f64) -> u64 {
    (s * 1e9).round().max(0.0) as u64
}

/// A request's prompt tokens by where their KV came from. Invariant:
/// `local_compute + local_cache_hit + external_kv_transfer == total`.
/// Source: `PromptTokenStats` in `vllm/v1/metrics/stats.py` (0.16+).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct PromptTokens {
    /// Prompt length in tokens.
    pub total: u32,
    /// Tokens prefilled on this engine (real compute).
    pub local_compute: u32,
    /// Tokens served by the local prefix cache.
    pub local_cache_hit: u32,
    /// Tokens whose KV arrived from another instance (P/D disaggregation).
    pub external_kv_transfer: u32,
}

/// Why a request finished: vLLM's `FinishReason` (`vllm/v1/engine/__init__.py`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FinishReason {
    /// A stop condition (EOS, stop string).
    Stop,
    /// `max_tokens` reached.
    Length,
    /// Aborted.
    Abort,
    /// Engine-side error (≥ 0.14).
    Error,
    /// Repetition detected (≥ 0.22).
    Repetition,
}

impl FinishReason {
    /// The `finished_reason` label value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::Abort => "abort",
            FinishReason::Error => "error",
            FinishReason::Repetition => "repetition",
        }
    }
}

/// A hand-written request for tests and fixed traces: everything a random draw would decide.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptedRequest {
    /// Arrival time, seconds of simulated time.
    pub arrival_s: f64,
    /// Index into [`SimConfig::models`].
    pub model: usize,
    /// Engine index within the model (`engine` label).
    pub engine: u32,
    /// Prompt tokens by source.
    pub prompt: PromptTokens,
    /// Tokens to generate (n). 0 = engine-side failure after prefill.
    pub n: u32,
    /// Finish reason; `None` picks stop / length / the profile's zero-token reason.
    pub finish_reason: Option<FinishReason>,
    /// Per decode step `(drafts, accepted)`, in order; when exhausted, steps carry no drafts.
    /// Accepted are clamped to the drafts; an output that would exceed n is cut at n after its
    /// accepted drafts are counted, as vLLM does.
    pub decode_steps: Vec<(u32, u32)>,
}

/// The per-model random source of arrivals and request attributes.
#[derive(Debug)]
pub(crate) struct ArrivalStream {
    rng: StdRng,
    /// Simulated time of the next arrival, ns; `None` when arrivals are disabled.
    pub(crate) next_ns: Option<u64>,
}

/// Derives an independent seed for one random stream (SplitMix64 finaliser).
pub(crate) fn stream_seed(seed: u64, stream: u64) -> u64 {
    let mut z = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The attributes drawn for one random request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DrawnRequest {
    pub prompt: PromptTokens,
    pub n: u32,
    pub finish_reason: FinishReason,
}

impl ArrivalStream {
    /// A stream for model `model` of `cfg`; the first arrival is drawn from time 0.
    pub(crate) fn new(cfg: &SimConfig, model: usize) -> Self {
        let mut s = ArrivalStream {
            rng: StdRng::seed_from_u64(stream_seed(cfg.seed, 1 + model as u64)),
            next_ns: None,
        };
        if cfg.arrival_rate > 0.0 {
            s.next_ns = Some(s.gap_ns(cfg.arrival_rate));
        }
        s
    }

    /// Exponential inter-arrival gap in ns: `-ln(1 − U) / rate`.
    fn gap_ns(&mut self, rate: f64) -> u64 {
        let u: f64 = self.rng.random();
        secs_to_ns(-(1.0 - u).ln() / rate).max(1)
    }

    /// Draws the request arriving at `next_ns` and schedules the following arrival.
    pub(crate) fn draw(&mut self, cfg: &SimConfig) -> DrawnRequest {
        let rng = &mut self.rng;
        let total = rng.random_range(cfg.prompt_len.0..=cfg.prompt_len.1);
        let mut hit = 0;
        if rng.random::<f64>() < cfg.prefix_hit_prob {
            // Whole blocks, always leaving ≥ 1 token to compute (vLLM recomputes the last token).
            let blocks = (total - 1) / cfg.block_size;
            hit = rng.random_range(0..=blocks) * cfg.block_size;
        }
        let mut external = 0;
        if rng.random::<f64>() < cfg.kv_transfer_prob {
            external = total - 1 - hit;
        }
        let prompt = PromptTokens {
            total,
            local_compute: total - hit - external,
            local_cache_hit: hit,
            external_kv_transfer: external,
        };
        let u: f64 = rng.random();
        let n = if u < cfg.zero_token_fraction {
            0
        } else if u < cfg.zero_token_fraction + cfg.single_token_fraction {
            1
        } else {
            rng.random_range(cfg.output_len.0..=cfg.output_len.1)
        };
        let finish_reason = default_finish_reason(cfg, n);
        if let Some(t) = self.next_ns {
            self.next_ns = Some(t + self.gap_ns(cfg.arrival_rate));
        }
        DrawnRequest {
            prompt,
            n,
            finish_reason,
        }
    }
}

/// stop / length by n, or the profile's zero-token reason when n = 0.
pub(crate) fn default_finish_reason(cfg: &SimConfig, n: u32) -> FinishReason {
    if n == 0 {
        if cfg.profile.zero_token_finish_reason() == "error" {
            FinishReason::Error
        } else {
            FinishReason::Abort
        }
    } else if n >= cfg.max_tokens {
        FinishReason::Length
    } else {
        FinishReason::Stop
    }
}
