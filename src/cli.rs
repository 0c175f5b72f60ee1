//! The command line: the service (no subcommand) and the `simulate`, `demo`, `inspect`, `rules`
//! `relabel` and `check-config` subcommands.
//!
//! ```text
//! vllm-corrector [--web.listen-address …] [--config.file …] [--log.level …] [--log.format …]
//! vllm-corrector simulate …            the vLLM metrics simulator (docs/SIMULATOR.md)
//! vllm-corrector demo …                service + simulator in one process, live comparison table
//! vllm-corrector inspect BEFORE AFTER  corrected vs raw values between two /metrics dumps
//! vllm-corrector rules [--config.file …] [--format …]   SLO recording rules and burn-rate alerts
//! vllm-corrector rules corrections …   recording rules for the corrections PromQL can express
//! vllm-corrector relabel [--operator]  the narrowest write_relabel_configs for the remote write
//! vllm-corrector check-config [--config.file …] [--web.config.file …]   the files validated, for CI
//! ```
//!
//! With no subcommand the binary is the service: the Docker image and the Kubernetes manifests
//! call it with `--web.listen-address`/`--config.file` only.
//! The service flags and a subcommand cannot be mixed.

use clap::{Parser, Subcommand};

use service::VERSION;
use service::config::Args;
use sim::SimulateArgs;
use tools::{demo, inspect};

/// Everything `vllm-corrector` accepts: an optional subcommand, else the service's flags.
#[derive(Debug, Parser)]
#[command(
    name = "vllm-corrector",
    version = VERSION.as_str(),
    about,
    propagate_version = true,
    args_conflicts_with_subcommands = true
)]
pub(crate) struct Cli {
    /// What to run; none runs the service.
    #[command(subcommand)]
    pub(crate) command: Option<Command>,
    /// The service's flags (used when no subcommand is given).
    #[command(flatten)]
    pub(crate) service: Args,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run the vLLM metrics simulator: seeded engines exposing vLLM's series, with ground truth
    /// (see docs/SIMULATOR.md).
    Simulate(Box<SimulateArgs>),
    /// Run the service and a simulator that remote-writes into it, and print raw, corrected and
    /// true values side by side, live. No cluster needed.
    Demo(demo::DemoArgs),
    /// Compare two `/metrics` dumps taken some seconds apart: corrected values over the interval
    /// next to the raw readings.
    Inspect(inspect::InspectArgs),
    /// Print the SLO recording rules and burn-rate alerts of `--config.file`'s `slos:` (the
    /// shipped default without it) as a rule file, a PrometheusRule, or Sloth or Pyrra specs;
    /// `rules corrections` prints the PromQL corrections.
    ///
    /// `vllm-corrector rules --config.file FILE` reads the same file as the service, validated as
    /// the service does, so a file the rules come from is one the service starts with; without
    /// --config.file it prints the rules of the shipped default SLO (deploy/alerts/slo.rules.yml
    /// is that output). The PromQL recording rules of the corrections, for users who cannot run
    /// the receiver, are `vllm-corrector rules corrections`. See docs/SLO.md.
    Rules(tools::slo_rules::RulesArgs),
    /// Print the narrowest `write_relabel_configs` for the remote write that feeds the corrector:
    /// exactly the series its rules read (derived from the engine's vocabulary).
    Relabel(tools::relabel::RelabelOptions),
    /// Validate `--config.file` and `--web.config.file` as the service does at start, without
    /// starting it: exit status 0 and one line per valid file, or 2 and the service's own error
    /// message (naming the file and field). For CI; see docs/CONFIGURATION.md.
    CheckConfig(tools::check_config::CheckConfigArgs),
}
