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
    /// The configuration file is not valid YAML for `FileConfig` (unknown field, wrong type).
    #[error("--config.file {path}: {message}")]
    Yaml {
        /// The file.
        path: PathBuf,
        /// The parser's message, with the location.
        message: String,
    },
    /// An SLO of `slos:` is invalid; the error names the field (`slos[1].objective`).
    #[error(transparent)]
    Slo(#[from] engine::slo::SloError),
    /// A field of the configuration file is invalid (an [`ConfigError::Invalid`] of a YAML field
    /// or an [`ConfigError::Slo`]): the message names the file, then the field.
    #[error("--config.file {path}: {source}")]
    InFile {
        /// The file.
        path: PathBuf,
        /// The field's error.
        source: Box<ConfigError>,
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

/// The message of a YAML parse error in our words: `line L, column C: ` (1-based), then the
/// field at that line when `field_at` names one (`engine.idle_timeout: `), then the parser's
/// message without its source snippet (which calls the file `<input>`) and without its own
/// location suffix. A repeated key reads "duplicate key `x`" (serde-saphyr's own message points
/// at its `DuplicateKeyPolicy`, an option of ours, not the user's).
pub(crate) fn yaml_message(
    error: &serde_saphyr::Error,
    field_at: impl Fn(usize) -> Option<String>,
) -> String {
    let error = error.without_snippet();
    let location = error.location().filter(|l| l.line() > 0);
    let base = match error {
        serde_saphyr::Error::DuplicateMappingKey { key: Some(key), .. } => {
            format!("duplicate key `{key}`")
        }
        serde_saphyr::Error::DuplicateMappingKey { key: None, .. } => "duplicate key".to_owned(),
        // A number read without a target type (a threshold) refuses `.inf` and `.nan` itself.
        serde_saphyr::Error::NonFiniteFloat { value, .. } => {
            format!("{value} is not a finite number")
        }
        other => {
            let text = other.to_string();
            let suffix = location.map(|l| format!(" at line {}, column {}", l.line(), l.column()));
            match suffix.as_deref().and_then(|s| text.strip_suffix(s)) {
                Some(stripped) => stripped.to_owned(),
                None => text,
            }
        }
    };
    let Some(location) = location else {
        return base;
    };
    // A missing field is reported where its mapping ends, at the last key written: name the list
    // entry that lacks it (`slos[0]`), the only mappings with required fields.
    let missing = base.starts_with("missing field");
    let field = usize::try_from(location.line())
        .ok()
        .and_then(field_at)
        .and_then(|f| match f.rfind(']') {
            _ if !missing => Some(f),
            Some(end) => Some(f[..=end].to_owned()),
            None => None,
        })
        .map(|f| format!("{f}: "))
        .unwrap_or_default();
    format!(
        "line {}, column {}: {field}{base}",
        location.line(),
        location.column()
    )
}
