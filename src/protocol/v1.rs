//! Borrowed decoder of the RW 1.0 `prometheus.WriteRequest` message (see `proto/remote.proto`).
//!
//! This is the receiver's hot path: it walks the protobuf wire format by hand, in one pass, and
//! borrows every string from the decompressed body. [`decode_flat`] puts every series' labels and
//! samples into two shared vectors (a handful of allocations per request, none per series);
//! [`decode`] returns the same content as one `Vec` of labels and one of samples per series.
//! UTF-8 is validated once per series (with SIMD) over the bytes that hold its labels (the framing bytes
//! between them are ASCII), falling back to one check per string when that span is not valid as
//! a whole (for example a label longer than 127 bytes, whose length varint is not ASCII).
//!
//! Wire format: `protobuf.dev/programming-guides/encoding`. Fields may come in any order and
//! repeat (a repeated scalar keeps its last value); unknown fields of wire types varint, fixed64,
//! length-delimited and fixed32 are skipped (reserved field 2 included). Exemplars and native
//! histograms are counted, their contents skipped unread.
//!
//! **An RW 2.0 body decodes as an empty request, without error**: `io.prometheus.write.v2.Request`
//! keeps its data in fields 4 and 5, unknown to RW 1.0, and reserves 1 to 3. The HTTP layer must
//! therefore pick the schema from the `Content-Type` (`proto=`) and never by trying to decode.

use std::ops::Range;

use super::{Label, MetadataRef, MetricType, ProtocolError, Sample, SeriesRef, WriteRequestRef};

/// One series of a [`FlatWriteRequest`]: where its labels and samples sit in the shared vectors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlatSeries {
    /// Range of this series' labels in [`FlatWriteRequest::labels`], as sent (not yet normalised).
    pub labels: Range<usize>,
    /// Range of this series' float samples in [`FlatWriteRequest::samples`], in the order sent.
    pub samples: Range<usize>,
    /// Number of native histogram samples (RW1 field 4). Counted, not used.
    pub histograms: u32,
    /// Number of exemplars (RW1 field 3). Counted, not used.
    pub exemplars: u32,
    /// Byte range, in the decoded body, of this series' encoded labels when they are all canonical
    /// and in a row at the start of the message (as senders write them): those bytes determine the
    /// label set, so equal bytes mean equal labels. `None` for any other layout.
    pub label_bytes: Option<Range<usize>>,
}

/// A decoded RW 1.0 `WriteRequest` in flat form, borrowing from the decompressed body: the same
/// content as [`WriteRequestRef`] without a pair of vectors per series.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FlatWriteRequest<'a> {
    /// The series, in wire order.
    pub series: Vec<FlatSeries>,
    /// Every series' labels, series after series.
    pub labels: Vec<Label<'a>>,
    /// Every series' float samples, series after series.
    pub samples: Vec<Sample>,
    /// The metadata entries, in wire order.
    pub metadata: Vec<MetadataRef<'a>>,
}

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
    let flat = decode_flat(buf)?;
    let series = flat
        .series
        .iter()
        .map(|s| SeriesRef {
            labels: flat.labels[s.labels.clone()].to_vec(),
            samples: flat.samples[s.samples.clone()].to_vec(),
            histograms: s.histograms,
            exemplars: s.exemplars,
        })
        .collect();
    Ok(WriteRequestRef {
        series,
        metadata: flat.metadata,
    })
}

/// Decodes a decompressed RW 1.0 `WriteRequest` into the flat form, in one pass over `buf`.
///
/// Same input, content and errors as [`decode`]; the series' labels and samples are ranges into
/// two shared vectors.
///
/// # Errors
/// As [`decode`].
pub fn decode_flat(buf: &[u8]) -> Result<FlatWriteRequest<'_>, ProtocolError> {
    decode_flat_inner(buf).map_err(|e| *e)
}

