//! Accuracy suite: the modes a chain runs in (sender × protocol × histogram form × keep rule) and
//! the configuration each gives the real processes, which `crates/test-support` starts
//! ([`test_support::prometheus`], [`test_support::vmagent`]).

use std::path::PathBuf;
use std::time::Duration;

use test_support::prometheus::Prometheus;
use test_support::tools::{Tool, require};
use test_support::vmagent::Vmagent;
use tools::relabel::{RelabelOptions, render};

/// Who scrapes the simulators and remote-writes to the corrector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sender {
    /// The chain's Prometheus itself.
    Prometheus,
    /// This vmagent, writing the raw series to the chain's Prometheus too.
    Vmagent(Tool),
}

/// The remote-write protocol the sender speaks to the corrector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    /// RW 1.0 (`prometheus.WriteRequest`), every sender's default.
    Rw1,
    /// RW 2.0 (`protobuf_message: io.prometheus.write.v2.Request`, Prometheus 3).
    Rw2,
}

/// How the vLLM histograms travel and are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Histograms {
    /// Classic `_bucket{le}`, `_sum`, `_count` series.
    Classic,
    /// Native histograms with custom buckets: Prometheus 3 converts each classic histogram at
    /// scrape time (`convert_classic_histograms_to_nhcb: true`, `--enable-feature=native-histograms`)
    /// into one series under the family's base name, stores only that, and sends it
    /// (`send_native_histograms: true`).
    Nhcb,
}

/// Which series the remote write to the corrector keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keep {
    /// Every `vllm:*` series (most of them unused by the rules).
    AllVllm,
    /// The keep rule `vllm-corrector relabel` generates, as every shipped configuration carries it.
    Generated,
}

/// One chain's mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mode {
    /// Who sends.
    pub sender: Sender,
    /// The Prometheus that scrapes the corrector back, stores the raw series (scraped itself, or
    /// written by vmagent) and evaluates the shipped PromQL rules; the sender when
    /// [`Sender::Prometheus`].
    pub prometheus: Tool,
    /// The protocol to the corrector.
    pub protocol: Protocol,
    /// The histogram form.
    pub histograms: Histograms,
    /// The keep rule of the remote write to the corrector.
    pub keep: Keep,
}

const KEEP_ALL_VLLM: &str = r#"- source_labels: [__name__]
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

fn indent(text: &str, spaces: usize) -> String {
    text.lines()
        .map(|l| format!("{:spaces$}{l}\n", ""))
        .collect()
}

impl Mode {
    /// The mode's name in failure messages and logs, e.g. `Prometheus 3 RW 2.0 NHCB chain`.
    pub(crate) fn name(&self) -> String {
        let sender = match self.sender {
            Sender::Prometheus => match self.prometheus {
                Tool::PROMETHEUS_2 => "Prometheus 2".to_string(),
                _ => "Prometheus 3".to_string(),
            },
            Sender::Vmagent(Tool::VMAGENT_SYSTEM) => "vmagent (system)".to_string(),
            Sender::Vmagent(_) => "vmagent (sid)".to_string(),
        };
        let protocol = match self.protocol {
            Protocol::Rw1 => "RW 1.0",
            Protocol::Rw2 => "RW 2.0",
        };
        let form = match self.histograms {
            Histograms::Classic => "",
            Histograms::Nhcb => " NHCB",
        };
        format!("{sender} {protocol}{form} chain")
    }

    /// The binaries the mode needs: Prometheus, and vmagent when it sends. `None` when one is
    /// missing and the running test opts out ([`require`]).
    pub(crate) fn binaries(&self) -> Option<(PathBuf, Option<PathBuf>)> {
        let prometheus = require(self.prometheus)?;
        let vmagent = match self.sender {
            Sender::Prometheus => None,
            Sender::Vmagent(tool) => Some(require(tool)?),
        };
        Some((prometheus, vmagent))
    }

    /// Whether Prometheus stores the classic `_bucket`/`_sum`/`_count` series, which the shipped
    /// plain-PromQL rules (`vllm-corrector rules`) read. Under NHCB it stores one native
    /// histogram per family instead, and those rules find nothing.
    pub(crate) fn stores_classic(&self) -> bool {
        self.histograms == Histograms::Classic
    }

