//! The known-series table: what the engine decided for a series, by the identity of its encoded
//! label bytes ([`SeriesKey`]), so that a series sent again with the same bytes skips label
//! decoding, validation, normalisation and routing (docs/PERFORMANCE.md, "The known-series fast
//! path").
//!
//! What an entry may hold, and why that is safe:
//! * Only series whose labels passed the label checks and normalisation under the label limits
//!   the table was filled with ([`KnownTable::limits`]); a change of those limits (a reload) empties
//!   the table. Rejected label sets are never entered: they take the full path on every request,
//!   so they are rejected and counted with their reason every time.
//! * A series read by a rule, or of a readable name beside a live group, points at its group's slot
//!   and generation: when the group leaves (stale or idle), the entry is dead and is dropped on its
//!   next lookup or at the next sweep. A series no rule reads by its name alone (84 % of what a vLLM
//!   pod sends) needs no group: its entry carries the receive time it was last seen, and leaves
//!   after `idle_timeout_ms` without a sample, as an idle group would.
//! * A hit compares both 64-bit hashes of the key (the stored `check` keeps 32 of the second's
//!   bits): two label sets are merged only if 96 bits of independent hashes collide.
//! * At most [`KnownTable::cap`] entries; past it, new series take the full path (still correct).

use hashbrown::{HashMap, HashTable};

use super::classify::RoleKey;
use protocol::SeriesKey;
use protocol::labels::LabelLimits;

/// `KnownSeries::slot` of a series no rule reads from its name alone (no group).
const NO_GROUP: u32 = u32::MAX;

/// What the engine decided for a known series: the handle [`super::Engine::known_series`] returns
/// and [`super::Engine::ingest_known`] takes. Valid while its group lives (checked on use).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownSeries {
    /// The group's slot, or [`NO_GROUP`].
    pub(super) slot: u32,
    /// The slot's generation when the entry was made (0 with [`NO_GROUP`]).
    pub(super) generation: u32,
    /// The series' role in its group, as 1 + its index in [`KnownTable::roles`]
    /// ([`KnownTable::role`]); 0: read by no rule. An index, not the 24-byte role, so that the
    /// per-request vector of look-ups stays small (12 bytes a series).
    pub(super) role: u32,
}

impl KnownSeries {
    /// A series no rule reads from its name alone.
    pub(super) const UNUSED: KnownSeries = KnownSeries {
        slot: NO_GROUP,
        generation: 0,
        role: 0,
    };

    /// True when the series belongs to no group.
    pub(super) fn groupless(self) -> bool {
        self.slot == NO_GROUP
    }
}

/// One entry, 24 bytes (a role is 24 bytes alone, so entries name it by its index in
/// [`KnownTable::roles`]).
#[derive(Debug, Clone, Copy)]
struct Entry {
    hash: u64,
    check: u32,
    slot: u32,
    /// The slot's generation; for a groupless entry, the receive time it was last seen (s).
    generation_or_seen: u32,
    /// 1 + the role's index in [`KnownTable::roles`]; 0: no role.
    role: u32,
}

/// Most distinct roles remembered (a vLLM engine's series have about 50).
const MAX_ROLES: usize = 1 << 16;

/// Receive time in whole seconds, for groupless entries (saturating into `u32`: until 2106).
fn seconds(now_ms: i64) -> u32 {
    u32::try_from(now_ms.max(0) / 1000).unwrap_or(u32::MAX)
}

/// The table; owned by the engine, under its lock.
#[derive(Debug, Default)]
pub(super) struct KnownTable {
    table: HashTable<Entry>,
    /// Every role an entry names, interned (they are few: inputs × bucket bounds).
    roles: Vec<RoleKey>,
    role_index: HashMap<RoleKey, u32>,
    /// The label limits every entry was checked under; `None` until the first use.
    limits: Option<LabelLimits>,
    /// Most entries.
    pub(crate) cap: usize,
}

impl KnownTable {
    /// An empty table of at most `cap` entries.
    pub(crate) fn new(cap: usize) -> KnownTable {
        KnownTable {
            cap,
            ..KnownTable::default()
        }
    }

