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

mod bytes;
mod error;
mod input;
mod limits;
mod slos;

pub use error::ConfigError;
pub(crate) use error::yaml_message;
use error::{duration_ms, invalid, positive};
use input::{InputSection, validate_input};
use limits::validate_limits;
pub use limits::{Limits, LimitsSection};
pub(crate) use limits::{decode_charge, memory_allowance};

use engine::EngineConfig;
use engine::slo::SloSpec;
use slos::SloEntry;

/// Default listen address. Port 9490 is used by no Prometheus component by default (Prometheus 9090,
/// Alertmanager 9093, Pushgateway 9091, node_exporter 9100, blackbox_exporter 9115; see the
/// Prometheus wiki's "Default port allocations"), so the receiver can sit beside any of them.
pub(crate) const DEFAULT_LISTEN_ADDRESS: &str = "0.0.0.0:9490";

/// Command-line arguments, as typed (Prometheus-style dotted flag names).
#[derive(Debug, Clone, Parser)]
#[command(name = "vllm-corrector", version, about)]
pub struct Args {
    /// Address to listen on for remote write (`POST /api/v1/write`), `/metrics`, `/-/healthy` and
    /// `/-/ready`. Port 9490 is used by no Prometheus component by default.
    #[arg(long = "web.listen-address", value_name = "HOST:PORT", default_value = DEFAULT_LISTEN_ADDRESS)]
    pub(crate) listen_address: String,

    /// Optional YAML configuration file (engine, limits, input, storage and slos). Without it, embedded defaults apply.
    /// Re-read on SIGHUP and `POST /-/reload`.
    #[arg(long = "config.file", value_name = "PATH")]
    pub(crate) config_file: Option<PathBuf>,

    /// Optional web configuration file in the Prometheus exporter-toolkit format (TLS, client
    /// certificates, basic auth), plus this project's `bearer_tokens`/`bearer_token_files`; see
    /// `docs/SECURITY.md`. Re-read on SIGHUP and `POST /-/reload`.
    #[arg(long = "web.config.file", value_name = "PATH")]
    pub web_config_file: Option<PathBuf>,

    /// Directory where the acceptance-corrected bucket state is kept across restarts (written
    /// atomically on shutdown and every `storage.write_interval`, read at start). Overrides
    /// `storage.path` of the configuration file. Without either, the state is not kept.
    #[arg(long = "storage.path", value_name = "DIR")]
    pub(crate) storage_path: Option<PathBuf>,

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
///   settle_scrapes: 2
/// limits:
///   max_memory_bytes: 384MiB        # or 402653184: any *_bytes takes units (KiB, MB, …)
///   max_body_bytes: 8MiB
///   max_decoded_bytes: 8MiB
///   max_concurrent_requests: 64
///   max_series_per_request: 50000
///   max_labels_per_series: 64
///   max_label_name_length: 1024
///   max_label_value_length: 2048
///   max_active_series: 100000
///   max_future_skew: 10m
///   max_inflight_bytes: 96MiB
///   request_body_timeout: 10s
///   max_connections: 1024
///   header_read_timeout: 10s
///   idle_connection_timeout: 2m
///   response_write_timeout: 1m
/// input:
///   metric_prefix: "vllm:"          # or a platform's, e.g. "kserve_vllm:"
///   drop_labels: [region]           # the sender's external labels
/// storage:
///   path: /var/lib/vllm-corrector   # or --storage.path; default none
///   write_interval: 30s
/// slos:                              # default: the shipped SLO (docs/SLO.md)
///   - name: chat
///     objective: 0.99
///     tpot: 0.05
/// ```
///
/// What a sender sees at each limit, and why, is in `docs/RELIABILITY.md`; the `slos:` fields
/// in `docs/SLO.md` and [`slos`].
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct FileConfig {
    /// Settings of the per-scrape join engine.
    pub engine: EngineSection,
    /// How the input series are named (reloadable).
    pub(crate) input: InputSection,
    /// Resource limits of the remote-write receiver.
    pub(crate) limits: LimitsSection,
    /// Where the stateful rule's state is kept across restarts.
    pub(crate) storage: StorageSection,
    /// The SLOs (reloadable). Absent: the shipped default; `[]`: none; `slos:` with nothing after
    /// it is refused, since a reader cannot tell which of the two it means.
    #[serde(default, deserialize_with = "slos::entries")]
    pub(crate) slos: Option<Vec<SloEntry>>,
}

/// `storage:` section of the YAML file. Read at start only (a reload keeps the running values).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct StorageSection {
    /// Directory of the state file (`acceptance-state.json`); `--storage.path` overrides it.
    /// Default: none (the state is not kept).
    pub(crate) path: Option<PathBuf>,
    /// How often the state is written while running (it is also written on shutdown). A
    /// duration (humantime syntax), at least `1s`. Default: `30s`.
    pub(crate) write_interval: String,
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
pub(crate) struct Storage {
    /// The directory holding the state file.
    pub(crate) path: PathBuf,
    /// Where `path` came from, for messages: `--storage.path` or the file's `storage.path`.
    pub(crate) field: &'static str,
    /// Period of the background writes.
    pub(crate) write_interval: Duration,
}

/// `engine:` section of the YAML file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct EngineSection {
    /// A group (one vLLM engine's series) that receives no sample for this long leaves `/metrics`
    /// and its memory is freed. A duration such as `90s`, `10m` or `1h 30m` (humantime syntax).
    /// Must be at least `1s`. Default: `10m`.
    pub(crate) idle_timeout: String,
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
    pub(crate) missed_scrapes_min_wait: String,
    /// After a series new to a group arrives (a new target, a corrector restart; not a series that
    /// went stale and came back), nothing of the group is evaluated until this many newer scrapes
    /// have begun without another new one, so a shard that resends part of a scrape late cannot make a
    /// histogram be served with part of its buckets (docs/ENGINE.md, "Settling"). What was
    /// served before stays served meanwhile. `0` serves the first complete scrape. From 0 to 100.
    /// Default: `2`.
    pub settle_scrapes: u32,
}

