//! Histograms that arrive only in a form the rules do not read: which names are such forms, and a
//! simulated vLLM 0.33 behind a relabelling that drops the `_count` of two histograms, told apart
//! from one whose series are split (nothing of the histogram arrives).

use super::*;
use crate::test_support::ingest_series;
use crate::{Engine, EngineConfig, EngineEvent, IngestReport};
use protocol::Sample;
use sim::{Profile, SimConfig, Simulator};

#[test]
fn a_read_histograms_native_series_and_unread_parts_are_recognised_under_the_prefix() {
    let ttft = bit_of("vllm:time_to_first_token_seconds");
    assert!(ttft.is_some());
    assert_eq!(
        native_bit("vllm:time_to_first_token_seconds", "vllm:"),
        ttft
    );
    assert_eq!(
        native_bit("kserve_vllm:time_to_first_token_seconds", "kserve_vllm:"),
        ttft
    );
    assert_eq!(
        native_bit("vllm:time_to_first_token_seconds", "kserve_vllm:"),
        None
    );
    for part in ["_bucket", "_sum", "_count"] {
        let name = format!("vllm:time_to_first_token_seconds{part}");
        assert_eq!(unread_part_bit(&name, "vllm:"), ttft, "{name}");
    }
    // Not histograms a rule reads, or not a part.
    assert_eq!(
        native_bit("vllm:e2e_request_latency_seconds_sum", "vllm:"),
        None
    );
    assert_eq!(unread_part_bit("vllm:num_requests_running", "vllm:"), None);
    assert_eq!(
        unread_part_bit("vllm:generation_tokens_total", "vllm:"),
        None
    );
    assert_eq!(
        unread_part_bit("vllm:time_to_first_token_seconds", "vllm:"),
        None
    );
}

/// Four scrapes of a simulated vLLM 0.33 through the engine, keeping the series `keep` accepts,
/// each scrape's series as the simulator prints them, or those `first` accepts first.
fn run(
    keep: impl Fn(&str) -> bool,
    first: impl Fn(&str) -> bool,
) -> (crate::GroupSnapshot, Vec<EngineEvent>) {
    let mut sim = Simulator::new(SimConfig {
        profile: Profile::V0_33,
        seed: 3,
        ..SimConfig::default()
    })
    .expect("simulator config");
    let mut engine = Engine::new(EngineConfig::default());
    let mut report = IngestReport::default();
    let mut events = Vec::new();
    for t in [5_000_i64, 10_000, 15_000, 20_000] {
        sim.advance_to(t as f64 / 1000.0);
        let snapshot = sim.snapshot();
        let mut samples: Vec<_> = snapshot.samples().collect();
        samples.sort_by_key(|s| !first(&s.name));
        for s in samples.iter().filter(|s| keep(&s.name)) {
            let mut labels = vec![("__name__".to_owned(), s.name.clone())];
            labels.extend(s.labels.iter().cloned());
            let sample = Sample {
                value: s.value,
                timestamp_ms: t,
            };
            ingest_series(&mut engine, &labels, &[sample], t, &mut report);
        }
        events.extend(engine.take_events());
    }
    let mut groups = engine.snapshot();
    assert_eq!(groups.len(), 1);
    (groups.remove(0), events)
}

fn incomplete_events(events: &[EngineEvent]) -> Vec<Vec<UnreadHistogram>> {
    events
        .iter()
        .filter_map(|e| match e {
            EngineEvent::GroupIncomplete { unread, .. } => Some(unread.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_relabelling_that_keeps_only_unread_parts_is_named_not_blamed_on_sharding() {
    let dropped = [
        "vllm:time_to_first_token_seconds_count",
        "vllm:iteration_tokens_total_count",
    ];
    let want = vec![
        UnreadHistogram {
            histogram: "vllm:time_to_first_token_seconds",
            form: UnreadForm::UnreadParts,
        },
        UnreadHistogram {
            histogram: "vllm:iteration_tokens_total",
            form: UnreadForm::UnreadParts,
        },
    ];
    // In either order: a bucket met before the group's first read series (when the group does
    // not exist yet) is looked at again.
    let parts = |name: &str| {
        name.starts_with("vllm:time_to_first_token_seconds")
            || name.starts_with("vllm:iteration_tokens_total")
    };
    for parts_first in [false, true] {
        let (group, events) = run(
            |name| !dropped.contains(&name),
            |name| parts_first && parts(name),
        );
        assert!(group.incomplete, "parts first {parts_first}");
        assert_eq!(group.unread, want, "parts first {parts_first}");
        assert_eq!(
            incomplete_events(&events),
            std::slice::from_ref(&want),
            "parts first {parts_first}"
        );
    }
    // Nothing of those histograms arrives (split across correctors, or filtered whole): still
    // incomplete, with no form to name.
    let (group, events) = run(|name| !parts(name), |_| false);
    assert!(group.incomplete);
    assert_eq!(group.unread, []);
    assert_eq!(incomplete_events(&events), [vec![]]);
    // A split besides (ITL's sum and count at another corrector too): the unread parts are not
    // the whole cause, and nothing is named.
    let (group, _) = run(
        |name| {
            !dropped.contains(&name)
                && name != "vllm:inter_token_latency_seconds_sum"
                && name != "vllm:inter_token_latency_seconds_count"
        },
        |_| false,
    );
    assert!(group.incomplete);
    assert_eq!(group.unread, []);
    // Everything: complete, and the buckets no rule reads are no cause of anything.
    let (group, events) = run(|_| true, |_| false);
    assert!(!group.incomplete);
    assert_eq!(group.unread, []);
    assert_eq!(
        incomplete_events(&events),
        Vec::<Vec<UnreadHistogram>>::new()
    );
}
