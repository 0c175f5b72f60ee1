//! The vllm-corrector service: a Prometheus remote-write receiver that derives corrected vLLM
//! latency families and serves them on `/metrics`.
//!
//! It sits on the two layers below it, which know nothing of HTTP:
//!
//! ```text
//! POST /api/v1/write
//!   http        negotiate (v1 / v2 / 415), limits, read the body     -> bytes
//!   ingest      snappy, decode (crate `protocol`), one engine lock: look series up by key,
//!               decode and check the labels of the others, apply; every sample counted
//!   engine      series index -> group -> frame at ts -> rules        -> derived values (crate `engine`)
//!   exposition  derived values + self-metrics                        -> GET /metrics
//! ```
//!
//! * [`ingest`] receives one remote-write body into the engine and accounts for every sample.
//! * [`exposition`] renders the engine's derived values and the self-metrics.
//! * [`http`] wires them together and maps each layer's error enum to a status code, once.
//! * [`config`] turns raw CLI arguments and the optional YAML file into a validated config.
//! * [`web`] is `--web.config.file`: TLS, client certificates, basic auth and bearer tokens.
//! * [`reload`] re-reads both files on SIGHUP and `POST /-/reload`.
//! * [`telemetry`] holds the self-metrics and the log events; [`storage`] the `--storage.path` file.
//! * [`core`] is the engine behind its lock with the self-metrics and event log every part shares.
//! * [`live`] holds the settings a reload swaps; [`clock`] is the service's one wall clock.
//! * [`run`] starts it all: the `vllm-corrector` binary with no subcommand, and `demo` in-process.
//!
//! The layout and the dependency direction are described in `docs/ARCHITECTURE.md`.
#![forbid(unsafe_code)]

pub mod clock;
pub mod config;
pub mod core;
pub mod exposition;
#[cfg(feature = "fuzzing")]
pub mod fuzz;
pub mod http;
pub mod ingest;
pub mod live;
pub mod reload;
pub mod run;
pub mod storage;
pub mod telemetry;
#[cfg(test)]
mod test_points;
pub mod web;

/// The git commit the binary was built from (`build.rs`: `git rev-parse --short HEAD`, or
/// `unknown` outside a git checkout).
pub const COMMIT: &str = env!("VLLM_CORRECTOR_GIT_COMMIT");

/// The version as `--version`, the landing page, `/status` and the start-up log print it:
/// [`protocol::VERSION`] and [`COMMIT`], e.g. `0.1.0 (commit 6180c06)`.
pub static VERSION: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| format!("{} (commit {COMMIT})", protocol::VERSION));
