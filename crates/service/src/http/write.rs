//! `POST /api/v1/write`: the remote write 1.0 and 2.0 receiver.
//!
//! Order of checks, cheapest first: headers (415; a `Content-Length` over
//! `limits.max_body_bytes`: 413), a free slot (503 after a bounded wait), the body (413 over
//! `limits.max_body_bytes`, 400 when empty), snappy with the declared decoded
//! length checked before allocating (413) or corrupt (400), protobuf (400; the schema comes from
//! `Content-Type`, never from trying), series per request (413), then per series: label limits,
//! labels and RW 2.0 label references, custom-bucket histograms, the active-series limit (400
//! naming the first refused series, everything else still applied). Otherwise 204. Metadata the
//! decoder drops (not UTF-8, RW 2.0 references out of range) never fails a request: it is counted
//! in `vllm_corrector_metadata_dropped_total{reason}` ([`MetadataEntriesDropped`]). A panic while
//! processing (a bug) is answered 400 ([`HttpError::Panicked`]) and counted ([`WritePanicked`]).
//!
//! Every RW 2.0 response — errors included — carries `X-Prometheus-Remote-Write-Samples-Written`,
//! `-Histograms-Written` and `-Exemplars-Written` ([`crate::ingest::Written`]); RW 1.0 responses
//! never do (RW 2.0 specification, "Required Written Response Headers"). What the sender sees at
//! each limit, and why, is in `docs/RELIABILITY.md`.

use std::any::Any;
use std::cell::RefCell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use tokio::sync::OwnedSemaphorePermit;

use super::negotiate::{self, WriteProtocol};
use super::{AppState, HttpError};
use crate::ingest::{self, Written};
use crate::live::Live;
use crate::telemetry::{
    InternalEvent, MetadataEntriesDropped, RequestLimited, SamplesIngested, WritePanicked,
};
use engine::RejectReason;
use protocol;

/// A decode buffer larger than this is freed after its request instead of kept for the next one
/// on the same thread, so rare huge requests do not pin memory.
const KEEP_BUFFER_BYTES: usize = 4 * 1024 * 1024;

/// Requests whose snappy header declares at most this many decoded bytes are processed on the
/// async worker that received them; larger ones on tokio's blocking pool. 512 KiB is about 2 000
/// vLLM-shaped samples (~240 decoded bytes each), Prometheus 2.42's default
/// `max_samples_per_send`.
const INLINE_DECODED_BYTES: usize = 512 * 1024;

/// The longest panic message quoted in a 400 answer, bytes.
const MAX_QUOTED_PANIC: usize = 512;

/// RW 2.0 response header: float samples written.
pub(crate) const SAMPLES_WRITTEN: HeaderName =
    HeaderName::from_static("x-prometheus-remote-write-samples-written");
/// RW 2.0 response header: native histogram samples written.
pub(crate) const HISTOGRAMS_WRITTEN: HeaderName =
    HeaderName::from_static("x-prometheus-remote-write-histograms-written");
/// RW 2.0 response header: exemplars written (always 0: none is stored).
pub(crate) const EXEMPLARS_WRITTEN: HeaderName =
    HeaderName::from_static("x-prometheus-remote-write-exemplars-written");

