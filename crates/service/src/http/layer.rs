//! How the layers of [`super::app`] are written, and the two every route goes through first
//! ([`ReadLive`], [`CountResponses`]).
//!
//! A layer is a [`Handle`]: given a request, it answers it itself (a refusal, an [`HttpError`]
//! response) or passes it, perhaps changed, to the next service. [`layers!`] makes it a
//! [`tower::Layer`] whose service is [`Layered`]. Most steps answer without waiting, so their
//! future is the next service's ([`Step::Inner`]) or their own answer ([`Step::Answered`]): no
//! allocation on the way. Only a step that must wait (a body being read, a slot or a charge not
//! free at once, a credentials check) boxes its future ([`Step::Waiting`]).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, ready};

use axum::extract::{MatchedPath, Request};
use axum::http::Extensions;
use axum::response::Response;
use pin_project_lite::pin_project;
use tower::{Layer, Service};

use super::HttpError;
use crate::live::{Live, LiveCell};
use crate::telemetry::{HttpResponded, InternalEvent, RequestLimit, RequestLimited, SelfMetrics};

/// A response being produced by a step that had to wait.
pub(crate) type Waiting = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

pin_project! {
    /// The future of a layer's service: its own answer, the next service's, or its own steps
    /// after a wait.
    #[project = StepProj]
    pub(crate) enum Step<F> {
        /// Answered by the layer (a refusal, or work done at once).
        Answered { response: Option<Response> },
        /// The next service's answer.
        Inner { #[pin] future: F },
        /// The layer waits for something before it answers or calls the next service.
        Waiting { future: Waiting },
    }
}

impl<F> Step<F> {
    /// The answer `response`.
    pub(crate) fn answered(response: Response) -> Self {
        Step::Answered {
            response: Some(response),
        }
    }

    /// The refusal `error`.
    pub(crate) fn refused(error: HttpError) -> Self {
        Step::answered(axum::response::IntoResponse::into_response(error))
    }

    /// The next service's answer.
    pub(crate) fn inner(future: F) -> Self {
        Step::Inner { future }
    }

    /// What `future` answers once it has waited.
    pub(crate) fn waiting(
        future: impl Future<Output = Result<Response, Infallible>> + Send + 'static,
    ) -> Self {
        Step::Waiting {
            future: Box::pin(future),
        }
    }
}

impl<F: Future<Output = Result<Response, Infallible>>> Future for Step<F> {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            // A poll after `Ready` breaks the `Future` contract; it gets an empty 200, not a panic.
            StepProj::Answered { response } => Poll::Ready(Ok(response.take().unwrap_or_default())),
            StepProj::Inner { future } => future.poll(cx),
            StepProj::Waiting { future } => future.as_mut().poll(cx),
        }
    }
}

/// The service a layer calls from its future once it is done waiting: the one made ready, with a
/// clone left in its place (tower's rule for a service that calls its inner service later).
pub(crate) fn take_ready<S: Clone>(inner: &mut S) -> S {
    let clone = inner.clone();
    std::mem::replace(inner, clone)
}

/// The settings of a request: those [`ReadLive`] took when it arrived, else (a service used
/// without that layer) the current ones of `cell`.
pub(crate) fn live_of(extensions: &Extensions, cell: &LiveCell) -> Arc<Live> {
    extensions
        .get::<Arc<Live>>()
        .cloned()
        .unwrap_or_else(|| cell.get())
}

/// The service after a layer: a tower service of requests `R`, answering with a [`Response`] and
/// never failing (every refusal is a response), cheap to clone. A [`Handle`] that waits also needs
/// its future to be `Send`.
pub(crate) trait Inner<R>:
    Service<R, Response = Response, Error = Infallible> + Clone + Send + 'static
{
}

impl<R, S> Inner<R> for S where
    S: Service<R, Response = Response, Error = Infallible> + Clone + Send + 'static
{
}

/// One layer's step: what it does with a request `R` before the next service `S`.
pub(crate) trait Handle<R, S: Service<Self::Next>> {
    /// The request the next service takes (`R` itself, or `R` with its body read or bounded).
    type Next;

    /// Answers `request`, or passes it on to `inner`, which its caller made ready: at once, or
    /// from a future that first waits ([`take_ready`] then gives it the service to call).
    fn handle(&self, inner: &mut S, request: R) -> Step<S::Future>;
}

