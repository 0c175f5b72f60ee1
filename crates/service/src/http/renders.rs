//! The bound on responses served at once: at most [`MAX_CONCURRENT_RENDERS`] `/status` and
//! `/api/v1/groups` responses, and as many `/metrics` responses, are rendered or written at any
//! instant. A slot is held from before the render until the response body is written, so what
//! responses hold (a page of at most [`super::page::PAGE_BYTES`], a `/metrics` snapshot) is
//! bounded by the slots. Bodies are sent in chunks of at most [`CHUNK_BYTES`] as the client reads.
//!
//! A request that finds no slot takes one from the response that has made no progress (sent no
//! chunk) for the longest, if that is at least [`STALL`]: that response is cut (its connection
//! closed) and its page or snapshot freed at once, so clients that stop reading cannot keep
//! scrapes out. Otherwise it waits up to [`RENDER_WAIT`], then gets 503 with `Retry-After: 1`,
//! counted in `vllm_corrector_requests_limited_total{limit="concurrent_pages"|"concurrent_scrapes"}`
//! (`docs/RELIABILITY.md`, "Responses").

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes, HttpBody};
use hyper::body::{Frame, SizeHint};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::HttpError;

/// Responses of each kind (pages; scrapes) rendered or written at once.
pub(crate) const MAX_CONCURRENT_RENDERS: usize = 4;
/// How long a request waits for a render slot before 503: a scrape timeout is 10 s by default.
pub(crate) const RENDER_WAIT: Duration = Duration::from_secs(1);
/// A response that sent no chunk for this long gives its slot to a request that finds none.
pub(crate) const STALL: Duration = Duration::from_secs(1);
pub(crate) use crate::exposition::page::CHUNK_BYTES;

/// Which bound a response counts against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RenderKind {
    /// `/status` and `/api/v1/groups`.
    Page,
    /// `/metrics`.
    Scrape,
}

/// A response body produced chunk by chunk.
pub(crate) trait Chunks: Send + 'static {
    /// The next chunk, or `None` at the end. Called as the client reads.
    fn next_chunk(&mut self) -> Option<Bytes>;

    /// The bytes still to come, when known (then the response has a `Content-Length`).
    fn exact_len(&self) -> Option<u64> {
        None
    }
}

/// A page rendered whole, sent as copies of [`CHUNK_BYTES`] so that a cut response frees it.
#[derive(Debug)]
pub(crate) struct PageChunks {
    page: String,
    at: usize,
}

impl PageChunks {
    /// The chunks of `page`.
    pub(crate) fn new(page: String) -> PageChunks {
        PageChunks { page, at: 0 }
    }
}

impl Chunks for PageChunks {
    fn next_chunk(&mut self) -> Option<Bytes> {
        let rest = &self.page.as_bytes()[self.at..];
        if rest.is_empty() {
            return None;
        }
        let chunk = &rest[..rest.len().min(CHUNK_BYTES)];
        self.at += chunk.len();
        Some(Bytes::copy_from_slice(chunk))
    }

    fn exact_len(&self) -> Option<u64> {
        Some((self.page.len() - self.at) as u64)
    }
}

/// What a response in flight holds: its chunks and its slot until the end, or until it is cut.
struct Held {
    chunks: Option<Box<dyn Chunks>>,
    slot: Option<OwnedSemaphorePermit>,
    /// When it last sent a chunk (or began).
    progress: Instant,
    /// Cut for a request that found no slot: the body ends with an error.
    cut: bool,
}

fn lock(held: &Mutex<Held>) -> std::sync::MutexGuard<'_, Held> {
    held.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The slots of one kind and the responses holding them.
#[derive(Clone)]
struct Slots {
    semaphore: Arc<Semaphore>,
    held: Arc<Mutex<Vec<Weak<Mutex<Held>>>>>,
}

impl std::fmt::Debug for Slots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slots")
            .field("free", &self.semaphore.available_permits())
            .finish_non_exhaustive()
    }
}

impl Slots {
    fn new() -> Slots {
        Slots {
            semaphore: Arc::new(Semaphore::new(MAX_CONCURRENT_RENDERS)),
            held: Arc::default(),
        }
    }

    /// Cuts the response holding a slot that has made no progress for the longest, if that is at
    /// least `stall`; returns whether one was cut (its slot is then free).
    fn cut_stalled(&self, stall: Duration) -> bool {
        let mut list = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        list.retain(|w| w.strong_count() > 0);
        let now = Instant::now();
        let oldest = list
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|h| {
                let h = lock(h);
                h.slot.is_some() && now.duration_since(h.progress) >= stall
            })
            .min_by_key(|h| lock(h).progress);
        let Some(held) = oldest else {
            return false;
        };
        let mut held = lock(&held);
        held.cut = true;
        held.chunks = None;
        held.slot = None;
        tracing::debug!("a response that stopped being read was cut for a new one");
        true
    }
}

