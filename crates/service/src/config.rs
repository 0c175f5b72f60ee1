//! Configuration: raw command-line arguments and the optional YAML file, turned into one validated
//! [`Config`].
//!
//! Two steps, as in ripgrep: [`Args`] is what clap parses (strings, as typed), and
//! [`Config::from_args`] reads the YAML file, fills the embedded defaults and validates every value.
//! Every validation error names the flag or YAML field at fault ([`ConfigError`]).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Parser, ValueEnum};
use serde::Deserialize;

use engine::EngineConfig;
use protocol::labels::LabelLimits;

/// Default listen address. Port 9490 is used by no Prometheus component by default (Prometheus 9090,
/// Alertmanager 9093, Pushgateway 9091, node_exporter 9100, blackbox_exporter 9115; see the
/// Prometheus wiki's "Default port allocations"), so the receiver can sit beside any of them.
pub const DEFAULT_LISTEN_ADDRESS: &str = "0.0.0.0:9490";

/// Command-line arguments, as typed (Prometheus-style dotted flag names).
#[derive(Debug, Clone, Parser)]
#[command(name = "vllm-corrector", version, about)]
pub struct Args {
    /// Address to listen on for remote write (`POST /api/v1/write`), `/metrics`, `/-/healthy` and
    /// `/-/ready`. Port 9490 is used by no Prometheus component by default.
    #[arg(long = "web.listen-address", value_name = "HOST:PORT", default_value = DEFAULT_LISTEN_ADDRESS)]
    pub listen_address: String,

    /// Optional YAML configuration file (engine and limits). Without it, embedded defaults apply.
    /// Re-read on SIGHUP and `POST /-/reload`.
    #[arg(long = "config.file", value_name = "PATH")]
    pub config_file: Option<PathBuf>,

    /// Optional web configuration file in the Prometheus exporter-toolkit format (TLS, client
    /// certificates, basic auth), plus this project's `bearer_tokens`/`bearer_token_files`; see
    /// `docs/RELIABILITY.md`. Re-read on SIGHUP and `POST /-/reload`.
    #[arg(long = "web.config.file", value_name = "PATH")]
    pub web_config_file: Option<PathBuf>,

    /// Directory where the acceptance-corrected bucket state is kept across restarts (written
    /// atomically on shutdown and every `storage.write_interval`, read at start). Overrides
    /// `storage.path` of the configuration file. Without either, the state is not kept.
    #[arg(long = "storage.path", value_name = "DIR")]
    pub storage_path: Option<PathBuf>,

    /// Only log messages at or above this level.
    #[arg(long = "log.level", value_enum, default_value_t = LogLevel::Info)]
    pub log_level: LogLevel,

    /// Log line format: `logfmt` (key=value) or `json` (one object per line).
    #[arg(long = "log.format", value_enum, default_value_t = LogFormat::Logfmt)]
    pub log_format: LogFormat,
}

/// Log verbosity (`--log.level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogLevel {
    /// Errors only.
    Error,
    /// Warnings and errors.
    Warn,
    /// Informational messages (default).
    Info,
    /// Debugging detail.
    Debug,
    /// Everything.
    Trace,
}

/// Log line format (`--log.format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Compact `key=value` lines (default).
    Logfmt,
    /// One JSON object per line.
    Json,
}

/// The YAML configuration file. Every field is optional; an absent field takes its documented
/// default. Unknown fields are an error, so a typo never passes silently.
///
/// ```yaml
/// engine:
///   idle_timeout: 10m
///   max_pending_frames: 16
///   missed_scrapes: 3
///   missed_scrapes_min_wait: 30s
/// limits:
///   max_body_bytes: 33554432
///   max_decoded_bytes: 134217728
///   max_concurrent_requests: 64
///   max_series_per_request: 50000
///   max_labels_per_series: 64
///   max_label_name_length: 1024
///   max_label_value_length: 2048
///   max_active_series: 100000
///   max_future_skew: 10m
///   max_inflight_bytes: 268435456
///   request_body_timeout: 10s
///   max_connections: 1024
///   header_read_timeout: 10s
///   idle_connection_timeout: 2m
/// storage:
///   path: /var/lib/vllm-corrector   # or --storage.path; default none
///   write_interval: 30s
/// ```
///
/// What a sender sees at each limit, and why, is in `docs/RELIABILITY.md`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FileConfig {
    /// Settings of the per-scrape join engine.
    pub engine: EngineSection,
    /// Resource limits of the remote-write receiver.
    pub limits: LimitsSection,
    /// Where the stateful rule's state is kept across restarts.
    pub storage: StorageSection,
}

