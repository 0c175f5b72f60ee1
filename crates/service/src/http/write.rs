//! `POST /api/v1/write`: the remote write 1.0 and 2.0 receiver's HTTP side. It admits a request,
//! reads its body and answers; [`crate::ingest::receive`] does everything in between.
//!
//! Order of checks, cheapest first: headers (415; a `Content-Length` over
//! `limits.max_body_bytes`: 413), the body (413 over `limits.max_body_bytes`, 400 when empty, 503
//! past `limits.request_body_timeout`), each chunk charged to the in-flight memory budget as it
//! arrives (503 at once when `limits.max_inflight_bytes` is spent), then a free slot (503 after a
//! bounded wait, `limits.max_concurrent_requests`), then the charge for its decoded size (503 after
//! the same wait), then the ingest's own answers ([`crate::ingest::IngestError`]). Otherwise 204.
//! A body being read holds no slot and only the bytes it sent, so slow or stalled senders cannot
//! starve the others (docs/RELIABILITY.md, "The memory budget").
//!
//! Every RW 2.0 response — errors included — carries `X-Prometheus-Remote-Write-Samples-Written`,
//! `-Histograms-Written` and `-Exemplars-Written` ([`crate::ingest::Written`]); RW 1.0 responses
//! never do (RW 2.0 specification, "Required Written Response Headers"). What the sender sees at
//! each limit, and why, is in `docs/RELIABILITY.md`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use tokio::sync::OwnedSemaphorePermit;

use super::negotiate::{self, WriteProtocol};
use super::{AppState, Charge, HttpError};
use crate::ingest::{self, Receipt, Settings, Written};
use crate::live::Live;
use crate::telemetry::{InternalEvent, RequestLimited};

/// Requests whose snappy header declares at most this many decoded bytes are processed on the
/// async worker that received them; larger ones on tokio's blocking pool. 512 KiB is about 2 000
/// vLLM-shaped samples (~240 decoded bytes each), Prometheus 2.42's default
/// `max_samples_per_send`.
const INLINE_DECODED_BYTES: usize = 512 * 1024;

/// RW 2.0 response header: float samples written.
pub(crate) const SAMPLES_WRITTEN: HeaderName =
    HeaderName::from_static("x-prometheus-remote-write-samples-written");
/// RW 2.0 response header: native histogram samples written.
pub(crate) const HISTOGRAMS_WRITTEN: HeaderName =
    HeaderName::from_static("x-prometheus-remote-write-histograms-written");
/// RW 2.0 response header: exemplars written (always 0: none is stored).
pub(crate) const EXEMPLARS_WRITTEN: HeaderName =
    HeaderName::from_static("x-prometheus-remote-write-exemplars-written");

/// Handles one remote-write request; see the module doc for the status of each outcome. An
/// [`HttpError`] is answered with its status and a one-line reason.
pub(crate) async fn handle(State(state): State<AppState>, request: Request) -> Response {
    let rw2 = negotiate::declares_rw2(request.headers());
    let (written, result) = receive(&state, request).await;
    let mut response = match result {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(error) => error.into_response(),
    };
    if rw2 {
        let headers = response.headers_mut();
        for (name, n) in [
            (SAMPLES_WRITTEN, written.samples),
            (HISTOGRAMS_WRITTEN, written.histograms),
            (EXEMPLARS_WRITTEN, written.exemplars),
        ] {
            headers.insert(name, HeaderValue::from(n));
        }
    }
    response
}

/// Everything up to the answer: what was written (zero until the body is applied) and the error.
/// Three steps: [`read_body`] (protocol, then the body within its size and time limits, charged as
/// it arrives), [`admit`] (a request slot and the charge for its decoded size) and
/// [`ingest_body`]. A refusal by a request-level limit is counted here, once, from
/// [`HttpError::limit`].
async fn receive(state: &AppState, request: Request) -> (Written, Result<(), HttpError>) {
    let result = async {
        let body = read_body(state, request).await?;
        let admitted = admit(state, body).await?;
        Ok(ingest_body(state, admitted).await)
    }
    .await;
    let (written, result) = result.unwrap_or_else(|error| (Written::default(), Err(error)));
    if let Some(limit) = result.as_ref().err().and_then(HttpError::limit) {
        RequestLimited { limit }.emit(&state.core.metrics);
    }
    (written, result)
}

/// A body read whole: its protocol, the settings in force for it (a reload applies from the next
/// request), its bytes and their charge to the in-flight budget (released when dropped).
struct Body {
    protocol: WriteProtocol,
    live: Arc<Live>,
    /// The body: its one frame as the connection read it (no copy), or the frames joined.
    bytes: Bytes,
    charge: Charge,
}

