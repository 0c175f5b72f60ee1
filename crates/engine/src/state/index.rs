//! The series index: what the engine decided for a series, by its [`SeriesKey`], so that a series
//! seen before skips decoding, validation, normalisation and routing (docs/ENGINE.md, "The series
//! index").
//!
//! One table for every key kind: the key of a series' encoded label bytes (RW 1.0) and the key of
//! its decoded label text (RW 2.0, labels that do not lead their message, and [`Engine::ingest`]).
//! Both are two independent 64-bit hashes ([`protocol::independent_hashers`]); an entry keeps the
//! first and 32 bits of the second, so two label sets are merged only if 96 bits of independent
//! hashes collide (about n² / 2⁹⁷ for n series: 10⁻¹⁷ at a million).
//!
//! What an entry may hold, and why that is safe:
//! * Only series whose labels passed the receiver's label checks under the rules of one *epoch*
//!   (an opaque number the caller raises when those rules change, [`SeriesIndex::admit`]): a newer
//!   epoch empties the table; a request of an older one neither reads nor fills it. Refused label
//!   sets are never entered, so they are refused and counted on every request.
//! * A series read by a rule points at its group's slot and generation, and at its position
//!   among the group's roles (so a hit needs no hash of its role either): when the group leaves
//!   (stale, idle, evicted) the entry is dead, dropped on its next look-up or at the next sweep.
//! * A series no rule reads by its name and labels (84 % of what a vLLM pod sends) needs no group:
//!   its entry carries the receive time it was last seen, and leaves after the idle timeout
//!   without a sample, as an idle group would.
//! * At most [`SeriesIndex::cap`] entries; past it, new series are not remembered and take the
//!   full path every time (still correct, only slower).

use std::mem::size_of;

use hashbrown::HashTable;

use protocol::SeriesKey;

/// What the engine decided for an indexed series. `Copy` and 12 bytes, so a request can hold
/// one per series between its look-up and its apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// An input series of the group in `slot` while the slot has `generation`, at `position`
    /// among the group's roles (stable for the group's life).
    Group {
        /// The group's slot.
        slot: u32,
        /// The slot's generation when the entry was made.
        generation: u32,
        /// The series' position among its group's roles.
        position: u16,
    },
    /// A series no rule reads, last seen at `seen_s` (receive time, whole seconds since the epoch,
    /// saturating into `u32`: until 2106).
    Unused {
        /// Receive time it was last looked up or entered, s.
        seen_s: u32,
    },
}

/// Bytes a slot of the table takes: an entry and its control byte.
pub(crate) const SLOT_BYTES: usize = size_of::<Entry>() + 1;

/// One entry, 24 bytes.
#[derive(Debug, Clone, Copy)]
struct Entry {
    hash: u64,
    check: u32,
    target: Target,
}

/// Receive time in whole seconds (saturating into `u32`).
fn seconds(now_ms: i64) -> u32 {
    u32::try_from(now_ms.max(0) / 1000).unwrap_or(u32::MAX)
}

/// The index; owned by the engine, under its lock.
#[derive(Debug, Default)]
pub(crate) struct SeriesIndex {
    table: HashTable<Entry>,
    /// The epoch every entry was checked under ([`SeriesIndex::admit`]).
    epoch: u64,
    /// Most entries.
    pub(crate) cap: usize,
}

impl SeriesIndex {
    /// An empty index of at most `cap` entries.
    pub(crate) fn new(cap: usize) -> SeriesIndex {
        SeriesIndex {
            cap,
            ..SeriesIndex::default()
        }
    }

    /// Entries held.
    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    /// Bytes the index holds: the table's allocation (an entry and a control byte per bucket;
    /// hashbrown keeps at most 7/8 of the buckets full and doubles them as it grows). Not its
    /// `capacity()`, which moves with deleted entries while the allocation stays.
    pub(crate) fn bytes(&self) -> usize {
        self.table.allocation_size()
    }

    /// Forgets every entry (the input prefix changed: an unused series may be read now).
    pub(crate) fn clear(&mut self) {
        self.table.clear();
    }

    /// The epoch of the entries held.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Whether a request whose labels were checked under `epoch` may read and fill the index: a
    /// newer epoch empties it first (the label rules changed, so every label set must be checked
    /// again); an older one may not (its checks are not the ones the entries passed).
    pub(crate) fn admit(&mut self, epoch: u64) -> bool {
        if epoch > self.epoch {
            self.table.clear();
            self.epoch = epoch;
        }
        epoch == self.epoch
    }

    /// The target of `key`, if any; an unused series is marked seen at `now_ms`.
    #[inline]
    pub(crate) fn get(&mut self, key: SeriesKey, now_ms: i64) -> Option<Target> {
        let check = key.check as u32;
        let entry = self
            .table
            .find_mut(key.hash, |e| e.hash == key.hash && e.check == check)?;
        if let Target::Unused { seen_s } = &mut entry.target {
            *seen_s = seconds(now_ms);
        }
        Some(entry.target)
    }

    /// The target of `key`, if any, leaving the entry as it is.
    pub(crate) fn peek(&self, key: SeriesKey) -> Option<Target> {
        let check = key.check as u32;
        self.table
            .find(key.hash, |e| e.hash == key.hash && e.check == check)
            .map(|e| e.target)
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

    /// Remembers `key` as the series at `position` among the roles of the group in `slot` at
    /// `generation` (nothing when the position does not fit 16 bits, or the index is full).
    pub(crate) fn insert_group(
        &mut self,
        key: SeriesKey,
        slot: u32,
        generation: u32,
        position: usize,
        room: usize,
    ) {
        let Ok(position) = u16::try_from(position) else {
            return;
        };
        self.insert(
            key,
            Target::Group {
                slot,
                generation,
                position,
            },
            room,
        );
    }

    /// Remembers `key` as a series no rule reads, seen at `now_ms` (nothing when full, or when
    /// growing would take more than `room` bytes).
    pub(crate) fn insert_unused(&mut self, key: SeriesKey, now_ms: i64, room: usize) {
        let seen_s = seconds(now_ms);
        self.insert(key, Target::Unused { seen_s }, room);
    }

    /// Enters or replaces `key`'s target; a new key only while fewer than [`SeriesIndex::cap`]
    /// entries are held and the table can take it without growing by more than `room` bytes of
    /// the state budget (the index is a cache: a series it does not hold takes the full path).
    fn insert(&mut self, key: SeriesKey, target: Target, room: usize) {
        let check = key.check as u32;
        let entry = Entry {
            hash: key.hash,
            check,
            target,
        };
        // A full table doubles (hashbrown), taking as much again.
        let growth = if self.table.len() < self.table.capacity() {
            0
        } else {
            self.table.allocation_size().max(8 * SLOT_BYTES)
        };
        let room = self.table.len() < self.cap && growth <= room;
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

    /// Drops the entries of removed groups (`live(slot, generation)` false) and unused series not
    /// seen since `cutoff_ms`; gives memory back when at most a quarter of the table is used.
    pub(crate) fn sweep(&mut self, cutoff_ms: i64, live: impl Fn(u32, u32) -> bool) {
        let cutoff = seconds(cutoff_ms);
        self.table.retain(|e| match e.target {
            Target::Unused { seen_s } => seen_s >= cutoff,
            Target::Group {
                slot, generation, ..
            } => live(slot, generation),
        });
        if self.table.len() * 4 < self.table.capacity() {
            self.table.shrink_to_fit(|e| e.hash);
        }
    }
}

#[cfg(test)]
mod tests;
