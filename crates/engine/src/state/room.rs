//! Making room for a new series (`docs/RELIABILITY.md`, "A cardinality flood"): a series of a
//! group that can feed a family wins over groups that cannot.
//!
//! A group *feeds no family* when its series plan no family of the registry (for example a lone
//! `vllm:generation_tokens_total`, what a flood of 135 000 series from one job looks like). Such
//! groups (the table's lone groups) may hold at most [`LONE_SHARE`] of `max_active_series` and of
//! the state budget. Whether a new series' group can feed a family is decided with the rest of
//! its request (`Batch::look_up`): a complete engine sent in one request feeds from its first
//! series on.
//!
//! * A series whose group can feed a family is admitted if it fits; if not, the retired states
//!   go (the oldest samples first), then lone groups are evicted: first those that kept their
//!   role set over two later scrapes ([`Group::incomplete`]) or received nothing for
//!   [`UNUSABLE_GRACE_MS`], then any other lone group, so a flood never keeps it out.
//! * A series whose group cannot is admitted only within the lone share and the free room; it
//!   may evict a lone group silent for [`UNUSABLE_GRACE_MS`] (a one-shot flood's), never a retired
//!   state nor a group still being sent. Refused (past the share, or when the room is taken by
//!   groups that feed), it is counted as `feeds_no_family`, so `active_series_limit` and
//!   `memory_budget` count only series real engines lacked room for.
//!
//! The group the new series belongs to, and every group the current batch holds, is never the
//! one evicted. Evictions are counted in `vllm_corrector_groups_removed_total{reason="evicted"}`.
//! The preferred candidates are found by one scan of the groups, at most once a second (receive
//! clock), and kept in stacks, so a flood of refused series costs one scan a second, not one per
//! series; the fallback takes the table's list of lone groups, oldest first.

use super::counters::Counters;
use super::retired::RetiredGroups;
use super::table::{Entry, GroupTable};
use super::{EngineConfig, leave};
use crate::group::Group;
use crate::observe::GroupRef;
use crate::reasons::{RejectReason, RemovalReason};

/// How long a group that feeds no family may stay silent before it can be evicted although it is
/// not (yet) [`Group::incomplete`]: a one-shot series never gets the later scrapes that prove it.
pub(crate) const UNUSABLE_GRACE_MS: i64 = 30_000;

/// Groups that feed no family hold at most `1 / LONE_SHARE` of `max_active_series` and of the
/// state budget.
pub(crate) const LONE_SHARE: usize = 4;

/// Least time between two scans for candidates, ms of the receive clock.
const SCAN_INTERVAL_MS: i64 = 1_000;

/// Eviction candidates from the last scan, checked again when popped.
#[derive(Debug, Default)]
pub(crate) struct Evictor {
    /// Lone groups silent for [`UNUSABLE_GRACE_MS`].
    silent: Vec<GroupRef>,
    /// Lone groups [`Group::incomplete`], not silent.
    incomplete: Vec<GroupRef>,
    /// Receive time (ms) of the last scan.
    scanned_ms: Option<i64>,
}

/// The parts of the engine making room uses.
pub(crate) struct Room<'a> {
    pub(crate) config: &'a EngineConfig,
    pub(crate) table: &'a mut GroupTable,
    pub(crate) retired: &'a mut RetiredGroups,
    pub(crate) counters: &'a mut Counters,
    pub(crate) evictor: &'a mut Evictor,
    /// Bytes of the series index (constant while room is made).
    pub(crate) index_bytes: usize,
}

