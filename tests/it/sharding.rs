//! Scaling out (Deploy issue, item 3): one vLLM target's series split across two corrector
//! instances, as remote-write sharding by series would split them, are reported by both in
//! `vllm_corrector_groups_incomplete`; one instance receiving the whole target reports 0. The
//! documented sharding by target keeps every target whole: Prometheus's `hashmod` on `instance`
//! (`deploy/prometheus/sharded.yml`), and vmagent 1.145's own `-remoteWrite.shardByURL` with
//! `-remoteWrite.shardByURL.labels=instance` (without `.labels` it shards by series, and both
//! correctors report every target incomplete).

use sim::{SimConfig, Simulator, SpecConfig};

use crate::harness::Corrector;
use crate::prometheus_e2e::ExpositionServer;
use crate::rw::Point;

/// The simulator's exposition at its current instant as remote-write points, with the target
/// labels a scrape adds.
pub(crate) fn snapshot_points(sim: &Simulator, target: &[(&str, &str)]) -> Vec<Point> {
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
            .partition(|p| series_hash(p).is_multiple_of(2));
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

/// `instance` values whose shard under Prometheus's `hashmod` (the last 8 bytes of the MD5 of the
/// value, big-endian, modulo 2) is known: computed with Python's hashlib, independently of
/// Prometheus. `vllm-a-0:8000` and `vllm-b-0:8000` go to shard 1, `vllm-e-0:8000` to shard 0.
const SHARDED_TARGETS: [(&str, usize); 3] = [
    ("vllm-a-0:8000", 1),
    ("vllm-b-0:8000", 1),
    ("vllm-e-0:8000", 0),
];

/// `deploy/prometheus/sharded.yml` with its corrector URLs pointed at `correctors` (in shard
/// order), scraping `targets` (address, instance label) every second.
fn sharded_config(correctors: &[&Corrector], targets: &[(String, &str)]) -> String {
    let shipped = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/prometheus/sharded.yml"
    ))
    .expect("read deploy/prometheus/sharded.yml");
    let mut config: serde_json::Value =
        serde_saphyr::from_str(&shipped).expect("sharded.yml parses");
    let writes = config["remote_write"]
        .as_array_mut()
        .expect("remote_write list");
    assert_eq!(
        writes.len(),
        correctors.len(),
        "one remote_write per corrector"
    );
    for (i, (write, corrector)) in writes.iter_mut().zip(correctors).enumerate() {
        let url = write["url"].as_str().unwrap().to_string();
        assert!(url.contains(&format!("vllm-corrector-{i}.")), "{url}");
        write["url"] = format!("{}/api/v1/write", corrector.base).into();
        write["queue_config"] = serde_json::json!({"batch_send_deadline": "1s"});
    }
    config["global"] = serde_json::json!({"scrape_interval": "1s", "scrape_timeout": "1s"});
    let static_configs: Vec<serde_json::Value> = targets
        .iter()
        .map(|(address, instance)| {
            serde_json::json!({"targets": [address], "labels": {"instance": instance}})
        })
        .collect();
    config["scrape_configs"] =
        serde_json::json!([{"job_name": "vllm", "static_configs": static_configs}]);
    // JSON is YAML: Prometheus reads it as its configuration file.
    config.to_string()
}

