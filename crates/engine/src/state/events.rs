//! The engine's pending events ([`crate::EngineEvent`]) and the groups that took samples since
//! they were last taken: both bounded, so an engine nobody drains stays bounded
//! ([`MAX_QUEUED_EVENTS`]).

use std::collections::VecDeque;

use crate::observe::{EngineEvent, GroupMeta, GroupRef};

/// Most events held between two [`super::Engine::take_events`] calls; beyond it the oldest are
/// dropped and counted ([`Events::dropped`]).
pub(crate) const MAX_QUEUED_EVENTS: usize = 4096;

/// Pending events and touched groups.
#[derive(Debug, Default)]
pub(crate) struct Events {
    queue: VecDeque<EngineEvent>,
    /// Groups that took samples (or were refused one) since the last [`Events::take_touched`].
    touched: Vec<GroupRef>,
    /// Events dropped because the queue was full, since start.
    dropped: u64,
}

impl Events {
    /// Queues `event`, dropping the oldest when [`MAX_QUEUED_EVENTS`] are held.
    pub(crate) fn push(&mut self, event: EngineEvent) {
        if self.queue.len() >= MAX_QUEUED_EVENTS {
            self.queue.pop_front();
            self.dropped += 1;
        }
        self.queue.push_back(event);
    }

    /// Every queued event, oldest first.
    pub(crate) fn take(&mut self) -> Vec<EngineEvent> {
        self.queue.drain(..).collect()
    }

    /// Events dropped since start.
    #[cfg(test)]
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Queues `group` (with its bookkeeping `meta`) for the next check of events, once.
    pub(crate) fn touch(&mut self, group: GroupRef, meta: &mut GroupMeta) {
        if !meta.touched {
            meta.touched = true;
            self.touched.push(group);
        }
    }

    /// Bounds the touched list: past `slots` (the table's slots) plus [`MAX_QUEUED_EVENTS`]
    /// entries, those of groups that left (`live` false) are dropped, so an engine whose events
    /// nobody takes stays bounded under churn.
    pub(crate) fn bound_touched(&mut self, slots: usize, live: impl Fn(GroupRef) -> bool) {
        if self.touched.len() > slots + MAX_QUEUED_EVENTS {
            self.touched.retain(|g| live(*g));
        }
    }

    /// The groups touched since the last call.
    pub(crate) fn take_touched(&mut self) -> Vec<GroupRef> {
        std::mem::take(&mut self.touched)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::GroupRef;

    fn removed(n: u32) -> EngineEvent {
        EngineEvent::CounterReset {
            labels: vec![("engine".to_owned(), n.to_string())].into(),
        }
    }

    #[test]
    fn the_queue_keeps_the_newest_events_and_counts_the_dropped() {
        let mut events = Events::default();
        for n in 0..MAX_QUEUED_EVENTS as u32 + 10 {
            events.push(removed(n));
        }
        assert_eq!(events.dropped(), 10);
        let taken = events.take();
        assert_eq!(taken.len(), MAX_QUEUED_EVENTS);
        assert_eq!(taken[0], removed(10));
        assert!(events.take().is_empty());
    }

    #[test]
    fn a_group_is_touched_once_and_the_list_of_groups_that_left_is_bounded() {
        let mut events = Events::default();
        let mut meta = GroupMeta::new(0);
        let group = GroupRef {
            slot: 0,
            generation: 0,
        };
        events.touch(group, &mut meta);
        events.touch(group, &mut meta);
        assert_eq!(events.take_touched(), vec![group]);
        for slot in 0..MAX_QUEUED_EVENTS as u32 + 2 {
            let g = GroupRef {
                slot,
                generation: 1,
            };
            events.touch(g, &mut GroupMeta::new(0));
        }
        events.bound_touched(1, |g| g.slot == 7);
        assert_eq!(events.take_touched().len(), 1);
    }
}
