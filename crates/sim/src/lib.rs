//! A vLLM metrics simulator: seeded request lifecycles on continuous-batching engines, exposed
//! exactly as vLLM 0.10 / 0.14 / 0.22 / 0.33 exposes them, with per-request ground truth.
//!
//! ```text
//! model.rs       configuration and seeded draws (arrivals, prompt sources, n)
//! engine.rs      one engine core: step loop, spec decoding, output batches
//! metrics.rs     the profile's families and vLLM's observation points per batch
//! exposition.rs  Snapshot + prometheus_client text rendering
//! truth.rs       per-request records and window truth (`vllm bench serve` quantities)
//! serve.rs       `simulate` subcommand: real-time /metrics, /truth, remote write
//! ```
//!
//! The clock is explicit: [`Simulator::advance_to`] runs every event before the given instant
//! (instant mode, for tests and fast ground truth); [`run`] drives it from the wall clock.
//! Simulated time is integer nanoseconds since the epoch `SimConfig::epoch_unix_ms`.
//! See `docs/SIMULATOR.md` for the model, the profiles and the truth schema.

pub mod args;
pub mod engine;
mod error;
pub mod exposition;
pub mod families;
pub mod metrics;
pub mod model;
pub mod profile;
pub mod remote_write;
pub mod serve;
mod simulator;
pub mod truth;

#[cfg(test)]
mod engine_tests;
#[cfg(test)]
mod per_token_itl_tests;
#[cfg(test)]
mod profile_tests;
#[cfg(test)]
mod trace_tests;

pub use args::positive_duration;
pub use error::SimError;
pub use exposition::{Snapshot, SnapshotFamily, SnapshotSample};
pub use families::BUCKET_FAMILIES;
pub use model::{
    FinishReason, ItlObservation, PromptTokens, ScriptedRequest, SimConfig, SpecConfig,
};
pub use profile::Profile;
pub use serve::{BucketOverrides, SimulateArgs, parse_bucket_overrides, run};
pub use simulator::Simulator;
pub use truth::{BucketCount, RequestRecord, TruthDocument, WindowTruth};
