//! What one request is applied under and what it gives back ([`super::Engine::apply`]'s
//! arguments and answer): the settings, the refusal of the whole request, and the outcome with its
//! report, the samples written and the first series refused.

use super::*;

/// The settings one request is applied under.
#[derive(Debug, Clone, Copy)]
pub struct IngestPolicy<'a> {
    /// The label limits a new series' labels are checked against.
    pub labels: &'a LabelLimits,
    /// The epoch of those checks: an opaque number the caller raises whenever they change (a
    /// reload of the label limits). Index entries of an older epoch are forgotten; a request of an
    /// older epoch than the index's neither reads nor fills it.
    pub label_epoch: u64,
    /// Samples stamped later than receive time plus this (ms) are refused
    /// ([`RejectReason::FutureTimestamp`]).
    pub max_future_skew_ms: i64,
    /// Bytes the request's decoded series and labels may take in memory: past it the request is
    /// refused whole ([`RequestError::TooLargeInMemory`]).
    pub max_decoded_bytes: usize,
}

/// Bytes one decoded series takes besides its labels, against
/// [`IngestPolicy::max_decoded_bytes`]: its [`protocol::SeriesRef`] and what pass 1 keeps for it.
pub const SERIES_BYTES: usize = size_of::<protocol::SeriesRef<'static>>() + size_of::<Verdict>();

/// Why a request was refused whole, before anything was applied or counted.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum RequestError {
    /// A series' labels do not decode (not UTF-8, a malformed `Label`).
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// The decoded labels would take the request's structures past
    /// [`IngestPolicy::max_decoded_bytes`].
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
}

/// Why some samples of one series were refused with an error (the rest of the request is
/// applied): a [`RejectReason`], or an invalid custom-buckets native histogram with what is wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Refused for this reason (a label error, a limit, a timestamp).
    #[error("{0}")]
    Reason(RejectReason),
    /// A custom-buckets native histogram sample is inconsistent: that sample is rejected.
    #[error("invalid native histogram: {0}")]
    Histogram(HistogramError),
}

impl From<RejectReason> for Refusal {
    fn from(reason: RejectReason) -> Refusal {
        Refusal::Reason(reason)
    }
}

/// What the receiver wrote of one request: the values of the RW 2.0 `*-Written` response headers.
///
/// A sample or histogram sample counts as written when the receiver accepted it: applied to
/// series state, an idempotent duplicate of one already applied, or read by no rule (a series
/// such as `vllm:num_requests_running` is accepted and dropped by design, not an error). Native
/// histograms of schemas other than custom buckets are accepted and counted the same way.
/// Exemplars are never stored, so none is ever written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Written {
    /// Float samples written.
    pub samples: u64,
    /// Native histogram samples written.
    pub histograms: u64,
    /// Exemplars written: always 0 (vllm-corrector stores no exemplars).
    pub exemplars: u64,
}

/// What [`Engine::apply`] did with one request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// Sample accounting: every sample of the request, applied or rejected with a reason.
    pub report: IngestReport,
    /// What was written (RW 2.0 response headers).
    pub written: Written,
    /// Series the series index held (whose labels were neither decoded nor checked).
    pub known_series: usize,
    /// Series with at least one refused sample.
    pub refused_series: usize,
    /// The first of them: its position in the request and why.
    pub first_refused: Option<(usize, Refusal)>,
    /// Metadata entries the cache did not keep (`too_long`), beside those the decoder dropped
    /// ([`WriteRequestRef::metadata_dropped`]); the samples are applied all the same.
    pub metadata_dropped: protocol::MetadataDropped,
}

impl Outcome {
    pub(super) fn refuse(&mut self, index: usize, refusal: Refusal) {
        self.refused_series += 1;
        self.first_refused.get_or_insert((index, refusal));
    }
}
