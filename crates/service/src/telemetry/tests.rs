//! Tests of the self-metrics: pre-registration, accounting across requests, mirrored engine stats
//! and both text formats, read back as `/metrics` renders them.

use super::*;
use engine::{EngineStats, Family, RemovalReason, WithheldReason};
use protocol::LabelError;

fn text_of(m: &SelfMetrics) -> String {
    let mut s = String::new();
    m.encode_text(&mut s).unwrap();
    s
}

/// The engine's self-metrics one scrape collects from `stats` ([`scrape::ScrapeMetrics`]).
fn scrape_text(stats: &EngineStats, metadata_families: usize) -> String {
    let mut s = String::new();
    scrape::ScrapeMetrics::collect(stats, metadata_families, &memory::MemoryUse::default())
        .encode_text(&mut s)
        .unwrap();
    s
}

fn has_line(text: &str, line: &str) -> bool {
    text.lines().any(|l| l == line)
}

#[test]
fn every_reject_reason_is_pre_registered_at_zero() {
    let t = text_of(&SelfMetrics::new());
    for reason in RejectReason::ALL {
        let line = format!(
            "vllm_corrector_samples_rejected_total{{reason=\"{}\"}} 0",
            reason.as_str()
        );
        assert!(has_line(&t, &line), "missing {line} in\n{t}");
    }
    // The engine's gauges of a scrape with nothing withheld: only the pairs that can happen, all
    // at 0: each of the 6 families can miss an input, lack a complete frame, settle or be limited
    // (24); canonical TPOT and the SLO counters lack a le="1" bound (2); all refuse a negative or
    // non-finite value as inconsistent inputs (6); the SLO counters have no SLO covering a group
    // (1).
    let t = scrape_text(&EngineStats::default(), 0);
    let withheld: Vec<&str> = t
        .lines()
        .filter(|l| l.starts_with("vllm_corrector_groups_withheld{"))
        .collect();
    assert_eq!(withheld.len(), 33, "{withheld:#?}");
    let line = |family: &str, reason: &str| {
        format!(
            "vllm_corrector_groups_withheld{{family=\"vllm_corrected_{family}\",reason=\"{reason}\"}} 0"
        )
    };
    assert!(has_line(&t, &line("token_weighted_itl_seconds", "limit")));
    assert!(!has_line(
        &t,
        &line("token_weighted_itl_seconds", "no_le_1_bound")
    ));
    assert!(has_line(
        &t,
        &line("iteration_tokens_local_compute", "inconsistent_inputs")
    ));
}

/// Removal counts by reason, the others 0.
fn removed(counts: &[(RemovalReason, u64)]) -> [u64; RemovalReason::ALL.len()] {
    let mut all = [0; RemovalReason::ALL.len()];
    for (reason, n) in counts {
        all[reason.index()] = *n;
    }
    all
}

#[test]
fn missed_scrapes_removals_are_counted_under_the_word_the_log_uses() {
    let stats = EngineStats {
        groups_removed: removed(&[(RemovalReason::Idle, 2), (RemovalReason::MissedScrapes, 3)]),
        ..EngineStats::default()
    };
    let t = scrape_text(&stats, 0);
    for line in [
        "vllm_corrector_groups_removed_total{reason=\"idle\"} 2",
        "vllm_corrector_groups_removed_total{reason=\"missed_scrapes\"} 3",
    ] {
        assert!(has_line(&t, line), "missing {line} in\n{t}");
    }
}

#[test]
fn ingest_reports_add_up_across_requests() {
    let m = SelfMetrics::new();
    let mut a = IngestReport::default();
    a.apply(5);
    a.reject(RejectReason::OutOfOrder, 2);
    let mut b = IngestReport::default();
    b.apply(1);
    b.reject(RejectReason::Label(LabelError::DuplicateLabelName), 3);
    SamplesIngested { report: &a }.emit(&m);
    SamplesIngested { report: &b }.emit(&m);
    let t = text_of(&m);
    // received 7 + 4 = 11, applied 5 + 1 = 6.
    assert!(
        has_line(&t, "vllm_corrector_samples_received_total 11"),
        "{t}"
    );
    assert!(
        has_line(&t, "vllm_corrector_samples_applied_total 6"),
        "{t}"
    );
    assert!(
        has_line(
            &t,
            "vllm_corrector_samples_rejected_total{reason=\"out_of_order\"} 2"
        ),
        "{t}"
    );
    assert!(
        has_line(
            &t,
            "vllm_corrector_samples_rejected_total{reason=\"duplicate_label_name\"} 3"
        ),
        "{t}"
    );
}

