//! Tests of the ingest step through [`receive`]: accounting, written counts, rejections and the
//! active-series cap. Expected values by hand.

use super::quote::{MAX_QUOTED_LABELS, quote_labels};
use super::receiver::Receiver;
use super::*;
use protocol::{Label, LabelError};

#[test]
fn a_multiline_panic_message_is_quoted_on_one_bounded_line() {
    let assert_eq_message = "assertion `left == right` failed\n  left: 1\n right: 2";
    assert_eq!(
        one_line(assert_eq_message),
        "assertion `left == right` failed / left: 1 / right: 2"
    );
    // 300 two-byte characters = 600 bytes: cut at the last boundary within 512 bytes (256
    // characters), then the ellipsis.
    let long = "é".repeat(300);
    let quoted = one_line(&long);
    assert_eq!(quoted, format!("{}…", "é".repeat(256)));
    assert_eq!(panic_message(&"static str"), "static str");
    assert_eq!(panic_message(&String::from("owned")), "owned");
    assert_eq!(
        panic_message(&42_u32),
        "a panic payload that is not a string"
    );
}

#[test]
fn quoted_labels_are_escaped_and_bounded() {
    let labels = [
        Label {
            name: "__name__",
            value: "x",
        },
        Label {
            name: "a",
            value: "q\"\n",
        },
    ];
    assert_eq!(quote_labels(&labels), "{__name__=\"x\", a=\"q\\\"\\n\"}");
    let long = "v".repeat(2000);
    let quoted = quote_labels(&[Label {
        name: "a",
        value: &long,
    }]);
    // The first 512 bytes (the opening brace included), then "…" (3 bytes) and "}".
    assert_eq!(quoted.len(), MAX_QUOTED_LABELS + 3 + 1);
    assert!(
        quoted.starts_with("{a=\"vvv") && quoted.ends_with("vv…}"),
        "{quoted}"
    );
}

use engine::{EngineConfig, Family};
use prost::Message;
use protocol::MetricType;
use protocol::encode::{CustomBucketsSpec, RequestV2Builder};
use protocol::prompb::v2 as pb;

/// The first refused series of `receipt`: (position, series in the request, refused series,
/// reason).
fn invalid(receipt: &Receipt) -> Option<(usize, usize, usize, Refusal)> {
    match &receipt.result {
        Err(IngestError::InvalidSeries {
            invalid,
            total,
            index,
            reason,
            ..
        }) => Some((*index, *total, *invalid, *reason)),
        _ => None,
    }
}

fn owned(labels: &[(&str, &str)]) -> Vec<(String, String)> {
    labels
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

fn sample(value: f64, timestamp: i64) -> pb::Sample {
    pb::Sample {
        value,
        timestamp,
        start_timestamp: 0,
    }
}

/// Pushes one series with `samples` and `histograms` (and optional metadata).
fn push(
    b: &mut RequestV2Builder,
    labels: &[(&str, &str)],
    samples: Vec<pb::Sample>,
    histograms: Vec<pb::Histogram>,
) {
    let labels_refs = b.label_refs(&owned(labels));
    b.push(pb::TimeSeries {
        labels_refs,
        samples,
        histograms,
        ..Default::default()
    });
}

/// One of every kind of series, each counted by hand below.
fn mixed_request() -> Vec<u8> {
    let mut b = RequestV2Builder::new();
    let base = [("engine", "0"), ("model_name", "m")];
    let with = |name: &'static str| {
        let mut l = vec![("__name__", name)];
        l.extend(base);
        l
    };
    // #0: a rule input, 2 samples, both applied.
    push(
        &mut b,
        &with("vllm:generation_tokens_total"),
        vec![sample(10.0, 1_000), sample(20.0, 16_000)],
        vec![],
    );
    // #1: read by no rule: 1 sample, accepted as unused.
    push(
        &mut b,
        &with("vllm:num_requests_running"),
        vec![sample(3.0, 1_000)],
        vec![],
    );
    // #2: no __name__: 1 sample rejected.
    push(&mut b, &base, vec![sample(1.0, 1_000)], vec![]);
    // #3: 65 labels, over the default 64: 1 sample rejected.
    let many: Vec<(String, String)> = (0..64).map(|i| (format!("l{i:02}"), "v".into())).collect();
    let mut labels: Vec<(&str, &str)> = vec![("__name__", "vllm:generation_tokens_total")];
    labels.extend(many.iter().map(|(n, v)| (n.as_str(), v.as_str())));
    push(&mut b, &labels, vec![sample(1.0, 1_000)], vec![]);
    // #4: ITL as a custom-buckets histogram, bounds 0.05 and 0.1: 2 + 3 = 5 classic samples.
    let itl = CustomBucketsSpec {
        bounds: vec![0.05, 0.1],
        cumulative: vec![3.0, 4.0],
        count: 4.0,
        sum: 0.2,
        timestamp_ms: 1_000,
        float: false,
    };
    push(
        &mut b,
        &with("vllm:inter_token_latency_seconds"),
        vec![],
        vec![itl.to_v2()],
    );
    // #5: an exponential histogram: 1 sample, accepted and not used.
    let exponential = pb::Histogram {
        schema: 2,
        timestamp: 1_000,
        ..Default::default()
    };
    push(
        &mut b,
        &with("vllm:other_seconds"),
        vec![],
        vec![exponential],
    );
    // #6: an invalid custom-buckets histogram (count 5 ≠ Σ buckets 4): 1 sample rejected.
    let mut invalid = itl.to_v2();
    invalid.count = Some(pb::histogram::Count::CountInt(5));
    push(
        &mut b,
        &with("vllm:request_time_per_output_token_seconds"),
        vec![],
        vec![invalid],
    );
    // #7: a duplicate of #0's last sample and an older one: 1 duplicate (written), 1 out of order.
    push(
        &mut b,
        &with("vllm:generation_tokens_total"),
        vec![sample(20.0, 16_000), sample(5.0, 500)],
        vec![],
    );
    b.build().encode_to_vec()
}

