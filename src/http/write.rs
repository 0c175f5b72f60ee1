//! `POST /api/v1/write`: the remote write 1.0 receiver.
//!
//! Order of checks, cheapest first: headers (415), a free slot (503 after a bounded wait), the
//! body (413 over `limits.max_body_bytes`, 400 when empty), snappy with the declared decoded
//! length checked before allocating (413) or corrupt (400), protobuf (400), labels per series
//! (400 naming the first bad series, the valid series still applied). Otherwise 204. Remote
//! write 1.0 responses never carry the `X-Prometheus-Remote-Write-*-Written` headers.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::{FromRequest, Request, State};
use axum::http::StatusCode;

use super::{AppState, HttpError, negotiate};
use crate::engine::{IngestReport, RejectReason};
use crate::protocol::{self, Label, LabelError};
use crate::telemetry::{InternalEvent, SamplesIngested};

/// A decode buffer larger than this is freed after its request instead of kept for the next one
/// on the same thread, so rare huge requests do not pin memory.
const KEEP_BUFFER_BYTES: usize = 4 * 1024 * 1024;

/// The longest label text quoted in a 400 answer.
const MAX_QUOTED_LABELS: usize = 512;

thread_local! {
    /// Reused decompression buffer of the blocking thread that decodes a request.
    static DECODE_BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Handles one remote-write request; see the module doc for the status of each outcome.
///
/// # Errors
/// Any [`HttpError`], answered with its status and a one-line reason.
pub async fn handle(
    State(state): State<AppState>,
    request: Request,
) -> Result<StatusCode, HttpError> {
    let negotiate::WriteProtocol::V1 = negotiate::write_protocol(request.headers())?;
    let permit = tokio::time::timeout(state.permit_wait, state.permits.clone().acquire_owned())
        .await
        .map_err(|_| HttpError::Overloaded)?
        .map_err(|_| HttpError::Overloaded)?;
    let body = Bytes::from_request(request, &())
        .await
        .map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                HttpError::BodyTooLarge {
                    limit: state.limits.max_body_bytes,
                }
            } else {
                HttpError::BodyRead(rejection.body_text())
            }
        })?;
    if body.is_empty() {
        return Err(HttpError::EmptyBody);
    }
    // Decompression and decoding are CPU work: keep them off the async worker threads.
    let worker_state = state.clone();
    let outcome = tokio::task::spawn_blocking(move || {
        DECODE_BUFFER.with_borrow_mut(|buffer| {
            let outcome = process(&worker_state, &body, buffer);
            if buffer.capacity() > KEEP_BUFFER_BYTES {
                *buffer = Vec::new();
            }
            outcome
        })
    })
    .await;
    drop(permit);
    match outcome {
        Ok(result) => result.map(|()| StatusCode::NO_CONTENT),
        Err(join_error) => Err(HttpError::Internal(format!(
            "request processing panicked: {join_error}"
        ))),
    }
}

/// Decompresses, decodes and applies one body. Every sample is counted (received = applied + Σ
/// rejected) before returning, also when some series are invalid.
fn process(state: &AppState, body: &[u8], buffer: &mut Vec<u8>) -> Result<(), HttpError> {
    protocol::snappy::decompress_into(body, state.limits.max_decoded_bytes, buffer)?;
    let mut request = protocol::v1::decode_flat(buffer)?;
    let mut report = IngestReport::default();

    // Normalise labels outside the engine lock; drop invalid series after counting them.
    let total = request.series.len();
    let mut first_invalid: Option<(usize, String, LabelError)> = None;
    let mut invalid = 0usize;
    let mut index = 0usize;
    let labels = &mut request.labels;
    request.series.retain_mut(|series| {
        let position = index;
        index += 1;
        let (len, result) = protocol::normalize_labels_in_place(&mut labels[series.labels.clone()]);
        series.labels.end = series.labels.start + len;
        match result {
            Ok(()) => true,
            Err(error) => {
                let samples = series.samples.len() as u64 + u64::from(series.histograms);
                report.reject(RejectReason::Label(error), samples);
                invalid += 1;
                first_invalid.get_or_insert_with(|| {
                    (
                        position,
                        quote_labels(&labels[series.labels.clone()]),
                        error,
                    )
                });
                false
            }
        }
    });

    let now_ms = now_ms();
    {
        let mut engine = state.lock_engine();
        for series in &request.series {
            if series.histograms > 0 {
                report.reject(RejectReason::NativeHistogram, u64::from(series.histograms));
            }
            if !series.samples.is_empty() {
                engine.ingest_identified(
                    &request.labels[series.labels.clone()],
                    series.label_bytes.clone().map(|r| &buffer[r]),
                    &request.samples[series.samples.clone()],
                    now_ms,
                    &mut report,
                );
            }
        }
        for metadata in &request.metadata {
            engine.record_metadata(metadata);
        }
    }
    SamplesIngested { report: &report }.emit(&state.metrics);

    match first_invalid {
        None => Ok(()),
        Some((index, labels, reason)) => Err(HttpError::InvalidSeries {
            invalid,
            total,
            index,
            labels,
            reason,
        }),
    }
}

/// Receive wall clock, ms since the Unix epoch (for the idle timeout only).
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// `{name="value", …}` with values escaped, cut at [`MAX_QUOTED_LABELS`] bytes.
fn quote_labels(labels: &[Label<'_>]) -> String {
    let mut out = String::from("{");
    for (i, label) in labels.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{}={:?}", label.name, label.value);
        if out.len() > MAX_QUOTED_LABELS {
            let mut cut = MAX_QUOTED_LABELS;
            while !out.is_char_boundary(cut) {
                cut -= 1;
            }
            out.truncate(cut);
            out.push('…');
            break;
        }
    }
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_labels_are_escaped_and_bounded() {
        let labels = [
            Label {
                name: "__name__",
                value: "x",
            },
            Label {
                name: "a",
                value: "q\"\n",
            },
        ];
        assert_eq!(quote_labels(&labels), "{__name__=\"x\", a=\"q\\\"\\n\"}");
        let long = "v".repeat(2000);
        let quoted = quote_labels(&[Label {
            name: "a",
            value: &long,
        }]);
        // The first 512 bytes (the opening brace included), then "…" (3 bytes) and "}".
        assert_eq!(quoted.len(), MAX_QUOTED_LABELS + 3 + 1);
        assert!(
            quoted.starts_with("{a=\"vvv") && quoted.ends_with("vv…}"),
            "{quoted}"
        );
    }
}
