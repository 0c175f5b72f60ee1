//! Configuration (being implemented).
