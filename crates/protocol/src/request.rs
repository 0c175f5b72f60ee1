//! The shape both decoders produce: a request of series, each with its labels, samples,
//! histograms and metadata, borrowing its strings from the decompressed body.

use crate::ProtocolError;
use crate::histogram::NativeHistogram;
use crate::key::SeriesKey;
use crate::labels::{self, Label, LabelError, LabelLimits, NameMemo};
use crate::sample::Samples;

/// One `TimeSeries` of a decoded request (RW 1.0 or 2.0), borrowing from the decompressed body.
/// Nothing in it says which protocol it came in: RW 1.0 series start with their labels
/// [`SeriesLabels::Pending`], RW 2.0 series with [`SeriesLabels::Decoded`] or
/// [`SeriesLabels::Invalid`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SeriesRef<'a> {
    /// The series' labels, in one of three states (see [`SeriesLabels`]).
    pub labels: SeriesLabels<'a>,
    /// Float samples, in the order sent.
    pub samples: Samples,
    /// Native histogram samples, in the order sent (RW1 field 4, RW2 field 3): custom buckets
    /// (schema −53) decoded for conversion to classic series, other schemas only recognised.
    pub histograms: Vec<NativeHistogram>,
    /// Number of exemplars in this series (RW1 field 3, RW2 field 4). Counted, not used.
    pub(crate) exemplars: u32,
    /// The metadata sent with this series (RW 2.0 `TimeSeries.metadata`, field 5; RW 1.0 sends
    /// metadata per family instead, [`WriteRequestRef::metadata`]), when present and its
    /// `help_ref`/`unit_ref` are in range (metadata never fails a request).
    pub metadata: Option<SeriesMetadata<'a>>,
    /// The counter's start (created) time, ms since the epoch, when the sender gave one (RW 2.0
    /// only, in either wire form: `TimeSeries.created_timestamp`, field 6, senders up to
    /// Prometheus 3.7, or `Sample.start_timestamp`, field 3, Prometheus ≥ 3.8); the last non-zero
    /// one in wire order wins (a sample's over the series' own).
    pub(crate) start_timestamp_ms: Option<i64>,
}

/// The labels of one series, as far as they are decoded.
///
/// A receiver looks a series up by [`SeriesLabels::key`] first; only a series it does not know
/// needs [`WriteRequestRef::resolve`] (decoding) and [`WriteRequestRef::check_labels`] (limits and
/// normalisation).
#[derive(Debug, Clone, PartialEq)]
pub enum SeriesLabels<'a> {
    /// Not decoded yet (RW 1.0, [`crate::v1::decode`]): the bytes they are in, and the identity
    /// of those bytes when the label fields lead the message.
    Pending(PendingLabels<'a>),
    /// Decoded into the request's label arena ([`WriteRequestRef::labels_of`]), as sent until
    /// [`WriteRequestRef::check_labels`] sorts them, with their [`SeriesKey`]: the key of the
    /// encoded label bytes for RW 1.0, of the label text for RW 2.0 (whose encoding depends on
    /// each request's symbol table) and for an RW 1.0 series whose label fields do not lead.
    Decoded {
        /// Where the labels are in [`WriteRequestRef::labels`].
        range: LabelRange,
        /// Their identity, computed before any normalisation.
        key: SeriesKey,
    },
    /// RW 2.0: `labels_refs` is invalid (odd length, or a reference outside `symbols`); the whole
    /// series is rejected with this reason.
    Invalid(LabelError),
}

impl Default for SeriesLabels<'_> {
    /// Pending, over no bytes: resolving it gives an empty label set.
    fn default() -> Self {
        SeriesLabels::Pending(PendingLabels::default())
    }
}

/// Where one series' decoded labels are in its request's label arena ([`WriteRequestRef::labels`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LabelRange {
    start: u32,
    len: u32,
}

impl LabelRange {
    /// The range of the labels pushed onto `arena` since it held `start` labels.
    ///
    /// # Errors
    /// [`ProtocolError::Protobuf`] when the arena outgrows `u32` labels (a body of more than 4 GiB).
    pub(crate) fn since(start: usize, arena: &[Label<'_>]) -> Result<LabelRange, ProtocolError> {
        let too_many = || ProtocolError::Protobuf("more than 2^32 labels in one request".into());
        let end = u32::try_from(arena.len()).map_err(|_| too_many())?;
        let start = u32::try_from(start).map_err(|_| too_many())?;
        Ok(LabelRange {
            start,
            len: end - start,
        })
    }

    fn indices(self) -> std::ops::Range<usize> {
        self.start as usize..(self.start + self.len) as usize
    }
}

/// Labels not decoded yet: an RW 1.0 `TimeSeries` message and the key of its label bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PendingLabels<'a> {
    /// The whole `TimeSeries` message.
    pub(crate) message: &'a [u8],
    /// The identity of the message's leading run of label fields, when every label field comes
    /// before its other fields (as every sender encodes it); `None` otherwise.
    pub(crate) key: Option<SeriesKey>,
    /// The message ends in one canonical `Sample` field and was not walked: `key` covers every
    /// byte before that field, and the series' `samples` hold that one sample. A hit among the keys
    /// of label runs walked before is exact (the same bytes are that run); [`WriteRequestRef::resolve`]
    /// walks the message and replaces the key, samples, histograms and exemplars with what the walk
    /// finds (docs/REMOTE-WRITE.md, "The canonical `TimeSeries`, and the provisional key").
    pub(crate) provisional: bool,
    /// Where the leading run of label fields ends, when the message was walked and every label
    /// field is in that run (`key` is its key): resolving reads only those bytes. 0 otherwise.
    pub(crate) labels_end: u32,
}

