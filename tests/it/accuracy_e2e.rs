//! Accuracy end to end, through the senders users run (issue 3, item 2):
//!
//! ```text
//! simulators ──scrape 1 s──▶ Prometheus 2.42 ──remote write (keep vllm:.*, 100 samples/request)──▶
//!   vllm-corrector ──scrape 1 s, honor_labels──▶ Prometheus          (the Prometheus chain)
//! simulators ──scrape 1 s──▶ vmagent 1.79 ──RW1 snappy──▶ vllm-corrector ──scrape──▶ Prometheus
//!                                      └──RW1 (every series)──▶ the same Prometheus (raw + truth map)
//! ```
//!
//! Two simulators run in each chain: `0.33` (two models × two engines, speculative decoding with
//! steps without drafts, prefix-cache hits, P/D transfers, 0- and 1-token requests) and `0.22` (one
//! engine, no spec decoding, heavy cache hits and transfers). Each test then goes through four
//! phases separated by faults; in every phase, over windows inside it, every assertion of
//! `accuracy_check` holds for every group:
//! 1. steady state;
//! 2. after the 0.33 simulator restarts at the same address (every vLLM counter resets);
//! 3. after vllm-corrector restarts (all its state lost, the sender retries and catches up);
//! 4. after the 0.22 target is removed from the scrape configuration (staleness): its corrected
//!    series leave the corrector's `/metrics` and Prometheus's instant query.
//!
//! Run: `cargo test --test it accuracy` (about 2 minutes; both chains run concurrently).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use sim::serve::unix_now_ms;
use sim::{Profile, SimConfig, SpecConfig};

use crate::accuracy_check::{
    Exposes, Failures, canonical_requests, check_exercised, check_plain_promql, check_quantiles,
    check_window, shipped_rules, shipped_rules_yaml,
};
use crate::accuracy_frames::{
    CANONICAL, FamilyFrames, GroupKey, IDENTIFIERS, Phase, collect, groups_of,
};
use crate::accuracy_promql::{PromApi, quote};
use crate::accuracy_sim::SimServer;
use crate::accuracy_stack::{CorrectorProc, PrometheusProc, VmagentProc, free_address};
use crate::promtool::require_tool;

/// Frames a group needs in a phase before its windows are checked.
const MIN_FRAMES: usize = 8;
/// Simulated seconds the phase's whole window must span.
const MIN_SPAN_S: f64 = 10.0;
/// Requests with n > 1 the whole window needs, so that p50/p99 mean something.
const MIN_TPOT_REQUESTS: f64 = 20.0;
/// Bound on waiting for a phase's data.
const PHASE_TIMEOUT: Duration = Duration::from_secs(90);

/// One simulator of the chain.
struct SimSpec {
    cfg: SimConfig,
    exposes: Exposes,
}

impl SimSpec {
    /// vLLM 0.33: iteration tokens count local compute; spec decoding k = 3, acceptance 0.6, one
    /// decode step in five without drafts; P/D transfers and prefix hits; 0- and 1-token requests.
    fn v0_33(seed: u64) -> SimSpec {
        SimSpec {
            cfg: SimConfig {
                profile: Profile::V0_33,
                models: vec!["acc-model-a".into(), "acc-model-b".into()],
                engines_per_model: 2,
                arrival_rate: 8.0,
                prompt_len: (32, 512),
                prefix_hit_prob: 0.3,
                kv_transfer_prob: 0.2,
                output_len: (2, 48),
                max_tokens: 48,
                zero_token_fraction: 0.02,
                single_token_fraction: 0.2,
                spec: Some(SpecConfig {
                    num_speculative_tokens: 3,
                    acceptance_prob: 0.6,
                    no_draft_fraction: 0.2,
                }),
                seed,
                ..SimConfig::default()
            },
            exposes: Exposes {
                local_iteration_sum: true,
                spec_decoding: true,
            },
        }
    }

    /// vLLM 0.22: iteration tokens credit every prompt token; no spec decoding; 30 % single-token
    /// requests; half the prompts hit the prefix cache, a third arrive by KV transfer.
    fn v0_22(seed: u64) -> SimSpec {
        SimSpec {
            cfg: SimConfig {
                profile: Profile::V0_22,
                models: vec!["acc-model-c".into()],
                engines_per_model: 1,
                arrival_rate: 5.0,
                prompt_len: (32, 512),
                prefix_hit_prob: 0.5,
                kv_transfer_prob: 0.3,
                output_len: (2, 48),
                max_tokens: 48,
                zero_token_fraction: 0.05,
                single_token_fraction: 0.3,
                spec: None,
                seed,
                ..SimConfig::default()
            },
            exposes: Exposes {
                local_iteration_sum: false,
                spec_decoding: false,
            },
        }
    }

