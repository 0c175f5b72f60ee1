//! The engine's counters since start: frames dropped, counter resets, output holds and resets by
//! family, groups removed by reason, and the newest sample time. Only ever added to; read by
//! [`super::Engine::stats`] for the self-metrics.

use crate::api::FAMILIES;
use crate::group::GroupEvents;
use crate::reasons::RemovalReason;

/// Counts since start.
#[derive(Debug, Clone, Default)]
pub(crate) struct Counters {
    /// Frames dropped before every input arrived.
    pub(crate) frames_dropped: u64,
    /// Counter resets seen in any input.
    pub(crate) counter_resets: u64,
    /// Outputs held above their computed value, by [`crate::Family::index`] (`crate::hold`).
    pub(crate) output_holds: [u64; FAMILIES],
    /// Outputs that restarted below what was served because an input of the family fell.
    pub(crate) output_resets: [u64; FAMILIES],
    /// Groups removed, by [`RemovalReason::index`].
    pub(crate) removed: [u64; RemovalReason::ALL.len()],
    /// Newest sample timestamp applied (ms since the epoch).
    pub(crate) newest_sample_ms: Option<i64>,
}

impl Counters {
    /// Adds what one group reported of a batch of samples.
    pub(crate) fn absorb(&mut self, events: &GroupEvents) {
        self.frames_dropped += events.frames_dropped;
        self.counter_resets += events.counter_resets;
        for (total, n) in self.output_holds.iter_mut().zip(events.holds) {
            *total += n;
        }
        for (total, n) in self.output_resets.iter_mut().zip(events.output_resets) {
            *total += n;
        }
    }

    /// Counts one group removed for `reason`.
    pub(crate) fn removed(&mut self, reason: RemovalReason) {
        self.removed[reason.index()] += 1;
    }

    /// Notes that a sample stamped `ts` (ms) was applied.
    pub(crate) fn sample_at(&mut self, ts: i64) {
        self.newest_sample_ms = self.newest_sample_ms.max(Some(ts));
    }
}