#[test]
fn engine_stats_are_mirrored_at_scrape_time() {
    let stats = EngineStats {
        active_series: 40,
        groups: 2,
        withheld: vec![
            (Family::CanonicalTpot, WithheldReason::NoLeOneBound, 1),
            (
                Family::IterationTokensLocalCompute,
                WithheldReason::MissingInput,
                2,
            ),
        ],
        frames_dropped: 3,
        groups_removed: removed(&[
            (RemovalReason::Stale, 4),
            (RemovalReason::Idle, 5),
            (RemovalReason::MissedScrapes, 12),
            (RemovalReason::Evicted, 10),
        ]),
        counter_resets: 6,
        output_holds: {
            let mut holds = [0; engine::FAMILIES];
            holds[Family::TokenWeightedItl.index()] = 9;
            holds
        },
        output_resets: [0; engine::FAMILIES],
        newest_sample_ms: Some(1_700_000_000_500),
        groups_incomplete: 8,
        memory: engine::MemoryParts {
            groups: 1_000,
            index: 200,
            retired: 30,
        },
        retired_groups: 11,
        retired_dropped: [0, 0],
        slo_groups: vec![("chat".into(), 2), ("typo".into(), 0)],
    };
    // A second scrape with a lower withheld count shows that count, not a sum (each scrape
    // collects its own registry).
    let _ = scrape_text(&stats, 7);
    let mut later = stats.clone();
    later.withheld = vec![(Family::CanonicalTpot, WithheldReason::NoLeOneBound, 1)];
    let t = scrape_text(&later, 7);
    for line in [
        "vllm_corrector_active_series 40",
        "vllm_corrector_active_groups 2",
        "vllm_corrector_groups_incomplete 8",
        "vllm_corrector_metadata_families 7",
        "vllm_corrector_frames_dropped_total 3",
        "vllm_corrector_input_resets_total 6",
        "vllm_corrector_output_holds_total{family=\"vllm_corrected_token_weighted_itl_seconds\"} 9",
        "vllm_corrector_output_holds_total{family=\"vllm_corrected_request_time_per_output_token_seconds\"} 0",
        "vllm_corrector_groups_removed_total{reason=\"stale\"} 4",
        "vllm_corrector_groups_removed_total{reason=\"idle\"} 5",
        "vllm_corrector_groups_removed_total{reason=\"evicted\"} 10",
        // 1 700 000 000 500 ms = 1 700 000 000.5 s.
        "vllm_corrector_newest_sample_timestamp_seconds 1700000000.5",
        "vllm_corrector_groups_withheld{family=\"vllm_corrected_request_time_per_output_token_seconds\",reason=\"no_le_1_bound\"} 1",
        "vllm_corrector_groups_withheld{family=\"vllm_corrected_iteration_tokens_local_compute\",reason=\"missing_input\"} 0",
        "vllm_corrector_slo_groups{slo=\"chat\"} 2",
        "vllm_corrector_slo_groups{slo=\"typo\"} 0",
    ] {
        assert!(has_line(&t, line), "missing {line} in\n{t}");
    }
}

#[test]
fn build_info_carries_the_commit_the_landing_page_shows() {
    // Issue 24 item 10: `/` showed the git commit, `vllm_corrector_build_info` only the version.
    let m = SelfMetrics::new();
    let mut t = String::new();
    m.encode_text(&mut t).unwrap();
    let commit = env!("VLLM_CORRECTOR_GIT_COMMIT");
    assert!(!commit.is_empty());
    assert!(
        crate::VERSION.ends_with(&format!("(commit {commit})")),
        "the landing page's commit"
    );
    let line = format!("vllm_corrector_build_info{{commit=\"{commit}\",version=\"0.1.0\"}} 1");
    assert!(has_line(&t, &line), "missing {line} in\n{t}");
}

#[test]
fn http_responses_are_counted_by_handler_and_code() {
    let m = SelfMetrics::new();
    for status in [
        axum::http::StatusCode::NO_CONTENT,
        axum::http::StatusCode::NO_CONTENT,
        axum::http::StatusCode::UNSUPPORTED_MEDIA_TYPE,
    ] {
        HttpResponded {
            handler: "/api/v1/write".into(),
            status,
        }
        .emit(&m);
    }
    let t = text_of(&m);
    assert!(
        has_line(
            &t,
            "vllm_corrector_http_requests_total{handler=\"/api/v1/write\",code=\"204\"} 2"
        ),
        "{t}"
    );
    assert!(
        has_line(
            &t,
            "vllm_corrector_http_requests_total{handler=\"/api/v1/write\",code=\"415\"} 1"
        ),
        "{t}"
    );
}

#[test]
fn text_format_has_no_openmetrics_markers_and_openmetrics_has_no_eof_yet() {
    let m = SelfMetrics::new();
    let t = text_of(&m);
    assert!(
        !t.contains("# EOF") && !t.contains("# UNIT") && !t.contains(" info\n"),
        "{t}"
    );
    assert!(
        has_line(&t, "# TYPE vllm_corrector_samples_received_total counter"),
        "{t}"
    );
    let mut om = String::new();
    m.encode_openmetrics(&mut om).unwrap();
    assert!(!om.contains("# EOF"), "{om}");
    assert!(
        has_line(&om, "# TYPE vllm_corrector_samples_received counter"),
        "{om}"
    );
}

#[test]
fn metadata_drops_are_pre_registered_and_add_up_by_reason() {
    use protocol::{MetadataDropReason, MetadataDropped};
    let m = SelfMetrics::new();
    let t = text_of(&m);
    for reason in ["invalid_utf8", "symbol_ref_out_of_range"] {
        let line = format!("vllm_corrector_metadata_dropped_total{{reason=\"{reason}\"}} 0");
        assert!(has_line(&t, &line), "missing {line} in\n{t}");
    }
    // Request 1: 2 invalid UTF-8; request 2: 1 invalid UTF-8 and 1 bad reference.
    let mut a = MetadataDropped::default();
    a.add(MetadataDropReason::InvalidUtf8);
    a.add(MetadataDropReason::InvalidUtf8);
    let mut b = MetadataDropped::default();
    b.add(MetadataDropReason::InvalidUtf8);
    b.add(MetadataDropReason::SymbolRefOutOfRange);
    MetadataEntriesDropped {
        dropped: a,
        protocol: "1.0",
    }
    .emit(&m);
    MetadataEntriesDropped {
        dropped: b,
        protocol: "2.0",
    }
    .emit(&m);
    let t = text_of(&m);
    for line in [
        "vllm_corrector_metadata_dropped_total{reason=\"invalid_utf8\"} 3",
        "vllm_corrector_metadata_dropped_total{reason=\"symbol_ref_out_of_range\"} 1",
    ] {
        assert!(has_line(&t, line), "missing {line} in\n{t}");
    }
}
