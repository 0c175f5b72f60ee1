//! The `simulate` subcommand: real-time `/metrics` and `/truth` over HTTP, optional remote
//! write of every scrape, or an instant run that only writes files.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::exposition::{ExposedType, Snapshot, SnapshotFamily, SnapshotSample};
use super::model::{ItlObservation, SimConfig, SpecConfig};
use super::profile::Profile;
use super::remote_write;
use super::{SimError, Simulator};

/// Name of the simulator's own gauge giving the instant of each `/metrics` snapshot, Unix
/// seconds (ms precision). Not a vLLM series: end-to-end tests read it through Prometheus to
/// ask `/truth` for exactly the window between two scrapes.
pub(crate) const SNAPSHOT_TIME_METRIC: &str = "vllm_sim_snapshot_time_seconds";

/// Arguments of `vllm-corrector simulate`. Durations accept humantime (`1s`, `500ms`, `10m`).
#[derive(Debug, Clone, clap::Args)]
pub struct SimulateArgs {
    /// vLLM version profile to expose.
    #[arg(long, value_enum, default_value = "0.33")]
    pub profile: Profile,
    /// Seed of every random draw (same seed → same trajectory).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Comma-separated `model_name` values, one simulated vLLM server each.
    #[arg(long, value_delimiter = ',', default_value = "sim-model")]
    pub models: Vec<String>,
    /// Data-parallel engines per model (`engine` label 0..N-1).
    #[arg(long, default_value_t = 1)]
    pub(crate) engines: u32,
    /// Poisson arrival rate per model, requests per second.
    #[arg(long, default_value_t = 4.0)]
    pub(crate) rate: f64,
    /// Shortest prompt, tokens.
    #[arg(long, default_value_t = 32)]
    pub(crate) prompt_min: u32,
    /// Longest prompt, tokens.
    #[arg(long, default_value_t = 1024)]
    pub(crate) prompt_max: u32,
    /// Probability of a local prefix-cache hit on a prompt.
    #[arg(long, default_value_t = 0.3)]
    pub prefix_hit_prob: f64,
    /// Probability that a request's prompt KV arrives by P/D transfer.
    #[arg(long, default_value_t = 0.0)]
    pub kv_transfer_prob: f64,
    /// Shortest output of an n ≥ 2 request, tokens (≥ 2).
    #[arg(long, default_value_t = 2)]
    pub(crate) output_min: u32,
    /// Longest output, tokens (≤ --max-tokens).
    #[arg(long, default_value_t = 256)]
    pub(crate) output_max: u32,
    /// Fraction of requests failing engine-side with no token (n = 0).
    #[arg(long, default_value_t = 0.02)]
    pub zero_token_fraction: f64,
    /// Fraction of single-token requests (n = 1).
    #[arg(long, default_value_t = 0.1)]
    pub single_token_fraction: f64,
    /// The `max_tokens` request parameter (n reaching it finishes with `length`).
    #[arg(long, default_value_t = 256)]
    pub max_tokens: u32,
    /// Draft tokens per decode step (speculative decoding); 0 disables it.
    #[arg(long, default_value_t = 0)]
    pub(crate) spec_tokens: u32,
    /// Per-draft acceptance probability.
    #[arg(long, default_value_t = 0.7)]
    pub(crate) spec_acceptance: f64,
    /// Fraction of request decode steps without drafts.
    #[arg(long, default_value_t = 0.0)]
    pub(crate) spec_no_draft_fraction: f64,
    /// Record ITL per token, as vllm#47382 proposes and SGLang does: an output of k tokens
    /// records k samples of its gap / k (default: one sample of the gap per output).
    #[arg(long)]
    pub(crate) itl_per_token: bool,
    /// vLLM 0.34's `--custom-histogram-buckets` (profile 0.34): a JSON object from bucket family
    /// key to upper bounds, e.g. `'{"inter_token_latency": [0.02, 0.03, 0.07]}'`.
    #[arg(long, value_parser = parse_bucket_overrides)]
    pub(crate) custom_histogram_buckets: Option<BucketOverrides>,
    /// Engine time per step, seconds.
    #[arg(long, default_value_t = 0.015)]
    pub(crate) step_base: f64,
    /// Engine time per computed token, seconds.
    #[arg(long, default_value_t = 0.0001)]
    pub(crate) step_per_token: f64,
    /// Maximum running requests per engine.
    #[arg(long, default_value_t = 64)]
    pub max_num_seqs: u32,
    /// Token budget per step.
    #[arg(long, default_value_t = 4096)]
    pub max_num_batched_tokens: u32,
    /// KV cache capacity per engine, tokens.
    #[arg(long, default_value_t = 200_000)]
    pub kv_cache_tokens: u64,
    /// `max_model_len` (bounds of the request-token histograms).
    #[arg(long, default_value_t = 32_768)]
    pub max_model_len: u32,
    /// Address serving `/metrics` and `/truth` in real-time mode.
    #[arg(long = "web.listen-address", default_value = "127.0.0.1:8000")]
    pub(crate) listen_address: SocketAddr,
    /// Remote-write every snapshot to this URL (e.g. `http://127.0.0.1:9490/api/v1/write`).
    #[arg(long = "remote-write.url")]
    pub(crate) remote_write_url: Option<String>,
    /// Interval between remote-written snapshots (longer than 0s).
    #[arg(long = "remote-write.interval", default_value = "1s", value_parser = crate::args::positive_duration)]
    pub(crate) remote_write_interval: Duration,
    /// Samples per remote-write request.
    #[arg(long = "remote-write.max-samples-per-send", default_value_t = 500)]
    pub(crate) remote_write_max_samples: usize,
    /// Extra `name=value` label on every remote-written series (repeatable), e.g. `job=vllm`.
    #[arg(long = "remote-write.label", value_parser = parse_label)]
    pub(crate) remote_write_labels: Vec<(String, String)>,
    /// Write the truth JSON here when the run ends.
    #[arg(long)]
    pub(crate) truth_file: Option<PathBuf>,
    /// Stop after this much simulated time (required with --instant).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub(crate) duration: Option<Duration>,
    /// Run the whole --duration at once (no server), write --truth-file, print the final
    /// `/metrics` body to stdout (or write it to --metrics-file), exit.
    #[arg(long, requires = "duration")]
    pub(crate) instant: bool,
    /// Write the final `/metrics` body here when the run ends (with --instant: instead of
    /// printing it to stdout).
    #[arg(long)]
    pub(crate) metrics_file: Option<PathBuf>,
}

