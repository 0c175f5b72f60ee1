//! [`ConfigError`] and the checks every section shares: each error names the flag, file or field
//! at fault.

use std::path::PathBuf;
use std::time::Duration;

/// Why the configuration was refused. Each message names the flag, file or field at fault.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The configuration file could not be read.
    #[error("--config.file {path}: cannot read: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The configuration file is not valid YAML for [`FileConfig`] (unknown field, wrong type).
    #[error("--config.file {path}: {message}")]
    Yaml {
        /// The file.
        path: PathBuf,
        /// The parser's message, with the location.
        message: String,
    },
    /// A value is out of range or malformed.
    #[error("{field}: {message}")]
    Invalid {
        /// The flag (`--web.listen-address`) or YAML field (`engine.idle_timeout`).
        field: &'static str,
        /// What is wrong and what is accepted.
        message: String,
    },
}

pub(super) fn invalid(field: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field,
        message: message.into(),
    }
}

/// `text` as a humantime duration and in whole milliseconds.
pub(super) fn duration_ms(field: &'static str, text: &str) -> Result<(Duration, i64), ConfigError> {
    let d: Duration = humantime::parse_duration(text).map_err(|e| {
        invalid(
            field,
            format!("{text:?} is not a duration like 10m or 90s: {e}"),
        )
    })?;
    let ms = i64::try_from(d.as_millis())
        .map_err(|_| invalid(field, format!("{text:?} is too long")))?;
    Ok((d, ms))
}

/// `v`, refused when 0.
pub(super) fn positive(field: &'static str, v: usize) -> Result<usize, ConfigError> {
    if v == 0 {
        Err(invalid(field, "must be at least 1"))
    } else {
        Ok(v)
    }
}