thread_local! {
    /// Reused decompression buffer of the blocking thread that decodes a request.
    static DECODE_BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

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
/// [`decode_and_apply`] (in [`without_panics`]). A refusal by a request-level limit is counted
/// here, once, from [`HttpError::limit`].
async fn receive(state: &AppState, request: Request) -> (Written, Result<(), HttpError>) {
    let result = async {
        let admitted = admit(state, request.headers()).await?;
        let body = read_body(state, &admitted, request).await?;
        Ok(decode_and_apply(state, admitted, body).await)
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

/// Step 3: decompress, decode and apply the body, on the async worker for a request as senders
/// cut them and on the blocking pool for a large one, inside [`without_panics`]. The slot and the
/// memory budgets are released when it returns.
async fn decode_and_apply(
    state: &AppState,
    admitted: Admitted,
    body: Body,
) -> (Written, Result<(), HttpError>) {
    let worker_state = state.clone();
    let (protocol, limits) = (admitted.protocol, admitted.live.limits);
    let declared = body.declared;
    let work = move || {
        let processed = without_panics(&worker_state, |uncounted| {
            DECODE_BUFFER.with_borrow_mut(|buffer| {
                process(
                    &worker_state,
                    &limits,
                    protocol,
                    &body.bytes,
                    buffer,
                    uncounted,
                )
            })
        });
        // Also after a panic (the borrow ended while unwinding).
        DECODE_BUFFER.with_borrow_mut(|buffer| {
            if buffer.capacity() > KEEP_BUFFER_BYTES {
                *buffer = Vec::new();
            }
        });
        drop(body);
        processed
    };
    // Decompression, decoding and the engine are CPU work. A request as senders cut them (500 to
    // 2 000 samples, up to ~0.5 ms here) runs on the async worker: handing it to the blocking pool
    // costs a thread wake-up per request, ~25 % of the CPU per sample at half capacity
    // (docs/PERFORMANCE.md). Larger bodies go to the pool, so no worker is held for long.
    let outcome = if declared <= INLINE_DECODED_BYTES {
        work()
    } else {
        match tokio::task::spawn_blocking(work).await {
            Ok(outcome) => outcome,
            // `without_panics` caught any panic, and a blocking task is never cancelled.
            Err(join_error) => panicked(state, &join_error.to_string(), None),
        }
    };
    drop(admitted);
    outcome
}

/// Runs `work`, answering a panic in it with 400 ([`HttpError::Panicked`]), not 500: a sender
/// retries a 5xx forever, so a panic that this batch triggers every time would stall its shard.
/// `work` is given a slot that holds the number of decoded samples from decoding until they are
/// counted, so that a panic in between still counts them ([`WritePanicked`]).
fn without_panics(
    state: &AppState,
    work: impl FnOnce(&mut Option<u64>) -> (Written, Result<(), HttpError>),
) -> (Written, Result<(), HttpError>) {
    let mut uncounted = None;
    match panic::catch_unwind(AssertUnwindSafe(|| work(&mut uncounted))) {
        Ok(outcome) => outcome,
        Err(payload) => panicked(state, &panic_message(payload.as_ref()), uncounted),
    }
}

/// Logs and counts a panic, with the decoded samples it left uncounted, and makes its answer.
fn panicked(
    state: &AppState,
    message: &str,
    samples: Option<u64>,
) -> (Written, Result<(), HttpError>) {
    WritePanicked { message, samples }.emit(&state.metrics);
    (
        Written::default(),
        Err(HttpError::Panicked(one_line(message))),
    )
}

/// `message` for the one-line answer: line breaks (an `assert_eq!` message has several) become
/// ` / `, and it is cut at [`MAX_QUOTED_PANIC`] bytes. The log keeps the whole message.
fn one_line(message: &str) -> String {
    let mut line = message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" / ");
    if line.len() > MAX_QUOTED_PANIC {
        let mut cut = MAX_QUOTED_PANIC;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        line.truncate(cut);
        line.push('…');
    }
    line
}

/// The message of a panic payload: the `&str` or `String` that `panic!` was given, else a
/// placeholder (a payload of another type).
fn panic_message(payload: &(dyn Any + Send)) -> String {
    match (
        payload.downcast_ref::<&str>(),
        payload.downcast_ref::<String>(),
    ) {
        (Some(s), _) => (*s).to_owned(),
        (_, Some(s)) => s.clone(),
        _ => "a panic payload that is not a string".to_owned(),
    }
}

/// Decompresses, decodes and applies one body. Every decoded sample is counted (received =
/// applied + Σ rejected) before returning, also when some series are refused. `uncounted` holds
/// the number of decoded samples from decoding until they are counted, so that the caller can
/// count them if this panics in between.
fn process(
    state: &AppState,
    limits: &crate::config::Limits,
    protocol: WriteProtocol,
    body: &[u8],
    buffer: &mut Vec<u8>,
    uncounted: &mut Option<u64>,
) -> (Written, Result<(), HttpError>) {
    let none = Written::default();
    #[cfg(test)]
    state.injected_panic(super::PanicAt::BeforeDecode);
    if let Err(e) = protocol::snappy::decompress_into(body, limits.max_decoded_bytes, buffer) {
        return (none, Err(e.into()));
    }
    let decoded = match protocol {
        // Labels are decoded later, and only for series the engine does not know.
        WriteProtocol::V1 => protocol::v1::decode_deferred(buffer),
        WriteProtocol::V2 => protocol::v2::decode(buffer),
    };
    let request = match decoded {
        Ok(request) => request,
        Err(e) => return (none, Err(e.into())),
    };
    *uncounted = Some(request.series.iter().map(|s| s.sample_count()).sum());
    if request.metadata_dropped.total() > 0 {
        MetadataEntriesDropped {
            dropped: request.metadata_dropped,
            protocol: match protocol {
                WriteProtocol::V1 => "1.0",
                WriteProtocol::V2 => "2.0",
            },
        }
        .emit(&state.metrics);
    }
    if request.series.len() > limits.max_series_per_request {
        // Every sample counted as the eager decoder counts them, and its error first.
        let mut request = request;
        if let Err(e) = protocol::v1::walk_provisional(&mut request) {
            *uncounted = None;
            return (none, Err(e.into()));
        }
        let report = ingest::reject_request(&request, RejectReason::TooManySeries);
        SamplesIngested { report: &report }.emit(&state.metrics);
        *uncounted = None;
        let error = HttpError::TooManySeries {
            series: request.series.len(),
            limit: limits.max_series_per_request,
        };
        return (none, Err(error));
    }

    // The known-series fast path (docs/PERFORMANCE.md): a hold of the engine lock finds the
    // series known by their label bytes. In steady state that is every series, and the request is
    // applied in the same hold. Otherwise the labels of the others are decoded, checked and
    // normalised outside the lock, and the lock is taken again to apply.
    // Receive wall clock, for the idle timeout only.
    let now = crate::clock::now_ms();
    let mut engine = state.lock_engine();
    let known = match protocol {
        WriteProtocol::V1 => ingest::known_series(&mut engine, &request, limits, now),
        WriteProtocol::V2 => Vec::new(),
    };
    // Kept only when nothing is left to decode; released here otherwise.
    let held = ingest::every_series_known(&request, &known).then_some(engine);
    let prepared = match ingest::prepare_known(request, known, limits) {
        Ok(prepared) => prepared,
        Err(e) => {
            *uncounted = None;
            return (none, Err(e.into()));
        }
    };
    let mut engine = match held {
        Some(engine) => engine,
        None => {
            // The series walked in `prepare_known` may hold more samples than their provisional
            // reading. (With every series known, none was walked.)
            *uncounted = Some(prepared.sample_count());
            state.lock_engine()
        }
    };
    let (outcome, events) = {
        #[cfg(test)]
        state.injected_panic(super::PanicAt::UnderEngineLock);
        let outcome = prepared.apply(&mut engine, now);
        (outcome, engine.take_events())
    };
    drop(engine);
    state.event_log.log(events, now);
    SamplesIngested {
        report: &outcome.report,
    }
    .emit(&state.metrics);
    *uncounted = None;

    let result = match outcome.first_rejected {
        None => Ok(()),
        Some(first) => Err(HttpError::InvalidSeries {
            invalid: outcome.rejected_series,
            total: outcome.series,
            index: first.index,
            labels: first.labels,
            reason: first.reason,
        }),
    };
    (outcome.written, result)
}

#[cfg(test)]
#[path = "write_tests.rs"]
mod tests;
