//! The engine: a handful of parts, each with its own API and invariants, and the calls that use
//! them. Writing is [`Engine::apply`] (one call per request, [`batch`]); reading is [`views`];
//! the periodic sweep, the state file and making room each have a child of their own.
//!
//! | part | holds | child |
//! |---|---|---|
//! | [`GroupTable`] | the live groups, by the hash of their labels; their bytes and series | `table` |
//! | [`SeriesIndex`] | what was decided per series key | `index` |
//! | [`RetiredGroups`] | what removed groups left for their return | `retired` |
//! | [`MetadataCache`] | metadata of the families rules read | `metadata` |
//! | [`Counters`] | counts since start | `counters` |
//! | [`Events`] | events not yet taken, groups touched | `events` |
//! | [`Evictor`] | eviction candidates | `room` |

use super::*;
use crate::group::Group;
use crate::observe::GroupRef;
use counters::Counters;
use events::Events;
use index::SeriesIndex;
use metadata::MetadataCache;
use protocol::{Label, MetadataRef, Sample, SeriesKey};
use retired::RetiredGroups;
use room::Evictor;
use table::GroupTable;

pub(crate) mod batch;
mod counters;
pub(crate) mod events;
mod index;
mod metadata;
pub(crate) mod persist;
mod retired;
mod room;
mod sweep;
mod table;
mod views;

pub use batch::{IngestPolicy, Outcome, Refusal, RequestError, Written};

/// Series state, groups, frames and rules. Not thread-safe: the service holds it behind a lock.
///
/// Samples are applied one request at a time ([`Engine::apply`]): a series is looked up by its
/// [`protocol::SeriesKey`] in the series index, which gives its group and role without decoding,
/// checking or classifying its labels again; only a series the index does not hold takes the full
/// path (docs/ENGINE.md, "The series index").
#[derive(Debug)]
pub struct Engine {
    config: EngineConfig,
    table: GroupTable,
    index: SeriesIndex,
    retired: RetiredGroups,
    metadata: MetadataCache,
    counters: Counters,
    events: Events,
    room: Evictor,
}

/// Heap bytes a group takes beside its labels, its series and its slot (which the table counts by
/// its slots' capacity): the labels' shared header, its boxed plans, outputs, holds and rule
/// states, as accounted.
pub(crate) const GROUP_BYTES: usize = 1024;

/// Bytes an input series takes beside its frame values ([`table::role_bytes`]).
const ROLE_BYTES: usize = 512;

/// Bytes an input series takes per kept frame: its value, and its share of the frame's growth.
const FRAME_VALUE_BYTES: usize = 16;

/// Bytes a group takes per kept frame beside its values: its share of the frame in the group's
/// queue (48 bytes) and of its values' allocation (at least 32 bytes with the allocator's
/// header). Without it, a group of one series (a flood's) with a full frame window held 3 % more
/// than accounted; with it, 1.28 times less (`cargo run --release --example state_bytes flood
/// 20000`).
const FRAME_BYTES: usize = 64;

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

/// Removes the group in `slot` of `table`; when `retire`, what it leaves for its return (its
/// rule states and holds) goes to `retired`, within their cap. Returns its labels.
fn leave(
    table: &mut GroupTable,
    retired: &mut RetiredGroups,
    slot: u32,
    retire: bool,
) -> Option<GroupLabels> {
    let mut entry = table.remove(slot)?;
    let labels = entry.group.labels.clone();
    if retire {
        let newest = entry.meta.newest_ts.unwrap_or(i64::MIN);
        let state = entry.group.retire(newest);
        if state.keeps_anything() {
            retired.insert(labels.clone(), state);
            retired.fit();
        }
    }
    Some(labels)
}

