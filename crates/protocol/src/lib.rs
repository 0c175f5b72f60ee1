//! Protocol layer: remote-write request bytes to borrowed series and samples.
//!
//! Nothing here knows HTTP or rules. Sources: the Prometheus Remote-Write 1.0 and 2.0
//! specifications (`prometheus.io/docs/specs/prw/remote_write_spec`, `…/remote_write_spec_2_0`)
//! and the field numbers of `proto/remote.proto` and `proto/remote_v2.proto`.
//!
//! Both decoders ([`v1::decode`], [`v2::decode`]) produce the same [`WriteRequestRef`] shape, so the
//! layers above never ask which protocol a series came in.

#[cfg(any(test, feature = "encode"))]
pub mod encode;
mod error;
pub mod histogram;
mod key;
pub mod labels;
#[cfg(any(test, feature = "encode"))]
pub mod prompb;
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
pub use labels::{INLINE_LABELS, LabelSet};
pub use labels::{Label, LabelError, NameMemo, normalize_labels};
pub use request::{
    MetadataDropReason, MetadataDropped, MetadataRef, MetricType, SeriesMetadata, SeriesRef,
    WriteRequestRef,
};
pub use sample::{STALE_NAN_BITS, Sample, Samples, is_stale_marker};