fn parse_label(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("expected name=value, got {s:?}")),
    }
}

impl SimulateArgs {
    /// The simulator configuration these arguments describe, with the given epoch.
    pub(crate) fn config(&self, epoch_unix_ms: i64) -> SimConfig {
        SimConfig {
            profile: self.profile,
            models: self.models.clone(),
            engines_per_model: self.engines,
            arrival_rate: self.rate,
            prompt_len: (self.prompt_min, self.prompt_max),
            prefix_hit_prob: self.prefix_hit_prob,
            kv_transfer_prob: self.kv_transfer_prob,
            output_len: (self.output_min, self.output_max),
            zero_token_fraction: self.zero_token_fraction,
            single_token_fraction: self.single_token_fraction,
            max_tokens: self.max_tokens,
            spec: (self.spec_tokens > 0).then_some(SpecConfig {
                num_speculative_tokens: self.spec_tokens,
                acceptance_prob: self.spec_acceptance,
                no_draft_fraction: self.spec_no_draft_fraction,
            }),
            itl_observation: if self.itl_per_token {
                ItlObservation::PerToken
            } else {
                ItlObservation::PerOutput
            },
            step_base_s: self.step_base,
            step_per_token_s: self.step_per_token,
            max_num_seqs: self.max_num_seqs,
            max_num_batched_tokens: self.max_num_batched_tokens,
            kv_cache_tokens: self.kv_cache_tokens,
            max_model_len: self.max_model_len,
            seed: self.seed,
            epoch_unix_ms,
            bucket_overrides: self
                .custom_histogram_buckets
                .clone()
                .map(|o| o.0)
                .unwrap_or_default(),
            ..SimConfig::default()
        }
    }
}

/// A parsed `--custom-histogram-buckets`: bucket family key → upper bounds.
#[derive(Debug, Clone, PartialEq)]
pub struct BucketOverrides(pub std::collections::BTreeMap<String, Vec<f64>>);

