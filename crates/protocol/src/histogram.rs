//! Native histogram samples: decoded enough to turn **custom buckets** (schema −53) into the
//! classic `_bucket{le}`, `_sum` and `_count` samples they stand for. Other schemas are recognised
//! and counted, never used.
//!
//! Sources: the `Histogram` message of RW 1.0 (`proto/remote.proto`, fields 1–16) and RW 2.0
//! (`proto/remote_v2.proto`, plus `start_timestamp` = 17); the bucket layout and validity rules of
//! Prometheus' `model/histogram` (custom buckets: bucket index `i` has upper bound
//! `custom_values[i]`, index `len(custom_values)` is the `+Inf` bucket; spans are runs of populated
//! buckets, the first offset being the starting index and later ones the gap after the previous
//! span; integer histograms carry bucket counts as deltas to the previous bucket, float
//! histograms as absolute counts). Prometheus 3 writes this form when it converts classic
//! histograms (`convert_classic_histograms_to_nhcb`).
//!
//! **Staleness.** When a histogram series disappears, Prometheus' TSDB stores the staleness marker
//! as a histogram whose `sum` is the stale NaN, with schema 0 and no buckets or bounds, whatever
//! the series' schema was. Such a sample is kept, of any schema, as a stale [`CustomBuckets`], so
//! that the classic series it stands for go stale too (those whose bounds it does not list —
//! usually all finite buckets — leave by the idle timeout instead).

use super::wire::{Reader, Wire};
use super::{Label, ProtocolError, STALE_NAN_BITS, Sample, is_stale_marker};

/// The schema number of native histograms with custom bucket bounds.
pub(crate) const CUSTOM_BUCKETS_SCHEMA: i32 = -53;

/// One native histogram sample of a series, as far as the receiver reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum NativeHistogram {
    /// Custom buckets (schema −53) that passed every check, converted to cumulative form; or a
    /// staleness marker of any schema (see the module doc).
    CustomBuckets(CustomBuckets),
    /// A sample of another schema (exponential buckets): counted, not used.
    OtherSchema {
        /// The schema number on the wire (−4 to 8 for exponential buckets).
        schema: i32,
    },
    /// A custom-buckets sample whose bounds, spans or counts are inconsistent: rejected.
    Invalid(HistogramError),
}

impl NativeHistogram {
    /// How many samples this histogram sample counts for in the receiver's accounting: the
    /// `bounds + 3` classic samples a custom-buckets histogram stands for (every finite bucket,
    /// `+Inf`, `_sum`, `_count`), or 1 for a histogram that is not used.
    pub fn sample_count(&self) -> u64 {
        match self {
            NativeHistogram::CustomBuckets(h) => h.bounds.len() as u64 + 3,
            NativeHistogram::OtherSchema { .. } | NativeHistogram::Invalid(_) => 1,
        }
    }
}

/// A custom-buckets histogram sample in classic, cumulative form.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomBuckets {
    /// Timestamp, ms since the Unix epoch (field 15).
    pub timestamp_ms: i64,
    /// Start (created) timestamp, ms (RW 2.0 field 17), when sent and non-zero.
    pub(crate) start_timestamp_ms: Option<i64>,
    /// Finite upper bounds (`custom_values`), strictly increasing, in the observations' unit
    /// (seconds or tokens for vLLM). `+Inf` is implicit.
    pub bounds: Vec<f64>,
    /// Cumulative count of observations ≤ each of `bounds` (same length).
    pub cumulative: Vec<f64>,
    /// Number of observations: the `+Inf` bucket and `_count`.
    pub count: f64,
    /// Sum of observations: `_sum`.
    pub sum: f64,
}

impl CustomBuckets {
    /// True when this sample is a staleness marker (its `sum` has the stale NaN bits).
    #[cfg(test)]
    pub(crate) fn is_stale(&self) -> bool {
        is_stale_marker(self.sum)
    }
}

