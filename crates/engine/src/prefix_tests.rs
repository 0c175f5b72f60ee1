//! Platform-prefixed inputs (`EngineConfig::metric_prefix`, docs/CONFIGURATION.md, "Inputs"): a
//! platform that renames `vllm:X` to `kserve_vllm:X` gets the same corrected families as vLLM's
//! own names give, under the families' own names.

use super::test_support::*;
use super::*;

/// `raw` with `vllm:` in `__name__` replaced by `prefix`.
fn renamed(raw: &[(Raw, i64)], prefix: &str) -> Vec<(Raw, i64)> {
    raw.iter()
        .map(|((labels, value), ts)| {
            let labels = labels
                .iter()
                .map(|(n, v)| match v.strip_prefix("vllm:") {
                    Some(rest) if *n == "__name__" => (*n, format!("{prefix}{rest}")),
                    _ => (*n, v.clone()),
                })
                .collect();
            ((labels, *value), *ts)
        })
        .collect()
}

fn engine_with_prefix(prefix: &str) -> Engine {
    Engine::new(EngineConfig {
        metric_prefix: prefix.to_owned(),
        ..config()
    })
}

#[test]
fn renamed_inputs_under_their_prefix_give_the_families_vllms_own_names_give() {
    let mut own = Engine::new(config());
    let mut report = IngestReport::default();
    feed(&mut own, &two_scrapes(), &mut report);
    let expected = outputs(&own);
    assert_eq!(expected.len(), 2 * FAMILIES, "every family of both engines");

    let mut kserve = engine_with_prefix("kserve_vllm:");
    let mut report = IngestReport::default();
    feed(
        &mut kserve,
        &renamed(&two_scrapes(), "kserve_vllm:"),
        &mut report,
    );
    assert_eq!(outputs(&kserve), expected);
    assert_eq!(report.received, report.applied + report.rejected_total());
}

#[test]
fn vllms_own_names_are_unused_under_another_prefix() {
    let mut kserve = engine_with_prefix("kserve_vllm:");
    let mut report = IngestReport::default();
    feed(&mut kserve, &two_scrapes(), &mut report);
    assert!(outputs(&kserve).is_empty());
    assert_eq!(report.applied, 0);
    assert_eq!(
        report.rejected[RejectReason::UnusedSeries.index()],
        report.received,
        "every sample counted as unused"
    );
}

#[test]
fn a_prefix_changed_by_a_reload_reads_series_the_index_had_marked_unused() {
    let mut engine = Engine::new(config());
    let kserve = renamed(&two_scrapes(), "kserve_vllm:");
    let mut report = IngestReport::default();
    feed(&mut engine, &kserve[..kserve.len() / 2], &mut report);
    assert_eq!(report.applied, 0, "unused under vllm:");
    engine.set_config(EngineConfig {
        metric_prefix: "kserve_vllm:".to_owned(),
        ..config()
    });
    let mut report = IngestReport::default();
    feed(&mut engine, &kserve, &mut report);
    let mut fresh = engine_with_prefix("kserve_vllm:");
    feed(&mut fresh, &kserve, &mut IngestReport::default());
    assert_eq!(outputs(&engine), outputs(&fresh));
}

/// `raw` with the label `region="eu"` added to every series (a sender's external label).
fn with_region(raw: &[(Raw, i64)]) -> Vec<(Raw, i64)> {
    raw.iter()
        .map(|((labels, value), ts)| {
            let mut labels = labels.clone();
            labels.push(("region", "eu".to_owned()));
            labels.sort();
            ((labels, *value), *ts)
        })
        .collect()
}

#[test]
fn a_dropped_external_label_leaves_the_groups_and_their_families_as_without_it() {
    let mut plain = Engine::new(config());
    feed(&mut plain, &two_scrapes(), &mut IngestReport::default());
    let mut dropping = Engine::new(EngineConfig {
        drop_labels: vec!["region".to_owned()],
        ..config()
    });
    feed(
        &mut dropping,
        &with_region(&two_scrapes()),
        &mut IngestReport::default(),
    );
    assert_eq!(outputs(&dropping), outputs(&plain));

    // Without the setting the label stays on every group.
    let mut keeping = Engine::new(config());
    feed(
        &mut keeping,
        &with_region(&two_scrapes()),
        &mut IngestReport::default(),
    );
    let kept = outputs(&keeping);
    assert_eq!(kept.len(), outputs(&plain).len());
    assert!(
        kept.iter()
            .all(|(_, labels, _)| labels.contains(&("region".to_owned(), "eu".to_owned())))
    );
}
