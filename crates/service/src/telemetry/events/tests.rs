//! Engine events as log lines, captured with a test subscriber.

use std::io::Write;
use std::sync::{Arc, Mutex};

use super::*;
use engine::{Engine, EngineConfig, IngestReport, RemovalReason, WithheldReason};
use protocol::{Label, Sample};

/// A `MakeWriter` appending to a shared buffer.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Capture {
    type Writer = Capture;
    fn make_writer(&'a self) -> Capture {
        self.clone()
    }
}

/// Runs `f` with a subscriber that captures every log line at info and above.
fn captured(f: impl FnOnce()) -> String {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(capture.clone())
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .finish();
    tracing::subscriber::with_default(subscriber, f);
    let bytes = capture.0.lock().unwrap().clone();
    String::from_utf8(bytes).unwrap()
}

fn labels(instance: &str) -> Vec<(String, String)> {
    vec![
        ("instance".into(), instance.into()),
        ("job".into(), "vllm".into()),
    ]
}

/// One engine's worth of series at `ts` for `instance`: just token-weighted ITL's inputs.
fn feed(engine: &mut Engine, instance: &str, k: f64, ts: i64) {
    let mut report = IngestReport::default();
    for (name, v) in [
        ("vllm:inter_token_latency_seconds_sum", 2.4 * k),
        ("vllm:generation_tokens_total", 1000.0 * k),
        ("vllm:time_to_first_token_seconds_count", 40.0 * k),
    ] {
        let l = [
            Label {
                name: "__name__",
                value: name,
            },
            Label {
                name: "instance",
                value: instance,
            },
            Label {
                name: "job",
                value: "vllm",
            },
        ];
        engine.ingest(
            &l,
            &[Sample {
                value: v,
                timestamp_ms: ts,
            }],
            ts,
            &mut report,
        );
    }
}

#[test]
fn each_group_event_is_logged_once_with_the_group_labels() {
    let log = EventLog::default();
    let mut engine = Engine::new(EngineConfig::default());
    let text = captured(|| {
        for i in 0..5 {
            let ts = 1_000 + 15_000 * i;
            feed(&mut engine, "a:8000", 1.0 + i as f64, ts);
            log.log(engine.take_events(), ts);
        }
        // A restart: counters fall.
        feed(&mut engine, "a:8000", 0.5, 80_000);
        log.log(engine.take_events(), 80_000);
        // Then nothing: it leaves for missed scrapes (3 × its last interval, 19 s).
        assert_eq!(engine.sweep_idle(80_000 + 57_000), 0);
        assert_eq!(engine.sweep_idle(80_000 + 57_001), 1);
        log.log(engine.take_events(), 137_001);
    });
    let group = r#"group={instance="a:8000", job="vllm"}"#;
    let count = |needle: &str| {
        text.lines()
            .filter(|l| l.contains(needle) && l.contains(group))
            .count()
    };
    assert_eq!(count("group: first complete scrape"), 1, "{text}");
    assert_eq!(count("group removed from /metrics"), 1, "{text}");
    assert_eq!(count("reason=missed_scrapes"), 1, "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains(" INFO ") && l.contains("first complete scrape")),
        "{text}"
    );
    // The token-weighted family is the only one served; the others name their reason:
    // `incomplete`, since this group's few series are a set no vLLM exposes (it is also warned
    // about as incomplete), with the series each lacks.
    assert!(
        text.contains("served=vllm_corrected_token_weighted_itl_seconds "),
        "{text}"
    );
    assert!(
        text.contains("vllm_corrected_iteration_tokens_local_compute:incomplete(vllm:prompt_tokens_by_source_total{source=\"local_compute\"})"),
        "{text}"
    );
    // No acceptance state here, so a counter reset is not seen by any rule: none logged.
    assert_eq!(count("counter reset"), 0, "{text}");
}

/// A withheld family's status with nothing named.
fn status(family: Family, reason: WithheldReason) -> FamilyStatus {
    FamilyStatus {
        family,
        withheld: Some(reason),
        degraded: false,
        missing_input: None,
        limit: None,
    }
}

