//! The families each profile registers, in the order vLLM's `PrometheusStatLogger.__init__`
//! registers them (`vllm/v1/metrics/loggers.py`), which is the order `prometheus_client` prints
//! them; with their help texts, label children and default bucket bounds
//! (`vllm/v1/metrics/buckets.py` in 0.33, inline lists before).

use std::collections::BTreeMap;

use super::profile::Profile;

/// The families the simulator knows (the core subset of vLLM's, see `docs/SIMULATOR.md`).
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Fam {
    SpecDrafts,
    SpecDraftTokens,
    SpecAccepted,
    SpecAcceptedPerPos,
    Running,
    Waiting,
    GpuCacheUsage,
    GpuPrefixQueries,
    GpuPrefixHits,
    KvCacheUsage,
    PrefixQueries,
    PrefixHits,
    ExternalPrefixQueries,
    ExternalPrefixHits,
    Preemptions,
    PromptTokens,
    PromptTokensBySource,
    PromptTokensCachedBySource,
    PromptTokensCached,
    GenerationTokens,
    RequestSuccess,
    RequestPromptTokens,
    RequestGenerationTokens,
    IterationTokens,
    RequestMaxNumGenerationTokens,
    RequestParamsN,
    RequestParamsMaxTokens,
    Ttft,
    OldTpot,
    Itl,
    RequestTpot,
    E2e,
    QueueTime,
    InferenceTime,
    PrefillTime,
    DecodeTime,
    PrefillKvComputed,
}

pub(crate) const FAM_COUNT: usize = Fam::PrefillKvComputed as usize + 1;

/// The Prometheus type of a family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Exposed as `NAME_total` plus a `NAME_created` gauge.
    Counter,
    /// Exposed as `NAME`.
    Gauge,
    /// Exposed as `NAME_bucket{le}`, `NAME_count`, `NAME_sum` plus `NAME_created`.
    Histogram,
}

/// Where a labelled family's extra label sits in `prometheus_client`'s child order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ChildOrder {
    /// One child per engine.
    Single,
    /// Children created `for value: for engine` (finish reasons, prompt sources).
    ValueMajor(&'static str, Vec<String>),
    /// Children created `for engine: for value` (draft positions).
    EngineMajor(&'static str, Vec<String>),
}

/// One family: name as registered (counters without `_total`), type, help, children, bounds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FamilySpec {
    /// Which family.
    pub(crate) fam: Fam,
    /// Registered name, e.g. `vllm:generation_tokens` (a counter is exposed with `_total`).
    pub name: &'static str,
    /// Type.
    pub(crate) kind: Kind,
    /// `# HELP` text.
    pub(crate) help: &'static str,
    /// Extra label and its values, if any.
    pub(crate) children: ChildOrder,
    /// Histogram upper bounds, ascending, without `+Inf` (empty for counters and gauges).
    pub(crate) bounds: Vec<f64>,
}

/// ITL and request TPOT bounds, seconds (`inter_token_latency` bucket family).
pub const ITL_BOUNDS: [f64; 19] = [
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];
/// TTFT bounds, seconds.
pub(crate) const TTFT_BOUNDS: [f64; 22] = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
/// Request latency bounds (e2e, queue, inference, prefill, decode), seconds.
pub(crate) const LATENCY_BOUNDS: [f64; 21] = [
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];
/// `iteration_tokens_total` bounds, tokens.
pub(crate) const ITERATION_BOUNDS: [f64; 13] = [
    1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0,
];

/// vLLM's `build_1_2_5_buckets(max_value)`: 1, 2, 5, 10, 20, 50, … while ≤ `max_value`.
pub(crate) fn bounds_1_2_5(max_value: u32) -> Vec<f64> {
    let mut out = Vec::new();
    let mut scale = 1u64;
    loop {
        for m in [1u64, 2, 5] {
            let v = m * scale;
            if v > u64::from(max_value) {
                return out;
            }
            out.push(v as f64);
        }
        scale *= 10;
    }
}

/// The bucket family keys of `--custom-histogram-buckets` the simulator's histograms use
/// (`BucketFamilyKey` in vLLM 0.34's `vllm/v1/metrics/buckets.py`; `request_num_preemptions` and
/// `kv_cache_residency` have no histogram here).
pub const BUCKET_FAMILIES: [&str; 6] = [
    "request_latency",
    "time_to_first_token",
    "inter_token_latency",
    "iteration_tokens",
    "request_params_n",
    "request_tokens",
];

