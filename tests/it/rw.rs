//! A Remote-Write 1.0 body builder of the test's own, independent of the code under test.
//!
//! The messages are prost derive structs written from the RW 1.0 field numbers
//! (`WriteRequest.timeseries = 1`, `TimeSeries.labels = 1`, `.samples = 2`, `Label.name = 1`,
//! `.value = 2`, `Sample.value = 1`, `.timestamp = 2`); the body is snappy block format.

use prost::Message;

/// RW 1.0 `WriteRequest` (only the fields the tests send).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct WriteRequest {
    /// `repeated TimeSeries timeseries = 1`.
    #[prost(message, repeated, tag = "1")]
    pub timeseries: Vec<TimeSeries>,
}

/// RW 1.0 `TimeSeries`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TimeSeries {
    /// `repeated Label labels = 1`.
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
    /// `repeated Sample samples = 2`.
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<Sample>,
}

/// RW 1.0 `Label`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Label {
    /// `string name = 1`.
    #[prost(string, tag = "1")]
    pub name: String,
    /// `string value = 2`.
    #[prost(string, tag = "2")]
    pub value: String,
}

/// RW 1.0 `Sample`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Sample {
    /// `double value = 1`.
    #[prost(double, tag = "1")]
    pub value: f64,
    /// `int64 timestamp = 2`, milliseconds.
    #[prost(int64, tag = "2")]
    pub timestamp: i64,
}

/// The Prometheus staleness marker, by bits.
pub(crate) const STALE_NAN: u64 = 0x7ff0_0000_0000_0002;

/// One sample of one series: labels (with `__name__`), value and timestamp in ms.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Point {
    /// Label pairs, `__name__` included, sorted by name.
    pub labels: Vec<(String, String)>,
    /// Sample value.
    pub value: f64,
    /// Timestamp, ms since the epoch.
    pub timestamp_ms: i64,
}

impl Point {
    /// The value of label `name`.
    pub(crate) fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The same series with a staleness marker at `timestamp_ms`.
    pub(crate) fn stale_at(&self, timestamp_ms: i64) -> Point {
        Point {
            labels: self.labels.clone(),
            value: f64::from_bits(STALE_NAN),
            timestamp_ms,
        }
    }
}

/// A snappy-compressed RW 1.0 body with one `TimeSeries` per point, in the given order.
pub(crate) fn body(points: &[Point]) -> Vec<u8> {
    let request = WriteRequest {
        timeseries: points
            .iter()
            .map(|p| TimeSeries {
                labels: p
                    .labels
                    .iter()
                    .map(|(n, v)| Label {
                        name: n.clone(),
                        value: v.clone(),
                    })
                    .collect(),
                samples: vec![Sample {
                    value: p.value,
                    timestamp: p.timestamp_ms,
                }],
            })
            .collect(),
    };
    snap::raw::Encoder::new()
        .compress_vec(&request.encode_to_vec())
        .expect("snappy compression of a test body")
}

#[test]
fn body_round_trips_through_prost_and_snappy_with_stale_bits_intact() {
    let point = Point {
        labels: vec![
            ("__name__".into(), "vllm:generation_tokens_total".into()),
            ("engine".into(), "0".into()),
        ],
        value: 1240.0,
        timestamp_ms: 1_750_000_000_000,
    };
    let stale = point.stale_at(1_750_000_015_000);
    let bytes = body(&[point.clone(), stale]);
    let raw = snap::raw::Decoder::new().decompress_vec(&bytes).unwrap();
    let decoded = WriteRequest::decode(raw.as_slice()).unwrap();
    assert_eq!(decoded.timeseries.len(), 2);
    assert_eq!(decoded.timeseries[0].labels[1].value, "0");
    assert_eq!(decoded.timeseries[0].samples[0].value, 1240.0);
    assert_eq!(decoded.timeseries[1].samples[0].value.to_bits(), STALE_NAN);
    assert_eq!(
        decoded.timeseries[1].samples[0].timestamp,
        1_750_000_015_000
    );
}
