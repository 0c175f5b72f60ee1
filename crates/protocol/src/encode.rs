//! Request encoders for tests, benches, fuzz seeds and the simulator's remote write
//! (`crates/sim/src/remote_write.rs`): owned series in, a snappy-compressed remote-write body out,
//! exactly as a sender would POST it. Compiled with the `encode` feature (and in this crate's tests).
//!
//! Built on the prost types of [`super::prompb`] (`proto/remote.proto`, `proto/remote_v2.proto`)
//! and `snap::raw` (snappy **block** format, as the remote-write specs require). Not the hot path.

use std::collections::HashMap;

use super::prompb::{v1, v2};
use super::{MetadataRef, MetricType, Sample};

/// One series to encode: its label pairs `(name, value)` in the order to send, and its samples
/// (values as given, timestamps in milliseconds).
pub type SeriesSpec = (Vec<(String, String)>, Vec<Sample>);

/// A [`SeriesSpec`] from borrowed label pairs and `(value, timestamp in ms)` samples, in order.
pub fn series_spec(labels: &[(&str, &str)], samples: &[(f64, i64)]) -> SeriesSpec {
    (
        labels
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
        samples
            .iter()
            .map(|&(value, timestamp_ms)| Sample {
                value,
                timestamp_ms,
            })
            .collect(),
    )
}

