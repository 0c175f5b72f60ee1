//! Protocol layer: remote-write request bytes to borrowed series and samples.
//!
//! Nothing here knows HTTP or rules. Sources: the Prometheus Remote-Write 1.0 and 2.0
//! specifications (`prometheus.io/docs/specs/prw/remote_write_spec`, `…/remote_write_spec_2_0`)
//! and the field numbers of `proto/remote.proto` and `proto/remote_v2.proto`.
//!
//! Both decoders ([`v1::decode`], [`v2::decode`]) produce the same [`WriteRequestRef`] shape, so the
//! layers above never ask which protocol a series came in: a series' labels are pending (RW 1.0,
//! decoded on demand), decoded (RW 2.0) or invalid ([`SeriesLabels`]), each with a [`SeriesKey`].

#[cfg(any(test, feature = "encode"))]
pub mod encode;
mod error;
pub mod float;
pub mod histogram;
mod key;
pub mod labels;
#[cfg(any(test, feature = "encode"))]
pub mod prompb;
mod reason;
mod request;
mod sample;
pub mod snappy;
pub mod v1;
pub mod v2;
mod wire;

pub use key::{SeriesKey, independent_hashers};
pub use v1::LabelScratch;

pub use error::ProtocolError;
pub use histogram::{CustomBuckets, HistogramError, NativeHistogram};
pub use labels::{Label, LabelError, NameMemo, normalize_labels};
pub use request::{
    LabelRange, MAX_METADATA_HELP_BYTES, MAX_METADATA_UNIT_BYTES, MetadataDropReason,
    MetadataDropped, MetadataRef, MetricType, PendingLabels, SeriesLabels, SeriesMetadata,
    SeriesRef, WriteRequestRef,
};
pub use sample::{STALE_NAN_BITS, Sample, Samples, is_stale_marker};

/// The release of vllm-corrector: every crate of the workspace shares this version
/// (`[workspace.package]` in `Cargo.toml`). The binary's `--version`, the landing page, the build
/// info self-metric and the simulator's `User-Agent` all print it from here; the service adds the
/// git commit (`service::VERSION`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// A remote-write protocol version: the schema a body is decoded with. A receiver picks it from
/// the request's `Content-Type` (RW 2.0 specification, "Content-Type"), never by trying both: an
/// RW 2.0 body decodes as RW 1.0 without error when it holds no series of the 1.0 schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// Remote write 1.0: `prometheus.WriteRequest` ([`v1::decode`]).
    V1,
    /// Remote write 2.0: `io.prometheus.write.v2.Request` ([`v2::decode`]).
    V2,
}

impl Version {
    /// Decodes a decompressed body of this version ([`v1::decode`] or [`v2::decode`]).
    ///
    /// # Errors
    /// Those of the version's decoder.
    pub fn decode(self, buf: &[u8]) -> Result<WriteRequestRef<'_>, ProtocolError> {
        self.decode_at_most(buf, usize::MAX)
    }

    /// [`Version::decode`] of a body of at most `max_series` series ([`v1::decode_at_most`],
    /// [`v2::decode_at_most`]).
    ///
    /// # Errors
    /// Those of the version's decoder, and [`ProtocolError::TooManySeries`].
    pub fn decode_at_most(
        self,
        buf: &[u8],
        max_series: usize,
    ) -> Result<WriteRequestRef<'_>, ProtocolError> {
        match self {
            Version::V1 => v1::decode_at_most(buf, max_series),
            Version::V2 => v2::decode_at_most(buf, max_series),
        }
    }

    /// The series and samples of a decompressed body, without decoding it ([`v1::count`],
    /// [`v2::count`]): what a request refused whole counts.
    ///
    /// # Errors
    /// Those of the version's decoder for the body's framing, samples and histograms.
    pub fn count(self, buf: &[u8]) -> Result<Counts, ProtocolError> {
        match self {
            Version::V1 => v1::count(buf),
            Version::V2 => v2::count(buf),
        }
    }

    /// `"1.0"` or `"2.0"`, as a label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Version::V1 => "1.0",
            Version::V2 => "2.0",
        }
    }
}

/// A body's series and samples ([`Version::count`]), samples as the receiver counts them
/// ([`SeriesRef::sample_count`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// `TimeSeries` messages.
    pub series: usize,
    /// Samples, a custom-buckets native histogram counting as the classic samples it stands for.
    pub samples: u64,
}
