//! Tests of `labels.rs`.

use super::*;

fn l<'a>(name: &'a str, value: &'a str) -> Label<'a> {
    Label { name, value }
}

/// The classic character classes, byte by byte, as the data model states them.
fn naive_valid_name(name: &str, allow_colon: bool) -> bool {
    let start = |c: char| c.is_ascii_alphabetic() || c == '_' || (allow_colon && c == ':');
    let mut chars = name.chars();
    chars.next().is_some_and(start) && chars.all(|c| start(c) || c.is_ascii_digit())
}

#[test]
fn name_memo_never_changes_a_result() {
    // Series drawn from a few names (valid and not) in a few orders, normalised in sequence
    // with one memo and each with none: every outcome and every kept label set is the same.
    let names = [
        "__name__", "engine", "en-gine", "le", "1le", "pod", "_x", "é",
    ];
    let values = ["vllm:a_bucket", "vllm:a_bucket", "1bad", "up", "", "x"];
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    let mut memo = NameMemo::default();
    let mut with_memo_ok = 0;
    for _ in 0..20_000 {
        let mut picked: Vec<Label<'_>> = (0..1 + next(5))
            .map(|_| l(names[next(names.len())], values[next(values.len())]))
            .collect();
        if next(3) > 0 {
            picked.sort_by_key(|label| label.name);
            picked.dedup_by_key(|label| label.name);
        }
        let (mut a, mut b) = (picked.clone(), picked);
        let with = normalize_labels_memo(&mut a, &mut memo);
        let without = normalize_labels_in_place(&mut b);
        assert_eq!(with, without, "{a:?}");
        assert_eq!(a[..with.0], b[..without.0]);
        with_memo_ok += usize::from(with.1.is_ok());
    }
    // The draw reaches both outcomes often.
    assert!((1_000..19_000).contains(&with_memo_ok), "{with_memo_ok}");
}

#[test]
fn name_check_agrees_with_the_character_classes() {
    // Every single byte in every position of names of length 1..=17, and random strings.
    for len in 1..=17 {
        for pos in 0..len {
            for b in 0..=255u8 {
                let mut bytes = vec![b'x'; len];
                bytes[pos] = b;
                let Ok(name) = std::str::from_utf8(&bytes) else {
                    continue;
                };
                for colon in [false, true] {
                    assert_eq!(
                        valid_name(name, colon),
                        naive_valid_name(name, colon),
                        "{name:?} {colon}"
                    );
                }
            }
        }
    }
    assert!(
        !valid_name("aé", false) && !valid_name("éa", true) && !valid_name("abcdefgh\u{80}", true)
    );
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    for _ in 0..20_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let len = (state % 24) as usize;
        let alphabet = b"aZ_:09/-.@[`{";
        let name: String = (0..len)
            .map(|i| char::from(alphabet[((state >> (i % 60)) % alphabet.len() as u64) as usize]))
            .collect();
        for colon in [false, true] {
            assert_eq!(
                valid_name(&name, colon),
                naive_valid_name(&name, colon),
                "{name:?}"
            );
        }
    }
}

#[test]
fn sorted_valid_set_is_kept_as_is() {
    let mut v = vec![
        l("__name__", "vllm:num_requests_running"),
        l("engine", "0"),
        l("model_name", "m"),
    ];
    let expected = v.clone();
    normalize_labels(&mut v).unwrap();
    assert_eq!(v, expected);
}

#[test]
fn unsorted_labels_are_sorted_by_name() {
    let mut v = vec![
        l("model_name", "m"),
        l("Zone", "a"),
        l("__name__", "up"),
        l("engine", "0"),
    ];
    normalize_labels(&mut v).unwrap();
    // Byte order: 'Z' (0x5A) < '_' (0x5F) < 'e' (0x65) < 'm' (0x6D).
    let names: Vec<&str> = v.iter().map(|x| x.name).collect();
    assert_eq!(names, ["Zone", "__name__", "engine", "model_name"]);
    assert_eq!(v[3].value, "m", "values travel with their names");
}

#[test]
fn empty_values_are_dropped() {
    let mut v = vec![l("__name__", "up"), l("instance", ""), l("job", "vllm")];
    normalize_labels(&mut v).unwrap();
    assert_eq!(v, vec![l("__name__", "up"), l("job", "vllm")]);
}

#[test]
fn empty_label_set_is_rejected() {
    assert_eq!(
        normalize_labels(&mut vec![]),
        Err(LabelError::EmptyLabelSet)
    );
    // Only empty values: empty after dropping them.
    let mut v = vec![l("__name__", ""), l("job", "")];
    assert_eq!(normalize_labels(&mut v), Err(LabelError::EmptyLabelSet));
}

