//! Configuration reload: SIGHUP and `POST /-/reload` (or `PUT`) re-read `--config.file` and
//! `--web.config.file`, as Prometheus does.
//!
//! A reload validates both files completely before changing anything. Then the engine settings
//! (idle timeout, pending frames, active-series limit) are applied under the engine lock, keeping
//! every series and group, and the receiver limits, web settings and SLO spec (`slos:`) are
//! swapped as one value ([`crate::live`]): they apply from the next request, and TLS certificates, keys and
//! client CAs from the next connection. Flags (`--web.listen-address`, `--log.*`) are not
//! reloaded.
//!
//! A file that fails validation, a change that turns TLS on or off (the listener is chosen at
//! start), or a change of a setting read at start only (`storage.path`, `storage.write_interval`:
//! the state file was read from the old path and the writer runs at the old pace) keeps the whole
//! old configuration, logs the error and sets
//! `vllm_corrector_config_last_reload_successful` to 0. A success sets it to 1 and
//! `vllm_corrector_config_last_reload_success_timestamp_seconds` to now.
//!
//! `/-/reload` answers 200 on success and **500** with the error on failure, as Prometheus does:
//! config reloaders (prometheus-config-reloader, configmap-reload) treat any non-2xx as a failed
//! reload and retry when the file changes again, and the fault is in the server's files, not in
//! the request, so a 4xx would misplace the blame. This layer chooses that status
//! (`ReloadError::status`); the HTTP layer serves the route and maps the error to a response
//! (`crate::http::HttpError::Reload`).

use std::sync::{Arc, Mutex, PoisonError};

use axum::http::StatusCode;

use crate::clock::now_ms;
use crate::config::{Args, Config, ConfigError, Storage, slo_names};
use crate::core::Core;
use crate::live::LiveCell;
use crate::web::{WebConfigError, WebSettings};

/// Why a reload was refused; the old configuration stays in force.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReloadError {
    /// `--config.file` is unreadable or invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// `--web.config.file` (or a file it names) is unreadable or invalid.
    #[error(transparent)]
    Web(#[from] WebConfigError),
    /// The new web configuration turns TLS on or off.
    #[error("--web.config.file: turning TLS {0} needs a restart")]
    TlsToggle(&'static str),
    /// The new configuration file changes a setting read at start only.
    #[error(
        "{field}: changed from {old} to {new}, which applies only at start; restart the service \
         to apply it, or restore the old value to reload the rest"
    )]
    StartOnly {
        /// The field (`storage.path`, `storage.write_interval`).
        field: &'static str,
        /// The running value.
        old: String,
        /// The file's new value.
        new: String,
    },
}

impl ReloadError {
    /// The status code of a failed reload: always 500, since the fault is in the server's files,
    /// not in the request (see the module doc).
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            ReloadError::Config(_)
            | ReloadError::Web(_)
            | ReloadError::TlsToggle(_)
            | ReloadError::StartOnly { .. } => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// Re-reads the configuration files and swaps the running settings.
#[derive(Debug)]
pub(crate) struct Reloader {
    args: Args,
    /// Where and how often the state is written: read at start, never reloaded.
    storage: Option<Storage>,
    core: Arc<Core>,
    live: Arc<LiveCell>,
    serial: Mutex<()>,
}

impl Reloader {
    /// A reloader for the files named by `args`, acting on the running `engine`'s settings and
    /// swapping `live`; reloads are counted in `metrics`. `storage` is what the service started
    /// with: a reload that changes it is refused ([`ReloadError::StartOnly`]).
    pub(crate) fn new(
        args: Args,
        storage: Option<Storage>,
        core: Arc<Core>,
        live: Arc<LiveCell>,
    ) -> Reloader {
        Reloader {
            args,
            storage,
            core,
            live,
            serial: Mutex::new(()),
        }
    }

    /// Reloads both files; concurrent reloads run one after the other. Blocking (file I/O and
    /// PEM parsing): call it from a blocking thread.
    ///
    /// # Errors
    /// [`ReloadError`]; the old configuration is then kept and the failure counted.
    pub(crate) fn reload(&self) -> Result<(), ReloadError> {
        let _one_at_a_time = self.serial.lock().unwrap_or_else(PoisonError::into_inner);
        match self.swap() {
            Ok(()) => {
                self.core
                    .metrics
                    .ops
                    .reload_succeeded(now_ms() as f64 / 1000.0);
                let slos = slo_names(&self.live.get().slos);
                tracing::info!(slos, "configuration reloaded");
                Ok(())
            }
            Err(error) => {
                self.core.metrics.ops.reload_failed();
                tracing::error!(%error, "configuration reload failed; keeping the old configuration");
                Err(error)
            }
        }
    }

    fn swap(&self) -> Result<(), ReloadError> {
        let config = Config::from_args(self.args.clone())?;
        start_only(self.storage.as_ref(), config.storage.as_ref())?;
        let web = WebSettings::load(config.web_config_file.as_deref())?;
        let current = self.live.get();
        match (current.web.tls.is_some(), web.tls.is_some()) {
            (true, false) => return Err(ReloadError::TlsToggle("off")),
            (false, true) => return Err(ReloadError::TlsToggle("on")),
            _ => {}
        }
        self.core.engine().set_config(config.engine);
        self.live
            .set(current.reloaded(config.limits, Arc::new(web), Arc::new(config.slos)));
        Ok(())
    }
}

/// Refuses a change from the storage settings the service started with, `running`, to `new`
/// (none: the state is not kept). `--storage.path` overrides `storage.path`, so a file's change
/// under the flag changes nothing and passes.
///
/// # Errors
/// [`ReloadError::StartOnly`] naming the field, the running value and the new one.
fn start_only(running: Option<&Storage>, new: Option<&Storage>) -> Result<(), ReloadError> {
    let path =
        |s: Option<&Storage>| s.map_or_else(|| "none".to_owned(), |s| s.path.display().to_string());
    if path(running) != path(new) {
        return Err(ReloadError::StartOnly {
            field: new.or(running).map_or("storage.path", |s| s.field),
            old: path(running),
            new: path(new),
        });
    }
    if let (Some(running), Some(new)) = (running, new)
        && running.write_interval != new.write_interval
    {
        let text = |d| humantime::format_duration(d).to_string();
        return Err(ReloadError::StartOnly {
            field: "storage.write_interval",
            old: text(running.write_interval),
            new: text(new.write_interval),
        });
    }
    Ok(())
}

/// Installs the SIGHUP handler now (so a SIGHUP right after start-up reloads instead of
/// killing the process with the default action) and spawns a task that reloads on every SIGHUP
/// until aborted. Without a handler (non-Unix, or the OS refused) it logs and never reloads.
pub(crate) fn spawn_sighup_reloads(reloader: Arc<Reloader>) -> tokio::task::JoinHandle<()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::hangup()) {
            Ok(mut hangups) => tokio::spawn(async move {
                while hangups.recv().await.is_some() {
                    tracing::info!("SIGHUP: reloading the configuration");
                    let reloader = reloader.clone();
                    // The outcome is logged and counted by `reload`.
                    let _ = tokio::task::spawn_blocking(move || reloader.reload()).await;
                }
            }),
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGHUP; reload with POST /-/reload");
                tokio::spawn(async {})
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = reloader;
        tracing::warn!("no SIGHUP on this platform; reload with POST /-/reload");
        tokio::spawn(async {})
    }
}

#[cfg(test)]
mod tests;
