//! Borrowed decoder of the RW 1.0 `prometheus.WriteRequest` message (see `proto/remote.proto`).
//!
//! This is the receiver's hot path: it walks the protobuf wire format by hand and borrows every
//! string from the decompressed body, allocating one `Vec` of series and one of metadata per
//! request (sized by a cheap first pass over the field keys); a series' sample is kept inline
//! ([`super::Samples`]), its labels stay pending until resolved into the request's label arena,
//! and only native histograms allocate. The wire cursor is
//! `super::wire`. Labels encoded as every sender encodes them (each `Label` with field 1 then 2,
//! one-byte lengths, all before the samples) take a tight loop; UTF-8 is then checked once per
//! series (with SIMD) over the bytes from the first name to the last value, whose framing bytes are
//! ASCII, falling back to one check per string when that span is not valid as a whole. Any other
//! valid encoding takes the general loop, with the same results and errors.
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

use super::wire::{Reader, Wire, count_fields, lenient_utf8, utf8, varint_filling};
use super::{
    Label, LabelRange, MetadataDropReason, MetadataDropped, MetadataRef, MetricType, PendingLabels,
    ProtocolError, Sample, SeriesKey, SeriesLabels, SeriesRef, WriteRequestRef, histogram,
};

/// Decodes a decompressed RW 1.0 `WriteRequest`, borrowing from `buf` (the snappy-decoded
/// request body), with every series' labels left pending ([`SeriesLabels::Pending`]): each series
/// gets the key of its label bytes (when its label fields lead the message), and its labels are
/// decoded only by `SeriesRef::resolve`. Samples (values bit-exact, so the staleness marker
/// survives; timestamps in ms), histograms, exemplar counts and metadata are decoded here, in
/// wire order. The receiver resolves only the series it does not know by key
/// (docs/ENGINE.md, "The series index"); [`WriteRequestRef::resolve_all`] gives
/// the fully decoded request.
///
/// A metadata entry whose family name, help or unit is not UTF-8 is dropped rather than failing
/// the request: metadata never fails a request (docs/REMOTE-WRITE.md, checklist item 5). Each one is
/// counted in [`WriteRequestRef::metadata_dropped`] as [`MetadataDropReason::InvalidUtf8`].
///
/// # Errors
/// [`ProtocolError::Protobuf`] on a truncated message, a nested length running past its enclosing
/// message, a varint longer than 64 bits, field number 0, a group (wire types 3 and 4) or an
/// undefined wire type, or a known field sent with the wrong wire type;
/// [`ProtocolError::V2BodyAsV1`] for an RW 2.0 body. A malformed `Label` or a label that is not
/// UTF-8 is reported by `SeriesRef::resolve`, and so is any error of a series that ends in a
/// canonical sample ([`PendingLabels`]'s provisional key); so when a body holds several errors,
/// the one reported first may differ from a decoder that decodes everything at once.
pub fn decode(buf: &[u8]) -> Result<WriteRequestRef<'_>, ProtocolError> {
    decode_at_most(buf, usize::MAX)
}

/// [`decode`] of a body of at most `max_series` series: a larger one is refused after the first,
/// counting pass ([`ProtocolError::TooManySeries`]), before anything is allocated per series.
///
/// # Errors
/// As [`decode`], and [`ProtocolError::TooManySeries`].
pub fn decode_at_most(buf: &[u8], max_series: usize) -> Result<WriteRequestRef<'_>, ProtocolError> {
    let (n_series, n_metadata) = count_request(buf)?;
    if n_series > max_series {
        return Err(ProtocolError::TooManySeries {
            series: n_series,
            limit: max_series,
        });
    }
    let mut request = WriteRequestRef {
        series: empty_series(n_series),
        labels: Vec::new(),
        metadata: Vec::with_capacity(n_metadata),
        metadata_dropped: MetadataDropped::default(),
    };
    let mut next = 0;
    let mut r = Reader::new(buf, "WriteRequest");
    while !r.at_end() {
        match r.key()? {
            (1, Wire::Len) => {
                let bytes = r.bytes()?;
                decode_series(bytes, slot(&mut request.series, &mut next, &r)?)?;
            }
            (3, Wire::Len) => match decode_metadata(r.bytes()?)? {
                Some(metadata) => request.metadata.push(metadata),
                None => request
                    .metadata_dropped
                    .add(MetadataDropReason::InvalidUtf8),
            },
            (field @ (1 | 3), wire) => return Err(r.wrong_wire(field, wire)),
            (_, wire) => r.skip(wire)?,
        }
    }
    Ok(request)
}

