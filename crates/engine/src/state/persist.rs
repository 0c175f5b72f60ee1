//! The stateful rule's state as a document, for `--storage.path` (`docs/RELIABILITY.md`, "State
//! across restarts"): every group's acceptance-corrected state ([`Committed`]: the newest frame's
//! timestamp, its raw cumulative inputs, the ITL bounds and the accumulated buckets), live groups
//! and groups retired for staleness alike, keyed by the group's labels.
//!
//! Restored, each state waits among the retired ones ([`Engine`]'s `retired`, with the restore
//! time as its removal time, so it expires after `engine.idle_timeout` like any retired state);
//! when the group's first series arrives it resumes from it exactly as after a failed scrape, so
//! the buckets continue as if the process had never stopped.

use serde::{Deserialize, Serialize};

use super::*;

/// Version of the state document. A document of another version is ignored (and counted), never
/// guessed at.
pub const STATE_FORMAT_VERSION: u32 = 1;

/// The state document.
#[derive(Debug, Serialize, Deserialize)]
struct StateDocument {
    /// [`STATE_FORMAT_VERSION`].
    version: u32,
    groups: Vec<SavedGroup>,
}

#[derive(Debug, Serialize, Deserialize)]
struct SavedGroup {
    /// The group labels, sorted by name.
    labels: Vec<(String, String)>,
    acceptance: Committed,
}

/// Why a state document was not restored.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// Not JSON of the expected shape (truncated, edited, another program's file).
    #[error("corrupt state document: {0}")]
    Corrupt(String),
    /// Written by a version of the format this build does not read.
    #[error(
        "state document format version {found}, this build reads version {STATE_FORMAT_VERSION}"
    )]
    Version {
        /// The version in the document.
        found: u32,
    },
}

impl Engine {
    /// The acceptance-corrected state of every group (live and retired) as a JSON document of
    /// [`STATE_FORMAT_VERSION`]. A state holding a non-finite number (only from nonsensical
    /// inputs; JSON has no such number) is left out.
    pub fn state_document(&self) -> String {
        let live = self
            .live_groups()
            .filter_map(|g| g.acceptance_snapshot().map(|c| (&g.labels[..], c)));
        let retired = self
            .retired
            .iter()
            .map(|(labels, (c, _))| (labels.as_slice(), c));
        let groups: Vec<SavedGroup> = live
            .chain(retired)
            .filter(|(_, c)| c.is_finite())
            .map(|(labels, c)| SavedGroup {
                labels: labels.to_vec(),
                acceptance: c.clone(),
            })
            .collect();
        serde_json::to_string(&StateDocument {
            version: STATE_FORMAT_VERSION,
            groups,
        })
        .unwrap_or_else(|_| String::new())
    }

    /// Restores a document from [`Engine::state_document`]: each group's state waits to be
    /// resumed when the group's series arrive (within `engine.idle_timeout` of `now_ms`, the
    /// receive clock in ms). Returns how many group states were restored.
    ///
    /// # Errors
    /// [`StateError::Version`] for another format version, [`StateError::Corrupt`] for anything
    /// else that is not such a document; nothing is restored then.
    pub fn restore_state(&mut self, document: &str, now_ms: i64) -> Result<usize, StateError> {
        #[derive(Deserialize)]
        struct Version {
            version: u32,
        }
        let version: Version =
            serde_json::from_str(document).map_err(|e| StateError::Corrupt(e.to_string()))?;
        if version.version != STATE_FORMAT_VERSION {
            return Err(StateError::Version {
                found: version.version,
            });
        }
        let doc: StateDocument =
            serde_json::from_str(document).map_err(|e| StateError::Corrupt(e.to_string()))?;
        if let Some(bad) = doc.groups.iter().find(|g| !g.acceptance.is_consistent()) {
            return Err(StateError::Corrupt(format!(
                "inconsistent state for group {:?}",
                bad.labels
            )));
        }
        let n = doc.groups.len();
        for g in doc.groups {
            self.retired.insert(g.labels, (g.acceptance, now_ms));
        }
        Ok(n)
    }
}
