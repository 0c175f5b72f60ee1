//! Borrowed decoder of the RW 2.0 `io.prometheus.write.v2.Request` message
//! (`proto/remote_v2.proto`; specification 2.0-rc.4, `prometheus.io/docs/specs/prw/remote_write_spec_2_0`).
//!
//! Same style and guarantees as [`super::v1`]: the wire is walked by hand with the shared cursor of
//! `super::wire`, every string borrows from the decompressed body, fields may come in any order
//! and repeat, unknown fields are skipped. It returns the same [`WriteRequestRef`] shape as RW 1.0:
//! labels are resolved from the `symbols` table, so nothing above this layer sees symbol
//! references.
//!
//! What RW 2.0 adds, and where it lands:
//! * **Symbols.** `symbols[0]` must be `""` ([`ProtocolError::SymbolsStartNotEmpty`], which fails
//!   the request: the table itself is malformed). Label references are checked per series: an odd
//!   `labels_refs` length ([`LabelError::OddLabelRefs`]) or a reference outside the table
//!   ([`LabelError::SymbolRefOutOfRange`]) rejects that series only, through
//!   [`SeriesLabels::Invalid`], as Prometheus' own receiver does (a partial write, answered 400).
//! * **Metadata per series** (`TimeSeries.metadata`): [`SeriesRef::metadata`]. A `help_ref` or
//!   `unit_ref` out of range drops the metadata, never the series (metadata never fails a request),
//!   and is counted in [`WriteRequestRef::metadata_dropped`].
//! * **Created/start timestamp**, both wire forms: `TimeSeries.created_timestamp` (field 6, senders
//!   up to Prometheus 3.7) and `Sample.start_timestamp` (field 3, ≥ 3.8), in
//!   `SeriesRef::start_timestamp_ms`; `Histogram.start_timestamp` (17) in
//!   `super::CustomBuckets::start_timestamp_ms`.
//! * **Native histograms**: [`super::histogram`], as for RW 1.0.
//! * Exemplars are counted; their contents (and label references) are not read.
//!
//! The reserved fields 1 to 3 of `Request` are an error here, not skipped: they are where an RW 1.0
//! `WriteRequest` keeps its series, so a v1 body sent with the v2 `Content-Type` fails loudly
//! instead of decoding as an empty request.

use super::wire::{Reader, Wire, count_fields, utf8};
use super::{
    Label, LabelError, LabelRange, MetadataDropReason, MetadataDropped, MetricType, ProtocolError,
    Sample, Samples, SeriesKey, SeriesLabels, SeriesMetadata, SeriesRef, WriteRequestRef,
    histogram,
};

/// The longest prefix of a bad `symbols[0]` quoted in [`ProtocolError::SymbolsStartNotEmpty`].
const MAX_QUOTED_SYMBOL: usize = 64;

/// Decodes a decompressed RW 2.0 `Request`, borrowing label strings from `buf`.
///
/// `buf` is the snappy-decoded request body. Series come back in wire order with labels resolved
/// from `symbols` (as sent: not yet normalised, see [`WriteRequestRef::check_labels`]), sample values
/// bit-exact, timestamps in milliseconds. [`WriteRequestRef::metadata`] stays empty: RW 2.0
/// metadata is per series ([`WriteRequestRef::family_metadata`]). A series' metadata whose `help_ref` or
/// `unit_ref` is outside `symbols` is dropped (the series is kept) and counted in
/// [`WriteRequestRef::metadata_dropped`] as [`MetadataDropReason::SymbolRefOutOfRange`].
///
/// # Errors
/// * [`ProtocolError::SymbolsStartNotEmpty`] when `symbols` is non-empty and `symbols[0] != ""`.
/// * [`ProtocolError::Protobuf`] on a truncated message, a nested length running past its
///   enclosing message, a varint longer than 64 bits, field number 0, a group or undefined wire
///   type, a known field sent with the wrong wire type, a symbol that is not UTF-8, or one of the
///   reserved fields 1 to 3 (an RW 1.0 body).
pub fn decode(buf: &[u8]) -> Result<WriteRequestRef<'_>, ProtocolError> {
    decode_at_most(buf, usize::MAX)
}