/// Why a custom-buckets histogram sample was rejected. The rules are Prometheus' own validation
/// of custom-bucket histograms, so a sample Prometheus would store is accepted here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum HistogramError {
    /// `custom_values` is not strictly increasing (a NaN bound included).
    #[error("custom bucket bounds are not strictly increasing")]
    BoundsNotIncreasing,
    /// The last of `custom_values` is `+Inf`, which must stay implicit.
    #[error("custom bucket bounds must be finite (+Inf is implicit)")]
    InfiniteBound,
    /// A span has a negative offset (custom buckets start at index 0).
    #[error("a bucket span has a negative offset")]
    NegativeSpanOffset,
    /// The spans' lengths do not add up to the number of bucket counts sent.
    #[error("bucket spans and bucket counts disagree in number")]
    SpansBucketsMismatch,
    /// The spans reach past the last bucket (`+Inf`, index `len(custom_values)`).
    #[error("bucket spans reach past the custom bounds")]
    TooFewBounds,
    /// A zero bucket (threshold or count): custom buckets have none.
    #[error("custom bucket histograms must have an empty zero bucket")]
    ZeroBucket,
    /// Negative spans or buckets: custom buckets have none.
    #[error("custom bucket histograms must not have negative buckets")]
    NegativeBuckets,
    /// A bucket count is negative (or overflows 64 bits when adding up deltas).
    #[error("a bucket count is negative")]
    NegativeBucketCount,
    /// An integer histogram whose count is not the sum of its bucket counts.
    #[error("count differs from the sum of the bucket counts")]
    CountMismatch,
    /// An integer histogram with a NaN sum whose count is below the sum of its bucket counts.
    #[error("count is below the sum of the bucket counts")]
    CountNotBigEnough,
    /// The series already has an `le` label, so its classic buckets cannot be named.
    #[error("a custom bucket histogram series must not carry an le label")]
    LeLabel,
}

/// The `count` and `zero_count` oneofs: integer or float.
#[derive(Debug, Clone, Copy)]
enum Count {
    Int(u64),
    Float(f64),
}

/// Decodes one `Histogram` message (RW 1.0 or 2.0: same field numbers, 17 only in 2.0).
///
/// # Errors
/// [`ProtocolError::Protobuf`] for wire-level faults only (truncation, wrong wire type of a known
/// field, a packed double field whose length is not a multiple of 8). A well-formed message with
/// an inconsistent layout is [`NativeHistogram::Invalid`], not an error: it rejects one sample,
/// not the request.
pub(crate) fn decode(buf: &[u8]) -> Result<NativeHistogram, ProtocolError> {
    let mut count = Count::Int(0);
    let mut zero_count = Count::Int(0);
    let (mut sum, mut zero_threshold) = (0.0, 0.0);
    let (mut schema, mut timestamp_ms, mut start_ts) = (0, 0, 0);
    let mut negative = false;
    let mut spans: Vec<(i32, u32)> = Vec::new();
    let mut deltas: Vec<i64> = Vec::new();
    let mut counts: Vec<f64> = Vec::new();
    let mut bounds: Vec<f64> = Vec::new();
    let mut r = Reader::new(buf, "Histogram");
    while !r.at_end() {
        match r.key()? {
            (1, Wire::Varint) => count = Count::Int(r.varint()?),
            (2, Wire::Fixed64) => count = Count::Float(r.double()?),
            (3, Wire::Fixed64) => sum = r.double()?,
            (4, Wire::Varint) => schema = r.sint32()?,
            (5, Wire::Fixed64) => zero_threshold = r.double()?,
            (6, Wire::Varint) => zero_count = Count::Int(r.varint()?),
            (7, Wire::Fixed64) => zero_count = Count::Float(r.double()?),
            (8, Wire::Len) => {
                decode_span(r.bytes()?)?;
                negative = true;
            }
            (9, wire) => r.repeated_varint(9, wire, |_| negative = true)?,
            (10, wire) => r.repeated_double(10, wire, |_| negative = true)?,
            (11, Wire::Len) => spans.push(decode_span(r.bytes()?)?),
            (12, wire) => r.repeated_varint(12, wire, |v| {
                deltas.push(super::wire::zigzag64(v));
            })?,
            (13, wire) => r.repeated_double(13, wire, |v| counts.push(v))?,
            (14, Wire::Varint) => drop(r.varint()?),
            (15, Wire::Varint) => timestamp_ms = r.int64()?,
            (16, wire) => r.repeated_double(16, wire, |v| bounds.push(v))?,
            (17, Wire::Varint) => start_ts = r.int64()?,
            (field @ 1..=17, wire) => return Err(r.wrong_wire(field, wire)),
            (_, wire) => r.skip(wire)?,
        }
    }
    let start_timestamp_ms = (start_ts != 0).then_some(start_ts);
    if is_stale_marker(sum) {
        let stale = f64::from_bits(STALE_NAN_BITS);
        if schema != CUSTOM_BUCKETS_SCHEMA || check_bounds(&bounds).is_err() {
            bounds.clear();
        }
        return Ok(NativeHistogram::CustomBuckets(CustomBuckets {
            timestamp_ms,
            start_timestamp_ms,
            cumulative: vec![stale; bounds.len()],
            bounds,
            count: stale,
            sum: stale,
        }));
    }
    if schema != CUSTOM_BUCKETS_SCHEMA {
        return Ok(NativeHistogram::OtherSchema { schema });
    }
    let zero_bucket_empty = zero_threshold == 0.0
        && match zero_count {
            Count::Int(n) => n == 0,
            Count::Float(n) => n == 0.0,
        };
    let layout = Layout {
        bounds: &bounds,
        spans: &spans,
        zero_bucket_empty,
        negative,
    };
    Ok(match layout.cumulative(count, &deltas, &counts, sum) {
        Ok((cumulative, count)) => NativeHistogram::CustomBuckets(CustomBuckets {
            timestamp_ms,
            start_timestamp_ms,
            bounds,
            cumulative,
            count,
            sum,
        }),
        Err(e) => NativeHistogram::Invalid(e),
    })
}