/// The render slots of one service (shared by its clones).
#[derive(Debug, Clone)]
pub(crate) struct RenderSlots {
    pages: Slots,
    scrapes: Slots,
    wait: Duration,
    stall: Duration,
}

impl Default for RenderSlots {
    fn default() -> Self {
        RenderSlots {
            pages: Slots::new(),
            scrapes: Slots::new(),
            wait: RENDER_WAIT,
            stall: STALL,
        }
    }
}

/// A render slot of one kind, taken by [`RenderSlots::acquire`] and kept by the body
/// ([`Slot::body`]).
#[derive(Debug)]
pub(crate) struct Slot {
    permit: OwnedSemaphorePermit,
    slots: Slots,
}

impl Slot {
    /// The response body of `chunks`, holding this slot until it is written, dropped or cut.
    pub(crate) fn body(self, chunks: impl Chunks) -> Body {
        let held = Arc::new(Mutex::new(Held {
            chunks: Some(Box::new(chunks)),
            slot: Some(self.permit),
            progress: Instant::now(),
            cut: false,
        }));
        let mut list = self
            .slots
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Finished responses leave only their weak entry: drop those, so the list holds at most
        // the responses in flight, not one entry per response ever served.
        list.retain(|w| w.strong_count() > 0);
        list.push(Arc::downgrade(&held));
        drop(list);
        Body::new(SlotBody { held })
    }
}

impl RenderSlots {
    /// Entries kept for the responses of `kind` (tests): those in flight, at most.
    #[cfg(test)]
    pub(crate) fn held_entries(&self, kind: RenderKind) -> usize {
        self.slots(kind)
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Slots that make a request wait `wait` instead of [`RENDER_WAIT`] and cut responses stalled
    /// for `stall` instead of [`STALL`] (tests).
    #[cfg(test)]
    pub(crate) fn with_times(wait: Duration, stall: Duration) -> Self {
        RenderSlots {
            wait,
            stall,
            ..RenderSlots::default()
        }
    }

    fn slots(&self, kind: RenderKind) -> &Slots {
        match kind {
            RenderKind::Page => &self.pages,
            RenderKind::Scrape => &self.scrapes,
        }
    }

    /// A slot of `kind`: a free one, else a stalled response's ([`STALL`]), else the first to
    /// free within the wait. Errors: [`HttpError::TooManyPages`] or [`HttpError::TooManyScrapes`]
    /// when none does (counted where the answer leaves, as every limit's refusal).
    pub(crate) async fn acquire(&self, kind: RenderKind) -> Result<Slot, HttpError> {
        let slots = self.slots(kind);
        let deadline = Instant::now() + self.wait;
        loop {
            if let Ok(permit) = Arc::clone(&slots.semaphore).try_acquire_owned() {
                return Ok(Slot {
                    permit,
                    slots: slots.clone(),
                });
            }
            if slots.cut_stalled(self.stall) {
                continue;
            }
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            // Wake for a freed slot, or to look for a stalled response again.
            let step = (deadline - now).min(Duration::from_millis(100));
            let _ = tokio::time::timeout(step, async {
                drop(slots.semaphore.acquire().await);
            })
            .await;
        }
        Err(match kind {
            RenderKind::Page => HttpError::TooManyPages,
            RenderKind::Scrape => HttpError::TooManyScrapes,
        })
    }
}

/// A [`Chunks`] source as an HTTP body; the slot is released at its end or when it is dropped.
struct SlotBody {
    held: Arc<Mutex<Held>>,
}

impl HttpBody for SlotBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let mut held = lock(&self.held);
        if std::mem::take(&mut held.cut) {
            // An error, not an end: the client must not take a cut page for a whole one.
            return Poll::Ready(Some(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "response cut: the client stopped reading and its slot was needed",
            ))));
        }
        match held.chunks.as_mut().and_then(|c| c.next_chunk()) {
            Some(chunk) => {
                held.progress = Instant::now();
                Poll::Ready(Some(Ok(Frame::data(chunk))))
            }
            None => {
                held.chunks = None;
                held.slot = None;
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        let held = lock(&self.held);
        !held.cut
            && held
                .chunks
                .as_ref()
                .is_none_or(|c| c.exact_len() == Some(0))
    }

    fn size_hint(&self) -> SizeHint {
        match lock(&self.held).chunks.as_ref().and_then(|c| c.exact_len()) {
            Some(len) => SizeHint::with_exact(len),
            None => SizeHint::default(),
        }
    }
}
