//! Making room for a new series (`docs/RELIABILITY.md`, "A cardinality flood"): before a new
//! series is refused at `max_active_series` or the state budget, retired states go (oldest samples
//! first), then a group that can feed no family is evicted.
//!
//! Such a group holds series whose role set plans no family of the registry (for example a lone
//! `vllm:generation_tokens_total`, what a flood of 135 000 series from one job looks like), and it
//! has either kept that role set over more than one later scrape ([`Group::incomplete`]) or
//! received nothing for [`UNUSABLE_GRACE_MS`]. A real engine's group that is still arriving
//! within one scrape is neither, so it is never evicted, and once its series are all in it plans
//! families. The group the new series belongs to, and every group the current batch holds, is
//! never the one evicted. Evictions are counted in
//! `vllm_corrector_groups_removed_total{reason="evicted"}`.
//!
//! Candidates are found by one scan of the groups, at most once a second (receive clock), and
//! kept in a stack, so a flood of refused series costs one scan a second, not one per series.

use super::table::{Entry, GroupTable};
use crate::group::Group;
use crate::observe::GroupRef;

/// How long a group that feeds no family may stay silent before it can be evicted although it is
/// not (yet) [`Group::incomplete`]: a one-shot series never gets the later scrapes that prove it.
pub(crate) const UNUSABLE_GRACE_MS: i64 = 30_000;

/// Least time between two scans for candidates, ms of the receive clock.
const SCAN_INTERVAL_MS: i64 = 1_000;

/// Eviction candidates from the last scan, checked again when popped.
#[derive(Debug, Default)]
pub(crate) struct Evictor {
    candidates: Vec<GroupRef>,
    /// Receive time (ms) of the last scan.
    scanned_ms: Option<i64>,
}

/// True when the group of `entry` may be evicted at `now_ms` during batch `batch`.
fn evictable(entry: &Entry, now_ms: i64, batch: u64) -> bool {
    let group: &Group = &entry.group;
    entry.batch != batch
        && group.feeds_no_family()
        && (group.incomplete() || now_ms.saturating_sub(group.last_seen_ms) >= UNUSABLE_GRACE_MS)
}

impl Evictor {
    /// A group of `table` that may be evicted now (never `keep`, nor one batch `batch` holds);
    /// `None` when there is none, or none was found by a scan less than a second ago.
    pub(crate) fn pick(
        &mut self,
        table: &GroupTable,
        keep: Option<u32>,
        now_ms: i64,
        batch: u64,
    ) -> Option<GroupRef> {
        loop {
            match self.candidates.pop() {
                Some(group) => {
                    if Some(group.slot) != keep
                        && table
                            .get(group)
                            .is_some_and(|e| evictable(e, now_ms, batch))
                    {
                        return Some(group);
                    }
                }
                None => {
                    if self
                        .scanned_ms
                        .is_some_and(|t| now_ms.saturating_sub(t) < SCAN_INTERVAL_MS)
                    {
                        return None;
                    }
                    self.scanned_ms = Some(now_ms);
                    self.candidates = table
                        .iter()
                        .filter(|(g, e)| Some(g.slot) != keep && evictable(e, now_ms, batch))
                        .map(|(g, _)| g)
                        .collect();
                    if self.candidates.is_empty() {
                        return None;
                    }
                }
            }
        }
    }
}
