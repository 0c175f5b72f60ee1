//! HTTP layer: wires the protocol layer, the engine and the exposition together. It knows no
//! rules and no wire format; it maps each layer's error to a status code once ([`HttpError`]).
//!
//! Routes of [`app`]:
//! * `POST /api/v1/write`: remote write 1.0 and 2.0 receiver ([`write`]).
//! * `GET /metrics`: corrected families and self-metrics, OpenMetrics or text 0.0.4 ([`metrics`]).
//! * `GET /-/healthy`: 200 while the process runs.
//! * `GET /-/ready`: 200 once serving ([`AppState::set_ready`]), 503 before.
//!
//! Every response, 404s included, is counted in `vllm_corrector_http_requests_total{handler,code}`.

mod error;
pub mod metrics;
pub mod negotiate;
pub mod write;

#[cfg(test)]
mod bad_input_tests;
#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use tokio::sync::Semaphore;

pub use error::HttpError;

use crate::config::Limits;
use crate::engine::Engine;
use crate::telemetry::{HttpResponded, InternalEvent, SelfMetrics};

/// How long a remote-write request waits for a free slot before it is answered 503. Well within
/// the 30 s timeout of Prometheus' remote-write client, so a sender never times out on a queue.
pub const DEFAULT_PERMIT_WAIT: Duration = Duration::from_secs(5);

/// Bytes rounded up to KiB, the unit of the in-flight memory budget (saturating at `u32::MAX` KiB).
pub(crate) fn kib(bytes: usize) -> u32 {
    u32::try_from(bytes.div_ceil(1024)).unwrap_or(u32::MAX)
}

/// Shared state of every handler. Cheap to clone (all `Arc`s).
#[derive(Debug, Clone)]
pub struct AppState {
    /// The engine. Held only for the short synchronous ingest or render; decoding happens outside.
    pub engine: Arc<Mutex<Engine>>,
    /// Self-metrics.
    pub metrics: Arc<SelfMetrics>,
    /// Receiver limits (body sizes, concurrency).
    pub limits: Limits,
    /// Remote-write slots: `limits.max_concurrent_requests` permits.
    permits: Arc<Semaphore>,
    /// How long a request waits for a slot before 503.
    permit_wait: Duration,
    /// Memory budget of bodies and decode buffers in flight, in KiB permits
    /// (`limits.max_inflight_bytes`).
    inflight_kib: Arc<Semaphore>,
    ready: Arc<AtomicBool>,
}

impl AppState {
    /// Creates the state around an engine, with fresh self-metrics. Not ready until
    /// [`AppState::set_ready`].
    pub fn new(engine: Engine, limits: Limits) -> Self {
        AppState {
            engine: Arc::new(Mutex::new(engine)),
            metrics: Arc::new(SelfMetrics::new()),
            permits: Arc::new(Semaphore::new(limits.max_concurrent_requests)),
            permit_wait: DEFAULT_PERMIT_WAIT,
            inflight_kib: Arc::new(Semaphore::new(kib(limits.max_inflight_bytes) as usize)),
            limits,
            ready: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Replaces the wait for a remote-write slot (default [`DEFAULT_PERMIT_WAIT`]).
    pub fn with_permit_wait(mut self, wait: Duration) -> Self {
        self.permit_wait = wait;
        self
    }

    /// Reserves `bytes` of the in-flight memory budget, waiting at most the slot wait; `None` when
    /// the budget stayed exhausted. The reservation is released when the permit is dropped.
    pub(crate) async fn reserve_inflight(&self, bytes: usize) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let wanted = kib(bytes).max(1);
        tokio::time::timeout(self.permit_wait, self.inflight_kib.clone().acquire_many_owned(wanted))
            .await
            .ok()?
            .ok()
    }

    /// Marks the service ready (`/-/ready` answers 200) or not (503).
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    /// Locks the engine. A panic in an earlier holder (a bug, already logged and answered 500)
    /// does not stop the service: the lock is taken over.
    pub fn lock_engine(&self) -> MutexGuard<'_, Engine> {
        self.engine.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Builds the router. Test it with `tower::ServiceExt::oneshot`; serve it with `axum::serve`.
pub fn app(state: AppState) -> Router {
    Router::new()
        .route(
            "/api/v1/write",
            post(write::handle).layer(DefaultBodyLimit::max(state.limits.max_body_bytes)),
        )
        .route("/metrics", get(metrics::handle))
        .route("/-/healthy", get(healthy))
        .route("/-/ready", get(ready))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            count_response,
        ))
        .with_state(state)
}

/// The `handler` label of a request path: the route, or `other` (bounded cardinality).
fn handler_label(path: &str) -> &'static str {
    match path {
        "/api/v1/write" => "/api/v1/write",
        "/metrics" => "/metrics",
        "/-/healthy" => "/-/healthy",
        "/-/ready" => "/-/ready",
        _ => "other",
    }
}

async fn count_response(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let handler = handler_label(request.uri().path());
    let response = next.run(request).await;
    HttpResponded {
        handler,
        status: response.status(),
    }
    .emit(&state.metrics);
    response
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