/// `storage:` section of the YAML file. Read at start only (a reload keeps the running values).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StorageSection {
    /// Directory of the state file (`acceptance-state.json`); `--storage.path` overrides it.
    /// Default: none (the state is not kept).
    pub path: Option<PathBuf>,
    /// How often the state is written while running (it is also written on shutdown). A
    /// duration (humantime syntax), at least `1s`. Default: `30s`.
    pub write_interval: String,
}

impl Default for StorageSection {
    fn default() -> Self {
        StorageSection {
            path: None,
            write_interval: "30s".to_owned(),
        }
    }
}

/// Validated storage settings: where and how often the state is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Storage {
    /// The directory holding the state file.
    pub path: PathBuf,
    /// Period of the background writes.
    pub write_interval: Duration,
}

/// `engine:` section of the YAML file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EngineSection {
    /// A group (one vLLM engine's series) that receives no sample for this long leaves `/metrics`
    /// and its memory is freed. A duration such as `90s`, `10m` or `1h 30m` (humantime syntax).
    /// Must be at least `1s`. Default: `10m`.
    pub idle_timeout: String,
    /// How many distinct scrape timestamps a group keeps while it waits for every input series of
    /// that scrape to arrive. Older incomplete frames are dropped and counted in
    /// `vllm_corrector_frames_dropped_total`. From 1 to 1024. Default: `16`.
    pub max_pending_frames: usize,
    /// A group that receives no new sample for this many of its own observed scrape intervals
    /// leaves `/metrics` before `idle_timeout` (a sender that changed its external labels or
    /// stopped). `0` turns it off. From 0 to 1000. Default: `3`.
    pub missed_scrapes: u32,
    /// The `missed_scrapes` removal never happens sooner than this after the group's last new
    /// sample (humantime; a wait longer than `idle_timeout` leaves the idle timeout first). Default: `30s`, six times Prometheus'
    /// default `queue_config.batch_send_deadline` of 5 s.
    pub missed_scrapes_min_wait: String,
}

impl Default for EngineSection {
    fn default() -> Self {
        EngineSection {
            idle_timeout: "10m".to_owned(),
            max_pending_frames: 16,
            missed_scrapes: 3,
            missed_scrapes_min_wait: "30s".to_owned(),
        }
    }
}