    fn groups(&self, instance: &str) -> BTreeSet<GroupKey> {
        let mut out = BTreeSet::new();
        for model in &self.cfg.models {
            for engine in 0..self.cfg.engines_per_model {
                out.insert(GroupKey {
                    instance: instance.to_string(),
                    model_name: model.clone(),
                    engine: engine.to_string(),
                });
            }
        }
        out
    }
}

/// Who scrapes the simulators and remote-writes to the corrector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sender {
    Prometheus,
    Vmagent,
}

/// A running chain.
struct Chain {
    sender: Sender,
    sims: Vec<(SimServer, SimSpec)>,
    removed: Vec<SimServer>,
    corrector: CorrectorProc,
    prometheus: PrometheusProc,
    vmagent: Option<VmagentProc>,
    api: PromApi,
}

const KEEP_VLLM: &str = r#"- source_labels: [__name__]
  regex: "vllm:.*"
  action: keep
"#;

const KEEP_ALL: &str = r#"- source_labels: [__name__]
  regex: ".+"
  action: keep
"#;

fn targets_yaml(targets: &[String]) -> String {
    let quoted: Vec<String> = targets.iter().map(|t| format!("\"{t}\"")).collect();
    format!("[{}]", quoted.join(", "))
}

/// Prometheus's configuration. As sender it scrapes the simulators and remote-writes their
/// `vllm:*` series in requests of at most 100 samples (`batch_send_deadline` 200 ms), so every
/// scrape is split over requests and shards; it retries within 1 s after an outage. In both chains
/// it scrapes the corrector back with `honor_labels` (the corrected series keep the simulator's
/// `job` and `instance`) and evaluates the shipped plain-PromQL rules (`vllm-corrector rules`,
/// recorded under `vllm_promql_*`) every second.
fn prometheus_config(sender: Sender, sim_targets: &[String], corrector: &str) -> String {
    let mut config = format!(
        r#"global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: ["rules.yml"]
scrape_configs:
  - job_name: corrector
    honor_labels: true
    static_configs:
      - targets: ["{corrector}"]
"#
    );
    if sender == Sender::Prometheus {
        config.push_str(&format!(
            r#"  - job_name: vllm
    static_configs:
      - targets: {}
remote_write:
  - url: "http://{corrector}/api/v1/write"
    write_relabel_configs:
      - source_labels: [__name__]
        regex: "vllm:.*"
        action: keep
    queue_config:
      max_samples_per_send: 100
      batch_send_deadline: 200ms
      min_backoff: 50ms
      max_backoff: 1s
"#,
            targets_yaml(sim_targets)
        ));
    }
    config
}

fn vmagent_scrape_config(sim_targets: &[String]) -> String {
    format!(
        r#"global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: vllm
    static_configs:
      - targets: {}
"#,
        targets_yaml(sim_targets)
    )
}

impl Chain {
    fn start(sender: Sender, prometheus: &std::path::Path, vmagent: Option<PathBuf>) -> Chain {
        let corrector = CorrectorProc::start(&free_address());
        let specs = [SimSpec::v0_33(1), SimSpec::v0_22(2)];
        let sims: Vec<(SimServer, SimSpec)> = specs
            .into_iter()
            .map(|spec| (SimServer::start(spec.cfg.clone()), spec))
            .collect();
        let targets: Vec<String> = sims.iter().map(|(s, _)| s.address.clone()).collect();
        let prom = PrometheusProc::start(
            prometheus,
            &prometheus_config(sender, &targets, &corrector.address),
            &shipped_rules_yaml(),
        );
        let vmagent = vmagent.map(|binary| {
            let writes = [
                (
                    format!("http://{}/api/v1/write", corrector.address),
                    KEEP_VLLM.to_string(),
                ),
                (format!("{}/api/v1/write", prom.base), KEEP_ALL.to_string()),
            ];
            VmagentProc::start(&binary, &vmagent_scrape_config(&targets), &writes)
        });
        let api = PromApi::new(&prom.base);
        Chain {
            sender,
            sims,
            removed: Vec::new(),
            corrector,
            prometheus: prom,
            vmagent,
            api,
        }
    }

    fn logs(&self) -> String {
        format!(
            "--- corrector log ---\n{}\n--- prometheus log ---\n{}\n--- vmagent log ---\n{}",
            self.corrector.log_tail(),
            self.prometheus.log_tail(),
            self.vmagent
                .as_ref()
                .map(VmagentProc::log_tail)
                .unwrap_or_default()
        )
    }

    fn phase(&self, name: &str) -> Phase {
        Phase {
            name: format!("{:?} chain, {name}", self.sender),
            from_ms: unix_now_ms(),
        }
    }

