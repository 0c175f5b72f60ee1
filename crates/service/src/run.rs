//! The service itself (`vllm-corrector` with no subcommand): the remote-write receiver and
//! `/metrics`, over plain HTTP or TLS (`--web.config.file`), with the idle sweep, reload on SIGHUP
//! and `POST /-/reload`, and a graceful stop on SIGTERM or Ctrl-C. `demo` runs the same [`serve`]
//! in-process.

use std::future::Future;
use std::time::Duration;

use std::sync::Arc;

use crate::clock::now_ms;
use crate::config::{Args, Config};
use crate::http::{AppState, app};
use crate::reload::{self, Reloader};
use crate::telemetry::{IdleSweep, InternalEvent};
use crate::web::WebSettings;
use crate::web::conn;
use crate::web::tls::TlsListener;
use engine::Engine;

/// The longest pause between two sweeps for groups silent longer than `engine.idle_timeout`; a
/// shorter timeout sweeps four times per timeout, so a group leaves within 1.25 × the timeout.
pub(crate) const IDLE_SWEEP_INTERVAL: Duration = Duration::from_secs(15);

/// How often, at most, the sweeper waits before it reads `engine.idle_timeout` again: a reload
/// that shortens the timeout takes effect within this, not after the old pause.
const SWEEP_RECHECK: Duration = Duration::from_secs(1);

/// The pause between two idle sweeps for an idle timeout of `idle_timeout_ms` (ms):
/// `min(15 s, idle_timeout_ms / 4)`, at least 100 ms.
fn sweep_period(idle_timeout_ms: i64) -> Duration {
    IDLE_SWEEP_INTERVAL.min(Duration::from_millis(idle_timeout_ms.max(400) as u64 / 4))
}

/// Runs the service until SIGTERM or Ctrl-C: binds `config.listen_address`, logs `listening`,
/// then serves (TLS when `web` has it) until the signal and finishes in-flight requests. `args`
/// are the flags `config` came from: SIGHUP and `POST /-/reload` re-read the files they name.
///
/// # Errors
/// The bind error (naming the address) or an I/O error of the server.
pub async fn run(args: Args, config: Config, web: WebSettings) -> std::io::Result<()> {
    let path_or_none = |p: &Option<std::path::PathBuf>| {
        p.as_ref()
            .map_or_else(|| "none".to_owned(), |p| p.display().to_string())
    };
    tracing::info!(
        config_file = path_or_none(&config.config_file),
        web_config_file = path_or_none(&config.web_config_file),
        tls = web.tls.is_some(),
        basic_auth_or_bearer = web.auth.is_configured(),
        client_certificates = ?web.client_certs,
        slos = crate::config::slo_names(&config.slos),
        "configuration loaded"
    );
    let state = AppState::new(Engine::new(config.engine.clone()), config.limits).with_web(web);
    state.live_cell().set_slos(Arc::new(config.slos.clone()));
    if let Some(storage) = &config.storage {
        crate::storage::load(
            &storage.path,
            &mut state.lock_engine(),
            now_ms(),
            &state.core.metrics,
        );
    }
    let reloader = Arc::new(Reloader::new(
        args,
        config.storage.clone(),
        state.core.clone(),
        state.live_cell().clone(),
    ));
    let state = state.with_reloader(reloader.clone());
    state
        .core
        .metrics
        .ops
        .reload_succeeded(now_ms() as f64 / 1000.0);
    let listener = bind(config.listen_address).await?;
    tracing::info!(
        address = %listener.local_addr()?,
        idle_timeout_ms = config.engine.idle_timeout_ms,
        max_body_bytes = config.limits.max_body_bytes,
        version = %*crate::VERSION,
        "listening"
    );
    let hangups = reload::spawn_sighup_reloads(reloader);
    let writer = config.storage.clone().map(|storage| {
        let core = state.core.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(
                tokio::time::Instant::now() + storage.write_interval,
                storage.write_interval,
            );
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let _logged_and_counted =
                    crate::storage::save(storage.path.clone(), core.clone()).await;
            }
        })
    });
    let core = state.core.clone();
    let served = serve(listener, state, async {
        shutdown_signal().await;
        tracing::info!("shutting down: finishing in-flight requests");
    })
    .await;
    hangups.abort();
    if let Some(writer) = writer {
        writer.abort();
    }
    // After the last request: the state written now is the one the next start continues from.
    if let Some(storage) = &config.storage {
        // A failure was logged (and counted) by `save`; "written" only when it was.
        if crate::storage::save(storage.path.clone(), core).await {
            tracing::info!(path = %crate::storage::state_file(&storage.path).display(), "state written");
        }
    }
    served
}

