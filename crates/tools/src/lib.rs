//! The client tools of vllm-corrector, apart from the service they talk to or stand in for:
//!
//! * [`inspect`]: corrected values against the raw readings between two `/metrics` dumps;
//! * [`demo`]: the service and the simulator in one process, with a live comparison table;
//! * [`slo_rules`]: `vllm-corrector rules`, the SLO recording rules and burn-rate alerts (also as a
//!   PrometheusRule, Sloth and Pyrra specs);
//! * [`promql_rules`]: `vllm-corrector rules corrections`, recording rules for what PromQL can
//!   express;
//! * [`relabel`]: `vllm-corrector relabel`, the narrowest `write_relabel_configs`;
//! * [`check_config`]: `vllm-corrector check-config`, the service's files validated for CI;
//! * [`readings`], [`compare`], [`table`], [`order`]: the readings and tables both print;
//! * `slo_readings`: per SLO, the SLO counters' and vLLM's own readings between two dumps, which
//!   `demo` and `inspect` print;
//! * `presentation`: how each corrected family is shown (columns, keys, rows, truth, PromQL).
#![forbid(unsafe_code)]

pub mod check_config;
pub mod compare;
pub mod demo;
pub mod inspect;
pub mod order;
mod presentation;
pub mod promql_rules;
pub mod readings;
pub mod relabel;
mod slo_readings;
pub mod slo_rules;
pub mod table;
#[cfg(test)]
mod test_records;
