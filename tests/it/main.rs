//! Integration tests: the `vllm-corrector` binary as a black box.
//!
//! Remote-write bodies are built by the test's own prost structs ([`rw`]) from the vLLM 0.33
//! fixtures ([`fixture`]); `/metrics` is read with the crate's exposition parser ([`metrics`]) and
//! compared with the hand computation of `tests/fixtures/vllm-0.33/EXPECTED.md` ([`expected`]).
//! Run: `cargo test --test it`.

mod expected;
mod fixture;
mod grafana;
mod harness;
mod metrics;
use test_support::pki;
mod promql_rules;
mod rw;
mod secure;
mod sharding;
mod simdata;

mod accuracy_check;
mod accuracy_e2e;
mod accuracy_frames;
mod accuracy_promql;
mod accuracy_sim;
mod accuracy_stack;

mod arrival;
mod auth_e2e;
mod auth_flood;
mod auth_tls;
mod cli;
mod family_info;
mod fuzz_seeds;
mod legacy_itl;
mod platform_prefix;
mod prometheus_e2e;
mod promtool;
mod readme_promql;
mod real_vllm;
mod relabel_e2e;
mod reload;
mod reset;
mod rw2_equivalence;
mod sidecar_join;
mod slow_clients;
mod slow_senders;
mod stale_idle;
mod status_browser;
mod storage_restart;
mod withheld;
