//! http layer (being implemented).
