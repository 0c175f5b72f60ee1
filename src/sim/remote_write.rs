//! Remote write of the simulator's own samples (RW 1.0), so `demo` runs without Prometheus.
//!
//! The messages are small prost derives written from the RW 1.0 field numbers
//! (`prometheus.WriteRequest`: timeseries = 1, metadata = 3; `TimeSeries`: labels = 1,
//! samples = 2; `Label`: name = 1, value = 2; `Sample`: value = 1, timestamp = 2;
//! `MetricMetadata`: type = 1, metric_family_name = 2, help = 4, unit = 5). They are kept local
//! to the simulator so it does not depend on the receiver's generated types.
//!
//! Like Prometheus, a scrape is sent in batches of at most `max_samples_per_send` samples
//! (default 500), all with the scrape timestamp, and metadata goes in separate requests.

use prost::Message;

use super::exposition::{ExposedType, Snapshot};

/// RW 1.0 `WriteRequest`.
#[derive(Clone, PartialEq, Message)]
pub struct WriteRequest {
    /// Series with their samples.
    #[prost(message, repeated, tag = "1")]
    pub timeseries: Vec<TimeSeries>,
    /// Metadata entries.
    #[prost(message, repeated, tag = "3")]
    pub metadata: Vec<MetricMetadata>,
}

/// RW 1.0 `TimeSeries` (float samples only).
#[derive(Clone, PartialEq, Message)]
pub struct TimeSeries {
    /// Labels, `__name__` included, sorted by name.
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
    /// Samples.
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<Sample>,
}

/// RW 1.0 `Label`.
#[derive(Clone, PartialEq, Message)]
pub struct Label {
    /// Label name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Label value.
    #[prost(string, tag = "2")]
    pub value: String,
}

/// RW 1.0 `Sample`.
#[derive(Clone, PartialEq, Message)]
pub struct Sample {
    /// Value.
    #[prost(double, tag = "1")]
    pub value: f64,
    /// Timestamp, Unix ms.
    #[prost(int64, tag = "2")]
    pub timestamp: i64,
}

/// RW 1.0 `MetricMetadata`.
#[derive(Clone, PartialEq, Message)]
pub struct MetricMetadata {
    /// `MetricType`: COUNTER 1, GAUGE 2, HISTOGRAM 3.
    #[prost(int32, tag = "1")]
    pub r#type: i32,
    /// Family name as on the `# TYPE` line.
    #[prost(string, tag = "2")]
    pub metric_family_name: String,
    /// Help text.
    #[prost(string, tag = "4")]
    pub help: String,
    /// Unit (empty).
    #[prost(string, tag = "5")]
    pub unit: String,
}

/// The snapshot's samples as `WriteRequest`s of at most `max_samples` samples each, every
/// series carrying `extra_labels` (target and external labels; a label of the same name from
/// the exposition wins, as with `honor_labels: true`).
pub fn write_requests(
    snap: &Snapshot,
    extra_labels: &[(String, String)],
    max_samples: usize,
) -> Vec<WriteRequest> {
    let mut out = Vec::new();
    let mut cur = WriteRequest::default();
    for s in snap.samples() {
        let mut labels: Vec<Label> = vec![Label {
            name: "__name__".into(),
            value: s.name.clone(),
        }];
        labels.extend(s.labels.iter().map(|(k, v)| Label {
            name: k.clone(),
            value: v.clone(),
        }));
        for (k, v) in extra_labels {
            if !labels.iter().any(|l| &l.name == k) {
                labels.push(Label {
                    name: k.clone(),
                    value: v.clone(),
                });
            }
        }
        labels.sort_by(|a, b| a.name.cmp(&b.name));
        cur.timeseries.push(TimeSeries {
            labels,
            samples: vec![Sample {
                value: s.value,
                timestamp: snap.timestamp_ms,
            }],
        });
        if cur.timeseries.len() >= max_samples.max(1) {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.timeseries.is_empty() {
        out.push(cur);
    }
    out
}

/// One metadata-only `WriteRequest` for every family of the snapshot.
pub fn metadata_request(snap: &Snapshot) -> WriteRequest {
    let metadata = snap
        .families
        .iter()
        .map(|f| MetricMetadata {
            r#type: match f.exposed_type {
                ExposedType::Counter => 1,
                ExposedType::Gauge => 2,
                ExposedType::Histogram => 3,
            },
            metric_family_name: f.name.clone(),
            help: f.help.clone(),
            unit: String::new(),
        })
        .collect();
    WriteRequest {
        timeseries: Vec::new(),
        metadata,
    }
}

/// Protobuf-encodes and snappy-compresses (block format) a request body.
pub fn encode(req: &WriteRequest) -> Vec<u8> {
    let raw = req.encode_to_vec();
    snap::raw::Encoder::new()
        .compress_vec(&raw)
        .expect("snappy block compression of an in-memory buffer")
}

/// POSTs one encoded body to `url` with the RW 1.0 headers.
/// Errors: a transport error or a non-2xx status, as a readable message.
pub async fn post(client: &reqwest::Client, url: &str, body: Vec<u8>) -> Result<(), String> {
    let resp = client
        .post(url)
        .header("Content-Encoding", "snappy")
        .header("Content-Type", "application/x-protobuf")
        .header("X-Prometheus-Remote-Write-Version", "0.1.0")
        .header(
            "User-Agent",
            concat!("vllm-corrector-simulator/", env!("CARGO_PKG_VERSION")),
        )
        .body(body)
        .send()
        .await
        .map_err(|e| format!("remote write to {url} failed: {e}"))?;
    let status = resp.status();
    if status.is_success() {
        Ok(())
    } else {
        let text = resp.text().await.unwrap_or_default();
        Err(format!(
            "remote write to {url} answered {status}: {}",
            text.trim()
        ))
    }
}