impl Default for EngineSection {
    fn default() -> Self {
        EngineSection {
            idle_timeout: "10m".to_owned(),
            max_pending_frames: 16,
            missed_scrapes: 3,
            missed_scrapes_min_wait: "30s".to_owned(),
            settle_scrapes: 2,
        }
    }
}

/// The validated configuration the service runs with.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Socket address to listen on.
    pub(crate) listen_address: SocketAddr,
    /// The YAML file read, if any.
    pub(crate) config_file: Option<PathBuf>,
    /// The web configuration file (`--web.config.file`), read by [`crate::web::WebSettings::load`].
    pub web_config_file: Option<PathBuf>,
    /// Log verbosity.
    pub log_level: LogLevel,
    /// Log line format.
    pub log_format: LogFormat,
    /// Engine settings.
    pub engine: EngineConfig,
    /// Receiver limits.
    pub(crate) limits: Limits,
    /// Where the state is kept across restarts (`--storage.path`, `storage:`), if anywhere.
    pub(crate) storage: Option<Storage>,
    /// The validated SLO spec (`slos:`, else the shipped default); reloadable.
    pub slos: SloSpec,
}

impl FileConfig {
    /// Parses the YAML text of a configuration file. An empty document means all defaults.
    ///
    /// # Errors
    /// [`ConfigError::Yaml`] for malformed YAML, an unknown field or a wrong type; `path` is only
    /// used in the message.
    pub(crate) fn from_yaml(text: &str, path: &Path) -> Result<FileConfig, ConfigError> {
        if text.trim().is_empty() {
            return Ok(FileConfig::default());
        }
        serde_saphyr::from_str(text).map_err(|e| ConfigError::Yaml {
            path: path.to_owned(),
            message: yaml_message(&e, |line| yaml_field_at(text, line)),
        })
    }

    /// Reads and parses a configuration file.
    ///
    /// # Errors
    /// [`ConfigError::Read`] when the file cannot be read, else as [`FileConfig::from_yaml`].
    pub(crate) fn read(path: &Path) -> Result<FileConfig, ConfigError> {
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
    /// [`ConfigError::Invalid`] naming the first invalid flag or field; a field of the file
    /// (`--config.file` given) as [`ConfigError::InFile`], which names the file too.
    pub(crate) fn from_parts(args: Args, file: FileConfig) -> Result<Config, ConfigError> {
        let path = args.config_file.clone();
        Config::validate(args, file).map_err(|error| match (path, error) {
            (Some(path), ConfigError::Slo(e)) => ConfigError::InFile {
                path,
                source: Box::new(ConfigError::Slo(e)),
            },
            (Some(path), e @ ConfigError::Invalid { field, .. }) if !field.starts_with("--") => {
                ConfigError::InFile {
                    path,
                    source: Box::new(e),
                }
            }
            (_, e) => e,
        })
    }

    /// [`Config::from_parts`], naming the field alone.
    fn validate(args: Args, file: FileConfig) -> Result<Config, ConfigError> {
        let listen_address = parse_listen_address(&args.listen_address)?;
        let mut engine = validate_engine(&file.engine)?;
        let input = validate_input(&file.input)?;
        engine.metric_prefix = input.metric_prefix;
        engine.drop_labels = input.drop_labels;
        let limits = validate_limits(&file.limits)?;
        engine.max_active_series =
            positive("limits.max_active_series", file.limits.max_active_series)?;
        engine.max_state_bytes = limits.state_budget();
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
        let slos = slos::slo_spec(file.slos.as_deref())?;
        engine.slos = slos::slo_set(&slos);
        let storage = match (&args.storage_path, &file.storage.path) {
            (Some(path), _) => Some((path.clone(), "--storage.path")),
            (None, Some(path)) => Some((path.clone(), "storage.path")),
            (None, None) => None,
        }
        .map(|(path, field)| Storage {
            path,
            field,
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
            slos,
        })
    }

    /// The configuration a file gives with every flag at its default: how `vllm-corrector rules
    /// --config.file FILE` reads the SLOs, so it refuses exactly what the service would.
    ///
    /// # Errors
    /// As [`Config::from_args`] with `--config.file path`.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let args = Args::parse_from([std::ffi::OsStr::new("vllm-corrector")]);
        let file = FileConfig::read(path)?;
        Config::from_parts(
            Args {
                config_file: Some(path.to_owned()),
                ..args
            },
            file,
        )
    }
}