impl<'a> SeriesLabels<'a> {
    /// The identity to look the series up by: the key of pending or decoded labels (a pending
    /// key may be provisional: exact for a look-up among keys of walked label runs, never to be
    /// stored); `None` for invalid labels and for pending labels that do not lead their message.
    #[inline]
    pub fn key(&self) -> Option<SeriesKey> {
        match self {
            SeriesLabels::Pending(p) => p.key,
            SeriesLabels::Decoded { key, .. } => Some(*key),
            SeriesLabels::Invalid(_) => None,
        }
    }
}

impl SeriesRef<'_> {
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
    /// The label arena: every decoded series' labels, back to back ([`WriteRequestRef::labels_of`]).
    /// One vector per request, so decoding allocates nothing per series and a series stays small.
    pub labels: Vec<Label<'a>>,
    /// The metadata entries, in wire order (RW 1.0 only; RW 2.0 sends metadata per series, see
    /// [`SeriesRef::metadata`]).
    pub metadata: Vec<MetadataRef<'a>>,
    /// Metadata entries the decoder dropped instead of failing the request (metadata never fails
    /// a request), by reason; the HTTP layer counts them in
    /// `vllm_corrector_metadata_dropped_total{reason}`.
    pub metadata_dropped: MetadataDropped,
}

impl<'a> WriteRequestRef<'a> {
    /// Every sample of the request as the receiver counts them ([`SeriesRef::sample_count`]).
    pub fn sample_count(&self) -> u64 {
        self.series.iter().map(SeriesRef::sample_count).sum()
    }

    /// The decoded labels of `series` (one of this request's); empty while pending or invalid.
    pub fn labels_of(&self, series: &SeriesRef<'a>) -> &[Label<'a>] {
        match series.labels {
            SeriesLabels::Decoded { range, .. } => &self.labels[range.indices()],
            SeriesLabels::Pending(_) | SeriesLabels::Invalid(_) => &[],
        }
    }

    /// Checks the decoded labels of series `index` against `limits` and normalises them in place
    /// (`labels::normalize_labels_memo`: sorted by name, empty values dropped, names checked),
    /// with a per-request [`NameMemo`]. The key stays the one of the labels as sent.
    ///
    /// # Errors
    /// The reason of [`SeriesLabels::Invalid`]; [`LabelError::EmptyLabelSet`] for labels still
    /// pending (resolve them first, [`WriteRequestRef::resolve`]) or an index out of range;
    /// otherwise the error of [`LabelLimits::check`] or of the normalisation.
    pub fn check_labels(
        &mut self,
        index: usize,
        limits: &LabelLimits,
        memo: &mut NameMemo<'a>,
    ) -> Result<(), LabelError> {
        let Some(series) = self.series.get_mut(index) else {
            return Err(LabelError::EmptyLabelSet);
        };
        match &mut series.labels {
            SeriesLabels::Decoded { range, .. } => {
                let labels = &mut self.labels[range.indices()];
                limits.check(labels)?;
                let (len, result) = labels::normalize_labels_memo(labels, memo);
                range.len = len as u32;
                result
            }
            SeriesLabels::Invalid(error) => Err(*error),
            SeriesLabels::Pending(_) => Err(LabelError::EmptyLabelSet),
        }
    }

    /// The RW 2.0 per-series metadata of `series` (one of this request's) as a family-level
    /// [`MetadataRef`], for the metadata cache.
    ///
    /// The family name is the series' `__name__`, minus `_bucket`, `_sum` or `_count` for a
    /// histogram or gauge histogram and minus `_sum` or `_count` for a summary: the name the
    /// family's `# TYPE` line carries, and RW 1.0's `metric_family_name`. `None` without metadata,
    /// for metadata that says nothing (type unspecified, no help, no unit), or without a name.
    pub fn family_metadata(&self, series: &SeriesRef<'a>) -> Option<MetadataRef<'a>> {
        let m = series.metadata?;
        if m.metric_type == MetricType::Unknown && m.help.is_empty() && m.unit.is_empty() {
            return None;
        }
        let name = self
            .labels_of(series)
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

crate::label_enum! {
/// Why a decoder dropped a metadata entry: the `reason` label of
/// `vllm_corrector_metadata_dropped_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetadataDropReason {
    /// RW 1.0: a `MetricMetadata` whose `metric_family_name`, `help` or `unit` is not UTF-8 (a
    /// protobuf `string` must be). RW 2.0 has no such case: a symbol that is not UTF-8 fails the
    /// whole request, since every label is a symbol too.
    InvalidUtf8 => "invalid_utf8",
    /// RW 2.0: a `Metadata` whose `help_ref` or `unit_ref` lies outside `symbols`. The series
    /// itself is kept.
    SymbolRefOutOfRange => "symbol_ref_out_of_range",
    /// A `help` longer than [`MAX_METADATA_HELP_BYTES`] or a `unit` longer than
    /// [`MAX_METADATA_UNIT_BYTES`]: not cached, so the metadata cache stays within a constant
    /// (counted by the engine's cache, after decoding; the samples are applied).
    TooLong => "too_long",
}
}

/// The longest `help` text a metadata entry may carry to be kept, bytes. vLLM's longest is
/// about 200 bytes; 4 KiB leaves room for any exporter's and bounds the cache.
pub const MAX_METADATA_HELP_BYTES: usize = 4096;

/// The longest `unit` a metadata entry may carry to be kept, bytes (vLLM's are empty or a word).
pub const MAX_METADATA_UNIT_BYTES: usize = 256;

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