/// The first pass over a `WriteRequest`: how many `timeseries` (field 1) and `metadata` (field 3)
/// it holds. RW 2.0's `symbols` and `timeseries` (fields 4 and 5) are counted too, since a 2.0
/// body sent as 1.0 would otherwise decode as an empty request.
///
/// # Errors
/// [`ProtocolError::Protobuf`] as [`count_fields`]; [`ProtocolError::V2BodyAsV1`] when the body has
/// no field 1 but has a field 4 or 5.
fn count_request(buf: &[u8]) -> Result<(usize, usize), ProtocolError> {
    let [series, metadata, symbols, v2_series] = count_fields(buf, "WriteRequest", [1, 3, 4, 5])?;
    if series == 0 && symbols + v2_series > 0 {
        return Err(ProtocolError::V2BodyAsV1 {
            symbols,
            series: v2_series,
        });
    }
    Ok((series, metadata))
}

/// `n` empty series, written in place in one pass (pushing one per series builds it aside and
/// copies it in).
fn empty_series<'a>(n: usize) -> Vec<SeriesRef<'a>> {
    let mut series = Vec::with_capacity(n);
    series.resize_with(n, SeriesRef::default);
    series
}

/// The next of the series [`empty_series`] made (as many as [`count_fields`] counted `TimeSeries`
/// fields, so one is always left; an error, never a panic, if not).
#[inline]
fn slot<'s, 'a>(
    series: &'s mut [SeriesRef<'a>],
    next: &mut usize,
    r: &Reader<'_>,
) -> Result<&'s mut SeriesRef<'a>, ProtocolError> {
    let slot = series
        .get_mut(*next)
        .ok_or_else(|| r.error(format_args!("more series than counted")))?;
    *next += 1;
    Ok(slot)
}

/// Scratch space of label decoding (`SeriesRef::resolve`), reused across series: label spans,
/// and the label text a [`SeriesKey::of_labels`] hashes.
#[derive(Debug, Default)]
pub struct LabelScratch {
    spans: Vec<LabelSpan>,
    pub(crate) text: Vec<u8>,
}

/// Decodes one `TimeSeries` but its labels: only their framing is walked, and the leading run of
/// label fields is hashed into the series' key.
///
/// A series that ends in one canonical `Sample` field ([`canonical_tail`]) is not walked: its key
/// covers every byte before that field, and stays provisional until [`SeriesRef::resolve`] walks
/// the series. The provisional key is exact where it is used: a receiver looks it up among keys
/// of label runs it walked before, and bytes equal to such a run are that run, so the series is
/// those labels and this one sample (docs/REMOTE-WRITE.md, "The canonical `TimeSeries`, and the
/// provisional key").
fn decode_series<'a>(buf: &'a [u8], series: &mut SeriesRef<'a>) -> Result<(), ProtocolError> {
    if let Some((end, sample)) = canonical_tail(buf) {
        series.samples.push(sample);
        series.labels = SeriesLabels::Pending(PendingLabels {
            message: buf,
            key: Some(SeriesKey::of(&buf[..end])),
            provisional: true,
            labels_end: 0,
        });
        return Ok(());
    }
    let run_end = walk_series(buf, None, Some(series))?;
    series.labels = SeriesLabels::Pending(pending_after_walk(buf, run_end));
    Ok(())
}

/// The pending labels of the `TimeSeries` message `buf`, walked: the leading run of label fields
/// ends at `run_end` when every label field is in it.
fn pending_after_walk(buf: &[u8], run_end: Option<usize>) -> PendingLabels<'_> {
    PendingLabels {
        message: buf,
        key: run_end.map(|end| SeriesKey::of(&buf[..end])),
        provisional: false,
        labels_end: run_end.and_then(|end| u32::try_from(end).ok()).unwrap_or(0),
    }
}

/// Walks the `TimeSeries` message `buf`: its samples, histograms and exemplars into `series`
/// (none on entry), and the key of its leading label run (`None` when its label fields do not
/// lead). Its labels are not decoded.
pub(crate) fn walk_series_into<'a>(
    buf: &'a [u8],
    series: &mut SeriesRef<'a>,
) -> Result<Option<SeriesKey>, ProtocolError> {
    let run_end = walk_series(buf, None, Some(series))?;
    Ok(run_end.map(|end| SeriesKey::of(&buf[..end])))
}

/// When the `TimeSeries` message `buf` ends with one `Sample` field (key 0x12, a one-byte length)
/// whose bytes [`tail_sample`] reads, and at least one byte comes before it: where that field
/// starts, and its sample. This is exactly what the walk reads from those bytes when the bytes
/// before them are whole fields. Tried first: a value and a 6-byte timestamp (every millisecond
/// time from 2004 to 2109), then a value of 0 (which protobuf leaves out) with one, then every
/// other length ([`other_tail`]).
#[inline(always)]
fn canonical_tail(buf: &[u8]) -> Option<(usize, Sample)> {
    let n = buf.len();
    if n > 18 {
        if let [0x12, 16, ref m @ ..] = buf[n - 18..]
            && let Some(sample) = tail_sample(m)
        {
            return Some((n - 18, sample));
        }
        if let [0x12, 8, ref m @ ..] = buf[n - 10..]
            && let Some(sample) = tail_sample(m)
        {
            return Some((n - 10, sample));
        }
    }
    other_tail(buf)
}

