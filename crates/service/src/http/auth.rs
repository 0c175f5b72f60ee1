//! The layers of `--web.config.file`: authentication ([`RequireAuth`], with
//! [`crate::web::WebSettings::authenticate`]) and `http_server_config.headers` ([`AddHeaders`]).
//! Both use the web settings the request arrived with ([`super::layer::ReadLive`]), so a reload
//! applies from the next request on; a refusal is counted in
//! `vllm_corrector_auth_failures_total{reason}` and answered by [`HttpError::Auth`].

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::extract::{ConnectInfo, Request};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use tower::{Layer, Service, ServiceExt};

use super::HttpError;
use super::layer::{Step, live_of, take_ready};
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

impl<S> Layer<S> for RequireAuth {
    type Service = RequireAuthService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequireAuthService {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service of [`RequireAuth`].
#[derive(Debug, Clone)]
pub(crate) struct RequireAuthService<S> {
    inner: S,
    layer: RequireAuth,
}

impl<S> Service<Request> for RequireAuthService<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Step<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let live = live_of(request.extensions(), &self.layer.live);
        if !live.web.authenticates() || OPEN_PATHS.contains(&request.uri().path()) {
            return Step::inner(self.inner.call(request));
        }
        let inner = take_ready(&mut self.inner);
        let metrics = Arc::clone(&self.layer.metrics);
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

impl<S> Layer<S> for AddHeaders {
    type Service = AddHeadersService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        AddHeadersService {
            inner,
            live: Arc::clone(&self.live),
        }
    }
}

/// The service of [`AddHeaders`].
#[derive(Debug, Clone)]
pub(crate) struct AddHeadersService<S> {
    inner: S,
    live: Arc<LiveCell>,
}

impl<S> Service<Request> for AddHeadersService<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Step<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let live = live_of(request.extensions(), &self.live);
        if live.web.headers.is_empty() {
            return Step::inner(self.inner.call(request));
        }
        let inner = take_ready(&mut self.inner);
        Step::waiting(async move {
            let mut response = inner.oneshot(request).await?;
            for (name, value) in &live.web.headers {
                response.headers_mut().insert(name.clone(), value.clone());
            }
            Ok(response)
        })
    }
}
