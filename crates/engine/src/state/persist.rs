//! What groups would need on their return, as records for `--storage.path` (`docs/RELIABILITY.md`,
//! "State across restarts"): for every group, live or retired, each stateful family's state (the
//! acceptance-corrected buckets') and each family's hold (what was served and the inputs behind
//! it), with the group's labels and its newest sample time.
//!
//! The file is JSON lines: a header ([`StateHeader`], the format version), then one
//! [`StateRecord`] per line, so that it is written a few groups at a time ([`Engine::state_records`]:
//! the engine lock is held per chunk, never for the whole file) and read a line at a time
//! ([`Engine::restore_record`]: memory bounded by the largest group, not the file). Format 1 (one
//! JSON document of acceptance states) is still read ([`Engine::restore_state`]).
//!
//! Restored, each record waits among the retired states, with its own newest sample time, so it
//! expires as it would have without the restart; when the group's first series arrives it resumes
//! from it exactly as after a failed scrape. A record is validated before use: finite,
//! non-negative numbers, consistent shapes, timestamps between the epoch and a day past the
//! receive clock, label names and values as the receiver accepts them.

use serde::{Deserialize, Serialize};

use super::*;
use crate::group::Retired;

/// Version of the state file format written: 3, each record's rule states by family name. A file
/// of a version this build does not read is ignored (and counted), never guessed at; formats 1
/// (one document of acceptance states, [`Engine::restore_state`]) and 2 (records with the
/// acceptance-corrected state alone) are read too ([`StateHeader::check`]).
pub const STATE_FORMAT_VERSION: u32 = 3;

/// How far past the receive clock a restored timestamp may be, ms: a day.
const MAX_FUTURE_MS: i64 = 24 * 3600 * 1000;

/// The state file's first line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateHeader {
    /// [`STATE_FORMAT_VERSION`] of the file.
    pub version: u32,
}

impl StateHeader {
    /// Whether the records after this header can be read one by one ([`StateRecord`]): formats 2
    /// and 3. Format 1 is one document, read by [`Engine::restore_state`].
    ///
    /// # Errors
    /// [`StateError::Version`] for any other version.
    pub fn check(&self) -> Result<(), StateError> {
        match self.version {
            2 | STATE_FORMAT_VERSION => Ok(()),
            found => Err(StateError::Version { found }),
        }
    }
}

impl Default for StateHeader {
    fn default() -> Self {
        StateHeader {
            version: STATE_FORMAT_VERSION,
        }
    }
}

/// One group's state, one line of the state file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateRecord {
    /// The group labels, sorted by name.
    labels: Vec<(String, String)>,
    /// What it would need on its return.
    state: Retired,
}

/// Where [`Engine::state_records`] goes on from: the next live group's slot, then the retired
/// states in order.
#[derive(Debug, Clone, Default)]
pub struct StateCursor {
    slot: usize,
    retired: usize,
    done: bool,
}

impl StateCursor {
    /// True once every group was given.
    pub fn is_done(&self) -> bool {
        self.done
    }
}

/// Format 1: one document of acceptance states.
#[derive(Debug, Deserialize)]
struct DocumentV1 {
    groups: Vec<SavedGroupV1>,
}

#[derive(Debug, Deserialize)]
struct SavedGroupV1 {
    labels: Vec<(String, String)>,
    acceptance: serde_json::Value,
}

/// Why a state file, or one of its records, was not restored.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// Not JSON of the expected shape (truncated, edited, another program's file).
    #[error("corrupt state: {0}")]
    Corrupt(String),
    /// Well-formed but impossible: a timestamp out of range, a negative or non-finite number, an
    /// inconsistent shape, a label the receiver would refuse.
    #[error("invalid state for group {labels}: {why}")]
    Invalid {
        /// The group's labels, quoted.
        labels: String,
        /// What is wrong.
        why: &'static str,
    },
    /// Written by a version of the format this build does not read.
    #[error("state format version {found}, this build reads versions 1 to {STATE_FORMAT_VERSION}")]
    Version {
        /// The version in the file.
        found: u32,
    },
}

