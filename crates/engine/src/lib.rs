//! Engine: series state, the per-scrape frame join, and the correction rules (`rules::REGISTRY`).
//! No HTTP here.
//!
//! Semantics follow `docs/METRICS.md`, "The corrected families", and vLLM's
//! `vllm/v1/metrics/loggers.py` (which series are observed where).
//!
//! * [`classify`](self) decides once per series which rule input it is, from `__name__`, `le` and `source`.
//! * A group is the label set minus `__name__`, `le`, `source`, `position` and `finished_reason`.
//! * A frame is a group's samples at one timestamp; a family is computed only from one frame's values,
//!   once every input its plan reads has a sample there.

mod api;
mod classify;
mod completeness;
mod forms;
mod group;
mod hold;
mod observe;
mod reasons;
mod rules;
pub mod slo;
mod state;
mod values;
mod version;

pub use api::*;
pub use classify::{DEFAULT_METRIC_PREFIX, READ_NAMES, RULE_DIMENSIONS, ReadName};
pub use forms::{UnreadForm, UnreadHistogram};
pub use observe::{
    AllGroups, EngineEvent, FamilyStatus, GroupFilter, GroupLabels, GroupOutputs, GroupRef,
    GroupSnapshot, GroupsPage, GroupsSummary,
};
pub use reasons::{RejectReason, RemovalReason, WithheldReason};
pub use state::batch::SERIES_BYTES;
pub use state::persist::{
    MAX_STATE_RECORD_BYTES, STATE_FORMAT_VERSION, StateCursor, StateError, StateHeader,
    StateRecord, read_format_1,
};
pub use state::{Engine, IngestPolicy, Outcome, Refusal, RequestError, Written};

#[cfg(test)]
mod acceptance_tests;
#[cfg(test)]
mod accuracy_table_tests;
#[cfg(test)]
mod bucket_limit_tests;
#[cfg(test)]
mod budget_tests;
#[cfg(test)]
mod cache_tests;
#[cfg(test)]
mod custom_buckets_tests;
#[cfg(test)]
mod distribution_tests;
#[cfg(test)]
mod evict_tests;
#[cfg(test)]
mod family_status_tests;
#[cfg(test)]
mod frame_tests;
#[cfg(test)]
mod hold_tests;
#[cfg(test)]
mod leave_return_tests;
#[cfg(test)]
mod observe_tests;
#[cfg(test)]
mod persist_tests;
#[cfg(test)]
mod prefix_tests;
#[cfg(test)]
mod senders_tests;
#[cfg(test)]
mod settle_tests;
#[cfg(test)]
mod slo_tests;
#[cfg(test)]
mod stale_value_tests;
#[cfg(test)]
mod test_support;
