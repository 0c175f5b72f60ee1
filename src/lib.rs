//! vllm-corrector: a Prometheus remote-write receiver that derives corrected vLLM latency families.
//!
//! The crate is laid out along the data flow:
//!
//! ```text
//! POST /api/v1/write
//!   http        negotiate (v1 / v2 / 415), limits                -> bytes
//!   protocol    snappy (length-checked) -> borrowed RW1/RW2 decode -> series with samples
//!   ingest      label limits, normalise, custom buckets -> classic -> engine, every sample counted
//!   engine      classify series -> group -> frame at ts -> rules   -> derived cumulative values
//!   exposition  derived values + self-metrics                      -> GET /metrics
//! ```
//!
//! * [`protocol`] knows bytes and the remote-write specs, nothing of HTTP or rules.
//! * [`ingest`] feeds one decoded request to the engine and accounts for every sample.
//! * [`engine`] knows series, groups, frames and rules, nothing of HTTP.
//! * [`exposition`] renders the engine's derived values and the self-metrics.
//! * [`http`] wires them together and maps each layer's error enum to a status code, once.
//! * [`cli`] is the command line: the service, `simulate`, `demo` and `inspect`.
//! * [`config`] turns raw CLI arguments and the optional YAML file into a validated config.
//! * [`web`] is `--web.config.file`: TLS, client certificates, basic auth and bearer tokens.
//! * [`reload`] re-reads both files on SIGHUP and `POST /-/reload`.
//! * [`live`] holds the settings a reload swaps; [`clock`] is the service's one wall clock.
#![forbid(unsafe_code)]

pub mod cli;
pub mod clock;
pub mod config;
pub mod engine;
pub mod exposition;
pub mod fuzz;
pub mod http;
pub mod ingest;
pub mod live;
pub mod promql_rules;
pub mod protocol;
pub mod relabel;
pub mod reload;
pub mod sim;
pub mod storage;
pub mod telemetry;
pub mod web;
