//! Making room at `limits.max_active_series` (`docs/RELIABILITY.md`, "A cardinality flood"):
//! before a new series is refused, a group that can feed no family is evicted to make room.
//!
//! Such a group holds series whose role set plans no family of the registry (for example a lone
//! `vllm:generation_tokens_total`, what a flood of 135 000 series from one job looks like), and it
//! has either kept that role set over more than one later scrape ([`Group::incomplete`]) or
//! received nothing for [`UNUSABLE_GRACE_MS`]. A real engine's group that is still arriving
//! within one scrape is neither, so it is never evicted, and once its series are all in it plans
//! families. The group the new series belongs to is never the one evicted. Evictions are counted
//! in `vllm_corrector_groups_removed_total{reason="evicted"}`.
//!
//! Candidates are found by one scan of the groups, at most once a second (receive clock), and
//! kept in a stack, so a flood of refused series costs one scan a second, not one per series.

use super::*;

/// How long a group that feeds no family may stay silent before it can be evicted although it is
/// not (yet) [`Group::incomplete`]: a one-shot series never gets the later scrapes that prove it.
pub(crate) const UNUSABLE_GRACE_MS: i64 = 30_000;

/// Least time between two scans for candidates, ms of the receive clock.
const SCAN_INTERVAL_MS: i64 = 1_000;

impl Engine {
    /// True when the group in `slot` may be evicted at `now_ms`.
    fn evictable(&self, slot: u32, now_ms: i64) -> bool {
        let entry = self.slots[slot as usize]
            .entry
            .as_ref()
            .expect("a live slot");
        let group = &entry.group;
        // A group the current batch looked up keeps its series' handles valid (`KnownSeries`).
        entry.batch != self.batches
            && group.feeds_no_family()
            && (group.incomplete()
                || now_ms.saturating_sub(group.last_seen_ms) >= UNUSABLE_GRACE_MS)
    }

    /// Ensures one more series, costing `bytes` of state, fits under `max_active_series` and
    /// the state budget (`max_state_bytes`): retired states go first (the oldest samples first),
    /// then groups that feed no family (never `keep`, the group the new series joins).
    ///
    /// # Errors
    /// The reason the series is refused when no room could be made: `active_series_limit` or
    /// `memory_budget`.
    pub(super) fn make_room(
        &mut self,
        keep: Option<u32>,
        now_ms: i64,
        bytes: usize,
    ) -> Result<(), RejectReason> {
        loop {
            let over_series = self.tracked_series >= self.config.max_active_series;
            let over_bytes = self.state_bytes().saturating_add(bytes) > self.config.max_state_bytes;
            if !over_series && !over_bytes {
                return Ok(());
            }
            if over_bytes && self.retired.bytes() > 0 {
                let need = self.state_bytes() + bytes - self.config.max_state_bytes;
                self.retired.evict(need);
                continue;
            }
            if !self.evict_one(keep, now_ms) {
                return Err(if over_series {
                    RejectReason::ActiveSeriesLimit
                } else {
                    RejectReason::MemoryBudget
                });
            }
        }
    }

    /// Evicts one group that feeds no family (not `keep`); false when there is none to evict now.
    fn evict_one(&mut self, keep: Option<u32>, now_ms: i64) -> bool {
        loop {
            match self.evictable.pop() {
                Some((slot, generation)) => {
                    if Some(slot) != keep
                        && self.live(slot, generation)
                        && self.evictable(slot, now_ms)
                    {
                        self.remove_retiring(slot, false);
                        self.removed_evicted += 1;
                        return true;
                    }
                }
                None => {
                    if self
                        .evictable_scanned_ms
                        .is_some_and(|t| now_ms.saturating_sub(t) < SCAN_INTERVAL_MS)
                    {
                        return false;
                    }
                    self.evictable_scanned_ms = Some(now_ms);
                    let found: Vec<(u32, u32)> = (0..self.slots.len() as u32)
                        .filter(|i| {
                            Some(*i) != keep
                                && self.slots[*i as usize].entry.is_some()
                                && self.evictable(*i, now_ms)
                        })
                        .map(|i| (i, self.slots[i as usize].generation))
                        .collect();
                    if found.is_empty() {
                        return false;
                    }
                    self.evictable = found;
                }
            }
        }
    }
}