/// [`canonical_tail`] for the sample field lengths other than 16 and 8 (2 to 20 bytes).
#[inline(never)]
fn other_tail(buf: &[u8]) -> Option<(usize, Sample)> {
    (2..=20usize).filter(|&m| m != 16 && m != 8).find_map(|m| {
        let start = buf.len().checked_sub(m + 2).filter(|&s| s > 0)?;
        match buf[start..] {
            [0x12, len, ref sample @ ..] if usize::from(len) == m => {
                tail_sample(sample).map(|s| (start, s))
            }
            _ => None,
        }
    })
}

/// The sample in `m` when it is one of the two forms every sender encodes: [`canonical_sample`],
/// or a value of 0 left out (field 2, the varint timestamp, alone filling `m`). `None` otherwise.
#[inline(always)]
fn tail_sample(m: &[u8]) -> Option<Sample> {
    match m {
        [0x09, ..] => canonical_sample(m),
        [0x10, ..] => Some(Sample {
            value: 0.0,
            timestamp_ms: timestamp_filling(m, 1)?,
        }),
        _ => None,
    }
}

/// The one walk over a `TimeSeries` message (fields 1 labels, 2 samples, 3 exemplars, 4
/// histograms) behind [`decode_series`], [`walk_series_into`] and [`WriteRequestRef::resolve`]: the
/// same framing checks and errors in each. With `spans`, each label's name and value ranges are
/// pushed (in wire order); with `series`, its samples, histograms and exemplar count are decoded
/// into it; without either, only the framing is read. Returns the end of the leading run of label
/// fields when every label field comes before the other fields and there is at least one (`None`
/// otherwise): the bytes a [`SeriesKey`] covers.
///
/// Labels encoded as every sender encodes them (key 0x0a, a one-byte length, and with `spans` a
/// canonical `Label`) take a tight loop; the general loop takes over at the first other byte.
#[inline(always)]
fn walk_series<'a>(
    buf: &'a [u8],
    mut spans: Option<&mut Vec<LabelSpan>>,
    mut series: Option<&mut SeriesRef<'a>>,
) -> Result<Option<usize>, ProtocolError> {
    let mut pos = 0;
    while let [0x0a, len, ..] = buf[pos..] {
        let (start, len) = (pos + 2, usize::from(len));
        if len >= 0x80 || start + len > buf.len() {
            break;
        }
        if let Some(spans) = spans.as_deref_mut() {
            match canonical_label(buf, start, len) {
                Some(span) => spans.push(span),
                None => break,
            }
        }
        pos = start + len;
    }
    // `run_end`: the end of the leading run of label fields; `contiguous`: no label field after it.
    let (mut run_end, mut leading, mut contiguous) = (pos, true, true);
    let mut r = Reader::at(buf, pos, "TimeSeries");
    while !r.at_end() {
        match r.key()? {
            (1, Wire::Len) => {
                let len = r.len()?;
                if let Some(spans) = spans.as_deref_mut() {
                    let start = r.position();
                    let span = match canonical_label(buf, start, len) {
                        Some(span) => span,
                        None => decode_label(buf, start, len)?,
                    };
                    spans.push(span);
                }
                r.advance(len);
                if leading {
                    run_end = r.position();
                } else {
                    contiguous = false;
                }
            }
            (2, Wire::Len) => {
                leading = false;
                let bytes = r.bytes()?;
                if let Some(series) = series.as_deref_mut() {
                    let sample = match canonical_sample(bytes) {
                        Some(sample) => sample,
                        None => decode_sample(bytes)?,
                    };
                    series.samples.push(sample);
                }
            }
            (3, Wire::Len) => {
                leading = false;
                r.bytes()?;
                if let Some(series) = series.as_deref_mut() {
                    series.exemplars = series.exemplars.saturating_add(1);
                }
            }
            (4, Wire::Len) => {
                leading = false;
                let bytes = r.bytes()?;
                if let Some(series) = series.as_deref_mut() {
                    series.histograms.push(histogram::decode(bytes)?);
                }
            }
            (field @ 1..=4, wire) => return Err(r.wrong_wire(field, wire)),
            (_, wire) => {
                leading = false;
                r.skip(wire)?;
            }
        }
    }
    Ok((contiguous && run_end > 0).then_some(run_end))
}

