//! The layers of `--web.config.file`: authentication ([`RequireAuth`], with
//! [`crate::web::WebSettings::authenticate`]) and `http_server_config.headers` ([`AddHeaders`]).
//! Both use the web settings the request arrived with ([`super::layer::ReadLive`]), so a reload
//! applies from the next request on; a refusal is counted in
//! `vllm_corrector_auth_failures_total{reason}` and answered by [`HttpError::Auth`].

use std::sync::Arc;

use axum::extract::{ConnectInfo, Request};
use axum::http::header;
use axum::response::IntoResponse;
use tower::ServiceExt;

use super::HttpError;
use super::layer::{Handle, Inner, Step, layers, live_of, take_ready};
use crate::live::LiveCell;
use crate::telemetry::{AuthRefused, InternalEvent, SelfMetrics};
use crate::web::auth::OPEN_PATHS;
use crate::web::tls::Peer;

/// Layer: refuses a request that does not pass every configured scheme (401 or 403, or 503 when
/// its check cannot run now, `crate::web::auth`); the probes ([`OPEN_PATHS`]) always pass, and so
/// does everything when no authentication is configured.
#[derive(Debug, Clone)]
pub(crate) struct RequireAuth {
    pub(crate) live: Arc<LiveCell>,
    pub(crate) metrics: Arc<SelfMetrics>,
}

impl<S: Inner<Request>> Handle<Request, S> for RequireAuth
where
    S::Future: Send,
{
    type Next = Request;

    fn handle(&self, inner: &mut S, request: Request) -> Step<S::Future> {
        let live = live_of(request.extensions(), &self.live);
        if !live.web.authenticates() || OPEN_PATHS.contains(&request.uri().path()) {
            return Step::inner(inner.call(request));
        }
        let (inner, metrics) = (take_ready(inner), Arc::clone(&self.metrics));
        Step::waiting(async move {
            let peer = request
                .extensions()
                .get::<ConnectInfo<Peer>>()
                .map(|info| info.0);
            let verified = peer.is_some_and(|peer| peer.verified_client_certificate);
            let client = peer.map(|peer| peer.address.ip());
            let authorization = request.headers().get(header::AUTHORIZATION);
            if let Err(error) = live.web.authenticate(client, verified, authorization).await {
                AuthRefused {
                    reason: error.reason(),
                    client,
                    path: request.uri().path(),
                }
                .emit(&metrics);
                return Ok(HttpError::from(error).into_response());
            }
            inner.oneshot(request).await
        })
    }
}

/// Layer: adds `http_server_config.headers` to every response, refusals included.
#[derive(Debug, Clone)]
pub(crate) struct AddHeaders {
    pub(crate) live: Arc<LiveCell>,
}

impl<S: Inner<Request>> Handle<Request, S> for AddHeaders
where
    S::Future: Send,
{
    type Next = Request;

    fn handle(&self, inner: &mut S, request: Request) -> Step<S::Future> {
        let live = live_of(request.extensions(), &self.live);
        if live.web.headers.is_empty() {
            return Step::inner(inner.call(request));
        }
        let inner = take_ready(inner);
        Step::waiting(async move {
            let mut response = inner.oneshot(request).await?;
            for (name, value) in &live.web.headers {
                response.headers_mut().insert(name.clone(), value.clone());
            }
            Ok(response)
        })
    }
}

layers!(RequireAuth, AddHeaders);
