//! Unit tests of `crates/sim/src/remote_write.rs`.

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
    let mut request = v1::decode(&raw).expect("RW 1.0 WriteRequest");
    request.resolve_all().expect("RW 1.0 labels");
    f(request);
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
        let names: Vec<&str> = req
            .labels_of(&req.series[1])
            .iter()
            .map(|l| l.name)
            .collect();
        assert_eq!(
            names,
            ["__name__", "engine", "instance", "job", "model_name"]
        );
        assert_eq!(req.labels_of(&req.series[1])[1].value, "1");
        assert_eq!(req.labels_of(&req.series[1])[3].value, "sim");
        assert_eq!(req.series[1].samples[0].value, 7.0);
        assert_eq!(req.series[1].samples[0].timestamp_ms, 1_700_000_002_000);
    });
    receive(&encode(&reqs[1]), |req| {
        assert_eq!(req.series.len(), 1);
        // The exposition's own `job` wins over the extra label (honor_labels: true).
        let job = req
            .labels_of(&req.series[0])
            .iter()
            .find(|l| l.name == "job");
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
