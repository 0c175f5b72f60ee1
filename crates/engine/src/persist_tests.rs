//! What groups keep across a restart (`crates/engine/src/state/persist.rs`): an engine serialised
//! and restored halfway through a sequence gives exactly the outputs of one that never stopped, and
//! a state file that is not what an engine writes restores nothing of what is wrong.

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
    let document = to_lines(&before);
    let mut after = Engine::new(crate::test_support::config());
    assert_eq!(from_lines(&mut after, &document, 0).unwrap(), 1);
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

/// `document` (format 3, [`to_lines`]) as format 2 wrote it: each record's acceptance-corrected
/// state under `acceptance`, no `states`.
fn as_format_2(document: &str) -> String {
    let mut lines = document.lines();
    let mut out = String::from("{\"version\":2}\n");
    lines.next();
    for line in lines {
        let mut record: serde_json::Value = serde_json::from_str(line).unwrap();
        let state = record["state"].as_object_mut().unwrap();
        let mut states = state.remove("states").unwrap();
        let acceptance = states
            .as_object_mut()
            .unwrap()
            .remove(Family::AcceptanceCorrectedItl.name())
            .unwrap();
        // Format 2 had no SLO counters: their state starts afresh.
        states.as_object_mut().unwrap().remove("vllm_corrected_slo");
        assert!(
            states.as_object().unwrap().is_empty(),
            "one stateful family"
        );
        state.insert("acceptance".to_owned(), acceptance);
        out.push_str(&record.to_string());
        out.push('\n');
    }
    out
}

