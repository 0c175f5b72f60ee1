//! Remote write of the simulator's own samples (RW 1.0), so `demo` runs without Prometheus.
//!
//! The messages are the receiver's own generated RW 1.0 types ([`protocol::prompb::v1`],
//! from `proto/remote.proto`), built with [`protocol::encode::write_request_v1`] and
//! snappy-compressed (block format) with [`protocol::encode::compress`], so the simulator
//! and the receiver share one schema.
//!
//! Like Prometheus, a scrape is sent in batches of at most `max_samples_per_send` samples
//! (default 500), all with the scrape timestamp, and metadata goes in separate requests.

use super::exposition::{ExposedType, Snapshot};
use protocol::encode::{SeriesSpec, compress, write_request_v1};
use protocol::{MetadataRef, MetricType, Sample};

pub(crate) use protocol::prompb::v1::WriteRequest;

/// The snapshot's samples as `WriteRequest`s of at most `max_samples` samples each (one sample
/// per series, timestamp = the snapshot's Unix ms), every series carrying `extra_labels` (target
/// and external labels; a label of the same name from the exposition wins, as with
/// `honor_labels: true`). Labels are sorted by name, `__name__` included, as Prometheus sends them.
pub fn write_requests(
    snap: &Snapshot,
    extra_labels: &[(String, String)],
    max_samples: usize,
) -> Vec<WriteRequest> {
    let series: Vec<SeriesSpec> = snap
        .samples()
        .map(|s| {
            let mut labels = Vec::with_capacity(1 + s.labels.len() + extra_labels.len());
            labels.push(("__name__".to_owned(), s.name.clone()));
            labels.extend(s.labels.iter().cloned());
            for (k, v) in extra_labels {
                if !labels.iter().any(|(name, _)| name == k) {
                    labels.push((k.clone(), v.clone()));
                }
            }
            labels.sort_by(|a, b| a.0.cmp(&b.0));
            let sample = Sample {
                value: s.value,
                timestamp_ms: snap.timestamp_ms,
            };
            (labels, vec![sample])
        })
        .collect();
    series
        .chunks(max_samples.max(1))
        .map(|batch| write_request_v1(batch, &[]))
        .collect()
}

/// One metadata-only `WriteRequest` for every family of the snapshot (type, family name as on
/// the `# TYPE` line, help; empty unit).
pub fn metadata_request(snap: &Snapshot) -> WriteRequest {
    let metadata: Vec<MetadataRef<'_>> = snap
        .families
        .iter()
        .map(|f| MetadataRef {
            metric_type: match f.exposed_type {
                ExposedType::Counter => MetricType::Counter,
                ExposedType::Gauge => MetricType::Gauge,
                ExposedType::Histogram => MetricType::Histogram,
            },
            family_name: &f.name,
            help: &f.help,
            unit: "",
        })
        .collect();
    write_request_v1(&[], &metadata)
}

/// Protobuf-encodes and snappy-compresses (block format) a request body.
pub fn encode(req: &WriteRequest) -> Vec<u8> {
    compress(&prost::Message::encode_to_vec(req))
}

/// POSTs one encoded body to `url` with the RW 1.0 headers (`Content-Encoding: snappy`,
/// `Content-Type: application/x-protobuf`, `X-Prometheus-Remote-Write-Version: 0.1.0`).
///
/// # Errors
/// A transport error or a non-2xx status, as a readable message naming the URL.
pub async fn post(client: &reqwest::Client, url: &str, body: Vec<u8>) -> Result<(), String> {
    let resp = client
        .post(url)
        .header("Content-Encoding", "snappy")
        .header("Content-Type", "application/x-protobuf")
        .header("X-Prometheus-Remote-Write-Version", "0.1.0")
        .header(
            "User-Agent",
            format!("vllm-corrector-simulator/{}", protocol::VERSION),
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

#[cfg(test)]
mod tests;
