//! The group table: every live group in a slot, found by the hash of its group labels, with the
//! bytes and input series the live groups take, as accounted against the state budget
//! (docs/RELIABILITY.md, "The memory budget").
//!
//! Invariants, kept by every method here and checked by the tests:
//! * a slot's `generation` changes whenever its group leaves, so a [`GroupRef`] or an indexed
//!   series that names an older generation finds nothing;
//! * `hashes` holds exactly the live slots, each under its group's hash;
//! * `bytes` and `series` are the sums of [`GroupTable::accounted`] and of [`Group::series`]
//!   over the live groups;
//! * `lone` holds exactly the live slots whose group feeds no family as last checked
//!   ([`GroupTable::check_lone`]), each entry's `lone_at` its place there, and `lone_series`
//!   and `lone_bytes` are the sums of their series and accounted bytes.

use std::hash::{BuildHasher, Hasher};

use hashbrown::HashTable;

use super::retired::label_bytes;
use super::{FRAME_BYTES, FRAME_VALUE_BYTES, GROUP_BYTES, ROLE_BYTES};
use crate::classify::group_labels;
use crate::group::Group;
use crate::observe::{GroupMeta, GroupRef};
use protocol::Label;

/// One live group and its bookkeeping.
#[derive(Debug)]
pub(crate) struct Entry {
    /// The hash of its group labels ([`GroupTable::hash`]).
    pub(crate) hash: u64,
    /// The group.
    pub(crate) group: Group,
    /// Snapshot, event and missed-scrapes bookkeeping (`observe.rs`).
    pub(crate) meta: GroupMeta,
    /// The number of the batch that last held the group ([`GroupTable::hold`]): a group the
    /// current batch holds is never evicted during it.
    pub(crate) batch: u64,
    /// Its place in [`GroupTable::lone`] while it feeds no family.
    lone_at: Option<u32>,
}

impl Entry {
    /// True when the group fed no family when last checked ([`GroupTable::check_lone`]).
    pub(crate) fn lone(&self) -> bool {
        self.lone_at.is_some()
    }
}

/// A place for one group.
#[derive(Debug)]
struct Slot {
    generation: u32,
    entry: Option<Entry>,
}

/// The live groups.
#[derive(Debug)]
pub(crate) struct GroupTable {
    hasher: foldhash::fast::RandomState,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Slot indices of the live groups, by group-label hash.
    hashes: HashTable<u32>,
    /// Bytes the live groups take, as accounted ([`GroupTable::accounted`]).
    bytes: usize,
    /// Input series held across all live groups (what `max_active_series` caps).
    series: usize,
    /// Bytes one input series takes ([`role_bytes`]), under the current settings.
    role_bytes: usize,
    /// Bytes a group takes beside its labels and series ([`group_bytes`]), under the current
    /// settings.
    group_bytes: usize,
    /// Batches begun ([`GroupTable::begin_batch`]); the current one's number.
    batch: u64,
    /// Slots of the live groups that feed no family, in no order.
    lone: Vec<u32>,
    /// Input series of the groups in `lone`.
    lone_series: usize,
    /// Bytes of the groups in `lone`, as accounted.
    lone_bytes: usize,
}

/// Bytes one input series of a group takes, as accounted: its role, its place in the group's
/// role map, a value in each of `max_pending_frames` frames, its share of the plans, the outputs,
/// the holds and the rule states. An upper bound, calibrated against the allocator
/// (docs/RELIABILITY.md, "The memory budget").
fn role_bytes(max_pending_frames: usize) -> usize {
    ROLE_BYTES + FRAME_VALUE_BYTES * max_pending_frames.max(1)
}

/// Bytes a group takes beside its labels and its series, as accounted: [`GROUP_BYTES`], for
/// each of `max_pending_frames` frames the frame itself ([`FRAME_BYTES`]), and what the SLO
/// counters of `slos` may hold ([`crate::slo::SloSet::bytes_per_group`]). An upper bound,
/// calibrated against the allocator (docs/RELIABILITY.md, "The memory budget").
fn group_bytes(max_pending_frames: usize, slos: &crate::slo::SloSet) -> usize {
    GROUP_BYTES + FRAME_BYTES * max_pending_frames.max(1) + slos.bytes_per_group()
}