    /// Entries held.
    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    /// Makes the table valid for series checked under `limits`: emptied when they differ from the
    /// limits its entries were checked under.
    pub(crate) fn use_limits(&mut self, limits: LabelLimits) {
        if self.limits != Some(limits) {
            self.table.clear();
            self.limits = Some(limits);
        }
    }

    /// The entry of `key`, if any; a groupless entry is marked seen at `now_ms`.
    pub(crate) fn get(&mut self, key: SeriesKey, now_ms: i64) -> Option<KnownSeries> {
        let check = key.check as u32;
        let entry = self
            .table
            .find_mut(key.hash, |e| e.hash == key.hash && e.check == check)?;
        if entry.slot == NO_GROUP {
            entry.generation_or_seen = seconds(now_ms);
            return Some(KnownSeries::UNUSED);
        }
        Some(KnownSeries {
            slot: entry.slot,
            generation: entry.generation_or_seen,
            role: entry.role,
        })
    }

    /// The role of a [`KnownSeries`] (its `role` field); `None`: read by no rule.
    pub(crate) fn role(&self, role: u32) -> Option<RoleKey> {
        let index = role.checked_sub(1)?;
        self.roles.get(index as usize).copied()
    }

    /// 1 + the index of `role` in `roles`, interned; `None` when [`MAX_ROLES`] are held.
    fn intern(&mut self, role: Option<RoleKey>) -> Option<u32> {
        let Some(role) = role else { return Some(0) };
        if let Some(&i) = self.role_index.get(&role) {
            return Some(i + 1);
        }
        if self.roles.len() >= MAX_ROLES {
            return None;
        }
        let i = self.roles.len() as u32;
        self.roles.push(role);
        self.role_index.insert(role, i);
        Some(i + 1)
    }

    /// Forgets `key`.
    pub(crate) fn remove(&mut self, key: SeriesKey) {
        let check = key.check as u32;
        if let Ok(found) = self
            .table
            .find_entry(key.hash, |e| e.hash == key.hash && e.check == check)
        {
            found.remove();
        }
    }

    /// Remembers `key` → the group in `slot` at `generation`, as `role` (`None`: read by no rule),
    /// or, with `slot` [`NO_GROUP`] ([`KnownSeries::UNUSED`]), a series no rule reads by its name
    /// (replacing an entry of the same key), unless the table is full or `limits` are not the ones
    /// it holds entries for.
    pub(crate) fn insert(
        &mut self,
        key: SeriesKey,
        (slot, generation, role): (u32, u32, Option<RoleKey>),
        limits: LabelLimits,
        now_ms: i64,
    ) {
        if self.limits != Some(limits) {
            return;
        }
        let check = key.check as u32;
        let Some(role) = self.intern(role) else {
            return;
        };
        let entry = Entry {
            hash: key.hash,
            check,
            slot,
            generation_or_seen: if slot == NO_GROUP {
                seconds(now_ms)
            } else {
                generation
            },
            role,
        };
        let room = self.table.len() < self.cap;
        match self
            .table
            .find_mut(key.hash, |e| e.hash == key.hash && e.check == check)
        {
            Some(e) => *e = entry,
            None if room => {
                self.table.insert_unique(key.hash, entry, |e| e.hash);
            }
            None => {}
        }
    }

    /// Drops the entries of removed groups (`live(slot, generation)` false) and groupless entries
    /// not seen since `cutoff_ms`.
    pub(crate) fn sweep(&mut self, cutoff_ms: i64, live: impl Fn(u32, u32) -> bool) {
        let cutoff = seconds(cutoff_ms);
        self.table.retain(|e| {
            if e.slot == NO_GROUP {
                e.generation_or_seen >= cutoff
            } else {
                live(e.slot, e.generation_or_seen)
            }
        });
        if self.table.len() * 4 < self.table.capacity() {
            self.table.shrink_to_fit(|e| e.hash);
        }
    }
}

#[cfg(test)]
#[path = "known_tests.rs"]
mod tests;