/// [`decode`] of a body of at most `max_series` series: a larger one is refused after the first,
/// counting pass ([`ProtocolError::TooManySeries`]), before any symbol or series is decoded.
///
/// # Errors
/// As [`decode`], and [`ProtocolError::TooManySeries`].
pub fn decode_at_most(buf: &[u8], max_series: usize) -> Result<WriteRequestRef<'_>, ProtocolError> {
    let [n_symbols, n_series] = count_fields(buf, "Request", [4, 5])?;
    if n_series > max_series {
        return Err(ProtocolError::TooManySeries {
            series: n_series,
            limit: max_series,
        });
    }
    let mut symbols: Vec<&str> = Vec::with_capacity(n_symbols);
    let mut r = Reader::new(buf, "Request");
    while !r.at_end() {
        match r.key()? {
            (4, Wire::Len) => symbols.push(utf8(r.bytes()?, "Request.symbols")?),
            (5, Wire::Len) => drop(r.bytes()?),
            (field @ (4 | 5), wire) => return Err(r.wrong_wire(field, wire)),
            (field @ 1..=3, _) => {
                return Err(r.error(format_args!(
                    "field {field} is reserved in remote write 2.0 (is this a remote write 1.0 \
                     body sent with proto=io.prometheus.write.v2.Request?)"
                )));
            }
            (_, wire) => r.skip(wire)?,
        }
    }
    if let Some(first) = symbols.first().filter(|s| !s.is_empty()) {
        let mut end = first.len().min(MAX_QUOTED_SYMBOL);
        while !first.is_char_boundary(end) {
            end -= 1;
        }
        return Err(ProtocolError::SymbolsStartNotEmpty(first[..end].to_owned()));
    }
    let mut request = WriteRequestRef {
        series: Vec::with_capacity(n_series),
        labels: Vec::new(),
        metadata: Vec::new(),
        metadata_dropped: MetadataDropped::default(),
    };
    let (mut refs, mut text) = (Vec::new(), Vec::new());
    let mut r = Reader::new(buf, "Request");
    while !r.at_end() {
        match r.key()? {
            (5, Wire::Len) => request.series.push(decode_series(
                r.bytes()?,
                &symbols,
                (&mut refs, &mut text),
                &mut request.labels,
                &mut request.metadata_dropped,
            )?),
            (_, wire) => r.skip(wire)?,
        }
    }
    Ok(request)
}

/// Every sample of the body `buf` as the receiver counts them ([`SeriesRef::sample_count`]), and its
/// series, without resolving symbols or keeping any series: for a request refused whole.
///
/// # Errors
/// As [`decode`], for the body's framing, samples and histograms.
pub fn count(buf: &[u8]) -> Result<crate::Counts, ProtocolError> {
    let mut counts = crate::Counts::default();
    let mut r = Reader::new(buf, "Request");
    while !r.at_end() {
        match r.key()? {
            (5, Wire::Len) => {
                let mut s = Reader::new(r.bytes()?, "TimeSeries");
                counts.series += 1;
                while !s.at_end() {
                    match s.key()? {
                        (2, Wire::Len) => {
                            decode_sample(s.bytes()?)?;
                            counts.samples += 1;
                        }
                        (3, Wire::Len) => {
                            counts.samples += histogram::decode(s.bytes()?)?.sample_count();
                        }
                        (field @ (2 | 3), wire) => return Err(s.wrong_wire(field, wire)),
                        (_, wire) => s.skip(wire)?,
                    }
                }
            }
            (field @ 1..=3, _) => {
                return Err(r.error(format_args!(
                    "field {field} is reserved in remote write 2.0"
                )));
            }
            (_, wire) => r.skip(wire)?,
        }
    }
    Ok(counts)
}

/// Decodes one `TimeSeries` (1 `labels_refs`, 2 samples, 3 histograms, 4 exemplars, 5 metadata,
/// 6 `created_timestamp`), its labels resolved and keyed ([`SeriesKey::of_labels`]). `refs` and
/// `text` are scratch space reused across series; metadata that cannot be resolved is counted in
/// `dropped`.
fn decode_series<'a>(
    buf: &'a [u8],
    symbols: &[&'a str],
    (refs, text): (&mut Vec<u64>, &mut Vec<u8>),
    labels: &mut Vec<Label<'a>>,
    dropped: &mut MetadataDropped,
) -> Result<SeriesRef<'a>, ProtocolError> {
    let [n_samples, n_histograms] = count_fields(buf, "TimeSeries", [2, 3])?;
    let mut series = SeriesRef {
        samples: Samples::with_capacity(n_samples),
        histograms: Vec::with_capacity(n_histograms),
        ..SeriesRef::default()
    };
    refs.clear();
    let mut metadata = RawMetadata::default();
    let (mut created, mut sample_start) = (0i64, 0i64);
    let mut r = Reader::new(buf, "TimeSeries");
    while !r.at_end() {
        match r.key()? {
            (1, wire) => r.repeated_varint(1, wire, |v| refs.push(v))?,
            (2, Wire::Len) => {
                let (sample, start) = decode_sample(r.bytes()?)?;
                series.samples.push(sample);
                if start != 0 {
                    sample_start = start;
                }
            }
            (3, Wire::Len) => series.histograms.push(histogram::decode(r.bytes()?)?),
            (4, Wire::Len) => {
                r.bytes()?;
                series.exemplars = series.exemplars.saturating_add(1);
            }
            (5, Wire::Len) => metadata.merge(r.bytes()?)?,
            (6, Wire::Varint) => created = r.int64()?,
            (field @ 2..=6, wire) => return Err(r.wrong_wire(field, wire)),
            (_, wire) => r.skip(wire)?,
        }
    }
    series.start_timestamp_ms = [sample_start, created].into_iter().find(|t| *t != 0);
    series.metadata = metadata.resolve(symbols).unwrap_or_else(|reason| {
        dropped.add(reason);
        None
    });
    let start = labels.len();
    series.labels = match resolve_labels(refs, symbols, labels) {
        Ok(()) => SeriesLabels::Decoded {
            key: SeriesKey::of_labels(&labels[start..], text),
            range: LabelRange::since(start, labels)?,
        },
        Err(error) => {
            labels.truncate(start);
            SeriesLabels::Invalid(error)
        }
    };
    Ok(series)
}