#[test]
fn every_sample_is_accounted_and_written_counts_only_accepted_ones() {
    let bytes = mixed_request();
    let outcome = Receiver::new(EngineConfig::default()).receive_raw(Version::V2, &bytes, 0);
    let r = &outcome.report;
    let n = |reason: RejectReason| r.rejected[reason.index()];
    // Received: 2 + 1 + 1 + 1 + 5 + 1 + 1 + 2 = 14.
    assert_eq!(r.received, 14);
    // Applied: #0's 2 and #4's 5 classic samples.
    assert_eq!(r.applied, 7);
    assert_eq!(n(RejectReason::UnusedSeries), 1);
    assert_eq!(n(RejectReason::Label(LabelError::MissingMetricName)), 1);
    assert_eq!(n(RejectReason::Label(LabelError::TooManyLabels)), 1);
    assert_eq!(n(RejectReason::NativeHistogram), 1);
    assert_eq!(n(RejectReason::InvalidNativeHistogram), 1);
    assert_eq!(n(RejectReason::DuplicateSample), 1);
    assert_eq!(n(RejectReason::OutOfOrder), 1);
    assert_eq!(r.received, r.applied + r.rejected_total());
    // Written floats: #0's 2, #1's 1 (unused), #7's duplicate = 4. Histograms: #4 and #5.
    assert_eq!(
        outcome.written,
        Written {
            samples: 4,
            histograms: 2,
            exemplars: 0
        }
    );
    // Series #2, #3 and #6 were refused with an error; #2 is quoted first.
    assert_eq!(
        invalid(&outcome),
        Some((
            2,
            8,
            3,
            Refusal::Reason(RejectReason::Label(LabelError::MissingMetricName))
        ))
    );
}

#[test]
fn custom_bucket_histogram_feeds_the_itl_rule_like_classic_series() {
    // The ITL histogram of mixed_request() plus the token counters token-weighted ITL reads:
    // sum = Σ ITL = 0.2 s; count = generated 20 - first outputs 4 = 16 tokens.
    let mut b = RequestV2Builder::new();
    let l = |name| vec![("__name__", name), ("engine", "0"), ("model_name", "m")];
    let itl = CustomBucketsSpec {
        bounds: vec![0.05, 0.1],
        cumulative: vec![3.0, 4.0],
        count: 4.0,
        sum: 0.2,
        timestamp_ms: 1_000,
        float: true,
    };
    push(
        &mut b,
        &l("vllm:inter_token_latency_seconds"),
        vec![],
        vec![itl.to_v2()],
    );
    push(
        &mut b,
        &l("vllm:generation_tokens_total"),
        vec![sample(20.0, 1_000)],
        vec![],
    );
    push(
        &mut b,
        &l("vllm:time_to_first_token_seconds_count"),
        vec![sample(4.0, 1_000)],
        vec![],
    );
    let bytes = b.build().encode_to_vec();
    let receiver = Receiver::new(EngineConfig {
        // One scrape per test: evaluated at once (the settling has its own tests).
        settle_scrapes: 0,
        ..EngineConfig::default()
    });
    receiver.receive_raw(Version::V2, &bytes, 0);
    let mut got = Vec::new();
    receiver
        .engine()
        .for_each_derived(Family::TokenWeightedItl, |_, v| got.push(v.clone()));
    assert_eq!(
        got,
        [engine::DerivedValue::SumCount {
            sum: 0.2,
            count: 16.0
        }]
    );
}