/// The bytes the group labels of a series' `labels` take once stored.
pub(crate) fn group_label_bytes(labels: &[Label<'_>], dropped: &[String]) -> usize {
    group_labels(labels, dropped)
        .map(|l| l.name.len() + l.value.len() + 2 * size_of::<String>())
        .sum()
}

impl GroupTable {
    /// An empty table for groups of at most `max_pending_frames` frames counting `slos`.
    pub(crate) fn new(max_pending_frames: usize, slos: &crate::slo::SloSet) -> GroupTable {
        GroupTable {
            hasher: foldhash::fast::RandomState::default(),
            slots: Vec::new(),
            free: Vec::new(),
            hashes: HashTable::new(),
            bytes: 0,
            series: 0,
            role_bytes: role_bytes(max_pending_frames),
            group_bytes: group_bytes(max_pending_frames, slos),
            batch: 0,
            lone: Vec::new(),
            lone_series: 0,
            lone_bytes: 0,
        }
    }

    /// Begins a batch (one request's samples): the groups it holds ([`GroupTable::hold`]) are
    /// spared by eviction until the next batch begins. Returns its number.
    pub(crate) fn begin_batch(&mut self) -> u64 {
        self.batch += 1;
        self.batch
    }

    /// The current batch's number.
    pub(crate) fn batch(&self) -> u64 {
        self.batch
    }

    /// Holds the group in `slot` for the current batch (a live slot).
    pub(crate) fn hold(&mut self, slot: u32) {
        let batch = self.batch;
        if let Some(entry) = self
            .slots
            .get_mut(slot as usize)
            .and_then(|s| s.entry.as_mut())
        {
            entry.batch = batch;
        }
    }

    /// Live groups.
    pub(crate) fn len(&self) -> usize {
        self.hashes.len()
    }

    /// Input series held by the live groups.
    pub(crate) fn series(&self) -> usize {
        self.series
    }

    /// Bytes one input series takes.
    pub(crate) fn role_bytes(&self) -> usize {
        self.role_bytes
    }

    /// Bytes a new group takes beside its labels and series ([`group_bytes`]).
    pub(crate) fn group_bytes(&self) -> usize {
        self.group_bytes
    }

    /// The bytes a live group is accounted: [`group_bytes`], its labels and its series.
    fn accounted(&self, group: &Group) -> usize {
        self.group_bytes + label_bytes(&group.labels) + group.series() * self.role_bytes
    }

    /// Changes the bytes a group and a series take (the pending frames or the SLOs changed) and
    /// recounts every group.
    pub(crate) fn set_sizes(&mut self, max_pending_frames: usize, slos: &crate::slo::SloSet) {
        self.role_bytes = role_bytes(max_pending_frames);
        self.group_bytes = group_bytes(max_pending_frames, slos);
        let live: Vec<&Group> = self.iter().map(|(_, e)| &e.group).collect();
        let bytes = live.iter().map(|g| self.accounted(g)).sum();
        let lone = self.lone.iter().map(|s| self.accounted(&self.at(*s).group));
        self.lone_bytes = lone.sum();
        self.bytes = bytes;
    }

    /// Input series of the groups that feed no family.
    pub(crate) fn lone_series(&self) -> usize {
        self.lone_series
    }

    /// Bytes of the groups that feed no family, as accounted (their slots' share of the table
    /// is not counted: it is the table's).
    pub(crate) fn lone_bytes(&self) -> usize {
        self.lone_bytes
    }

    /// Slots of the groups that feed no family, in no order.
    pub(crate) fn lone_slots(&self) -> &[u32] {
        &self.lone
    }

    /// Checks again whether the group in `slot` (live) feeds a family ([`Group::feeds_no_family`])
    /// and moves it into or out of the lone groups: after its role set changed.
    pub(crate) fn check_lone(&mut self, slot: u32) {
        let entry = self.at(slot);
        let lone = entry.group.feeds_no_family();
        if lone == entry.lone() {
            return;
        }
        let (series, bytes) = (entry.group.series(), self.accounted(&entry.group));
        if lone {
            self.at_mut(slot).lone_at = Some(self.lone.len() as u32);
            self.lone.push(slot);
            self.lone_series += series;
            self.lone_bytes += bytes;
        } else {
            self.unlist_lone(slot);
        }
    }

    /// Takes the group in `slot` (live, lone) out of the lone groups.
    fn unlist_lone(&mut self, slot: u32) {
        let entry = self.at_mut(slot);
        let Some(at) = entry.lone_at.take() else {
            return;
        };
        let series = entry.group.series();
        let bytes = self.accounted(&self.at(slot).group);
        self.lone.swap_remove(at as usize);
        if let Some(&moved) = self.lone.get(at as usize) {
            self.at_mut(moved).lone_at = Some(at);
        }
        self.lone_series -= series;
        self.lone_bytes = self.lone_bytes.saturating_sub(bytes);
    }

    /// Bytes the table takes: its slots (each group inline; they stay allocated when their group
    /// leaves), its hash table and free list, and the live groups as accounted.
    pub(crate) fn bytes(&self) -> usize {
        self.slots.capacity() * size_of::<Slot>()
            + self.hashes.allocation_size()
            + self.free.capacity() * size_of::<u32>()
            + self.bytes
    }

    /// Bytes a new group's slot adds beyond its own accounting: when no slot is free and the
    /// slot vector and the hash table are full, both double (the vector moves, old and new
    /// allocations are held at once).
    pub(crate) fn new_slot_growth(&self) -> usize {
        if !self.free.is_empty() {
            return 0;
        }
        let slots = if self.slots.len() < self.slots.capacity() {
            0
        } else {
            self.slots.capacity().max(4) * size_of::<Slot>()
        };
        let table = if self.hashes.len() < self.hashes.capacity() {
            0
        } else {
            self.hashes
                .allocation_size()
                .max(8 * (size_of::<u32>() + 1))
        };
        slots + table
    }

    /// The hash of the group labels of `labels` (a series' normalised labels, less the labels
    /// `dropped` names), and how many there are.
    pub(crate) fn hash(&self, labels: &[Label<'_>], dropped: &[String]) -> (u64, usize) {
        let mut h = self.hasher.build_hasher();
        let mut count = 0;
        for l in group_labels(labels, dropped) {
            h.write(l.name.as_bytes());
            h.write_u8(0xff);
            h.write(l.value.as_bytes());
            h.write_u8(0xff);
            count += 1;
        }
        (h.finish(), count)
    }

    /// The slot of the group of `labels`, whose group-label hash and count [`GroupTable::hash`]
    /// gave.
    pub(crate) fn find(
        &self,
        (hash, count): (u64, usize),
        labels: &[Label<'_>],
        dropped: &[String],
    ) -> Option<u32> {
        let slots = &self.slots;
        let same = |i: &u32| {
            let e = slots[*i as usize]
                .entry
                .as_ref()
                .expect("hashed slots hold a group");
            e.hash == hash
                && e.group.labels.len() == count
                && e.group
                    .labels
                    .iter()
                    .zip(group_labels(labels, dropped))
                    .all(|((n, v), l)| n == l.name && v == l.value)
        };
        self.hashes.find(hash, same).copied()
    }

    /// Puts `group` (whose labels hash to `hash`) in a free slot, or a new one.
    pub(crate) fn insert(&mut self, hash: u64, group: Group, meta: GroupMeta) -> u32 {
        self.bytes += self.accounted(&group);
        self.series += group.series();
        let entry = Entry {
            hash,
            group,
            meta,
            batch: self.batch,
            lone_at: None,
        };
        let slot = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize].entry = Some(entry);
                i
            }
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    entry: Some(entry),
                });
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 groups")
            }
        };
        let slots = &self.slots;
        self.hashes.insert_unique(hash, slot, |i| {
            slots[*i as usize].entry.as_ref().map_or(0, |e| e.hash)
        });
        self.check_lone(slot);
        slot
    }

    /// Takes the group out of `slot`; the slot's generation moves on, so every reference to the
    /// group is dead.
    pub(crate) fn remove(&mut self, slot: u32) -> Option<Entry> {
        self.slots.get(slot as usize)?.entry.as_ref()?;
        self.unlist_lone(slot);
        let s = &mut self.slots[slot as usize];
        let entry = s.entry.take()?;
        s.generation = s.generation.wrapping_add(1);
        self.series -= entry.group.series();
        self.bytes = self.bytes.saturating_sub(self.accounted(&entry.group));
        if let Ok(found) = self.hashes.find_entry(entry.hash, |i| *i == slot) {
            found.remove();
        }
        self.free.push(slot);
        Some(entry)
    }

    /// Records that the group in `slot` (live) gained `added` input series.
    pub(crate) fn grew(&mut self, slot: u32, added: usize) {
        self.series += added;
        self.bytes += added * self.role_bytes;
        if self.at(slot).lone() {
            self.lone_series += added;
            self.lone_bytes += added * self.role_bytes;
        }
    }

    /// The generation of `slot` (of its current or next group).
    pub(crate) fn generation(&self, slot: u32) -> u32 {
        self.slots[slot as usize].generation
    }

    /// True when `slot` holds a group of `generation`.
    pub(crate) fn live(&self, slot: u32, generation: u32) -> bool {
        self.slots
            .get(slot as usize)
            .is_some_and(|s| s.generation == generation && s.entry.is_some())
    }

    /// The entry of `group`, if it is still the group in its slot.
    pub(crate) fn get(&self, group: GroupRef) -> Option<&Entry> {
        self.slots
            .get(group.slot as usize)
            .filter(|s| s.generation == group.generation)?
            .entry
            .as_ref()
    }

    /// The entry in `slot`, which must be live.
    pub(crate) fn at(&self, slot: u32) -> &Entry {
        self.slots[slot as usize]
            .entry
            .as_ref()
            .expect("a live slot")
    }

    /// The entry in `slot`, which must be live.
    pub(crate) fn at_mut(&mut self, slot: u32) -> &mut Entry {
        self.slots[slot as usize]
            .entry
            .as_mut()
            .expect("a live slot")
    }

    /// The entry of `group`, if it is still the group in its slot.
    pub(crate) fn get_mut(&mut self, group: GroupRef) -> Option<&mut Entry> {
        self.slots
            .get_mut(group.slot as usize)
            .filter(|s| s.generation == group.generation)?
            .entry
            .as_mut()
    }

    /// Gives every live group the engine's SLOs (a reload changed them).
    pub(crate) fn set_slos(&mut self, slos: &crate::slo::SloSet) {
        let mut live = Vec::new();
        for (slot, s) in self.slots.iter_mut().enumerate() {
            if let Some(entry) = s.entry.as_mut() {
                entry.group.set_slos(slos);
                live.push(slot as u32);
            }
        }
        // The plans were decided again: whether each group feeds a family is judged again.
        for slot in live {
            self.check_lone(slot);
        }
    }

    /// Every live group with its reference, in slot order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (GroupRef, &Entry)> {
        self.slots.iter().enumerate().filter_map(|(slot, s)| {
            let entry = s.entry.as_ref()?;
            let group = GroupRef {
                slot: slot as u32,
                generation: s.generation,
            };
            Some((group, entry))
        })
    }

    /// The live group at or after slot `from`, and its slot (for chunked walks that let go of the
    /// engine between chunks).
    pub(crate) fn next_from(&self, from: usize) -> Option<(usize, &Entry)> {
        self.slots
            .iter()
            .enumerate()
            .skip(from)
            .find_map(|(i, s)| s.entry.as_ref().map(|e| (i, e)))
    }

    /// Slots, live or free.
    pub(crate) fn slot_count(&self) -> usize {
        self.slots.len()
    }
}