/// `limits:` section of the YAML file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsSection {
    /// Largest accepted remote-write body, in bytes as sent (snappy-compressed). A larger body is
    /// answered 413. At least 1. Default: `33554432` (32 MiB).
    pub max_body_bytes: usize,
    /// Largest accepted decoded (decompressed) body, in bytes. A body whose snappy header declares
    /// more is answered 413 before any allocation. At least `max_body_bytes`. Default: `134217728`
    /// (128 MiB).
    pub max_decoded_bytes: usize,
    /// Remote-write requests processed at once. A request that finds no free slot within a few
    /// seconds is answered 503, which the sender retries with backoff. At least 1. Default: `64`.
    pub max_concurrent_requests: usize,
    /// Most series (`TimeSeries` messages) in one request. A request with more is answered 413
    /// and none of it is applied (its samples are counted as `too_many_series`). At least 1.
    /// Default: `50000` (Prometheus sends at most `queue_config.max_samples_per_send` series per
    /// request, 500 by default in 2.42).
    pub max_series_per_request: usize,
    /// Most labels in one series, `__name__` included. A series with more is rejected
    /// (`too_many_labels`, 400; the rest of the request is applied). At least 1. Default: `64`.
    pub max_labels_per_series: usize,
    /// Longest label name, bytes. A series with a longer one is rejected
    /// (`label_name_too_long`, 400). At least 1. Default: `1024`.
    pub max_label_name_length: usize,
    /// Longest label value, bytes. A series with a longer one is rejected
    /// (`label_value_too_long`, 400). At least 1. Default: `2048`.
    pub max_label_value_length: usize,
    /// Most input series held at once (series a rule reads; stale ones until their group
    /// leaves). Samples of a further new series are rejected (`active_series_limit`, 400) while
    /// known series keep flowing. At least 1. Default: `100000` (about 1 300 vLLM engines).
    pub max_active_series: usize,
    /// How far past the receive clock a sample's timestamp may be. A later sample is rejected
    /// (`future_timestamp`, 400; the rest of the request is applied): applied, it would become its
    /// series' newest and make every real sample after it out of order. A duration (humantime
    /// syntax). Default: `10m`.
    pub max_future_skew: String,
    /// Memory budget of the requests being received and decoded at once, bytes: each request
    /// holds its body size (its `Content-Length`, or `max_body_bytes` when absent) while the body is
    /// read, plus its declared decoded size while it is decoded. A request that cannot get its share
    /// within a few seconds is answered 503 (retried with backoff), so request buffers never exceed
    /// this budget whatever the senders do. At least `max_body_bytes + max_decoded_bytes`.
    /// Default: `268435456` (256 MiB).
    pub max_inflight_bytes: usize,
    /// Longest time to receive a request body once its headers arrived. A slower body is answered
    /// 503 (the sender retries the batch) and its slot and memory are released, so stalled or slow senders cannot hold the
    /// receiver (or a graceful shutdown). A duration (humantime syntax). Default: `10s`.
    pub request_body_timeout: String,
    /// Most client connections open at once (TLS connections once their handshake is done). A
    /// further connection is closed as soon as it is accepted and counted in
    /// `vllm_corrector_connections_closed_total{reason="max_connections"}`, so clients that hold
    /// connections open cannot exhaust the process' file descriptors. Keep it below `ulimit -n`.
    /// At least 1. Default: `1024` (a Prometheus opens at most `queue_config.max_shards`
    /// connections, 200 by default in 2.42).
    pub max_connections: usize,
    /// Longest time a client may take to send a complete request head (request line and headers),
    /// from when the connection opens or its previous request's body was received and the next
    /// head's first byte arrived. A slower connection is closed (`reason="header_read_timeout"`): a
    /// client that sends half a head and stalls holds nothing for long. A duration (humantime
    /// syntax), longer than 0s. Default: `10s`.
    pub header_read_timeout: String,
    /// Longest time a keep-alive connection may sit idle between requests (after a response,
    /// before the next request's first byte). It is then closed (`reason="idle_timeout"`); the
    /// sender opens a new one for its next request. A duration (humantime syntax), longer than 0s.
    /// Default: `2m`.
    pub idle_connection_timeout: String,
}

impl Default for LimitsSection {
    fn default() -> Self {
        let labels = LabelLimits::default();
        LimitsSection {
            max_body_bytes: 32 * 1024 * 1024,
            max_decoded_bytes: 128 * 1024 * 1024,
            max_concurrent_requests: 64,
            max_series_per_request: 50_000,
            max_labels_per_series: labels.max_labels_per_series,
            max_label_name_length: labels.max_label_name_length,
            max_label_value_length: labels.max_label_value_length,
            max_active_series: EngineConfig::default().max_active_series,
            max_future_skew: "10m".to_owned(),
            max_inflight_bytes: 256 * 1024 * 1024,
            request_body_timeout: "10s".to_owned(),
            max_connections: 1024,
            header_read_timeout: "10s".to_owned(),
            idle_connection_timeout: "2m".to_owned(),
        }
    }
}

