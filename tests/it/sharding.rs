//! Scaling out (Deploy issue, item 3): one vLLM target's series split across two corrector
//! instances, as remote-write sharding by series would split them, are reported by both in
//! `vllm_corrector_groups_incomplete`; one instance receiving the whole target reports 0.

use vllm_corrector::sim::{SimConfig, Simulator, SpecConfig};

use crate::harness::Corrector;
use crate::rw::Point;

/// The simulator's exposition at its current instant as remote-write points, with the target
/// labels a scrape adds.
pub fn snapshot_points(sim: &Simulator, target: &[(&str, &str)]) -> Vec<Point> {
    let snapshot = sim.snapshot();
    snapshot
        .samples()
        .map(|s| {
            let mut labels = s.labels.clone();
            labels.push(("__name__".to_string(), s.name.clone()));
            for (n, v) in target {
                labels.push((n.to_string(), v.to_string()));
            }
            labels.sort();
            Point {
                labels,
                value: s.value,
                timestamp_ms: snapshot.timestamp_ms,
            }
        })
        .collect()
}

/// FNV-1a over the series' sorted label pairs: a stand-in for the label hash Prometheus shards
/// remote write by (any hash that ignores which target a series belongs to splits the target).
fn series_hash(point: &Point) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (n, v) in &point.labels {
        for b in n.bytes().chain([0xff]).chain(v.bytes()).chain([0xff]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

fn incomplete(corrector: &Corrector) -> Option<f64> {
    corrector
        .snapshot()
        .value("vllm_corrector_groups_incomplete", &[])
}

#[test]
fn series_sharding_across_two_instances_is_reported_by_both_and_whole_targets_by_neither() {
    let cfg = SimConfig {
        engines_per_model: 1,
        spec: Some(SpecConfig {
            num_speculative_tokens: 2,
            acceptance_prob: 0.7,
            no_draft_fraction: 0.1,
        }),
        ..SimConfig::default()
    };
    let mut sim = Simulator::new(cfg).expect("simulator config");
    let target = [("job", "vllm"), ("instance", "10.0.0.7:8000")];
    let (shard0, shard1, whole) = (Corrector::start(), Corrector::start(), Corrector::start());
    for t in [15.0, 30.0, 45.0] {
        sim.advance_to(t);
        let points = snapshot_points(&sim, &target);
        let (even, odd): (Vec<Point>, Vec<Point>) = points
            .iter()
            .cloned()
            .partition(|p| series_hash(p) % 2 == 0);
        assert!(
            !even.is_empty() && !odd.is_empty(),
            "the hash splits the target"
        );
        shard0.write(&even);
        shard1.write(&odd);
        whole.write(&points);
    }
    // Three scrapes: the role sets were learned at 15 s and stayed the same at 30 s and 45 s.
    assert_eq!(
        incomplete(&whole),
        Some(0.0),
        "one instance with every series"
    );
    assert_eq!(
        whole.snapshot().value("vllm_corrector_active_groups", &[]),
        Some(1.0)
    );
    for (name, shard) in [("shard 0", &shard0), ("shard 1", &shard1)] {
        assert_eq!(
            incomplete(shard),
            Some(1.0),
            "{name} holds half of the one target\n{}",
            shard.metrics_text()
        );
    }
}
