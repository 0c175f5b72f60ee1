//! The two passes of [`super::receive`] under the engine lock: [`look_up`] every series (decoding,
//! checking and normalising the labels of those the engine's index does not hold), then [`apply`]
//! every series, with the rejections and what was written.

use std::fmt::Write as _;

use super::{IngestError, Unaccounted, Written, cut_with_ellipsis};
use crate::config::Limits;
use engine::{Batch, IngestReport, KnownSeries, RejectReason};
use protocol::histogram::{self, HistogramError, NativeHistogram};
use protocol::labels::LabelLimits;
use protocol::{Label, LabelError, LabelScratch, NameMemo, Sample, SeriesKey, WriteRequestRef};

/// Bytes a decoded series takes besides its labels: its [`protocol::SeriesRef`] and its
/// [`Verdict`] ([`crate::config::memory_allowance`]).
pub(super) const SERIES_BYTES: usize =
    size_of::<protocol::SeriesRef<'static>>() + size_of::<Verdict>();

/// The longest label text quoted in a 400 answer.
pub(super) const MAX_QUOTED_LABELS: usize = 512;

/// Why some of a series was refused with an error (a 400 answer; the rest of the request is still
/// applied, as docs/REMOTE-WRITE.md's checklist item 1 asks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SeriesRejection {
    /// Invalid labels, label references or a label limit: the whole series is rejected.
    #[error(transparent)]
    Label(#[from] LabelError),
    /// A custom-buckets native histogram sample is inconsistent: that sample is rejected.
    #[error("invalid native histogram: {0}")]
    Histogram(#[from] HistogramError),
    /// Some samples are stamped later than receive time plus `limits.max_future_skew`: those
    /// samples are refused.
    #[error("sample timestamp beyond limits.max_future_skew past the receiver's clock")]
    FutureTimestamp,
    /// The engine holds `limits.max_active_series` series: this new series is refused.
    #[error(
        "limits.max_active_series reached: new series are refused until idle or stale groups leave"
    )]
    ActiveSeriesLimit,
    /// The engine's state share of `limits.max_memory_bytes` is spent: this new series is
    /// refused (`memory_budget`).
    #[error(
        "limits.max_memory_bytes: the engine's share of the memory budget is spent; new series are refused until idle or stale groups leave"
    )]
    MemoryBudget,
    /// One input of the series' group already has `engine::MAX_SERIES_PER_INPUT` series (a
    /// histogram that many buckets): this new bucket is refused.
    #[error(
        "a histogram with more than 1024 buckets (engine::MAX_SERIES_PER_INPUT) in one group: further buckets are refused"
    )]
    TooManyBuckets,
    /// Some samples are stamped 0 or earlier (ms since the Unix epoch): those samples are refused.
    #[error("sample timestamp 0 or negative: timestamps are milliseconds since the Unix epoch")]
    NonPositiveTimestamp,
}

/// What [`look_up`] decided for one series.
#[derive(Debug, Clone, Copy)]
pub(super) enum Verdict {
    /// The engine's index holds it: its labels stay as they came (pending for RW 1.0).
    Known(KnownSeries),
    /// The index does not hold it: its labels are decoded, checked and normalised.
    New,
    /// Its labels were refused: every sample of it is rejected with this reason.
    Refused(LabelError),
}

/// Pass 1: what the engine knows of each series of `request`, by its key; the labels of every
/// other series decoded, checked against `limits` and normalised. Every group the request sends
/// to is held for the batch ([`Batch::lookup`], [`Batch::hold`]), so none is evicted under it. A series with native histograms
/// is never looked up: it needs its labels to name the classic series it stands for. `samples`
/// follows a series walked only now, which may hold more samples than its provisional reading.
///
/// # Errors
/// The [`ProtocolError`] of the first series, in wire order, whose labels do not decode (not
/// UTF-8, a malformed `Label`), or [`IngestError::TooLargeInMemory`] when the decoded labels take
/// the structures past `allowance` bytes: the request is refused whole, before anything is applied.
pub(super) fn look_up<'a>(
    batch: &mut Batch<'_>,
    request: &mut WriteRequestRef<'a>,
    limits: &Limits,
    allowance: usize,
    samples: &mut Unaccounted<'_>,
) -> Result<Vec<Verdict>, IngestError> {
    let mut verdicts: Vec<Verdict> = request
        .series
        .iter()
        .map(|series| match series.labels.key() {
            Some(key) if series.histograms.is_empty() => {
                batch.lookup(key).map_or(Verdict::New, Verdict::Known)
            }
            _ => Verdict::New,
        })
        .collect();
    let (mut memo, mut scratch) = (NameMemo::default(), LabelScratch::default());
    for (i, verdict) in verdicts.iter_mut().enumerate() {
        if !matches!(verdict, Verdict::New) {
            continue;
        }
        let before = request.series[i].sample_count();
        request.resolve(i, &mut scratch)?;
        samples.recount(before, request.series[i].sample_count());
        let bytes = request.series.len() * SERIES_BYTES
            + request.labels.capacity() * size_of::<protocol::Label<'static>>();
        if bytes > allowance {
            let series = request.series.len();
            return Err(IngestError::TooLargeInMemory {
                series,
                bytes: allowance,
            });
        }
        match request.check_labels(i, &limits.labels, &mut memo) {
            Ok(()) => batch.hold(request.labels_of(&request.series[i])),
            Err(error) => *verdict = Verdict::Refused(error),
        }
    }
    Ok(verdicts)
}

