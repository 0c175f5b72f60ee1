//! vLLM-shaped remote-write 1.0 payloads for the benchmarks and the load generator.
//!
//! Shared by the benches and `examples/loadgen/` (each includes this file with `#[path]`),
//! so both measure the same bytes. Not part of the library.
//!
//! **Series of one engine** (vLLM 0.33 v1 metrics, `vllm/v1/metrics/loggers.py`, as Python
//! `prometheus_client` exposes them; bounds from `docs/METRICS.md`, "Default bucket bounds"):
//! every histogram's `_bucket{le}` (bounds plus `+Inf`), `_sum`, `_count` and `_created`; every
//! counter's `_total` and `_created`; a few gauges. About 300 series per engine, of which 51 are read by a rule (ITL and
//! request-TPOT histograms, `request_generation_tokens{le="1.0"}` and `_count`, generation tokens,
//! TTFT `_count`, local-compute prompt tokens, iteration `_count`, accepted draft tokens). Each pod
//! adds Prometheus' own per-target series (`up`, `scrape_*`) and Python process series, without
//! `engine`.
//!
//! **Labels** as Prometheus 2.42 sends them after a scrape: sorted by name, `__name__` first, then
//! `engine`, `instance`, `job`, `le`/`source`/`position`/`finished_reason` where the series has one,
//! `model_name`, `namespace`, `pod`.
//!
//! **Batches** as Prometheus 2.42's remote-write queue cuts them: each series is hashed to one of
//! `shards` queues; each queue receives its series' samples in scrape order and sends 500 samples
//! per request, one sample per `TimeSeries`; requests of the shards interleave. Scrape `k` (from 1)
//! carries timestamp `t0_ms + k * step_ms` and cumulative values that grow linearly in `k`, consistent
//! enough that every corrected family is emitted (TPOT buckets ≥ short requests, tokens ≥ first
//! outputs).

#![allow(dead_code)]

// The RW 1.0 encoding and the batching of the fleet: `vllm_payload.rs`, beside this file.
#[path = "vllm_payload.rs"]
mod payload;
pub(crate) use payload::{Payloads, compress};

/// Samples per request, Prometheus' `queue_config.max_samples_per_send` default.
pub(crate) const SAMPLES_PER_BATCH: usize = 500;

const ITL_BOUNDS: [f64; 19] = [
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];
const TTFT_BOUNDS: [f64; 22] = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
const REQUEST_BOUNDS: [f64; 21] = [
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];
const ITERATION_BOUNDS: [f64; 13] = [
    1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0,
];
const TOKEN_BOUNDS: [f64; 12] = [
    1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0,
];

/// How a series' value evolves with the scrape number `k` (from 1).
#[derive(Debug, Clone, Copy)]
enum Value {
    /// Cumulative: `per_scrape * k`.
    Counter(f64),
    /// Constant.
    Gauge(f64),
}

/// One series: its label pairs as encoded (sorted by name), and how its value evolves.
#[derive(Debug, Clone)]
pub(crate) struct SeriesTemplate {
    /// `(name, value)`, sorted by name.
    pub labels: Vec<(String, String)>,
    value: Value,
}

impl SeriesTemplate {
    /// The sample value at scrape `k` (from 1).
    pub(crate) fn value_at(&self, k: u64) -> f64 {
        match self.value {
            Value::Counter(per_scrape) => per_scrape * k as f64,
            Value::Gauge(v) => v,
        }
    }

    /// The metric name.
    pub(crate) fn name(&self) -> &str {
        &self
            .labels
            .iter()
            .find(|(n, _)| n == "__name__")
            .expect("every template has a name")
            .1
    }
}

/// A bound as vLLM prints `le` (`0.01`, `1.0`, `+Inf`).
fn le_text(le: f64) -> String {
    protocol::float::format_le(le)
}

struct PodLabels<'a> {
    pod: &'a str,
    namespace: &'a str,
    instance: &'a str,
}

fn make(
    pod: &PodLabels<'_>,
    engine: Option<&str>,
    name: &str,
    extra: &[(&str, &str)],
    value: Value,
) -> SeriesTemplate {
    let mut labels = vec![
        ("__name__".to_owned(), name.to_owned()),
        ("instance".to_owned(), pod.instance.to_owned()),
        ("job".to_owned(), "vllm".to_owned()),
        ("namespace".to_owned(), pod.namespace.to_owned()),
        ("pod".to_owned(), pod.pod.to_owned()),
    ];
    if let Some(engine) = engine {
        labels.push(("engine".to_owned(), engine.to_owned()));
        labels.push((
            "model_name".to_owned(),
            "meta-llama/Llama-3.1-8B-Instruct".to_owned(),
        ));
    }
    labels.extend(
        extra
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned())),
    );
    labels.sort();
    SeriesTemplate { labels, value }
}

