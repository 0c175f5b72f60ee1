//! The engine: its groups and the series index. Applying samples is [`ingest`]'s (a [`Batch`]
//! per request); the children below add eviction, the idle sweep, the state file and the
//! read-only views.

use std::hash::{BuildHasher, Hasher};

use hashbrown::{HashMap, HashTable};

use super::classify::{group_labels, is_read_family};
use super::group::{Committed, Group};
use super::observe::{EngineEvent, EventQueue, GroupMeta};
use super::*;
use index::SeriesIndex;
use protocol::{Label, MetadataRef, MetricType};
use retired::RetiredGroups;

mod evict;
mod index;
pub(crate) mod ingest;
pub(crate) mod persist;
mod retired;
mod sweep;
mod views;

pub use ingest::{Batch, KnownSeries};

/// A cached metadata entry (docs/REMOTE-WRITE.md, checklist item 5).
#[derive(Debug, Clone, PartialEq)]
struct Metadata {
    metric_type: MetricType,
    help: String,
    unit: String,
}

#[derive(Debug)]
struct Entry {
    hash: u64,
    group: Group,
    /// Snapshot, event and missed-scrapes bookkeeping (`observe.rs`).
    meta: GroupMeta,
    /// The [`Batch`] that last looked one of the group's series up ([`Engine`]'s `batches`): a
    /// group a batch holds handles to is never evicted during that batch.
    batch: u64,
}

/// A place for one group. `generation` changes whenever the slot's group is removed, so cached
/// series that point at the slot can tell that their group is gone.
#[derive(Debug)]
struct GroupSlot {
    generation: u32,
    entry: Option<Entry>,
}

/// Series state, groups, frames and rules. Not thread-safe: the HTTP layer holds it in a mutex.
///
/// Samples are applied through a [`Batch`] ([`Engine::batch`], one per request): a series is looked
/// up by its [`protocol::SeriesKey`] in the series index, which gives its group and role without
/// decoding, checking or classifying its labels again; only a series the index does not hold
/// takes the full path (docs/ENGINE.md, "The series index").
#[derive(Debug)]
pub struct Engine {
    config: EngineConfig,
    hasher: foldhash::fast::RandomState,
    slots: Vec<GroupSlot>,
    free_slots: Vec<u32>,
    /// Slot indices of the live groups, by group-label hash.
    groups: HashTable<u32>,
    /// What was decided per series key ([`index`]).
    index: SeriesIndex,
    /// Batches begun ([`Engine::batch`]); the current one's number.
    batches: u64,
    /// Groups `(slot, generation)` whose series all went stale during the current batch: removed
    /// when it ends, unless a later sample of the batch revived them.
    stale: Vec<(u32, u32)>,
    metadata: HashMap<String, Metadata>,
    frames_dropped: u64,
    counter_resets: u64,
    /// Outputs held above their computed value, by [`Family::index`] ([`super::hold`]).
    output_holds: [u64; FAMILIES],
    /// Outputs that restarted below what was served because an input of the family fell.
    output_resets: [u64; FAMILIES],
    removed_stale: u64,
    removed_idle: u64,
    /// Groups removed for missing `engine.missed_scrapes` of their scrapes.
    removed_missed_scrapes: u64,
    /// Groups evicted to make room at `max_active_series` ([`evict`]).
    removed_evicted: u64,
    /// Eviction candidates `(slot, generation)` from the last scan, checked again when popped.
    evictable: Vec<(u32, u32)>,
    /// Receive time (ms) of the last scan for eviction candidates.
    evictable_scanned_ms: Option<i64>,
    newest_sample_ms: Option<i64>,
    /// Input series held across all groups (the quantity `max_active_series` caps).
    tracked_series: usize,
    /// Bytes the live groups take, as accounted ([`GROUP_BYTES`], their labels, and
    /// [`Engine::role_bytes`] per series): part of [`Engine::state_bytes`].
    groups_bytes: usize,
    /// Reused buffer: a label set's text, hashed by [`protocol::SeriesKey::of_labels`].
    scratch: Vec<u8>,
    /// What removed groups left for their return, bounded by sample time and bytes ([`retired`]).
    retired: RetiredGroups,
    /// Groups (slot, generation) that took samples since the last [`Engine::take_events`].
    touched: Vec<(u32, u32)>,
    /// Events not yet taken.
    events: EventQueue,
}

