//! `vllm-corrector demo`: the service and a simulator in one process, no cluster.
//!
//! The simulator (seeded vLLM engines, spec decoding on) remote-writes a snapshot of its `/metrics`
//! into the corrector every `--scrape-interval`, over HTTP on the corrector's listen address, as
//! Prometheus would. After each write the demo reads the corrector's `/metrics` back. Every
//! `--refresh` it prints raw, corrected and true values side by side over the window between two
//! of those snapshots (the last `--window`, or since the start):
//!
//! * **raw**: vLLM's own series, `Δ_sum / Δ_count` and `histogram_quantile(0.99, Δ_bucket)`;
//! * **corrected**: the corrector's families, the same way (PromQL's `rate(x_sum[w]) /
//!   rate(x_count[w])` and `histogram_quantile` with linear interpolation give the same numbers);
//! * **truth**: the simulator's per-request and per-iteration records over the same window,
//!   `[from, to)` of the two snapshot instants (`vllm bench serve` definitions, numpy percentiles).
//!
//! Then, per SLO (`demo_slos`, or the `slos:` of `--config.file`), each SLI's attainment from
//! vLLM's histogram, from the corrector's SLO counters and from the records, and the goodput
//! bounds beside the naive reading and the true goodput (`crates/tools/src/compare/slo.rs`).
//!
//! On a terminal the table is redrawn in place (ANSI colours unless `--no-color` or `NO_COLOR`);
//! otherwise each refresh prints plain `key=value` lines with every value at full precision.

use std::collections::VecDeque;
use std::future::Future;
use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub(crate) use super::compare::{Comparison, comparison, plain_lines, render_table};
use super::readings::{Dump, DumpSample, Interval, cumulative_by_suffix};
use super::slo_readings;
use engine::slo::{DEFAULT_BY, Sli, Slo, SloSet, SloSpec};
use engine::{Engine, EngineConfig};
use promtext::Format;
use service::config::Limits;
use service::http::AppState;
use service::run;
use sim::exposition::ExposedType;
use sim::remote_write;
use sim::serve::{LiveSim, unix_now_ms};
use sim::{ItlObservation, Profile, SimConfig, SimError, Simulator, Snapshot, SpecConfig};

/// Arguments of `demo`. Durations accept humantime (`2s`, `500ms`, `1m`); `--refresh`, `--window`
/// and `--scrape-interval` must be longer than zero (the argument parser refuses `0s`).
#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// Address of the in-process corrector: remote write in, `/metrics` out.
    #[arg(
        long = "web.listen-address",
        value_name = "HOST:PORT",
        default_value = "127.0.0.1:9490"
    )]
    pub(crate) listen_address: SocketAddr,
    /// Stop after this long (default: run until Ctrl-C or SIGTERM).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub(crate) duration: Option<Duration>,
    /// How often the table is refreshed (longer than 0s).
    #[arg(long, default_value = "5s", value_parser = sim::positive_duration)]
    pub(crate) refresh: Duration,
    /// Window of the comparison, like PromQL's `[1m]` (shorter while the run is younger; at least
    /// one scrape interval). Longer than 0s.
    #[arg(long, default_value = "1m", value_parser = sim::positive_duration)]
    pub(crate) window: Duration,
    /// How often the simulator remote-writes a snapshot (Prometheus' scrape interval). Longer
    /// than 0s.
    #[arg(long = "scrape-interval", default_value = "1s", value_parser = sim::positive_duration)]
    pub(crate) scrape_interval: Duration,
    /// Seed of the simulator's random draws.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// vLLM version profile the simulator exposes.
    #[arg(long, value_enum, default_value = "0.33")]
    pub profile: Profile,
    /// Data-parallel engines of the simulated vLLM server.
    #[arg(long, default_value_t = 2)]
    pub(crate) engines: u32,
    /// Request arrival rate, requests per second.
    #[arg(long, default_value_t = 6.0)]
    pub(crate) rate: f64,
    /// Draft tokens per decode step (speculative decoding); 0 turns it off.
    #[arg(long, default_value_t = 3)]
    pub(crate) spec_tokens: u32,
    /// Per-draft acceptance probability.
    #[arg(long, default_value_t = 0.7)]
    pub(crate) spec_acceptance: f64,
    /// Record ITL per token in the simulator, as vllm#47382 proposes (an output of k tokens
    /// records k samples of its gap / k): the corrector should then leave ITL as it is.
    #[arg(long)]
    pub(crate) itl_per_token: bool,
    /// No ANSI colours (also when `NO_COLOR` is set or stdout is not a terminal).
    #[arg(long)]
    pub(crate) no_color: bool,
    /// A configuration file of the service: the demo counts the SLOs of its `slos:` (validated
    /// as the service does; the rest of the file is not used). Default: the demo's own two SLOs
    /// on vLLM's default bucket edges (docs/TOOLS.md, "demo").
    #[arg(long = "config.file", value_name = "PATH")]
    pub(crate) config_file: Option<PathBuf>,
}