/// Pushes a histogram's `_bucket`s (cumulative fraction `cdf(le)` of `count` observations per
/// scrape), `_sum`, `_count` and `_created`.
#[allow(clippy::too_many_arguments)]
fn histogram(
    out: &mut Vec<SeriesTemplate>,
    pod: &PodLabels<'_>,
    engine: &str,
    base: &str,
    bounds: &[f64],
    count: f64,
    mean: f64,
    cdf: impl Fn(f64) -> f64,
) {
    let bucket = format!("{base}_bucket");
    for &le in bounds.iter().chain([f64::INFINITY].iter()) {
        let fraction = if le.is_infinite() {
            1.0
        } else {
            cdf(le).min(1.0)
        };
        // Whole observations, as a real histogram counts them.
        let per_scrape = (count * fraction).floor();
        out.push(make(
            pod,
            Some(engine),
            &bucket,
            &[("le", &le_text(le))],
            Value::Counter(per_scrape),
        ));
    }
    out.push(make(
        pod,
        Some(engine),
        &format!("{base}_sum"),
        &[],
        Value::Counter(count * mean),
    ));
    out.push(make(
        pod,
        Some(engine),
        &format!("{base}_count"),
        &[],
        Value::Counter(count),
    ));
    out.push(make(
        pod,
        Some(engine),
        &format!("{base}_created"),
        &[],
        Value::Gauge(1.7e9),
    ));
}

fn counter(
    out: &mut Vec<SeriesTemplate>,
    pod: &PodLabels<'_>,
    engine: &str,
    base: &str,
    extra: &[(&str, &str)],
    per_scrape: f64,
) {
    out.push(make(
        pod,
        Some(engine),
        &format!("{base}_total"),
        extra,
        Value::Counter(per_scrape),
    ));
    out.push(make(
        pod,
        Some(engine),
        &format!("{base}_created"),
        extra,
        Value::Gauge(1.7e9),
    ));
}

fn exponential(scale: f64) -> impl Fn(f64) -> f64 {
    move |le| 1.0 - (-le / scale).exp()
}

/// Every series of one vLLM engine of `pod` (spec decoding on).
fn engine_series(out: &mut Vec<SeriesTemplate>, pod: &PodLabels<'_>, engine: &str) {
    // Per scrape: 10 finished requests, 1 of them with a single output token; 400 non-first outputs.
    histogram(
        out,
        pod,
        engine,
        "vllm:time_to_first_token_seconds",
        &TTFT_BOUNDS,
        10.0,
        0.2,
        exponential(0.2),
    );
    histogram(
        out,
        pod,
        engine,
        "vllm:inter_token_latency_seconds",
        &ITL_BOUNDS,
        400.0,
        0.03,
        exponential(0.03),
    );
    histogram(
        out,
        pod,
        engine,
        "vllm:request_time_per_output_token_seconds",
        &ITL_BOUNDS,
        10.0,
        0.02,
        |le| 0.2 + 0.8 * (1.0 - (-le / 0.02).exp()),
    );
    for base in [
        "e2e_request_latency",
        "request_queue_time",
        "request_prefill_time",
        "request_decode_time",
        "request_inference_time",
    ] {
        histogram(
            out,
            pod,
            engine,
            &format!("vllm:{base}_seconds"),
            &REQUEST_BOUNDS,
            10.0,
            4.0,
            exponential(4.0),
        );
    }
    histogram(
        out,
        pod,
        engine,
        "vllm:request_generation_tokens",
        &TOKEN_BOUNDS,
        10.0,
        200.0,
        |le| 0.1 + 0.9 * (1.0 - (-(le - 1.0) / 200.0).exp()),
    );
    histogram(
        out,
        pod,
        engine,
        "vllm:request_prompt_tokens",
        &TOKEN_BOUNDS,
        10.0,
        800.0,
        exponential(800.0),
    );
    histogram(
        out,
        pod,
        engine,
        "vllm:request_params_max_tokens",
        &TOKEN_BOUNDS,
        10.0,
        1000.0,
        exponential(1000.0),
    );
    histogram(
        out,
        pod,
        engine,
        "vllm:iteration_tokens_total",
        &ITERATION_BOUNDS,
        500.0,
        16.0,
        exponential(16.0),
    );
    counter(out, pod, engine, "vllm:generation_tokens", &[], 1000.0);
    counter(out, pod, engine, "vllm:prompt_tokens", &[], 8000.0);
    for (source, n) in [
        ("local_compute", 3000.0),
        ("local_cache_hit", 5000.0),
        ("external_kv_transfer", 0.0),
    ] {
        counter(
            out,
            pod,
            engine,
            "vllm:prompt_tokens_by_source",
            &[("source", source)],
            n,
        );
    }
    for (reason, n) in [
        ("stop", 8.0),
        ("length", 2.0),
        ("abort", 0.0),
        ("error", 0.0),
        ("repetition", 0.0),
    ] {
        counter(
            out,
            pod,
            engine,
            "vllm:request_success",
            &[("finished_reason", reason)],
            n,
        );
    }
    counter(out, pod, engine, "vllm:num_preemptions", &[], 0.0);
    counter(out, pod, engine, "vllm:prefix_cache_queries", &[], 8000.0);
    counter(out, pod, engine, "vllm:prefix_cache_hits", &[], 5000.0);
    counter(out, pod, engine, "vllm:spec_decode_num_drafts", &[], 300.0);
    counter(
        out,
        pod,
        engine,
        "vllm:spec_decode_num_draft_tokens",
        &[],
        900.0,
    );
    counter(
        out,
        pod,
        engine,
        "vllm:spec_decode_num_accepted_tokens",
        &[],
        590.0,
    );
    for (position, n) in [("0", 260.0), ("1", 200.0), ("2", 130.0)] {
        counter(
            out,
            pod,
            engine,
            "vllm:spec_decode_num_accepted_tokens_per_pos",
            &[("position", position)],
            n,
        );
    }
    for (name, v) in [
        ("vllm:num_requests_running", 12.0),
        ("vllm:num_requests_waiting", 0.0),
        ("vllm:kv_cache_usage_perc", 0.41),
    ] {
        out.push(make(pod, Some(engine), name, &[], Value::Gauge(v)));
    }
}