/// Parses `--custom-histogram-buckets`: a JSON object of number lists, keyed by the bucket
/// families of [`crate::BUCKET_FAMILIES`]. The bounds are checked with the rest of the
/// configuration ([`SimConfig`]).
///
/// # Errors
/// The JSON error, or the unknown family key.
pub fn parse_bucket_overrides(text: &str) -> Result<BucketOverrides, String> {
    let map: std::collections::BTreeMap<String, Vec<f64>> = serde_json::from_str(text)
        .map_err(|e| format!("not a JSON object of number lists: {e}"))?;
    if let Some(unknown) = map
        .keys()
        .find(|k| !crate::BUCKET_FAMILIES.contains(&k.as_str()))
    {
        return Err(format!(
            "unknown bucket family {unknown:?}; known: {}",
            crate::BUCKET_FAMILIES.join(", ")
        ));
    }
    Ok(BucketOverrides(map))
}

/// A simulator driven by the wall clock: simulated time = elapsed whole milliseconds since
/// start, so every snapshot instant is an exact Unix millisecond.
#[derive(Debug, Clone)]
pub struct LiveSim {
    inner: Arc<Mutex<Simulator>>,
    start: Instant,
}

impl LiveSim {
    /// Wraps `sim`, whose epoch should be the current Unix time in ms.
    pub fn new(sim: Simulator) -> Self {
        LiveSim {
            inner: Arc::new(Mutex::new(sim)),
            start: Instant::now(),
        }
    }

    /// Advances to now and runs `f` on the simulator.
    pub fn with<T>(&self, f: impl FnOnce(&mut Simulator) -> T) -> T {
        let mut sim = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let ms = self.start.elapsed().as_millis() as u64;
        sim.advance_to_ns(ms * 1_000_000);
        f(&mut sim)
    }

    /// Snapshot at now, plus the `SNAPSHOT_TIME_METRIC` gauge.
    pub fn snapshot(&self) -> Snapshot {
        let mut snap = self.with(|s| s.snapshot());
        snap.families.push(SnapshotFamily {
            name: SNAPSHOT_TIME_METRIC.into(),
            exposed_type: ExposedType::Gauge,
            help: "Instant of this simulator snapshot (Unix seconds); pass it to /truth?from=&to=."
                .into(),
            samples: vec![SnapshotSample {
                name: SNAPSHOT_TIME_METRIC.into(),
                labels: Vec::new(),
                value: snap.timestamp_ms as f64 / 1000.0,
            }],
        });
        snap
    }
}

/// Current Unix time in whole milliseconds.
pub fn unix_now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn query_param(uri: &Uri, key: &str) -> Option<String> {
    uri.query()?.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| v.to_string())
    })
}

/// `GET /truth?from=&to=`: truth over `[from, to)` in Unix seconds (default: the whole run;
/// `to` is clamped to now). 400 for an unparsable or reversed window.
async fn truth_handler(live: LiveSim, uri: Uri) -> Response {
    let parse = |k: &str| {
        query_param(&uri, k).map(|v| v.parse::<f64>().map_err(|_| format!("bad {k}={v:?}")))
    };
    let (from, to) = match (parse("from").transpose(), parse("to").transpose()) {
        (Ok(f), Ok(t)) => (f, t),
        (Err(e), _) | (_, Err(e)) => return (StatusCode::BAD_REQUEST, e).into_response(),
    };
    let body = live.with(|sim| {
        let from_ns = from.map_or(0, |f| sim.unix_s_to_ns(f));
        let to_ns = to
            .map_or(sim.now_ns(), |t| sim.unix_s_to_ns(t))
            .min(sim.now_ns());
        if to_ns < from_ns {
            return Err("window end before its start".to_string());
        }
        serde_json::to_string(&sim.truth_window(from_ns, to_ns)).map_err(|e| e.to_string())
    });
    match body {
        Ok(json) => ([(header::CONTENT_TYPE, "application/json")], json).into_response(),
        Err(e) => (StatusCode::BAD_REQUEST, e).into_response(),
    }
}

