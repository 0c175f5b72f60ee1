//! Exposition: rendering derived families and self-metrics for `GET /metrics`, and parsing the
//! Prometheus text format (used by tests and by `inspect`). (Being implemented.)

pub mod parse;