/// Why the demo stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The simulator configuration is invalid (`--rate`, `--engines`, …).
    #[error(transparent)]
    Sim(#[from] SimError),
    /// Binding the listen address, serving, or writing the table failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The in-process corrector refused a write or its `/metrics` could not be read.
    #[error("the in-process corrector: {0}")]
    Corrector(String),
    /// `--config.file` is unreadable or invalid.
    #[error(transparent)]
    Config(#[from] service::config::ConfigError),
}

/// How the table is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Style {
    /// Redrawn in place on a terminal, optionally coloured.
    Live {
        /// ANSI colours on.
        color: bool,
    },
    /// `key=value` lines, one block per refresh (pipes, files, CI logs).
    Plain,
}

/// One remote-written snapshot and the corrector's `/metrics` right after it.
#[derive(Debug)]
struct Point {
    ts_ms: i64,
    raw: Dump,
    corrected: Dump,
}

/// Runs the demo until Ctrl-C, SIGTERM or `--duration`, printing to stdout.
///
/// # Errors
/// [`DemoError`]: an invalid simulator setting, a listen address in use, or a corrector failure.
pub async fn run(args: DemoArgs) -> Result<(), DemoError> {
    let stdout = std::io::stdout();
    let style = if stdout.is_terminal() {
        let color = !args.no_color && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        Style::Live { color }
    } else {
        Style::Plain
    };
    run_until(args, &mut stdout.lock(), style, run::shutdown_signal())
        .await
        .map(|_| ())
}

/// The simulator configuration of the demo: one model `demo-model`, `args.engines` engines,
/// Poisson arrivals at `args.rate`, 15 % single-token and 2 % zero-token requests, 30 % prefix
/// hits and 20 % P/D KV transfers (so the 0.22 profile shows inflated iteration tokens), spec
/// decoding with `args.spec_tokens` drafts unless 0 (10 % of decode steps without drafts), and
/// steps of 30 ms + 0.2 ms per computed token (per-token latencies spread over several buckets).
pub(crate) fn sim_config(args: &DemoArgs, epoch_unix_ms: i64) -> SimConfig {
    SimConfig {
        profile: args.profile,
        models: vec!["demo-model".into()],
        engines_per_model: args.engines,
        arrival_rate: args.rate,
        single_token_fraction: 0.15,
        zero_token_fraction: 0.02,
        prefix_hit_prob: 0.3,
        kv_transfer_prob: 0.2,
        spec: (args.spec_tokens > 0).then_some(SpecConfig {
            num_speculative_tokens: args.spec_tokens,
            acceptance_prob: args.spec_acceptance,
            no_draft_fraction: 0.1,
        }),
        itl_observation: if args.itl_per_token {
            ItlObservation::PerToken
        } else {
            ItlObservation::PerOutput
        },
        step_base_s: 0.03,
        step_per_token_s: 0.0002,
        seed: args.seed,
        epoch_unix_ms,
        ..SimConfig::default()
    }
}