/// The router of the real-time mode: `/metrics`, `/truth`, `/-/healthy`.
pub fn router(live: LiveSim) -> Router {
    let m = live.clone();
    let t = live;
    Router::new()
        .route(
            "/metrics",
            get(move || {
                let m = m.clone();
                async move {
                    (
                        [(
                            header::CONTENT_TYPE,
                            "text/plain; version=0.0.4; charset=utf-8",
                        )],
                        m.snapshot().render_text(),
                    )
                }
            }),
        )
        .route("/truth", get(move |uri: Uri| truth_handler(t.clone(), uri)))
        .route("/-/healthy", get(|| async { "OK" }))
}

async fn remote_write_loop(live: LiveSim, args: SimulateArgs, url: String) {
    let client = reqwest::Client::new();
    let mut tick = tokio::time::interval(args.remote_write_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut last_metadata: Option<Instant> = None;
    loop {
        tick.tick().await;
        let snap = live.snapshot();
        let mut bodies = Vec::new();
        if last_metadata.is_none_or(|t| t.elapsed() >= Duration::from_secs(60)) {
            bodies.push(remote_write::encode(&remote_write::metadata_request(&snap)));
            last_metadata = Some(Instant::now());
        }
        for req in remote_write::write_requests(
            &snap,
            &args.remote_write_labels,
            args.remote_write_max_samples,
        ) {
            bodies.push(remote_write::encode(&req));
        }
        for body in bodies {
            if let Err(e) = remote_write::post(&client, &url, body).await {
                tracing::warn!(error = %e, "simulator remote write dropped a batch");
            }
        }
    }
}

/// Writes `--truth-file` and `--metrics-file` when given; with `stdout_metrics` and no
/// `--metrics-file`, prints the `/metrics` body to stdout instead (the instant mode's output).
fn write_outputs(
    sim: &Simulator,
    args: &SimulateArgs,
    stdout_metrics: bool,
) -> Result<(), SimError> {
    if let Some(path) = &args.truth_file {
        std::fs::write(path, serde_json::to_vec_pretty(&sim.truth_document())?)?;
    }
    match &args.metrics_file {
        Some(path) => std::fs::write(path, sim.render_text())?,
        None if stdout_metrics => {
            use std::io::Write as _;
            let mut out = std::io::stdout().lock();
            out.write_all(sim.render_text().as_bytes())?;
            out.flush()?;
        }
        None => {}
    }
    Ok(())
}

async fn shutdown_signal(duration: Option<Duration>) {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    let timer = async {
        match duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending::<()>().await,
        }
    };
    tokio::select! { _ = ctrl_c => {}, _ = term => {}, _ = timer => {} }
}

/// Runs `simulate`. Instant mode: simulates `--duration` at once, writes `--truth-file`, writes
/// the final `/metrics` body to `--metrics-file` or else prints it to stdout, and returns.
/// Real-time mode: serves `/metrics` and `/truth` on `--web.listen-address`, remote-writes if
/// asked, and on SIGINT/SIGTERM or after `--duration` writes the truth and metrics files and
/// returns.
///
/// # Errors
/// [`SimError::Config`] for invalid arguments (`--instant` without `--duration` when not parsed
/// by clap), [`SimError::Io`] for bind, file or stdout errors.
pub async fn run(args: SimulateArgs) -> Result<(), SimError> {
    if args.instant {
        let d = args
            .duration
            .ok_or_else(|| SimError::Config("--instant needs --duration".into()))?;
        let mut sim = Simulator::new(args.config(SimConfig::default().epoch_unix_ms))?;
        sim.advance_to_ns(d.as_nanos() as u64);
        return write_outputs(&sim, &args, true);
    }
    let live = LiveSim::new(Simulator::new(args.config(unix_now_ms()))?);
    let listener = tokio::net::TcpListener::bind(args.listen_address).await?;
    tracing::info!(address = %args.listen_address, profile = %args.profile, "simulator serving /metrics and /truth");
    let ticker = {
        let live = live.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            loop {
                tick.tick().await;
                live.with(|_| ());
            }
        })
    };
    let writer = args
        .remote_write_url
        .clone()
        .map(|url| tokio::spawn(remote_write_loop(live.clone(), args.clone(), url)));
    let served = axum::serve(listener, router(live.clone()))
        .with_graceful_shutdown(shutdown_signal(args.duration))
        .await;
    ticker.abort();
    if let Some(w) = writer {
        w.abort();
    }
    served?;
    live.with(|sim| write_outputs(sim, &args, false))
}