/// Binds a TCP listener on `address`.
///
/// # Errors
/// The OS error, with a message naming the address.
pub async fn bind(address: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(address)
        .await
        .map_err(|error| {
            std::io::Error::new(error.kind(), format!("cannot listen on {address}: {error}"))
        })
}

/// How long in-flight requests may take to finish after SIGTERM before the remaining connections
/// are closed.
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(15);

/// Serves `app` on `listener` until `shutdown` resolves, then finishes in-flight requests.
/// Over TLS (`TlsListener`) when `state`'s web settings hold a TLS configuration, else plain
/// HTTP.
///
/// Marks `state` ready while serving (`/-/ready` answers 200) and not ready once `shutdown`
/// resolves. Sweeps idle groups every `min(15 s, idle timeout / 4)` (at least every 100 ms) with
/// the wall clock, counting them in the self-metrics. The idle timeout is the engine's current
/// one, read again at least every second, so a reload that changes it changes the pace.
///
/// # Errors
/// An I/O error of the server.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let sweeper = state.clone();
    let sweep = tokio::spawn(async move {
        let mut last = tokio::time::Instant::now();
        loop {
            let period = sweep_period(sweeper.lock_engine().idle_timeout_ms());
            let waited = last.elapsed();
            if waited < period {
                tokio::time::sleep((period - waited).min(SWEEP_RECHECK)).await;
                continue;
            }
            last = tokio::time::Instant::now();
            let now = now_ms();
            let (removed, events) = {
                let mut engine = sweeper.lock_engine();
                (engine.sweep_idle(now), engine.take_events())
            };
            IdleSweep { removed }.emit(&sweeper.core.metrics);
            sweeper.core.events.log(events, now);
        }
    });
    state.set_ready(true);
    let stopping = state.clone();
    let (signalled, on_signal) = tokio::sync::oneshot::channel::<()>();
    let graceful = async move {
        shutdown.await;
        stopping.set_ready(false);
        let _ = signalled.send(());
    };
    // One server loop for both (`crate::web::conn`): connection cap, header-read and idle timeouts.
    // Limits are read per connection and TLS settings per handshake, from the settings a reload
    // swaps (`crate::live`).
    let router = app(state.clone());
    let (live, metrics) = (state.live_cell().clone(), state.core.metrics.clone());
    let limits = {
        let live = live.clone();
        move || live.get().limits
    };
    let server: std::pin::Pin<Box<dyn Future<Output = std::io::Result<()>> + Send>> =
        if live.get().web.tls.is_some() {
            let tls = move || live.get().web.tls.clone();
            let listener = TlsListener::new(listener, tls, metrics.clone())?;
            Box::pin(conn::serve(listener, router, limits, metrics, graceful))
        } else {
            Box::pin(conn::serve(listener, router, limits, metrics, graceful))
        };
    // In-flight requests get SHUTDOWN_GRACE to finish after the signal; a connection that still
    // holds a request then (a stalled body past its timeout, a hung client) is closed, so the
    // process exits well within Kubernetes' default 30 s termination grace period.
    let grace_expired = async {
        if on_signal.await.is_ok() {
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    let served = tokio::select! {
        served = server => served,
        () = grace_expired => {
            tracing::warn!(grace_seconds = SHUTDOWN_GRACE.as_secs(), "shutdown grace expired: closing connections still open");
            Ok(())
        }
    };
    sweep.abort();
    served
}

/// Resolves on SIGTERM or Ctrl-C (SIGINT). If a signal handler cannot be installed, that signal
/// is logged and never fires.
pub async fn shutdown_signal() {
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
