//! Tests of `slo.rs`: the shipped default is valid and is what the docs say; each rule of
//! [`SloSpec::validate`] refuses its bad value naming the field.

use super::*;

fn chat() -> Slo {
    Slo {
        name: "chat".to_owned(),
        description: String::new(),
        objective: 0.99,
        window_ms: 30 * DAY_MS,
        matchers: vec![LabelMatch {
            label: "model_name".to_owned(),
            regex: "meta-llama/.*".to_owned(),
        }],
        by: vec!["model_name".to_owned()],
        slis: vec![
            SliTarget {
                sli: Sli::Ttft,
                threshold_seconds: 0.5,
                objective: 0.95,
            },
            SliTarget {
                sli: Sli::Tpot,
                threshold_seconds: 0.05,
                objective: 0.99,
            },
        ],
    }
}

fn refused(slo: Slo) -> SloError {
    SloSpec { slos: vec![slo] }.validate().expect_err("refused")
}

#[test]
fn shipped_default_is_tpot_0_1_s_for_99_percent_over_30_days_and_valid() {
    let spec = SloSpec::default();
    spec.validate().unwrap();
    let slo = spec.get("default").unwrap();
    assert_eq!(slo.window_ms, 2_592_000_000, "30 d = 30 * 86400 s");
    assert_eq!(slo.objective, 0.99);
    assert_eq!(slo.by, ["namespace", "model_name"]);
    assert!(slo.matchers.is_empty());
    assert_eq!(
        slo.slis,
        [SliTarget {
            sli: Sli::Tpot,
            threshold_seconds: 0.1,
            objective: 0.99
        }]
    );
    assert!((slo.slis[0].error_budget() - 0.01).abs() < 1e-15);
}

#[test]
fn a_full_slo_is_valid() {
    SloSpec { slos: vec![chat()] }.validate().unwrap();
    assert!(SloSpec { slos: vec![] }.validate().is_ok(), "no SLO at all");
}

#[test]
fn names_must_be_lower_snake_case_and_short() {
    for bad in [
        "",
        "Chat",
        "1chat",
        "chat-fast",
        "chat__fast",
        "chat_",
        "ch at",
        "_chat",
    ] {
        let mut slo = chat();
        slo.name = bad.to_owned();
        let e = refused(slo);
        assert_eq!(e.field, "slos[0].name", "{bad:?}");
        assert!(e.message.contains("lower-case letters"), "{bad:?}: {e}");
    }
    let mut slo = chat();
    slo.name = "a".repeat(49);
    assert!(refused(slo).message.contains("longer than 48"));
    let mut slo = chat();
    slo.name = "a".repeat(48);
    SloSpec { slos: vec![slo] }.validate().unwrap();
}

#[test]
fn names_are_unique_also_without_underscores() {
    let mut second = chat();
    second.name = "chat".to_owned();
    let e = SloSpec {
        slos: vec![chat(), second.clone()],
    }
    .validate()
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "slos[1].name: \"chat\" is already the name of slos[0]"
    );
    let mut first = chat();
    first.name = "a_1".to_owned();
    second.name = "a1".to_owned();
    let e = SloSpec {
        slos: vec![first, second],
    }
    .validate()
    .unwrap_err();
    assert_eq!(e.field, "slos[1].name");
    assert!(e.message.contains("only in underscores"), "{e}");
}

#[test]
fn objectives_are_fractions_strictly_between_0_and_1() {
    for bad in [0.0, 1.0, 99.0, -0.5, f64::NAN, f64::INFINITY] {
        let mut slo = chat();
        slo.objective = bad;
        let e = refused(slo);
        assert_eq!(e.field, "slos[0].objective", "{bad}");
        assert!(e.message.contains("(0, 1)"), "{e}");
        let mut slo = chat();
        slo.slis[0].objective = bad;
        assert_eq!(refused(slo).field, "slos[0].objectives.ttft", "{bad}");
    }
}