/// Builds an RW 1.0 `prometheus.WriteRequest` from `series` and `metadata` (pass `&[]` for none).
///
/// Labels are sent in the given order, unsorted and unchecked, so tests can send invalid sets.
pub fn write_request_v1(series: &[SeriesSpec], metadata: &[MetadataRef<'_>]) -> v1::WriteRequest {
    v1::WriteRequest {
        timeseries: series
            .iter()
            .map(|(labels, samples)| v1::TimeSeries {
                labels: labels
                    .iter()
                    .map(|(name, value)| v1::Label {
                        name: name.clone(),
                        value: value.clone(),
                    })
                    .collect(),
                samples: samples
                    .iter()
                    .map(|s| v1::Sample {
                        value: s.value,
                        timestamp: s.timestamp_ms,
                    })
                    .collect(),
                exemplars: Vec::new(),
                histograms: Vec::new(),
            })
            .collect(),
        metadata: metadata
            .iter()
            .map(|m| v1::MetricMetadata {
                r#type: m.metric_type.to_wire(),
                metric_family_name: m.family_name.to_owned(),
                help: m.help.to_owned(),
                unit: m.unit.to_owned(),
            })
            .collect(),
    }
}

/// Encodes an RW 1.0 request body: [`write_request_v1`], protobuf-encoded, then snappy-compressed.
/// Send it with `Content-Type: application/x-protobuf` and `Content-Encoding: snappy`.
pub fn encode_v1(series: &[SeriesSpec], metadata: &[MetadataRef<'_>]) -> Vec<u8> {
    compress(&prost::Message::encode_to_vec(&write_request_v1(
        series, metadata,
    )))
}

/// Builds an RW 2.0 `io.prometheus.write.v2.Request` from `series`: every label string is interned
/// once in `symbols` (with `symbols[0] == ""`, as the 2.0 spec requires), and each series refers to
/// its labels by `(name, value)` index pairs. No metadata is sent.
pub fn request_v2(series: &[SeriesSpec]) -> v2::Request {
    let mut builder = RequestV2Builder::new();
    for (labels, samples) in series {
        let labels_refs = builder.label_refs(labels);
        builder.push(v2::TimeSeries {
            labels_refs,
            samples: samples
                .iter()
                .map(|s| v2::Sample {
                    value: s.value,
                    timestamp: s.timestamp_ms,
                    start_timestamp: 0,
                })
                .collect(),
            ..Default::default()
        });
    }
    builder.build()
}

/// Builds RW 2.0 requests series by series, interning strings into one `symbols` table that
/// starts with `""`. For tests that need what [`request_v2`] does not send: metadata, created
/// timestamps, native histograms, or deliberately bad references.
#[derive(Debug)]
pub struct RequestV2Builder {
    symbols: Vec<String>,
    index: HashMap<String, u32>,
    timeseries: Vec<v2::TimeSeries>,
}

impl Default for RequestV2Builder {
    fn default() -> Self {
        Self::new()
    }
}

impl RequestV2Builder {
    /// An empty request whose symbol table holds only `""` (index 0).
    pub fn new() -> Self {
        RequestV2Builder {
            symbols: vec![String::new()],
            index: HashMap::from([(String::new(), 0)]),
            timeseries: Vec::new(),
        }
    }

    /// The index of `s` in the symbol table, adding it on first use.
    ///
    /// # Panics
    /// Past 2^32 distinct strings.
    pub(crate) fn intern(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = u32::try_from(self.symbols.len()).expect("fewer than 2^32 distinct strings");
        self.symbols.push(s.to_owned());
        self.index.insert(s.to_owned(), i);
        i
    }

    /// `labels_refs` for `labels`, in the given order: name, value, name, value, ….
    pub fn label_refs(&mut self, labels: &[(String, String)]) -> Vec<u32> {
        labels
            .iter()
            .flat_map(|(n, v)| [self.intern(n), self.intern(v)])
            .collect()
    }

    /// `Metadata` of `metric_type` with `help` and `unit` interned.
    pub fn metadata(&mut self, metric_type: MetricType, help: &str, unit: &str) -> v2::Metadata {
        v2::Metadata {
            r#type: metric_type.to_wire(),
            help_ref: self.intern(help),
            unit_ref: self.intern(unit),
        }
    }

    /// Appends one series (its references must come from this builder).
    pub fn push(&mut self, series: v2::TimeSeries) {
        self.timeseries.push(series);
    }

    /// The finished request.
    pub fn build(self) -> v2::Request {
        v2::Request {
            symbols: self.symbols,
            timeseries: self.timeseries,
        }
    }
}

/// One classic histogram sample to send as a native histogram with custom buckets (schema −53),
/// the form Prometheus 3 writes when it converts classic histograms.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomBucketsSpec {
    /// Finite upper bounds, strictly increasing (`+Inf` implicit).
    pub bounds: Vec<f64>,
    /// Cumulative count at each of `bounds`.
    pub cumulative: Vec<f64>,
    /// Total count (the `+Inf` bucket).
    pub count: f64,
    /// Sum of observations.
    pub sum: f64,
    /// Timestamp, ms.
    pub timestamp_ms: i64,
    /// Float histogram (absolute `positive_counts`) instead of integer (`positive_deltas`).
    pub float: bool,
}

/// The bucket layout of a [`CustomBucketsSpec`]: spans over the non-empty buckets (index `i` is
/// `bounds[i]`, index `len(bounds)` is `+Inf`), integer deltas and float counts.
struct Layout {
    spans: Vec<(i32, u32)>,
    deltas: Vec<i64>,
    counts: Vec<f64>,
}

impl CustomBucketsSpec {
    fn layout(&self) -> Layout {
        let mut per_bucket: Vec<f64> = Vec::with_capacity(self.bounds.len() + 1);
        let mut previous = 0.0;
        for &c in self.cumulative.iter().chain([self.count].iter()) {
            per_bucket.push(c - previous);
            previous = c;
        }
        let mut layout = Layout {
            spans: Vec::new(),
            deltas: Vec::new(),
            counts: Vec::new(),
        };
        // Empty buckets are left out, as Prometheus does: a gap becomes the next span's offset.
        let (mut gap, mut last_in_span, mut previous_count) = (0i32, false, 0i64);
        for &c in &per_bucket {
            if c == 0.0 {
                gap += 1;
                last_in_span = false;
                continue;
            }
            if last_in_span {
                layout.spans.last_mut().expect("a span is open").1 += 1;
            } else {
                layout.spans.push((gap, 1));
                gap = 0;
            }
            last_in_span = true;
            layout.counts.push(c);
            layout.deltas.push(c as i64 - previous_count);
            previous_count = c as i64;
        }
        layout
    }

    /// As an RW 1.0 `Histogram`.
    pub fn to_v1(&self) -> v1::Histogram {
        let l = self.layout();
        v1::Histogram {
            count: Some(if self.float {
                v1::histogram::Count::CountFloat(self.count)
            } else {
                v1::histogram::Count::CountInt(self.count as u64)
            }),
            sum: self.sum,
            schema: -53,
            positive_spans: l
                .spans
                .iter()
                .map(|&(offset, length)| v1::BucketSpan { offset, length })
                .collect(),
            positive_deltas: if self.float { Vec::new() } else { l.deltas },
            positive_counts: if self.float { l.counts } else { Vec::new() },
            timestamp: self.timestamp_ms,
            custom_values: self.bounds.clone(),
            ..Default::default()
        }
    }

    /// As an RW 2.0 `Histogram` (no start timestamp).
    pub fn to_v2(&self) -> v2::Histogram {
        let l = self.layout();
        v2::Histogram {
            count: Some(if self.float {
                v2::histogram::Count::CountFloat(self.count)
            } else {
                v2::histogram::Count::CountInt(self.count as u64)
            }),
            sum: self.sum,
            schema: -53,
            positive_spans: l
                .spans
                .iter()
                .map(|&(offset, length)| v2::BucketSpan { offset, length })
                .collect(),
            positive_deltas: if self.float { Vec::new() } else { l.deltas },
            positive_counts: if self.float { l.counts } else { Vec::new() },
            timestamp: self.timestamp_ms,
            custom_values: self.bounds.clone(),
            ..Default::default()
        }
    }
}

/// Encodes an RW 2.0 request body: [`request_v2`], protobuf-encoded, then snappy-compressed.
/// Its Content-Type would be `application/x-protobuf;proto=io.prometheus.write.v2.Request`.
pub fn encode_v2(series: &[SeriesSpec]) -> Vec<u8> {
    compress(&prost::Message::encode_to_vec(&request_v2(series)))
}

/// Snappy-compresses `bytes` in block format (not framed).
///
/// # Panics
/// Only if `bytes` exceeds snappy's 4 GiB input limit.
pub fn compress(bytes: &[u8]) -> Vec<u8> {
    snap::raw::Encoder::new()
        .compress_vec(bytes)
        .expect("input under snappy's 4 GiB limit")
}

#[cfg(test)]
mod tests;
