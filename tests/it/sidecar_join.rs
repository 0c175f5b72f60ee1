//! The sidecar form's scrape job through a real Prometheus (2.42) with the external labels a real
//! deployment has (`cluster`, and Prometheus Operator's `prometheus` and `prometheus_replica`):
//! Prometheus scrapes a simulated vLLM 0.33 server, remote-writes to the corrector with
//! `deploy/prometheus/sidecar.yml`'s `remote_write` (remote write adds the external labels) and
//! scrapes the corrector back with that file's `vllm-corrector` job. The corrected series stored in
//! Prometheus must have the raw series' label set, apart from `__name__`, so that
//! `rate(vllm_corrected_…) / rate(vllm:…)` returns a value. The Operator's and the Helm values'
//! jobs carry the same `metric_relabel_configs` (checked by `deploy/tools/validate_manifests.py`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use sim::{Profile, SimConfig, Simulator, SpecConfig};

use crate::accuracy_promql::{Labels, PromApi};
use crate::harness::Corrector;
use crate::prometheus_e2e::ExpositionServer;
use test_support::prometheus::Prometheus;
use test_support::tools::{Tool, require};

const SIDECAR_YML: &str = include_str!("../../deploy/prometheus/sidecar.yml");

/// The external labels of a kube-prometheus-stack Prometheus with `externalLabels: {cluster: …}`.
const EXTERNAL_LABELS: [(&str, &str); 3] = [
    ("cluster", "eu-1"),
    ("prometheus", "monitoring/kube-prometheus-stack-prometheus"),
    (
        "prometheus_replica",
        "prometheus-kube-prometheus-stack-prometheus-0",
    ),
];

/// Each corrected family's `_count` and a raw series of the same engine it is compared with.
const JOINS: [(&str, &str); 5] = [
    (
        "vllm_corrected_request_time_per_output_token_seconds_count",
        "vllm:request_time_per_output_token_seconds_count",
    ),
    (
        "vllm_corrected_token_weighted_itl_seconds_count",
        "vllm:generation_tokens_total",
    ),
    (
        "vllm_corrected_acceptance_corrected_itl_seconds_count",
        "vllm:spec_decode_num_accepted_tokens_total",
    ),
    (
        "vllm_corrected_iteration_tokens_local_compute_count",
        "vllm:iteration_tokens_total_count",
    ),
    (
        "vllm_corrected_tokens_per_output_count",
        "vllm:inter_token_latency_seconds_count",
    ),
];

fn simulator() -> Simulator {
    let cfg = SimConfig {
        profile: Profile::V0_33,
        models: vec!["llama".to_string()],
        engines_per_model: 2,
        arrival_rate: 4.0,
        output_len: (2, 64),
        max_tokens: 64,
        kv_transfer_prob: 0.2,
        spec: Some(SpecConfig {
            num_speculative_tokens: 3,
            acceptance_prob: 0.7,
            no_draft_fraction: 0.2,
        }),
        seed: 24,
        ..SimConfig::default()
    };
    Simulator::new(cfg).expect("simulator config")
}

/// `deploy/prometheus/sidecar.yml` as shipped, run against this test's processes: the external
/// labels above instead of the example's, the corrector's address for `127.0.0.1:9490`, 1 s
/// scrapes, a `vllm` job for `vllm_target`, and a 1 s remote-write batch deadline.
fn sidecar_config(vllm_target: &str, corrector: &str, extra: &[(&str, &str)]) -> String {
    let mut config = SIDECAR_YML.to_owned();
    let mut replace = |from: &str, to: &str| {
        assert!(
            config.contains(from),
            "sidecar.yml no longer holds {from:?}"
        );
        config = config.replace(from, to);
    };
    let labels: String = EXTERNAL_LABELS
        .iter()
        .chain(extra)
        .map(|(name, value)| format!("    {name}: {value}\n"))
        .collect();
    replace(
        "  external_labels:\n    cluster: example\n",
        &format!("  external_labels:\n{labels}  scrape_timeout: 1s\n"),
    );
    replace("  scrape_interval: 15s\n", "  scrape_interval: 1s\n");
    replace("127.0.0.1:9490", corrector);
    replace(
        "\nscrape_configs:\n",
        &format!(
            "\nscrape_configs:\n  - job_name: vllm\n    static_configs:\n      - targets: [\"{vllm_target}\"]\n"
        ),
    );
    // The remote_write entry is the file's last block.
    config.push_str("    queue_config:\n      batch_send_deadline: 1s\n");
    config
}

/// The labels of `series` without `__name__`.
fn without_name(series: &Labels) -> Labels {
    let mut labels = series.clone();
    labels.remove("__name__");
    labels
}

/// Every series of `name`, keyed by its `engine` label.
fn by_engine(
    prometheus: &PromApi,
    name: &str,
    at_ms: i64,
) -> Result<BTreeMap<String, Labels>, String> {
    Ok(prometheus
        .vector(name, at_ms)?
        .into_iter()
        .map(|(labels, _)| (labels.get("engine").cloned().unwrap_or_default(), labels))
        .collect())
}