/// Validated limits of the remote-write receiver (see [`LimitsSection`] for meanings;
/// `limits.max_active_series` lives in [`EngineConfig::max_active_series`], where it is enforced).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest accepted body as sent, bytes.
    pub max_body_bytes: usize,
    /// Largest accepted decoded body, bytes.
    pub max_decoded_bytes: usize,
    /// Remote-write requests processed at once.
    pub max_concurrent_requests: usize,
    /// Most series in one request.
    pub max_series_per_request: usize,
    /// Per-series label limits (count, name length, value length).
    pub labels: LabelLimits,
    /// How far past the receive clock a sample may be stamped, ms.
    pub max_future_skew_ms: i64,
    /// Memory budget of request bodies and decode buffers at once, bytes.
    pub max_inflight_bytes: usize,
    /// Longest time to receive a request body.
    pub request_body_timeout: std::time::Duration,
    /// Most client connections open at once.
    pub max_connections: usize,
    /// Longest time to receive a request head.
    pub header_read_timeout: std::time::Duration,
    /// Longest idle time of a keep-alive connection between requests.
    pub idle_connection_timeout: std::time::Duration,
}

impl Default for Limits {
    fn default() -> Self {
        let d = LimitsSection::default();
        Limits {
            max_body_bytes: d.max_body_bytes,
            max_decoded_bytes: d.max_decoded_bytes,
            max_concurrent_requests: d.max_concurrent_requests,
            max_series_per_request: d.max_series_per_request,
            labels: LabelLimits::default(),
            max_future_skew_ms: 10 * 60 * 1000,
            max_inflight_bytes: d.max_inflight_bytes,
            request_body_timeout: std::time::Duration::from_secs(10),
            max_connections: d.max_connections,
            header_read_timeout: std::time::Duration::from_secs(10),
            idle_connection_timeout: std::time::Duration::from_secs(120),
        }
    }
}

/// The validated configuration the service runs with.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Socket address to listen on.
    pub listen_address: SocketAddr,
    /// The YAML file read, if any.
    pub config_file: Option<PathBuf>,
    /// The web configuration file (`--web.config.file`), read by [`crate::web::WebSettings::load`].
    pub web_config_file: Option<PathBuf>,
    /// Log verbosity.
    pub log_level: LogLevel,
    /// Log line format.
    pub log_format: LogFormat,
    /// Engine settings.
    pub engine: EngineConfig,
    /// Receiver limits.
    pub limits: Limits,
    /// Where the state is kept across restarts (`--storage.path`, `storage:`), if anywhere.
    pub storage: Option<Storage>,
}

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

fn invalid(field: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field,
        message: message.into(),
    }
}

impl FileConfig {
    /// Parses the YAML text of a configuration file. An empty document means all defaults.
    ///
    /// # Errors
    /// [`ConfigError::Yaml`] for malformed YAML, an unknown field or a wrong type; `path` is only
    /// used in the message.
    pub fn from_yaml(text: &str, path: &Path) -> Result<FileConfig, ConfigError> {
        if text.trim().is_empty() {
            return Ok(FileConfig::default());
        }
        serde_saphyr::from_str(text).map_err(|e| {
            let field = e
                .location()
                .and_then(|l| yaml_field_at(text, l.line() as usize));
            ConfigError::Yaml {
                path: path.to_owned(),
                message: match field {
                    Some(field) => format!("{field}: {e}"),
                    None => e.to_string(),
                },
            }
        })
    }

    /// Reads and parses a configuration file.
    ///
    /// # Errors
    /// [`ConfigError::Read`] when the file cannot be read, else as [`FileConfig::from_yaml`].
    pub fn read(path: &Path) -> Result<FileConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        FileConfig::from_yaml(&text, path)
    }
}

impl Config {
    /// Turns parsed arguments into a validated config: reads `--config.file` if given (else
    /// embedded defaults), then validates every value.
    ///
    /// # Errors
    /// Any [`ConfigError`]; the message names the flag or field.
    pub fn from_args(args: Args) -> Result<Config, ConfigError> {
        let file = match &args.config_file {
            Some(path) => FileConfig::read(path)?,
            None => FileConfig::default(),
        };
        Config::from_parts(args, file)
    }

