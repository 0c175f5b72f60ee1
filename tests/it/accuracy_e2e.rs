//! Accuracy end to end, through the senders users run (issue 3, item 2), in every mode of
//! [`MODES`] (sender × protocol × histogram form, `crate::accuracy_stack`):
//!
//! ```text
//! simulators ──scrape 1 s──▶ Prometheus ──remote write (keep rule, 100 samples/request)──▶
//!   vllm-corrector ──scrape 1 s, honor_labels──▶ Prometheus          (the Prometheus chains)
//! simulators ──scrape 1 s──▶ vmagent ──RW1 snappy──▶ vllm-corrector ──scrape──▶ Prometheus
//!                                  └──RW1 (every series)──▶ the same Prometheus (raw + truth map)
//! ```
//!
//! Prometheus 2 (2.42) and vmagent 1.79 send RW 1.0 with every `vllm:*` series; Prometheus 3
//! (3.5) sends RW 1.0, RW 2.0, and RW 2.0 with native histograms with custom buckets (NHCB), and
//! vmagent 1.145 RW 1.0, all four through the keep rule `vllm-corrector relabel` generates.
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
//! Under NHCB Prometheus stores no classic series, so the shipped plain-PromQL rules, which read
//! them, are not compared there (`Mode::stores_classic`); every check against the simulator's
//! truth runs in every mode.
//!
//! Run: `cargo test --test it accuracy_e2e` (about a minute per chain; scripts/test.sh runs them
//! after the rest of the suite, three at a time).

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
use crate::accuracy_stack::{Histograms, Keep, Mode, Protocol, Sender};
use crate::harness::{Corrector, corrector, free_address};
use test_support::prometheus::Prometheus;
use test_support::tools::Tool;
use test_support::vmagent::Vmagent;

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

/// A running chain.
struct Chain {
    mode: Mode,
    sims: Vec<(SimServer, SimSpec)>,
    removed: Vec<SimServer>,
    corrector: Corrector,
    prometheus: Prometheus,
    vmagent: Option<Vmagent>,
    api: PromApi,
}

impl Chain {
    fn start(mode: Mode, prometheus: &std::path::Path, vmagent: Option<PathBuf>) -> Chain {
        // A fixed address, so that the restart of phase 3 comes back where the sender writes.
        let corrector: Corrector = corrector()
            .address(&free_address())
            .log_level("info")
            .start()
            .into();
        let specs = [SimSpec::v0_33(1), SimSpec::v0_22(2)];
        let sims: Vec<(SimServer, SimSpec)> = specs
            .into_iter()
            .map(|spec| (SimServer::start(spec.cfg.clone()), spec))
            .collect();
        let targets: Vec<String> = sims.iter().map(|(s, _)| s.address.clone()).collect();
        let prom = mode.start_prometheus(
            prometheus,
            &targets,
            &corrector.address,
            &shipped_rules_yaml(),
        );
        let vmagent = vmagent.map(|binary| {
            Mode::start_vmagent(
                &binary,
                &mode.corrector_keep(),
                &targets,
                &corrector.address,
                &prom.base,
            )
        });
        let api = PromApi::new(&prom.base);
        Chain {
            mode,
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
            self.corrector.log_tail(60),
            self.prometheus.log_tail(60),
            self.vmagent
                .as_ref()
                .map(|v| v.log_tail(60))
                .unwrap_or_default()
        )
    }

    /// The corrector's `/metrics` (empty while it does not answer).
    fn corrector_metrics(&self) -> String {
        self.corrector.get("/metrics").unwrap_or_default()
    }

    fn phase(&self, name: &str) -> Phase {
        Phase {
            name: format!("{}, {name}", self.mode.name()),
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
                    if self.mode.stores_classic() {
                        check_plain_promql(
                            &self.api,
                            &rules,
                            family,
                            key,
                            first,
                            last,
                            &mut failures,
                        );
                    }
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
            None => self.prometheus.reload(
                &self
                    .mode
                    .prometheus_config(&targets, &self.corrector.address),
            ),
            Some(vmagent) => vmagent.reload(&Mode::vmagent_scrape_config(&targets), &sim.address),
        }
        let address = sim.address.clone();
        self.removed.push(sim);
        address
    }

