//! Ingest: one remote-write body into the engine, with every sample accounted (docs/ENGINE.md,
//! invariant 3: received = applied + Σ rejected by reason). `receive` is the one entry point;
//! it does each step once, in this order:
//!
//! 1. **Decompress** the snappy body, its declared length checked before allocating
//!    (`limits.max_decoded_bytes`: 413).
//! 2. **Decode** it as RW 1.0 or 2.0 ([`protocol::Version`], from the `Content-Type`): series whose
//!    labels are pending (RW 1.0) or decoded (RW 2.0), each with its key (400 when malformed).
//! 3. **Refuse** a request of more than `limits.max_series_per_request` series whole (413), its
//!    samples counted `too_many_series`.
//! 4. **Take the engine lock once**, and in it:
//!    - **look up** every series by its key in the engine's series index; a series not found has
//!      its labels decoded (a malformed label refuses the request whole, 400, before anything is
//!      applied), checked against the label limits and normalised (`apply`);
//!    - **apply** every series: samples stamped past receive time plus `limits.max_future_skew`
//!      are refused, floats go to the engine, custom-bucket native histograms go in as the classic
//!      series they stand for, metadata is cached.
//! 5. **Report**: log the engine's group events, count every sample, and say what was written (the
//!    RW 2.0 `*-Written` response headers) and which series were refused (400, naming the first;
//!    the rest of the request was applied).
//!
//! From decoding until counting, the request's samples are held by a guard (`Unaccounted`): a
//! panic in between (a bug) counts them as `internal_error`, and `receive` answers the panic as
//! [`IngestError::Panicked`] (400, never a 5xx that the sender would retry forever).

mod quote;
mod receiver;

use std::any::Any;
use std::cell::RefCell;
use std::panic::{self, AssertUnwindSafe};

use crate::config::Limits;
use crate::core::Core;
use crate::telemetry::{
    InternalEvent, MetadataEntriesDropped, SamplesIngested, SelfMetrics, WritePanicked,
};
use engine::{IngestPolicy, IngestReport, RejectReason, RequestError};
use protocol::{ProtocolError, Version};

pub use engine::{Refusal, Written};
pub use receiver::Receiver;

/// A decode buffer larger than this is freed after its request instead of kept for the next one
/// on the same thread, so rare large requests do not pin memory. 512 KiB: the HTTP layer runs
/// requests that decode to at most that on its async workers (a few threads), larger ones on the
/// blocking pool (up to `limits.max_concurrent_requests` threads), so only the workers keep a
/// buffer, outside the in-flight charge: a few times 512 KiB, within
/// the reserve of `limits.max_memory_bytes` (`RESERVED_BYTES` in `config/limits.rs`).
const KEEP_BUFFER_BYTES: usize = 512 * 1024;

/// The longest panic message quoted in a 400 answer, bytes.
const MAX_QUOTED_PANIC: usize = 512;

thread_local! {
    /// Reused decompression buffer of the thread that runs [`receive`].
    static DECODE_BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The settings one request is received under (a reload applies from the next request).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings<'a> {
    /// Receiver limits.
    pub(crate) limits: &'a Limits,
    /// The label-check epoch of `limits.labels` ([`crate::live::Live::label_epoch`]): raised by a
    /// reload that changes them, so the engine's series index forgets what the old ones let in.
    pub(crate) label_epoch: u64,
}

/// Why a request was refused, whole or in part: the ingest layer's error. The HTTP layer maps each
/// to its status once (`crate::http::HttpError`).
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum IngestError {
    /// Snappy or protobuf failure: nothing was applied or counted. 413 for
    /// [`ProtocolError::DecodedTooLarge`], 400 otherwise.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// More series than `limits.max_series_per_request`: nothing was applied, every sample was
    /// counted `too_many_series`. 413: the same batch can never fit.
    #[error(
        "request holds {series} series, over limits.max_series_per_request = {limit}; \
         lower queue_config.max_samples_per_send"
    )]
    TooManySeries {
        /// Series in the request.
        series: usize,
        /// The configured cap.
        limit: usize,
    },
    /// The decoded request would take more memory than its body allows (`crate::config::memory_allowance`):
    /// series by the hundred thousand of a few bytes each, or labels by the thousand. Nothing was
    /// applied; its samples were counted `too_many_series`. 413: the same batch can never fit.
    #[error(
        "request of {series} series would take more than {bytes} bytes in memory to decode; \
         send fewer, larger series per request"
    )]
    TooLargeInMemory {
        /// Series in the request.
        series: usize,
        /// The memory allowed for its decoded structures, bytes.
        bytes: usize,
    },
    /// Some series (or some of their native histogram samples) were refused: invalid labels or
    /// label references, a label limit, an invalid custom-buckets histogram, a future timestamp,
    /// or the active-series limit. Their samples were rejected; the rest was applied. 400
    /// (docs/REMOTE-WRITE.md, checklist item 1).
    #[error(
        "{invalid} of {total} series rejected; the first is series #{index} {labels}: {reason}"
    )]
    InvalidSeries {
        /// Series with a rejection in the request.
        invalid: usize,
        /// Series in the request.
        total: usize,
        /// Zero-based position of the first rejected series in the request.
        index: usize,
        /// Its labels, as `{name="value", …}` (shortened when long).
        labels: String,
        /// Why it was rejected.
        reason: Refusal,
    },
    /// A bug: processing the request panicked (the message, on one bounded line). 400, not 500:
    /// a sender retries a 5xx forever with the same batch, so a panic that the batch triggers
    /// would stall its shard. Logged and counted (`WritePanicked`).
    #[error(
        "internal error: processing this request panicked ({0}). This is a bug in vllm-corrector: \
         please report it with this message and the server log. Answered 400, not 500, so the \
         sender drops this batch instead of retrying it forever"
    )]
    Panicked(String),
}