impl Engine {
    /// Creates an empty engine.
    pub fn new(config: EngineConfig) -> Self {
        Engine {
            config: config.clone(),
            hasher: foldhash::fast::RandomState::default(),
            slots: Vec::new(),
            free_slots: Vec::new(),
            groups: HashTable::new(),
            index: SeriesIndex::new(index_cap(&config)),
            batches: 0,
            stale: Vec::new(),
            metadata: HashMap::new(),
            frames_dropped: 0,
            counter_resets: 0,
            output_holds: [0; FAMILIES],
            output_resets: [0; FAMILIES],
            removed_stale: 0,
            removed_idle: 0,
            removed_missed_scrapes: 0,
            removed_evicted: 0,
            evictable: Vec::new(),
            evictable_scanned_ms: None,
            newest_sample_ms: None,
            tracked_series: 0,
            groups_bytes: 0,
            scratch: Vec::with_capacity(512),
            retired: RetiredGroups::default(),
            touched: Vec::new(),
            events: EventQueue::default(),
        }
    }

    /// The current idle timeout (ms): [`EngineConfig::idle_timeout_ms`] as given at start or by
    /// the last [`Engine::set_config`] (a reload).
    pub fn idle_timeout_ms(&self) -> i64 {
        self.config.idle_timeout_ms
    }

    /// The settings in force.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Replaces the settings (idle timeout, pending frames, limits); existing state is kept, and
    /// its accounting redone (a series' bytes depend on the pending frames).
    pub fn set_config(&mut self, config: EngineConfig) {
        self.index.cap = index_cap(&config);
        self.config = config;
        let role_bytes = self.role_bytes();
        self.groups_bytes = self
            .slots
            .iter()
            .filter_map(|s| s.entry.as_ref())
            .map(|e| {
                GROUP_BYTES + retired::label_bytes(&e.group.labels) + e.group.series() * role_bytes
            })
            .sum();
        self.fit_retired();
    }