/// `Ok` when for each engine every corrected family's series has the label set of the raw
/// series it is compared with, apart from `__name__`.
fn joined(prometheus: &PromApi, at_ms: i64) -> Result<(), String> {
    for (corrected, raw) in JOINS {
        let corrected_series = by_engine(prometheus, corrected, at_ms)?;
        let raw_series = by_engine(prometheus, raw, at_ms)?;
        for engine in ["0", "1"] {
            let (Some(c), Some(r)) = (corrected_series.get(engine), raw_series.get(engine)) else {
                return Err(format!(
                    "engine {engine}: {corrected} {:?}, {raw} {:?}",
                    corrected_series.get(engine),
                    raw_series.get(engine)
                ));
            };
            if without_name(c) != without_name(r) {
                return Err(format!("engine {engine}: {c:?} does not join {r:?}"));
            }
        }
    }
    Ok(())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[test]
fn sidecar_scrape_job_gives_corrected_series_the_raw_label_set_under_external_labels() {
    joins_under_external_labels(&[], None);
}

/// An external label the shipped scrape job does not drop (`region`), named once, in the
/// corrector's `input.drop_labels` (docs/PROMETHEUS.md, "External labels").
#[test]
fn an_external_label_in_input_drop_labels_keeps_the_join_without_touching_the_scrape_job() {
    joins_under_external_labels(
        &[("region", "eu")],
        Some("input:\n  drop_labels: [region]\n"),
    );
}

/// Prometheus with the shipped sidecar configuration and `extra` external labels sends to a
/// corrector started with `corrector_config`: the corrected series join the raw ones, and
/// nothing stored carries an external label.
fn joins_under_external_labels(extra: &[(&str, &str)], corrector_config: Option<&str>) {
    let Some(binary) = require(Tool::PROMETHEUS_2) else {
        return;
    };
    let mut sim = simulator();
    sim.advance_to(20.0);
    let vllm = ExpositionServer::start(sim.render_text());
    let corrector = Corrector::start_with_config(corrector_config);
    let prometheus = Prometheus::start(
        &binary,
        &sidecar_config(&vllm.address, &corrector.address, extra),
    );
    let api = PromApi::new(prometheus.base());
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut t = 20.0;
    let mut last = String::from("nothing queried yet");
    loop {
        t += 1.0;
        sim.advance_to(t);
        vllm.set(sim.render_text());
        std::thread::sleep(Duration::from_secs(1));
        // Several scrapes of corrected series, so that a 30 s rate has two points of each.
        match joined(&api, now_ms()) {
            Ok(()) if t >= 45.0 => break,
            Ok(()) => {}
            Err(e) => last = e,
        }
        assert!(
            Instant::now() < deadline,
            "the corrected series did not join the raw ones within 120 s: {last}\n--- corrector /metrics ---\n{}\n--- prometheus log ---\n{}",
            corrector.metrics_text(),
            prometheus.log_text()
        );
    }

    // The corrector did receive the external labels: remote write added them.
    let served = corrector.snapshot();
    let sample = served
        .samples
        .iter()
        .find(|s| s.name == JOINS[0].0)
        .expect("a corrected series on the corrector's /metrics");
    for (name, value) in EXTERNAL_LABELS {
        assert!(
            sample.labels.iter().any(|(n, v)| n == name && v == value),
            "the corrector's series lack the external label {name}: {:?}",
            sample.labels
        );
    }
    // ... except those `input.drop_labels` names, dropped before grouping.
    for (name, _) in extra {
        assert!(
            sample.labels.iter().all(|(n, _)| n != name),
            "input.drop_labels did not drop {name}: {:?}",
            sample.labels
        );
    }

    // The join the issue asked for returns a value for each engine.
    let at = now_ms();
    let ratio = api
        .vector(
            "rate(vllm_corrected_token_weighted_itl_seconds_count[30s]) / rate(vllm:generation_tokens_total[30s])",
            at,
        )
        .expect("ratio query");
    let engines: Vec<&str> = ratio
        .iter()
        // At most 1 in steady state (tokens after each request's first, over tokens); the
        // corrected series lag the raw ones by a remote-write delay, so one 30 s window of each
        // can be a few percent apart on a loaded machine.
        .filter(|(_, v)| v.is_finite() && *v > 0.0 && *v <= 1.2)
        .filter_map(|(l, _)| l.get("engine").map(String::as_str))
        .collect();
    assert_eq!(
        engines.len(),
        2,
        "rate(corrected) / rate(raw) per engine: {ratio:?}"
    );
    // And nothing stored in Prometheus carries the external labels.
    for (name, _) in EXTERNAL_LABELS.iter().chain(extra) {
        let tagged = api
            .vector(&format!("{{__name__=~\"vllm.*\", {name}!=\"\"}}"), at)
            .expect("query");
        assert!(tagged.is_empty(), "series stored with {name}: {tagged:?}");
    }
}