impl MetricType {
    /// Maps the wire value of `MetricMetadata.MetricType` (RW 1.0) to a [`MetricType`]; values
    /// outside 0..=7 become [`MetricType::Other`].
    pub(crate) fn from_wire(value: i32) -> MetricType {
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
    /// [`MetricType::from_wire`] (`Other(v)` maps to `v`). For the encoders.
    #[cfg(any(test, feature = "encode"))]
    pub(crate) fn to_wire(self) -> i32 {
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

/// The borrowed labels of one series, from their spans. One UTF-8 check covers the bytes from the
/// first name to the last value when they form valid UTF-8 as a whole; each string is then a slice
/// of that checked text (`str::get` confirms its boundaries in O(1)). Otherwise each string is
/// checked alone, with the same errors.
fn labels_of<'a>(
    buf: &'a [u8],
    spans: &[LabelSpan],
    labels: &mut Vec<Label<'a>>,
) -> Result<(), ProtocolError> {
    let (Some(first), Some(last)) = (spans.first(), spans.last()) else {
        return Ok(());
    };
    let (lo, hi) = (
        first.name.0.min(first.value.0),
        last.value.1.max(last.name.1),
    );
    let checked = if lo <= hi {
        // SIMD validation, accepting exactly what `std::str::from_utf8` accepts.
        simdutf8::basic::from_utf8(&buf[lo..hi]).ok()
    } else {
        None
    };
    let slice = |(a, b): (usize, usize)| checked?.get(a.wrapping_sub(lo)..b.wrapping_sub(lo));
    labels.reserve(spans.len());
    for span in spans {
        match (slice(span.name), slice(span.value)) {
            (Some(name), Some(value)) => labels.push(Label { name, value }),
            _ => labels.push(Label {
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
/// field 2 (varint timestamp) ending the message. `None` sends it to [`decode_sample`]. Always
/// inlined, as [`varint_filling`]: called once per sample (docs/PERFORMANCE.md, "Receive path:
/// instructions per sample").
#[inline(always)]
fn canonical_sample(m: &[u8]) -> Option<Sample> {
    let (&[0x09, v0, v1, v2, v3, v4, v5, v6, v7, 0x10], _) = m.split_first_chunk::<10>()? else {
        return None;
    };
    Some(Sample {
        value: f64::from_bits(u64::from_le_bytes([v0, v1, v2, v3, v4, v5, v6, v7])),
        timestamp_ms: timestamp_filling(m, 10)?,
    })
}

/// The `int64` timestamp whose varint fills `m[start..]` exactly ([`varint_filling`], or a
/// [`Reader`] for the lengths it leaves undecided). `None` when those bytes are not one varint.
#[inline(always)]
fn timestamp_filling(m: &[u8], start: usize) -> Option<i64> {
    match varint_filling(m, start) {
        Some(t) => Some(t as i64),
        None => {
            let mut r = Reader::new(m.get(start..)?, "Sample");
            let t = r.int64().ok()?;
            r.at_end().then_some(t)
        }
    }
}

/// Decodes one `Label` (fields 1 name, 2 value) found at `buf[start..start + len]`, as byte ranges
/// of `buf` (empty at `start` when absent; a repeated field keeps its last value).
fn decode_label(buf: &[u8], start: usize, len: usize) -> Result<LabelSpan, ProtocolError> {
    let mut span = LabelSpan {
        name: (start, start),
        value: (start, start),
    };
    let mut r = Reader::new(&buf[start..start + len], "Label");
    while !r.at_end() {
        match r.key()? {
            (field @ (1 | 2), Wire::Len) => {
                let n = r.len()?;
                let range = (start + r.position(), start + r.position() + n);
                r.advance(n);
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

/// Every sample of the body `buf` as the receiver counts them ([`SeriesRef::sample_count`]), and its
/// series, without decoding any label or keeping any series: for a request refused whole.
///
/// # Errors
/// As [`decode`], for the body's framing, samples and histograms.
pub fn count(buf: &[u8]) -> Result<crate::Counts, ProtocolError> {
    count_request(buf)?;
    let mut counts = crate::Counts::default();
    let mut scratch = SeriesRef::default();
    let mut r = Reader::new(buf, "WriteRequest");
    while !r.at_end() {
        match r.key()? {
            (1, Wire::Len) => {
                walk_series_into(r.bytes()?, &mut scratch)?;
                counts.series += 1;
                counts.samples += scratch.sample_count();
                scratch.samples.clear();
                scratch.histograms.clear();
            }
            (_, wire) => r.skip(wire)?,
        }
    }
    Ok(counts)
}

mod resolve;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod deferred_tests;
