//! Borrowed decoder of the RW 1.0 `prometheus.WriteRequest` message (see `proto/remote.proto`).
//!
//! This is the receiver's hot path: it walks the protobuf wire format by hand and borrows every
//! string from the decompressed body, allocating one `Vec` of series and one of metadata per
//! request, and one `Vec` of labels, one of samples and one of native histograms per series, each
//! sized exactly by a cheap first pass over the field keys. The wire cursor is [`super::wire`].
//!
//! Wire format: `protobuf.dev/programming-guides/encoding`. Fields may come in any order and
//! repeat (a repeated scalar keeps its last value); unknown fields of wire types varint, fixed64,
//! length-delimited and fixed32 are skipped (reserved field 2 included). Exemplars are counted,
//! their contents skipped unread. Native histograms are decoded by [`super::histogram`]: custom
//! buckets (schema −53) in full, other schemas only recognised.
//!
//! **An RW 2.0 body decodes as an empty request, without error**: `io.prometheus.write.v2.Request`
//! keeps its data in fields 4 and 5, unknown to RW 1.0, and reserves 1 to 3. The HTTP layer must
//! therefore pick the schema from the `Content-Type` (`proto=`) and never by trying to decode.

use super::wire::{Reader, Wire, count_fields, lenient_utf8, utf8};
use super::{
    Label, MetadataRef, MetricType, ProtocolError, Sample, SeriesRef, WriteRequestRef, histogram,
};

/// Decodes a decompressed RW 1.0 `WriteRequest`, borrowing label strings from `buf`.
///
/// `buf` is the snappy-decoded request body. Series and metadata come back in wire order, labels
/// as sent (not yet normalised: see [`super::normalize_labels`]), sample values bit-exact (so the
/// staleness marker survives), timestamps in milliseconds.
///
/// A metadata entry whose family name, help or unit is not UTF-8 is dropped rather than failing
/// the request: metadata never fails a request (remote-write notes, checklist item 5).
///
/// # Errors
/// [`ProtocolError::Protobuf`] on a truncated message, a nested length running past its enclosing
/// message, a varint longer than 64 bits, field number 0, a group (wire types 3 and 4) or an
/// undefined wire type, a known field sent with the wrong wire type, or a label that is not UTF-8.
pub fn decode(buf: &[u8]) -> Result<WriteRequestRef<'_>, ProtocolError> {
    let [n_series, n_metadata] = count_fields(buf, "WriteRequest", [1, 3])?;
    let mut request = WriteRequestRef {
        series: Vec::with_capacity(n_series),
        metadata: Vec::with_capacity(n_metadata),
    };
    let mut r = Reader::new(buf, "WriteRequest");
    while !r.at_end() {
        match r.key()? {
            (1, Wire::Len) => request.series.push(decode_series(r.bytes()?)?),
            (3, Wire::Len) => {
                if let Some(metadata) = decode_metadata(r.bytes()?)? {
                    request.metadata.push(metadata);
                }
            }
            (field @ (1 | 3), wire) => return Err(r.wrong_wire(field, wire)),
            (_, wire) => r.skip(wire)?,
        }
    }
    Ok(request)
}

impl MetricType {
    /// Maps the wire value of `MetricMetadata.MetricType` (RW 1.0) to a [`MetricType`]; values
    /// outside 0..=7 become [`MetricType::Other`].
    pub fn from_wire(value: i32) -> MetricType {
        match value {
            0 => MetricType::Unknown,
            1 => MetricType::Counter,
            2 => MetricType::Gauge,
            3 => MetricType::Histogram,
            4 => MetricType::GaugeHistogram,
            5 => MetricType::Summary,
            6 => MetricType::Info,
            7 => MetricType::StateSet,
            other => MetricType::Other(other),
        }
    }

    /// The wire value of this type in `MetricMetadata.MetricType` (RW 1.0); the inverse of
    /// [`MetricType::from_wire`] (`Other(v)` maps to `v`).
    pub fn to_wire(self) -> i32 {
        match self {
            MetricType::Unknown => 0,
            MetricType::Counter => 1,
            MetricType::Gauge => 2,
            MetricType::Histogram => 3,
            MetricType::GaugeHistogram => 4,
            MetricType::Summary => 5,
            MetricType::Info => 6,
            MetricType::StateSet => 7,
            MetricType::Other(v) => v,
        }
    }
}

