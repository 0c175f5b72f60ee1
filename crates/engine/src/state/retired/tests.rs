//! Tests of `retired.rs`: what removed groups keep is bounded by sample time and by bytes, the
//! oldest samples leaving first.

use super::*;
use crate::Family;
use crate::rules::{Committed, RuleState};

fn labels(engine: &str) -> GroupLabels {
    vec![("engine".to_owned(), engine.to_owned())].into()
}

/// A retired state whose newest sample is at `ts` ms, with `buckets` accumulated buckets.
fn retired(ts: i64, buckets: usize) -> Retired {
    let mut states: [Option<RuleState>; crate::FAMILIES] = Default::default();
    states[Family::AcceptanceCorrectedItl.index()] = Some(RuleState::new(Committed {
        ts: Some(ts),
        point: None,
        bounds: vec![0.0; buckets.saturating_sub(1)],
        acc: vec![0.0; buckets],
    }));
    Retired {
        states,
        holds: Default::default(),
        newest_sample_ms: ts,
    }
}

#[test]
fn a_state_expires_by_its_newest_sample_time_not_by_when_it_was_kept() {
    let mut r = RetiredGroups::default();
    r.insert(labels("a"), retired(1_000, 4));
    r.insert(labels("b"), retired(5_000, 4));
    // Cutoff 3 000: "a" (newest sample 1 000) expires, "b" (5 000) stays.
    assert_eq!(r.expire(3_000), 1);
    assert!(r.take(&labels("a")).is_none());
    assert_eq!(r.take(&labels("b")), Some(retired(5_000, 4)));
    assert_eq!((r.len(), r.bytes()), (0, 0), "every byte given back");
}

#[test]
fn bytes_count_labels_and_state_and_eviction_drops_the_oldest_samples_first() {
    let mut r = RetiredGroups::default();
    r.insert(labels("old"), retired(1_000, 100));
    r.insert(labels("new"), retired(9_000, 100));
    r.insert(labels("mid"), retired(5_000, 100));
    // Per entry: ENTRY_BYTES + labels ("engine" 6 and a 3-letter value, two String headers) + the
    // state (size_of Retired, the boxed acceptance state and its 100 + 99 floats) and half as much
    // again.
    let state = size_of::<Retired>() + size_of::<Committed>() + (100 + 99) * 8;
    let one = ENTRY_BYTES + 6 + 3 + 2 * size_of::<String>() + state * 3 / 2;
    assert_eq!(r.bytes(), 3 * one);
    // Freeing one byte drops one whole entry: the one with the oldest samples.
    assert_eq!(r.evict(1), one);
    assert!(r.take(&labels("old")).is_none());
    assert_eq!(r.len(), 2);
    // The next one is "mid" (5 000), not "new" (9 000) though "mid" came later.
    assert_eq!(r.evict(1), one);
    assert!(r.take(&labels("new")).is_some());
    assert_eq!(r.bytes(), 0);
}

#[test]
fn a_group_retired_again_replaces_its_earlier_state() {
    let mut r = RetiredGroups::default();
    r.insert(labels("a"), retired(1_000, 4));
    r.insert(labels("a"), retired(2_000, 8));
    assert_eq!(r.len(), 1);
    // The older entry's order slot went with it: expiring before 1 500 drops nothing.
    assert_eq!(r.expire(1_500), 0);
    assert_eq!(r.take(&labels("a")), Some(retired(2_000, 8)));
}

#[test]
fn the_map_shrinks_as_entries_leave_so_its_table_stays_near_what_is_accounted() {
    // Guards the table a restore of 350 000 groups left at its largest: 10 000 entries in, 9 900
    // out, oldest first.
    let mut r = RetiredGroups::new(usize::MAX);
    for i in 0..10_000 {
        r.insert(labels(&i.to_string()), retired(i, 1));
    }
    let full = r.entries.capacity();
    assert!(full >= 10_000);
    while r.len() > 100 {
        r.evict(1);
    }
    assert!(
        r.entries.capacity() <= 400,
        "{} of {full}",
        r.entries.capacity()
    );
    // Every slot of the table within what each entry is accounted.
    let slot = size_of::<(GroupLabels, Entry)>() + 1;
    assert!(r.entries.capacity() * 8 / 7 * slot <= r.len() * ENTRY_BYTES);
}