    /// Waits until every family of every active group has enough frames in `phase`, then checks
    /// every window between consecutive frames and the whole phase's window.
    fn verify(&self, phase: &Phase) {
        let started = Instant::now();
        let frames = loop {
            let now_ms = unix_now_ms();
            let mut all = Vec::new();
            let mut missing = Vec::new();
            for (sim, spec) in &self.sims {
                let frames = collect(&self.api, &sim.address, phase, now_ms)
                    .unwrap_or_else(|e| panic!("{}: {e}\n{}", phase.name, self.logs()));
                let expected = spec.groups(&sim.address);
                let seen = groups_of(&frames);
                assert!(
                    seen.is_subset(&expected),
                    "{}: corrected groups {seen:?} beyond the simulator's {expected:?}",
                    phase.name
                );
                for key in &expected {
                    if let Some(why) = self.not_enough(sim, key, frames.get(key)) {
                        missing.push(format!("{key:?}: {why}"));
                    }
                }
                all.push(frames);
            }
            if missing.is_empty() {
                break all;
            }
            assert!(
                started.elapsed() < PHASE_TIMEOUT,
                "{}: not enough corrected frames after {PHASE_TIMEOUT:?}: {missing:?}\n{}",
                phase.name,
                self.logs()
            );
            std::thread::sleep(Duration::from_secs(2));
        };
        let rules = shipped_rules();
        let mut failures = Failures::default();
        let mut windows = 0;
        for ((sim, spec), frames) in self.sims.iter().zip(&frames) {
            for (key, families) in frames {
                for (&family, f) in families {
                    let (first, last) = (&f[0], &f[f.len() - 1]);
                    for pair in f.windows(2) {
                        check_window(
                            family,
                            sim,
                            key,
                            spec.exposes,
                            &pair[0],
                            &pair[1],
                            &mut failures,
                        );
                    }
                    check_window(family, sim, key, spec.exposes, first, last, &mut failures);
                    check_exercised(family, sim, key, spec.exposes, first, last, &mut failures);
                    windows += f.len();
                    if family == CANONICAL {
                        check_quantiles(&self.api, sim, key, first, last, &mut failures);
                    }
                    check_plain_promql(&self.api, &rules, family, key, first, last, &mut failures);
                }
            }
        }
        eprintln!(
            "{}: {windows} windows checked in {:?}, {} failures",
            phase.name,
            started.elapsed(),
            failures.0.len()
        );
        assert!(
            failures.0.is_empty(),
            "{}: {} failures:\n{}\n{}",
            phase.name,
            failures.0.len(),
            failures.0.join("\n"),
            self.logs()
        );
    }

    /// Why the frames of `key` do not yet support every check: each family needs
    /// [`MIN_FRAMES`] frames over [`MIN_SPAN_S`], canonical TPOT [`MIN_TPOT_REQUESTS`] requests.
    fn not_enough(
        &self,
        sim: &SimServer,
        key: &GroupKey,
        families: Option<&FamilyFrames>,
    ) -> Option<String> {
        let Some(families) = families else {
            return Some("no corrected series yet".into());
        };
        for (family, _, _) in IDENTIFIERS {
            let f = families.get(family).map(Vec::as_slice).unwrap_or_default();
            let (Some(first), Some(last)) = (f.first(), f.last()) else {
                return Some(format!("{family}: no frame"));
            };
            if f.len() < MIN_FRAMES || last.snapshot_s - first.snapshot_s < MIN_SPAN_S {
                return Some(format!("{family}: {} frames", f.len()));
            }
            if family == CANONICAL {
                let n = canonical_requests(sim, key, first.snapshot_s, last.snapshot_s);
                if n < MIN_TPOT_REQUESTS {
                    return Some(format!("{family}: {n} requests"));
                }
            }
        }
        None
    }

    /// Restarts simulator `i` at the same address with another seed: a vLLM restart, every
    /// counter back to 0.
    fn restart_sim(&self, i: usize, seed: u64) {
        let (sim, spec) = &self.sims[i];
        sim.restart(SimConfig {
            seed,
            ..spec.cfg.clone()
        });
    }

    /// Removes simulator `i` from the sender's scrape configuration (it keeps running).
    fn remove_target(&mut self, i: usize) -> String {
        let (sim, _) = self.sims.remove(i);
        let targets: Vec<String> = self.sims.iter().map(|(s, _)| s.address.clone()).collect();
        match &self.vmagent {
            None => self.prometheus.reload(&prometheus_config(
                self.sender,
                &targets,
                &self.corrector.address,
            )),
            Some(vmagent) => vmagent.reload(&vmagent_scrape_config(&targets), &sim.address),
        }
        let address = sim.address.clone();
        self.removed.push(sim);
        address
    }