impl Config {
    /// What the configuration sets that a reader most often gets wrong, in one line for
    /// `vllm-corrector check-config`: the input prefix, the dropped labels, the SLOs (by name)
    /// and the memory budget (bytes, and in MiB).
    pub fn summary(&self) -> String {
        let drop = if self.engine.drop_labels.is_empty() {
            "none".to_owned()
        } else {
            self.engine.drop_labels.join(",")
        };
        format!(
            "input.metric_prefix {:?}, input.drop_labels {drop}, slos {}, limits.max_memory_bytes {} ({} MiB)",
            self.engine.metric_prefix,
            slo_names(&self.slos),
            self.limits.max_memory_bytes,
            self.limits.max_memory_bytes / (1024 * 1024),
        )
    }
}

/// The names of the SLOs of `spec`, comma-separated, for the log (`none` when there are none).
pub(crate) fn slo_names(spec: &SloSpec) -> String {
    if spec.slos.is_empty() {
        return "none".to_owned();
    }
    spec.slos
        .iter()
        .map(|s| s.name.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

/// The dotted path (`limits.max_active_series`, `slos[1].tpot`) of the mapping key on 1-based
/// `line` of the YAML `text`, from the keys of the less indented lines above it, with the index
/// of each block-sequence item on the way: the parser's errors give a line and column, not the
/// field. `None` when that line holds no `key:`.
pub(crate) fn yaml_field_at(text: &str, line: usize) -> Option<String> {
    /// A line's key, the column it starts at, and the indent of its `- ` if it begins an item.
    struct KeyLine {
        column: usize,
        key: String,
        dash: Option<usize>,
    }
    let key_of = |l: &str| -> Option<KeyLine> {
        let indent = l.len() - l.trim_start().len();
        let body = l.trim_start();
        let (dash, body, column) = match body.strip_prefix("- ") {
            Some(rest) => {
                let inner = rest.trim_start();
                (Some(indent), inner, indent + 2 + rest.len() - inner.len())
            }
            None => (None, body, indent),
        };
        if body.starts_with('#') {
            return None;
        }
        let (key, _) = body.split_once(':')?;
        let key = key.trim().trim_matches(|c| c == '"' || c == '\'');
        (!key.is_empty() && !key.contains(' ')).then(|| KeyLine {
            column,
            key: key.to_owned(),
            dash,
        })
    };
    let lines: Vec<&str> = text.lines().collect();
    let first = key_of(lines.get(line.checked_sub(1)?)?)?;
    let mut indent = first.column;
    let mut path = vec![first.key];
    // (indent of the dashes of the sequence we are in, items of it seen so far, ours included).
    let mut item = first.dash.map(|d| (d, 1usize));
    for l in lines[..line - 1].iter().rev() {
        let Some(k) = key_of(l) else { continue };
        match (&mut item, k.dash) {
            (Some((d, n)), Some(kd)) if kd == *d => {
                *n += 1;
                continue;
            }
            (None, Some(kd)) if k.column == indent => {
                item = Some((kd, 1));
                continue;
            }
            _ => {}
        }
        if k.column < indent {
            match item.take() {
                Some((_, n)) => path.push(format!("{}[{}]", k.key, n - 1)),
                None => path.push(k.key),
            }
            indent = k.column;
            if let Some(d) = k.dash {
                // This key begins an item itself: the sequence above it comes next.
                item = Some((d, 1));
            }
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
    if section.settle_scrapes > 100 {
        return Err(invalid(
            "engine.settle_scrapes",
            format!("{} is outside 0..=100", section.settle_scrapes),
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
        settle_scrapes: section.settle_scrapes,
        ..EngineConfig::default()
    })
}

#[cfg(test)]
mod tests;
