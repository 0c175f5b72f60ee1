//! A `/metrics` scrape and the engine lock.

use std::sync::mpsc;
use std::time::Duration;

use super::*;
use crate::config::Limits;
use engine::{Engine, EngineConfig, IngestReport};
use protocol::{Label, Sample};

const TPOT: &str = "vllm:request_time_per_output_token_seconds";
/// Bounds of the big histogram (plus `+Inf`): large enough that formatting dominates a scrape,
/// and the most one histogram may have (`engine::MAX_SERIES_PER_INPUT` buckets with `+Inf`).
const BUCKETS: usize = engine::MAX_SERIES_PER_INPUT - 1;

/// Scrape `k` (from 1) of one group whose request TPOT histogram has [`BUCKETS`] bounds, with
/// what canonical TPOT also reads: 1,000·k requests, 100·k of them with one output token.
fn scrape(engine: &mut Engine, k: u32) {
    let le_text: Vec<String> = (1..=BUCKETS)
        .map(|i| format!("{:?}", i as f64 * 1e-3))
        .chain(["+Inf".to_owned()])
        .collect();
    let k = f64::from(k);
    let mut series: Vec<(String, Option<&str>, f64)> = le_text
        .iter()
        .enumerate()
        .map(|(i, le)| {
            let below = (100 + 900 * (i + 1) / (BUCKETS + 1)) as f64;
            (format!("{TPOT}_bucket"), Some(le.as_str()), below * k)
        })
        .collect();
    series.extend([
        (format!("{TPOT}_sum"), None, 20.0 * k),
        (format!("{TPOT}_count"), None, 1_000.0 * k),
        (
            "vllm:request_generation_tokens_bucket".to_owned(),
            Some("1.0"),
            100.0 * k,
        ),
        (
            "vllm:request_generation_tokens_count".to_owned(),
            None,
            1_000.0 * k,
        ),
    ]);
    let ts = 15_000 * k as i64;
    let mut report = IngestReport::default();
    for (name, le, value) in &series {
        let mut labels = vec![
            Label {
                name: "__name__",
                value: name,
            },
            Label {
                name: "engine",
                value: "0",
            },
        ];
        if let Some(le) = le {
            labels.push(Label {
                name: "le",
                value: le,
            });
        }
        labels.push(Label {
            name: "model_name",
            value: "m",
        });
        let sample = Sample {
            value: *value,
            timestamp_ms: ts,
        };
        engine.ingest(&labels, &[sample], ts, &mut report);
    }
    assert_eq!(report.applied, series.len() as u64, "{report:?}");
}

fn big_histogram_state() -> AppState {
    let mut engine = Engine::new(EngineConfig {
        settle_scrapes: 0,
        ..EngineConfig::default()
    });
    scrape(&mut engine, 1);
    AppState::new(engine, Limits::default())
}

/// Lines of canonical TPOT's `_bucket` in `body`.
fn bucket_lines(body: &str) -> usize {
    body.lines()
        .filter(|l| l.starts_with("vllm_corrected_request_time_per_output_token_seconds_bucket"))
        .count()
}

#[test]
fn a_metrics_scrape_does_not_hold_the_engine_lock_while_formatting() {
    let state = big_histogram_state();
    let served = render_all(&state, Format::Text);
    assert_eq!(bucket_lines(&served), BUCKETS + 1);

    let snapshot = MetricsSnapshot::take(&state);
    // A write can take the lock between the copy and the formatting...
    let mut engine = state
        .engine
        .try_lock()
        .expect("the engine lock is free once the scrape has taken its snapshot");
    // ...and change every output, while the scrape is formatted on another thread.
    scrape(&mut engine, 2);
    let (sender, formatted) = mpsc::channel();
    std::thread::spawn(move || sender.send(snapshot.render(Format::Text)));
    let body = formatted
        .recv_timeout(Duration::from_secs(60))
        .expect("formatting finishes while a writer holds the engine lock");
    drop(engine);

    // The scrape shows what was there when it took its snapshot, byte for byte as a scrape
    // then would have; the next scrape shows the write.
    assert_eq!(body, served);
    let after = render_all(&state, Format::Text);
    assert_eq!(bucket_lines(&after), BUCKETS + 1);
    assert_ne!(after, served, "scrape 2 changed the outputs");
}

#[test]
fn a_scrape_is_the_same_in_both_formats_from_one_snapshot_or_from_the_handler() {
    let state = big_histogram_state();
    for format in [Format::Text, Format::OpenMetrics] {
        assert_eq!(
            MetricsSnapshot::take(&state).render(format),
            render_all(&state, format)
        );
    }
}
