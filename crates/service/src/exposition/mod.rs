//! Exposition: rendering derived families and self-metrics for `GET /metrics` (`render`), and
//! the per-group, per-family `vllm_corrector_family_info` (`info`), and the per-group recent
//! duplicate and out-of-order samples (`senders`). The reader of the text
//! format is the `promtext` crate.

pub(crate) mod info;
pub mod page;
pub(crate) mod render;
pub(crate) mod senders;

pub use render::Format;
