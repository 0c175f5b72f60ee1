//! Exposition: rendering derived families and self-metrics for `GET /metrics` ([`render`]), and
//! parsing the Prometheus text format (used by tests and by `inspect`).

pub mod parse;
pub mod render;

pub use render::Format;
