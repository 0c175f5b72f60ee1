//! The shape both decoders produce: a request of series, each with its labels, samples,
//! histograms and metadata, borrowing its strings from the decompressed body.

use crate::histogram::NativeHistogram;
use crate::key::SeriesKey;
use crate::labels::{self, LabelError, LabelSet, NameMemo};
use crate::sample::Samples;

/// One `TimeSeries` of a decoded request (RW 1.0 or 2.0), borrowing its label strings from the
/// decompressed body.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SeriesRef<'a> {
    /// Labels as sent (not yet sorted or validated: see [`SeriesRef::normalize`]). Empty when
    /// `labels_error` is set.
    pub labels: LabelSet<'a>,
    /// Float samples, in the order sent.
    pub samples: Samples,
    /// Native histogram samples, in the order sent (RW1 field 4, RW2 field 3): custom buckets
    /// (schema −53) decoded for conversion to classic series, other schemas only recognised.
    pub histograms: Vec<NativeHistogram>,
    /// Number of exemplars in this series (RW1 field 3, RW2 field 4). Counted, not used.
    pub(crate) exemplars: u32,
    /// RW 2.0 only: the metadata sent with this series (`TimeSeries.metadata`, field 5), when
    /// present and its `help_ref`/`unit_ref` are in range (metadata never fails a request).
    pub metadata: Option<SeriesMetadata<'a>>,
    /// RW 2.0 only: the counter's start (created) time, ms since the epoch, from either wire form
    /// — `TimeSeries.created_timestamp` (field 6, senders up to Prometheus 3.7) or
    /// `Sample.start_timestamp` (field 3, Prometheus ≥ 3.8); the last non-zero one in wire order
    /// wins (a sample's over the series' own).
    pub(crate) start_timestamp_ms: Option<i64>,
    /// RW 2.0 only: the series' `labels_refs` were invalid (odd length, or a reference outside
    /// `symbols`), so `labels` is empty; the whole series is rejected with this reason.
    pub(crate) labels_error: Option<LabelError>,
    /// RW 1.0 via [`v1::decode_deferred`] only: the identity of the series' encoded label bytes
    /// ([`SeriesKey`]), when every label field of the `TimeSeries` comes before its other fields
    /// (as every sender encodes it). `None` otherwise, and always for RW 2.0.
    pub key: Option<SeriesKey>,
    /// RW 1.0 via [`v1::decode_deferred`] only: the whole `TimeSeries` message while its labels are
    /// not decoded yet (`labels` is then empty); [`crate::v1::decode_pending_labels`] decodes them.
    pub pending_labels: Option<&'a [u8]>,
    /// RW 1.0 via [`v1::decode_deferred`] only: the series ends in one canonical `Sample` field
    /// and was not walked, so `key` covers every byte before that field, and `samples` holds that
    /// one sample. A hit among the keys of label runs walked before is exact (the same bytes are
    /// that run); [`crate::v1::decode_pending_labels`] walks the series and replaces `key`,
    /// `samples`, `histograms` and `exemplars` with what the walk finds.
    pub(crate) provisional_key: bool,
}

impl<'a> SeriesRef<'a> {
    /// Normalises the labels ([`normalize_labels`](crate::labels::normalize_labels)) unless the decoder already found them invalid.
    ///
    /// # Errors
    /// `labels_error` when set ([`LabelError::OddLabelRefs`], [`LabelError::SymbolRefOutOfRange`]),
    /// otherwise the error of [`normalize_labels`](crate::labels::normalize_labels).
    pub fn normalize(&mut self) -> Result<(), LabelError> {
        self.normalize_memo(&mut NameMemo::default())
    }

    /// [`SeriesRef::normalize`] with a per-request [`NameMemo`]
    /// ([`labels::normalize_labels_memo`]): the same result, fewer character checks.
    ///
    /// # Errors
    /// As [`SeriesRef::normalize`].
    pub fn normalize_memo(&mut self, memo: &mut NameMemo<'a>) -> Result<(), LabelError> {
        match self.labels_error {
            Some(error) => Err(error),
            None => {
                let (len, result) = labels::normalize_labels_memo(&mut self.labels, memo);
                self.labels.truncate(len);
                result
            }
        }
    }

    /// The number of samples this series counts for in the receiver's accounting (received =
    /// applied + Σ rejected): its float samples, plus [`NativeHistogram::sample_count`] of each
    /// native histogram sample (a custom-buckets histogram counts as the classic samples it
    /// stands for, so RW1 classic and RW2 native bodies of one scrape account alike).
    pub fn sample_count(&self) -> u64 {
        self.samples.len() as u64
            + self
                .histograms
                .iter()
                .map(NativeHistogram::sample_count)
                .sum::<u64>()
    }

