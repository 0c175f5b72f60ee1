//! `--storage.path`: what groups need on their return, kept across restarts (`docs/RELIABILITY.md`,
//! "State across restarts"). The file `acceptance-state.json` in the directory is JSON lines: a
//! header ([`engine::StateHeader`]) then one [`engine::StateRecord`] per group. It is written a
//! chunk of groups at a time (the engine lock is held per chunk of `CHUNK_GROUPS`, never for the
//! whole file, so writers do not stall while it is saved) into a temporary file in the same
//! directory, then `fsync`, `rename` over the old one, `fsync` of the directory: a crash leaves
//! either the old or the new file, never a torn one; one write at a time (a periodic write still
//! running when the last one starts, at shutdown, is waited for). It is read a line at a time, a
//! line of at most [`engine::MAX_STATE_RECORD_BYTES`] (a longer one is skipped and counted), and
//! a format 1 file as a stream of its groups, so a restore holds one record of the file at a time
//! and the retired states it fills keep to their share of the budget, whatever the file's size:
//! the newest samples stay, the oldest are dropped and counted (docs/RELIABILITY.md, "State
//! across restarts").

use std::io::{BufRead, BufReader, BufWriter, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

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

/// What [`load`] did with the records of a state file.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Loaded {
    /// Records read and restored (some may have been dropped since, counted in `dropped`).
    pub(crate) restored: usize,
    /// Records not restored: invalid, corrupt or too long.
    pub(crate) ignored: usize,
    /// Restored states dropped, the oldest samples first, to keep the retired states within
    /// their share of the budget (`reason="memory_budget"`).
    pub(crate) dropped: usize,
}

/// One line of a state file, read into `line` up to its end or [`engine::MAX_STATE_RECORD_BYTES`].
enum Line {
    /// A line (without its newline) is in `line`.
    Read,
    /// The line was longer: skipped to its end, `line` empty.
    TooLong,
    /// The file ended.
    End,
}

/// Reads the next line of `reader` into `line` (cleared first), keeping at most
/// [`engine::MAX_STATE_RECORD_BYTES`] of it in memory.
fn next_line(reader: &mut impl BufRead, line: &mut Vec<u8>) -> std::io::Result<Line> {
    line.clear();
    let mut too_long = false;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(match (too_long, line.is_empty()) {
                (true, _) => Line::TooLong,
                (false, true) => Line::End,
                (false, false) => Line::Read,
            });
        }
        let (part, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if !too_long && line.len() + part.len() <= engine::MAX_STATE_RECORD_BYTES {
            line.extend_from_slice(part);
        } else {
            too_long = true;
            line.clear();
        }
        let used = done.unwrap_or(part.len());
        reader.consume(used);
        if done.is_some() {
            return Ok(if too_long { Line::TooLong } else { Line::Read });
        }
    }
}

/// Restores the state file of `dir` into `engine` at `now_ms` (receive clock), a record at a
/// time. A missing file is a fresh start; an unreadable, corrupt or other-version file is ignored
/// with a warning and counted in `vllm_corrector_state_loads_ignored_total{reason}`, and so is a
/// record that is invalid, corrupt or longer than [`engine::MAX_STATE_RECORD_BYTES`]
/// (`too_large`; the others are restored), and a restored state dropped to keep the retired
/// states within their share of the budget, the oldest samples first (`memory_budget`).
pub(crate) fn load(dir: &Path, engine: &mut Engine, now_ms: i64, metrics: &SelfMetrics) -> Loaded {
    let path = state_file(dir);
    let counts = &metrics.ops.storage;
    let ignored = |why: &'static str, error: &dyn std::fmt::Display| {
        tracing::warn!(path = %path.display(), error = %error, "state file ignored: groups start afresh");
        counts.load_ignored(why);
    };
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            tracing::info!(path = %path.display(), "no state file: groups start afresh");
            return Loaded::default();
        }
        Err(e) => {
            ignored("unreadable", &e);
            return Loaded::default();
        }
    };
    let mut reader = BufReader::with_capacity(64 << 10, file);
    let mut loaded = Loaded::default();
    let mut first_invalid = true;
    let mut record =
        |loaded: &mut Loaded, engine: &mut Engine, r: Result<StateRecord, StateError>| match r
            .and_then(|r| engine.restore_record(r, now_ms))
        {
            Ok(dropped) => {
                loaded.restored += 1;
                loaded.dropped += dropped;
                counts.load_ignored_n("memory_budget", dropped as u64);
            }
            Err(e) => {
                if first_invalid {
                    tracing::warn!(path = %path.display(), error = %e, "state record ignored");
                    first_invalid = false;
                }
                loaded.ignored += 1;
                counts.load_ignored(reason(&e));
            }
        };
    let mut line = Vec::new();
    // Formats 2 and 3 start with a header line; format 1 is one document on one line.
    let header = match next_line(&mut reader, &mut line) {
        Ok(Line::Read) => serde_json::from_slice::<StateHeader>(&line).ok(),
        Ok(Line::TooLong) => None,
        Ok(Line::End) => {
            ignored("corrupt", &"empty file");
            return loaded;
        }
        Err(e) => {
            ignored("unreadable", &e);
            return loaded;
        }
    };
    match header {
        Some(header) if header.version != 1 => {
            if let Err(e) = header.check() {
                ignored("version", &e);
                return loaded;
            }
            loop {
                match next_line(&mut reader, &mut line) {
                    Ok(Line::Read) => {
                        let r = serde_json::from_slice::<StateRecord>(&line)
                            .map_err(|e| StateError::Corrupt(e.to_string()));
                        record(&mut loaded, engine, r);
                    }
                    Ok(Line::TooLong) => {
                        tracing::warn!(path = %path.display(), max = engine::MAX_STATE_RECORD_BYTES, "state record longer than the longest a group writes: ignored");
                        loaded.ignored += 1;
                        counts.load_ignored("too_large");
                    }
                    Ok(Line::End) => break,
                    Err(e) => {
                        ignored("unreadable", &e);
                        break;
                    }
                }
            }
        }
        _ => {
            drop(line);
            if let Err(e) = reader.rewind() {
                ignored("unreadable", &e);
                return loaded;
            }
            let read = engine::read_format_1(reader, |r| record(&mut loaded, engine, r));
            if let Err(e) = read {
                ignored(reason(&e), &e);
            }
        }
    }
    tracing::info!(path = %path.display(), groups = loaded.restored, ignored = loaded.ignored, dropped_for_budget = loaded.dropped, "state restored");
    loaded
}

/// Writes the engine's state as the state file of `dir`, atomically, a chunk of groups per hold
/// of the engine lock.
///
/// # Errors
/// The I/O error of creating, writing, syncing or renaming the file; the old file is then intact.
pub(crate) fn write_atomically(dir: &Path, core: &Core) -> std::io::Result<()> {
    // Two writes at once would share the temporary file: the periodic one still running when
    // the shutdown's starts (aborting its task does not stop its blocking thread).
    static WRITING: Mutex<()> = Mutex::new(());
    let _one_at_a_time = WRITING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
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