/// Decodes one `TimeSeries` (fields 1 labels, 2 samples, 3 exemplars, 4 histograms).
fn decode_series(buf: &[u8]) -> Result<SeriesRef<'_>, ProtocolError> {
    let [n_labels, n_samples, n_exemplars, n_histograms] =
        count_fields(buf, "TimeSeries", [1, 2, 3, 4])?;
    let mut series = SeriesRef {
        labels: Vec::with_capacity(n_labels),
        samples: Vec::with_capacity(n_samples),
        histograms: Vec::with_capacity(n_histograms),
        exemplars: u32::try_from(n_exemplars).unwrap_or(u32::MAX),
        ..SeriesRef::default()
    };
    let mut r = Reader::new(buf, "TimeSeries");
    while !r.at_end() {
        match r.key()? {
            (1, Wire::Len) => series.labels.push(decode_label(r.bytes()?)?),
            (2, Wire::Len) => series.samples.push(decode_sample(r.bytes()?)?),
            (3, Wire::Len) => {
                r.bytes()?;
            }
            (4, Wire::Len) => series.histograms.push(histogram::decode(r.bytes()?)?),
            (field @ 1..=4, wire) => return Err(r.wrong_wire(field, wire)),
            (_, wire) => r.skip(wire)?,
        }
    }
    Ok(series)
}

/// Decodes one `Label` (fields 1 name, 2 value; both UTF-8).
fn decode_label(buf: &[u8]) -> Result<Label<'_>, ProtocolError> {
    let mut label = Label {
        name: "",
        value: "",
    };
    let mut r = Reader::new(buf, "Label");
    while !r.at_end() {
        match r.key()? {
            (1, Wire::Len) => label.name = utf8(r.bytes()?, "Label.name")?,
            (2, Wire::Len) => label.value = utf8(r.bytes()?, "Label.value")?,
            (field @ (1 | 2), wire) => return Err(r.wrong_wire(field, wire)),
            (_, wire) => r.skip(wire)?,
        }
    }
    Ok(label)
}

/// Decodes one `Sample` (fields 1 value as fixed64 double, 2 timestamp as int64 varint).
fn decode_sample(buf: &[u8]) -> Result<Sample, ProtocolError> {
    let mut sample = Sample {
        value: 0.0,
        timestamp_ms: 0,
    };
    let mut r = Reader::new(buf, "Sample");
    while !r.at_end() {
        match r.key()? {
            (1, Wire::Fixed64) => sample.value = r.double()?,
            (2, Wire::Varint) => sample.timestamp_ms = r.int64()?,
            (field @ (1 | 2), wire) => return Err(r.wrong_wire(field, wire)),
            (_, wire) => r.skip(wire)?,
        }
    }
    Ok(sample)
}

/// Decodes one `MetricMetadata` (1 type, 2 family name, 4 help, 5 unit); `None` when a string
/// field is not UTF-8.
fn decode_metadata(buf: &[u8]) -> Result<Option<MetadataRef<'_>>, ProtocolError> {
    let mut metadata = MetadataRef {
        metric_type: MetricType::Unknown,
        family_name: "",
        help: "",
        unit: "",
    };
    let mut valid = true;
    let mut r = Reader::new(buf, "MetricMetadata");
    while !r.at_end() {
        match r.key()? {
            // int32/enum: the low 32 bits of the varint, as protobuf specifies.
            (1, Wire::Varint) => metadata.metric_type = MetricType::from_wire(r.varint()? as i32),
            (2, Wire::Len) => metadata.family_name = lenient_utf8(r.bytes()?, &mut valid),
            (4, Wire::Len) => metadata.help = lenient_utf8(r.bytes()?, &mut valid),
            (5, Wire::Len) => metadata.unit = lenient_utf8(r.bytes()?, &mut valid),
            (field @ (1 | 2 | 4 | 5), wire) => return Err(r.wrong_wire(field, wire)),
            (_, wire) => r.skip(wire)?,
        }
    }
    Ok(valid.then_some(metadata))
}

#[cfg(test)]
#[path = "v1_tests.rs"]
mod tests;
