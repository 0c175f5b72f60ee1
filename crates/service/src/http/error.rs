//! [`HttpError`]: every way a request can fail, mapped to its status code and turned into a
//! response once. Errors of the layers below that know their own status (the reload's
//! [`ReloadError::status`], authentication's [`AuthError::status`]) are wrapped, not re-decided.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::ingest::IngestError;
use crate::reload::ReloadError;
use crate::telemetry::RequestLimit;
use crate::web::auth::AuthError;
use protocol::ProtocolError;

/// Why a request was refused. [`HttpError::status`] is the single place where an error of any
/// layer becomes a status code (docs/REMOTE-WRITE.md, "Status codes"):
/// 4xx means the sender drops the batch, 5xx means it retries, so 5xx is kept for transient
/// trouble — which a panic is not (see [`HttpError::Panicked`]). The response body is the
/// `Display` text, one line of `text/plain`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HttpError {
    /// `Content-Encoding` other than `snappy` (gzip included). 415.
    #[error("unsupported Content-Encoding {0:?}: remote write bodies must be snappy block format")]
    UnsupportedEncoding(String),
    /// Any `Content-Type` or `proto` parameter other than RW 1.0's and RW 2.0's. 415.
    #[error(
        "unsupported Content-Type {0:?}: expected application/x-protobuf (remote write 1.0) or \
         application/x-protobuf;proto=io.prometheus.write.v2.Request (remote write 2.0)"
    )]
    UnsupportedContentType(String),
    /// The body as sent is larger than `limits.max_body_bytes`. 413.
    #[error("request body larger than limits.max_body_bytes = {limit} bytes")]
    BodyTooLarge {
        /// The configured cap, bytes.
        limit: usize,
    },
    /// The body could not be read (connection error, malformed chunking). 400.
    #[error("cannot read the request body: {0}")]
    BodyRead(String),
    /// A zero-byte body. 400.
    #[error("empty request body: expected a snappy-compressed WriteRequest")]
    EmptyBody,
    /// What the ingest refused, whole or in part ([`IngestError`]): 413 for a request over a
    /// size limit ([`ProtocolError::DecodedTooLarge`], [`IngestError::TooManySeries`]: the same
    /// batch can never fit), otherwise 400, a panic included (a sender retries a 5xx forever with
    /// the same batch, so a panic that the batch triggers would stall its shard).
    #[error(transparent)]
    Ingest(#[from] IngestError),
    /// No request slot became free in time (`limits.max_concurrent_requests`). 503: transient,
    /// the sender retries with backoff.
    #[error(
        "too many concurrent remote-write requests (limits.max_concurrent_requests); retry later"
    )]
    Overloaded,
    /// The requests in flight hold the whole memory budget (`limits.max_inflight_bytes`) and none
    /// freed enough in time. 503: transient, the sender retries with backoff.
    #[error("requests in flight hold limits.max_inflight_bytes of memory; retry later")]
    OverBudget,
    /// The body did not arrive within `limits.request_body_timeout`; the slot and memory it held
    /// are released. 503, not 408: a stalled body is the network's fault, not the batch's, and
    /// Prometheus drops a batch on any 4xx but 429, while a 5xx is retried with backoff, so the
    /// batch gets through once the connection recovers.
    #[error("request body not received within limits.request_body_timeout")]
    BodyTimeout,
    /// Authentication refused the request (any route but the probes): 403 without a verified
    /// client certificate, 401 with a `WWW-Authenticate` challenge per configured scheme for
    /// missing or invalid credentials, 503 with `Retry-After` when the check could not run now
    /// ([`AuthError::status`]).
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// `/-/reload` in a process without a reloader (in-process uses such as `demo`). 404: the
    /// route does not exist in that mode.
    #[error("reload is not available in this mode")]
    ReloadUnavailable,
    /// `/-/reload` failed; the old configuration stays in force. 500 ([`ReloadError::status`]).
    #[error(transparent)]
    Reload(#[from] ReloadError),
    /// The reload task panicked; the old configuration stays in force. 500, as a failed reload.
    #[error("reload panicked: {0}")]
    ReloadPanicked(String),
    /// `/status` or `/api/v1/groups` with a `limit`, `after` or filter it cannot use
    /// ([`super::page::PageQuery::parse`]). 400.
    #[error("bad page query: {0}")]
    BadPageQuery(String),
    /// [`super::renders::MAX_CONCURRENT_RENDERS`] `/status` and `/api/v1/groups` responses were
    /// being rendered or written, and none finished within [`super::renders::RENDER_WAIT`]. 503
    /// with `Retry-After: 1`.
    #[error("too many status pages being served at once; retry later")]
    TooManyPages,
    /// [`super::renders::MAX_CONCURRENT_RENDERS`] `/metrics` responses were being written, and
    /// none finished within [`super::renders::RENDER_WAIT`]. 503 with `Retry-After: 1`.
    #[error("too many /metrics scrapes being served at once; retry later")]
    TooManyScrapes,
}

