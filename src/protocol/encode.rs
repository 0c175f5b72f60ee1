//! Request encoders for tests and the future simulator: owned series in, a snappy-compressed
//! remote-write body out, exactly as a sender would POST it.
//!
//! Built on the prost types of [`super::prompb`] (`proto/remote.proto`, `proto/remote_v2.proto`)
//! and `snap::raw` (snappy **block** format, as the remote-write specs require). Not the hot path.

use std::collections::HashMap;

use super::prompb::{v1, v2};
use super::{MetadataRef, Sample};

/// One series to encode: its label pairs `(name, value)` in the order to send, and its samples
/// (values as given, timestamps in milliseconds).
pub type SeriesSpec = (Vec<(String, String)>, Vec<Sample>);

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
    let mut symbols = vec![String::new()];
    let mut index: HashMap<String, u32> = HashMap::from([(String::new(), 0)]);
    let mut intern = |s: &str| -> u32 {
        if let Some(&i) = index.get(s) {
            return i;
        }
        let i = u32::try_from(symbols.len()).expect("fewer than 2^32 distinct label strings");
        symbols.push(s.to_owned());
        index.insert(s.to_owned(), i);
        i
    };
    let timeseries = series
        .iter()
        .map(|(labels, samples)| v2::TimeSeries {
            labels_refs: labels
                .iter()
                .flat_map(|(n, v)| [intern(n), intern(v)])
                .collect(),
            samples: samples
                .iter()
                .map(|s| v2::Sample {
                    value: s.value,
                    timestamp: s.timestamp_ms,
                    start_timestamp: 0,
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    v2::Request {
        symbols,
        timeseries,
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
mod tests {
    use super::*;
    use crate::protocol::{MetricType, snappy, v1 as decoder};

    fn spec(labels: &[(&str, &str)], samples: &[(f64, i64)]) -> SeriesSpec {
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

    #[test]
    fn v1_body_decodes_back_to_the_same_series_and_metadata() {
        let series = [
            spec(
                &[("__name__", "vllm:num_requests_running"), ("engine", "0")],
                &[(3.0, 1000), (4.0, 16000)],
            ),
            spec(&[("__name__", "up")], &[(1.0, -5)]),
        ];
        let metadata = [MetadataRef {
            metric_type: MetricType::Gauge,
            family_name: "vllm:num_requests_running",
            help: "Number of requests in model execution batches.",
            unit: "",
        }];
        let body = encode_v1(&series, &metadata);
        let mut raw = Vec::new();
        snappy::decompress_into(&body, 1 << 20, &mut raw).unwrap();
        let req = decoder::decode(&raw).unwrap();
        assert_eq!(req.series.len(), 2);
        assert_eq!(req.series[0].labels[1].name, "engine");
        assert_eq!(req.series[0].labels[1].value, "0");
        assert_eq!(
            req.series[0].samples,
            [
                Sample {
                    value: 3.0,
                    timestamp_ms: 1000
                },
                Sample {
                    value: 4.0,
                    timestamp_ms: 16000
                }
            ]
        );
        assert_eq!(
            req.series[1].samples,
            [Sample {
                value: 1.0,
                timestamp_ms: -5
            }]
        );
        assert_eq!(req.metadata, metadata);
    }

    #[test]
    fn v2_symbols_start_empty_and_are_interned_once() {
        let series = [
            spec(&[("__name__", "a"), ("job", "x")], &[(1.0, 7)]),
            spec(&[("__name__", "b"), ("job", "x")], &[]),
        ];
        let req = request_v2(&series);
        // Interning order: "", "__name__", "a", "job", "x", then "b" (the rest are known).
        assert_eq!(req.symbols, ["", "__name__", "a", "job", "x", "b"]);
        assert_eq!(req.timeseries[0].labels_refs, [1, 2, 3, 4]);
        assert_eq!(req.timeseries[1].labels_refs, [1, 5, 3, 4]);
        assert_eq!(req.timeseries[0].samples[0].timestamp, 7);
    }
}