fn decode_flat_inner(buf: &[u8]) -> Result<FlatWriteRequest<'_>, DecodeError> {
    // Capacities from the body size: a vLLM series with one sample takes about 240 bytes with
    // 8 to 10 labels; growth past the guess is amortised.
    let series_guess = buf.len() / 200 + 1;
    let mut request = FlatWriteRequest {
        series: Vec::with_capacity(series_guess),
        labels: Vec::with_capacity(series_guess * 10),
        samples: Vec::with_capacity(series_guess),
        metadata: Vec::new(),
    };
    let mut spans: Vec<LabelSpan> = Vec::with_capacity(32);
    let mut r = Reader::new(buf, "WriteRequest");
    while !r.at_end() {
        match r.key()? {
            (1, Wire::Len) => {
                let len = r.len()?;
                let (start, end) = (r.pos, r.pos + len);
                r.pos = end;
                decode_series(&buf[start..end], start, &mut request, &mut spans)?;
            }
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

/// Byte ranges of one label's name and value inside its series' message.
#[derive(Debug, Clone, Copy)]
struct LabelSpan {
    name: (usize, usize),
    value: (usize, usize),
}

/// The decoder's internal error: boxed so that every `Result` of the hot path fits in two
/// registers; unboxed once, at [`decode_flat`]'s boundary.
type DecodeError = Box<ProtocolError>;

/// Decodes one `TimeSeries` (fields 1 labels, 2 samples, 3 exemplars, 4 histograms), found at
/// `offset` in the request, into `request`. `spans` is scratch space, reused across series.
fn decode_series<'a>(
    buf: &'a [u8],
    offset: usize,
    request: &mut FlatWriteRequest<'a>,
    spans: &mut Vec<LabelSpan>,
) -> Result<(), DecodeError> {
    spans.clear();
    let samples_start = request.samples.len();
    let (mut exemplars, mut histograms) = (0u32, 0u32);
    let mut r = Reader::new(buf, "TimeSeries");
    // Fast loop over the leading labels as senders encode them (key 0x0a, a one-byte length, a
    // canonical `Label`); the general loop below takes over at the first other byte.
    while let [0x0a, len, ..] = buf[r.pos..] {
        let (start, len) = (r.pos + 2, usize::from(len));
        match canonical_label(buf, start, len) {
            Some(span) if len < 0x80 => {
                spans.push(span);
                r.pos = start + len;
            }
            _ => break,
        }
    }
    let canonical_end = r.pos;
    let canonical_labels = spans.len();
    while !r.at_end() {
        match r.key()? {
            (1, Wire::Len) => {
                let len = r.len()?;
                let span = match canonical_label(buf, r.pos, len) {
                    Some(span) => span,
                    None => decode_label(buf, r.pos, len)?,
                };
                spans.push(span);
                r.pos += len;
            }
            (2, Wire::Len) => {
                let bytes = r.bytes()?;
                let sample = match canonical_sample(bytes) {
                    Some(sample) => sample,
                    None => decode_sample(bytes)?,
                };
                request.samples.push(sample);
            }
            (3, Wire::Len) => {
                r.bytes()?;
                exemplars = exemplars.saturating_add(1);
            }
            (4, Wire::Len) => {
                r.bytes()?;
                histograms = histograms.saturating_add(1);
            }
            (field @ 1..=4, wire) => return Err(r.wrong_wire(field, wire)),
            (_, wire) => r.skip(wire)?,
        }
    }
    let labels_start = request.labels.len();
    push_labels(buf, spans, &mut request.labels)?;
    request.series.push(FlatSeries {
        labels: labels_start..request.labels.len(),
        samples: samples_start..request.samples.len(),
        histograms,
        exemplars,
        label_bytes: (spans.len() == canonical_labels).then_some(offset..offset + canonical_end),
    });
    Ok(())
}

/// Turns the label spans of one series into borrowed strings. One UTF-8 check covers the bytes
/// from the first name to the last value when they form valid UTF-8 as a whole; each string is then
/// a slice of that checked text between ASCII framing bytes (`str::get` confirms the boundaries).
/// Otherwise every string is checked alone, with the same errors.
fn push_labels<'a>(
    buf: &'a [u8],
    spans: &[LabelSpan],
    out: &mut Vec<Label<'a>>,
) -> Result<(), DecodeError> {
    let (Some(first), Some(last)) = (spans.first(), spans.last()) else {
        return Ok(());
    };
    // Senders put the labels first and in a row: the span runs from the first name to the last
    // value. Any other layout still decodes, one check per string.
    let (lo, hi) = (
        first.name.0.min(first.value.0),
        last.value.1.max(last.name.1),
    );
    let checked = if lo <= hi {
        // SIMD validation (same acceptance as `std::str::from_utf8`); errors take the std path.
        simdutf8::basic::from_utf8(&buf[lo..hi]).ok()
    } else {
        None
    };
    out.reserve(spans.len());
    for span in spans {
        // O(1) boundary checks inside the checked text; a miss checks that string alone.
        let slice = |(a, b): (usize, usize)| checked?.get(a.wrapping_sub(lo)..b.wrapping_sub(lo));
        match (slice(span.name), slice(span.value)) {
            (Some(name), Some(value)) => out.push(Label { name, value }),
            _ => out.push(Label {
                name: utf8(&buf[span.name.0..span.name.1], "Label.name")?,
                value: utf8(&buf[span.value.0..span.value.1], "Label.value")?,
            }),
        }
    }
    Ok(())
}