#[test]
fn duplicate_label_names_are_rejected() {
    let mut v = vec![l("__name__", "up"), l("job", "a"), l("job", "b")];
    assert_eq!(
        normalize_labels(&mut v),
        Err(LabelError::DuplicateLabelName)
    );
    // Duplicates that only meet after sorting.
    let mut v = vec![l("job", "a"), l("__name__", "up"), l("job", "a")];
    assert_eq!(
        normalize_labels(&mut v),
        Err(LabelError::DuplicateLabelName)
    );
    // Two metric names.
    let mut v = vec![l("__name__", "a"), l("__name__", "b")];
    assert_eq!(
        normalize_labels(&mut v),
        Err(LabelError::DuplicateLabelName)
    );
}

#[test]
fn missing_metric_name_is_rejected() {
    let mut v = vec![l("job", "vllm"), l("model_name", "m")];
    assert_eq!(normalize_labels(&mut v), Err(LabelError::MissingMetricName));
    // An empty __name__ is the same as none.
    let mut v = vec![l("__name__", ""), l("job", "vllm")];
    assert_eq!(normalize_labels(&mut v), Err(LabelError::MissingMetricName));
}

#[test]
fn invalid_metric_names_are_rejected() {
    for bad in ["1up", "vllm-x", "a b", "ümlaut", "vllm:é", "a.b"] {
        let mut v = vec![l("__name__", bad)];
        assert_eq!(
            normalize_labels(&mut v),
            Err(LabelError::InvalidMetricName),
            "{bad}"
        );
    }
    for good in ["vllm:e2e_request_latency_seconds_bucket", ":x", "_", "A9:_"] {
        let mut v = vec![l("__name__", good)];
        assert_eq!(normalize_labels(&mut v), Ok(()), "{good}");
    }
}

#[test]
fn invalid_label_names_are_rejected() {
    for bad in ["9le", "a:b", "model-name", "é", "a b"] {
        let mut v = vec![l("__name__", "up"), l(bad, "x")];
        assert_eq!(
            normalize_labels(&mut v),
            Err(LabelError::InvalidLabelName),
            "{bad}"
        );
    }
    for good in ["le", "_x", "Z9_"] {
        let mut v = vec![l("__name__", "up"), l(good, "x")];
        assert_eq!(normalize_labels(&mut v), Ok(()), "{good}");
    }
}

#[test]
fn first_error_follows_the_documented_order() {
    // Duplicate beats an invalid label name that sorts before it.
    let mut v = vec![
        l("__name__", "up"),
        l("9bad", "x"),
        l("job", "a"),
        l("job", "b"),
    ];
    assert_eq!(
        normalize_labels(&mut v),
        Err(LabelError::DuplicateLabelName)
    );
    // A missing name beats an invalid label name.
    let mut v = vec![l("9bad", "x")];
    assert_eq!(normalize_labels(&mut v), Err(LabelError::MissingMetricName));
    // An invalid metric name beats an invalid label name.
    let mut v = vec![l("__name__", "1up"), l("9bad", "x")];
    assert_eq!(normalize_labels(&mut v), Err(LabelError::InvalidMetricName));
}

#[test]
fn reserved_label_names_are_refused_and_metadata_labels_dropped() {
    // Issue 23 item 9: `__`-prefixed names were accepted and exported. The data model reserves
    // them; `__name__` is required, Prometheus' `type-and-unit-labels` metadata labels are
    // dropped, every other one refuses the series. Both paths: a set that needs sorting, and a
    // sorted set through a request's name memo, twice (the second time from the memo).
    for bad in [
        "__meta_kubernetes_pod_name",
        "__address__",
        "__tmp",
        "__",
        "___x",
    ] {
        let mut v = vec![l("engine", "0"), l(bad, "x"), l("__name__", "up")];
        assert_eq!(
            normalize_labels(&mut v),
            Err(LabelError::ReservedLabelName),
            "{bad}"
        );
        let mut memo = NameMemo::default();
        for _ in 0..2 {
            let mut sorted = vec![l("__name__", "up"), l(bad, "x"), l("engine", "0")];
            sorted.sort();
            let (_, result) = normalize_labels_memo(&mut sorted, &mut memo);
            assert_eq!(result, Err(LabelError::ReservedLabelName), "{bad}");
        }
    }
    assert_eq!(
        LabelError::ReservedLabelName.as_str(),
        "reserved_label_name"
    );
    // `__type__` and `__unit__` are dropped: the series is the one without them.
    let mut memo = NameMemo::default();
    for _ in 0..2 {
        let mut v = vec![
            l("__name__", "vllm:e2e_request_latency_seconds_count"),
            l("__type__", "histogram"),
            l("__unit__", "seconds"),
            l("engine", "0"),
        ];
        let (len, result) = normalize_labels_memo(&mut v, &mut memo);
        assert_eq!(result, Ok(()));
        assert_eq!(
            &v[..len],
            [
                l("__name__", "vllm:e2e_request_latency_seconds_count"),
                l("engine", "0")
            ]
        );
    }
    // A name with `_` but not `__` first is an ordinary label.
    let mut v = vec![l("__name__", "up"), l("_x", "1")];
    assert_eq!(normalize_labels(&mut v), Ok(()));
}