impl Engine {
    /// Up to `max` groups' records from `cursor` on, live groups first, then the retired ones; the
    /// cursor moves past them ([`StateCursor::is_done`] once all were given). Groups with nothing to
    /// keep, and states holding a non-finite number (only from nonsensical inputs; JSON has no such
    /// number), are left out. Call it under the engine lock, a chunk at a time, and write outside it.
    pub fn state_records(&self, cursor: &mut StateCursor, max: usize) -> Vec<StateRecord> {
        let mut out = Vec::new();
        while out.len() < max {
            let Some((slot, entry)) = self.table.next_from(cursor.slot) else {
                cursor.slot = self.table.slot_count();
                break;
            };
            let state = entry.group.kept(entry.meta.newest_ts.unwrap_or(0));
            if state.keeps_anything() && state.is_valid() {
                out.push(StateRecord {
                    labels: entry.group.labels.to_vec(),
                    state,
                });
            }
            cursor.slot = slot + 1;
        }
        let retired = self.retired.iter().skip(cursor.retired);
        for (labels, state) in retired.take(max.saturating_sub(out.len())) {
            cursor.retired += 1;
            if state.is_valid() {
                out.push(StateRecord {
                    labels: labels.to_vec(),
                    state: state.clone(),
                });
            }
        }
        cursor.done =
            self.table.next_from(cursor.slot).is_none() && cursor.retired >= self.retired.len();
        out
    }

    /// Restores one record of the state file at `now_ms` (receive clock, ms): it waits among the
    /// retired states until the group's series arrive. The retired states' share of the memory
    /// budget holds: the oldest are dropped to make room.
    ///
    /// # Errors
    /// [`StateError::Invalid`] when the record is not what an engine writes; nothing is restored.
    pub fn restore_record(&mut self, record: StateRecord, now_ms: i64) -> Result<(), StateError> {
        if let Err(why) = check_record(&record, now_ms) {
            return Err(StateError::Invalid {
                labels: format!("{:?}", record.labels),
                why,
            });
        }
        let labels: GroupLabels = record.labels.into();
        self.retired.insert(labels, record.state);
        self.retired.fit();
        Ok(())
    }

    /// Restores a format 1 document (acceptance states only) at `now_ms`. Returns how many group
    /// states were restored.
    ///
    /// # Errors
    /// [`StateError::Version`] for a version other than 1, [`StateError::Corrupt`] for anything
    /// else that is not such a document, [`StateError::Invalid`] for an impossible state; nothing
    /// is restored then.
    pub fn restore_state(&mut self, document: &str, now_ms: i64) -> Result<usize, StateError> {
        let header: StateHeader =
            serde_json::from_str(document).map_err(|e| StateError::Corrupt(e.to_string()))?;
        if header.version != 1 {
            return Err(StateError::Version {
                found: header.version,
            });
        }
        let doc: DocumentV1 =
            serde_json::from_str(document).map_err(|e| StateError::Corrupt(e.to_string()))?;
        let records: Vec<StateRecord> = doc
            .groups
            .into_iter()
            .map(|g| {
                Retired::from_acceptance_v1(g.acceptance).map(|state| StateRecord {
                    labels: g.labels,
                    state,
                })
            })
            .collect::<Result<_, _>>()
            .map_err(StateError::Corrupt)?;
        if let Some((record, why)) = records
            .iter()
            .find_map(|r| check_record(r, now_ms).err().map(|why| (r, why)))
        {
            return Err(StateError::Invalid {
                labels: format!("{:?}", record.labels),
                why,
            });
        }
        let n = records.len();
        for record in records {
            self.retired.insert(record.labels.into(), record.state);
        }
        self.retired.fit();
        Ok(n)
    }
}

/// Why `record` is not what an engine writes, if it is not.
fn check_record(record: &StateRecord, now_ms: i64) -> Result<(), &'static str> {
    let latest = now_ms.saturating_add(MAX_FUTURE_MS);
    let in_range = |ts: i64| (0..=latest).contains(&ts);
    let labels = &record.labels;
    if labels.is_empty() || !labels.windows(2).all(|w| w[0].0 < w[1].0) {
        return Err("labels empty, unsorted or repeated");
    }
    if labels.iter().any(|(n, v)| {
        v.is_empty() || !protocol::labels::is_valid_label_name(n) || n.starts_with("__")
    }) {
        return Err("a label the receiver refuses");
    }
    let state = &record.state;
    if !in_range(state.newest_sample_ms) {
        return Err("newest sample time out of range");
    }
    state.validate(latest)?;
    Ok(())
}