#[test]
fn a_state_file_of_format_2_restores_the_acceptance_state() {
    let scrapes = sequence();
    let mut uninterrupted = Engine::new(crate::test_support::config());
    run(&mut uninterrupted, &scrapes);
    let mut before = Engine::new(crate::test_support::config());
    run(&mut before, &scrapes[..2]);
    let old = as_format_2(&to_lines(&before));
    assert!(old.contains("\"acceptance\":{"), "{old}");
    let mut after = Engine::new(crate::test_support::config());
    assert_eq!(from_lines(&mut after, &old, 0).unwrap(), 1);
    run(&mut after, &scrapes[2..]);
    // Every family as without the restart, but the SLO counters: a format-2 file has no state
    // of theirs, so their finished requests, goodput and SLI rows count from the restart (a
    // counter reset to Prometheus).
    let slo = Family::named("vllm_corrected_slo");
    let (after, uninterrupted) = (outputs(&after), outputs(&uninterrupted));
    let without = |o: &Outputs| {
        o.iter()
            .filter(|(f, _, _)| *f != slo)
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(without(&after), without(&uninterrupted));
    let counters = |o: &Outputs| match &o.iter().find(|(f, _, _)| *f == slo).expect("served").2 {
        DerivedValue::Counters { values, .. } => values.clone(),
        other => panic!("{other:?}"),
    };
    let (a, u) = (counters(&after), counters(&uninterrupted));
    assert!(
        a[0] < u[0] && a[1] <= u[1],
        "TPOT events since the restart: {a:?} {u:?}"
    );
    assert!(a[2] < u[2], "finished since the restart: {a:?} {u:?}");
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
    let document = to_lines(&engine);
    let mut restored = Engine::new(crate::test_support::config());
    assert_eq!(
        from_lines(&mut restored, &document, 0).unwrap(),
        1,
        "the retired state"
    );
    run(&mut restored, &scrapes[2..]);
    let mut uninterrupted = Engine::new(crate::test_support::config());
    run(&mut uninterrupted, &scrapes);
    assert_eq!(outputs(&restored), outputs(&uninterrupted));

    let mut fresh = Engine::new(crate::test_support::config());
    let (header, record) = document.split_once('\n').expect("a header line");
    let (version, next_version) = (
        format!("\"version\":{STATE_FORMAT_VERSION}"),
        format!("\"version\":{}", STATE_FORMAT_VERSION + 1),
    );
    for (bad, version) in [
        (String::new(), false),
        (format!("{header}\n{{\"labels\": []}}"), false),
        (document[..document.len() / 2].to_owned(), false),
        (document.replacen(&version, &next_version, 1), true),
    ] {
        let err = from_lines(&mut fresh, &bad, 0).unwrap_err();
        assert_eq!(
            matches!(err, StateError::Version { found } if found == STATE_FORMAT_VERSION + 1),
            version,
            "{err}"
        );
    }
    // An inconsistent state (one bucket short of its bounds) is refused.
    let short = document.replacen("\"acc\":[", "\"acc\":[0.5,", 1);
    assert!(matches!(
        from_lines(&mut fresh, &short, 0),
        Err(StateError::Invalid { .. })
    ));
    assert!(!record.is_empty());
    assert_eq!(to_lines(&fresh), format!("{header}\n"), "nothing restored");
}

#[test]
fn a_hand_edited_state_file_with_impossible_values_is_refused_record_by_record() {
    // Issue 23, item 9: a timestamp of i64::MAX or negative counts were accepted, froze the family
    // and served `_count` as −1e9.
    let scrapes = sequence();
    let mut engine = Engine::new(crate::test_support::config());
    run(&mut engine, &scrapes[..2]);
    let document = to_lines(&engine);
    let newest = "\"newest_sample_ms\":16000";
    assert!(document.contains(newest), "{document}");
    let far_future = document.replacen(newest, &format!("\"newest_sample_ms\":{}", i64::MAX), 1);
    // The first accumulated bucket made −1e9, the shapes kept.
    let at = document.find("\"acc\":[").expect("an acceptance state") + "\"acc\":[".len();
    let end = at + document[at..].find([',', ']']).expect("a number");
    let negative = format!("{}-1000000000.0{}", &document[..at], &document[end..]);
    let nan_like = document.replacen("\"sum\":", "\"sum\":-", 1);
    for (bad, why) in [
        (far_future, "newest sample time out of range"),
        (negative, "a negative count in the acceptance state"),
        (nan_like, "a negative count"),
    ] {
        let mut fresh = Engine::new(crate::test_support::config());
        match from_lines(&mut fresh, &bad, 20_000) {
            Err(StateError::Invalid { why: got, .. }) => assert!(got.starts_with(why), "{got}"),
            other => panic!("{why}: {other:?}"),
        }
        assert_eq!(fresh.stats().groups, 0);
    }
    // The unedited file restores, at a receive time within a day of its samples.
    let mut fresh = Engine::new(crate::test_support::config());
    assert_eq!(from_lines(&mut fresh, &document, 20_000).unwrap(), 1);
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
    assert_eq!(from_lines(&mut second, &to_lines(&first), 0).unwrap(), 1);
    run(&mut second, &scrapes[2..3]);
    assert!(outputs(&second).is_empty(), "settling");
    let mut third = Engine::new(crate::test_support::config());
    assert_eq!(
        from_lines(&mut third, &to_lines(&second), 0).unwrap(),
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

/// `document` (format 3, [`to_lines`]) as format 1 wrote it: one JSON document of each group's
/// labels and acceptance-corrected state, on one line.
fn as_format_1(document: &str) -> String {
    let groups: Vec<serde_json::Value> = document
        .lines()
        .skip(1)
        .map(|line| {
            let record: serde_json::Value = serde_json::from_str(line).unwrap();
            let acceptance = &record["state"]["states"][Family::AcceptanceCorrectedItl.name()];
            serde_json::json!({"labels": record["labels"], "acceptance": acceptance})
        })
        .collect();
    serde_json::json!({"version": 1, "groups": groups}).to_string()
}

/// Restores every record `read_format_1` gives; the records read, or the first error.
fn from_format_1(engine: &mut Engine, text: &str, now_ms: i64) -> Result<usize, StateError> {
    let mut invalid = None;
    let n = crate::read_format_1(text.as_bytes(), |r| {
        if let Err(e) = r.and_then(|r| engine.restore_record(r, now_ms)) {
            invalid.get_or_insert(e);
        }
    })?;
    invalid.map_or(Ok(n), Err)
}

#[test]
fn a_state_file_of_format_1_is_read_as_a_stream_and_restores_the_acceptance_state() {
    let scrapes = sequence();
    let mut before = Engine::new(crate::test_support::config());
    run(&mut before, &scrapes[..2]);
    let old = as_format_1(&to_lines(&before));
    // serde_json's `json!` sorts keys: put the version first, as the first format's writer did.
    let old = format!(
        "{{\"version\":1,{}",
        old.replacen(",\"version\":1}", "}", 1)
            .trim_start_matches('{')
    );
    assert!(
        old.starts_with("{\"version\":1,\"groups\":[{\"acceptance\""),
        "{old}"
    );
    let mut after = Engine::new(crate::test_support::config());
    assert_eq!(from_format_1(&mut after, &old, 0).unwrap(), 1);
    let mut uninterrupted = Engine::new(crate::test_support::config());
    run(&mut uninterrupted, &scrapes);
    run(&mut after, &scrapes[2..]);
    let acceptance = |o: &Outputs| value_of(o, Family::AcceptanceCorrectedItl, "0");
    assert_eq!(
        acceptance(&outputs(&after)),
        acceptance(&outputs(&uninterrupted))
    );
    // Another version, a truncated document and a group past the record bound are refused;
    // the groups read before a fault were given.
    let mut fresh = Engine::new(crate::test_support::config());
    let v2 = old.replacen("\"version\":1", "\"version\":2", 1);
    assert!(matches!(
        from_format_1(&mut fresh, &v2, 0),
        Err(StateError::Version { found: 2 })
    ));
    let group = old
        .strip_prefix("{\"version\":1,\"groups\":[")
        .and_then(|g| g.strip_suffix("]}"))
        .unwrap();
    let truncated = format!(
        "{{\"version\":1,\"groups\":[{group},{}",
        &group[..group.len() / 2]
    );
    assert!(matches!(
        from_format_1(&mut fresh, &truncated, 0),
        Err(StateError::Corrupt(_))
    ));
    assert_eq!(fresh.stats().retired_groups, 1, "the complete group");
    let huge = old.replacen(
        "\"labels\":[",
        &format!(
            "\"pad\":\"{}\",\"labels\":[",
            "x".repeat(MAX_STATE_RECORD_BYTES)
        ),
        1,
    );
    match from_format_1(&mut Engine::new(config()), &huge, 0) {
        Err(StateError::Corrupt(why)) => assert!(why.contains("longer than"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn restoring_more_than_the_retired_share_keeps_the_newest_samples_and_counts_the_rest() {
    // One retired group's record, copied under 200 engine labels with newest sample times in a
    // scrambled order, into an engine whose retired share holds far fewer.
    let scrapes = sequence();
    let mut engine = Engine::new(crate::test_support::config());
    run(&mut engine, &scrapes[..2]);
    let line = to_lines(&engine).lines().nth(1).unwrap().to_owned();
    let newest = "\"newest_sample_ms\":16000";
    assert!(
        line.contains(newest) && line.contains("[\"engine\",\"0\"]"),
        "{line}"
    );
    let max_state_bytes = 256 << 10;
    let mut small = Engine::new(EngineConfig {
        max_state_bytes,
        ..crate::test_support::config()
    });
    let times: Vec<i64> = (0..200)
        .map(|i| 1_000 + (i * 7_919) % 200 * 1_000)
        .collect();
    let mut dropped = 0;
    for (i, ts) in times.iter().enumerate() {
        let record = line
            .replacen("[\"engine\",\"0\"]", &format!("[\"engine\",\"r{i}\"]"), 1)
            .replacen(newest, &format!("\"newest_sample_ms\":{ts}"), 1);
        dropped += small
            .restore_record(serde_json::from_str(&record).unwrap(), 300_000)
            .unwrap();
    }
    let stats = small.stats();
    assert!(
        stats.memory.retired <= max_state_bytes / 4,
        "{:?}",
        stats.memory
    );
    let kept = stats.retired_groups;
    assert!(kept > 5 && kept < 200, "{kept}");
    assert_eq!(dropped, 200 - kept);
    assert_eq!(stats.retired_dropped, [0, 0], "not counted as evicted");
    // Those kept are the newest: the `kept` largest times, by their engine labels.
    let mut by_time: Vec<(i64, String)> = times
        .iter()
        .enumerate()
        .map(|(i, ts)| (*ts, format!("r{i}")))
        .collect();
    by_time.sort_unstable();
    let mut want: Vec<String> = by_time[200 - kept..]
        .iter()
        .map(|(_, e)| e.clone())
        .collect();
    let mut got = small.retired_engines();
    want.sort_unstable();
    got.sort_unstable();
    assert_eq!(got, want);
}
