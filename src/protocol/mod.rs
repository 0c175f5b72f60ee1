//! Protocol layer: remote-write request bytes to borrowed series and samples.
//!
//! Nothing here knows HTTP or rules. Source: the Prometheus Remote-Write 1.0 specification
//! (`prometheus.io/docs/specs/prw/remote_write_spec`) and the field numbers of `proto/remote.proto`.

pub mod encode;
pub mod labels;
pub mod prompb;
pub mod snappy;
pub mod v1;

pub use labels::{Label, LabelError, normalize_labels, normalize_labels_in_place};

/// Bit pattern of the Prometheus staleness marker: a NaN that Prometheus writes when a series
/// disappears from a scrape. Compare bits, never the float (every NaN compares unequal).
pub const STALE_NAN_BITS: u64 = 0x7ff0_0000_0000_0002;

/// True when `value` is exactly the Prometheus staleness marker (by bits).
#[inline]
pub fn is_stale_marker(value: f64) -> bool {
    value.to_bits() == STALE_NAN_BITS
}

/// One float sample: a value and its timestamp in milliseconds since the Unix epoch.
///
/// Source: `Sample` in RW 1.0 (`double value = 1; int64 timestamp = 2`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// The sample value (seconds, tokens or a count, depending on the series).
    pub value: f64,
    /// Timestamp in milliseconds since the Unix epoch.
    pub timestamp_ms: i64,
}

/// One `TimeSeries` of a decoded request, borrowing its label strings from the decompressed body.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SeriesRef<'a> {
    /// Labels as sent (not yet sorted or validated: see [`normalize_labels`]).
    pub labels: Vec<Label<'a>>,
    /// Float samples, in the order sent.
    pub samples: Vec<Sample>,
    /// Number of native histogram samples in this series (RW1 field 4). Counted, not used.
    pub histograms: u32,
    /// Number of exemplars in this series (RW1 field 3). Counted, not used.
    pub exemplars: u32,
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

/// A decoded RW 1.0 `WriteRequest`, borrowing from the decompressed body.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WriteRequestRef<'a> {
    /// The series, in wire order.
    pub series: Vec<SeriesRef<'a>>,
    /// The metadata entries, in wire order.
    pub metadata: Vec<MetadataRef<'a>>,
}

/// Errors of the protocol layer. Each maps to exactly one HTTP status in [`crate::http`].
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ProtocolError {
    /// The snappy block header declares more decoded bytes than the configured cap.
    /// Detected from the header alone, before any allocation.
    #[error("snappy body declares {declared} decoded bytes, over the cap of {cap}")]
    DecodedTooLarge {
        /// Decoded length declared by the snappy header, in bytes.
        declared: u64,
        /// Configured cap, in bytes.
        cap: u64,
    },
    /// The body is not valid snappy block format (framed snappy also lands here).
    #[error("invalid snappy block body: {0}")]
    Snappy(String),
    /// The decompressed body is not a valid protobuf `WriteRequest`.
    #[error("invalid protobuf WriteRequest: {0}")]
    Protobuf(String),
}
