//! Ingest: one decoded remote-write request (RW 1.0 or 2.0) into the engine, with every sample
//! accounted (docs/ENGINE.md, invariant 3: received = applied + Σ rejected by reason).
//!
//! Two steps, so the engine lock is held only for the second:
//! 1. [`prepare`] (no lock; for RW 1.0, [`known_series`] under the lock first, then
//!    [`prepare_known`], which the caller may run in the same hold when [`every_series_known`]): per-series label limits (`limits.*`), then label normalisation
//!    ([`protocol::SeriesRef::normalize`]); an invalid series is counted and dropped.
//! 2. [`Prepared::apply`] (under the lock): samples stamped too far in the future are rejected
//!    (`limits.max_future_skew`); float samples go to [`Engine::ingest`]; native
//!    histograms with custom buckets go in as the classic `_bucket{le}`/`_sum`/`_count` series they
//!    stand for ([`histogram::for_each_classic_series`]), so they feed the rules exactly as a
//!    classic histogram would; other schemas are counted and not used; metadata is cached.
//!
//! The result, [`Outcome`], also says what was *written* for the RW 2.0 response headers
//! (`X-Prometheus-Remote-Write-{Samples,Histograms,Exemplars}-Written`, RW 2.0 specification,
//! "Required Written Response Headers").

use std::fmt::Write as _;

use crate::config::Limits;
use engine::{Engine, IngestReport, KnownSeries, RejectReason};
use protocol::histogram::{self, HistogramError, NativeHistogram};
use protocol::labels::LabelLimits;
use protocol::{
    Label, LabelError, LabelScratch, NameMemo, ProtocolError, Sample, SeriesRef, WriteRequestRef,
};

/// The longest label text quoted in a 400 answer.
const MAX_QUOTED_LABELS: usize = 512;

/// What the receiver wrote of one request: the values of the RW 2.0 `*-Written` headers.
///
/// A sample or histogram sample counts as written when the receiver accepted it: applied to
/// series state, an idempotent duplicate of one already applied, or read by no rule (a series
/// such as `vllm:num_requests_running` is accepted and dropped by design, not an error). Native
/// histograms of schemas other than custom buckets are accepted and counted the same way.
/// Exemplars are never stored, so none is ever written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Written {
    /// Float samples written.
    pub samples: u64,
    /// Native histogram samples written.
    pub(crate) histograms: u64,
    /// Exemplars written: always 0 (vllm-corrector stores no exemplars).
    pub(crate) exemplars: u64,
}

/// Why some of a series was refused with an error (a 400 answer; the rest of the request is still
/// applied, as the docs/REMOTE-WRITE.md' checklist item 1 asks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SeriesRejection {
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
}

/// The first series of a request that was refused, as quoted in the 400 answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedSeries {
    /// Zero-based position of the series in the request.
    pub(crate) index: usize,
    /// Its labels as `{name="value", …}`, shortened past 512 bytes.
    pub labels: String,
    /// Why.
    pub(crate) reason: SeriesRejection,
}

/// Everything one request did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// Sample accounting of the request (record it in the self-metrics).
    pub report: IngestReport,
    /// What was written (RW 2.0 response headers).
    pub(crate) written: Written,
    /// Series in the request.
    pub(crate) series: usize,
    /// Series with at least one [`SeriesRejection`].
    pub(crate) rejected_series: usize,
    /// The first of them.
    pub first_rejected: Option<RejectedSeries>,
}

impl Outcome {
    fn reject_series(&mut self, index: usize, labels: &[Label<'_>], reason: SeriesRejection) {
        self.rejected_series += 1;
        self.first_rejected.get_or_insert_with(|| RejectedSeries {
            index,
            labels: quote_labels(labels),
            reason,
        });
    }

    /// [`Outcome::reject_series`] for a series whose labels may still be pending (a known series):
    /// they are decoded and normalised only when this is the first rejected series, so the quote
    /// is the one the full path gives.
    fn reject_known_series(
        &mut self,
        index: usize,
        series: &mut SeriesRef<'_>,
        limits: &LabelLimits,
        reason: SeriesRejection,
    ) {
        if self.first_rejected.is_none() {
            // Known labels passed these steps before, from the same bytes: they cannot fail here.
            let _ = resolve_labels(series, &mut LabelScratch::default(), limits);
        }
        self.reject_series(index, &series.labels, reason);
    }
}

/// A request whose series passed [`prepare`], ready for [`Prepared::apply`].
#[derive(Debug)]
pub struct Prepared<'a> {
    request: WriteRequestRef<'a>,
    /// Position in the request of each kept series.
    positions: Vec<usize>,
    /// By position in the request: what the engine decided for the series before, when it is
    /// known (its labels are then still pending); may be empty.
    known: Vec<Option<KnownSeries>>,
    label_limits: LabelLimits,
    max_future_skew_ms: i64,
    outcome: Outcome,
}