/// What `receive` did with one request: what was written, and the error if any part was
/// refused.
#[derive(Debug, PartialEq)]
pub struct Receipt {
    /// What was written (RW 2.0 response headers); zero when refused whole.
    pub written: Written,
    /// The request's sample accounting, as counted in the self-metrics (empty when refused whole
    /// before decoding, or by a panic: the guard counted its samples `internal_error`).
    pub report: IngestReport,
    /// Series the engine's series index held (whose labels were neither decoded nor checked).
    pub known_series: usize,
    /// `Ok`, or why the request was refused whole or in part.
    pub result: Result<(), IngestError>,
}

impl Receipt {
    fn refused(error: impl Into<IngestError>) -> Receipt {
        Receipt {
            written: Written::default(),
            report: IngestReport::default(),
            known_series: 0,
            result: Err(error.into()),
        }
    }
}

/// Receives one snappy-compressed remote-write `body` of `version`: the steps of the module doc,
/// each once. Never panics: a panic inside is counted and answered as [`IngestError::Panicked`].
/// `now_ms` is the receive wall clock (ms since the epoch), for the future-skew limit and the
/// idle timeout.
pub(crate) fn receive(
    core: &Core,
    settings: Settings<'_>,
    version: Version,
    body: &[u8],
    now_ms: i64,
) -> Receipt {
    let received = panic::catch_unwind(AssertUnwindSafe(|| {
        DECODE_BUFFER.with_borrow_mut(|buffer| {
            decompress_decode_apply(core, settings, version, body, now_ms, buffer)
        })
    }));
    // Also after a panic (the borrow ended while unwinding).
    DECODE_BUFFER.with_borrow_mut(|buffer| {
        if buffer.capacity() > KEEP_BUFFER_BYTES {
            *buffer = Vec::new();
        }
    });
    received.unwrap_or_else(|payload| {
        let message = panic_message(payload.as_ref());
        WritePanicked { message: &message }.emit(&core.metrics);
        Receipt::refused(IngestError::Panicked(one_line(&message)))
    })
}