/// Decodes one `BucketSpan` (1 `sint32` offset, 2 `uint32` length).
fn decode_span(buf: &[u8]) -> Result<(i32, u32), ProtocolError> {
    let (mut offset, mut length) = (0, 0);
    let mut r = Reader::new(buf, "BucketSpan");
    while !r.at_end() {
        match r.key()? {
            (1, Wire::Varint) => offset = r.sint32()?,
            // uint32: the low 32 bits of the varint, as protobuf specifies.
            (2, Wire::Varint) => length = r.varint()? as u32,
            (field @ (1 | 2), wire) => return Err(r.wrong_wire(field, wire)),
            (_, wire) => r.skip(wire)?,
        }
    }
    Ok((offset, length))
}

/// Bounds strictly increasing from −∞ (so no NaN and no −∞) and the last one finite.
fn check_bounds(bounds: &[f64]) -> Result<(), HistogramError> {
    let mut previous = f64::NEG_INFINITY;
    for &bound in bounds {
        if bound.is_nan() || bound <= previous {
            return Err(HistogramError::BoundsNotIncreasing);
        }
        previous = bound;
    }
    if previous == f64::INFINITY {
        return Err(HistogramError::InfiniteBound);
    }
    Ok(())
}

/// The parts of a custom-buckets histogram that decide its bucket layout.
struct Layout<'h> {
    bounds: &'h [f64],
    spans: &'h [(i32, u32)],
    zero_bucket_empty: bool,
    negative: bool,
}

impl Layout<'_> {
    /// Validates the layout and returns the cumulative count at each bound and the total count.
    fn cumulative(
        &self,
        count: Count,
        deltas: &[i64],
        counts: &[f64],
        sum: f64,
    ) -> Result<(Vec<f64>, f64), HistogramError> {
        check_bounds(self.bounds)?;
        if !self.zero_bucket_empty {
            return Err(HistogramError::ZeroBucket);
        }
        if self.negative {
            return Err(HistogramError::NegativeBuckets);
        }
        let n_buckets = match count {
            Count::Int(_) => deltas.len(),
            Count::Float(_) => counts.len(),
        };
        let (mut in_spans, mut reach) = (0u64, 0u64);
        for &(offset, length) in self.spans {
            let Ok(offset) = u64::try_from(offset) else {
                return Err(HistogramError::NegativeSpanOffset);
            };
            in_spans += u64::from(length);
            reach += offset + u64::from(length);
        }
        if in_spans != n_buckets as u64 {
            return Err(HistogramError::SpansBucketsMismatch);
        }
        if reach > self.bounds.len() as u64 + 1 {
            return Err(HistogramError::TooFewBounds);
        }
        // Absolute count per bucket index (0 ..= len(bounds), the last being +Inf).
        let mut per_index = vec![0.0; self.bounds.len() + 1];
        let mut absolute: i64 = 0;
        let mut total: u128 = 0;
        let mut bucket = 0usize;
        let mut index = 0usize;
        for &(offset, length) in self.spans {
            // Both fit: offset ≥ 0 and the reach check bounds every index by len(bounds).
            index += offset as usize;
            for _ in 0..length {
                let value = match count {
                    Count::Int(_) => {
                        absolute = absolute
                            .checked_add(deltas[bucket])
                            .filter(|a| *a >= 0)
                            .ok_or(HistogramError::NegativeBucketCount)?;
                        total += absolute as u128;
                        absolute as f64
                    }
                    Count::Float(_) if counts[bucket] < 0.0 => {
                        return Err(HistogramError::NegativeBucketCount);
                    }
                    Count::Float(_) => counts[bucket],
                };
                per_index[index] += value;
                bucket += 1;
                index += 1;
            }
        }
        let count = match count {
            // Float histograms are not checked against their count: Prometheus does not either,
            // float rounding would make an exact test fail on valid data.
            Count::Float(c) => c,
            Count::Int(c) if sum.is_nan() && total > u128::from(c) => {
                return Err(HistogramError::CountNotBigEnough);
            }
            Count::Int(c) if !sum.is_nan() && total != u128::from(c) => {
                return Err(HistogramError::CountMismatch);
            }
            Count::Int(c) => c as f64,
        };
        let mut running = 0.0;
        let cumulative = per_index[..self.bounds.len()]
            .iter()
            .map(|c| {
                running += c;
                running
            })
            .collect();
        Ok((cumulative, count))
    }
}

