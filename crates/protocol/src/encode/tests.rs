//! Tests of `encode.rs`.

use super::*;
use crate::{MetricType, snappy, v1 as decoder};

use super::series_spec as spec;

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
    let mut req = decoder::decode(&raw).unwrap();
    req.resolve_all().unwrap();
    assert_eq!(req.series.len(), 2);
    assert_eq!(req.labels_of(&req.series[0])[1].name, "engine");
    assert_eq!(req.labels_of(&req.series[0])[1].value, "0");
    assert_eq!(
        req.series[0].samples.as_slice(),
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
        req.series[1].samples.as_slice(),
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