/// The families `profile` registers, in registration order, with `overrides` (bucket family key →
/// bounds, [`BUCKET_FAMILIES`]) in place of the default bounds.
pub(crate) fn families(
    profile: Profile,
    max_model_len: u32,
    spec_k: Option<u32>,
    overrides: &BTreeMap<String, Vec<f64>>,
) -> Vec<FamilySpec> {
    use Kind::{Counter as C, Gauge as G, Histogram as H};
    // `--custom-histogram-buckets` (vLLM >= 0.34, `vllm/v1/metrics/buckets.py`
    // `histogram_buckets`): a family key present replaces its defaults for every histogram of it.
    let family = |key: &str, default: &[f64]| -> Vec<f64> {
        overrides
            .get(key)
            .cloned()
            .unwrap_or_else(|| default.to_vec())
    };
    let tokens = family("request_tokens", &bounds_1_2_5(max_model_len));
    let iteration = family("iteration_tokens", &ITERATION_BOUNDS);
    let params_n = family("request_params_n", &[1.0, 2.0, 5.0, 10.0, 20.0]);
    let ttft = family("time_to_first_token", &TTFT_BOUNDS);
    let itl = family("inter_token_latency", &ITL_BOUNDS);
    let latency = family("request_latency", &LATENCY_BOUNDS);
    let reasons = profile
        .finish_reasons()
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut v: Vec<FamilySpec> = Vec::new();
    let mut add = |fam, name, kind, help, children, bounds: &[f64]| {
        v.push(FamilySpec {
            fam,
            name,
            kind,
            help,
            children,
            bounds: bounds.to_vec(),
        });
    };
    use ChildOrder::Single as S;
    if let Some(k) = spec_k {
        add(
            Fam::SpecDrafts,
            "vllm:spec_decode_num_drafts",
            C,
            "Number of spec decoding drafts.",
            S,
            &[],
        );
        add(
            Fam::SpecDraftTokens,
            "vllm:spec_decode_num_draft_tokens",
            C,
            "Number of draft tokens.",
            S,
            &[],
        );
        add(
            Fam::SpecAccepted,
            "vllm:spec_decode_num_accepted_tokens",
            C,
            "Number of accepted tokens.",
            S,
            &[],
        );
        let pos = ChildOrder::EngineMajor("position", (0..k).map(|p| p.to_string()).collect());
        let help = "Accepted tokens per draft position.";
        add(
            Fam::SpecAcceptedPerPos,
            "vllm:spec_decode_num_accepted_tokens_per_pos",
            C,
            help,
            pos,
            &[],
        );
    }
    add(
        Fam::Running,
        "vllm:num_requests_running",
        G,
        "Number of requests in model execution batches.",
        S,
        &[],
    );
    add(
        Fam::Waiting,
        "vllm:num_requests_waiting",
        G,
        "Number of requests waiting to be processed.",
        S,
        &[],
    );
    if profile.has_gpu_cache_aliases() {
        let help = "GPU KV-cache usage. 1 means 100 percent usage.DEPRECATED: Use vllm:kv_cache_usage_perc instead.";
        add(
            Fam::GpuCacheUsage,
            "vllm:gpu_cache_usage_perc",
            G,
            help,
            S,
            &[],
        );
        let help = "GPU prefix cache queries, in terms of number of queriedtokens. DEPRECATED: Use vllm:prefix_cache_queries instead.";
        add(
            Fam::GpuPrefixQueries,
            "vllm:gpu_prefix_cache_queries",
            C,
            help,
            S,
            &[],
        );
        let help = "GPU prefix cache hits, in terms of number of cached tokens. DEPRECATED: Use vllm:prefix_cache_hits instead.";
        add(
            Fam::GpuPrefixHits,
            "vllm:gpu_prefix_cache_hits",
            C,
            help,
            S,
            &[],
        );
    }
    add(
        Fam::KvCacheUsage,
        "vllm:kv_cache_usage_perc",
        G,
        "KV-cache usage. 1 means 100 percent usage.",
        S,
        &[],
    );
    let help = "Prefix cache queries, in terms of number of queried tokens.";
    add(
        Fam::PrefixQueries,
        "vllm:prefix_cache_queries",
        C,
        help,
        S,
        &[],
    );
    let help = "Prefix cache hits, in terms of number of cached tokens.";
    add(Fam::PrefixHits, "vllm:prefix_cache_hits", C, help, S, &[]);
    if profile.has_connector_series() {
        let help = "External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of queried tokens.";
        add(
            Fam::ExternalPrefixQueries,
            "vllm:external_prefix_cache_queries",
            C,
            help,
            S,
            &[],
        );
        let help = "External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of cached tokens.";
        add(
            Fam::ExternalPrefixHits,
            "vllm:external_prefix_cache_hits",
            C,
            help,
            S,
            &[],
        );
    }
    add(
        Fam::Preemptions,
        "vllm:num_preemptions",
        C,
        "Cumulative number of preemption from the engine.",
        S,
        &[],
    );
    add(
        Fam::PromptTokens,
        "vllm:prompt_tokens",
        C,
        "Number of prefill tokens processed.",
        S,
        &[],
    );
    if profile.has_prompt_tokens_by_source() {
        let sources = ["local_compute", "local_cache_hit", "external_kv_transfer"]
            .map(String::from)
            .to_vec();
        let src = ChildOrder::ValueMajor("source", sources);
        add(
            Fam::PromptTokensBySource,
            "vllm:prompt_tokens_by_source",
            C,
            "Number of prompt tokens by source.",
            src,
            &[],
        );
        let help = "Number of cached prompt tokens (local + external).";
        add(
            Fam::PromptTokensCached,
            "vllm:prompt_tokens_cached",
            C,
            help,
            S,
            &[],
        );
    }
    if profile.has_cached_by_source() {
        // `CacheHitSource` in vLLM 0.34's `vllm/v1/metrics/cache_hit_source.py`, in enum order.
        let sources = ["device", "host", "p2p", "disk", "external_unspecified"]
            .map(String::from)
            .to_vec();
        let help = "Prefix-cache hit tokens by the cache tier that supplied them: device (local HBM), host (offloaded to DRAM), disk, p2p (transferred from another vLLM instance) or external_unspecified. Counted at admission; sums to vllm:prefix_cache_hits + vllm:external_prefix_cache_hits.";
        add(
            Fam::PromptTokensCachedBySource,
            "vllm:prompt_tokens_cached_by_source",
            C,
            help,
            ChildOrder::ValueMajor("source", sources),
            &[],
        );
    }
    add(
        Fam::GenerationTokens,
        "vllm:generation_tokens",
        C,
        "Number of generation tokens processed.",
        S,
        &[],
    );
    let fr = ChildOrder::ValueMajor("finished_reason", reasons);
    add(
        Fam::RequestSuccess,
        "vllm:request_success",
        C,
        "Count of successfully processed requests.",
        fr,
        &[],
    );
    add(
        Fam::RequestPromptTokens,
        "vllm:request_prompt_tokens",
        H,
        "Number of prefill tokens processed.",
        S,
        &tokens,
    );
    let help = "Number of generation tokens processed.";
    add(
        Fam::RequestGenerationTokens,
        "vllm:request_generation_tokens",
        H,
        help,
        S,
        &tokens,
    );
    let help = "Histogram of number of tokens per engine_step.";
    add(
        Fam::IterationTokens,
        "vllm:iteration_tokens_total",
        H,
        help,
        S,
        &iteration,
    );
    let help = "Histogram of maximum number of requested generation tokens.";
    add(
        Fam::RequestMaxNumGenerationTokens,
        "vllm:request_max_num_generation_tokens",
        H,
        help,
        S,
        &tokens,
    );
    let help = "Histogram of the n request parameter.";
    add(
        Fam::RequestParamsN,
        "vllm:request_params_n",
        H,
        help,
        S,
        &params_n,
    );
    let help = "Histogram of the max_tokens request parameter.";
    add(
        Fam::RequestParamsMaxTokens,
        "vllm:request_params_max_tokens",
        H,
        help,
        S,
        &tokens,
    );
    let help = "Histogram of time to first token in seconds.";
    add(
        Fam::Ttft,
        "vllm:time_to_first_token_seconds",
        H,
        help,
        S,
        &ttft,
    );
    if profile.has_old_itl_name() {
        let help = if profile.has_itl_name() {
            "Histogram of time per output token in seconds.DEPRECATED: Use vllm:inter_token_latency_seconds instead."
        } else {
            "Histogram of time per output token in seconds."
        };
        add(
            Fam::OldTpot,
            "vllm:time_per_output_token_seconds",
            H,
            help,
            S,
            &itl,
        );
    }
    if profile.has_itl_name() {
        let help = "Histogram of inter-token latency in seconds.";
        add(
            Fam::Itl,
            "vllm:inter_token_latency_seconds",
            H,
            help,
            S,
            &itl,
        );
    }
    if profile.has_request_tpot() {
        let help = "Histogram of time_per_output_token_seconds per request.";
        add(
            Fam::RequestTpot,
            "vllm:request_time_per_output_token_seconds",
            H,
            help,
            S,
            &itl,
        );
    }
    let help = "Histogram of e2e request latency in seconds.";
    add(
        Fam::E2e,
        "vllm:e2e_request_latency_seconds",
        H,
        help,
        S,
        &latency,
    );
    let help = "Histogram of time spent in WAITING phase for request.";
    add(
        Fam::QueueTime,
        "vllm:request_queue_time_seconds",
        H,
        help,
        S,
        &latency,
    );
    let help = "Histogram of time spent in RUNNING phase for request.";
    add(
        Fam::InferenceTime,
        "vllm:request_inference_time_seconds",
        H,
        help,
        S,
        &latency,
    );
    let help = "Histogram of time spent in PREFILL phase for request.";
    add(
        Fam::PrefillTime,
        "vllm:request_prefill_time_seconds",
        H,
        help,
        S,
        &latency,
    );
    let help = "Histogram of time spent in DECODE phase for request.";
    add(
        Fam::DecodeTime,
        "vllm:request_decode_time_seconds",
        H,
        help,
        S,
        &latency,
    );
    if profile.has_connector_series() {
        let help = "Histogram of new KV tokens computed during prefill (excluding cached tokens).";
        add(
            Fam::PrefillKvComputed,
            "vllm:request_prefill_kv_computed_tokens",
            H,
            help,
            S,
            &tokens,
        );
    }
    v
}
