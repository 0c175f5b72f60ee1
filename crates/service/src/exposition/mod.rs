//! Exposition: rendering derived families and self-metrics for `GET /metrics` ([`render`]). The
//! reader of the text format is the `promtext` crate.

pub(crate) mod render;

pub use render::Format;
