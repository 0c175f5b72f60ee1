//! The periodic sweep: groups that went idle or missed their scrapes leave, and with them the
//! indexed series that pointed at them. A child of `state.rs`.

use super::*;
use crate::reasons::RemovalReason;

impl Engine {
    /// Drops groups that received no sample for longer than the idle timeout, and groups that
    /// received no new sample for [`EngineConfig::missed_scrapes`] of their own scrape intervals
    /// (but at least [`EngineConfig::missed_scrapes_min_wait_ms`]). Returns how many. Each leaves
    /// what it would need on its return among the retired states, as a stale group does
    /// (docs/ENGINE.md, "Groups that leave and come back"); a retired state whose newest sample is
    /// older than the engine's newest by more than the idle timeout expires (sample time, not the
    /// wall clock: a state restored at start expires as it would have without the restart).
    ///
    /// `now_ms` is the wall clock in ms since the epoch, as passed to [`Engine::ingest`].
    pub fn sweep_idle(&mut self, now_ms: i64) -> usize {
        let cutoff = now_ms.saturating_sub(self.config.idle_timeout_ms);
        if let Some(newest) = self.counters.newest_sample_ms {
            self.retired
                .expire(newest.saturating_sub(self.config.idle_timeout_ms));
        }
        let (missed, min_wait) = (
            self.config.missed_scrapes,
            self.config.missed_scrapes_min_wait_ms,
        );
        let leaving: Vec<(u32, RemovalReason)> = self
            .table
            .iter()
            .filter_map(|(group, e)| {
                if e.group.last_seen_ms < cutoff {
                    Some((group.slot, RemovalReason::Idle))
                } else {
                    e.meta
                        .missed_scrapes(now_ms, missed, min_wait)
                        .then_some((group.slot, RemovalReason::MissedScrapes))
                }
            })
            .collect();
        for &(slot, reason) in &leaving {
            if let Some(labels) = leave(&mut self.table, &mut self.retired, slot, true) {
                self.events
                    .push(EngineEvent::GroupRemoved { labels, reason });
                self.counters.removed(reason);
            }
        }
        // Forget the indexed series of every removed group (idle here, stale since the last
        // sweep), and unused series not seen within the idle timeout.
        let table = &self.table;
        self.index
            .sweep(cutoff, |slot, generation| table.live(slot, generation));
        leaving.len()
    }
}
