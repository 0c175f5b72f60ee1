//! The bound on responses served at once: at most [`MAX_CONCURRENT_RENDERS`] `/status` and
//! `/api/v1/groups` responses, and as many `/metrics` responses, are rendered or written at any
//! instant. A slot is held from before the render until the response body is dropped (written,
//! or cut by `limits.response_write_timeout`), so the memory of responses in flight is at most
//! the slots times one page ([`super::page::PAGE_BYTES`]) or one `/metrics` chunk
//! ([`super::metrics::CHUNK_BYTES`]). A request that finds no slot waits up to [`RENDER_WAIT`],
//! then gets 503 with `Retry-After: 1`, counted in
//! `vllm_corrector_requests_limited_total{limit="concurrent_pages"|"concurrent_scrapes"}`
//! (`docs/RELIABILITY.md`, "Responses").

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use hyper::body::{Frame, SizeHint};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::HttpError;
use crate::telemetry::{InternalEvent, RequestLimited, SelfMetrics};

/// Responses of each kind (pages; scrapes) rendered or written at once.
pub(crate) const MAX_CONCURRENT_RENDERS: usize = 4;
/// How long a request waits for a render slot before 503: a scrape timeout is 10 s by default.
pub(crate) const RENDER_WAIT: Duration = Duration::from_secs(1);

/// Which bound a response counts against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RenderKind {
    /// `/status` and `/api/v1/groups`.
    Page,
    /// `/metrics`.
    Scrape,
}

/// The render slots of one service (shared by its clones).
#[derive(Debug, Clone)]
pub(crate) struct RenderSlots {
    pages: Arc<Semaphore>,
    scrapes: Arc<Semaphore>,
    wait: Duration,
}

impl Default for RenderSlots {
    fn default() -> Self {
        RenderSlots {
            pages: Arc::new(Semaphore::new(MAX_CONCURRENT_RENDERS)),
            scrapes: Arc::new(Semaphore::new(MAX_CONCURRENT_RENDERS)),
            wait: RENDER_WAIT,
        }
    }
}

impl RenderSlots {
    /// Slots that make a request wait `wait` instead of [`RENDER_WAIT`] (tests).
    #[cfg(test)]
    pub(crate) fn with_wait(wait: Duration) -> Self {
        RenderSlots {
            wait,
            ..RenderSlots::default()
        }
    }

    /// The semaphore of `kind` (tests hold its permits to fill the slots).
    pub(crate) fn semaphore(&self, kind: RenderKind) -> &Arc<Semaphore> {
        match kind {
            RenderKind::Page => &self.pages,
            RenderKind::Scrape => &self.scrapes,
        }
    }

    /// A slot of `kind`, waiting up to the slots' wait. Errors: [`HttpError::TooManyPages`] or
    /// [`HttpError::TooManyScrapes`] when none frees in time, counted in `metrics`.
    pub(crate) async fn acquire(
        &self,
        kind: RenderKind,
        metrics: &SelfMetrics,
    ) -> Result<OwnedSemaphorePermit, HttpError> {
        let semaphore = Arc::clone(self.semaphore(kind));
        match tokio::time::timeout(self.wait, semaphore.acquire_owned()).await {
            Ok(Ok(permit)) => Ok(permit),
            // The semaphore is never closed; a timeout and a closed one are both "no slot".
            Ok(Err(_)) | Err(_) => {
                let error = match kind {
                    RenderKind::Page => HttpError::TooManyPages,
                    RenderKind::Scrape => HttpError::TooManyScrapes,
                };
                if let Some(limit) = error.limit() {
                    RequestLimited { limit }.emit(metrics);
                }
                Err(error)
            }
        }
    }
}

/// A response body produced chunk by chunk, holding its render slot until it is dropped.
pub(crate) trait Chunks: Send + 'static {
    /// The next chunk, or `None` at the end. Called as the client reads.
    fn next_chunk(&mut self) -> Option<Bytes>;

    /// The bytes still to come, when known (then the response has a `Content-Length`).
    fn exact_len(&self) -> Option<u64> {
        None
    }
}

/// A body rendered whole (a status page): one chunk.
impl Chunks for Option<Bytes> {
    fn next_chunk(&mut self) -> Option<Bytes> {
        self.take()
    }

    fn exact_len(&self) -> Option<u64> {
        Some(self.as_ref().map_or(0, |b| b.len() as u64))
    }
}

/// A [`Chunks`] source as an HTTP body that keeps `slot` until hyper drops it.
struct SlotBody<C> {
    chunks: C,
    _slot: OwnedSemaphorePermit,
}

impl<C: Chunks + Unpin> HttpBody for SlotBody<C> {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(
            self.get_mut()
                .chunks
                .next_chunk()
                .map(|b| Ok(Frame::data(b))),
        )
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.exact_len() == Some(0)
    }

    fn size_hint(&self) -> SizeHint {
        match self.chunks.exact_len() {
            Some(len) => SizeHint::with_exact(len),
            None => SizeHint::default(),
        }
    }
}

/// The body of `chunks`, holding `slot` until the body is written or dropped.
pub(crate) fn body(chunks: impl Chunks + Unpin, slot: OwnedSemaphorePermit) -> Body {
    Body::new(SlotBody {
        chunks,
        _slot: slot,
    })
}