/// Resolves `labels_refs` (name, value, name, value, …) against `symbols`, in order, pushing the
/// labels onto `labels` (some may have been pushed on error: the caller truncates).
fn resolve_labels<'a>(
    refs: &[u64],
    symbols: &[&'a str],
    labels: &mut Vec<Label<'a>>,
) -> Result<(), LabelError> {
    if !refs.len().is_multiple_of(2) {
        return Err(LabelError::OddLabelRefs);
    }
    // A reference is a uint32; a larger varint is out of range too (never truncated into range).
    let symbol = |r: u64| {
        usize::try_from(r)
            .ok()
            .and_then(|r| symbols.get(r).copied())
            .ok_or(LabelError::SymbolRefOutOfRange)
    };
    labels.reserve(refs.len() / 2);
    for pair in refs.chunks_exact(2) {
        labels.push(Label {
            name: symbol(pair[0])?,
            value: symbol(pair[1])?,
        });
    }
    Ok(())
}

/// Decodes one RW 2.0 `Sample` (1 value, 2 timestamp, 3 start timestamp, all ms).
fn decode_sample(buf: &[u8]) -> Result<(Sample, i64), ProtocolError> {
    let mut sample = Sample {
        value: 0.0,
        timestamp_ms: 0,
    };
    let mut start = 0;
    let mut r = Reader::new(buf, "Sample");
    while !r.at_end() {
        match r.key()? {
            (1, Wire::Fixed64) => sample.value = r.double()?,
            (2, Wire::Varint) => sample.timestamp_ms = r.int64()?,
            (3, Wire::Varint) => start = r.int64()?,
            (field @ 1..=3, wire) => return Err(r.wrong_wire(field, wire)),
            (_, wire) => r.skip(wire)?,
        }
    }
    Ok((sample, start))
}

/// `Metadata` fields before their references are resolved. The field is a singular message, so
/// repeated occurrences merge field by field (protobuf semantics), the last value winning.
#[derive(Debug, Default)]
struct RawMetadata {
    present: bool,
    metric_type: i32,
    help_ref: u64,
    unit_ref: u64,
}

impl RawMetadata {
    /// Merges one `Metadata` message (1 type, 3 `help_ref`, 4 `unit_ref`).
    fn merge(&mut self, buf: &[u8]) -> Result<(), ProtocolError> {
        self.present = true;
        let mut r = Reader::new(buf, "Metadata");
        while !r.at_end() {
            match r.key()? {
                // enum: the low 32 bits of the varint, as protobuf specifies.
                (1, Wire::Varint) => self.metric_type = r.varint()? as i32,
                (3, Wire::Varint) => self.help_ref = r.varint()?,
                (4, Wire::Varint) => self.unit_ref = r.varint()?,
                (field @ (1 | 3 | 4), wire) => return Err(r.wrong_wire(field, wire)),
                (_, wire) => r.skip(wire)?,
            }
        }
        Ok(())
    }

    /// The metadata with its references resolved; `None` when absent.
    ///
    /// # Errors
    /// [`MetadataDropReason::SymbolRefOutOfRange`] when `help_ref` or `unit_ref` is outside
    /// `symbols`.
    fn resolve<'a>(
        &self,
        symbols: &[&'a str],
    ) -> Result<Option<SeriesMetadata<'a>>, MetadataDropReason> {
        if !self.present {
            return Ok(None);
        }
        let symbol = |r: u64| {
            usize::try_from(r)
                .ok()
                .and_then(|r| symbols.get(r).copied())
        };
        // An absent reference is 0, which means "" in a valid table; an empty table has no 0.
        let resolve = |r: u64| {
            let resolved = if r == 0 { Some("") } else { symbol(r) };
            resolved.ok_or(MetadataDropReason::SymbolRefOutOfRange)
        };
        Ok(Some(SeriesMetadata {
            metric_type: MetricType::from_wire(self.metric_type),
            help: resolve(self.help_ref)?,
            unit: resolve(self.unit_ref)?,
        }))
    }
}

#[cfg(test)]
mod tests;
