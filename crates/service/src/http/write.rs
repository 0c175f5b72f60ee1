//! `POST /api/v1/write`: the remote write 1.0 and 2.0 receiver's HTTP side, one layer per step
//! ([`route`]); [`crate::ingest::receive`] does everything between the body and the answer.
//!
//! Order of the steps, cheapest first, each answering its own refusal ([`HttpError`]):
//! 1. [`Negotiate`]: the protocol from the headers (415).
//! 2. [`body::BodyLimit`]: a `Content-Length` over `limits.max_body_bytes` (413); the body capped
//!    there and timed by `limits.request_body_timeout`.
//! 3. [`body::Buffer`]: the body read whole, each frame charged to the in-flight memory budget as it
//!    arrives (503 at once when `limits.max_inflight_bytes` is spent), 413 past the cap, 503 past
//!    the timeout, 400 when empty.
//! 4. [`admit::Slot`]: a free slot (503 after a bounded wait, `limits.max_concurrent_requests`).
//! 5. [`admit::DecodeCharge`]: the charge for its decoded size (503 after the same wait).
//! 6. [`Ingest`]: the ingest's own answers ([`crate::ingest::IngestError`]); otherwise 204.
//!
//! Every RW 2.0 response — errors included — carries `X-Prometheus-Remote-Write-Samples-Written`,
//! `-Histograms-Written` and `-Exemplars-Written` ([`WrittenHeaders`], [`crate::ingest::Written`]);
//! RW 1.0 responses never do (RW 2.0 specification, "Required Written Response Headers"). What the
//! sender sees at each limit, and why, is in `docs/RELIABILITY.md`.

pub(crate) mod admit;
pub(crate) mod body;

use std::convert::Infallible;
use std::future::Ready;
use std::task::{Context, Poll};

use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use tower::{Service, ServiceBuilder, ServiceExt};

use super::layer::{Handle, Inner, Step, layers, take_ready};
use super::negotiate::{self, WriteProtocol};
use super::{AppState, HttpError};
use crate::ingest::{self, Receipt, Settings, Written};
use body::WriteBody;

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

/// The remote-write route: the steps of the module doc, outermost first.
pub(super) fn route(state: &AppState) -> MethodRouter<AppState> {
    let service = ServiceBuilder::new()
        .layer(WrittenHeaders)
        .layer(Negotiate)
        .layer(body::BodyLimit {
            live: state.live_cell().clone(),
        })
        .layer(body::Buffer)
        .layer(admit::Slot {
            wait: state.permit_wait,
        })
        .layer(admit::DecodeCharge {
            wait: state.permit_wait,
        })
        .service(Ingest {
            state: state.clone(),
        });
    axum::routing::post_service(service)
}

/// Layer: the RW 2.0 `X-Prometheus-Remote-Write-*-Written` headers on every answer to a request
/// whose `Content-Type` names RW 2.0, refusals included (0 unless [`Ingest`] wrote some: the
/// [`Written`] its response carries).
#[derive(Debug, Clone, Copy)]
pub(crate) struct WrittenHeaders;

impl<S: Inner<Request>> Handle<Request, S> for WrittenHeaders
where
    S::Future: Send,
{
    type Next = Request;

    fn handle(&self, inner: &mut S, request: Request) -> Step<S::Future> {
        if !negotiate::declares_rw2(request.headers()) {
            return Step::inner(inner.call(request));
        }
        let inner = take_ready(inner);
        Step::waiting(async move {
            let mut response = inner.oneshot(request).await?;
            let written = response
                .extensions_mut()
                .remove::<Written>()
                .unwrap_or_default();
            let headers = response.headers_mut();
            for (name, n) in [
                (SAMPLES_WRITTEN, written.samples),
                (HISTOGRAMS_WRITTEN, written.histograms),
                (EXEMPLARS_WRITTEN, written.exemplars),
            ] {
                headers.insert(name, HeaderValue::from(n));
            }
            Ok(response)
        })
    }
}

/// Layer: the remote-write protocol from `Content-Encoding` and `Content-Type`
/// ([`negotiate::write_protocol`]; 415 for anything else), kept in the request's extensions.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Negotiate;

impl<S: Inner<Request>> Handle<Request, S> for Negotiate
where
    S::Future: Send,
{
    type Next = Request;

    fn handle(&self, inner: &mut S, mut request: Request) -> Step<S::Future> {
        match negotiate::write_protocol(request.headers()) {
            Ok(protocol) => {
                request.extensions_mut().insert(protocol);
                Step::inner(inner.call(request))
            }
            Err(error) => Step::refused(error),
        }
    }
}

layers!(WrittenHeaders, Negotiate);

/// The last step: [`ingest::receive`] of an admitted body, on the async worker for a request as
/// senders cut them and on the blocking pool for a large one; 204, or the ingest's refusal. The
/// body's slot and charges are released when the engine is done, before the answer is written.
#[derive(Debug, Clone)]
pub(crate) struct Ingest {
    state: AppState,
}

impl Service<Request<WriteBody>> for Ingest {
    type Response = Response;
    type Error = Infallible;
    type Future = Step<Ready<Result<Response, Infallible>>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<WriteBody>) -> Self::Future {
        let (parts, body) = request.into_parts();
        // Set by `Negotiate`; read again from the headers when this service is used alone.
        let protocol = match parts.extensions.get::<WriteProtocol>() {
            Some(&protocol) => protocol,
            None => match negotiate::write_protocol(&parts.headers) {
                Ok(protocol) => protocol,
                Err(error) => return Step::refused(error),
            },
        };
        // Decompression, decoding and the engine are CPU work. A request as senders cut them (500
        // to 2 000 samples, up to ~0.5 ms here) runs on the async worker: handing it to the
        // blocking pool costs a thread wake-up per request, ~25 % of the CPU per sample at half
        // capacity (docs/PERFORMANCE.md). Larger bodies go to the pool, so no worker is held long.
        if body.decoded <= INLINE_DECODED_BYTES {
            return Step::answered(answer(protocol, receive(&self.state, protocol, body)));
        }
        let state = self.state.clone();
        Step::waiting(async move {
            let receipt =
                match tokio::task::spawn_blocking(move || receive(&state, protocol, body)).await {
                    Ok(receipt) => receipt,
                    // `ingest::receive` catches every panic, and a blocking task is never cancelled.
                    Err(join_error) => Receipt {
                        written: Written::default(),
                        report: engine::IngestReport::default(),
                        known_series: 0,
                        result: Err(ingest::IngestError::Panicked(join_error.to_string())),
                    },
                };
            Ok(answer(protocol, receipt))
        })
    }
}

/// [`ingest::receive`] of `body` with the settings it arrived with and the receive wall clock (the
/// future-skew limit and the idle timeout), then `body` dropped: its slot and charges released.
fn receive(state: &AppState, protocol: WriteProtocol, body: WriteBody) -> Receipt {
    let settings = Settings {
        limits: &body.live.limits,
        label_epoch: body.live.label_epoch,
    };
    let receipt = ingest::receive(
        &state.core,
        settings,
        protocol,
        &body.bytes,
        crate::clock::now_ms(),
    );
    drop(body);
    receipt
}

/// 204, or the refusal; an RW 2.0 answer carries what was written for [`WrittenHeaders`].
fn answer(protocol: WriteProtocol, receipt: Receipt) -> Response {
    let mut response = match receipt.result {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(error) => HttpError::from(error).into_response(),
    };
    if protocol == WriteProtocol::V2 {
        response.extensions_mut().insert(receipt.written);
    }
    response
}

#[cfg(test)]
mod tests;
