//! A remote write's body: its size bounded and its time limited ([`BodyLimit`]), then read whole
//! and charged to the in-flight memory budget as it arrives ([`Buffer`]). A body being read holds
//! no request slot and only the bytes it sent, so slow or stalled senders cannot starve the others
//! (docs/RELIABILITY.md, "The memory budget").

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::header;
use axum::response::IntoResponse;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use tokio::sync::OwnedSemaphorePermit;
use tower::ServiceExt;
use tower_http::timeout::{DeadlineBody, TimeoutError};

use super::super::layer::{Handle, Inner, Step, layers, live_of, take_ready};
use super::super::{Charge, HttpError};
use crate::live::{Live, LiveCell};

/// Layer: 413 for a `Content-Length` over `limits.max_body_bytes`, before any of the body is read
/// (waiting for a body that may never come would end in the body timeout's 503, which the sender
/// retries). Otherwise the body is capped at `limits.max_body_bytes` (http-body-util's `Limited`)
/// and must arrive whole within `limits.request_body_timeout` from now (tower-http's
/// `DeadlineBody`), both from the settings the request arrived with.
#[derive(Debug, Clone)]
pub(crate) struct BodyLimit {
    pub(crate) live: Arc<LiveCell>,
}

/// A body bounded by [`BodyLimit`], with the settings of its request.
pub(crate) struct Capped {
    live: Arc<Live>,
    /// The `Content-Length` the sender announced (at most `limits.max_body_bytes`), if any.
    announced: Option<usize>,
    body: DeadlineBody<Limited<Body>>,
}

impl<S: Inner<Request<Capped>>> Handle<Request, S> for BodyLimit
where
    S::Future: Send,
{
    type Next = Request<Capped>;

    fn handle(&self, inner: &mut S, request: Request) -> Step<S::Future> {
        let live = live_of(request.extensions(), &self.live);
        let (limit, timeout) = (live.limits.max_body_bytes, live.limits.request_body_timeout);
        let announced = request
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
        if announced.is_some_and(|n| n > limit) {
            return Step::refused(HttpError::BodyTooLarge { limit });
        }
        let request = request.map(|body| Capped {
            live,
            announced,
            body: DeadlineBody::new(timeout, Limited::new(body, limit)),
        });
        Step::inner(inner.call(request))
    }
}

/// A remote-write body read whole, and what its request holds until the engine has applied it
/// (all released when it is dropped).
#[derive(Debug)]
pub(crate) struct WriteBody {
    /// The settings the request arrived with (a reload applies from the next request).
    pub(crate) live: Arc<Live>,
    /// The body: its one frame as the connection read it (no copy), or the frames joined.
    pub(crate) bytes: Bytes,
    /// Its share of the in-flight memory budget: the body's buffer, then its decoded size too
    /// ([`super::admit::DecodeCharge`]).
    pub(crate) charge: Charge,
    /// The decoded size its snappy header declares, capped at `limits.max_decoded_bytes` (set by
    /// [`super::admit::DecodeCharge`]; 0 before).
    pub(crate) decoded: usize,
    /// Its request slot (set by [`super::admit::Slot`]).
    pub(crate) slot: Option<OwnedSemaphorePermit>,
}

/// Layer: reads the body whole ([`read`]), charged to `limits.max_inflight_bytes` as it arrives:
/// 503 at once when the budget is spent, 413 past `limits.max_body_bytes`, 503 past
/// `limits.request_body_timeout`, 400 when it cannot be read or is empty.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Buffer;

impl<S: Inner<Request<WriteBody>>> Handle<Request<Capped>, S> for Buffer
where
    S::Future: Send,
{
    type Next = Request<WriteBody>;

    fn handle(&self, inner: &mut S, request: Request<Capped>) -> Step<S::Future> {
        let inner = take_ready(inner);
        Step::waiting(async move {
            let (parts, capped) = request.into_parts();
            match read(capped).await {
                Ok(body) => inner.oneshot(Request::from_parts(parts, body)).await,
                Err(error) => Ok(error.into_response()),
            }
        })
    }
}

layers!(BodyLimit, Buffer);

