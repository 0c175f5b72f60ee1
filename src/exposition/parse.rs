//! Parser of the Prometheus text exposition format (being implemented).
