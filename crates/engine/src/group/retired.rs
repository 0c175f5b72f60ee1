//! A group that leaves and comes back (docs/ENGINE.md, "Groups that leave and come back"): what
//! it leaves behind when it is removed ([`Retired`]: each stateful family's state and each
//! family's hold), how it resumes from that, and the state it keeps in place for
//! `--storage.path`. A child of `group.rs`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::*;
use crate::rules::RuleState;

/// What a retired group leaves for its return ([`Group::retire`], [`Group::resume`]).
///
/// Stored (`--storage.path`) with every family's entry under the family's name, so a file
/// outlives a change of the registry's order, and a family since removed is dropped on reading.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(into = "Stored", try_from = "Stored")]
pub(crate) struct Retired {
    /// Each stateful family's state behind its last output, by [`Family::index`].
    pub(crate) states: [Option<RuleState>; FAMILIES],
    /// Each family's hold (what was served and the inputs behind it), by [`Family::index`].
    pub(crate) holds: [Option<Box<Hold>>; FAMILIES],
    /// The newest sample timestamp the group had, ms since the epoch.
    pub(crate) newest_sample_ms: i64,
}

/// [`Retired`] as the state file holds it. State format 2 had the acceptance-corrected state
/// alone, as `acceptance`; format 3 has `states` by family name (`docs/RELIABILITY.md`, "State
/// across restarts").
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Stored {
    #[serde(default, skip_serializing)]
    acceptance: Option<serde_json::Value>,
    #[serde(default)]
    states: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    holds: BTreeMap<String, Hold>,
    newest_sample_ms: i64,
}

impl From<Retired> for Stored {
    fn from(retired: Retired) -> Stored {
        let by_name = |i: usize| Family::ALL[i].name().to_owned();
        Stored {
            acceptance: None,
            states: (0..FAMILIES)
                .filter_map(|i| retired.states[i].as_ref().map(|s| (by_name(i), s.save())))
                .collect(),
            holds: (0..FAMILIES)
                .filter_map(|i| retired.holds[i].as_deref().map(|h| (by_name(i), h.clone())))
                .collect(),
            newest_sample_ms: retired.newest_sample_ms,
        }
    }
}

impl TryFrom<Stored> for Retired {
    type Error = String;

    fn try_from(mut stored: Stored) -> Result<Retired, String> {
        if let Some(acceptance) = stored.acceptance.take() {
            let name = Family::AcceptanceCorrectedItl.name().to_owned();
            stored.states.entry(name).or_insert(acceptance);
        }
        let mut retired = Retired {
            newest_sample_ms: stored.newest_sample_ms,
            ..Retired::default()
        };
        for (name, value) in stored.states {
            let Some(family) = Family::by_name(&name) else {
                continue;
            };
            if let Evaluation::Stateful(rule) = family.spec().evaluation {
                retired.states[family.index()] = Some((rule.load)(value)?);
            }
        }
        for (name, hold) in stored.holds {
            if let Some(family) = Family::by_name(&name) {
                retired.holds[family.index()] = Some(Box::new(hold));
            }
        }
        Ok(retired)
    }
}

impl Retired {
    /// What a format 1 state file kept of a group: its acceptance-corrected state alone, whose
    /// frame time stands for the group's newest sample.
    ///
    /// # Errors
    /// The state does not read as one.
    pub(crate) fn from_acceptance_v1(acceptance: serde_json::Value) -> Result<Retired, String> {
        let newest_sample_ms = acceptance
            .get("ts")
            .and_then(serde_json::Value::as_i64)
            .unwrap_or(0);
        Retired::try_from(Stored {
            acceptance: Some(acceptance),
            states: BTreeMap::new(),
            holds: BTreeMap::new(),
            newest_sample_ms,
        })
    }