    /// Validates arguments together with an already parsed file config.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the first invalid flag or field.
    pub fn from_parts(args: Args, file: FileConfig) -> Result<Config, ConfigError> {
        let listen_address = parse_listen_address(&args.listen_address)?;
        let mut engine = validate_engine(&file.engine)?;
        let limits = validate_limits(&file.limits)?;
        engine.max_active_series =
            positive("limits.max_active_series", file.limits.max_active_series)?;
        let (write_interval, _) =
            duration_ms("storage.write_interval", &file.storage.write_interval)?;
        if write_interval < Duration::from_secs(1) {
            return Err(invalid(
                "storage.write_interval",
                format!(
                    "{:?} is below the minimum of 1s",
                    file.storage.write_interval
                ),
            ));
        }
        let storage = args
            .storage_path
            .clone()
            .or(file.storage.path.clone())
            .map(|path| Storage {
                path,
                write_interval,
            });
        Ok(Config {
            storage,
            listen_address,
            config_file: args.config_file,
            web_config_file: args.web_config_file,
            log_level: args.log_level,
            log_format: args.log_format,
            engine,
            limits,
        })
    }
}

/// The dotted path (`limits.max_active_series`) of the mapping key on 1-based `line` of the YAML
/// `text`, from the keys of the less indented lines above it: the parser's errors give a line
/// and column, not the field. `None` when that line holds no `key:`.
fn yaml_field_at(text: &str, line: usize) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let key_of = |l: &str| -> Option<(usize, String)> {
        let indent = l.len() - l.trim_start().len();
        let body = l.trim_start().trim_start_matches("- ");
        if body.starts_with('#') {
            return None;
        }
        let (key, _) = body.split_once(':')?;
        let key = key.trim().trim_matches(|c| c == '"' || c == '\'');
        (!key.is_empty() && !key.contains(' ')).then(|| (indent, key.to_owned()))
    };
    let (mut indent, key) = key_of(lines.get(line.checked_sub(1)?)?)?;
    let mut path = vec![key];
    for l in lines[..line - 1].iter().rev() {
        if let Some((i, k)) = key_of(l)
            && i < indent
        {
            path.push(k);
            indent = i;
        }
        if indent == 0 {
            break;
        }
    }
    path.reverse();
    Some(path.join("."))
}

/// `text` as a duration in ms, naming `field` when it is malformed or too long.
/// Parses `--web.listen-address` as Prometheus components do: `HOST:PORT` with a numeric or named
/// host (`localhost:9490`, resolved once at start), or `:PORT` for every interface.
fn parse_listen_address(text: &str) -> Result<SocketAddr, ConfigError> {
    use std::net::ToSocketAddrs;
    let full = match text.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => text.to_owned(),
    };
    if let Ok(address) = full.parse::<SocketAddr>() {
        return Ok(address);
    }
    let resolved = full.to_socket_addrs().map_err(|e| {
        invalid(
            "--web.listen-address",
            format!("{text:?} is not HOST:PORT or :PORT: {e}"),
        )
    })?;
    let mut resolved: Vec<SocketAddr> = resolved.collect();
    // Prefer IPv4 (what `localhost` means to most users), as Go's net.Listen does for "tcp".
    resolved.sort_by_key(|a| !a.is_ipv4());
    resolved.into_iter().next().ok_or_else(|| {
        invalid(
            "--web.listen-address",
            format!("{text:?} resolves to no address"),
        )
    })
}

