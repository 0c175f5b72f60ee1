//! Loading a dump for `inspect`: a file, standard input or an `http://` URL, and its samples with
//! the line each came from.

use std::time::Duration;

use crate::readings::{DumpSample, cumulative_by_suffix};
use promtext::{Exposition, Format, MetricKind};

/// Why `inspect` failed. The message names the dump (`BEFORE`/`AFTER` and its location) and,
/// for a malformed or mismatched dump, the line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InspectError {
    /// One dump cannot be read, fetched or parsed, or contradicts the other at a line of it.
    #[error("{which} {location}: {message}")]
    Dump {
        /// `BEFORE` or `AFTER`.
        which: &'static str,
        /// The path or URL.
        location: String,
        /// What is wrong (starting with `line N:` when a line is at fault).
        message: String,
    },
    /// The two dumps have no group of vLLM series in common (different targets, or not vLLM).
    #[error("BEFORE and AFTER share no group of vLLM series: {0}")]
    NoCommonGroup(String),
    /// AFTER was taken before BEFORE: the arguments are swapped ([`super::order`]).
    #[error(
        "BEFORE {before} and AFTER {after} are swapped: {evidence}; pass the earlier dump first"
    )]
    Swapped {
        /// BEFORE's path or URL.
        before: String,
        /// AFTER's path or URL.
        after: String,
        /// The series, lines and timestamps that prove it.
        evidence: String,
    },
    /// `--config.file` is unreadable or invalid: the configuration error, naming the file and
    /// the field.
    #[error("{0}")]
    Config(String),
}

/// A loaded dump: where it came from, its text and its format.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    /// `BEFORE` or `AFTER`.
    pub(crate) which: &'static str,
    /// The path or URL, for messages.
    pub(crate) location: String,
    /// The exposition text.
    pub(crate) text: String,
    /// Its format.
    pub(crate) format: Format,
}

impl Loaded {
    /// A dump from text already in memory; the format is OpenMetrics when the last non-blank
    /// line is `# EOF`, else text 0.0.4.
    pub fn from_text(which: &'static str, location: &str, text: String) -> Loaded {
        let format = match text.lines().rev().find(|l| !l.trim().is_empty()) {
            Some(last) if last.trim() == "# EOF" => Format::OpenMetrics,
            _ => Format::Text004,
        };
        Loaded {
            which,
            location: location.to_owned(),
            text,
            format,
        }
    }

    pub(super) fn error(&self, message: impl Into<String>) -> InspectError {
        InspectError::Dump {
            which: self.which,
            location: self.location.clone(),
            message: message.into(),
        }
    }
}

/// Reads a dump from a file, stdin (`-`) or an `http://` URL (30 s timeout, 2xx required).
///
/// # Errors
/// [`InspectError::Dump`] naming the location when it cannot be read or fetched.
pub async fn load(which: &'static str, location: &str) -> Result<Loaded, InspectError> {
    load_within(which, location, FETCH_TIMEOUT).await
}

/// How long `inspect` waits for an `http://` dump, connection and body included.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a fetch failed, in the terms a user can act on: a timeout (the server accepted and never
/// answered in time), a refused connection (nothing listens there), or reqwest's own message.
fn fetch_error(error: &reqwest::Error, timeout: Duration) -> String {
    if error.is_timeout() {
        return format!("timed out after {timeout:?}: the server did not answer in time");
    }
    let mut source: Option<&dyn std::error::Error> = Some(error);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return "connection refused: nothing listens at that address and port".to_owned();
        }
        source = e.source();
    }
    if error.is_connect() {
        let mut text = error.to_string();
        let mut inner = std::error::Error::source(error);
        while let Some(e) = inner {
            text = format!("{text}: {e}");
            inner = e.source();
        }
        return format!("cannot connect: {text}");
    }
    format!("cannot fetch: {error}")
}

/// [`load`] with an explicit fetch timeout.
///
/// # Errors
/// As [`load`].
pub async fn load_within(
    which: &'static str,
    location: &str,
    timeout: Duration,
) -> Result<Loaded, InspectError> {
    let fail = |message: String| InspectError::Dump {
        which,
        location: location.to_owned(),
        message,
    };
    if location.starts_with("https://") {
        return Err(fail(
            "https is not supported by this build (no TLS); save the dump with `curl -s URL > file` and pass the file".into(),
        ));
    }
    if location.starts_with("http://") {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| fail(format!("cannot create an HTTP client: {e}")))?;
        let response = client
            .get(location)
            .header("Accept", "text/plain;version=0.0.4")
            .send()
            .await
            .map_err(|e| fail(fetch_error(&e, timeout)))?;
        let status = response.status();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let text = response.text().await.map_err(|e| {
            fail(format!(
                "cannot read the response: {}",
                fetch_error(&e, timeout)
            ))
        })?;
        if !status.is_success() {
            return Err(fail(format!("answered {status}")));
        }
        let format = Format::from_content_type(&content_type);
        return Ok(Loaded {
            which,
            location: location.to_owned(),
            text,
            format,
        });
    }
    let text = if location == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(location)
    }
    .map_err(|e| fail(format!("cannot read: {e}")))?;
    Ok(Loaded::from_text(which, location, text))
}

/// Parses a dump into samples carrying their 1-based line numbers.
///
/// # Errors
/// The parser's error (`line N: …`) as [`InspectError::Dump`].
pub(crate) fn samples(dump: &Loaded) -> Result<Vec<DumpSample>, InspectError> {
    let exposition =
        promtext::parse(&dump.text, dump.format).map_err(|e| dump.error(e.to_string()))?;
    // The parser keeps sample lines in order: every non-blank line that is not a comment.
    let lines: Vec<usize> = dump
        .text
        .lines()
        .enumerate()
        .filter(|(_, l)| {
            let l = l.trim_start();
            !l.trim().is_empty() && !l.starts_with('#')
        })
        .map(|(i, _)| i + 1)
        .collect();
    Ok(exposition
        .samples
        .iter()
        .enumerate()
        .map(|(i, s)| DumpSample {
            name: s.name.clone(),
            labels: s.labels.clone(),
            value: s.value,
            timestamp_ms: s.timestamp_ms,
            line: lines.get(i).copied().unwrap_or(0),
            cumulative: is_cumulative(&exposition, &s.name),
        })
        .collect())
}

fn is_cumulative(exposition: &Exposition, name: &str) -> bool {
    if name.ends_with("_created") {
        return false;
    }
    match exposition.kind_of(name) {
        Some(MetricKind::Counter | MetricKind::Histogram | MetricKind::Summary) => true,
        Some(MetricKind::Untyped) | None => cumulative_by_suffix(name),
        Some(_) => false,
    }
}
