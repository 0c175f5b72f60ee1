//! `vllm-corrector relabel` through a real Prometheus (2.42): Prometheus scrapes two simulated
//! vLLM 0.33 servers (speculative decoding, two engines each; one printing `le` as Python's
//! `prometheus_client` does, `1.0`, the other as Go does, `1`), applies the generated
//! `write_relabel_configs` and remote-writes to the corrector. Every family must still be served
//! for every engine, and under 5 % of what is sent may go unused.

use std::time::{Duration, Instant};

use sim::{Profile, SimConfig, Simulator, SpecConfig};
use tools::relabel::{RelabelOptions, render};

use crate::harness::Corrector;
use crate::metrics::Snapshot;
use crate::prometheus_e2e::ExpositionServer;
use test_support::prometheus::Prometheus;
use test_support::tools::{Tool, require};

const FAMILIES: [&str; 5] = [
    "vllm_corrected_request_time_per_output_token_seconds_count",
    "vllm_corrected_token_weighted_itl_seconds_count",
    "vllm_corrected_acceptance_corrected_itl_seconds_count",
    "vllm_corrected_iteration_tokens_local_compute_count",
    "vllm_corrected_tokens_per_output_count",
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
        seed: 12,
        ..SimConfig::default()
    };
    Simulator::new(cfg).expect("simulator config")
}

/// The same exposition with every `le` printed as Go prints it (`1` instead of `1.0`).
fn go_style(text: &str) -> String {
    text.replace(".0\"}", "\"}").replace(".0\",", "\",")
}

/// Samples of `vllm:*` series in one exposition text (what a `vllm:.*` keep would send).
fn vllm_samples(text: &str) -> usize {
    text.lines().filter(|l| l.starts_with("vllm:")).count()
}

fn served(snapshot: &Snapshot, instance: &str, engine: &str, family: &str) -> bool {
    snapshot.samples.iter().any(|s| {
        s.name == family
            && s.labels
                .iter()
                .any(|(n, v)| n == "instance" && v == instance)
            && s.labels.iter().any(|(n, v)| n == "engine" && v == engine)
    })
}

/// How the Prometheus of [`keeps_every_family`] scrapes and sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sending {
    /// Classic histograms over RW 1.0.
    Classic,
    /// Native histograms with custom buckets over RW 2.0 (Prometheus 3).
    Nhcb,
}

#[test]
fn generated_relabel_keeps_every_family_and_sends_almost_nothing_unused() {
    keeps_every_family(Tool::PROMETHEUS_2, Sending::Classic);
}

#[test]
fn generated_relabel_keeps_every_family_through_prometheus_3() {
    keeps_every_family(Tool::PROMETHEUS_3, Sending::Classic);
}

#[test]
fn generated_relabel_keeps_every_family_of_an_nhcb_stream_and_only_whole_histograms_go_unused() {
    keeps_every_family(Tool::PROMETHEUS_3, Sending::Nhcb);
}

/// The samples per scrape of `text` that an NHCB stream carries and no rule reads: every bucket
/// and the `_sum` of the TTFT and iteration-tokens histograms (the rules read their `_count`), and
/// of the generation-tokens histogram all but the `le="1"` bucket (and its `_count`). The classic
/// form sends none of them through the keep rule.
fn nhcb_unread(text: &str) -> usize {
    let lines = |prefix: &str| text.lines().filter(|l| l.starts_with(prefix)).count();
    let le_one = text
        .lines()
        .filter(|l| {
            l.starts_with("vllm:request_generation_tokens_bucket{") && l.contains("le=\"1.0\"")
        })
        .count();
    [
        "vllm:time_to_first_token_seconds",
        "vllm:iteration_tokens_total",
        "vllm:request_generation_tokens",
    ]
    .iter()
    .map(|h| lines(&format!("{h}_bucket{{")) + lines(&format!("{h}_sum{{")))
    .sum::<usize>()
        - le_one
}

