//! HTTP layer: wires the protocol layer, the engine and the exposition together. It knows no
//! rules and no wire format; it maps each layer's error to a status code once (`HttpError`).
//!
//! Routes of `app`:
//! * `POST /api/v1/write`: remote write 1.0 and 2.0 receiver ([`write`]).
//! * `GET /metrics`: corrected families and self-metrics, OpenMetrics or text 0.0.4 ([`metrics`]).
//! * `GET /-/healthy`: 200 while the process runs.
//! * `GET /-/ready`: 200 once serving (`AppState::set_ready`), 503 before.
//! * `POST`/`PUT /-/reload`: re-reads `--config.file` and `--web.config.file` ([`crate::reload`]);
//!   200, or the error of `HttpError::Reload`.
//! * `GET /`, `GET /status`, `GET /api/v1/groups`, `GET /docs`: landing page, per-group status
//!   (HTML and JSON) and the README (`status`).
//!
//! Every response, 404s and authentication refusals included, is counted in
//! `vllm_corrector_http_requests_total{handler,code}`. With `--web.config.file` configuring
//! authentication, every route but `/-/healthy` and `/-/ready` requires it
//! (`auth`, `crate::web::auth`). The layers every request goes through are listed on `app`.

pub(crate) mod auth;
mod charge;
mod error;
pub(crate) mod layer;
pub mod metrics;
pub(crate) mod negotiate;
pub(crate) mod page;
pub(crate) mod renders;
pub(crate) mod status;
pub(crate) mod write;

#[cfg(test)]
mod app_tests;
#[cfg(test)]
mod bad_input_tests;
#[cfg(test)]
mod forms_tests;
#[cfg(test)]
mod paging_tests;
#[cfg(test)]
mod panic_tests;
#[cfg(test)]
mod status_tests;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
#[cfg(test)]
use tokio::sync::Semaphore;
use tower::ServiceBuilder;

pub(crate) use error::HttpError;

use crate::config::Limits;
use crate::core::Core;
use crate::live::{Live, LiveCell};
use crate::reload::Reloader;
use crate::web::WebSettings;
pub(crate) use charge::Charge;
use engine::Engine;

/// How long a remote-write request waits for a free slot, or for the charge of its decoded size,
/// before it is answered 503 ([`write::admit`]). Well within the 30 s timeout of Prometheus'
/// remote-write client, so a sender never times out on a queue.
pub(crate) const DEFAULT_PERMIT_WAIT: Duration = Duration::from_secs(5);

/// Shared state of every handler. Cheap to clone (all `Arc`s).
#[derive(Debug, Clone)]
pub struct AppState {
    /// The engine behind its lock, the self-metrics and the event log. The engine is held only
    /// for the short synchronous ingest or render; decoding happens outside.
    pub core: Arc<Core>,
    /// Reloadable settings: limits, request slots, web settings.
    live: Arc<LiveCell>,
    /// How long a request waits for a slot before 503.
    permit_wait: Duration,
    ready: Arc<AtomicBool>,
    /// Re-reads the configuration files (`POST /-/reload`); `None` in-process (tests, `demo`).
    reloader: Option<Arc<Reloader>>,
    /// The bound on responses served at once ([`renders`]).
    pub(crate) renders: renders::RenderSlots,
}

impl AppState {
    /// Creates the state around an engine, with fresh self-metrics and no web configuration
    /// (plain HTTP, no authentication). Not ready until `AppState::set_ready`.
    pub fn new(engine: Engine, limits: Limits) -> Self {
        AppState {
            core: Arc::new(Core::new(engine)),
            live: Arc::new(LiveCell::new(Live::new(
                limits,
                Arc::new(WebSettings::default()),
            ))),
            permit_wait: DEFAULT_PERMIT_WAIT,
            ready: Arc::new(AtomicBool::new(false)),
            reloader: None,
            renders: renders::RenderSlots::default(),
        }
    }

    /// Replaces the web settings (TLS, authentication, headers) of a state not yet serving.
    pub(crate) fn with_web(self, web: WebSettings) -> Self {
        let limits = self.limits();
        self.live.set(Live::new(limits, Arc::new(web)));
        self
    }

    /// Enables `POST /-/reload` with `reloader` (built on this state's engine and settings).
    pub(crate) fn with_reloader(mut self, reloader: Arc<Reloader>) -> Self {
        self.reloader = Some(reloader);
        self
    }

