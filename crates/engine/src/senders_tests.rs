//! Two senders with the same labels (an HA pair of Prometheus servers with the same external
//! labels writing one corrector): the group's duplicate and out-of-order samples are reported as
//! [`EngineEvent::TwoSenders`] once they recur in two consecutive minutes, once, and again only
//! after they stopped; a single resent batch is not reported.

use super::test_support::ingest_series;
use super::{Engine, EngineConfig, EngineEvent, IngestReport};
use protocol::Sample;

const NAMES: [&str; 3] = [
    "vllm:inter_token_latency_seconds_sum",
    "vllm:generation_tokens_total",
    "vllm:time_to_first_token_seconds_count",
];

/// Every series of the group sampled at scrape time `ts` (ms), received at `now_ms`.
fn send(engine: &mut Engine, ts: i64, now_ms: i64) -> IngestReport {
    let mut report = IngestReport::default();
    for (i, name) in NAMES.into_iter().enumerate() {
        let labels = [
            ("__name__".to_owned(), name.to_owned()),
            ("instance".to_owned(), "a:8000".to_owned()),
        ];
        let sample = Sample {
            value: (ts / 1000) as f64 * (i + 1) as f64,
            timestamp_ms: ts,
        };
        ingest_series(engine, &labels, &[sample], now_ms, &mut report);
    }
    report
}

fn two_senders(events: &[EngineEvent]) -> Vec<[u64; 2]> {
    events
        .iter()
        .filter_map(|e| match e {
            EngineEvent::TwoSenders { recent_rejects, .. } => Some(*recent_rejects),
            _ => None,
        })
        .collect()
}

/// The minute `m` of receive time plus `s` seconds, ms.
fn at(m: i64, s: i64) -> i64 {
    m * 60_000 + s * 1_000
}

#[test]
fn a_steady_stream_of_rejects_is_reported_once_and_a_resent_batch_not_at_all() {
    let mut engine = Engine::new(EngineConfig::default());
    // One sender, every 15 s over minutes 10 and 11; one batch resent in minute 10.
    let mut scrapes = Vec::new();
    for k in 0..8 {
        let ts = at(10, 15 * k);
        scrapes.push(ts);
        send(&mut engine, ts, ts + 500);
        if k == 1 {
            assert_eq!(send(&mut engine, ts, ts + 2_000).rejected_total(), 3);
        }
        assert_eq!(two_senders(&engine.take_events()), Vec::<[u64; 2]>::new());
    }
    // A second sender from minute 12 on: each scrape again, 3 s late (3 duplicates each).
    let mut reported = Vec::new();
    for k in 8..16 {
        let ts = at(10, 15 * k);
        send(&mut engine, ts, ts + 500);
        assert_eq!(send(&mut engine, ts, ts + 3_000).rejected_total(), 3);
        reported.extend(two_senders(&engine.take_events()));
    }
    // Minute 12 holds 4 scrapes' rejects and minute 13 its first: reported then, once.
    assert_eq!(reported, [[15, 0]]);
    // The second sender stops (minutes 14 to 16); after two quiet minutes the rejects are no
    // longer recent, and a new stream (minutes 17 and 18) is reported again.
    let mut again = Vec::new();
    for k in 16..36 {
        let ts = at(10, 15 * k);
        send(&mut engine, ts, ts + 500);
        if k >= 28 {
            send(&mut engine, ts, ts + 3_000);
        }
        again.extend(two_senders(&engine.take_events()));
    }
    assert_eq!(again, [[15, 0]]);
}