    /// The RW 2.0 per-series metadata as a family-level [`MetadataRef`], for the metadata cache.
    ///
    /// The family name is the series' `__name__`, minus `_bucket`, `_sum` or `_count` for a
    /// histogram or gauge histogram and minus `_sum` or `_count` for a summary: the name the
    /// family's `# TYPE` line carries, and RW 1.0's `metric_family_name`. `None` without metadata,
    /// for metadata that says nothing (type unspecified, no help, no unit), or without a name.
    pub fn family_metadata(&self) -> Option<MetadataRef<'_>> {
        let m = self.metadata?;
        if m.metric_type == MetricType::Unknown && m.help.is_empty() && m.unit.is_empty() {
            return None;
        }
        let name = self
            .labels
            .iter()
            .find(|l| l.name == labels::METRIC_NAME_LABEL)?
            .value;
        let suffixes: &[&str] = match m.metric_type {
            MetricType::Histogram | MetricType::GaugeHistogram => &["_bucket", "_sum", "_count"],
            MetricType::Summary => &["_sum", "_count"],
            _ => &[],
        };
        let family_name = suffixes
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(name);
        Some(MetadataRef {
            metric_type: m.metric_type,
            family_name,
            help: m.help,
            unit: m.unit,
        })
    }
}

/// The metadata an RW 2.0 series carries (`io.prometheus.write.v2.Metadata`), with its symbol
/// references resolved.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeriesMetadata<'a> {
    /// The metric type (field 1; RW 2.0 `METRIC_TYPE_UNSPECIFIED` is [`MetricType::Unknown`]).
    pub metric_type: MetricType,
    /// Help text (`help_ref`, field 3).
    pub help: &'a str,
    /// Unit (`unit_ref`, field 4), often empty.
    pub unit: &'a str,
}

/// Metric type of a metadata entry. Source: `MetricMetadata.MetricType` in RW 1.0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetricType {
    /// 0: unknown.
    Unknown,
    /// 1: counter.
    Counter,
    /// 2: gauge.
    Gauge,
    /// 3: histogram.
    Histogram,
    /// 4: gauge histogram.
    GaugeHistogram,
    /// 5: summary.
    Summary,
    /// 6: info.
    Info,
    /// 7: state set.
    StateSet,
    /// Any other value on the wire: kept, never an error.
    Other(i32),
}

/// One `MetricMetadata` entry of a decoded request, borrowing from the decompressed body.
#[derive(Debug, Clone, PartialEq)]
pub struct MetadataRef<'a> {
    /// The metric type.
    pub metric_type: MetricType,
    /// The metric family name (without `_bucket`/`_total` suffixes as Prometheus sends it).
    pub family_name: &'a str,
    /// Help text.
    pub help: &'a str,
    /// Unit, often empty.
    pub unit: &'a str,
}

/// A decoded request — RW 1.0 `WriteRequest` or RW 2.0 `Request` — borrowing from the decompressed
/// body.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WriteRequestRef<'a> {
    /// The series, in wire order.
    pub series: Vec<SeriesRef<'a>>,
    /// The metadata entries, in wire order (RW 1.0 only; RW 2.0 sends metadata per series, see
    /// [`SeriesRef::metadata`]).
    pub metadata: Vec<MetadataRef<'a>>,
    /// Metadata entries the decoder dropped instead of failing the request (metadata never fails
    /// a request), by reason; the HTTP layer counts them in
    /// `vllm_corrector_metadata_dropped_total{reason}`.
    pub metadata_dropped: MetadataDropped,
}

/// Why a decoder dropped a metadata entry: the `reason` label of
/// `vllm_corrector_metadata_dropped_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetadataDropReason {
    /// RW 1.0: a `MetricMetadata` whose `metric_family_name`, `help` or `unit` is not UTF-8 (a
    /// protobuf `string` must be). RW 2.0 has no such case: a symbol that is not UTF-8 fails the
    /// whole request, since every label is a symbol too.
    InvalidUtf8,
    /// RW 2.0: a `Metadata` whose `help_ref` or `unit_ref` lies outside `symbols`. The series
    /// itself is kept.
    SymbolRefOutOfRange,
}

impl MetadataDropReason {
    /// Every reason, in label order (for pre-registering the self-metric at 0).
    pub const ALL: [MetadataDropReason; 2] = [
        MetadataDropReason::InvalidUtf8,
        MetadataDropReason::SymbolRefOutOfRange,
    ];

    /// The `reason` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            MetadataDropReason::InvalidUtf8 => "invalid_utf8",
            MetadataDropReason::SymbolRefOutOfRange => "symbol_ref_out_of_range",
        }
    }

    fn index(self) -> usize {
        match self {
            MetadataDropReason::InvalidUtf8 => 0,
            MetadataDropReason::SymbolRefOutOfRange => 1,
        }
    }
}

/// How many metadata entries one request lost, by [`MetadataDropReason`] (saturating counts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MetadataDropped {
    counts: [u32; MetadataDropReason::ALL.len()],
}

impl MetadataDropped {
    /// Counts one entry dropped for `reason`.
    pub fn add(&mut self, reason: MetadataDropReason) {
        let n = &mut self.counts[reason.index()];
        *n = n.saturating_add(1);
    }

    /// Entries dropped for `reason`.
    pub fn get(&self, reason: MetadataDropReason) -> u32 {
        self.counts[reason.index()]
    }

    /// Entries dropped, all reasons.
    pub fn total(&self) -> u32 {
        self.counts.iter().fold(0, |a, n| a.saturating_add(*n))
    }
}