impl HttpError {
    /// The request-level limit that refused the request, if this error is one: its response carries
    /// it, and it is counted once, where the answer leaves, in
    /// `vllm_corrector_requests_limited_total{limit}` (`super::layer::CountResponses`).
    pub(crate) fn limit(&self) -> Option<RequestLimit> {
        match self {
            HttpError::BodyTooLarge { .. } => Some(RequestLimit::MaxBodyBytes),
            HttpError::Ingest(IngestError::Protocol(ProtocolError::DecodedTooLarge { .. })) => {
                Some(RequestLimit::MaxDecodedBytes)
            }
            HttpError::Ingest(IngestError::TooManySeries { .. }) => {
                Some(RequestLimit::MaxSeriesPerRequest)
            }
            // The decoded body's memory allowance is a multiple of its decoded size.
            HttpError::Ingest(IngestError::TooLargeInMemory { .. }) => {
                Some(RequestLimit::MaxDecodedBytes)
            }
            HttpError::Overloaded => Some(RequestLimit::MaxConcurrentRequests),
            HttpError::OverBudget => Some(RequestLimit::MaxInflightBytes),
            HttpError::BodyTimeout => Some(RequestLimit::RequestBodyTimeout),
            HttpError::TooManyPages => Some(RequestLimit::ConcurrentPages),
            HttpError::TooManyScrapes => Some(RequestLimit::ConcurrentScrapes),
            HttpError::UnsupportedEncoding(_)
            | HttpError::BadPageQuery(_)
            | HttpError::UnsupportedContentType(_)
            | HttpError::BodyRead(_)
            | HttpError::EmptyBody
            | HttpError::Ingest(_)
            | HttpError::Auth(_)
            | HttpError::ReloadUnavailable
            | HttpError::Reload(_)
            | HttpError::ReloadPanicked(_) => None,
        }
    }

    /// The status code of this error.
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            HttpError::UnsupportedEncoding(_) | HttpError::UnsupportedContentType(_) => {
                StatusCode::UNSUPPORTED_MEDIA_TYPE
            }
            HttpError::BodyTooLarge { .. }
            | HttpError::Ingest(
                IngestError::TooManySeries { .. }
                | IngestError::TooLargeInMemory { .. }
                | IngestError::Protocol(
                    ProtocolError::DecodedTooLarge { .. } | ProtocolError::TooManySeries { .. },
                ),
            ) => StatusCode::PAYLOAD_TOO_LARGE,
            HttpError::BodyRead(_)
            | HttpError::EmptyBody
            | HttpError::BadPageQuery(_)
            | HttpError::Ingest(
                IngestError::Protocol(
                    ProtocolError::Snappy(_)
                    | ProtocolError::Protobuf(_)
                    | ProtocolError::SymbolsStartNotEmpty(_)
                    | ProtocolError::V2BodyAsV1 { .. },
                )
                | IngestError::InvalidSeries { .. }
                | IngestError::Panicked(_),
            ) => StatusCode::BAD_REQUEST,
            HttpError::Overloaded
            | HttpError::OverBudget
            | HttpError::BodyTimeout
            | HttpError::TooManyPages
            | HttpError::TooManyScrapes => StatusCode::SERVICE_UNAVAILABLE,
            HttpError::Auth(error) => error.status(),
            HttpError::ReloadUnavailable => StatusCode::NOT_FOUND,
            HttpError::Reload(error) => error.status(),
            HttpError::ReloadPanicked(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// Whether this is a refused remote write, logged (rate-limited) where the answer is made.
    /// The others are logged by their layer: a panic by `WritePanicked`, an authentication
    /// refusal by `AuthRefused`, a failed reload by the reloader.
    fn is_write_refusal(&self) -> bool {
        match self {
            HttpError::UnsupportedEncoding(_)
            | HttpError::UnsupportedContentType(_)
            | HttpError::BodyTooLarge { .. }
            | HttpError::BodyRead(_)
            | HttpError::EmptyBody
            | HttpError::Ingest(
                IngestError::Protocol(_)
                | IngestError::TooManySeries { .. }
                | IngestError::TooLargeInMemory { .. }
                | IngestError::InvalidSeries { .. },
            )
            | HttpError::Overloaded
            | HttpError::OverBudget
            | HttpError::BodyTimeout => true,
            HttpError::Ingest(IngestError::Panicked(_))
            | HttpError::BadPageQuery(_)
            | HttpError::TooManyPages
            | HttpError::TooManyScrapes
            | HttpError::Auth(_)
            | HttpError::ReloadUnavailable
            | HttpError::Reload(_)
            | HttpError::ReloadPanicked(_) => false,
        }
    }
}

/// Refused remote writes repeat on every request of a misconfigured sender: at most 10 lines at
/// warn or error per 10 s (`suppressed` says how many were logged at debug meanwhile).
static REFUSALS_LOGGED: crate::telemetry::events::LogLimit =
    crate::telemetry::events::LogLimit::new(10);

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        let status = self.status();
        if !self.is_write_refusal() {
            // Logged by its own layer (see `is_write_refusal`).
        } else if let Some(suppressed) = REFUSALS_LOGGED.allow() {
            if status.is_server_error() {
                tracing::error!(code = status.as_u16(), error = %self, suppressed, "remote write failed");
            } else {
                tracing::warn!(code = status.as_u16(), error = %self, suppressed, "remote write rejected");
            }
        } else {
            tracing::debug!(code = status.as_u16(), error = %self, "remote write refused (log rate limit reached)");
        }
        let mut response = (
            status,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("{self}\n"),
        )
            .into_response();
        // Counted once, where the answer leaves (`super::layer::CountResponses`).
        if let Some(limit) = self.limit() {
            response.extensions_mut().insert(limit);
        }
        match self {
            HttpError::Auth(AuthError::Unauthenticated { challenges, .. }) => {
                for challenge in challenges {
                    response
                        .headers_mut()
                        .append(header::WWW_AUTHENTICATE, challenge);
                }
            }
            HttpError::Auth(AuthError::RateLimited)
            | HttpError::TooManyPages
            | HttpError::TooManyScrapes => {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            _ => {}
        }
        response
    }
}

#[cfg(test)]
mod tests;