/// Reads a capped body whole, charging its buffer to the in-flight budget as it grows ([`grow`]).
/// A body that arrives as one frame (a sender's batch on a fast link) is kept as that frame,
/// charged its length; a second frame moves both into a buffer that grows by doubling toward the
/// announced size, each later frame copied in and dropped, so a body holds about its own size
/// whatever its frames.
///
/// # Errors
/// [`HttpError::OverBudget`] (the budget spent), [`HttpError::BodyTooLarge`] (past
/// `limits.max_body_bytes`), [`HttpError::BodyTimeout`] (past `limits.request_body_timeout`),
/// [`HttpError::BodyRead`] (a connection error, malformed chunking), [`HttpError::EmptyBody`].
async fn read(capped: Capped) -> Result<WriteBody, HttpError> {
    let Capped {
        live,
        announced,
        body,
    } = capped;
    let limit = live.limits.max_body_bytes;
    let expected = announced.unwrap_or(limit);
    let mut body = std::pin::pin!(body);
    let mut charge = Charge::new(&live.inflight_kib);
    let mut first: Option<Bytes> = None;
    let mut bytes = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|error| body_error(&*error, limit))?;
        // Trailers carry nothing remote write reads.
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if data.is_empty() {
            continue;
        }
        if first.is_none() && bytes.is_empty() {
            if !charge.try_grow_to(data.len()) {
                return Err(HttpError::OverBudget);
            }
            first = Some(data);
            continue;
        }
        if let Some(frame) = first.take() {
            grow(
                &mut bytes,
                frame.len() + data.len(),
                expected,
                &mut charge,
                frame.len(),
            )?;
            bytes.extend_from_slice(&frame);
            drop(frame);
            charge.shrink_to(bytes.capacity());
        }
        grow(&mut bytes, data.len(), expected, &mut charge, 0)?;
        bytes.extend_from_slice(&data);
    }
    let bytes = first.unwrap_or_else(|| Bytes::from(bytes));
    if bytes.is_empty() {
        return Err(HttpError::EmptyBody);
    }
    Ok(WriteBody {
        live,
        bytes,
        charge,
        decoded: 0,
        slot: None,
    })
}

/// The refusal of a body that failed: its deadline passed, it grew past `limit`, or the
/// connection failed.
fn body_error(error: &(dyn std::error::Error + 'static), limit: usize) -> HttpError {
    if error.is::<TimeoutError>() {
        HttpError::BodyTimeout
    } else if error.is::<LengthLimitError>() {
        HttpError::BodyTooLarge { limit }
    } else {
        HttpError::BodyRead(error.to_string())
    }
}

/// The least capacity a body buffer grows to, bytes: the budget's unit, so a sender that sends a
/// few bytes and stalls holds 1 KiB.
const MIN_BODY_CAPACITY: usize = 1024;

/// Makes room in `buffer` for `additional` more bytes, charging its new capacity to `charge` first.
/// The capacity doubles (to at least [`MIN_BODY_CAPACITY`]), up to the `expected` body size, so a
/// body is copied O(log n) times; while it moves, the old and the new buffer are charged together,
/// with `held` bytes held elsewhere meanwhile (a first frame being moved into the buffer).
///
/// # Errors
/// [`HttpError::OverBudget`] when the in-flight budget has not that much free now: the sender
/// retries (503), and waiting while holding a share could deadlock requests that each wait for
/// the others' shares.
fn grow(
    buffer: &mut Vec<u8>,
    additional: usize,
    expected: usize,
    charge: &mut Charge,
    held: usize,
) -> Result<(), HttpError> {
    let needed = buffer.len() + additional;
    if needed <= buffer.capacity() {
        return Ok(());
    }
    let capacity = (buffer.capacity() * 2)
        .max(MIN_BODY_CAPACITY)
        .min(expected)
        .max(needed);
    if !charge.try_grow_to(buffer.capacity() + capacity + held) {
        return Err(HttpError::OverBudget);
    }
    buffer.reserve_exact(capacity - buffer.len());
    charge.shrink_to(buffer.capacity() + held);
    Ok(())
}

#[cfg(test)]
mod tests;
