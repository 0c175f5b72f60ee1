//! The periodic sweep: groups that went idle or missed their scrapes leave, and with them the
//! indexed series that pointed at them. A child of `state.rs`.

use super::*;

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
        if let Some(newest) = self.newest_sample_ms {
            self.retired
                .expire(newest.saturating_sub(self.config.idle_timeout_ms));
        }
        let (missed, min_wait) = (
            self.config.missed_scrapes,
            self.config.missed_scrapes_min_wait_ms,
        );
        let leaving: Vec<(u32, RemovalReason)> = (0..self.slots.len() as u32)
            .filter_map(|i| {
                let e = self.slots[i as usize].entry.as_ref()?;
                if e.group.last_seen_ms < cutoff {
                    Some((i, RemovalReason::Idle))
                } else {
                    e.meta
                        .missed_scrapes(now_ms, missed, min_wait)
                        .then_some((i, RemovalReason::MissedScrapes))
                }
            })
            .collect();
        let idle: Vec<u32> = leaving.iter().map(|(i, _)| *i).collect();
        for (slot, reason) in &leaving {
            self.events.push(EngineEvent::GroupRemoved {
                labels: self.group(*slot).labels.clone(),
                reason: *reason,
            });
            self.remove_retiring(*slot, true);
        }
        // Forget the indexed series of every removed group (idle here, stale since the last
        // sweep), and unused series not seen within the idle timeout.
        let slots = &self.slots;
        self.index.sweep(cutoff, |slot, generation| {
            slots
                .get(slot as usize)
                .is_some_and(|s| s.generation == generation && s.entry.is_some())
        });
        let missed = leaving
            .iter()
            .filter(|(_, r)| *r == RemovalReason::MissedScrapes)
            .count();
        self.removed_missed_scrapes += missed as u64;
        self.removed_idle += (idle.len() - missed) as u64;
        idle.len()
    }
}