impl Engine {
    /// Creates an empty engine.
    pub fn new(config: EngineConfig) -> Self {
        Engine {
            table: GroupTable::new(config.max_pending_frames, &config.slos),
            index: SeriesIndex::new(index_cap(&config)),
            retired: RetiredGroups::new(config.max_state_bytes / 4),
            metadata: MetadataCache::default(),
            counters: Counters::default(),
            events: Events::default(),
            room: Evictor::default(),
            config,
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
        if config.slos != self.config.slos {
            self.table.set_slos(&config.slos);
        }
        if config.metric_prefix != self.config.metric_prefix
            || config.drop_labels != self.config.drop_labels
            || config.slos != self.config.slos
        {
            // The index remembers which series no rule reads, by the names of the old prefix,
            // and each series' group, by the group labels of the old drop list.
            self.index.clear();
        }
        self.index.cap = index_cap(&config);
        self.table
            .set_sizes(config.max_pending_frames, &config.slos);
        self.retired.set_cap(config.max_state_bytes / 4);
        self.config = config;
    }

    /// Bytes of state the engine holds, as accounted against `engine.max_state_bytes`: the live
    /// groups, the series index and the retired states (docs/RELIABILITY.md, "The memory budget").
    pub fn state_bytes(&self) -> usize {
        let parts = self.memory_parts();
        parts.groups + parts.index + parts.retired
    }

    /// [`Engine::state_bytes`] by part.
    pub(crate) fn memory_parts(&self) -> MemoryParts {
        MemoryParts {
            groups: self.table.bytes(),
            index: self.index.bytes(),
            retired: self.retired.bytes(),
        }
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

    /// The label-check epoch of the series index: a request checked under it reads and fills it.
    pub fn index_epoch(&self) -> u64 {
        self.index.epoch()
    }

    /// Number of series the index holds (for tests and memory accounting).
    pub fn indexed_series(&self) -> usize {
        self.index.len()
    }

    /// Caches one metadata entry by family name (last one wins) when the family's series are read
    /// by a rule; other families' metadata is ignored. Never fails a request.
    ///
    /// # Errors
    /// [`protocol::MetadataDropReason::TooLong`] when a read family's help or unit is past its
    /// cap ([`protocol::MAX_METADATA_HELP_BYTES`]): not kept.
    pub fn record_metadata(
        &mut self,
        metadata: &MetadataRef<'_>,
    ) -> Result<(), protocol::MetadataDropReason> {
        self.metadata.record(metadata, &self.config.metric_prefix)
    }

    /// Heap bytes of the metadata cache's texts (names, help, unit): at most the read families'
    /// count times about 4.4 KiB.
    pub fn metadata_bytes(&self) -> usize {
        self.metadata.text_bytes()
    }

    /// Number of metadata families cached: families a rule reads whose metadata was received.
    pub fn metadata_families(&self) -> usize {
        self.metadata.len()
    }

    /// Applies one series' samples, as a request of its own at the index's epoch: what tools and
    /// tests use. `labels` must be normalised ([`protocol::normalize_labels`]: sorted by name, no
    /// empty values, with `__name__`); they are looked up and remembered by the key of their text.
    /// Every sample is counted in `report` as [`Engine::apply`] counts it (no future-skew or
    /// timestamp check here).
    pub fn ingest(
        &mut self,
        labels: &[Label<'_>],
        samples: &[Sample],
        now_ms: i64,
        report: &mut IngestReport,
    ) {
        let key = SeriesKey::of_labels(labels, &mut Vec::with_capacity(256));
        let epoch = self.index.epoch();
        self.batch(now_ms, epoch)
            .apply_labelled(Some(key), labels, samples, report);
    }

    /// [`Engine::ingest`] of a series remembered under `key` instead of the key of its label text:
    /// for tools and tests that take their keys elsewhere (forced collisions).
    pub fn ingest_keyed(
        &mut self,
        key: SeriesKey,
        labels: &[Label<'_>],
        samples: &[Sample],
        now_ms: i64,
        report: &mut IngestReport,
    ) {
        let epoch = self.index.epoch();
        self.batch(now_ms, epoch)
            .apply_labelled(Some(key), labels, samples, report);
    }

    /// The live group the series index holds `key` for, if any (`None` for a key it does not
    /// hold, a series no rule reads, or a group that left).
    pub fn indexed_group(&self, key: SeriesKey) -> Option<GroupRef> {
        match self.index.peek(key)? {
            index::Target::Group {
                slot, generation, ..
            } => self
                .table
                .live(slot, generation)
                .then_some(GroupRef { slot, generation }),
            index::Target::Unused { .. } => None,
        }
    }

    /// The batch of one request received at `now_ms`, checked under label epoch `epoch`.
    fn batch(&mut self, now_ms: i64, epoch: u64) -> batch::Batch<'_> {
        batch::Batch::begin(
            batch::Parts {
                config: &self.config,
                table: &mut self.table,
                index: &mut self.index,
                retired: &mut self.retired,
                metadata: &mut self.metadata,
                counters: &mut self.counters,
                events: &mut self.events,
                room: &mut self.room,
            },
            now_ms,
            epoch,
        )
    }
}