    /// Heap bytes held, for the engine's memory accounting (its labels are counted by the holder).
    pub(crate) fn heap_bytes(&self) -> usize {
        let states: usize = self
            .states
            .iter()
            .flatten()
            .map(RuleState::heap_bytes)
            .sum();
        let holds: usize = self
            .holds
            .iter()
            .flatten()
            .map(|h| size_of::<Hold>() + h.heap_bytes())
            .sum();
        size_of::<Retired>() + states + holds
    }

    /// True when it holds something a returning group would use.
    pub(crate) fn keeps_anything(&self) -> bool {
        self.states.iter().any(Option::is_some) || self.holds.iter().any(Option::is_some)
    }

    /// Why the state is not one an engine writes, if it is not (checked on a restored state): a
    /// rule state's own checks ([`crate::rules::stateful::FrameState::validate`], timestamps up to
    /// `latest_ms`), a hold's numbers not finite or its inputs unsorted, a negative count.
    ///
    /// # Errors
    /// What is wrong, in a few words.
    pub(crate) fn validate(&self, latest_ms: i64) -> Result<(), &'static str> {
        if !self.holds.iter().flatten().all(|h| h.is_valid()) {
            return Err("a non-finite number or an inconsistent shape");
        }
        for state in self.states.iter().flatten() {
            state.validate(latest_ms)?;
        }
        if self.holds.iter().flatten().any(|h| !h.is_non_negative()) {
            return Err("a negative count in a hold");
        }
        Ok(())
    }

    /// True when the state could be restored as written ([`Retired::validate`] with no bound on
    /// its timestamps): a live group whose inputs were nonsensical may hold a number JSON cannot
    /// write, and is then left out of the state file.
    pub(crate) fn is_valid(&self) -> bool {
        self.validate(i64::MAX).is_ok()
    }
}

impl Group {
    /// What the group leaves behind when it is removed while its target may come back (every
    /// series ended in a staleness marker, or it missed its scrapes): each stateful family's state
    /// behind its output and each family's hold, so that the same group, back after a failed
    /// scrape or a sender's restart, continues its states and serves nothing below what it
    /// served (docs/ENGINE.md, "Groups that leave and come back"). `newest_sample_ms` is the
    /// newest sample timestamp the group had (ms): the state expires by sample time.
    pub(crate) fn retire(&mut self, newest_sample_ms: i64) -> Retired {
        Retired {
            states: std::array::from_fn(|i| {
                self.slots[i]
                    .accumulator
                    .as_mut()
                    .and_then(|a| a.take_latest())
            }),
            holds: std::array::from_fn(|i| self.slots[i].hold.take()),
            newest_sample_ms,
        }
    }

    /// What [`Group::retire`] would hand over now, left in place (for `--storage.path`); the
    /// group's newest sample was at `newest_sample_ms`.
    pub(crate) fn kept(&self, newest_sample_ms: i64) -> Retired {
        Retired {
            states: std::array::from_fn(|i| {
                self.slots[i]
                    .accumulator
                    .as_ref()
                    .and_then(|a| a.latest().cloned())
            }),
            holds: std::array::from_fn(|i| self.slots[i].hold.clone()),
            newest_sample_ms,
        }
    }

    /// Continues from what the same group left when it was retired ([`Group::retire`]), or what a
    /// restored state file held: the next complete frame adds its interval to each stateful
    /// family's state (or restarts it if vLLM's counters reset meanwhile), and each family's
    /// output is held at what was served unless one of its inputs fell. A failed scrape makes
    /// Prometheus write staleness markers for every series of the target, so without this every
    /// failed scrape would re-seed the states and lower a held counter, which Prometheus reads as
    /// a counter reset.
    pub(crate) fn resume(&mut self, retired: Retired) {
        for ((slot, state), hold) in self.slots.iter_mut().zip(retired.states).zip(retired.holds) {
            if let Some(state) = state {
                slot.accumulator.get_or_insert_default().resume(state);
            }
            if hold.is_some() {
                slot.hold = hold;
            }
        }
    }
}