/// The demo's own SLOs, on vLLM's default bucket edges (docs/METRICS.md, "Default bucket
/// bounds") and set for the simulated load of [`sim_config`] (TTFT mostly 0.05 to 0.3 s,
/// canonical TPOT 15 to 35 ms, E2EL 0.5 to 5 s): `interactive` (TTFT ≤ 0.25 s, TPOT ≤ 0.025 s,
/// E2EL ≤ 5 s, 90 %), which each SLI meets while the three together fail often enough for the
/// goodput band to show, and `relaxed` (0.5 s, 0.05 s, 10 s, 99 %), which almost every request
/// meets: a narrow band. Per `namespace` and `model_name`, 30 days.
pub(crate) fn demo_slos() -> SloSpec {
    let slo = |name: &str, objective: f64, [ttft, tpot, e2el]: [f64; 3]| Slo {
        by: DEFAULT_BY.iter().map(|s| (*s).to_owned()).collect(),
        ..Slo::with_thresholds(
            name,
            objective,
            &[(Sli::Ttft, ttft), (Sli::Tpot, tpot), (Sli::E2el, e2el)],
        )
    };
    SloSpec {
        slos: vec![
            slo("interactive", 0.9, [0.25, 0.025, 5.0]),
            slo("relaxed", 0.99, [0.5, 0.05, 10.0]),
        ],
    }
}

/// The SLOs the demo counts: `--config.file`'s (with its compiled `match:`), else [`demo_slos`].
///
/// # Errors
/// [`DemoError::Config`] when the file is unreadable or invalid.
fn slos(args: &DemoArgs) -> Result<(SloSpec, SloSet), DemoError> {
    match &args.config_file {
        Some(path) => {
            let config = service::config::Config::from_file(path)?;
            Ok((config.slos, config.engine.slos))
        }
        None => {
            let spec = demo_slos();
            let set = SloSet::new(&spec, |_| None);
            Ok((spec, set))
        }
    }
}

