//! The simulator's one error enum.

/// Errors of the simulator.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A configuration value is out of range (the message names it).
    #[error("invalid simulator configuration: {0}")]
    Config(String),
    /// Reading or writing a file, or binding the listen address, failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// Serialising the truth document failed.
    #[error("JSON error: {0}")]
    Json(#[from] serde_json::Error),
}
