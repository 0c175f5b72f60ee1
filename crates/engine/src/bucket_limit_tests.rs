//! Tests of the bound on series per input ([`crate::MAX_SERIES_PER_INPUT`]): a histogram with
//! tens of thousands of buckets cannot make a frame's evaluation hold the engine lock for seconds.

use crate::test_support::*;
use crate::{Family, IngestReport, MAX_SERIES_PER_INPUT, RejectReason};

#[test]
fn a_histogram_past_max_series_per_input_is_refused_as_too_many_buckets() {
    // Issue 23 item 9: one group with a 60,000-bucket histogram held the engine lock 1.9 to 2.4 s
    // per scrape (docs/SCRAPES.md, "A huge histogram"). Here 1,100 finite bounds and `+Inf`
    // (sent first): 1,024 bucket series are taken, the 77 bounds that come last are refused and
    // counted, and canonical TPOT is served on the buckets held.
    let mut raw: Vec<Raw> = Vec::new();
    let bucket = "vllm:request_time_per_output_token_seconds_bucket";
    raw.push(series(bucket, "0", &[("le", "+Inf")], 2_000.0));
    let les: Vec<String> = (1..=1_100)
        .map(|i| format!("{:?}", i as f64 / 1000.0))
        .collect();
    for (i, le) in les.iter().enumerate() {
        raw.push(series(bucket, "0", &[("le", le)], (i + 1) as f64));
    }
    raw.push(series(
        "vllm:request_time_per_output_token_seconds_sum",
        "0",
        &[],
        50.0,
    ));
    raw.push(series(
        "vllm:request_time_per_output_token_seconds_count",
        "0",
        &[],
        2_000.0,
    ));
    raw.push(series(
        "vllm:request_generation_tokens_bucket",
        "0",
        &[("le", "1.0")],
        0.0,
    ));
    let mut engine = crate::Engine::new(config());
    for k in 1..=2 {
        let mut report = IngestReport::default();
        feed_at(&mut engine, &raw, k * 1_000, 0, &mut report);
        assert_eq!(MAX_SERIES_PER_INPUT, 1_024);
        let refused = report.rejected[RejectReason::TooManyBuckets.index()];
        assert_eq!(refused, 1_101 - 1_024, "scrape {k}");
        assert_eq!(report.received, 1_104);
        assert_eq!(report.applied, 1_104 - 77, "scrape {k}: {report:?}");
        assert_eq!(RejectReason::TooManyBuckets.as_str(), "too_many_buckets");
    }
    let out = outputs(&engine);
    let crate::DerivedValue::Histogram { buckets, count, .. } =
        value_of(&out, Family::CanonicalTpot, "0")
    else {
        panic!("canonical TPOT is a histogram");
    };
    // The 1,023 lowest finite bounds (0.001 … 1.023, bucket i holding i requests) and +Inf.
    assert_eq!(buckets.len(), 1_024);
    assert_eq!(buckets[1_022], (1.023, 1_023.0));
    assert_eq!(buckets[1_023], (f64::INFINITY, 2_000.0));
    assert_eq!(count, 2_000.0);
}
