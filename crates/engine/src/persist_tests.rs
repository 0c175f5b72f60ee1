//! The stateful rule's state across a restart (`crates/engine/src/state/persist.rs`): an engine serialised and
//! restored halfway through a sequence gives exactly the outputs of one that never stopped.

use super::test_support::*;
use super::*;

fn scaled(raw: &[Raw], m: f64) -> Vec<Raw> {
    raw.iter().map(|(l, v)| (l.clone(), v * m)).collect()
}

/// Four scrapes, 15 s apart, whose acceptance varies (2 up to t1, 1.25 in t1–t2), so buckets
/// re-seeded from cumulative counts differ from the accumulated ones.
fn sequence() -> Vec<Vec<(Raw, i64)>> {
    let t2 = t2_with_low_acceptance();
    let scrapes = [
        scrape("0", 1.0, true),
        t2.clone(),
        scaled(&t2, 1.5),
        scaled(&t2, 2.0),
    ];
    scrapes
        .into_iter()
        .zip([1_000, 16_000, 31_000, 46_000])
        .map(|(raw, ts)| raw.into_iter().map(|r| (r, ts)).collect())
        .collect()
}

fn run(engine: &mut Engine, scrapes: &[Vec<(Raw, i64)>]) {
    let mut report = IngestReport::default();
    for s in scrapes {
        feed(engine, s, &mut report);
    }
    assert_eq!(report.applied + report.rejected_total(), report.received);
}

#[test]
fn restored_acceptance_buckets_continue_exactly_as_without_a_restart() {
    let scrapes = sequence();
    let mut uninterrupted = Engine::new(crate::test_support::config());
    run(&mut uninterrupted, &scrapes);

    let mut before = Engine::new(crate::test_support::config());
    run(&mut before, &scrapes[..2]);
    let document = before.state_document();
    let mut after = Engine::new(crate::test_support::config());
    assert_eq!(after.restore_state(&document, 0).unwrap(), 1);
    run(&mut after, &scrapes[2..]);

    let mut restarted_without_state = Engine::new(crate::test_support::config());
    run(&mut restarted_without_state, &scrapes[2..]);

    let want = outputs(&uninterrupted);
    assert_eq!(want.len(), crate::FAMILIES, "every family");
    assert_eq!(outputs(&after), want, "restored halfway");
    let acceptance = |o: &Outputs| value_of(o, Family::AcceptanceCorrectedItl, "0");
    assert_ne!(
        acceptance(&outputs(&restarted_without_state)),
        acceptance(&want),
        "the test needs a sequence where losing the state shows"
    );
}

#[test]
fn retired_states_are_saved_too_and_bad_documents_restore_nothing() {
    let scrapes = sequence();
    let mut engine = Engine::new(crate::test_support::config());
    run(&mut engine, &scrapes[..2]);
    // Staleness markers for every series of the group: it leaves, its state is retired.
    let stale = f64::from_bits(STALE_NAN_BITS);
    let markers: Vec<_> = scrapes[1]
        .iter()
        .map(|((l, _), _)| ((l.clone(), stale), 20_000))
        .collect();
    feed(&mut engine, &markers, &mut IngestReport::default());
    assert_eq!(engine.stats().groups, 0);
    let document = engine.state_document();
    let mut restored = Engine::new(crate::test_support::config());
    assert_eq!(
        restored.restore_state(&document, 0).unwrap(),
        1,
        "the retired state"
    );
    run(&mut restored, &scrapes[2..]);
    let mut uninterrupted = Engine::new(crate::test_support::config());
    run(&mut uninterrupted, &scrapes);
    assert_eq!(outputs(&restored), outputs(&uninterrupted));

    let mut fresh = Engine::new(crate::test_support::config());
    for (bad, version) in [
        ("", false),
        ("{\"version\": 1, \"groups\": [{\"labels\": []}]}", false),
        (&document[..document.len() / 2], false),
        (
            &document.replacen("\"version\":1", "\"version\":2", 1),
            true,
        ),
    ] {
        let err = fresh.restore_state(bad, 0).unwrap_err();
        assert_eq!(
            matches!(err, StateError::Version { found: 2 }),
            version,
            "{err}"
        );
    }
    // An inconsistent state (one bucket short of its bounds) is refused whole.
    let short = document.replacen("\"acc\":[", "\"acc\":[0.5,", 1);
    assert!(matches!(
        fresh.restore_state(&short, 0),
        Err(StateError::Corrupt(_))
    ));
    assert_eq!(fresh.state_document(), "{\"version\":1,\"groups\":[]}");
}

#[test]
fn a_restored_state_is_written_again_by_a_group_stopped_before_it_settles() {
    let scrapes = sequence();
    let mut uninterrupted = Engine::new(crate::test_support::config());
    run(&mut uninterrupted, &scrapes);
    let mut first = Engine::new(crate::test_support::config());
    run(&mut first, &scrapes[..2]);
    // Restarted with the default settling, stopped again one scrape later: nothing served yet.
    let mut second = Engine::new(EngineConfig::default());
    assert_eq!(second.restore_state(&first.state_document(), 0).unwrap(), 1);
    run(&mut second, &scrapes[2..3]);
    assert!(outputs(&second).is_empty(), "settling");
    let mut third = Engine::new(crate::test_support::config());
    assert_eq!(
        third.restore_state(&second.state_document(), 0).unwrap(),
        1,
        "the restored state is written again"
    );
    run(&mut third, &scrapes[3..]);
    // Scrapes 3 and 4 are T2 × 1.5 and × 2: the one interval T2 → 4 the third engine adds equals
    // the two the uninterrupted one added.
    let acceptance = |o: &Outputs| value_of(o, Family::AcceptanceCorrectedItl, "0");
    assert_eq!(
        acceptance(&outputs(&third)),
        acceptance(&outputs(&uninterrupted))
    );
    let mut forgetful = Engine::new(crate::test_support::config());
    run(&mut forgetful, &scrapes[3..]);
    assert_ne!(
        acceptance(&outputs(&forgetful)),
        acceptance(&outputs(&uninterrupted)),
        "the test needs a sequence where losing the state shows"
    );
}
