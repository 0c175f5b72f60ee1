//! Where a series new to the engine goes, and the room it takes (docs/ENGINE.md, "The write
//! path"; docs/RELIABILITY.md, "The memory budget"): its group, found or created (resuming what a
//! retired group left), the state budget it is charged to, and the limit that refuses it.

use super::*;

impl Batch<'_> {
    /// Where the series `new` goes: the group in `existing` (or a new group of `labels`), once
    /// room is made for it. A series the group does not hold is refused, creating nothing, when
    /// `has_samples` and no room can be made.
    pub(super) fn route(
        &mut self,
        existing: Option<u32>,
        labels: &[Label<'_>],
        new: &New,
        has_samples: bool,
    ) -> Route {
        let role = new.role;
        let known = existing.is_some_and(|slot| self.parts.table.at(slot).group.has_role(role));
        if !known
            && existing.is_some_and(|slot| {
                self.parts.table.at(slot).group.series_of_input(role) >= crate::MAX_SERIES_PER_INPUT
            })
        {
            return Route::Limited(RejectReason::TooManyBuckets);
        }
        if !known && has_samples {
            // A new series, and a new group when its group is not held yet.
            let group = match existing {
                Some(_) => 0,
                None => {
                    self.parts.table.group_bytes()
                        + group_label_bytes(labels, &self.parts.config.drop_labels)
                        + self.parts.table.new_slot_growth()
                }
            };
            let bytes = self.parts.table.role_bytes() + group;
            if let Err(reason) = self.make_room(existing, bytes, new.feeds) {
                if let Some(slot) = existing {
                    self.mark_limited(slot, reason);
                }
                return Route::Limited(reason);
            }
        }
        match existing {
            Some(slot) => Route::Group(slot),
            None => Route::Group(self.create_group(labels, new.group.0)),
        }
    }

    /// A new group for the series `labels` (group-label hash `hash`), resuming what the same
    /// group left when it was retired.
    pub(super) fn create_group(&mut self, labels: &[Label<'_>], hash: u64) -> u32 {
        let dropped = &self.parts.config.drop_labels;
        let owned: Vec<(String, String)> = crate::classify::group_labels(labels, dropped)
            .map(|l| (l.name.to_owned(), l.value.to_owned()))
            .collect();
        let resumed = self.parts.retired.take(&owned);
        let mut group = Group::new(owned, self.now_ms);
        group.set_slos(&self.parts.config.slos);
        if let Some(retired) = resumed {
            group.resume(retired);
        }
        self.parts
            .table
            .insert(hash, group, GroupMeta::new(self.now_ms))
    }

    /// Bytes of the state budget not yet accounted.
    pub(super) fn state_room(&self) -> usize {
        self.parts
            .config
            .max_state_bytes
            .saturating_sub(self.state_bytes())
    }

    pub(super) fn state_bytes(&self) -> usize {
        self.parts.table.bytes() + self.parts.index.bytes() + self.parts.retired.bytes()
    }

    /// [`room::make_room`] for one more series costing `bytes`, of a group that can feed a family
    /// (`feeds`) or not, never evicting `keep`.
    ///
    /// # Errors
    /// Why the series is refused when no room could be made.
    pub(super) fn make_room(
        &mut self,
        keep: Option<u32>,
        bytes: usize,
        feeds: bool,
    ) -> Result<(), RejectReason> {
        let parts = &mut self.parts;
        let room = room::Room {
            config: parts.config,
            table: parts.table,
            retired: parts.retired,
            counters: parts.counters,
            evictor: parts.room,
            index_bytes: parts.index.bytes(),
        };
        room::make_room(room, keep, bytes, feeds, self.now_ms)
    }

    /// Records that a limit (`reason`) refused a new series of the group in `slot`, and queues
    /// the group for the next [`Engine::take_events`] (which reports it once). A reason that is
    /// no limit (`feeds_no_family`: the group feeds nothing to withhold) is not recorded.
    pub(super) fn mark_limited(&mut self, slot: u32, reason: RejectReason) {
        if reason.limit_name().is_none() {
            return;
        }
        let now_ms = self.now_ms;
        let generation = self.parts.table.generation(slot);
        let entry = self.parts.table.at_mut(slot);
        entry.meta.limited = Some((reason, now_ms));
        let group = GroupRef { slot, generation };
        self.parts.events.touch(group, &mut entry.meta);
        self.bound_touched();
    }

    /// [`Events::bound_touched`] against the table.
    pub(super) fn bound_touched(&mut self) {
        let table = &*self.parts.table;
        self.parts
            .events
            .bound_touched(table.slot_count(), |g| table.get(g).is_some());
    }
}
