//! `--log.level` and `--log.format`: the global tracing subscriber, writing to stderr.

use crate::config::{LogFormat, LogLevel};

/// Error of [`init_logging`].
#[derive(Debug, thiserror::Error)]
#[error("cannot install the log subscriber: {0}")]
pub struct LoggingError(String);

/// Installs the global tracing subscriber, writing to stderr: compact `key=value` lines for
/// [`LogFormat::Logfmt`], one JSON object per line for [`LogFormat::Json`].
///
/// # Errors
/// [`LoggingError`] when a global subscriber is already installed.
pub fn init_logging(level: LogLevel, format: LogFormat) -> Result<(), LoggingError> {
    let max = match level {
        LogLevel::Error => tracing::Level::ERROR,
        LogLevel::Warn => tracing::Level::WARN,
        LogLevel::Info => tracing::Level::INFO,
        LogLevel::Debug => tracing::Level::DEBUG,
        LogLevel::Trace => tracing::Level::TRACE,
    };
    match format {
        // Real logfmt (`ts=… level=info target=… msg=… key=value`), as Prometheus components log.
        LogFormat::Logfmt => {
            use tracing_subscriber::layer::SubscriberExt;
            use tracing_subscriber::util::SubscriberInitExt;
            let layer = tracing_logfmt::builder()
                .with_span_name(false)
                .with_span_path(false)
                .layer()
                .with_writer(std::io::stderr);
            tracing_subscriber::registry()
                .with(tracing_subscriber::filter::LevelFilter::from_level(max))
                .with(layer)
                .try_init()
                .map_err(|e| LoggingError(e.to_string()))
        }
        LogFormat::Json => tracing_subscriber::fmt()
            .with_max_level(max)
            .with_writer(std::io::stderr)
            .json()
            .flatten_event(true)
            .try_init()
            .map_err(|e| LoggingError(e.to_string())),
    }
}