/// The steps of [`receive`], panics not caught.
fn decompress_decode_apply(
    core: &Core,
    settings: Settings<'_>,
    version: Version,
    body: &[u8],
    now_ms: i64,
    buffer: &mut Vec<u8>,
) -> Receipt {
    #[cfg(test)]
    fail::fail_point!("ingest::before_decode");
    let limits = settings.limits;
    if let Err(e) = protocol::snappy::decompress_into(body, limits.max_decoded_bytes, buffer) {
        return Receipt::refused(e);
    }
    // The series a decode may hold: the request limit, and what the memory the HTTP layer set
    // aside for this body allows ([`crate::config::memory_allowance`]).
    let allowance = crate::config::memory_allowance(buffer.len());
    let max_series = limits
        .max_series_per_request
        .min(allowance / engine::SERIES_BYTES);
    let mut request = match version.decode_at_most(buffer, max_series) {
        Ok(request) => request,
        Err(ProtocolError::TooManySeries { series, .. }) => {
            return refuse_whole(core, version, buffer, series, limits);
        }
        Err(e) => return Receipt::refused(e),
    };
    emit_metadata_dropped(core, request.metadata_dropped, version);
    let samples = Unaccounted::new(&core.metrics, request.sample_count());
    let policy = IngestPolicy {
        labels: &limits.labels,
        label_epoch: settings.label_epoch,
        max_future_skew_ms: limits.max_future_skew_ms,
        max_decoded_bytes: allowance,
    };

    let mut engine = core.engine();
    #[cfg(test)]
    fail::fail_point!("ingest::engine_locked");
    let applied = engine.apply(&mut request, &policy, now_ms, &samples.count);
    let events = engine.take_events();
    drop(engine);
    core.events.log(events, now_ms);
    let outcome = match applied {
        Ok(outcome) => outcome,
        Err(e) => {
            samples.refused_whole();
            return Receipt::refused(match e {
                RequestError::Protocol(e) => IngestError::Protocol(e),
                RequestError::TooLargeInMemory { series, bytes } => {
                    IngestError::TooLargeInMemory { series, bytes }
                }
            });
        }
    };
    samples.counted(&outcome.report);
    emit_metadata_dropped(core, outcome.metadata_dropped, version);
    let result = match outcome.first_refused {
        None => Ok(()),
        Some((index, reason)) => Err(IngestError::InvalidSeries {
            invalid: outcome.refused_series,
            total: request.series.len(),
            index,
            labels: quote::quote_series(&request, index, &limits.labels),
            reason,
        }),
    };
    Receipt {
        written: outcome.written,
        result,
        known_series: outcome.known_series,
        report: outcome.report,
    }
}

/// A body of `series` series over `limits.max_series_per_request` or over its memory allowance:
/// refused whole, 413, its samples counted `too_many_series` without decoding it.
fn refuse_whole(
    core: &Core,
    version: Version,
    buffer: &[u8],
    series: usize,
    limits: &Limits,
) -> Receipt {
    let counts = match version.count(buffer) {
        Ok(counts) => counts,
        Err(e) => return Receipt::refused(e),
    };
    let mut report = IngestReport::default();
    report.reject(RejectReason::TooManySeries, counts.samples);
    SamplesIngested { report: &report }.emit(&core.metrics);
    let error = if series > limits.max_series_per_request {
        IngestError::TooManySeries {
            series,
            limit: limits.max_series_per_request,
        }
    } else {
        IngestError::TooLargeInMemory {
            series,
            bytes: crate::config::memory_allowance(buffer.len()),
        }
    };
    Receipt {
        report,
        ..Receipt::refused(error)
    }
}

/// The samples of a request from decoding until they are counted (a guard). Dropped before
/// [`Unaccounted::counted`] or [`Unaccounted::refused_whole`], as when processing panics, it counts
/// them as `internal_error`, so that a bug loses no sample silently (received = applied +
/// Σ rejected holds through a panic).
#[must_use]
struct Unaccounted<'m> {
    metrics: &'m SelfMetrics,
    /// The request's samples, kept current by the engine as it walks series late
    /// ([`Engine::apply`]).
    count: std::cell::Cell<u64>,
    settled: bool,
}

impl<'m> Unaccounted<'m> {
    fn new(metrics: &'m SelfMetrics, samples: u64) -> Self {
        Unaccounted {
            metrics,
            count: std::cell::Cell::new(samples),
            settled: false,
        }
    }

    /// The samples are counted in `report` (which must hold every one of them).
    fn counted(mut self, report: &IngestReport) {
        debug_assert_eq!(report.received, self.count.get(), "every sample is counted");
        SamplesIngested { report }.emit(self.metrics);
        self.settled = true;
    }

    /// The request was refused whole by its decoder (a malformed body): its samples are not
    /// counted, as those of a body that did not decode are not.
    fn refused_whole(mut self) {
        self.settled = true;
    }
}

impl Drop for Unaccounted<'_> {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        let mut report = IngestReport::default();
        report.reject(RejectReason::InternalError, self.count.get());
        SamplesIngested { report: &report }.emit(self.metrics);
    }
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
    cut_with_ellipsis(&mut line, MAX_QUOTED_PANIC);
    line
}

/// Cuts `text` to at most `max` bytes (at a character boundary) followed by `…`, when it is
/// longer; returns whether it was cut.
fn cut_with_ellipsis(text: &mut String, max: usize) -> bool {
    if text.len() <= max {
        return false;
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    text.push('…');
    true
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

/// Logs and counts the metadata entries `dropped` from one request of `version`, if any: by the
/// decoder (malformed) or by the engine's cache (`too_long`).
fn emit_metadata_dropped(core: &Core, dropped: protocol::MetadataDropped, version: Version) {
    if dropped.total() > 0 {
        MetadataEntriesDropped {
            dropped,
            protocol: version.as_str(),
        }
        .emit(&core.metrics);
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod index_tests;
