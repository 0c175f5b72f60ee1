//! Self-metrics and logging (being implemented).