    /// The reloader, if any.
    pub(crate) fn reloader(&self) -> Option<&Arc<Reloader>> {
        self.reloader.as_ref()
    }

    /// The current reloadable settings (the stack reads them once per request: `layer::ReadLive`).
    #[cfg(test)]
    pub(crate) fn live(&self) -> Arc<Live> {
        self.live.get()
    }

    /// The cell holding the reloadable settings (for the reloader and the TLS listener).
    pub(crate) fn live_cell(&self) -> &Arc<LiveCell> {
        &self.live
    }

    /// The current receiver limits.
    pub(crate) fn limits(&self) -> Limits {
        self.live.get().limits
    }

    /// The current remote-write slots (tests hold them to fill the server).
    #[cfg(test)]
    pub(crate) fn permits(&self) -> Arc<Semaphore> {
        self.live.get().permits.clone()
    }

    /// Replaces the wait for a remote-write slot (default [`DEFAULT_PERMIT_WAIT`]).
    #[cfg(test)]
    pub(crate) fn with_permit_wait(mut self, wait: Duration) -> Self {
        self.permit_wait = wait;
        self
    }

    /// Marks the service ready (`/-/ready` answers 200) or not (503).
    pub(crate) fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    /// Locks the engine ([`Core::engine`]).
    pub(crate) fn lock_engine(&self) -> MutexGuard<'_, Engine> {
        self.core.engine()
    }
}

/// Builds the router. Test it with `tower::ServiceExt::oneshot`; serve it with
/// [`crate::web::conn::serve`], which attaches `ConnectInfo<crate::web::tls::Peer>` to each request
/// for the client certificate policy.
///
/// Every route, and the 404 of any other path, goes through one stack, outermost first:
/// 1. [`layer::ReadLive`]: the reloadable settings, read once per request.
/// 2. [`layer::CountResponses`]: `vllm_corrector_http_requests_total{handler,code}` and
///    `vllm_corrector_requests_limited_total{limit}`, once per response.
/// 3. [`auth::AddHeaders`]: `http_server_config.headers` on every response, refusals included.
/// 4. [`auth::RequireAuth`]: 401, 403 or 503 for a request that fails the configured schemes.
///
/// `POST /api/v1/write` then goes through the steps of [`write::route`] (protocol, body size and
/// time, the in-flight memory charge, a request slot, the decoded size's charge), each one layer.
pub(crate) fn app(state: AppState) -> Router {
    let (live, metrics) = (state.live_cell().clone(), state.core.metrics.clone());
    Router::new()
        .route("/api/v1/write", write::route(&state))
        .route("/metrics", get(metrics::handle))
        .route("/", get(status::landing))
        .route("/status", get(status::status))
        .route("/api/v1/groups", get(status::groups))
        .route("/docs", get(status::docs))
        .route("/-/healthy", get(healthy))
        .route("/-/ready", get(ready))
        .route("/-/reload", post(reload).put(reload))
        .layer(
            ServiceBuilder::new()
                .layer(layer::ReadLive { cell: live.clone() })
                .layer(layer::CountResponses {
                    metrics: metrics.clone(),
                })
                .layer(auth::AddHeaders { live: live.clone() })
                .layer(auth::RequireAuth { live, metrics }),
        )
        .with_state(state)
}

/// `POST`/`PUT /-/reload`: 200 `configuration reloaded`, else [`HttpError::ReloadUnavailable`]
/// (no reloader: in-process uses such as `demo`), [`HttpError::Reload`] or
/// [`HttpError::ReloadPanicked`].
async fn reload(State(state): State<AppState>) -> Result<&'static str, HttpError> {
    let reloader = state
        .reloader()
        .cloned()
        .ok_or(HttpError::ReloadUnavailable)?;
    match tokio::task::spawn_blocking(move || reloader.reload()).await {
        Ok(Ok(())) => Ok("configuration reloaded\n"),
        Ok(Err(error)) => Err(HttpError::Reload(error)),
        Err(panic) => Err(HttpError::ReloadPanicked(panic.to_string())),
    }
}

async fn healthy() -> &'static str {
    "vllm-corrector is healthy.\n"
}

async fn ready(State(state): State<AppState>) -> (StatusCode, &'static str) {
    if state.ready.load(Ordering::Acquire) {
        (StatusCode::OK, "vllm-corrector is ready.\n")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "vllm-corrector is not ready.\n",
        )
    }
}
