//! `--storage.path`: the stateful rule's state kept across restarts (`docs/RELIABILITY.md`, "State
//! across restarts"). The file `acceptance-state.json` in the directory holds
//! [`Engine::state_document`]; it is written atomically (a temporary file in the same
//! directory, `fsync`, `rename` over the old one, `fsync` of the directory), so a crash leaves
//! either the old or the new document, never a torn one.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::telemetry::SelfMetrics;
use engine::{Engine, StateError};

/// The state file's name inside `--storage.path`.
pub(crate) const STATE_FILE: &str = "acceptance-state.json";

/// The state file of `dir`.
pub(crate) fn state_file(dir: &Path) -> PathBuf {
    dir.join(STATE_FILE)
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