    /// Hash of the group labels of `labels`, and how many there are.
    fn group_hash(&self, labels: &[Label<'_>]) -> (u64, usize) {
        let mut h = self.hasher.build_hasher();
        let mut count = 0;
        for l in group_labels(labels) {
            h.write(l.name.as_bytes());
            h.write_u8(0xff);
            h.write(l.value.as_bytes());
            h.write_u8(0xff);
            count += 1;
        }
        (h.finish(), count)
    }

    fn live(&self, slot: u32, generation: u32) -> bool {
        self.slots
            .get(slot as usize)
            .is_some_and(|s| s.generation == generation && s.entry.is_some())
    }

    /// Bytes of state the engine holds, as accounted against `engine.max_state_bytes`: the live
    /// groups, the series index and the retired states (docs/RELIABILITY.md, "The memory budget").
    pub fn state_bytes(&self) -> usize {
        let parts = self.memory_parts();
        parts.groups + parts.index + parts.retired
    }

    /// The `engine` label of each retired state, oldest samples first (tests).
    #[cfg(test)]
    pub(crate) fn retired_engines(&self) -> Vec<String> {
        let mut all: Vec<_> = self.retired.iter().collect();
        all.sort_by_key(|(_, r)| r.newest_sample_ms);
        all.iter()
            .filter_map(|(l, _)| {
                l.iter()
                    .find(|(n, _)| n == "engine")
                    .map(|(_, v)| v.clone())
            })
            .collect()
    }

    /// Bytes of the state budget not yet accounted (`max_state_bytes` − [`Engine::state_bytes`]).
    pub(crate) fn state_room(&self) -> usize {
        self.config
            .max_state_bytes
            .saturating_sub(self.state_bytes())
    }

    /// Bytes a new group's slot adds beyond its own accounting: when no slot is free and the
    /// slot vector and the group table are full, both double (the vector moves, old and new
    /// allocations are held at once).
    pub(crate) fn new_slot_growth(&self) -> usize {
        if !self.free_slots.is_empty() {
            return 0;
        }
        let slots = if self.slots.len() < self.slots.capacity() {
            0
        } else {
            self.slots.capacity().max(4) * size_of::<GroupSlot>()
        };
        let table = if self.groups.len() < self.groups.capacity() {
            0
        } else {
            self.groups
                .allocation_size()
                .max(8 * (size_of::<u32>() + 1))
        };
        slots + table
    }

    /// [`Engine::state_bytes`] by part.
    pub(crate) fn memory_parts(&self) -> MemoryParts {
        // The slots hold each group inline, and stay allocated when their group leaves.
        let slots = self.slots.capacity() * size_of::<GroupSlot>()
            + self.groups.allocation_size()
            + self.free_slots.capacity() * size_of::<u32>();
        MemoryParts {
            groups: slots + self.groups_bytes,
            index: self.index.bytes(),
            retired: self.retired.bytes(),
        }
    }

    /// Bytes one input series of a group takes, as accounted: its role, its place in the group's
    /// role map, a value in each of `max_pending_frames` frames, its share of the plans, the
    /// outputs, the holds and the acceptance-corrected state. An upper bound, calibrated against
    /// the allocator (docs/RELIABILITY.md, "The memory budget").
    pub(crate) fn role_bytes(&self) -> usize {
        ROLE_BYTES + FRAME_VALUE_BYTES * self.config.max_pending_frames.max(1)
    }

    /// The slot of the group of `labels`, created if `create`.
    fn group_slot(&mut self, labels: &[Label<'_>], now_ms: i64, create: bool) -> Option<u32> {
        let (hash, count) = self.group_hash(labels);
        let slots = &self.slots;
        let same = |i: &u32| {
            let e = slots[*i as usize]
                .entry
                .as_ref()
                .expect("indexed slots hold a group");
            e.hash == hash
                && e.group.labels.len() == count
                && e.group
                    .labels
                    .iter()
                    .zip(group_labels(labels))
                    .all(|((n, v), l)| n == l.name && v == l.value)
        };
        if let Some(i) = self.groups.find(hash, same) {
            return Some(*i);
        }
        if !create {
            return None;
        }
        let owned: Vec<(String, String)> = group_labels(labels)
            .map(|l| (l.name.to_owned(), l.value.to_owned()))
            .collect();
        let resumed = self.retired.take(&owned);
        self.groups_bytes += GROUP_BYTES + retired::label_bytes(&owned);
        let mut group = Group::new(owned, now_ms);
        if let Some(retired) = resumed {
            group.resume(retired);
        }
        let entry = Entry {
            hash,
            group,
            meta: GroupMeta::new(now_ms),
            batch: 0,
        };
        let slot = match self.free_slots.pop() {
            Some(i) => {
                self.slots[i as usize].entry = Some(entry);
                i
            }
            None => {
                self.slots.push(GroupSlot {
                    generation: 0,
                    entry: Some(entry),
                });
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 groups")
            }
        };
        let slots = &self.slots;
        self.groups.insert_unique(hash, slot, |i| {
            slots[*i as usize].entry.as_ref().map_or(0, |e| e.hash)
        });
        Some(slot)
    }

    /// Drops the oldest retired states until they take at most a quarter of the state budget.
    fn fit_retired(&mut self) {
        let cap = self.config.max_state_bytes / 4;
        let over = self.retired.bytes().saturating_sub(cap);
        if over > 0 {
            self.retired.evict(over);
        }
    }

    /// Removes the group in `slot`, keeping what it leaves for its return among the retired states
    /// when `retire` (a group that went stale or missed its scrapes may come back; an evicted one
    /// feeds nothing); indexed series pointing at it become dead by generation.
    fn remove_retiring(&mut self, slot: u32, retire: bool) {
        if retire && let Some(entry) = self.slots[slot as usize].entry.as_mut() {
            let newest = entry.meta.newest_ts.unwrap_or(i64::MIN);
            let retired = entry.group.retire(newest);
            if retired.acceptance.is_some() || retired.holds.iter().any(Option::is_some) {
                self.retired.insert(entry.group.labels.clone(), retired);
                self.fit_retired();
            }
        }
        self.remove_group(slot);
    }

    /// Removes the group in `slot`; indexed series pointing at it become dead by generation.
    fn remove_group(&mut self, slot: u32) {
        let Some(entry) = self.slots[slot as usize].entry.take() else {
            return;
        };
        self.tracked_series -= entry.group.series();
        let bytes = GROUP_BYTES
            + retired::label_bytes(&entry.group.labels)
            + entry.group.series() * self.role_bytes();
        self.groups_bytes = self.groups_bytes.saturating_sub(bytes);
        self.slots[slot as usize].generation = self.slots[slot as usize].generation.wrapping_add(1);
        if let Ok(found) = self.groups.find_entry(entry.hash, |i| *i == slot) {
            found.remove();
        }
        self.free_slots.push(slot);
    }

    fn group(&self, slot: u32) -> &Group {
        &self.slots[slot as usize]
            .entry
            .as_ref()
            .expect("a live slot")
            .group
    }

    /// Caches one metadata entry by family name (last one wins) when the family's series are read
    /// by a rule ([`is_read_family`]: at most 15 names); other families' metadata is ignored, so
    /// the cache stays bounded and allocates only when a read family's entry is new or changed.
    /// Never fails.
    pub fn record_metadata(&mut self, metadata: &MetadataRef<'_>) {
        if !is_read_family(metadata.family_name) {
            return;
        }
        let same = |e: &Metadata| {
            e.metric_type == metadata.metric_type
                && e.help == metadata.help
                && e.unit == metadata.unit
        };
        let entry = || Metadata {
            metric_type: metadata.metric_type,
            help: metadata.help.to_owned(),
            unit: metadata.unit.to_owned(),
        };
        match self.metadata.get_mut(metadata.family_name) {
            Some(existing) if same(existing) => {}
            Some(existing) => *existing = entry(),
            None => {
                self.metadata
                    .insert(metadata.family_name.to_owned(), entry());
            }
        }
    }

    /// Number of metadata families cached: families a rule reads whose metadata was received.
    pub fn metadata_families(&self) -> usize {
        self.metadata.len()
    }
}

/// Heap bytes a group takes beside its labels, its series and its slot (which
/// [`Engine::state_bytes`] counts by the slots' capacity): the labels' shared header, its boxed
/// plans, outputs and holds, as accounted.
pub(crate) const GROUP_BYTES: usize = 1024;

/// Bytes an input series takes beside its frame values ([`Engine::role_bytes`]).
const ROLE_BYTES: usize = 512;

/// Bytes an input series takes per kept frame: its value, and its share of the frame's growth.
const FRAME_VALUE_BYTES: usize = 16;

/// The bytes the group labels of a series' `labels` take once stored
/// ([`retired::label_bytes`] of the labels a group keeps).
fn group_label_bytes(labels: &[Label<'_>]) -> usize {
    group_labels(labels)
        .map(|l| l.name.len() + l.value.len() + 2 * size_of::<String>())
        .sum()
}

/// Most indexed series: 8 per series the engine may hold (`max_active_series`; a vLLM engine sends
/// about 6 series per one a rule reads), at least 65 536, and at most what an eighth of the state
/// budget holds.
fn index_cap(config: &EngineConfig) -> usize {
    let by_bytes = config.max_state_bytes / 8 / index::SLOT_BYTES;
    config
        .max_active_series
        .saturating_mul(8)
        .max(1 << 16)
        .min(by_bytes.max(1024))
}