/// Ensures one more series, costing `bytes` of state, fits under `max_active_series` and the
/// state budget, and, when its group cannot feed a family (`feeds` false), under the lone share
/// (module doc). Never evicts `keep` (the group the series joins) nor a group of batch
/// `batch`.
///
/// # Errors
/// The reason the series is refused when no room could be made: `feeds_no_family` for a series
/// whose group cannot feed a family, else `active_series_limit` or `memory_budget`.
pub(crate) fn make_room(
    room: Room<'_>,
    keep: Option<u32>,
    bytes: usize,
    feeds: bool,
    now_ms: i64,
) -> Result<(), RejectReason> {
    let Room {
        config,
        table,
        retired,
        counters,
        evictor,
        index_bytes,
    } = room;
    loop {
        let state = table.bytes() + index_bytes + retired.bytes();
        let over_series = table.series() >= config.max_active_series;
        let over_bytes = state.saturating_add(bytes) > config.max_state_bytes;
        let over_share = !feeds
            && (table.lone_series() >= config.max_active_series / LONE_SHARE
                || table.lone_bytes().saturating_add(bytes) > config.max_state_bytes / LONE_SHARE);
        if !over_series && !over_bytes && !over_share {
            return Ok(());
        }
        if feeds && over_bytes && retired.bytes() > 0 {
            retired.evict(state + bytes - config.max_state_bytes);
            continue;
        }
        let batch = table.batch();
        let Some(victim) = evictor.pick(table, keep, now_ms, batch, feeds) else {
            return Err(if !feeds {
                RejectReason::FeedsNoFamily
            } else if over_series {
                RejectReason::ActiveSeriesLimit
            } else {
                RejectReason::MemoryBudget
            });
        };
        leave(table, retired, victim.slot, false);
        counters.removed(RemovalReason::Evicted);
    }
}

/// True when the group of `entry` is lone and silent for the grace period at `now_ms`.
fn silent(entry: &Entry, now_ms: i64) -> bool {
    entry.lone() && now_ms.saturating_sub(entry.group.last_seen_ms) >= UNUSABLE_GRACE_MS
}

/// True when the group of `entry` is lone and [`Group::incomplete`].
fn incomplete(entry: &Entry) -> bool {
    let group: &Group = &entry.group;
    entry.lone() && group.incomplete()
}

impl Evictor {
    /// A group of `table` that may be evicted now for a series whose group can feed a family
    /// (`feeds`) or not (module doc): never `keep`, nor one batch `batch` holds. `None` when
    /// there is none (for a series that cannot feed, also when none was found by a scan less
    /// than a second ago).
    pub(crate) fn pick(
        &mut self,
        table: &GroupTable,
        keep: Option<u32>,
        now_ms: i64,
        batch: u64,
        feeds: bool,
    ) -> Option<GroupRef> {
        let spare =
            |g: GroupRef| Some(g.slot) != keep && table.get(g).is_some_and(|e| e.batch != batch);
        loop {
            if let Some(g) = self.silent.pop() {
                if spare(g) && table.get(g).is_some_and(|e| silent(e, now_ms)) {
                    return Some(g);
                }
                continue;
            }
            if feeds && let Some(g) = self.incomplete.pop() {
                if spare(g) && table.get(g).is_some_and(incomplete) {
                    return Some(g);
                }
                continue;
            }
            if self
                .scanned_ms
                .is_none_or(|t| now_ms.saturating_sub(t) >= SCAN_INTERVAL_MS)
            {
                self.scan(table, now_ms);
                if !self.silent.is_empty() || (feeds && !self.incomplete.is_empty()) {
                    continue;
                }
            }
            if !feeds {
                return None;
            }
            // Any lone group, the earliest listed first.
            return table.lone_slots().iter().find_map(|&slot| {
                let g = GroupRef {
                    slot,
                    generation: table.generation(slot),
                };
                spare(g).then_some(g)
            });
        }
    }

    /// Collects the lone groups that are silent or incomplete now, into the stacks (the first
    /// listed on top).
    fn scan(&mut self, table: &GroupTable, now_ms: i64) {
        self.scanned_ms = Some(now_ms);
        self.silent.clear();
        self.incomplete.clear();
        for &slot in table.lone_slots().iter().rev() {
            let g = GroupRef {
                slot,
                generation: table.generation(slot),
            };
            let Some(entry) = table.get(g) else { continue };
            if silent(entry, now_ms) {
                self.silent.push(g);
            } else if incomplete(entry) {
                self.incomplete.push(g);
            }
        }
    }
}
