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

pub use protocol::prompb::v1::WriteRequest;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exposition::{SnapshotFamily, SnapshotSample};
    use protocol::{snappy, v1};

    fn sample(name: &str, labels: &[(&str, &str)], value: f64) -> SnapshotSample {
        SnapshotSample {
            name: name.into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            value,
        }
    }

    /// Two families, three samples, at Unix ms 1 700 000 002 000.
    fn snapshot() -> Snapshot {
        Snapshot {
            timestamp_ms: 1_700_000_002_000,
            families: vec![
                SnapshotFamily {
                    name: "vllm:generation_tokens_total".into(),
                    exposed_type: ExposedType::Counter,
                    help: "Number of generation tokens processed.".into(),
                    samples: vec![
                        sample(
                            "vllm:generation_tokens_total",
                            &[("engine", "0"), ("model_name", "m")],
                            12.0,
                        ),
                        sample(
                            "vllm:generation_tokens_total",
                            &[("engine", "1"), ("model_name", "m")],
                            7.0,
                        ),
                    ],
                },
                SnapshotFamily {
                    name: "vllm:num_requests_running".into(),
                    exposed_type: ExposedType::Gauge,
                    help: "Running requests.".into(),
                    samples: vec![sample(
                        "vllm:num_requests_running",
                        &[("engine", "0"), ("job", "from-exposition")],
                        3.0,
                    )],
                },
            ],
        }
    }

    /// Decodes a body the way the receiver does: its snappy reader, then its borrowed decoder.
    fn receive(body: &[u8], f: impl FnOnce(protocol::WriteRequestRef<'_>)) {
        let mut raw = Vec::new();
        snappy::decompress_into(body, 1 << 20, &mut raw).expect("snappy block body");
        f(v1::decode(&raw).expect("RW 1.0 WriteRequest"));
    }

    #[test]
    fn batches_decode_in_the_receiver_with_sorted_labels_and_the_snapshot_timestamp() {
        let extra = [
            ("job".to_string(), "sim".to_string()),
            ("instance".to_string(), "sim:8000".to_string()),
        ];
        // 3 samples at most 2 per request: 2 requests, of 2 and 1 series.
        let reqs = write_requests(&snapshot(), &extra, 2);
        assert_eq!(reqs.len(), 2);
        receive(&encode(&reqs[0]), |req| {
            assert_eq!(req.series.len(), 2);
            let names: Vec<&str> = req.series[1].labels.iter().map(|l| l.name).collect();
            assert_eq!(
                names,
                ["__name__", "engine", "instance", "job", "model_name"]
            );
            assert_eq!(req.series[1].labels[1].value, "1");
            assert_eq!(req.series[1].labels[3].value, "sim");
            assert_eq!(req.series[1].samples[0].value, 7.0);
            assert_eq!(req.series[1].samples[0].timestamp_ms, 1_700_000_002_000);
        });
        receive(&encode(&reqs[1]), |req| {
            assert_eq!(req.series.len(), 1);
            // The exposition's own `job` wins over the extra label (honor_labels: true).
            let job = req.series[0].labels.iter().find(|l| l.name == "job");
            assert_eq!(job.map(|l| l.value), Some("from-exposition"));
            assert_eq!(req.series[0].samples[0].value, 3.0);
        });
    }

    #[test]
    fn metadata_request_carries_one_entry_per_family_and_no_series() {
        receive(&encode(&metadata_request(&snapshot())), |req| {
            assert!(req.series.is_empty());
            assert_eq!(req.metadata.len(), 2);
            assert_eq!(req.metadata[0].metric_type, MetricType::Counter);
            assert_eq!(req.metadata[0].family_name, "vllm:generation_tokens_total");
            assert_eq!(req.metadata[1].metric_type, MetricType::Gauge);
            assert_eq!(req.metadata[1].help, "Running requests.");
        });
    }
}