#[test]
fn a_spec_holds_at_most_64_slos() {
    let named = |n: usize| Slo {
        name: format!("slo{n}"),
        ..chat()
    };
    let spec = |n: usize| SloSpec {
        slos: (0..n).map(named).collect(),
    };
    spec(MAX_SLOS).validate().unwrap();
    let e = spec(MAX_SLOS + 1).validate().unwrap_err();
    assert_eq!(e.field, "slos[64].name");
    assert!(e.message.starts_with("65 SLOs, more than 64"), "{e}");
}

#[test]
fn windows_run_from_one_hour_to_366_days_in_whole_minutes() {
    for (ms, message) in [
        (3_599_999, "59m59s999ms is outside 1h..=366d"),
        (59 * 60_000, "59m is outside 1h..=366d"),
        (367 * DAY_MS, "367d is outside 1h..=366d"),
        (3_600_000 + 30_000, "1h30s is not a whole number of minutes"),
    ] {
        let mut slo = chat();
        slo.window_ms = ms;
        let e = refused(slo);
        assert_eq!(e.field, "slos[0].window");
        assert!(e.message.contains(message), "{ms}: {e}");
    }
    for ok in [MIN_WINDOW_MS, 7 * DAY_MS, 28 * DAY_MS, MAX_WINDOW_MS] {
        let mut slo = chat();
        slo.window_ms = ok;
        SloSpec { slos: vec![slo] }.validate().unwrap();
    }
}

#[test]
fn thresholds_are_finite_and_positive_and_at_least_one_is_given() {
    for bad in [0.0, -0.1, f64::NAN, f64::INFINITY] {
        let mut slo = chat();
        slo.slis[1].threshold_seconds = bad;
        let e = refused(slo);
        assert_eq!(e.field, "slos[0].tpot", "{bad}");
    }
    let mut slo = chat();
    slo.slis.clear();
    assert!(refused(slo).message.contains("at least one of ttft, tpot"));
    let mut slo = chat();
    slo.slis.push(slo.slis[0].clone());
    assert_eq!(refused(slo).to_string(), "slos[0].ttft: given twice");
}

#[test]
fn match_and_by_labels_are_valid_unreserved_label_names() {
    for (label, message) in [
        ("model-name", "is not a label name"),
        ("", "is not a label name"),
        ("__name__", "is reserved"),
        ("le", "label of the SLO series"),
        ("slo", "label of the SLO series"),
    ] {
        let mut slo = chat();
        slo.matchers[0].label = label.to_owned();
        let e = refused(slo);
        assert_eq!(e.field, format!("slos[0].match.{label}"));
        assert!(e.message.contains(message), "{label:?}: {e}");
        let mut slo = chat();
        slo.by = vec!["namespace".to_owned(), label.to_owned()];
        let e = refused(slo);
        assert_eq!(e.field, "slos[0].by[1]");
        assert!(e.message.contains(message), "{label:?}: {e}");
    }
    let mut slo = chat();
    slo.by = vec!["pod".to_owned(), "pod".to_owned()];
    assert_eq!(
        refused(slo).to_string(),
        "slos[0].by[1]: \"pod\" is given twice"
    );
}

#[test]
fn durations_format_as_prometheus_days_hours_minutes() {
    assert_eq!(format_ms(30 * DAY_MS).as_deref(), Some("30d"));
    assert_eq!(format_ms(90 * 60_000).as_deref(), Some("1h30m"));
    // 3 d * 28 / 30 = 4032 min = 2 d 19 h 12 min.
    assert_eq!(format_ms(4032 * 60_000).as_deref(), Some("2d19h12m"));
    assert_eq!(format_ms(60_000).as_deref(), Some("1m"));
    assert_eq!(format_ms(0), None);
    assert_eq!(format_ms(90_000), None);
}

#[test]
fn sli_names_are_the_yaml_fields_and_label_values() {
    let names: Vec<&str> = Sli::ALL.iter().map(|s| s.name()).collect();
    assert_eq!(names, ["ttft", "tpot", "e2el", "itl_per_token"]);
    assert_eq!(Sli::ItlPerToken.unit(), EventUnit::Tokens);
    assert_eq!(Sli::E2el.unit(), EventUnit::Requests);
}
