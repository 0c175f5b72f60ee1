//! Borrowed decoder of the RW 1.0 `prometheus.WriteRequest` message (see `proto/remote.proto`).
//!
//! This is the receiver's hot path: it walks the protobuf wire format by hand and borrows every
//! string from the decompressed body, allocating one `Vec` of series and one of metadata per
//! request, and one `Vec` of labels and one of samples per series, each sized exactly by a cheap
//! first pass over the field keys.
//!
//! Wire format: `protobuf.dev/programming-guides/encoding`. Fields may come in any order and
//! repeat (a repeated scalar keeps its last value); unknown fields of wire types varint, fixed64,
//! length-delimited and fixed32 are skipped (reserved field 2 included). Exemplars and native
//! histograms are counted, their contents skipped unread.
//!
//! **An RW 2.0 body decodes as an empty request, without error**: `io.prometheus.write.v2.Request`
//! keeps its data in fields 4 and 5, unknown to RW 1.0, and reserves 1 to 3. The HTTP layer must
//! therefore pick the schema from the `Content-Type` (`proto=`) and never by trying to decode.

use super::{Label, MetadataRef, MetricType, ProtocolError, Sample, SeriesRef, WriteRequestRef};

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
        exemplars: u32::try_from(n_exemplars).unwrap_or(u32::MAX),
        histograms: u32::try_from(n_histograms).unwrap_or(u32::MAX),
    };
    let mut r = Reader::new(buf, "TimeSeries");
    while !r.at_end() {
        match r.key()? {
            (1, Wire::Len) => series.labels.push(decode_label(r.bytes()?)?),
            (2, Wire::Len) => series.samples.push(decode_sample(r.bytes()?)?),
            (3 | 4, Wire::Len) => {
                r.bytes()?;
            }
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
            (1, Wire::Fixed64) => sample.value = f64::from_bits(r.fixed64()?),
            // int64 is the two's complement of the varint's 64 bits: negative timestamps work.
            (2, Wire::Varint) => sample.timestamp_ms = r.varint()? as i64,
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

/// Counts the occurrences of each of `fields` in one message, skipping every value: the first,
/// cheap pass that sizes the vectors of the second.
fn count_fields<const N: usize>(
    buf: &[u8],
    message: &'static str,
    fields: [u32; N],
) -> Result<[usize; N], ProtocolError> {
    let mut counts = [0usize; N];
    let mut r = Reader::new(buf, message);
    while !r.at_end() {
        let (field, wire) = r.key()?;
        if let Some(i) = fields.iter().position(|&f| f == field) {
            counts[i] += 1;
        }
        r.skip(wire)?;
    }
    Ok(counts)
}

/// `bytes` as a string, or `""` with `valid` cleared when they are not UTF-8.
fn lenient_utf8<'a>(bytes: &'a [u8], valid: &mut bool) -> &'a str {
    std::str::from_utf8(bytes).unwrap_or_else(|_| {
        *valid = false;
        ""
    })
}

fn utf8<'a>(bytes: &'a [u8], field: &str) -> Result<&'a str, ProtocolError> {
    std::str::from_utf8(bytes)
        .map_err(|e| ProtocolError::Protobuf(format!("{field} is not UTF-8: {e}")))
}

/// The protobuf wire types this decoder accepts. Groups (3, 4) are deprecated and never sent by
/// remote-write senders; they are errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wire {
    Varint,
    Fixed64,
    Len,
    Fixed32,
}

/// A cursor over one message's bytes. Every read is bounds-checked against this message.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    message: &'static str,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8], message: &'static str) -> Self {
        Reader {
            buf,
            pos: 0,
            message,
        }
    }

    fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    fn error(&self, what: std::fmt::Arguments<'_>) -> ProtocolError {
        ProtocolError::Protobuf(format!("{} at byte {}: {what}", self.message, self.pos))
    }

    fn wrong_wire(&self, field: u32, wire: Wire) -> ProtocolError {
        self.error(format_args!(
            "field {field} has unexpected wire type {wire:?}"
        ))
    }

    /// Reads a base-128 varint of at most 10 bytes; the 10th byte may only carry bit 63.
    #[inline]
    fn varint(&mut self) -> Result<u64, ProtocolError> {
        let mut value = 0u64;
        for i in 0..10 {
            let Some(&byte) = self.buf.get(self.pos) else {
                return Err(self.error(format_args!("truncated varint")));
            };
            if i == 9 && byte > 1 {
                return Err(self.error(format_args!("varint overflows 64 bits")));
            }
            self.pos += 1;
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte < 0x80 {
                return Ok(value);
            }
        }
        Err(self.error(format_args!("varint overflows 64 bits")))
    }

    /// Reads a field key: field number (non-zero, at most 2^29 - 1) and wire type.
    fn key(&mut self) -> Result<(u32, Wire), ProtocolError> {
        let key = self.varint()?;
        let Ok(key) = u32::try_from(key) else {
            return Err(self.error(format_args!("field key {key} out of range")));
        };
        let field = key >> 3;
        if field == 0 {
            return Err(self.error(format_args!("field number 0")));
        }
        let wire = match key & 7 {
            0 => Wire::Varint,
            1 => Wire::Fixed64,
            2 => Wire::Len,
            5 => Wire::Fixed32,
            3 | 4 => {
                return Err(self.error(format_args!(
                    "field {field} uses the unsupported group wire type"
                )));
            }
            other => {
                return Err(self.error(format_args!(
                    "field {field} has undefined wire type {other}"
                )));
            }
        };
        Ok((field, wire))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], ProtocolError> {
        let remaining = self.buf.len() - self.pos;
        if n > remaining {
            return Err(self.error(format_args!("{n} bytes needed, {remaining} left")));
        }
        let bytes = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(bytes)
    }

    fn fixed64(&mut self) -> Result<u64, ProtocolError> {
        let mut le = [0u8; 8];
        le.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(le))
    }

    /// Reads a length-delimited value; its length must fit in what is left of this message.
    fn bytes(&mut self) -> Result<&'a [u8], ProtocolError> {
        let len = self.varint()?;
        let remaining = self.buf.len() - self.pos;
        match usize::try_from(len) {
            Ok(len) if len <= remaining => self.take(len),
            _ => Err(self.error(format_args!(
                "length {len} runs past the {remaining} bytes left"
            ))),
        }
    }

    fn skip(&mut self, wire: Wire) -> Result<(), ProtocolError> {
        match wire {
            Wire::Varint => self.varint().map(drop),
            Wire::Fixed64 => self.take(8).map(drop),
            Wire::Len => self.bytes().map(drop),
            Wire::Fixed32 => self.take(4).map(drop),
        }
    }
}

#[cfg(test)]
#[path = "v1_tests.rs"]
mod tests;