#[test]
fn the_documented_hashmod_sharding_sends_each_target_whole_to_its_shard() {
    let Some(binary) = test_support::tools::require(test_support::tools::Tool::PROMETHEUS_2) else {
        return;
    };
    let shards = [Corrector::start(), Corrector::start()];
    let mut servers = Vec::new();
    let mut per_target = 0;
    for (seed, (instance, _)) in SHARDED_TARGETS.iter().enumerate() {
        let cfg = SimConfig {
            seed: seed as u64,
            ..SimConfig::default()
        };
        let mut sim = Simulator::new(cfg).expect("simulator config");
        sim.advance_to(30.0);
        per_target = sim.snapshot().samples().count();
        servers.push((ExpositionServer::start(sim.render_text()), *instance));
    }
    let targets: Vec<(String, &str)> = servers
        .iter()
        .map(|(server, instance)| (server.address.clone(), *instance))
        .collect();
    let config = sharded_config(&[&shards[0], &shards[1]], &targets);
    let prometheus = test_support::prometheus::Prometheus::start(&binary, &config);

    let expected: Vec<Vec<&str>> = (0..2)
        .map(|shard| {
            SHARDED_TARGETS
                .iter()
                .filter(|(_, s)| *s == shard)
                .map(|(i, _)| *i)
                .collect()
        })
        .collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut last = String::new();
    while std::time::Instant::now() < deadline {
        let outcome: Result<(), String> = (0..2).try_for_each(|shard| {
            let snapshot = shards[shard].snapshot();
            let mut instances: Vec<String> = snapshot
                .samples
                .iter()
                .filter(|s| s.name == "vllm_corrected_token_weighted_itl_seconds_count")
                .filter_map(|s| s.label("instance").map(str::to_string))
                .collect();
            instances.sort();
            let groups = snapshot.value("vllm_corrector_active_groups", &[]);
            let incomplete = incomplete(&shards[shard]);
            let received = snapshot.value("vllm_corrector_samples_received_total", &[]);
            if instances != expected[shard] || groups != Some(expected[shard].len() as f64) {
                return Err(format!(
                    "shard {shard}: corrected instances {instances:?}, active groups {groups:?}, want {:?}",
                    expected[shard]
                ));
            }
            // Past three scrapes of every target of the shard, so that a split would show.
            let per_scrape = (per_target * expected[shard].len()) as f64;
            if received.is_none_or(|n| n < 4.0 * per_scrape) {
                return Err(format!("shard {shard}: only {received:?} samples received yet"));
            }
            if incomplete != Some(0.0) {
                return Err(format!("shard {shard}: groups_incomplete {incomplete:?}"));
            }
            Ok(())
        });
        match outcome {
            Ok(()) => return,
            Err(e) => last = e,
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    panic!(
        "the sharded configuration did not route whole targets: {last}\n--- prometheus log ---\n{}",
        prometheus.log_text()
    );
}

/// Targets of the vmagent test, each a vLLM 0.33 server with one engine, by `instance` label.
const VMAGENT_TARGETS: [&str; 6] = [
    "vllm-a-0:8000",
    "vllm-b-0:8000",
    "vllm-c-0:8000",
    "vllm-d-0:8000",
    "vllm-e-0:8000",
    "vllm-f-0:8000",
];

/// vmagent's scrape configuration: every `(address, instance)` every second under its label.
fn vmagent_scrape(targets: &[(String, &str)]) -> String {
    let static_configs: Vec<serde_json::Value> = targets
        .iter()
        .map(|(address, instance)| {
            serde_json::json!({"targets": [address], "labels": {"instance": instance}})
        })
        .collect();
    serde_json::json!({
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
        "scrape_configs": [{"job_name": "vllm", "static_configs": static_configs}],
    })
    .to_string()
}

/// What one corrector of a shard pair shows: the instances whose corrected series it serves
/// (sorted), its active groups and its `groups_incomplete`.
fn shard_view(corrector: &Corrector) -> (Vec<String>, Option<f64>, Option<f64>) {
    let snapshot = corrector.snapshot();
    let mut instances: Vec<String> = snapshot
        .samples
        .iter()
        .filter(|s| s.name == "vllm_corrected_token_weighted_itl_seconds_count")
        .filter_map(|s| s.label("instance").map(str::to_string))
        .collect();
    instances.sort();
    instances.dedup();
    (
        instances,
        snapshot.value("vllm_corrector_active_groups", &[]),
        incomplete(corrector),
    )
}

/// Whether a pair of correctors behind `-remoteWrite.shardByURL.labels=instance` holds whole
/// targets: every target at exactly one of them, both with some, as many active groups as
/// targets (one engine each), none incomplete. Errors: what is not so yet.
fn whole_targets(pair: &[Corrector; 2]) -> Result<(), String> {
    let views = [shard_view(&pair[0]), shard_view(&pair[1])];
    let mut all: Vec<String> = views.iter().flat_map(|(i, _, _)| i.clone()).collect();
    all.sort();
    if all != VMAGENT_TARGETS {
        return Err(format!(
            "served instances {:?} and {:?}: not every target exactly once",
            views[0].0, views[1].0
        ));
    }
    for (shard, (instances, groups, incomplete)) in views.iter().enumerate() {
        if instances.is_empty() {
            return Err(format!(
                "shard {shard} got no target: the test proves nothing"
            ));
        }
        if *groups != Some(instances.len() as f64) || *incomplete != Some(0.0) {
            return Err(format!(
                "shard {shard}: {instances:?}, active groups {groups:?}, incomplete {incomplete:?}"
            ));
        }
    }
    Ok(())
}

#[test]
fn vmagent_shard_by_url_on_instance_sends_each_target_whole_and_on_every_label_splits_them() {
    let Some(binary) = test_support::tools::require(test_support::tools::Tool::VMAGENT_SID) else {
        return;
    };
    // The flags exist in this build (docs/PROMETHEUS.md, "Scaling out", says which releases have them).
    let help = std::process::Command::new(&binary)
        .arg("-help")
        .output()
        .expect("vmagent -help");
    let help =
        String::from_utf8_lossy(&help.stderr).into_owned() + &String::from_utf8_lossy(&help.stdout);
    for flag in [
        "-remoteWrite.shardByURL\n",
        "-remoteWrite.shardByURL.labels array",
    ] {
        assert!(help.contains(flag), "vmagent -help lists no {flag:?}");
    }
    let mut servers = Vec::new();
    for (seed, instance) in VMAGENT_TARGETS.iter().enumerate() {
        let mut sim = Simulator::new(SimConfig {
            seed: seed as u64,
            ..SimConfig::default()
        })
        .expect("simulator config");
        sim.advance_to(30.0);
        servers.push((ExpositionServer::start(sim.render_text()), *instance));
    }
    let targets: Vec<(String, &str)> = servers
        .iter()
        .map(|(server, instance)| (server.address.clone(), *instance))
        .collect();
    let keep = include_str!("../../deploy/vmagent/keep.relabel.yml");
    let start = |pair: &[Corrector; 2], labels: bool| {
        let mut builder =
            test_support::vmagent::Vmagent::builder(&binary, &vmagent_scrape(&targets))
                .relabel(keep)
                .write(&pair[0].url("/api/v1/write"), None)
                .write(&pair[1].url("/api/v1/write"), None)
                .arg("-remoteWrite.shardByURL");
        if labels {
            builder = builder.arg("-remoteWrite.shardByURL.labels=instance");
        }
        builder.start()
    };
    // As docs/DEPLOY.md recommends, and without `.labels` (a hash of every label: by series).
    let by_target = [Corrector::start(), Corrector::start()];
    let by_series = [Corrector::start(), Corrector::start()];
    let _vmagents = (start(&by_target, true), start(&by_series, false));

    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut whole_since: Option<std::time::Instant> = None;
    let mut last = String::new();
    loop {
        match whole_targets(&by_target) {
            Ok(()) => {
                whole_since.get_or_insert_with(std::time::Instant::now);
            }
            Err(e) => {
                // Once whole, always whole: a later split is a failure, not a wait.
                assert!(whole_since.is_none(), "whole targets, then: {e}");
                last = e;
            }
        }
        let split = by_series
            .iter()
            .all(|c| incomplete(c).is_some_and(|n| n >= 1.0));
        // Whole for five more scrapes, so that the role sets were checked several times.
        if split && whole_since.is_some_and(|t| t.elapsed() >= std::time::Duration::from_secs(5)) {
            eprintln!(
                "shardByURL.labels=instance: {:?} | {:?}; by every label: incomplete {:?} | {:?}",
                shard_view(&by_target[0]).0,
                shard_view(&by_target[1]).0,
                incomplete(&by_series[0]),
                incomplete(&by_series[1])
            );
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "within 60 s: by instance: {last}; by every label: incomplete {:?} and {:?} (want ≥ 1 each)",
            incomplete(&by_series[0]),
            incomplete(&by_series[1])
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}
