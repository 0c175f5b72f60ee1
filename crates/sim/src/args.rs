//! Command-line value parsers shared by `simulate` and `demo`.

use std::time::Duration;

/// Clap value parser of a duration that must be longer than zero (`--refresh 5s`, `--window 1m`,
/// intervals): humantime syntax (`500ms`, `5s`, `1m 30s`). A zero duration would make a timer panic
/// or a window empty, so it is refused by the argument parser (exit status 2).
///
/// # Errors
/// A message for clap when `text` is not a duration, or is zero.
pub fn positive_duration(text: &str) -> Result<Duration, String> {
    let duration = humantime::parse_duration(text)
        .map_err(|e| format!("{e}; expected a duration such as 500ms, 5s or 1m"))?;
    if duration.is_zero() {
        return Err("must be longer than 0s".to_owned());
    }
    Ok(duration)
}
