//! A `/metrics` scrape and the engine lock.

use std::sync::{Arc, Weak};

use super::*;
use crate::config::Limits;
use crate::exposition::info;
use engine::{Engine, EngineConfig, GroupOutputs, IngestReport};
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

/// The rest of `chunks`, joined.
fn rest(chunks: &mut Page) -> String {
    let mut out = String::new();
    while let Some(chunk) = chunks.next_chunk() {
        out.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    out
}

/// The page up to the self-metrics (which the scrape itself changes): the corrected families and
/// `vllm_corrector_family_info`.
fn families_and_info(page: &str) -> &str {
    let own = page
        .match_indices("# HELP vllm_corrector_")
        .find(|(at, _)| !page[*at..].starts_with("# HELP vllm_corrector_family_info"))
        .map_or(page.len(), |(at, _)| at);
    &page[..own]
}

/// Every output `state`'s engine serves now, as weak pointers.
fn outputs(state: &AppState) -> Vec<Weak<engine::DerivedValue>> {
    let mut groups = state.lock_engine().outputs();
    GroupOutputs::sort(&mut groups);
    groups
        .iter()
        .flat_map(|g| g.values.iter().flatten().map(Arc::downgrade))
        .collect()
}

#[test]
fn a_scrape_read_slowly_keeps_no_output_the_engine_replaced() {
    // Two engines fed alike; one is scraped, slowly, while both take scrape 2.
    let (scraped, alone) = (big_histogram_state(), big_histogram_state());
    let before = render_all(&scraped, Format::Text);
    let (old, old_alone) = (outputs(&scraped), outputs(&alone));
    assert!(!old.is_empty());

    let mut chunks = page(&scraped, Format::Text);
    let first = String::from_utf8(chunks.next_chunk().unwrap().to_vec()).unwrap();
    // The group's canonical TPOT is written whole in the first chunk, as it was before.
    assert_eq!(bucket_lines(&first), BUCKETS + 1);
    assert!(before.starts_with(&first));
    // Between two chunks the lock is free: a write replaces the outputs...
    scrape(
        &mut scraped
            .core
            .try_engine()
            .expect("no chunk holds the engine lock"),
        2,
    );
    scrape(&mut alone.lock_engine(), 2);
    // ...and the scrape, not read further yet, keeps none of the old ones alive: each is held
    // as often as in the engine no one scrapes (by the engine's holds, if at all).
    let held = |outputs: &[Weak<engine::DerivedValue>]| -> Vec<usize> {
        outputs.iter().map(Weak::strong_count).collect()
    };
    assert_eq!(held(&old), held(&old_alone));
    let new = outputs(&scraped);
    assert_eq!(new.len(), old.len());
    assert!(
        new.iter().zip(&old).all(|(new, old)| !new.ptr_eq(old)),
        "scrape 2 replaced every output"
    );
    // The rest of the page: canonical TPOT no second time, then the group's family info.
    let rest = rest(&mut chunks);
    assert_eq!(bucket_lines(&rest), 0);
    assert_eq!(
        rest.matches("vllm_corrector_family_info{engine=\"0\"")
            .count(),
        engine::FAMILIES
    );
}

/// Sends `vllm:generation_tokens_total` of a group `instance`, padded with a `pad` label of
/// `pad` bytes, at `ts` (ms): a group that feeds no family.
fn lone_series(engine: &mut Engine, instance: &str, pad: &str, ts: i64) -> IngestReport {
    let labels = [
        Label {
            name: "__name__",
            value: "vllm:generation_tokens_total",
        },
        Label {
            name: "instance",
            value: instance,
        },
        Label {
            name: "pad",
            value: pad,
        },
    ];
    let mut report = IngestReport::default();
    let sample = Sample {
        value: 1.0,
        timestamp_ms: ts,
    };
    engine.ingest(&labels, &[sample], ts, &mut report);
    report
}

#[test]
fn a_scrape_read_slowly_keeps_no_group_that_leaves() {
    // Groups that feed no family may hold a quarter of the 8 series: 2.
    let state = AppState::new(
        Engine::new(EngineConfig {
            max_active_series: 8,
            ..EngineConfig::default()
        }),
        Limits::default(),
    );
    let pad = "p".repeat(100_000);
    let labels: Vec<Weak<[(String, String)]>> = {
        let mut engine = state.lock_engine();
        for instance in ["a", "b"] {
            assert_eq!(lone_series(&mut engine, instance, &pad, 1_000).applied, 1);
        }
        engine
            .snapshot()
            .iter()
            .map(|g| Arc::downgrade(&g.labels))
            .collect()
    };
    assert_eq!(labels.len(), 2);
    let mut chunks = page(&state, Format::Text);
    // 40 s later the two groups, which feed no family, are evicted to make room for new ones.
    {
        let mut engine = state.lock_engine();
        for instance in ["c", "d"] {
            assert_eq!(lone_series(&mut engine, instance, "", 41_000).applied, 1);
        }
    }
    // The scrape, taken while they were there, keeps neither their labels (100 KB each) alive...
    assert!(labels.iter().all(|l| l.upgrade().is_none()));
    // ...nor shows them; the groups that came after it started are not in it either.
    let body = rest(&mut chunks);
    let info: Vec<&str> = body
        .lines()
        .filter(|l| l.starts_with("vllm_corrector_family_info{"))
        .map(|l| &l[..l.len().min(60)])
        .collect();
    assert!(info.is_empty(), "{info:?}");
    assert!(body.contains("vllm_corrector_active_groups 2"));
    let next = render_all(&state, Format::Text);
    assert_eq!(
        next.matches("vllm_corrector_family_info{instance=\"c\"")
            .count(),
        engine::FAMILIES
    );
}

#[test]
fn a_scrape_in_windows_is_the_page_rendered_whole() {
    // 400 served groups with labels of 0 to 2 KiB, so windows hold a few groups to a few hundred.
    let state = crate::http::paging_tests::served_groups_with(400, |i| (i * 37) % 2048);
    for format in [Format::Text, Format::OpenMetrics] {
        // The whole page from every group at once, by the renderers alone.
        let (mut outputs, mut snapshots) = {
            let engine = state.lock_engine();
            (engine.outputs(), engine.snapshot())
        };
        GroupOutputs::sort(&mut outputs);
        snapshots.sort_unstable_by(|a, b| a.labels.cmp(&b.labels));
        let mut whole = String::new();
        crate::exposition::render::render_groups(&mut whole, &outputs, format);
        let statuses: Vec<info::GroupFamilies<'_>> = snapshots
            .iter()
            .map(|g| {
                (
                    &g.labels[..],
                    &g.families[..],
                    g.slo_notes.as_deref().unwrap_or_default(),
                )
            })
            .collect();
        info::render_family_info(&mut whole, &statuses, format);
        assert!(whole.matches("vllm_corrected_").count() > 400);

        let page = render_all(&state, format);
        let page = families_and_info(&page);
        if page != whole {
            let a: Vec<&str> = page.lines().collect();
            let b: Vec<&str> = whole.lines().collect();
            let first = a
                .iter()
                .zip(&b)
                .position(|(x, y)| x != y)
                .unwrap_or(a.len().min(b.len()));
            panic!(
                "{} lines, {} rendered whole; first difference at line {first}: {:?} / {:?}",
                a.len(),
                b.len(),
                a.get(first).map(|l| &l[..l.len().min(120)]),
                b.get(first).map(|l| &l[..l.len().min(120)])
            );
        }
    }
}
