//! `--storage.path`: what groups need on their return, kept across restarts (`docs/RELIABILITY.md`,
//! "State across restarts"). The file `acceptance-state.json` in the directory is JSON lines: a
//! header ([`engine::StateHeader`]) then one [`engine::StateRecord`] per group. It is written a
//! chunk of groups at a time (the engine lock is held per chunk of `CHUNK_GROUPS`, never for the
//! whole file, so writers do not stall while it is saved) into a temporary file in the same
//! directory, then `fsync`, `rename` over the old one, `fsync` of the directory: a crash leaves
//! either the old or the new file, never a torn one. It is read a line at a time, and a file larger
//! than the engine's state budget is not read at all, so a restore never needs more memory than
//! the state it restores.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::Config;
use crate::core::Core;
use crate::telemetry::SelfMetrics;
use engine::{Engine, StateCursor, StateError, StateHeader, StateRecord};

/// The state file's name inside `--storage.path`.
pub(crate) const STATE_FILE: &str = "acceptance-state.json";

/// Groups written per hold of the engine lock.
const CHUNK_GROUPS: usize = 256;

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

/// Why a state file was not (wholly) restored; the `reason` label of
/// `vllm_corrector_state_loads_ignored_total`.
fn reason(error: &StateError) -> &'static str {
    match error {
        StateError::Version { .. } => "version",
        StateError::Corrupt(_) => "corrupt",
        StateError::Invalid { .. } => "invalid",
    }
}

/// Restores the state file of `dir` into `engine` at `now_ms` (receive clock). A missing file is a
/// fresh start; an unreadable, oversized, corrupt or other-version file is ignored with a warning
/// and counted in `vllm_corrector_state_loads_ignored_total{reason}`, and so is an invalid record
/// (the others are restored). Returns the groups restored.
pub(crate) fn load(dir: &Path, engine: &mut Engine, now_ms: i64, metrics: &SelfMetrics) -> usize {
    let path = state_file(dir);
    let ignored = |why: &'static str, error: &dyn std::fmt::Display| {
        tracing::warn!(path = %path.display(), error = %error, "state file ignored: groups start afresh");
        metrics.ops.storage.load_ignored(why);
        0
    };
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            tracing::info!(path = %path.display(), "no state file: groups start afresh");
            return 0;
        }
        Err(e) => return ignored("unreadable", &e),
    };
    let budget = engine.config().max_state_bytes;
    match file.metadata().map(|m| m.len()) {
        Ok(len) if len > budget as u64 => {
            let why = format!("{len} bytes, over the state budget of {budget} bytes");
            return ignored("too_large", &why);
        }
        Ok(_) => {}
        Err(e) => return ignored("unreadable", &e),
    }
    let mut lines = BufReader::new(file).lines();
    let first = match lines.next() {
        Some(Ok(line)) => line,
        Some(Err(e)) => return ignored("unreadable", &e),
        None => return ignored("corrupt", &"empty file"),
    };
    let header: StateHeader = match serde_json::from_str(&first) {
        Ok(header) => header,
        Err(e) => return ignored("corrupt", &e),
    };
    if header.version == 1 {
        // Format 1: the header is the whole document, on its one line.
        return match engine.restore_state(&first, now_ms) {
            Ok(groups) => groups,
            Err(e) => ignored(reason(&e), &e),
        };
    }
    if let Err(e) = header.check() {
        return ignored("version", &e);
    }
    let (mut restored, mut invalid) = (0, 0);
    for line in lines {
        let record = match line {
            Ok(line) => serde_json::from_str::<StateRecord>(&line)
                .map_err(|e| StateError::Corrupt(e.to_string())),
            Err(e) => return restored.max(ignored("unreadable", &e)),
        };
        match record.and_then(|r| engine.restore_record(r, now_ms)) {
            Ok(()) => restored += 1,
            Err(e) => {
                if invalid == 0 {
                    tracing::warn!(path = %path.display(), error = %e, "state record ignored");
                }
                invalid += 1;
                metrics.ops.storage.load_ignored(reason(&e));
            }
        }
    }
    tracing::info!(path = %path.display(), groups = restored, ignored = invalid, "state restored");
    restored
}

/// Writes the engine's state as the state file of `dir`, atomically, a chunk of groups per hold
/// of the engine lock.
///
/// # Errors
/// The I/O error of creating, writing, syncing or renaming the file; the old file is then intact.
pub(crate) fn write_atomically(dir: &Path, core: &Core) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let path = state_file(dir);
    let tmp = dir.join(format!("{STATE_FILE}.tmp"));
    {
        let mut out = BufWriter::new(std::fs::File::create(&tmp)?);
        serde_json::to_writer(&mut out, &StateHeader::default())?;
        out.write_all(b"\n")?;
        let mut cursor = StateCursor::default();
        while !cursor.is_done() {
            let records = core.engine().state_records(&mut cursor, CHUNK_GROUPS);
            for record in &records {
                serde_json::to_writer(&mut out, record)?;
                out.write_all(b"\n")?;
            }
        }
        out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    }
    std::fs::rename(&tmp, &path)?;
    std::fs::File::open(dir)?.sync_all()
}

/// Writes the engine's state ([`write_atomically`], on a blocking thread); a failure is logged and
/// counted in `vllm_corrector_state_write_failures_total`. Returns true when the state file was
/// written.
pub(crate) async fn save(dir: PathBuf, core: Arc<Core>) -> bool {
    let written = {
        let core = Arc::clone(&core);
        tokio::task::spawn_blocking(move || write_atomically(&dir, &core).map_err(|e| (dir, e)))
            .await
    };
    let metrics = &core.metrics;
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
mod tests;