/// Runs the demo until `stop` resolves or `args.duration` passes, writing to `out` in `style`.
/// Returns the last comparison printed (none if the run was too short for one window).
///
/// # Errors
/// As [`run`].
pub(crate) async fn run_until(
    args: DemoArgs,
    out: &mut dyn Write,
    style: Style,
    stop: impl Future<Output = ()>,
) -> Result<Option<Comparison>, DemoError> {
    let (spec, slo_set) = slos(&args)?;
    let live = LiveSim::new(Simulator::new(sim_config(&args, unix_now_ms()))?);
    let epoch_ms = live.with(|s| s.config().epoch_unix_ms);
    let listener = run::bind(args.listen_address).await?;
    let address = listener.local_addr()?;
    // The demo's writer sends each scrape whole, in one request, in order: no part of a scrape
    // can come late, so nothing needs to settle (docs/ENGINE.md, "Settling"), and the first
    // window's corrected values start with the raw ones.
    let engine = Engine::new(EngineConfig {
        settle_scrapes: 0,
        slos: slo_set.clone(),
        ..EngineConfig::default()
    });
    let state = AppState::new(engine, Limits::default());
    let (stop_server, server_stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(run::serve(listener, state, async move {
        let _ = server_stopped.await;
    }));
    let mut writer = Writer {
        client: reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| DemoError::Corrector(e.to_string()))?,
        write_url: format!("http://{address}/api/v1/write"),
        metrics_url: format!("http://{address}/metrics"),
        metadata_sent: None,
    };
    let intro = intro(&args, address);
    match style {
        Style::Plain => {
            for line in intro.lines() {
                writeln!(out, "# {line}")?;
            }
        }
        Style::Live { .. } => write!(
            out,
            "\x1b[H\x1b[2J{intro}\n\nfirst table in {} …\n",
            humantime::format_duration(args.refresh)
        )?,
    }
    out.flush()?;

    let started = Instant::now();
    let timer = async {
        match args.duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(stop, timer);
    let mut tick = tokio::time::interval(args.scrape_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut points: VecDeque<Point> = VecDeque::new();
    // The first snapshot: the corrector's baseline, where its goodput bounds start counting.
    let mut baseline_ms = None;
    let (mut last_print, mut printed_ts) = (Instant::now(), None);
    let mut last = None;
    let result = loop {
        tokio::select! {
            () = &mut stop => break Ok(()),
            () = &mut timer => break Ok(()),
            _ = tick.tick() => {}
        }
        let point = match writer.step(&live).await {
            Ok(point) => point,
            Err(e) => break Err(e),
        };
        baseline_ms.get_or_insert(point.ts_ms);
        let window_ms = i64::try_from(args.window.as_millis()).unwrap_or(i64::MAX);
        while points.len() > 1 && points[1].ts_ms <= point.ts_ms - window_ms {
            points.pop_front();
        }
        points.push_back(point);
        if last_print.elapsed() + args.scrape_interval / 2 >= args.refresh {
            last_print = Instant::now();
            if let Some(c) = compare(&points, &live, epoch_ms, (&spec, &slo_set), baseline_ms) {
                print(out, style, &intro, &c)?;
                printed_ts = points.back().map(|p| p.ts_ms);
                last = Some(c);
            }
        }
    };
    // A final table when the last points were not shown yet.
    if result.is_ok()
        && points.back().map(|p| p.ts_ms) != printed_ts
        && let Some(c) = compare(&points, &live, epoch_ms, (&spec, &slo_set), baseline_ms)
    {
        print(out, style, &intro, &c)?;
        last = Some(c);
    }
    let _ = stop_server.send(());
    let served = server.await;
    writeln!(
        out,
        "{}demo stopped after {:.1} s",
        if style == Style::Plain { "# " } else { "" },
        started.elapsed().as_secs_f64()
    )?;
    out.flush()?;
    result?;
    match served {
        Ok(served) => served?,
        Err(e) => return Err(DemoError::Corrector(format!("server task failed: {e}"))),
    }
    Ok(last)
}

/// The simulator's side of the remote write, and the reads of the corrector's `/metrics`.
struct Writer {
    client: reqwest::Client,
    write_url: String,
    metrics_url: String,
    metadata_sent: Option<Instant>,
}

impl Writer {
    /// Remote-writes the simulator's snapshot at now (metadata first, then at most every 60 s),
    /// then reads the corrector's `/metrics`, which now reflect exactly that snapshot.
    async fn step(&mut self, live: &LiveSim) -> Result<Point, DemoError> {
        let snap = live.snapshot();
        let mut bodies = Vec::new();
        if self
            .metadata_sent
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(60))
        {
            bodies.push(remote_write::encode(&remote_write::metadata_request(&snap)));
            self.metadata_sent = Some(Instant::now());
        }
        let labels = [("job".to_owned(), "vllm-demo".to_owned())];
        for req in remote_write::write_requests(&snap, &labels, 500) {
            bodies.push(remote_write::encode(&req));
        }
        for body in bodies {
            remote_write::post(&self.client, &self.write_url, body)
                .await
                .map_err(DemoError::Corrector)?;
        }
        let text = self
            .client
            .get(&self.metrics_url)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|e| DemoError::Corrector(format!("GET /metrics: {e}")))?
            .text()
            .await
            .map_err(|e| DemoError::Corrector(format!("GET /metrics: {e}")))?;
        let exposition = promtext::parse(&text, Format::Text004)
            .map_err(|e| DemoError::Corrector(format!("GET /metrics: {e}")))?;
        let corrected = Dump::from_samples(exposition.samples.into_iter().map(|s| DumpSample {
            cumulative: cumulative_by_suffix(&s.name),
            name: s.name,
            labels: s.labels,
            value: s.value,
            timestamp_ms: s.timestamp_ms,
            line: 0,
        }))
        .map_err(|e| DemoError::Corrector(format!("GET /metrics: {e}")))?;
        Ok(Point {
            ts_ms: snap.timestamp_ms,
            raw: raw_dump(&snap),
            corrected,
        })
    }
}

