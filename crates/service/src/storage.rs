//! `--storage.path`: the stateful rule's state kept across restarts (`docs/RELIABILITY.md`, "State
//! across restarts"). The file `acceptance-state.json` in the directory holds
//! [`Engine::state_document`]; it is written atomically (a temporary file in the same
//! directory, `fsync`, `rename` over the old one, `fsync` of the directory), so a crash leaves
//! either the old or the new document, never a torn one.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::Config;
use crate::telemetry::SelfMetrics;
use engine::{Engine, StateError};

/// The state file's name inside `--storage.path`.
pub(crate) const STATE_FILE: &str = "acceptance-state.json";

/// The state file of `dir`.
pub(crate) fn state_file(dir: &Path) -> PathBuf {
    dir.join(STATE_FILE)
}

/// A `--storage.path` (or `storage.path`) that cannot hold the state file, found at start.
#[derive(Debug, thiserror::Error)]
#[error("{field} {}: cannot keep the state file there: {source}", path.display())]
pub struct StorageUnusable {
    /// `--storage.path` or `storage.path`, whichever named the directory.
    field: &'static str,
    /// The directory, or the state file in it when that is what is wrong.
    path: PathBuf,
    /// The I/O error.
    source: std::io::Error,
}

/// Checks at start that the storage directory of `config`, if any, can hold the state file, so
/// that a bad path stops the process then (`main` exits with status 2) rather than failing every
/// write afterwards: the directory is created if missing (as the writes would), the temporary
/// file the writes use is created and removed, and the state file's name must not be a directory.
///
/// # Errors
/// [`StorageUnusable`] naming the flag or field, the path and the I/O error: a path that is a
/// regular file or lies under one, a directory that cannot be created or written.
pub fn check_usable(config: &Config) -> Result<(), StorageUnusable> {
    let Some(storage) = &config.storage else {
        return Ok(());
    };
    let unusable = |path: &Path, source| StorageUnusable {
        field: storage.field,
        path: path.to_owned(),
        source,
    };
    let dir = &storage.path;
    std::fs::create_dir_all(dir).map_err(|e| unusable(dir, e))?;
    let tmp = dir.join(format!("{STATE_FILE}.tmp"));
    std::fs::File::create(&tmp).map_err(|e| unusable(dir, e))?;
    std::fs::remove_file(&tmp).map_err(|e| unusable(dir, e))?;
    let path = state_file(dir);
    match std::fs::symlink_metadata(&path) {
        // The writes rename a new file over it, which fails on a directory.
        Ok(meta) if meta.is_dir() => Err(unusable(
            &path,
            std::io::Error::other("is a directory, not the state file"),
        )),
        _ => Ok(()),
    }
}

/// Restores the state file of `dir` into `engine` at `now_ms` (receive clock). A missing file is a
/// fresh start; an unreadable, corrupt or other-version file is ignored with a warning and counted
/// in `vllm_corrector_state_loads_ignored_total{reason}`. Returns the groups restored.
pub(crate) fn load(dir: &Path, engine: &mut Engine, now_ms: i64, metrics: &SelfMetrics) -> usize {
    let path = state_file(dir);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            tracing::info!(path = %path.display(), "no state file: the acceptance-corrected buckets start afresh");
            return 0;
        }
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "state file unreadable: ignored");
            metrics.ops.storage.load_ignored("unreadable");
            return 0;
        }
    };
    match engine.restore_state(&text, now_ms) {
        Ok(groups) => {
            tracing::info!(path = %path.display(), groups, "state restored");
            groups
        }
        Err(e) => {
            let reason = match e {
                StateError::Version { .. } => "version",
                StateError::Corrupt(_) => "corrupt",
            };
            tracing::warn!(path = %path.display(), error = %e, "state file ignored: the acceptance-corrected buckets start afresh");
            metrics.ops.storage.load_ignored(reason);
            0
        }
    }
}

/// Writes `document` as the state file of `dir`, atomically.
///
/// # Errors
/// The I/O error of creating, writing, syncing or renaming the file; the old file is then intact.
pub(crate) fn write_atomically(dir: &Path, document: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let path = state_file(dir);
    let tmp = dir.join(format!("{STATE_FILE}.tmp"));
    {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(document.as_bytes())?;
        file.sync_all()?;
    }
    std::fs::rename(&tmp, &path)?;
    std::fs::File::open(dir)?.sync_all()
}

/// Serialises the engine's state under its lock, then writes it off the lock (on a blocking
/// thread); a failure is logged and counted in `vllm_corrector_state_write_failures_total`.
/// Returns true when the state file was written.
pub(crate) async fn save(
    dir: PathBuf,
    engine: Arc<std::sync::Mutex<Engine>>,
    metrics: Arc<SelfMetrics>,
) -> bool {
    let document = engine
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .state_document();
    let written = tokio::task::spawn_blocking(move || {
        write_atomically(&dir, &document).map_err(|e| (dir, e))
    })
    .await;
    match written {
        Ok(Ok(())) => true,
        Ok(Err((dir, e))) => {
            tracing::warn!(path = %state_file(&dir).display(), error = %e, "cannot write the state file");
            metrics.ops.storage.write_failed();
            false
        }
        Err(e) => {
            tracing::warn!(error = %e, "state write task failed");
            metrics.ops.storage.write_failed();
            false
        }
    }
}

#[cfg(test)]
#[path = "storage_tests.rs"]
mod tests;