fn duration_ms(field: &'static str, text: &str) -> Result<(Duration, i64), ConfigError> {
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

fn validate_engine(section: &EngineSection) -> Result<EngineConfig, ConfigError> {
    let (idle, idle_timeout_ms) = duration_ms("engine.idle_timeout", &section.idle_timeout)?;
    if idle < Duration::from_secs(1) {
        return Err(invalid(
            "engine.idle_timeout",
            format!("{:?} is below the minimum of 1s", section.idle_timeout),
        ));
    }
    if !(1..=1024).contains(&section.max_pending_frames) {
        return Err(invalid(
            "engine.max_pending_frames",
            format!("{} is outside 1..=1024", section.max_pending_frames),
        ));
    }
    if section.missed_scrapes > 1000 {
        return Err(invalid(
            "engine.missed_scrapes",
            format!("{} is outside 0..=1000", section.missed_scrapes),
        ));
    }
    let min_wait_ms = duration_ms(
        "engine.missed_scrapes_min_wait",
        &section.missed_scrapes_min_wait,
    )?
    .1;
    Ok(EngineConfig {
        idle_timeout_ms,
        max_pending_frames: section.max_pending_frames,
        missed_scrapes: section.missed_scrapes,
        missed_scrapes_min_wait_ms: min_wait_ms,
        ..EngineConfig::default()
    })
}

fn positive(field: &'static str, v: usize) -> Result<usize, ConfigError> {
    if v == 0 {
        Err(invalid(field, "must be at least 1"))
    } else {
        Ok(v)
    }
}

fn validate_limits(section: &LimitsSection) -> Result<Limits, ConfigError> {
    // (0 is refused below, with the message every zero limit gets.)
    if section.max_decoded_bytes != 0 && section.max_decoded_bytes < section.max_body_bytes {
        return Err(invalid(
            "limits.max_decoded_bytes",
            format!(
                "{} is below limits.max_body_bytes ({}): a snappy body decodes to at least about \
                 its own size, so bodies the body limit admits would all be refused (413)",
                section.max_decoded_bytes, section.max_body_bytes
            ),
        ));
    }
    let largest_request = section
        .max_body_bytes
        .saturating_add(section.max_decoded_bytes);
    if section.max_inflight_bytes < largest_request {
        return Err(invalid(
            "limits.max_inflight_bytes",
            "must be at least limits.max_body_bytes + limits.max_decoded_bytes, or the largest \
             accepted request could never be admitted",
        ));
    }
    let body_timeout_ms =
        duration_ms("limits.request_body_timeout", &section.request_body_timeout)?.1;
    if body_timeout_ms <= 0 {
        return Err(invalid(
            "limits.request_body_timeout",
            "must be longer than 0s",
        ));
    }
    let timeout = |field: &'static str, text: &str| -> Result<std::time::Duration, ConfigError> {
        let (d, ms) = duration_ms(field, text)?;
        if ms <= 0 {
            return Err(invalid(field, "must be longer than 0s"));
        }
        Ok(d)
    };
    Ok(Limits {
        max_connections: positive("limits.max_connections", section.max_connections)?,
        header_read_timeout: timeout("limits.header_read_timeout", &section.header_read_timeout)?,
        idle_connection_timeout: timeout(
            "limits.idle_connection_timeout",
            &section.idle_connection_timeout,
        )?,
        max_body_bytes: positive("limits.max_body_bytes", section.max_body_bytes)?,
        max_decoded_bytes: positive("limits.max_decoded_bytes", section.max_decoded_bytes)?,
        max_concurrent_requests: positive(
            "limits.max_concurrent_requests",
            section.max_concurrent_requests,
        )?,
        max_series_per_request: positive(
            "limits.max_series_per_request",
            section.max_series_per_request,
        )?,
        labels: LabelLimits {
            max_labels_per_series: positive(
                "limits.max_labels_per_series",
                section.max_labels_per_series,
            )?,
            max_label_name_length: positive(
                "limits.max_label_name_length",
                section.max_label_name_length,
            )?,
            max_label_value_length: positive(
                "limits.max_label_value_length",
                section.max_label_value_length,
            )?,
        },
        max_future_skew_ms: duration_ms("limits.max_future_skew", &section.max_future_skew)?.1,
        max_inflight_bytes: section.max_inflight_bytes,
        request_body_timeout: std::time::Duration::from_millis(body_timeout_ms as u64),
    })
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