/// The label at `buf[start..start + len]` when it is encoded as every sender encodes it: field 1
/// then field 2, each with a one-byte length, and nothing else. `None` sends it to [`decode_label`],
/// which handles every other valid encoding.
#[inline]
fn canonical_label(buf: &[u8], start: usize, len: usize) -> Option<LabelSpan> {
    let m = buf.get(start..start + len)?;
    let (&[0x0a, n1], rest) = m.split_first_chunk::<2>()? else {
        return None;
    };
    let n1 = usize::from(n1);
    let (&[0x12, n2], value) = rest.get(n1..)?.split_first_chunk::<2>()? else {
        return None;
    };
    if n1 >= 0x80 || usize::from(n2) != value.len() || n2 >= 0x80 {
        return None;
    }
    Some(LabelSpan {
        name: (start + 2, start + 2 + n1),
        value: (start + 4 + n1, start + len),
    })
}

/// The sample in `m` when it is encoded as every sender encodes it: field 1 (fixed64 value) then
/// field 2 (varint timestamp) ending the message. `None` sends it to [`decode_sample`].
#[inline]
fn canonical_sample(m: &[u8]) -> Option<Sample> {
    let (&[0x09, v0, v1, v2, v3, v4, v5, v6, v7, 0x10], ts) = m.split_first_chunk::<10>()? else {
        return None;
    };
    let mut r = Reader::new(ts, "Sample");
    let timestamp = r.varint().ok()?;
    r.at_end().then(|| Sample {
        value: f64::from_bits(u64::from_le_bytes([v0, v1, v2, v3, v4, v5, v6, v7])),
        timestamp_ms: timestamp as i64,
    })
}

/// Decodes one `Label` (fields 1 name, 2 value) found at `buf[start..start + len]`, as byte ranges
/// of `buf` (empty at `start` when absent; a repeated field keeps its last value).
fn decode_label(buf: &[u8], start: usize, len: usize) -> Result<LabelSpan, DecodeError> {
    let mut span = LabelSpan {
        name: (start, start),
        value: (start, start),
    };
    let mut r = Reader::new(&buf[start..start + len], "Label");
    while !r.at_end() {
        match r.key()? {
            (field @ (1 | 2), Wire::Len) => {
                let n = r.len()?;
                let range = (start + r.pos, start + r.pos + n);
                r.pos += n;
                if field == 1 {
                    span.name = range;
                } else {
                    span.value = range;
                }
            }
            (field @ (1 | 2), wire) => return Err(r.wrong_wire(field, wire)),
            (_, wire) => r.skip(wire)?,
        }
    }
    Ok(span)
}

/// Decodes one `Sample` (fields 1 value as fixed64 double, 2 timestamp as int64 varint).
#[inline]
fn decode_sample(buf: &[u8]) -> Result<Sample, DecodeError> {
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
fn decode_metadata(buf: &[u8]) -> Result<Option<MetadataRef<'_>>, DecodeError> {
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

/// `bytes` as a string, or `""` with `valid` cleared when they are not UTF-8.
fn lenient_utf8<'a>(bytes: &'a [u8], valid: &mut bool) -> &'a str {
    std::str::from_utf8(bytes).unwrap_or_else(|_| {
        *valid = false;
        ""
    })
}

