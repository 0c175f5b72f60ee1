//! `POST /api/v1/write`: the remote write 1.0 and 2.0 receiver's HTTP side. It admits a request,
//! reads its body and answers; [`crate::ingest::receive`] does everything in between.
//!
//! Order of checks, cheapest first: headers (415; a `Content-Length` over
//! `limits.max_body_bytes`: 413), a free slot (503 after a bounded wait), the body (413 over
//! `limits.max_body_bytes`, 400 when empty, 503 past `limits.request_body_timeout`), memory for
//! the body and its decoded size (503 past `limits.max_inflight_bytes`), then the ingest's own
//! answers ([`crate::ingest::IngestError`]). Otherwise 204.
//!
//! Every RW 2.0 response — errors included — carries `X-Prometheus-Remote-Write-Samples-Written`,
//! `-Histograms-Written` and `-Exemplars-Written` ([`crate::ingest::Written`]); RW 1.0 responses
//! never do (RW 2.0 specification, "Required Written Response Headers"). What the sender sees at
//! each limit, and why, is in `docs/RELIABILITY.md`.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use tokio::sync::OwnedSemaphorePermit;

use super::negotiate::{self, WriteProtocol};
use super::{AppState, HttpError};
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
/// Three steps: [`admit`] (protocol, a request slot, a memory budget for the body), [`read_body`]
/// (the body within its size and time limits, then a budget for its decoded size) and
/// [`ingest_body`]. A refusal by a request-level limit is counted here, once, from
/// [`HttpError::limit`].
async fn receive(state: &AppState, request: Request) -> (Written, Result<(), HttpError>) {
    let result = async {
        let admitted = admit(state, request.headers()).await?;
        let body = read_body(state, &admitted, request).await?;
        Ok(ingest_body(state, admitted, body).await)
    }
    .await;
    let (written, result) = result.unwrap_or_else(|error| (Written::default(), Err(error)));
    if let Some(limit) = result.as_ref().err().and_then(HttpError::limit) {
        RequestLimited { limit }.emit(&state.metrics);
    }
    (written, result)
}

/// A request admitted for reading: its protocol, the settings in force for it (a reload applies
/// from the next request), its concurrency slot and the memory reserved for its body. The slot
/// and the budget are released when this is dropped.
struct Admitted {
    protocol: WriteProtocol,
    live: Arc<Live>,
    _permit: OwnedSemaphorePermit,
    _body_budget: OwnedSemaphorePermit,
}

/// Step 1: the protocol from the headers (415), a `Content-Length` over `limits.max_body_bytes`
/// (413, before any body is read), a free slot within the permit wait (503,
/// `limits.max_concurrent_requests`), and memory for the body as announced or the largest
/// accepted one (503, `limits.max_inflight_bytes`).
async fn admit(state: &AppState, headers: &HeaderMap) -> Result<Admitted, HttpError> {
    let protocol = negotiate::write_protocol(headers)?;
    let live = state.live();
    let max_body = live.limits.max_body_bytes;
    let declared = headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    // Refused for its announcement: waiting for a body that may never come would end in a 503
    // (body timeout), which the sender retries.
    if declared.is_some_and(|n| n > max_body) {
        return Err(HttpError::BodyTooLarge { limit: max_body });
    }
    let permit = tokio::time::timeout(state.permit_wait, live.permits.clone().acquire_owned())
        .await
        .ok()
        .and_then(Result::ok)
        .ok_or(HttpError::Overloaded)?;
    let announced = declared.unwrap_or(max_body);
    let body_budget = state
        .reserve_inflight(&live, announced)
        .await
        .ok_or(HttpError::OverBudget)?;
    Ok(Admitted {
        protocol,
        live,
        _permit: permit,
        _body_budget: body_budget,
    })
}

/// A body read whole, with the memory reserved for its decoded size.
struct Body {
    bytes: Bytes,
    declared: usize,
    _decode_budget: OwnedSemaphorePermit,
}

/// Step 2: the body within `limits.request_body_timeout` (503) and `limits.max_body_bytes`
/// (413), then memory for the decoded size its snappy header declares, capped at
/// `limits.max_decoded_bytes` (a larger declaration is answered 413 by the decoder before it
/// allocates). An empty body is 400.
async fn read_body(
    state: &AppState,
    admitted: &Admitted,
    request: Request,
) -> Result<Body, HttpError> {
    let limits = admitted.live.limits;
    let read = tokio::time::timeout(
        limits.request_body_timeout,
        Limited::new(request.into_body(), limits.max_body_bytes).collect(),
    );
    let bytes = match read.await {
        Err(_elapsed) => return Err(HttpError::BodyTimeout),
        Ok(Ok(body)) => body.to_bytes(),
        Ok(Err(error)) if error.is::<LengthLimitError>() => {
            return Err(HttpError::BodyTooLarge {
                limit: limits.max_body_bytes,
            });
        }
        Ok(Err(error)) => return Err(HttpError::BodyRead(error.to_string())),
    };
    let declared = snap::raw::decompress_len(&bytes)
        .unwrap_or(0)
        .min(limits.max_decoded_bytes);
    let decode_budget = state
        .reserve_inflight(&admitted.live, declared)
        .await
        .ok_or(HttpError::OverBudget)?;
    if bytes.is_empty() {
        return Err(HttpError::EmptyBody);
    }
    Ok(Body {
        bytes,
        declared,
        _decode_budget: decode_budget,
    })
}

/// Step 3: [`ingest::receive`], on the async worker for a request as senders cut them and on the
/// blocking pool for a large one. The slot and the memory budgets are released when it returns.
async fn ingest_body(
    state: &AppState,
    admitted: Admitted,
    body: Body,
) -> (Written, Result<(), HttpError>) {
    let worker_state = state.clone();
    let version = admitted.protocol;
    let declared = body.declared;
    let work = move || {
        let live = &admitted.live;
        let settings = Settings {
            limits: &live.limits,
            label_epoch: live.label_epoch,
        };
        // Receive wall clock: the future-skew limit and the idle timeout.
        let now = crate::clock::now_ms();
        let receipt = ingest::receive(worker_state.sink(), settings, version, &body.bytes, now);
        drop((body, admitted));
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