#[test]
fn rw2_series_metadata_is_cached_only_for_families_a_rule_reads() {
    let mut b = RequestV2Builder::new();
    for name in [
        "vllm:inter_token_latency_seconds_sum",
        "vllm:request_queue_time_seconds_sum",
        "node_cpu_seconds_total",
    ] {
        let labels_refs = b.label_refs(&owned(&[("__name__", name)]));
        let metadata = Some(b.metadata(MetricType::Histogram, "Latency.", "seconds"));
        b.push(pb::TimeSeries {
            labels_refs,
            samples: vec![sample(1.0, 1)],
            metadata,
            ..Default::default()
        });
    }
    let bytes = b.build().encode_to_vec();
    let receiver = Receiver::new(EngineConfig::default());
    receiver.receive_raw(Version::V2, &bytes, 0);
    // Only `vllm:inter_token_latency_seconds` is read by a rule: the other two are not kept.
    assert_eq!(receiver.engine().metadata_families(), 1);
}

/// The three series tokens per output reads (generation tokens, TTFT count, ITL count) of
/// engine `e`, at `ts`, scaled by `v`, as one RW 2.0 request: a group that feeds a family.
fn feeding_request(e: &str, v: f64, ts: i64) -> Vec<u8> {
    let mut b = RequestV2Builder::new();
    for name in [
        "vllm:generation_tokens_total",
        "vllm:time_to_first_token_seconds_count",
        "vllm:inter_token_latency_seconds_count",
    ] {
        push(
            &mut b,
            &[("__name__", name), ("engine", e)],
            vec![sample(v, ts)],
            vec![],
        );
    }
    b.build().encode_to_vec()
}

#[test]
fn active_series_cap_refuses_only_new_series_and_frees_with_idle_groups() {
    let config = EngineConfig {
        max_active_series: 3,
        idle_timeout_ms: 60_000,
        ..EngineConfig::default()
    };
    let receiver = Receiver::new(config);
    let apply = |bytes: Vec<u8>, now: i64| receiver.receive_raw(Version::V2, &bytes, now);
    assert_eq!(apply(feeding_request("0", 1.0, 1_000), 0).report.applied, 3);
    // Three more series, of a new group that feeds a family: refused, with their own reason and
    // a series rejection.
    let refused = apply(feeding_request("1", 1.0, 1_000), 0);
    assert_eq!(
        refused.report.rejected[RejectReason::ActiveSeriesLimit.index()],
        3
    );
    assert_eq!(
        invalid(&refused).map(|i| i.3),
        Some(Refusal::Reason(RejectReason::ActiveSeriesLimit))
    );
    // Known series keep flowing at the cap.
    assert_eq!(
        apply(feeding_request("0", 2.0, 16_000), 1).report.applied,
        3
    );
    // Unused series allocate nothing, so the cap never refuses them.
    let mut b = RequestV2Builder::new();
    push(
        &mut b,
        &[("__name__", "vllm:num_requests_running"), ("engine", "1")],
        vec![sample(1.0, 1_000)],
        vec![],
    );
    let unused = apply(b.build().encode_to_vec(), 1);
    assert_eq!(
        unused.report.rejected[RejectReason::UnusedSeries.index()],
        1
    );
    // Engine "0"'s group goes idle (last seen at 1 ms, cutoff 60 001 ms): its 3 series are freed.
    assert_eq!(receiver.engine().sweep_idle(60_002), 1);
    assert_eq!(
        apply(feeding_request("1", 1.0, 1_000), 60_002)
            .report
            .applied,
        3
    );
}

#[test]
fn request_refused_whole_counts_every_sample_for_its_reason() {
    let bytes = mixed_request();
    let mut receiver = Receiver::new(EngineConfig::default());
    receiver.limits.max_series_per_request = 7;
    let refused = receiver.receive_raw(Version::V2, &bytes, 0);
    assert_eq!(
        refused.result,
        Err(IngestError::TooManySeries {
            series: 8,
            limit: 7
        })
    );
    // As counted in every_sample_is_accounted…: 14 samples.
    let report = &refused.report;
    assert_eq!(report.received, 14);
    assert_eq!(report.rejected[RejectReason::TooManySeries.index()], 14);
    assert_eq!(receiver.engine().indexed_series(), 0, "nothing applied");
}