/// Calls `each(labels, samples)` once per classic series that `histograms` stand for: for a
/// series `X`, `X_bucket{le}` for every bound and `le="+Inf"` (the count), `X_sum` and `X_count`,
/// each with one sample per histogram sample, oldest first (timestamps in ms).
///
/// `labels` is the histogram series' normalised label set (sorted by name, with `__name__`); the
/// labels passed to `each` are normalised too (`__name__` replaced, `le` inserted in order). `le`
/// is printed as Prometheus 3 normalises it ([`super::float::write_le`]: `0.05`, `1.0`, `1e+06`,
/// `+Inf`).
/// Consecutive samples with the same bounds share one call per classic series.
///
/// # Errors
/// [`HistogramError::LeLabel`] when `labels` already hold an `le` label; `each` is then never
/// called.
pub fn for_each_classic_series(
    labels: &[Label<'_>],
    histograms: &[CustomBuckets],
    mut each: impl FnMut(&[Label<'_>], &[Sample]),
) -> Result<(), HistogramError> {
    if labels.iter().any(|l| l.name == "le") {
        return Err(HistogramError::LeLabel);
    }
    let name = labels
        .iter()
        .find(|l| l.name == super::labels::METRIC_NAME_LABEL)
        .map_or("", |l| l.value);
    let [bucket_name, sum_name, count_name] =
        ["_bucket", "_sum", "_count"].map(|suffix| format!("{name}{suffix}"));
    let mut le = String::new();
    let mut samples: Vec<Sample> = Vec::new();
    let mut emit = |name: &str,
                    le: Option<&str>,
                    value: &dyn Fn(&CustomBuckets) -> f64,
                    run: &[CustomBuckets]| {
        let mut out: Vec<Label<'_>> = Vec::with_capacity(labels.len() + 1);
        out.extend(labels.iter().map(|l| {
            if l.name == super::labels::METRIC_NAME_LABEL {
                Label {
                    name: l.name,
                    value: name,
                }
            } else {
                *l
            }
        }));
        if let Some(le) = le {
            let at = out.partition_point(|l| l.name < "le");
            out.insert(
                at,
                Label {
                    name: "le",
                    value: le,
                },
            );
        }
        samples.clear();
        samples.extend(run.iter().map(|h| Sample {
            value: value(h),
            timestamp_ms: h.timestamp_ms,
        }));
        each(&out, &samples);
    };
    for run in histograms.chunk_by(|a, b| a.bounds == b.bounds) {
        for i in 0..run[0].bounds.len() {
            le.clear();
            super::float::write_le(&mut le, run[0].bounds[i]);
            emit(&bucket_name, Some(&le), &|h| h.cumulative[i], run);
        }
        emit(&bucket_name, Some("+Inf"), &|h| h.count, run);
        emit(&sum_name, None, &|h| h.sum, run);
        emit(&count_name, None, &|h| h.count, run);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