/// The simulator's snapshot as a dump (counters and histograms are cumulative).
fn raw_dump(snap: &Snapshot) -> Dump {
    let samples = snap.families.iter().flat_map(|f| {
        let cumulative = f.exposed_type != ExposedType::Gauge;
        f.samples.iter().map(move |s| DumpSample {
            name: s.name.clone(),
            labels: s.labels.clone(),
            value: s.value,
            timestamp_ms: None,
            line: 0,
            cumulative,
        })
    });
    // The simulator never repeats a series.
    Dump::from_samples(samples).unwrap_or_default()
}

/// Compares the oldest and newest kept points (`None` with fewer than two); `baseline_ms` is the
/// first snapshot's time.
fn compare(
    points: &VecDeque<Point>,
    live: &LiveSim,
    epoch_ms: i64,
    (spec, set): (&SloSpec, &SloSet),
    baseline_ms: Option<i64>,
) -> Option<Comparison> {
    let (first, last) = (points.front()?, points.back()?);
    if points.len() < 2 {
        return None;
    }
    let ns = |ts: i64| u64::try_from(ts - epoch_ms).unwrap_or(0) * 1_000_000;
    let window = (ns(first.ts_ms), ns(last.ts_ms));
    let truth = live.with(|s| s.truth_window(window.0, window.1).total);
    let raw = Interval::total(&first.raw, &last.raw);
    let corrected = Interval::total(&first.corrected, &last.corrected);
    let mut c = comparison(
        &raw,
        &corrected,
        &truth,
        (last.ts_ms - epoch_ms) as f64 / 1000.0,
        (last.ts_ms - first.ts_ms) as f64 / 1000.0,
    );
    let read = slo_readings::for_spec(
        spec,
        set,
        (&first.corrected, &last.corrected),
        (&first.raw, &last.raw),
    );
    let baseline = baseline_ms == Some(first.ts_ms);
    // An engine is covered when the group of its `engine` label is, as the corrector sees it.
    let covered = |slo: &Slo, engine: &str| {
        last.raw.groups.keys().any(|labels| {
            labels.iter().any(|(n, v)| n == "engine" && v == engine)
                && set.covers(&slo.name, labels)
        })
    };
    c.slos =
        live.with(|s| super::compare::slo::comparisons(spec, &read, s, &covered, window, baseline));
    Some(c)
}

fn intro(args: &DemoArgs, address: SocketAddr) -> String {
    let spec = if args.spec_tokens > 0 {
        format!(
            "spec decoding k={} p={}",
            args.spec_tokens, args.spec_acceptance
        )
    } else {
        "no spec decoding".to_owned()
    };
    format!(
        "vllm-corrector demo: corrector on http://{address}/metrics (remote write at /api/v1/write)\n\
         simulator: vLLM {} profile, {} engine(s), {} req/s, {spec}, seed {}; remote write every {}\n\
         raw and corrected = Δ_sum/Δ_count and histogram_quantile(0.99) on Δ_bucket between two snapshots,\n\
         as PromQL rate(x_sum[w])/rate(x_count[w]) and histogram_quantile(0.99, rate(x_bucket[w])) compute them;\n\
         truth = the simulator's per-request records over the same window (vllm bench serve definitions).",
        args.profile,
        args.engines,
        args.rate,
        args.seed,
        humantime::format_duration(args.scrape_interval),
    )
}

fn print(out: &mut dyn Write, style: Style, intro: &str, c: &Comparison) -> std::io::Result<()> {
    let text = match style {
        Style::Plain => plain_lines(c),
        Style::Live { color } => format!("\x1b[H\x1b[2J{intro}\n\n{}", render_table(c, color)),
    };
    out.write_all(text.as_bytes())?;
    out.flush()
}

#[cfg(test)]
mod tests;