/// Prometheus' per-target series and the Python process collector's, without `engine`.
fn pod_series(out: &mut Vec<SeriesTemplate>, pod: &PodLabels<'_>) {
    for (name, v) in [
        ("up", Value::Gauge(1.0)),
        ("scrape_duration_seconds", Value::Gauge(0.012)),
        ("scrape_samples_scraped", Value::Gauge(640.0)),
        ("scrape_samples_post_metric_relabeling", Value::Gauge(640.0)),
        ("scrape_series_added", Value::Gauge(0.0)),
        ("process_cpu_seconds_total", Value::Counter(1.5)),
        ("process_resident_memory_bytes", Value::Gauge(3.1e9)),
        ("process_virtual_memory_bytes", Value::Gauge(4.4e10)),
        ("process_open_fds", Value::Gauge(120.0)),
        ("process_max_fds", Value::Gauge(1_048_576.0)),
        ("process_start_time_seconds", Value::Gauge(1.7e9)),
        ("python_info", Value::Gauge(1.0)),
    ] {
        out.push(make(pod, None, name, &[], v));
    }
    for generation in ["0", "1", "2"] {
        for (name, per_scrape) in [
            ("python_gc_objects_collected_total", 40.0),
            ("python_gc_collections_total", 2.0),
        ] {
            out.push(make(
                pod,
                None,
                name,
                &[("generation", generation)],
                Value::Counter(per_scrape),
            ));
        }
    }
}

/// Every series of `pods` pods with `engines` data-parallel engines each.
pub(crate) fn fleet(pods: usize, engines: usize) -> Vec<SeriesTemplate> {
    let mut out = Vec::new();
    for p in 0..pods {
        let pod = format!("vllm-llama-8b-{:05}-7c9f", p);
        let instance = format!("10.{}.{}.{}:8000", (p >> 16) & 255, (p >> 8) & 255, p & 255);
        let labels = PodLabels {
            pod: &pod,
            namespace: "inference",
            instance: &instance,
        };
        for e in 0..engines {
            engine_series(&mut out, &labels, &e.to_string());
        }
        pod_series(&mut out, &labels);
    }
    out
}

/// Number of series a pod with `engines` engines has (see [`fleet`]).
pub(crate) fn series_per_pod(engines: usize) -> usize {
    fleet(1, engines).len()
}

/// Names of the series a rule reads, for reporting what fraction of the fleet is tracked.
pub(crate) fn is_rule_input(t: &SeriesTemplate) -> bool {
    let le = t
        .labels
        .iter()
        .find(|(n, _)| n == "le")
        .map(|(_, v)| v.as_str());
    let source = t
        .labels
        .iter()
        .find(|(n, _)| n == "source")
        .map(|(_, v)| v.as_str());
    match t.name() {
        n if n.starts_with("vllm:inter_token_latency_seconds_")
            || n.starts_with("vllm:request_time_per_output_token_seconds_") =>
        {
            !n.ends_with("_created")
        }
        "vllm:request_generation_tokens_bucket" => le == Some("1.0"),
        "vllm:request_generation_tokens_count"
        | "vllm:generation_tokens_total"
        | "vllm:time_to_first_token_seconds_count"
        | "vllm:iteration_tokens_total_count"
        | "vllm:spec_decode_num_accepted_tokens_total" => true,
        "vllm:prompt_tokens_by_source_total" => source == Some("local_compute"),
        _ => false,
    }
}