/// The known-series fast path, step 0 (under the engine lock, briefly): for each series of
/// `request` (from [`protocol::v1::decode_deferred`]) that has a key and only float samples,
/// what the engine decided for the same label bytes before, if it remembers
/// ([`Engine::known_series`]). Forgets every known series first when `limits.labels` changed.
/// `now_ms`: receive time (ms). The result goes to [`prepare_known`].
pub fn known_series(
    engine: &mut Engine,
    request: &WriteRequestRef<'_>,
    limits: &Limits,
    now_ms: i64,
) -> Vec<Option<KnownSeries>> {
    engine.use_label_limits(limits.labels);
    request
        .series
        .iter()
        .map(|s| match s.key {
            Some(key) if s.histograms.is_empty() && s.pending_labels.is_some() => {
                engine.known_series(key, now_ms)
            }
            _ => None,
        })
        .collect()
}

/// Whether [`known_series`] found every series of `request` (`known`, by position): then
/// [`prepare_known`] decodes, checks and drops nothing, cannot fail, and leaves every series' sample
/// count as [`protocol::v1::decode_deferred`] read it. True for a request with no series.
pub fn every_series_known(request: &WriteRequestRef<'_>, known: &[Option<KnownSeries>]) -> bool {
    known.len() == request.series.len() && known.iter().all(Option::is_some)
}

/// Decodes (if pending), checks and normalises one series' labels: what [`prepare`] does to a
/// series.
fn resolve_labels<'a>(
    series: &mut SeriesRef<'a>,
    scratch: &mut LabelScratch,
    limits: &LabelLimits,
) -> Result<Result<(), LabelError>, ProtocolError> {
    protocol::v1::decode_pending_labels(series, scratch)?;
    Ok(limits
        .check(&series.labels)
        .and_then(|()| series.normalize()))
}

/// Step 1, outside the engine lock: checks each series against the label limits of `limits`,
/// normalises its labels, and counts and drops the series that fail (every sample of a dropped
/// series is rejected with the [`LabelError`]'s reason; its histograms count as in
/// [`protocol::SeriesRef::sample_count`]).
///
/// For a request from [`protocol::v1::decode`] or [`protocol::v2::decode`]; one from
/// [`protocol::v1::decode_deferred`] goes to [`prepare_known`] (here, labels that fail to
/// decode would be left empty and rejected as `empty_label_set`).
pub fn prepare<'a>(request: WriteRequestRef<'a>, limits: &Limits) -> Prepared<'a> {
    let mut scratch = LabelScratch::default();
    let mut request = request;
    for series in &mut request.series {
        if protocol::v1::decode_pending_labels(series, &mut scratch).is_err() {
            series.pending_labels = None;
        }
    }
    let label_limits = limits.labels;
    let max_future_skew_ms = limits.max_future_skew_ms;
    // No label is pending any more, so this cannot fail; an empty request if it did.
    prepare_known(request, Vec::new(), limits).unwrap_or_else(|_| Prepared {
        request: WriteRequestRef::default(),
        positions: Vec::new(),
        known: Vec::new(),
        label_limits,
        max_future_skew_ms,
        outcome: Outcome::default(),
    })
}