    /// How long after a target leaves the scrape configuration its corrected series may remain.
    /// Classic: 40 s; the staleness markers of every series remove its groups at once, then the
    /// corrector's next scrape makes Prometheus mark the corrected series stale. NHCB: 45 s more.
    /// Prometheus marks a native histogram stale with one sample that lists no bucket bound, so
    /// the corrector marks only its `_sum`, `_count` and `+Inf` stale; the finite buckets stop
    /// arriving, and the group leaves by `engine.missed_scrapes` (never sooner than
    /// `engine.missed_scrapes_min_wait`, 30 s, after its last sample, at the next 15 s sweep).
    pub(crate) fn removal_bound(&self) -> Duration {
        match self.histograms {
            Histograms::Classic => Duration::from_secs(40),
            Histograms::Nhcb => Duration::from_secs(40 + 30 + 15),
        }
    }

    /// The relabelling of the remote write to the corrector.
    pub(crate) fn corrector_keep(&self) -> String {
        match self.keep {
            Keep::AllVllm => KEEP_ALL_VLLM.to_string(),
            Keep::Generated => render(&RelabelOptions::default()),
        }
    }

    /// Prometheus's configuration. As sender it scrapes the simulators and remote-writes their
    /// series through the mode's keep rule in requests of at most 100 samples
    /// (`batch_send_deadline` 200 ms), so every scrape is split over requests and shards; it
    /// retries within 1 s after an outage. In every mode it scrapes the corrector back with
    /// `honor_labels` (the corrected series keep the simulator's `job` and `instance`) and
    /// evaluates the shipped plain-PromQL rules (`vllm-corrector rules`, recorded under
    /// `vllm_promql_*`) every second.
    pub(crate) fn prometheus_config(&self, sim_targets: &[String], corrector: &str) -> String {
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
        if self.sender != Sender::Prometheus {
            return config;
        }
        config.push_str("  - job_name: vllm\n");
        if self.histograms == Histograms::Nhcb {
            config.push_str("    convert_classic_histograms_to_nhcb: true\n");
        }
        config.push_str(&format!(
            "    static_configs:\n      - targets: {}\nremote_write:\n  - url: \"http://{corrector}/api/v1/write\"\n",
            targets_yaml(sim_targets)
        ));
        if self.protocol == Protocol::Rw2 {
            config.push_str("    protobuf_message: io.prometheus.write.v2.Request\n");
        }
        if self.histograms == Histograms::Nhcb {
            config.push_str("    send_native_histograms: true\n");
        }
        config.push_str("    write_relabel_configs:\n");
        config.push_str(&indent(&self.corrector_keep(), 6));
        config.push_str(
            "    queue_config:\n      max_samples_per_send: 100\n      batch_send_deadline: 200ms\n      \
             min_backoff: 50ms\n      max_backoff: 1s\n",
        );
        config
    }

    /// vmagent's scrape configuration (the simulators every second).
    pub(crate) fn vmagent_scrape_config(sim_targets: &[String]) -> String {
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: vllm\n    \
             static_configs:\n      - targets: {}\n",
            targets_yaml(sim_targets)
        )
    }

    /// Starts the chain's Prometheus with `rules` as `rules.yml`.
    pub(crate) fn start_prometheus(
        &self,
        binary: &std::path::Path,
        sim_targets: &[String],
        corrector: &str,
        rules: &str,
    ) -> Prometheus {
        let mut builder =
            Prometheus::builder(binary, &self.prometheus_config(sim_targets, corrector))
                .file("rules.yml", rules);
        if self.histograms == Histograms::Nhcb {
            builder = builder.feature("native-histograms");
        }
        builder.start()
    }

    /// Starts vmagent scraping `sim_targets` and writing the mode's kept series to the corrector
    /// and every series to the chain's Prometheus (`prometheus_base`, its remote-write receiver).
    pub(crate) fn start_vmagent(
        binary: &std::path::Path,
        keep: &str,
        sim_targets: &[String],
        corrector: &str,
        prometheus_base: &str,
    ) -> Vmagent {
        Vmagent::builder(binary, &Mode::vmagent_scrape_config(sim_targets))
            .write(&format!("http://{corrector}/api/v1/write"), Some(keep))
            .write(&format!("{prometheus_base}/api/v1/write"), Some(KEEP_ALL))
            .start()
    }
}