#[cold]
fn utf8_error(field: &str, e: std::str::Utf8Error) -> DecodeError {
    Box::new(ProtocolError::Protobuf(format!(
        "{field} is not UTF-8: {e}"
    )))
}

fn utf8<'a>(bytes: &'a [u8], field: &str) -> Result<&'a str, DecodeError> {
    std::str::from_utf8(bytes).map_err(|e| utf8_error(field, e))
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

/// A cursor over one message's bytes. Every read is bounds-checked against this message. The
/// common cases (one-byte keys and lengths) are inlined; errors are built out of line.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    message: &'static str,
}

impl<'a> Reader<'a> {
    #[inline]
    fn new(buf: &'a [u8], message: &'static str) -> Self {
        Reader {
            buf,
            pos: 0,
            message,
        }
    }

    #[inline]
    fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    #[cold]
    #[inline(never)]
    fn error(&self, what: std::fmt::Arguments<'_>) -> DecodeError {
        Box::new(ProtocolError::Protobuf(format!(
            "{} at byte {}: {what}",
            self.message, self.pos
        )))
    }

    #[cold]
    #[inline(never)]
    fn wrong_wire(&self, field: u32, wire: Wire) -> DecodeError {
        self.error(format_args!(
            "field {field} has unexpected wire type {wire:?}"
        ))
    }

    /// Reads a base-128 varint of at most 10 bytes; the 10th byte may only carry bit 63.
    #[inline]
    fn varint(&mut self) -> Result<u64, DecodeError> {
        match self.buf.get(self.pos) {
            Some(&byte) if byte < 0x80 => {
                self.pos += 1;
                Ok(u64::from(byte))
            }
            _ => self.varint_slow(),
        }
    }

    #[inline(never)]
    fn varint_slow(&mut self) -> Result<u64, DecodeError> {
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
    #[inline]
    fn key(&mut self) -> Result<(u32, Wire), DecodeError> {
        let key = self.varint()?;
        let wire = match key & 7 {
            0 => Wire::Varint,
            1 => Wire::Fixed64,
            2 => Wire::Len,
            5 => Wire::Fixed32,
            _ => return Err(self.bad_key(key)),
        };
        match u32::try_from(key >> 3) {
            Ok(field) if field != 0 && key <= u64::from(u32::MAX) => Ok((field, wire)),
            _ => Err(self.bad_key(key)),
        }
    }

    #[cold]
    #[inline(never)]
    fn bad_key(&self, key: u64) -> DecodeError {
        let Ok(key) = u32::try_from(key) else {
            return self.error(format_args!("field key {key} out of range"));
        };
        let field = key >> 3;
        if field == 0 {
            return self.error(format_args!("field number 0"));
        }
        match key & 7 {
            3 | 4 => self.error(format_args!(
                "field {field} uses the unsupported group wire type"
            )),
            other => self.error(format_args!(
                "field {field} has undefined wire type {other}"
            )),
        }
    }

    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let remaining = self.buf.len() - self.pos;
        if n > remaining {
            return Err(self.error(format_args!("{n} bytes needed, {remaining} left")));
        }
        let bytes = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(bytes)
    }

    #[inline]
    fn fixed64(&mut self) -> Result<u64, DecodeError> {
        let mut le = [0u8; 8];
        le.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(le))
    }

    /// Reads the length of a length-delimited value; it must fit in what is left of this message.
    #[inline]
    fn len(&mut self) -> Result<usize, DecodeError> {
        let len = self.varint()?;
        let remaining = self.buf.len() - self.pos;
        match usize::try_from(len) {
            Ok(len) if len <= remaining => Ok(len),
            _ => Err(self.error(format_args!(
                "length {len} runs past the {remaining} bytes left"
            ))),
        }
    }

    /// Reads a length-delimited value; its length must fit in what is left of this message.
    #[inline]
    fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = self.len()?;
        let bytes = &self.buf[self.pos..self.pos + len];
        self.pos += len;
        Ok(bytes)
    }

    fn skip(&mut self, wire: Wire) -> Result<(), DecodeError> {
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
