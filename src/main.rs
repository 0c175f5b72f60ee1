//! `vllm-corrector`: receives Prometheus remote write carrying vLLM's raw series and serves the
//! corrected families on `/metrics`. Run `vllm-corrector --help` for the flags; with no flags it
//! listens on 0.0.0.0:9490 with embedded defaults.

use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Parser;
use vllm_corrector::config::{Args, Config};
use vllm_corrector::engine::Engine;
use vllm_corrector::http::{AppState, app};
use vllm_corrector::telemetry::{self, IdleSweep, InternalEvent};

/// The longest pause between two sweeps for groups silent longer than `engine.idle_timeout`; a
/// shorter timeout sweeps four times per timeout, so a group leaves within 1.25 × the timeout.
const IDLE_SWEEP_INTERVAL: Duration = Duration::from_secs(15);

fn main() -> ExitCode {
    let config = match Config::from_args(Args::parse()) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("vllm-corrector: {error}");
            return ExitCode::from(2);
        }
    };
    if let Err(error) = telemetry::init_logging(config.log_level, config.log_format) {
        eprintln!("vllm-corrector: {error}");
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(%error, "cannot start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(%error, "server stopped");
            ExitCode::FAILURE
        }
    }
}

async fn serve(config: Config) -> std::io::Result<()> {
    let state = AppState::new(Engine::new(config.engine.clone()), config.limits);

    let sweeper = state.clone();
    let period = IDLE_SWEEP_INTERVAL
        .min(Duration::from_millis(config.engine.idle_timeout_ms.max(400) as u64 / 4));
    tokio::spawn(async move {
        let first = tokio::time::Instant::now() + period;
        let mut tick = tokio::time::interval_at(first, period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let removed = sweeper.lock_engine().sweep_idle(now_ms());
            IdleSweep { removed }.emit(&sweeper.metrics);
        }
    });

    let listener = tokio::net::TcpListener::bind(config.listen_address)
        .await
        .map_err(|error| {
            std::io::Error::new(
                error.kind(),
                format!("cannot listen on {}: {error}", config.listen_address),
            )
        })?;
    let address = listener.local_addr()?;
    tracing::info!(
        %address,
        config_file = config.config_file.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "none".into()),
        idle_timeout_ms = config.engine.idle_timeout_ms,
        max_body_bytes = config.limits.max_body_bytes,
        version = env!("CARGO_PKG_VERSION"),
        "listening"
    );
    state.set_ready(true);
    let stopping = state.clone();
    axum::serve(listener, app(state))
        .with_graceful_shutdown(async move {
            shutdown_signal().await;
            stopping.set_ready(false);
            tracing::info!("shutting down: finishing in-flight requests");
        })
        .await
}

/// Resolves on SIGTERM or Ctrl-C (SIGINT).
async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::warn!(%error, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
}

/// Wall clock, ms since the Unix epoch.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
