//! A group that leaves and comes back (docs/ENGINE.md, "Groups that leave and come back"): what
//! it leaves behind when it is removed ([`Retired`]: the acceptance-corrected state and each
//! family's hold), how it resumes from that, and the state it keeps in place for
//! `--storage.path`. A child of `group.rs`.

use super::*;

/// What a retired group leaves for its return ([`Group::retire`], [`Group::resume`]).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Retired {
    /// The acceptance-corrected state behind the last output, if any.
    pub(crate) acceptance: Option<Committed>,
    /// Each family's hold (what was served and the inputs behind it), by [`Family::index`]; stored
    /// by family name, so a file outlives a change of the registry's order.
    #[serde(with = "holds_by_name")]
    pub(crate) holds: [Option<Box<Hold>>; FAMILIES],
    /// The newest sample timestamp the group had, ms since the epoch.
    pub(crate) newest_sample_ms: i64,
}

impl Retired {
    /// Heap bytes held, for the engine's memory accounting (its labels are counted by the holder).
    pub(crate) fn heap_bytes(&self) -> usize {
        let acceptance = self.acceptance.as_ref().map_or(0, Committed::heap_bytes);
        let holds: usize = self
            .holds
            .iter()
            .flatten()
            .map(|h| size_of::<Hold>() + h.heap_bytes())
            .sum();
        size_of::<Retired>() + acceptance + holds
    }

    /// True when it holds something a returning group would use.
    pub(crate) fn keeps_anything(&self) -> bool {
        self.acceptance.is_some() || self.holds.iter().any(Option::is_some)
    }

    /// True when every number is finite and every shape consistent, as an engine writes it
    /// (checked on a restored state).
    pub(crate) fn is_valid(&self) -> bool {
        self.acceptance
            .as_ref()
            .is_none_or(|c| c.is_finite() && c.is_consistent())
            && self.holds.iter().flatten().all(|h| h.is_valid())
    }
}

/// [`Retired::holds`] as a map from family name to hold; a name no family has is dropped on
/// reading (a family since removed from the registry).
mod holds_by_name {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::{FAMILIES, Family, Hold};

    pub(super) fn serialize<S: Serializer>(
        holds: &[Option<Box<Hold>>; FAMILIES],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let map: BTreeMap<&str, &Hold> = Family::ALL
            .iter()
            .filter_map(|f| holds[f.index()].as_deref().map(|h| (f.name(), h)))
            .collect();
        map.serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<[Option<Box<Hold>>; FAMILIES], D::Error> {
        let mut map: BTreeMap<String, Hold> = BTreeMap::deserialize(d)?;
        Ok(std::array::from_fn(|i| {
            map.remove(Family::ALL[i].name()).map(Box::new)
        }))
    }
}

impl Group {
    /// What the group leaves behind when it is removed while its target may come back (every
    /// series ended in a staleness marker, or it missed its scrapes): the acceptance-corrected
    /// state behind its output and each family's hold, so that the same group, back after a failed
    /// scrape or a sender's restart, continues its buckets and serves nothing below what it
    /// served (docs/ENGINE.md, "Groups that leave and come back"). `newest_sample_ms` is the
    /// newest sample timestamp the group had (ms): the state expires by sample time.
    pub(crate) fn retire(&mut self, newest_sample_ms: i64) -> Retired {
        Retired {
            acceptance: self.acceptance.take_latest(),
            holds: std::array::from_fn(|i| self.slots[i].hold.take()),
            newest_sample_ms,
        }
    }

    /// What [`Group::retire`] would hand over now, left in place (for `--storage.path`): the
    /// acceptance-corrected state behind the current output and each family's hold; the group's
    /// newest sample was at `newest_sample_ms`.
    pub(crate) fn kept(&self, newest_sample_ms: i64) -> Retired {
        Retired {
            acceptance: self.acceptance.latest().cloned(),
            holds: std::array::from_fn(|i| self.slots[i].hold.clone()),
            newest_sample_ms,
        }
    }

    /// Continues from what the same group left when it was retired ([`Group::retire`]), or what a
    /// restored state file held: the next complete frame adds its interval to the
    /// acceptance-corrected state (or restarts the buckets if vLLM's counters reset meanwhile),
    /// and each family's output is held at what was served unless one of its inputs fell. A
    /// failed scrape makes Prometheus write staleness markers for every series of the target, so
    /// without this every failed scrape would re-seed the buckets and lower a held counter, which
    /// Prometheus reads as a counter reset.
    pub(crate) fn resume(&mut self, retired: Retired) {
        if let Some(state) = retired.acceptance {
            self.acceptance.resume(state);
        }
        for (slot, hold) in self.slots.iter_mut().zip(retired.holds) {
            if hold.is_some() {
                slot.hold = hold;
            }
        }
    }
}