#[test]
fn engine_events_are_logged_at_their_level() {
    let log = EventLog::default();
    let text = captured(|| {
        log.log(
            vec![
                EngineEvent::CounterReset {
                    labels: labels("b").into(),
                },
                EngineEvent::GroupIncomplete {
                    labels: labels("b").into(),
                    unread: Vec::new(),
                },
                EngineEvent::FamilyWithheld {
                    labels: labels("b").into(),
                    status: status(Family::CanonicalTpot, WithheldReason::InconsistentInputs),
                },
                EngineEvent::FamilyWithheld {
                    labels: labels("b").into(),
                    status: FamilyStatus {
                        missing_input: Some("vllm:time_to_first_token_seconds_count"),
                        ..status(Family::TokenWeightedItl, WithheldReason::MissingInput)
                    },
                },
                EngineEvent::GroupLimited {
                    labels: labels("b").into(),
                    limit: "limits.max_active_series",
                },
                EngineEvent::FamilyWithheld {
                    labels: labels("b").into(),
                    status: FamilyStatus {
                        limit: Some("limits.max_active_series"),
                        ..status(Family::TokenWeightedItl, WithheldReason::Limit)
                    },
                },
                EngineEvent::FamilyServed {
                    labels: labels("b").into(),
                    family: Family::CanonicalTpot,
                },
                EngineEvent::GroupRemoved {
                    labels: labels("b").into(),
                    reason: RemovalReason::Stale,
                },
            ],
            1_000,
        );
    });
    let line = |needle: &str| {
        text.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle}\n{text}"))
    };
    assert!(line("input counter reset").contains(" INFO "));
    assert!(line("group incomplete for more than one scrape").contains(" WARN "));
    assert!(line("family withheld").contains("reason=inconsistent_inputs"));
    // A missing input is named; a limit is its own reason and names the limit, at warn.
    assert!(line("reason=missing_input").contains("input=vllm:time_to_first_token_seconds_count"));
    assert!(line("reason=limit").contains("limit=limits.max_active_series"));
    let limited = line("a limit refuses its new series");
    assert!(limited.contains(" WARN "), "{limited}");
    assert!(
        limited.contains("limit=limits.max_active_series"),
        "{limited}"
    );
    assert!(
        !limited.contains("shard by target, never by series"),
        "{limited}"
    );
    assert!(
        line("family served again")
            .contains("family=vllm_corrected_request_time_per_output_token_seconds")
    );
    assert!(line("group removed").contains("reason=stale"));
    assert_eq!(text.lines().count(), 8, "{text}");
}

#[test]
fn a_flood_of_one_event_kind_is_rate_limited_and_the_rest_counted() {
    let log = EventLog::default();
    let text = captured(|| {
        let flood: Vec<EngineEvent> = (0..250)
            .map(|i| EngineEvent::CounterReset {
                labels: labels(&i.to_string()).into(),
            })
            .collect();
        log.log(flood, 1_000);
        // Another kind still gets through in the same window.
        log.log(
            vec![EngineEvent::GroupIncomplete {
                labels: labels("x").into(),
                unread: Vec::new(),
            }],
            2_000,
        );
        // The window ends: the suppressed count is reported once.
        log.flush(1_000 + WINDOW_MS);
        log.flush(2_000 + WINDOW_MS);
    });
    assert_eq!(
        text.lines()
            .filter(|l| l.contains("input counter reset"))
            .count(),
        EVENTS_PER_WINDOW as usize
    );
    assert_eq!(
        text.lines()
            .filter(|l| l.contains("group incomplete"))
            .count(),
        1
    );
    let summary: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("suppressed by the rate limit"))
        .collect();
    assert_eq!(summary.len(), 1, "{text}");
    assert!(
        summary[0].contains("kind=\"counter_reset\"") || summary[0].contains("kind=counter_reset"),
        "{}",
        summary[0]
    );
    assert!(summary[0].contains("suppressed=150"), "{}", summary[0]);
}

#[test]
fn a_log_limit_allows_its_lines_per_window_then_counts_the_rest() {
    let limit = LogLimit::new(3);
    assert_eq!(
        (0..3).map(|_| limit.allow()).collect::<Vec<_>>(),
        [Some(0), Some(0), Some(0)]
    );
    assert_eq!(
        (0..5).filter_map(|_| limit.allow()).count(),
        0,
        "over the limit within 10 s"
    );
}

#[test]
fn two_senders_are_warned_about_once_naming_the_group_and_the_counts() {
    let log = EventLog::default();
    let text = captured(|| {
        log.log(
            vec![EngineEvent::TwoSenders {
                labels: labels("a:8000").into(),
                recent_rejects: [12, 3],
            }],
            1_000,
        );
    });
    let line = text.lines().next().unwrap_or_default();
    assert!(line.contains(" WARN "), "{text}");
    assert!(
        line.contains(r#"group={instance="a:8000", job="vllm"}"#),
        "{line}"
    );
    assert!(
        line.contains("duplicate_samples=12 out_of_order_samples=3"),
        "{line}"
    );
    assert!(
        line.contains("group written by two senders with the same labels"),
        "{line}"
    );
    assert_eq!(text.lines().count(), 1, "{text}");
}

#[test]
fn an_incomplete_group_whose_histogram_arrives_in_an_unread_form_is_told_so_not_sharding() {
    let log = EventLog::default();
    let text = captured(|| {
        log.log(
            vec![EngineEvent::GroupIncomplete {
                labels: labels("a:8000").into(),
                unread: vec![engine::UnreadHistogram {
                    histogram: "vllm:inter_token_latency_seconds",
                    form: engine::UnreadForm::ExponentialNativeHistogram,
                }],
            }],
            1_000,
        );
    });
    let line = text.lines().next().unwrap_or_default();
    assert!(line.contains(" WARN "), "{text}");
    assert!(
        line.contains(
            "group incomplete for more than one scrape: vllm:inter_token_latency_seconds arrives \
             only as a native histogram of an exponential schema, which the corrector does not read"
        ),
        "{line}"
    );
    assert!(
        line.contains("arrives_as=native_histogram_exponential"),
        "{line}"
    );
    assert!(!line.contains("shard by target"), "{line}");
    assert_eq!(text.lines().count(), 1, "{text}");
}
