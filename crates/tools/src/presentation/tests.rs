//! Tests of `presentation.rs`: the table covers the registry, once per family.

use super::*;

/// Every registered family that has a mean (all but the SLO counters, which the tools show as
/// attainment and goodput) has one entry, and the table has no other: an entry names its family
/// through a `Family` constant or `Family::named`, which does not compile for a name no rule has,
/// so an entry cannot name an unregistered family.
#[test]
fn every_registered_family_has_exactly_one_presentation_entry() {
    for family in Family::ALL {
        let entries = PRESENTATIONS.iter().filter(|p| p.family == family).count();
        let expected = usize::from(family.kind() != engine::FamilyKind::Counters);
        assert_eq!(entries, expected, "{family:?}: {entries} entries");
        let slo = usize::from(SLO.family == family);
        assert_eq!(
            slo,
            1 - expected,
            "{family:?}: the SLO counters and only they are shown by SLO"
        );
    }
}

#[test]
fn the_slo_presentation_knows_every_sli_and_counter_name() {
    for sli in Sli::ALL {
        assert!(!SLO.raw_histogram(sli).is_empty(), "{sli}");
    }
    for name in [
        "vllm_corrected_slo_events_total",
        "vllm_corrected_slo_good_events_total",
        "vllm_corrected_slo_finished_requests_total",
        "vllm_corrected_goodput_requests_total",
    ] {
        assert!(SLO.is_counter(name), "{name}");
    }
    for name in [
        "vllm_corrected_slo_events",
        "vllm:e2e_request_latency_seconds_count",
    ] {
        assert!(!SLO.is_counter(name), "{name}");
    }
}

#[test]
fn keys_and_labels_are_unique_across_families() {
    let unique = |what: &str, keys: Vec<&str>| {
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), keys.len(), "{what}: {keys:?}");
    };
    unique(
        "json keys",
        PRESENTATIONS.iter().map(|p| p.json_key).collect(),
    );
    unique("columns", PRESENTATIONS.iter().map(|p| p.column).collect());
    unique("words", PRESENTATIONS.iter().map(|p| p.words).collect());
    let demo_keys = PRESENTATIONS
        .iter()
        .flat_map(|p| [Some(p.demo.1), p.demo_p99.map(|r| r.key)])
        .flatten()
        .collect();
    unique("demo keys", demo_keys);
}