/// Everything pass 2 did: the accounting, what was written, and the refused series.
#[derive(Debug, Default)]
pub(super) struct Outcome {
    /// Sample accounting of the request.
    pub(super) report: IngestReport,
    /// What was written (RW 2.0 response headers).
    pub(super) written: Written,
    /// Series in the request.
    series: usize,
    /// Series with at least one [`SeriesRejection`].
    rejected_series: usize,
    /// The first of them: position, quoted labels, reason.
    first_rejected: Option<(usize, String, SeriesRejection)>,
}

impl Outcome {
    /// [`IngestError::InvalidSeries`] naming the first refused series, if any was.
    pub(super) fn error(&self) -> Result<(), IngestError> {
        match &self.first_rejected {
            None => Ok(()),
            Some((index, labels, reason)) => Err(IngestError::InvalidSeries {
                invalid: self.rejected_series,
                total: self.series,
                index: *index,
                labels: labels.clone(),
                reason: *reason,
            }),
        }
    }

    /// Counts a refused series, and quotes it when it is the first ([`quote_series`]).
    fn reject_series(
        &mut self,
        (request, index, verdict): (&WriteRequestRef<'_>, usize, Verdict),
        limits: &LabelLimits,
        reason: SeriesRejection,
    ) {
        self.rejected_series += 1;
        self.first_rejected
            .get_or_insert_with(|| (index, quote_series(request, index, verdict, limits), reason));
    }
}

/// Samples of `report` the receiver accepted (see [`Written`]).
fn accepted(report: &IngestReport) -> u64 {
    report.applied
        + report.rejected[RejectReason::UnusedSeries.index()]
        + report.rejected[RejectReason::DuplicateSample.index()]
}

/// Pass 2: applies every series of `request` by its [`Verdict`] at receive time `now_ms` (ms
/// since the epoch): samples stamped later than `now_ms` plus `limits.max_future_skew` are
/// refused, the others go to the engine (float samples; custom-bucket native histograms as the
/// classic series they stand for, [`histogram::for_each_classic_series`]; other schemas counted,
/// not used); metadata (RW 1.0 entries, RW 2.0 per-series metadata) is cached and never fails a
/// request. Every sample is counted in the outcome's report.
pub(super) fn apply(
    batch: &mut Batch<'_>,
    request: &WriteRequestRef<'_>,
    verdicts: &[Verdict],
    limits: &Limits,
    now_ms: i64,
) -> Outcome {
    let mut outcome = Outcome {
        series: request.series.len(),
        ..Outcome::default()
    };
    let latest = now_ms.saturating_add(limits.max_future_skew_ms);
    let limited = RejectReason::ActiveSeriesLimit.index();
    let over_budget = RejectReason::MemoryBudget.index();
    let buckets = RejectReason::TooManyBuckets.index();
    let mut in_time: Vec<Sample> = Vec::new();
    let mut scratch = Vec::new();
    // Samples the classic series of native histograms had accepted, which are not float samples
    // written (`Written::samples` is the accepted samples less these).
    let mut classic_accepted = 0;
    for (position, (series, &verdict)) in request.series.iter().zip(verdicts).enumerate() {
        if let Verdict::Refused(error) = verdict {
            let report = &mut outcome.report;
            report.reject(RejectReason::Label(error), series.sample_count());
            let reason = error.into();
            outcome.reject_series((request, position, verdict), &limits.labels, reason);
            continue;
        }
        let mut refused = None;
        let mut samples = series.samples.as_slice();
        if samples
            .iter()
            .any(|s| s.timestamp_ms > latest || s.timestamp_ms <= 0)
        {
            in_time.clear();
            in_time.extend(
                samples
                    .iter()
                    .filter(|s| s.timestamp_ms > 0 && s.timestamp_ms <= latest),
            );
            let future = samples.iter().filter(|s| s.timestamp_ms > latest).count() as u64;
            let early = (samples.len() - in_time.len()) as u64 - future;
            if future > 0 {
                outcome.report.reject(RejectReason::FutureTimestamp, future);
                refused = Some(SeriesRejection::FutureTimestamp);
            }
            if early > 0 {
                outcome
                    .report
                    .reject(RejectReason::NonPositiveTimestamp, early);
                refused = refused.or(Some(SeriesRejection::NonPositiveTimestamp));
            }
            samples = &in_time;
        }
        if let Verdict::Known(known) = verdict {
            // Float samples only (a series with histograms is never looked up), and a place in
            // its group already, so the series limit cannot refuse it.
            if !samples.is_empty() {
                batch.apply_known(known, samples, &mut outcome.report);
            }
        } else {
            let limited_before = outcome.report.rejected[limited];
            let over_budget_before = outcome.report.rejected[over_budget];
            let buckets_before = outcome.report.rejected[buckets];
            if !samples.is_empty() {
                let (key, labels) = (series.labels.key(), request.labels_of(series));
                batch.apply(key, labels, samples, &mut outcome.report);
            }
            for h in &series.histograms {
                if let NativeHistogram::CustomBuckets(c) = h
                    && c.timestamp_ms > latest
                {
                    let report = &mut outcome.report;
                    report.reject(RejectReason::FutureTimestamp, h.sample_count());
                    refused = refused.or(Some(SeriesRejection::FutureTimestamp));
                    continue;
                }
                if let NativeHistogram::CustomBuckets(c) = h
                    && c.timestamp_ms <= 0
                {
                    let report = &mut outcome.report;
                    report.reject(RejectReason::NonPositiveTimestamp, h.sample_count());
                    refused = refused.or(Some(SeriesRejection::NonPositiveTimestamp));
                    continue;
                }
                let labels = request.labels_of(series);
                let mut classic = IngestReport::default();
                let applied = apply_histogram(batch, labels, h, &mut classic, &mut scratch);
                classic_accepted += accepted(&classic);
                outcome.report.merge(&classic);
                match applied {
                    Ok(true) => outcome.written.histograms += 1,
                    Ok(false) => {}
                    Err(reason) => refused = refused.or(Some(reason)),
                }
            }
            if outcome.report.rejected[limited] > limited_before {
                refused = refused.or(Some(SeriesRejection::ActiveSeriesLimit));
            }
            if outcome.report.rejected[over_budget] > over_budget_before {
                refused = refused.or(Some(SeriesRejection::MemoryBudget));
            }
            if outcome.report.rejected[buckets] > buckets_before {
                refused = refused.or(Some(SeriesRejection::TooManyBuckets));
            }
        }
        if let Some(reason) = refused {
            outcome.reject_series((request, position, verdict), &limits.labels, reason);
        }
        if series.metadata.is_some()
            && let Some(metadata) = request.family_metadata(series)
        {
            batch.record_metadata(&metadata);
        }
    }
    outcome.written.samples = accepted(&outcome.report) - classic_accepted;
    for metadata in &request.metadata {
        batch.record_metadata(metadata);
    }
    outcome
}

/// Applies one native histogram sample of a series with `labels` (decoded and normalised),
/// counting its samples in `report`; `Ok(true)` when it was written in full.
fn apply_histogram(
    batch: &mut Batch<'_>,
    labels: &[Label<'_>],
    histogram: &NativeHistogram,
    report: &mut IngestReport,
    scratch: &mut Vec<u8>,
) -> Result<bool, SeriesRejection> {
    match histogram {
        NativeHistogram::OtherSchema { .. } => {
            report.reject(RejectReason::NativeHistogram, 1);
            Ok(true)
        }
        NativeHistogram::Invalid(e) => {
            report.reject(RejectReason::InvalidNativeHistogram, 1);
            Err((*e).into())
        }
        NativeHistogram::CustomBuckets(h) => {
            let mut classic = IngestReport::default();
            let converted = histogram::for_each_classic_series(
                labels,
                std::slice::from_ref(h),
                |labels, samples| {
                    let key = SeriesKey::of_labels(labels, scratch);
                    batch.apply(Some(key), labels, samples, &mut classic);
                },
            );
            report.merge(&classic);
            match converted {
                Ok(()) => Ok(accepted(&classic) == classic.received),
                Err(e) => {
                    report.reject(
                        RejectReason::InvalidNativeHistogram,
                        histogram.sample_count(),
                    );
                    Err(e.into())
                }
            }
        }
    }
}

/// The labels of series `index` of `request`, refused, quoted as [`look_up`] left them. A known
/// series' labels were neither decoded nor normalised there, so they are here, in a copy of the
/// request (they passed both before, from the same bytes, under the same `limits`): its quote is
/// the one it got as a new series.
fn quote_series(
    request: &WriteRequestRef<'_>,
    index: usize,
    verdict: Verdict,
    limits: &LabelLimits,
) -> String {
    if !matches!(verdict, Verdict::Known(_)) {
        return quote_labels(request.labels_of(&request.series[index]));
    }
    let mut copy = WriteRequestRef {
        series: vec![request.series[index].clone()],
        ..WriteRequestRef::default()
    };
    if copy.resolve(0, &mut LabelScratch::default()).is_ok() {
        let _ = copy.check_labels(0, limits, &mut NameMemo::default());
    }
    quote_labels(copy.labels_of(&copy.series[0]))
}

/// `{name="value", …}` with values escaped, cut at [`MAX_QUOTED_LABELS`] bytes.
pub(super) fn quote_labels(labels: &[Label<'_>]) -> String {
    let mut out = String::from("{");
    for (i, label) in labels.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{}={:?}", label.name, label.value);
        if cut_with_ellipsis(&mut out, MAX_QUOTED_LABELS) {
            break;
        }
    }
    out.push('}');
    out
}