/// The service of a [`Handle`] `H` before the next service `S`.
#[derive(Debug, Clone)]
pub(crate) struct Layered<H, S> {
    handle: H,
    inner: S,
}

impl<H, S> Layered<H, S> {
    /// `handle` before `inner`.
    pub(crate) fn new(handle: H, inner: S) -> Self {
        Layered { handle, inner }
    }
}

impl<H, S, R> Service<R> for Layered<H, S>
where
    H: Handle<R, S>,
    S: Service<H::Next, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Step<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        self.handle.handle(&mut self.inner, request)
    }
}

/// Makes each [`Handle`] named a [`tower::Layer`] whose service is [`Layered`].
macro_rules! layers {
    ($($handle:ty),+ $(,)?) => {$(
        impl<S> tower::Layer<S> for $handle {
            type Service = $crate::http::layer::Layered<$handle, S>;

            fn layer(&self, inner: S) -> Self::Service {
                $crate::http::layer::Layered::new(self.clone(), inner)
            }
        }
    )+};
}
pub(crate) use layers;

/// Layer: reads the reloadable settings once per request, into its extensions (`Arc<Live>`), so
/// that every later step sees the limits and the web settings of one load (a reload applies from
/// the next request on).
#[derive(Debug, Clone)]
pub(crate) struct ReadLive {
    pub(crate) cell: Arc<LiveCell>,
}

impl<S: Inner<Request>> Handle<Request, S> for ReadLive
where
    S::Future: Send,
{
    type Next = Request;

    fn handle(&self, inner: &mut S, mut request: Request) -> Step<S::Future> {
        request.extensions_mut().insert(self.cell.get());
        Step::inner(inner.call(request))
    }
}

layers!(ReadLive);

/// Layer: counts every response in `vllm_corrector_http_requests_total{handler,code}`, `handler`
/// being the route that matched (axum's [`MatchedPath`]) or `other`, and a refusal by a
/// request-level limit (the [`RequestLimit`] an [`HttpError`] response carries) in
/// `vllm_corrector_requests_limited_total{limit}`: each once, where the answer leaves.
#[derive(Debug, Clone)]
pub(crate) struct CountResponses {
    pub(crate) metrics: Arc<SelfMetrics>,
}

impl<S> Layer<S> for CountResponses {
    type Service = CountResponsesService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CountResponsesService {
            inner,
            metrics: Arc::clone(&self.metrics),
            label: Arc::default(),
        }
    }
}

/// The service of [`CountResponses`].
#[derive(Debug, Clone)]
pub(crate) struct CountResponsesService<S> {
    inner: S,
    metrics: Arc<SelfMetrics>,
    /// The `handler` label, made at this service's first request. `Router::layer` wraps each
    /// route (and the fallback) in its own service, which sees one matched path: its label is
    /// then shared, not allocated per request.
    label: Arc<OnceLock<Arc<str>>>,
}

impl<S> CountResponsesService<S> {
    /// The `handler` label of a request whose matched route is `route` (`None`: `other`).
    fn label(&self, route: Option<&MatchedPath>) -> Arc<str> {
        let route = route.map_or("other", MatchedPath::as_str);
        let label = self.label.get_or_init(|| route.into());
        if **label == *route {
            Arc::clone(label)
        } else {
            route.into()
        }
    }
}

impl<S> Service<Request> for CountResponsesService<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Counted<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let handler = self.label(request.extensions().get::<MatchedPath>());
        Counted {
            future: self.inner.call(request),
            handler: Some(handler),
            metrics: Arc::clone(&self.metrics),
        }
    }
}

pin_project! {
    /// The future of [`CountResponsesService`]: the response, counted when it is ready.
    pub(crate) struct Counted<F> {
        #[pin]
        future: F,
        handler: Option<Arc<str>>,
        metrics: Arc<SelfMetrics>,
    }
}

impl<F: Future<Output = Result<Response, Infallible>>> Future for Counted<F> {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let response = match ready!(this.future.poll(cx)) {
            Ok(response) => response,
            Err(never) => match never {},
        };
        if let Some(&limit) = response.extensions().get::<RequestLimit>() {
            RequestLimited { limit }.emit(this.metrics);
        }
        HttpResponded {
            handler: this.handler.take().unwrap_or_else(|| "other".into()),
            status: response.status(),
        }
        .emit(this.metrics);
        Poll::Ready(Ok(response))
    }
}
