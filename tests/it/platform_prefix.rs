//! `input.metric_prefix` through a real Prometheus (2.42): one scrape of a simulated vLLM 0.33
//! (speculative decoding, two engines) is remote-written twice, as vLLM names it to a corrector
//! with the defaults, and renamed `vllm:X` → `kserve_vllm:X` (what KServe's LLMInferenceService
//! monitors do) to a corrector with `input.metric_prefix: "kserve_vllm:"`, each through the keep
//! rule `vllm-corrector relabel` generates for its prefix. Once the exposition stops changing and
//! both have applied the same samples, both must serve the same corrected lines, every family of
//! both engines among them.

use std::time::{Duration, Instant};

use sim::{Profile, SimConfig, Simulator, SpecConfig};
use tools::relabel::{RelabelOptions, render};

use crate::harness::Corrector;
use crate::prometheus_e2e::ExpositionServer;
use test_support::prometheus::Prometheus;
use test_support::tools::{Tool, require};

const KSERVE: &str = "input:\n  metric_prefix: \"kserve_vllm:\"\n";

/// The renaming a platform applies, as a `write_relabel_configs` entry (indented for the list).
const RENAME: &str = "      - source_labels: [__name__]\n        regex: 'vllm:(.*)'\n        target_label: __name__\n        replacement: 'kserve_vllm:$1'\n";

fn keep_rule(prefix: &str) -> String {
    let mut options = RelabelOptions::default();
    options.metric_prefix = prefix.to_owned();
    render(&options)
        .lines()
        .map(|l| format!("      {l}\n"))
        .collect()
}

#[test]
fn a_kserve_prefixed_stream_gives_the_lines_vllms_own_names_give() {
    let Some(binary) = require(Tool::PROMETHEUS_2) else {
        return;
    };
    let mut sim = Simulator::new(SimConfig {
        profile: Profile::V0_33,
        engines_per_model: 2,
        arrival_rate: 4.0,
        spec: Some(SpecConfig {
            num_speculative_tokens: 3,
            acceptance_prob: 0.7,
            no_draft_fraction: 0.2,
        }),
        seed: 31,
        ..SimConfig::default()
    })
    .expect("simulator config");
    sim.advance_to(20.0);
    let target = ExpositionServer::start(sim.render_text());
    let own = Corrector::start_unsettled();
    let kserve =
        Corrector::start_with_config(Some(&format!("engine:\n  settle_scrapes: 0\n{KSERVE}")));
    let config = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: vllm\n    static_configs:\n      - targets: [\"{}\"]\nremote_write:\n  - url: http://{}/api/v1/write\n    write_relabel_configs:\n{}    queue_config:\n      batch_send_deadline: 1s\n  - url: http://{}/api/v1/write\n    write_relabel_configs:\n{RENAME}{}    queue_config:\n      batch_send_deadline: 1s\n",
        target.address,
        own.address,
        keep_rule("vllm:"),
        kserve.address,
        keep_rule("kserve_vllm:"),
    );
    let prometheus = Prometheus::builder(&binary, &config).start();

    // Ten changing scrapes, then a frozen exposition: both correctors end on the same frames.
    for t in 21..31 {
        sim.advance_to(f64::from(t));
        target.set(sim.render_text());
        std::thread::sleep(Duration::from_secs(1));
    }
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        std::thread::sleep(Duration::from_secs(2));
        let (a, b) = (own.snapshot(), kserve.snapshot());
        let applied = |s: &crate::metrics::Snapshot| {
            s.value("vllm_corrector_samples_applied_total", &[])
                .unwrap_or(0.0)
        };
        let lines = a.derived_lines();
        let families = [
            "vllm_corrected_request_time_per_output_token_seconds_count",
            "vllm_corrected_token_weighted_itl_seconds_count",
            "vllm_corrected_acceptance_corrected_itl_seconds_count",
            "vllm_corrected_iteration_tokens_local_compute_count",
            "vllm_corrected_tokens_per_output_count",
        ];
        let every_family = families.iter().all(|f| {
            ["0", "1"].iter().all(|e| {
                lines
                    .iter()
                    .any(|l| l.starts_with(f) && l.contains(&format!("engine=\"{e}\"")))
            })
        });
        if every_family
            && applied(&a) > 0.0
            && applied(&a) == applied(&b)
            && lines == b.derived_lines()
        {
            let unused = b
                .value(
                    "vllm_corrector_samples_rejected_total",
                    &[("reason", "unused_series")],
                )
                .unwrap_or(0.0);
            assert!(
                unused
                    / b.value("vllm_corrector_samples_received_total", &[])
                        .unwrap()
                    < 0.05,
                "the prefixed keep rule sends almost nothing unused"
            );
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the kserve_vllm: corrector did not serve what the vllm: one serves\n--- vllm: ---\n{}\n--- kserve_vllm: ---\n{}\n--- prometheus ---\n{}",
            a.text,
            b.text,
            prometheus.log_text()
        );
    }
}
