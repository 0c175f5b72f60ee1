//! Engine: series state, the per-scrape frame join, and the four correction rules. No HTTP here.
//!
//! Semantics follow `../shared/docs/vllm-metrics-reference.md` §4 and vLLM's
//! `vllm/v1/metrics/loggers.py` (which series are observed where).

mod api;
mod state;

pub use api::*;
pub use state::Engine;