/// Prometheus `tool` scrapes the two targets and remote-writes through the generated keep rule
/// as `sending` says; every family is served for every engine of both.
fn keeps_every_family(tool: Tool, sending: Sending) {
    let Some(binary) = require(tool) else {
        return;
    };
    let mut sim = simulator();
    sim.advance_to(20.0);
    let text = sim.render_text();
    assert!(
        text.contains("le=\"1.0\""),
        "the 0.33 profile prints Python floats"
    );
    assert!(
        go_style(&text).contains("vllm:request_generation_tokens_bucket{engine=\"0\",le=\"1\","),
        "go style"
    );
    let python = ExpositionServer::start(text.clone());
    let go = ExpositionServer::start(go_style(&text));
    let corrector = Corrector::start();
    let relabel: String = render(&RelabelOptions::default())
        .lines()
        .map(|l| format!("      {l}\n"))
        .collect();
    let (nhcb_scrape, nhcb_write) = match sending {
        Sending::Classic => ("", ""),
        Sending::Nhcb => (
            "    convert_classic_histograms_to_nhcb: true\n",
            "    protobuf_message: io.prometheus.write.v2.Request\n    send_native_histograms: true\n",
        ),
    };
    let config = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: vllm\n{nhcb_scrape}    static_configs:\n      - targets: [\"{}\", \"{}\"]\nremote_write:\n  - url: http://{}/api/v1/write\n{nhcb_write}    write_relabel_configs:\n{relabel}    queue_config:\n      batch_send_deadline: 1s\n",
        python.address, go.address, corrector.address
    );
    let mut prometheus = Prometheus::builder(&binary, &config);
    if sending == Sending::Nhcb {
        prometheus = prometheus.feature("native-histograms");
    }
    let prometheus = prometheus.start();

    let deadline = Instant::now() + Duration::from_secs(120);
    let mut t = 20.0;
    let snapshot = loop {
        t += 1.0;
        sim.advance_to(t);
        let text = sim.render_text();
        python.set(text.clone());
        go.set(go_style(&text));
        std::thread::sleep(Duration::from_secs(1));
        let snapshot = corrector.snapshot();
        let all = [&python.address, &go.address].iter().all(|instance| {
            ["0", "1"].iter().all(|engine| {
                FAMILIES
                    .iter()
                    .all(|f| served(&snapshot, instance, engine, f))
            })
        });
        let received = snapshot
            .value("vllm_corrector_samples_received_total", &[])
            .unwrap_or(0.0);
        // At least ten scrapes of both targets, and every family served.
        if all && received >= 10.0 * 2.0 * 60.0 {
            break snapshot;
        }
        assert!(
            Instant::now() < deadline,
            "not every family was served for both targets' engines within 120 s\n{}\n--- prometheus log ---\n{}",
            snapshot.text,
            prometheus.log_text()
        );
    };
    let received = snapshot
        .value("vllm_corrector_samples_received_total", &[])
        .unwrap();
    let unused = snapshot
        .value(
            "vllm_corrector_samples_rejected_total",
            &[("reason", "unused_series")],
        )
        .unwrap();
    let applied = snapshot
        .value("vllm_corrector_samples_applied_total", &[])
        .unwrap();

    match sending {
        Sending::Classic => assert!(
            unused / received < 0.05,
            "{unused} of {received} samples sent were unused"
        ),
        Sending::Nhcb => {
            // What goes unused is the unread parts of the whole histograms an NHCB series
            // carries (counted in the exposition), per sample applied as per series held.
            let held = snapshot.value("vllm_corrector_active_series", &[]).unwrap() / 2.0;
            let want = nhcb_unread(&text) as f64 / held;
            eprintln!(
                "relabel_e2e (NHCB): received {received}, applied {applied}, unused_series {unused} \
                 ({:.1} %); unread per held series {want:.3}, measured {:.3}",
                100.0 * unused / received,
                unused / applied
            );
            assert!(
                (unused / applied - want).abs() <= 0.05 * want,
                "{unused} samples unused per {applied} applied, want {want} per sample (± 5 %)"
            );
        }
    }
    // What the narrow keep sends per target is a small part of what a `vllm:.*` keep sends.
    let held = snapshot.value("vllm_corrector_active_series", &[]).unwrap() / 2.0;
    let broad = vllm_samples(&text) as f64;
    eprintln!(
        "relabel_e2e: received {received}, applied {applied}, unused_series {unused}; per target and scrape {held} series kept of {broad} vllm:* samples ({:.1} %)",
        100.0 * held / broad
    );
    assert!(
        held < broad * 0.5,
        "the narrow keep sends {held} series per target, a vllm:.* keep {broad}"
    );
}