    /// Waits (≤ [`Mode::removal_bound`]) until nothing of `instance` remains: no corrected line
    /// on the corrector's `/metrics`, no corrected series in Prometheus's instant query, and the
    /// corrector's active groups are exactly the remaining simulators' groups.
    fn assert_gone(&self, instance: &str) {
        let bound = self.mode.removal_bound();
        let needle = format!("instance={}", quote(instance));
        let expected_groups: usize = self
            .sims
            .iter()
            .map(|(s, spec)| spec.groups(&s.address).len())
            .sum();
        let started = Instant::now();
        loop {
            let text = self.corrector_metrics();
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
                let removed: Vec<&str> = text
                    .lines()
                    .filter(|l| l.starts_with("vllm_corrector_groups_removed_total{"))
                    .collect();
                eprintln!(
                    "{}: {instance} gone {:?} after its removal ({removed:?})",
                    self.mode.name(),
                    started.elapsed()
                );
                return;
            }
            assert!(
                started.elapsed() < bound,
                "{}: {bound:?} after removing {instance}: {served} corrected lines still served, \
                 {stored} series in Prometheus's instant query, active groups {active:?} (want \
                 {expected_groups})\n{}",
                self.mode.name(),
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// The corrector's `vllm_corrector_input_resets_total`.
    fn input_resets(&self) -> f64 {
        let text = self.corrector_metrics();
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
        let text = self.corrector_metrics();
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

    /// `(samples and histograms sent, batches sent)` to the corrector, from the sending
    /// Prometheus's own `/metrics` (`prometheus_remote_storage_*` of the corrector's URL).
    fn sender_stats(&self) -> (f64, f64) {
        let text = test_support::process::http_client(Duration::from_secs(10))
            .get(format!("{}/metrics", self.prometheus.base))
            .send()
            .and_then(|r| r.text())
            .unwrap_or_default();
        let url = format!("url=\"http://{}/api/v1/write\"", self.corrector.address);
        let sum = |name: &str| -> f64 {
            text.lines()
                .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(&url))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum()
        };
        (
            sum("prometheus_remote_storage_samples_total")
                + sum("prometheus_remote_storage_histograms_total"),
            sum("prometheus_remote_storage_sent_batch_duration_seconds_count"),
        )
    }

    /// The sender split every scrape: requests averaged at most the configured 100 samples, while
    /// one scrape of the 0.33 simulator holds many more `vllm:*` series (counted by Prometheus).
    /// Counted by the corrector (samples received per accepted write); under NHCB, where the
    /// corrector counts each histogram as the classic samples it stands for, by the sender
    /// (samples and histograms sent per batch).
    fn assert_split(&self) {
        let per_scrape = self.scrape_size(0);
        let (sent, requests, by) = match self.mode.histograms {
            Histograms::Classic => {
                let (received, writes) = self.write_stats();
                (
                    received,
                    writes,
                    "received by the corrector in accepted remote writes",
                )
            }
            Histograms::Nhcb => {
                let (sent, batches) = self.sender_stats();
                (sent, batches, "sent by Prometheus in batches")
            }
        };
        assert!(
            requests > 0.0 && sent / requests <= 100.0 && per_scrape > 100.0,
            "{}: {sent} samples {by}: {requests}, {per_scrape} series per scrape",
            self.mode.name()
        );
    }
}

/// The chains: every sender, protocol and histogram form the suite runs (docs/TESTING.md, "What
/// each sender gets"). The first two send every `vllm:*` series; the others the generated keep
/// rule of `vllm-corrector relabel`, as every shipped configuration does.
const MODES: [Mode; 6] = [
    Mode {
        sender: Sender::Prometheus,
        prometheus: Tool::PROMETHEUS_2,
        protocol: Protocol::Rw1,
        histograms: Histograms::Classic,
        keep: Keep::AllVllm,
    },
    Mode {
        sender: Sender::Vmagent(Tool::VMAGENT_SYSTEM),
        prometheus: Tool::PROMETHEUS_2,
        protocol: Protocol::Rw1,
        histograms: Histograms::Classic,
        keep: Keep::AllVllm,
    },
    Mode {
        sender: Sender::Prometheus,
        prometheus: Tool::PROMETHEUS_3,
        protocol: Protocol::Rw1,
        histograms: Histograms::Classic,
        keep: Keep::Generated,
    },
    Mode {
        sender: Sender::Prometheus,
        prometheus: Tool::PROMETHEUS_3,
        protocol: Protocol::Rw2,
        histograms: Histograms::Classic,
        keep: Keep::Generated,
    },
    Mode {
        sender: Sender::Prometheus,
        prometheus: Tool::PROMETHEUS_3,
        protocol: Protocol::Rw2,
        histograms: Histograms::Nhcb,
        keep: Keep::Generated,
    },
    Mode {
        sender: Sender::Vmagent(Tool::VMAGENT_SID),
        prometheus: Tool::PROMETHEUS_3,
        protocol: Protocol::Rw1,
        histograms: Histograms::Classic,
        keep: Keep::Generated,
    },
];

/// The whole scenario on one chain.
fn run(mode: Mode) {
    let Some((prometheus, vmagent)) = mode.binaries() else {
        return;
    };
    let mut chain = Chain::start(mode, &prometheus, vmagent);
    let name = mode.name();

    let steady = chain.phase("phase 1 (steady)");
    chain.verify(&steady);
    chain.assert_split();

    chain.restart_sim(0, 101);
    let after_reset = chain.phase("phase 2 (after the 0.33 simulator restarted)");
    chain.verify(&after_reset);
    assert!(
        chain.input_resets() >= 1.0,
        "{name}: the corrector counted no input reset after the simulator restarted\n{}",
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
    run(MODES[0]);
}

#[test]
fn accuracy_through_vmagent_remote_write_matches_simulator_truth() {
    run(MODES[1]);
}

#[test]
fn accuracy_through_prometheus_3_remote_write_1_0_matches_simulator_truth() {
    run(MODES[2]);
}

#[test]
fn accuracy_through_prometheus_3_remote_write_2_0_matches_simulator_truth() {
    run(MODES[3]);
}

#[test]
fn accuracy_through_prometheus_3_remote_write_2_0_nhcb_matches_simulator_truth() {
    run(MODES[4]);
}

#[test]
fn accuracy_through_vmagent_1_145_remote_write_matches_simulator_truth() {
    run(MODES[5]);
}
