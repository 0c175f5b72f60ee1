//! The middleware of `--web.config.file`: authentication ([`crate::web::WebSettings::authenticate`]) and
//! `http_server_config.headers`. The web settings are read once per request, so a reload applies
//! from the next request on; a refusal is counted in `vllm_corrector_auth_failures_total{reason}`
//! and answered by [`HttpError::Auth`].

use axum::extract::{ConnectInfo, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{AppState, HttpError};
use crate::telemetry::{AuthRefused, InternalEvent};
use crate::web::auth::OPEN_PATHS;
use crate::web::tls::Peer;

/// Middleware: refuses a request that does not pass every configured scheme (401 or 403, or 503
/// when its check cannot run now, `crate::web::auth`); probes ([`OPEN_PATHS`]) always pass.
pub(crate) async fn require_auth(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let live = state.live();
    let web = &live.web;
    let path = request.uri().path();
    if !web.authenticates() || OPEN_PATHS.contains(&path) {
        return next.run(request).await;
    }
    let peer = request
        .extensions()
        .get::<ConnectInfo<Peer>>()
        .map(|info| info.0);
    let verified = peer.is_some_and(|peer| peer.verified_client_certificate);
    let client = peer.map(|peer| peer.address.ip());
    let authorization = request.headers().get(header::AUTHORIZATION);
    if let Err(error) = web.authenticate(client, verified, authorization).await {
        AuthRefused {
            reason: error.reason(),
            client,
            path,
        }
        .emit(&state.core.metrics);
        return HttpError::from(error).into_response();
    }
    next.run(request).await
}

/// Middleware: adds `http_server_config.headers` to every response, refusals included.
pub(crate) async fn add_headers(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let live = state.live();
    let mut response = next.run(request).await;
    for (name, value) in &live.web.headers {
        response.headers_mut().insert(name.clone(), value.clone());
    }
    response
}