/// Step 1: the protocol from the headers (415), a `Content-Length` over `limits.max_body_bytes`
/// (413, before any body is read), then the body within `limits.request_body_timeout` (503) and
/// `limits.max_body_bytes` (413), its buffer charged to `limits.max_inflight_bytes` as it grows
/// (503 at once when the budget is spent: [`grow`]). An empty body is 400.
async fn read_body(state: &AppState, request: Request) -> Result<Body, HttpError> {
    let protocol = negotiate::write_protocol(request.headers())?;
    let live = state.live();
    let limits = live.limits;
    let declared = request
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    // Refused for its announcement: waiting for a body that may never come would end in a 503
    // (body timeout), which the sender retries.
    if declared.is_some_and(|n| n > limits.max_body_bytes) {
        return Err(HttpError::BodyTooLarge {
            limit: limits.max_body_bytes,
        });
    }
    let expected = declared.unwrap_or(limits.max_body_bytes);
    let deadline = tokio::time::Instant::now() + limits.request_body_timeout;
    let mut body = request.into_body();
    let mut charge = Charge::new(&live.inflight_kib);
    // A body that arrives as one frame (a sender's batch on a fast link) is kept as that frame,
    // charged its length; a second frame moves both into a buffer that grows as below.
    let mut first: Option<Bytes> = None;
    let mut bytes = Vec::new();
    loop {
        let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
            Err(_elapsed) => return Err(HttpError::BodyTimeout),
            Ok(None) => break,
            Ok(Some(Err(error))) => return Err(HttpError::BodyRead(error.to_string())),
            Ok(Some(Ok(frame))) => frame,
        };
        // Trailers carry nothing remote write reads.
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let received = first.as_ref().map_or(0, Bytes::len) + bytes.len();
        if received + data.len() > limits.max_body_bytes {
            return Err(HttpError::BodyTooLarge {
                limit: limits.max_body_bytes,
            });
        }
        if data.is_empty() {
            continue;
        }
        if received == 0 {
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
    Ok(Body {
        protocol,
        live,
        bytes,
        charge,
    })
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

/// A request ready for the engine: its body, its slot and its charge for the decoded size.
struct Admitted {
    body: Body,
    declared: usize,
    _permit: OwnedSemaphorePermit,
}

/// Step 2: a free slot within the permit wait (503, `limits.max_concurrent_requests`), then the
/// charge for the decoded size its snappy header declares (capped at `limits.max_decoded_bytes`:
/// a larger declaration is answered 413 by the decoder before it allocates) and its decoded
/// structures ([`crate::config::decode_charge`]), within the same wait (503,
/// `limits.max_inflight_bytes`).
async fn admit(state: &AppState, mut body: Body) -> Result<Admitted, HttpError> {
    let live = Arc::clone(&body.live);
    let permit = tokio::time::timeout(state.permit_wait, live.permits.clone().acquire_owned())
        .await
        .ok()
        .and_then(Result::ok)
        .ok_or(HttpError::Overloaded)?;
    let declared = snap::raw::decompress_len(&body.bytes)
        .unwrap_or(0)
        .min(live.limits.max_decoded_bytes);
    let wanted = body.charge.bytes() + crate::config::decode_charge(declared);
    if !body.charge.grow_to(wanted, state.permit_wait).await {
        return Err(HttpError::OverBudget);
    }
    Ok(Admitted {
        body,
        declared,
        _permit: permit,
    })
}

/// Step 3: [`ingest::receive`], on the async worker for a request as senders cut them and on the
/// blocking pool for a large one. The slot and the memory budgets are released when it returns.
async fn ingest_body(state: &AppState, admitted: Admitted) -> (Written, Result<(), HttpError>) {
    let worker_state = state.clone();
    let version = admitted.body.protocol;
    let declared = admitted.declared;
    let work = move || {
        let live = &admitted.body.live;
        let settings = Settings {
            limits: &live.limits,
            label_epoch: live.label_epoch,
        };
        // Receive wall clock: the future-skew limit and the idle timeout.
        let now = crate::clock::now_ms();
        let receipt = ingest::receive(
            &worker_state.core,
            settings,
            version,
            &admitted.body.bytes,
            now,
        );
        drop(admitted);
        receipt
    };
    // Decompression, decoding and the engine are CPU work. A request as senders cut them (500 to
    // 2 000 samples, up to ~0.5 ms here) runs on the async worker: handing it to the blocking pool
    // costs a thread wake-up per request, ~25 % of the CPU per sample at half capacity
    // (docs/PERFORMANCE.md). Larger bodies go to the pool, so no worker is held for long.
    let Receipt {
        written, result, ..
    } = if declared <= INLINE_DECODED_BYTES {
        work()
    } else {
        match tokio::task::spawn_blocking(work).await {
            Ok(receipt) => receipt,
            // `ingest::receive` catches every panic, and a blocking task is never cancelled.
            Err(join_error) => Receipt {
                written: Written::default(),
                report: engine::IngestReport::default(),
                known_series: 0,
                result: Err(ingest::IngestError::Panicked(join_error.to_string())),
            },
        }
    };
    (written, result.map_err(HttpError::from))
}

#[cfg(test)]
#[path = "write_tests.rs"]
mod tests;
