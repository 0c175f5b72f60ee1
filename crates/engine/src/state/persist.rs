//! What groups would need on their return, as records for `--storage.path` (`docs/RELIABILITY.md`,
//! "State across restarts"): for every group, live or retired, each stateful family's state (the
//! acceptance-corrected buckets') and each family's hold (what was served and the inputs behind
//! it), with the group's labels and its newest sample time.
//!
//! The file is JSON lines: a header ([`StateHeader`], the format version), then one
//! [`StateRecord`] per line, so that it is written a few groups at a time ([`Engine::state_records`]:
//! the engine lock is held per chunk, never for the whole file) and read a line at a time
//! ([`Engine::restore_record`]: memory bounded by [`MAX_STATE_RECORD_BYTES`], not the file).
//! Format 1 (one JSON document of acceptance states, on one line) is read as a stream of its
//! groups ([`read_format_1`]), so it is bounded the same way.
//!
//! Restored, each record waits among the retired states, with its own newest sample time, so it
//! expires as it would have without the restart; when the group's first series arrives it resumes
//! from it exactly as after a failed scrape. The retired states keep to their quarter of the state
//! budget as records arrive: the newest samples stay, the oldest go (and are counted by the
//! caller), so a file of any size restores within the budget. A record is validated before use:
//! finite, non-negative numbers, consistent shapes, timestamps between the epoch and a day past
//! the receive clock, label names and values as the receiver accepts them. The rule states
//! inside a record are the rules' own ([`Retired`]'s serde form): nothing here reads them.

use std::cell::Cell;
use std::io::Read;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

use super::*;
use crate::group::Retired;

/// Version of the state file format written: 3, each record's rule states by family name. A file
/// of a version this build does not read is ignored (and counted), never guessed at; formats 1
/// (one document of acceptance states, [`read_format_1`]) and 2 (records with the
/// acceptance-corrected state alone) are read too ([`StateHeader::check`]).
pub const STATE_FORMAT_VERSION: u32 = 3;

/// How far past the receive clock a restored timestamp may be, ms: a day.
const MAX_FUTURE_MS: i64 = 24 * 3600 * 1000;

/// Longest record of a state file read, bytes (a line of formats 2 and 3, a group of format 1):
/// the largest group an engine holds (64 labels of 2 KiB values, every byte escaped, and five
/// families' states and holds of 1 024 buckets) takes under 2 MiB. A longer one is not read (it
/// is skipped, or ends a format 1 file), so a restore holds at most this much of the file.
pub const MAX_STATE_RECORD_BYTES: usize = 4 << 20;

/// The state file's first line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateHeader {
    /// [`STATE_FORMAT_VERSION`] of the file.
    pub version: u32,
}

impl StateHeader {
    /// Whether the records after this header can be read one by one ([`StateRecord`]): formats 2
    /// and 3. Format 1 is one document, read by [`read_format_1`].
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

/// A group of format 1: its labels and acceptance-corrected state.
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
    /// budget holds: the states with the oldest samples are dropped to make room (this record's
    /// own when it is the oldest). Returns how many were dropped, for the caller to count; they
    /// are not counted as evicted.
    ///
    /// # Errors
    /// [`StateError::Invalid`] when the record is not what an engine writes; nothing is restored.
    pub fn restore_record(
        &mut self,
        record: StateRecord,
        now_ms: i64,
    ) -> Result<usize, StateError> {
        if let Err(why) = check_record(&record, now_ms) {
            return Err(StateError::Invalid {
                labels: format!("{:?}", record.labels),
                why,
            });
        }
        let labels: GroupLabels = record.labels.into();
        self.retired.insert(labels, record.state);
        Ok(self.retired.fit_restored())
    }
}

/// Reads a format 1 state file (one JSON document, `{"version":1,"groups":[…]}`, as the first
/// version wrote it, `version` first) from `reader` as a stream: calls `each` with every group's
/// record, or why it is not one (not a group of acceptance state), in file order, holding one at
/// a time. Returns how many groups were read.
///
/// # Errors
/// [`StateError::Version`] for a version other than 1; [`StateError::Corrupt`] for a document
/// that is not of this shape, or a group longer than [`MAX_STATE_RECORD_BYTES`]: the groups read
/// before the fault were given to `each`.
pub fn read_format_1<R: Read>(
    reader: R,
    mut each: impl FnMut(Result<StateRecord, StateError>),
) -> Result<usize, StateError> {
    let read = Cell::new(0usize);
    let mut document = DocumentV1 {
        each: &mut each,
        version: None,
        groups: 0,
        read: &read,
    };
    let counted = Counted {
        inner: reader,
        read: &read,
    };
    let mut de = serde_json::Deserializer::from_reader(counted);
    let outcome = (&mut document).deserialize(&mut de).and_then(|()| de.end());
    match (outcome, document.version) {
        (Ok(()), Some(1)) => Ok(document.groups),
        (_, Some(found)) if found != 1 => Err(StateError::Version { found }),
        (Ok(()), _) => Err(StateError::Corrupt("no version".to_owned())),
        (Err(e), _) => Err(StateError::Corrupt(e.to_string())),
    }
}

/// A reader that fails once more than [`MAX_STATE_RECORD_BYTES`] were read since `read` was
/// last set to 0 (at each group).
struct Counted<'c, R> {
    inner: R,
    read: &'c Cell<usize>,
}

impl<R: Read> Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.read.get() > MAX_STATE_RECORD_BYTES {
            return Err(std::io::Error::other(format!(
                "a group longer than {MAX_STATE_RECORD_BYTES} bytes"
            )));
        }
        let n = self.inner.read(buf)?;
        self.read.set(self.read.get() + n);
        Ok(n)
    }
}

/// The format 1 document being read: its version, then its groups one by one.
struct DocumentV1<'a, F> {
    each: &'a mut F,
    version: Option<u32>,
    groups: usize,
    read: &'a Cell<usize>,
}

impl<'de, F: FnMut(Result<StateRecord, StateError>)> DeserializeSeed<'de>
    for &mut DocumentV1<'_, F>
{
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_map(self)
    }
}

impl<'de, F: FnMut(Result<StateRecord, StateError>)> Visitor<'de> for &mut DocumentV1<'_, F> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a state document of format 1")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "version" => {
                    let version: u32 = map.next_value()?;
                    self.version = Some(version);
                    if version != 1 {
                        return Err(de::Error::custom("not format 1"));
                    }
                }
                "groups" if self.version == Some(1) => map.next_value_seed(GroupsV1(&mut *self))?,
                "groups" => return Err(de::Error::custom("groups before the version")),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// The `groups` array of a format 1 document.
struct GroupsV1<'d, 'a, F>(&'d mut DocumentV1<'a, F>);

impl<'de, F: FnMut(Result<StateRecord, StateError>)> DeserializeSeed<'de> for GroupsV1<'_, '_, F> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_seq(self)
    }
}

impl<'de, F: FnMut(Result<StateRecord, StateError>)> Visitor<'de> for GroupsV1<'_, '_, F> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the groups of a state document of format 1")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.0.read.set(0);
        while let Some(group) = seq.next_element::<SavedGroupV1>()? {
            self.0.read.set(0);
            self.0.groups += 1;
            let record = Retired::from_acceptance_v1(group.acceptance)
                .map(|state| StateRecord {
                    labels: group.labels,
                    state,
                })
                .map_err(StateError::Corrupt);
            (self.0.each)(record);
        }
        Ok(())
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