#[test]
fn every_label_error_has_its_own_reject_reason() {
    // Guards RejectReason::ALL: a LabelError missing from it would be counted as index 0
    // (unused_series) and vanish from its own counter.
    let errors = [
        LabelError::EmptyLabelSet,
        LabelError::MissingMetricName,
        LabelError::DuplicateLabelName,
        LabelError::InvalidMetricName,
        LabelError::InvalidLabelName,
        LabelError::OddLabelRefs,
        LabelError::SymbolRefOutOfRange,
        LabelError::TooManyLabels,
        LabelError::LabelNameTooLong,
        LabelError::LabelValueTooLong,
    ];
    for e in errors {
        let reason = RejectReason::Label(e);
        assert_eq!(RejectReason::ALL[reason.index()], reason, "{e:?}");
        assert_eq!(reason.as_str(), e.as_str());
    }
    let mut names: Vec<&str> = RejectReason::ALL.iter().map(|r| r.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(
        names.len(),
        RejectReason::ALL.len(),
        "reason names are distinct"
    );
}

#[test]
fn a_body_of_tiny_series_is_refused_whole_before_its_series_are_allocated() {
    // 40 000 empty `TimeSeries` (two bytes each, 80 KB decompressed; under
    // limits.max_series_per_request) would take ~7 MB of decoded structures: over the body's
    // memory allowance, so refused 413 with nothing applied.
    let raw: Vec<u8> = std::iter::repeat_n([0x0a, 0x00], 40_000)
        .flatten()
        .collect();
    let receiver = Receiver::new(EngineConfig::default());
    let refused = receiver.receive_raw(Version::V1, &raw, 0);
    let allowance = crate::config::memory_allowance(raw.len());
    assert_eq!(
        refused.result,
        Err(IngestError::TooLargeInMemory {
            series: 40_000,
            bytes: allowance,
        })
    );
    assert!(allowance / engine::SERIES_BYTES < 40_000);
    // One of them with a sample: every sample is still counted.
    let mut one = raw.clone();
    let sample = [0x09, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0x10, 0x01];
    let series = [
        &[0x0a, sample.len() as u8 + 2, 0x12, sample.len() as u8][..],
        &sample,
    ]
    .concat();
    one.splice(0..2, series);
    let refused = receiver.receive_raw(Version::V1, &one, 0);
    assert_eq!(refused.report.received, 1);
    assert_eq!(
        refused.report.rejected[RejectReason::TooManySeries.index()],
        1
    );
}

#[test]
fn label_references_by_the_thousand_are_refused_whole_past_the_memory_allowance() {
    // One RW 2.0 series with 60 000 labels `a=""`: two one-byte references each on the wire
    // (about 120 KB decoded body), 32 bytes each decoded (1.92 MB), past the allowance of eight
    // times the body plus 64 KiB (about 1.03 MB): refused before any label check, nothing applied.
    let mut labels = vec![("__name__".to_owned(), "up".to_owned())];
    labels.extend((0..60_000).map(|_| ("a".to_owned(), String::new())));
    let spec = (
        labels,
        vec![protocol::Sample {
            value: 1.0,
            timestamp_ms: 1,
        }],
    );
    let raw = protocol::encode::request_v2(&[spec]).encode_to_vec();
    assert!(crate::config::memory_allowance(raw.len()) < 60_000 * 32);
    let receiver = Receiver::new(EngineConfig::default());
    let refused = receiver.receive_raw(Version::V2, &raw, 10);
    assert!(
        matches!(
            refused.result,
            Err(IngestError::TooLargeInMemory { series: 1, .. })
        ),
        "{refused:?}"
    );
    assert_eq!(receiver.engine().stats().groups, 0);
}

#[test]
fn a_series_refused_by_the_memory_budget_is_a_series_rejection_naming_the_budget() {
    // No room for even one group: the new series of a group that feeds a family are refused as
    // memory_budget, and the request's answer (400) names the limit, as it does for
    // max_active_series.
    let receiver = Receiver::new(EngineConfig {
        max_state_bytes: 1,
        ..EngineConfig::default()
    });
    let refused = receiver.receive_raw(Version::V2, &feeding_request("0", 1.0, 1_000), 0);
    assert_eq!(
        refused.report.rejected[RejectReason::MemoryBudget.index()],
        3
    );
    let rejection = invalid(&refused).map(|i| i.3);
    assert_eq!(rejection, Some(Refusal::Reason(RejectReason::MemoryBudget)));
    assert!(
        rejection
            .unwrap()
            .to_string()
            .starts_with("limits.max_memory_bytes:")
    );
}