/// [`prepare`] for a request from [`protocol::v1::decode_deferred`], with what
/// [`known_series`] found: a known series keeps its labels pending and skips every label step
/// (its bytes passed them before); every other series has its labels decoded, checked and
/// normalised as [`prepare`] does.
///
/// # Errors
/// The [`ProtocolError`] of the first series, in wire order, whose labels do not decode (not UTF-8,
/// a malformed `Label`): the request is refused whole, as [`protocol::v1::decode`] refuses it.
pub fn prepare_known<'a>(
    mut request: WriteRequestRef<'a>,
    known: Vec<Option<KnownSeries>>,
    limits: &Limits,
) -> Result<Prepared<'a>, ProtocolError> {
    let mut outcome = Outcome {
        series: request.series.len(),
        ..Outcome::default()
    };
    // Every series known, as in steady state: nothing to decode, check or drop (the loop below
    // cost ~50 instructions per series for the bookkeeping alone).
    if every_series_known(&request, &known) {
        return Ok(Prepared {
            positions: (0..request.series.len()).collect(),
            request,
            known,
            label_limits: limits.labels,
            max_future_skew_ms: limits.max_future_skew_ms,
            outcome,
        });
    }
    let mut positions = Vec::with_capacity(request.series.len());
    let mut index = 0;
    let mut memo = NameMemo::default();
    let mut scratch = LabelScratch::default();
    let mut failed = None;
    request.series.retain_mut(|series| {
        let position = index;
        index += 1;
        if failed.is_some() {
            return false;
        }
        let hit = known.get(position).copied().flatten();
        if hit.is_some() {
            positions.push(position);
            return true;
        }
        if let Err(e) = protocol::v1::decode_pending_labels(series, &mut scratch) {
            failed = Some(e);
            return false;
        }
        let checked = limits
            .labels
            .check(&series.labels)
            .and_then(|()| series.normalize_memo(&mut memo));
        match checked {
            Ok(()) => {
                positions.push(position);
                true
            }
            Err(error) => {
                outcome
                    .report
                    .reject(RejectReason::Label(error), series.sample_count());
                outcome.reject_series(position, &series.labels, error.into());
                false
            }
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    Ok(Prepared {
        request,
        positions,
        known,
        label_limits: limits.labels,
        max_future_skew_ms: limits.max_future_skew_ms,
        outcome,
    })
}

/// Every sample of `request` rejected for `reason` (a request refused whole after decoding, such
/// as `limits.max_series_per_request`).
pub(crate) fn reject_request(request: &WriteRequestRef<'_>, reason: RejectReason) -> IngestReport {
    let mut report = IngestReport::default();
    for series in &request.series {
        report.reject(reason, series.sample_count());
    }
    report
}

/// Samples of `report` the receiver accepted (see [`Written`]).
fn accepted(report: &IngestReport) -> u64 {
    report.applied
        + report.rejected[RejectReason::UnusedSeries.index()]
        + report.rejected[RejectReason::DuplicateSample.index()]
}

impl Prepared<'_> {
    /// Every sample of the request: those of the kept series ([`protocol::SeriesRef::sample_count`])
    /// and those already counted as rejected.
    pub(crate) fn sample_count(&self) -> u64 {
        self.outcome.report.received
            + self
                .request
                .series
                .iter()
                .map(|s| s.sample_count())
                .sum::<u64>()
    }

    /// Step 2, under the engine lock: applies every kept series at receive time `now_ms` (ms since
    /// the epoch, for the idle timeout) and caches the metadata (RW 1.0 entries, RW 2.0 per-series
    /// metadata). Metadata never fails a request.
    pub fn apply(mut self, engine: &mut Engine, now_ms: i64) -> Outcome {
        let outcome = &mut self.outcome;
        let latest = now_ms.saturating_add(self.max_future_skew_ms);
        let limits = self.label_limits;
        engine.use_label_limits(limits);
        let mut in_time: Vec<Sample> = Vec::new();
        let mut scratch = LabelScratch::default();
        for (series, &position) in self.request.series.iter_mut().zip(&self.positions) {
            let known = self.known.get(position).copied().flatten();
            if known.is_some() {
                apply_known(
                    engine,
                    series,
                    position,
                    known,
                    (latest, now_ms),
                    &limits,
                    &mut scratch,
                    &mut in_time,
                    outcome,
                );
                continue;
            }
            let series = &*series;
            let mut report = IngestReport::default();
            let mut refused = None;
            let mut samples = series.samples.as_slice();
            if samples.iter().any(|s| s.timestamp_ms > latest) {
                in_time.clear();
                in_time.extend(samples.iter().filter(|s| s.timestamp_ms <= latest));
                let future = (samples.len() - in_time.len()) as u64;
                report.reject(RejectReason::FutureTimestamp, future);
                refused = Some(SeriesRejection::FutureTimestamp);
                samples = &in_time;
            }
            if !samples.is_empty() {
                let mut floats = IngestReport::default();
                let key = series.key.map(|k| (k, limits));
                engine.ingest_keyed(key, &series.labels, samples, now_ms, &mut floats);
                outcome.written.samples += accepted(&floats);
                report.merge(&floats);
            }
            for h in &series.histograms {
                if let NativeHistogram::CustomBuckets(c) = h
                    && c.timestamp_ms > latest
                {
                    report.reject(RejectReason::FutureTimestamp, h.sample_count());
                    refused = refused.or(Some(SeriesRejection::FutureTimestamp));
                    continue;
                }
                match apply_histogram(engine, series, h, now_ms, &mut report) {
                    Ok(true) => outcome.written.histograms += 1,
                    Ok(false) => {}
                    Err(reason) => refused = refused.or(Some(reason)),
                }
            }
            if report.rejected[RejectReason::ActiveSeriesLimit.index()] > 0 {
                refused = refused.or(Some(SeriesRejection::ActiveSeriesLimit));
            }
            if let Some(reason) = refused {
                outcome.reject_series(position, &series.labels, reason);
            }
            outcome.report.merge(&report);
            if let Some(metadata) = series.family_metadata() {
                engine.record_metadata(&metadata);
            }
        }
        for metadata in &self.request.metadata {
            engine.record_metadata(metadata);
        }
        self.outcome
    }
}

/// [`Prepared::apply`] for one known series (float samples only, labels pending): its samples go
/// to [`Engine::ingest_known`]; if its group left since the lookup, its labels are decoded, checked
/// and normalised, and it takes the full path ([`Engine::ingest_keyed`]). The accounting is the
/// full path's.
#[allow(clippy::too_many_arguments)]
fn apply_known<'a>(
    engine: &mut Engine,
    series: &mut SeriesRef<'a>,
    position: usize,
    known: Option<KnownSeries>,
    (latest, now_ms): (i64, i64),
    limits: &LabelLimits,
    scratch: &mut LabelScratch,
    in_time: &mut Vec<Sample>,
    outcome: &mut Outcome,
) {
    // The common case, counted straight into the request's report: every sample in time, the
    // group still there. (Counting into a per-series report and merging it twice, as below, cost
    // ~50 instructions per sample.) `ingest_known` changes nothing when it returns false.
    if let Some(k) = known
        && !series.samples.is_empty()
        && series.samples.iter().all(|s| s.timestamp_ms <= latest)
    {
        let limited = RejectReason::ActiveSeriesLimit.index();
        let (accepted_before, limited_before) =
            (accepted(&outcome.report), outcome.report.rejected[limited]);
        if engine.ingest_known(k, &series.samples, now_ms, &mut outcome.report) {
            outcome.written.samples += accepted(&outcome.report) - accepted_before;
            if outcome.report.rejected[limited] > limited_before {
                let reason = SeriesRejection::ActiveSeriesLimit;
                outcome.reject_known_series(position, series, limits, reason);
            }
            return;
        }
    }
    let mut report = IngestReport::default();
    let mut refused = None;
    // Taken out for the call (put back below), so that the labels can be resolved meanwhile.
    let all = std::mem::take(&mut series.samples);
    let mut samples = all.as_slice();
    if samples.iter().any(|s| s.timestamp_ms > latest) {
        in_time.clear();
        in_time.extend(samples.iter().filter(|s| s.timestamp_ms <= latest));
        let future = (samples.len() - in_time.len()) as u64;
        report.reject(RejectReason::FutureTimestamp, future);
        refused = Some(SeriesRejection::FutureTimestamp);
        samples = in_time;
    }
    let count = all.len() as u64;
    if !samples.is_empty() {
        let mut floats = IngestReport::default();
        let done = known.is_some_and(|k| engine.ingest_known(k, samples, now_ms, &mut floats));
        if !done {
            match resolve_labels(series, scratch, limits) {
                Ok(Ok(())) => {
                    let key = series.key.map(|k| (k, *limits));
                    engine.ingest_keyed(key, &series.labels, samples, now_ms, &mut floats);
                }
                // Unreachable for bytes that passed before; counted as the full path would.
                Ok(Err(error)) => {
                    outcome.report.reject(RejectReason::Label(error), count);
                    outcome.reject_series(position, &series.labels, error.into());
                    return;
                }
                Err(_) => {
                    let error = LabelError::EmptyLabelSet;
                    outcome.report.reject(RejectReason::Label(error), count);
                    outcome.reject_series(position, &[], error.into());
                    return;
                }
            }
        }
        outcome.written.samples += accepted(&floats);
        report.merge(&floats);
    }
    series.samples = all;
    if report.rejected[RejectReason::ActiveSeriesLimit.index()] > 0 {
        refused = refused.or(Some(SeriesRejection::ActiveSeriesLimit));
    }
    if let Some(reason) = refused {
        outcome.reject_known_series(position, series, limits, reason);
    }
    outcome.report.merge(&report);
}

/// Applies one native histogram sample; `Ok(true)` when it was written in full.
fn apply_histogram(
    engine: &mut Engine,
    series: &SeriesRef<'_>,
    histogram: &NativeHistogram,
    now_ms: i64,
    report: &mut IngestReport,
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
                &series.labels,
                std::slice::from_ref(h),
                |labels, samples| engine.ingest(labels, samples, now_ms, &mut classic),
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

/// `{name="value", …}` with values escaped, cut at [`MAX_QUOTED_LABELS`] bytes.
pub(crate) fn quote_labels(labels: &[Label<'_>]) -> String {
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
#[path = "ingest_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "ingest_known_tests.rs"]
mod known_tests;