    /// Waits (≤ 40 s) until nothing of `instance` remains: no corrected line on the corrector's
    /// `/metrics`, no corrected series in Prometheus's instant query, and the corrector's active
    /// groups are exactly the remaining simulators' groups.
    fn assert_gone(&self, instance: &str) {
        let needle = format!("instance={}", quote(instance));
        let expected_groups: usize = self
            .sims
            .iter()
            .map(|(s, spec)| spec.groups(&s.address).len())
            .sum();
        let started = Instant::now();
        loop {
            let text = self.corrector.metrics_text().unwrap_or_default();
            let served = text
                .lines()
                .filter(|l| l.starts_with("vllm_corrected_") && l.contains(&needle))
                .count();
            let active = text
                .lines()
                .find_map(|l| l.strip_prefix("vllm_corrector_active_groups "))
                .and_then(|v| v.trim().parse::<f64>().ok());
            let stored = self
                .api
                .vector(
                    &format!("{{__name__=~\"vllm_corrected_.*\",{needle}}}"),
                    unix_now_ms(),
                )
                .map(|v| v.len())
                .unwrap_or(usize::MAX);
            if served == 0 && stored == 0 && active == Some(expected_groups as f64) {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(40),
                "{:?} chain: 40 s after removing {instance}: {served} corrected lines still served, \
                 {stored} series in Prometheus's instant query, active groups {active:?} (want \
                 {expected_groups})\n{}",
                self.sender,
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// The corrector's `vllm_corrector_input_resets_total`.
    fn input_resets(&self) -> f64 {
        let text = self.corrector.metrics_text().unwrap_or_default();
        text.lines()
            .find_map(|l| l.strip_prefix("vllm_corrector_input_resets_total "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    }

    /// The number of `vllm:*` series in one scrape of simulator `i`, counted by Prometheus.
    fn scrape_size(&self, i: usize) -> f64 {
        let expr = format!(
            "count({{__name__=~\"vllm:.*\",instance={}}})",
            quote(&self.sims[i].0.address)
        );
        self.api
            .vector(&expr, unix_now_ms())
            .ok()
            .and_then(|v| v.first().map(|(_, n)| *n))
            .unwrap_or(0.0)
    }

    /// `(samples received, remote writes answered 204)` by the corrector so far.
    fn write_stats(&self) -> (f64, f64) {
        let text = self.corrector.metrics_text().unwrap_or_default();
        let received = text
            .lines()
            .find_map(|l| l.strip_prefix("vllm_corrector_samples_received_total "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0);
        let accepted = text
            .lines()
            .filter(|l| {
                l.starts_with("vllm_corrector_http_requests_total{")
                    && l.contains("handler=\"/api/v1/write\"")
                    && l.contains("code=\"204\"")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        (received, accepted)
    }
}

/// The whole scenario on one chain.
fn run(sender: Sender) {
    let Some(prometheus) = require_tool("prometheus") else {
        return;
    };
    let vmagent = match sender {
        Sender::Prometheus => None,
        Sender::Vmagent => match require_tool("vmagent") {
            Some(path) => Some(path),
            None => return,
        },
    };
    let mut chain = Chain::start(sender, &prometheus, vmagent);

    let steady = chain.phase("phase 1 (steady)");
    chain.verify(&steady);
    // The sender split every scrape: requests averaged at most the configured 100 samples, while
    // one scrape of the 0.33 simulator holds many more vllm:* samples (counted by Prometheus).
    let (received, writes) = chain.write_stats();
    let per_scrape = chain.scrape_size(0);
    assert!(
        writes > 0.0 && received / writes <= 100.0 && per_scrape > 100.0,
        "{sender:?}: {received} samples in {writes} accepted remote writes, {per_scrape} per scrape"
    );

    chain.restart_sim(0, 101);
    let after_reset = chain.phase("phase 2 (after the 0.33 simulator restarted)");
    chain.verify(&after_reset);
    assert!(
        chain.input_resets() >= 1.0,
        "{sender:?}: the corrector counted no input reset after the simulator restarted\n{}",
        chain.logs()
    );

    chain.corrector.restart();
    assert_eq!(chain.corrector.starts(), 2);
    let after_corrector = chain.phase("phase 3 (after vllm-corrector restarted)");
    chain.verify(&after_corrector);

    let removed = chain.remove_target(1);
    let after_removal = chain.phase("phase 4 (after the 0.22 target was removed)");
    chain.assert_gone(&removed);
    chain.verify(&after_removal);
    // Still nothing of the removed target after a whole phase.
    chain.assert_gone(&removed);
}

#[test]
fn accuracy_through_prometheus_remote_write_matches_simulator_truth() {
    run(Sender::Prometheus);
}

#[test]
fn accuracy_through_vmagent_remote_write_matches_simulator_truth() {
    run(Sender::Vmagent);
}
