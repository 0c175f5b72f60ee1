//! What removed groups leave for their return ([`Retired`]: the acceptance-corrected state and
//! each family's hold), by group labels (docs/ENGINE.md, "Groups that leave and come back").
//!
//! Bounded two ways: by sample time (an entry whose newest sample is older than the engine's
//! newest sample by more than `engine.idle_timeout` expires, whatever the wall clock, so a state
//! restored from `--storage.path` expires as it would have without the restart), and by bytes
//! (the engine's state budget: when room is needed, the entries with the oldest samples go first,
//! never a live group's state).

use std::collections::BTreeMap;

use hashbrown::HashMap;

use crate::group::Retired;
use crate::observe::GroupLabels;

/// Bytes an entry costs beyond its [`Retired::heap_bytes`] (which counts the boxed state): its
/// map slot (labels, box, order, bytes: 48 bytes, the table at most 4 × 8 / 7 slots per entry,
/// as it shrinks when a quarter full: [`RetiredGroups::pop_oldest`]), its order entry, the
/// labels `Arc` and its two `String`s per label (their text is counted separately).
const ENTRY_BYTES: usize = 512;

/// The retired groups' states.
#[derive(Debug, Default)]
pub(crate) struct RetiredGroups {
    entries: HashMap<GroupLabels, Entry>,
    /// `(newest sample ms, insertion number)` → labels: the eviction order, oldest samples first.
    order: BTreeMap<(i64, u64), GroupLabels>,
    inserted: u64,
    bytes: usize,
    /// Entries dropped since start: `[expired, evicted]` ([`RetiredGroups::dropped`]).
    dropped: [u64; 2],
    /// Most bytes the entries may take ([`RetiredGroups::fit`]): a quarter of the state budget.
    cap: usize,
}

#[derive(Debug)]
struct Entry {
    /// Boxed, so a slot of the map (which keeps its size as entries leave, until it shrinks)
    /// holds a pointer, not the state.
    retired: Box<Retired>,
    order: (i64, u64),
    bytes: usize,
}

/// The bytes a group's labels take: their text and two `String` headers each.
pub(crate) fn label_bytes(labels: &[(String, String)]) -> usize {
    labels
        .iter()
        .map(|(n, v)| n.capacity() + v.capacity() + 2 * size_of::<String>())
        .sum()
}

impl RetiredGroups {
    /// An empty set of at most `cap` bytes.
    pub(crate) fn new(cap: usize) -> RetiredGroups {
        RetiredGroups {
            cap,
            ..RetiredGroups::default()
        }
    }

    /// Changes the cap (a reload), dropping the oldest entries past it.
    pub(crate) fn set_cap(&mut self, cap: usize) {
        self.cap = cap;
        self.fit();
    }

    /// Drops the oldest entries until they take at most the cap, counted as evicted.
    pub(crate) fn fit(&mut self) {
        let over = self.bytes.saturating_sub(self.cap);
        if over > 0 {
            self.evict(over);
        }
    }

    /// [`RetiredGroups::fit`] for a restore: returns how many entries were dropped, which the
    /// caller counts (`vllm_corrector_state_loads_ignored_total`), not as evicted.
    pub(crate) fn fit_restored(&mut self) -> usize {
        let mut n = 0;
        while self.bytes > self.cap && self.pop_oldest().is_some() {
            n += 1;
        }
        n
    }

    /// Entries held.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Bytes held, as accounted ([`Retired::heap_bytes`] and the labels).
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Entries dropped since start, `[expired by sample time, evicted for the state budget]`.
    pub(crate) fn dropped(&self) -> [u64; 2] {
        self.dropped
    }

    /// Keeps `retired` for `labels`, replacing what the same labels left before.
    pub(crate) fn insert(&mut self, labels: GroupLabels, retired: Retired) {
        self.take(&labels);
        self.inserted += 1;
        let order = (retired.newest_sample_ms, self.inserted);
        // The heap figure counts vectors by capacity but not the allocator's own rounding nor the
        // order tree: half more covers them (checked by `examples/state_bytes.rs retired`).
        let bytes = ENTRY_BYTES + label_bytes(&labels) + retired.heap_bytes() * 3 / 2;
        self.bytes += bytes;
        self.order.insert(order, labels.clone());
        self.entries.insert(
            labels,
            Entry {
                retired: Box::new(retired),
                order,
                bytes,
            },
        );
    }

    /// What `labels` left, taken out.
    pub(crate) fn take(&mut self, labels: &[(String, String)]) -> Option<Retired> {
        let entry = self.entries.remove(labels)?;
        self.order.remove(&entry.order);
        self.bytes -= entry.bytes;
        self.shrink();
        Some(*entry.retired)
    }

    /// Halves the map's table once it is a quarter full: a restore or a churn that filled it
    /// would otherwise keep its largest table however few entries stay (21 MB after a restore of
    /// 350 000 groups left 7 600, measured with heaptrack under the attack soak).
    fn shrink(&mut self) {
        let (len, capacity) = (self.entries.len(), self.entries.capacity());
        if capacity > 64 && len < capacity / 4 {
            self.entries.shrink_to(len * 2);
        }
    }

    /// Drops the entries whose newest sample is older than `cutoff_ms` (sample time); returns how
    /// many.
    pub(crate) fn expire(&mut self, cutoff_ms: i64) -> usize {
        let mut n = 0;
        while let Some((&(ts, _), _)) = self.order.first_key_value() {
            if ts >= cutoff_ms {
                break;
            }
            self.pop_oldest();
            n += 1;
        }
        self.dropped[0] += n as u64;
        n
    }

    /// Drops entries, oldest samples first, until `bytes` are freed or none is left; returns the
    /// bytes freed.
    pub(crate) fn evict(&mut self, bytes: usize) -> usize {
        let mut freed = 0;
        while freed < bytes {
            match self.pop_oldest() {
                Some(n) => {
                    freed += n;
                    self.dropped[1] += 1;
                }
                None => break,
            }
        }
        freed
    }

    /// Drops the entry with the oldest samples; returns its bytes.
    fn pop_oldest(&mut self) -> Option<usize> {
        let (_, labels) = self.order.pop_first()?;
        let entry = self.entries.remove(&labels)?;
        self.bytes -= entry.bytes;
        self.shrink();
        Some(entry.bytes)
    }

    /// Every entry, for `--storage.path`.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&GroupLabels, &Retired)> {
        self.entries.iter().map(|(l, e)| (l, &*e.retired))
    }
}

#[cfg(test)]
mod tests;
