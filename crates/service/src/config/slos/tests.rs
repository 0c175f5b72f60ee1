//! Tests of `slos.rs` through the whole file parser ([`crate::config::FileConfig`] and
//! [`crate::config::Config`]): the issue's example parses to the values written, defaults fill
//! what is left out, and each mistake is refused naming its field.

use std::path::Path;

use clap::Parser;
use engine::slo::{LabelMatch, Sli, SliTarget, SloSpec};

use crate::config::{Args, Config, ConfigError, FileConfig};

fn from_yaml(text: &str) -> Result<Config, ConfigError> {
    let file = FileConfig::from_yaml(text, Path::new("test.yaml"))?;
    Config::from_parts(Args::parse_from(["vllm-corrector"]), file)
}

fn refused(text: &str) -> String {
    from_yaml(text).expect_err("refused").to_string()
}

const CHAT: &str = "\
slos:
  - name: chat
    objective: 0.99
    window: 30d
    match: {model_name: \"meta-llama/.*\"}
    ttft: 0.5
    tpot: 0.05
    e2el: 20
    itl_per_token: 0.03
";

#[test]
fn the_issue_example_parses_to_what_it_says() {
    let spec = from_yaml(CHAT).unwrap().slos;
    assert_eq!(spec.slos.len(), 1);
    let chat = &spec.slos[0];
    assert_eq!(chat.name, "chat");
    assert_eq!(chat.objective, 0.99);
    // 30 d = 30 * 86 400 000 ms.
    assert_eq!(chat.window_ms, 2_592_000_000);
    assert_eq!(
        chat.matchers,
        [LabelMatch {
            label: "model_name".into(),
            regex: "meta-llama/.*".into()
        }]
    );
    assert_eq!(chat.by, ["namespace", "model_name"], "the default by");
    let targets: Vec<(Sli, f64, f64)> = chat
        .slis
        .iter()
        .map(|t| (t.sli, t.threshold_seconds, t.objective))
        .collect();
    assert_eq!(
        targets,
        [
            (Sli::Ttft, 0.5, 0.99),
            (Sli::Tpot, 0.05, 0.99),
            (Sli::E2el, 20.0, 0.99),
            (Sli::ItlPerToken, 0.03, 0.99),
        ]
    );
}

#[test]
fn no_slos_key_is_the_shipped_default_and_an_empty_list_is_none() {
    assert_eq!(from_yaml("").unwrap().slos, SloSpec::shipped_default());
    assert_eq!(
        from_yaml("engine:\n  settle_scrapes: 1\n").unwrap().slos,
        SloSpec::shipped_default()
    );
    assert!(from_yaml("slos: []\n").unwrap().slos.slos.is_empty());
}

#[test]
fn per_sli_objectives_override_and_window_and_by_are_optional() {
    let spec = from_yaml(
        "slos:\n  - name: fast\n    objective: 0.999\n    window: 4w\n    by: []\n    \
         ttft: 0.2\n    e2el: 10\n    objectives: {ttft: 0.95}\n    description: short chats\n  \
         - name: batch\n    objective: 0.9\n    e2el: 600\n",
    )
    .unwrap()
    .slos;
    let fast = spec.get("fast").unwrap();
    assert_eq!(fast.window_ms, 28 * 86_400_000, "4w = 28 d");
    assert!(fast.by.is_empty());
    assert_eq!(fast.description, "short chats");
    assert_eq!(
        fast.slis,
        [
            SliTarget {
                sli: Sli::Ttft,
                threshold_seconds: 0.2,
                objective: 0.95
            },
            SliTarget {
                sli: Sli::E2el,
                threshold_seconds: 10.0,
                objective: 0.999
            },
        ]
    );
    assert_eq!(
        spec.get("batch").unwrap().window_ms,
        30 * 86_400_000,
        "default 30d"
    );
}

#[test]
fn each_mistake_is_refused_naming_its_field() {
    for (yaml, want) in [
        (
            "slos:\n  - name: Chat\n    objective: 0.99\n    tpot: 0.05\n",
            "slos[0].name: \"Chat\" is not a name like chat",
        ),
        (
            "slos:\n  - name: a\n    objective: 0.99\n    tpot: 0.05\n  - name: a\n    objective: 0.9\n    tpot: 0.1\n",
            "slos[1].name: \"a\" is already the name of slos[0]",
        ),
        (
            "slos:\n  - name: a\n    objective: 1\n    tpot: 0.05\n",
            "slos[0].objective: 1 is not a fraction in (0, 1)",
        ),
        (
            "slos:\n  - name: a\n    objective: 0.99\n    window: 30m\n    tpot: 0.05\n",
            "slos[0].window: 30m is outside 1h..=366d",
        ),
        (
            "slos:\n  - name: a\n    objective: 0.99\n    window: a month\n    tpot: 0.05\n",
            "slos[0].window: \"a month\" is not a duration like 30d or 4w",
        ),
        (
            "slos:\n  - name: a\n    objective: 0.99\n",
            "slos[0]: no threshold: give at least one of ttft, tpot, e2el, itl_per_token",
        ),
        (
            "slos:\n  - name: a\n    objective: 0.99\n    tpot: -0.05\n",
            "slos[0].tpot: -0.05 is not a threshold in seconds",
        ),
        (
            "slos:\n  - name: a\n    objective: 0.99\n    tpot: 0.05\n    objectives: {ttft: 0.9}\n",
            "slos[0].objectives.ttft: an objective for ttft, which has no threshold",
        ),
        (
            "slos:\n  - name: a\n    objective: 0.99\n    tpot: 0.05\n    objectives: {tpot: 0}\n",
            "slos[0].objectives.tpot: 0 is not a fraction in (0, 1)",
        ),
        (
            "slos:\n  - name: a\n    objective: 0.99\n    tpot: 0.05\n    match: {model_name: \"llama(\"}\n",
            "slos[0].match.model_name: \"llama(\" is not a regular expression (RE2 syntax)",
        ),
        (
            "slos:\n  - name: a\n    objective: 0.99\n    tpot: 0.05\n    match: {le: \"0.1\"}\n",
            "slos[0].match.le: \"le\" is a label of the SLO series themselves",
        ),
        (
            "slos:\n  - name: a\n    objective: 0.99\n    tpot: 0.05\n    by: [model-name]\n",
            "slos[0].by[0]: \"model-name\" is not a label name",
        ),
        (
            "slos:\n  - name: chat_\n    objective: 0.99\n    tpot: 0.05\n",
            "slos[0].name: \"chat_\" is not a name like chat or chat_fast: lower-case letters, \
             digits and single underscores, starting with a letter and not ending with an underscore",
        ),
        (
            "slos:\n  - name: a\n    objective: 0.99\n    tpot: 0.05\n    window: 2h30s\n",
            "slos[0].window: 2h30s is not a whole number of minutes",
        ),
    ] {
        let error = refused(yaml);
        assert!(error.starts_with(want), "{yaml}\nwant {want}\ngot  {error}");
    }
}

#[test]
fn unknown_and_misspelled_keys_are_refused_with_the_line() {
    let error = refused("slos:\n  - name: a\n    objective: 0.99\n    tpot_ms: 50\n");
    assert!(
        error.starts_with("--config.file test.yaml: line 4, column 5: slos[0].tpot_ms: "),
        "{error}"
    );
    assert!(error.contains("tpot_ms"), "{error}");
    let error = refused(
        "slos:\n  - name: a\n    objective: 0.99\n    tpot: 0.05\n    objectives: {tpot_p99: 0.9}\n",
    );
    assert!(error.contains("tpot_p99"), "{error}");
    let error = refused("slos:\n  - name: a\n    tpot: 0.05\n");
    assert!(
        error.contains("objective"),
        "the objective is required: {error}"
    );
}

#[test]
fn yaml_errors_in_a_list_name_the_item() {
    let text = "slos:\n  - name: a\n    tpot: 1\n  - name: b\n    objective: x\n    match:\n      pod: p\n";
    let at = |line| crate::config::yaml_field_at(text, line);
    assert_eq!(at(2).as_deref(), Some("slos[0].name"));
    assert_eq!(at(3).as_deref(), Some("slos[0].tpot"));
    assert_eq!(at(4).as_deref(), Some("slos[1].name"));
    assert_eq!(at(5).as_deref(), Some("slos[1].objective"));
    assert_eq!(at(7).as_deref(), Some("slos[1].match.pod"));
    // Dashes at the parent's own indent.
    let compact = "slos:\n- name: a\n- name: b\n  tpot: 1\n";
    assert_eq!(
        crate::config::yaml_field_at(compact, 4).as_deref(),
        Some("slos[1].tpot")
    );
    let error = refused(
        "slos:\n  - name: a\n    objective: 0.99\n  - name: b\n    objective: high\n    tpot: 1\n",
    );
    assert!(
        error.contains("line 5, column 16: slos[1].objective: "),
        "{error}"
    );
}

#[test]
fn a_threshold_that_is_no_number_says_what_to_write() {
    for (value, want) in [
        (
            "\"50ms\"",
            "slos[0].tpot: \"50ms\" is not a number of seconds: write 0.05",
        ),
        (
            "2s",
            "slos[0].tpot: \"2s\" is not a number of seconds: write 2",
        ),
        (
            "fast",
            "slos[0].tpot: \"fast\" is not a number of seconds such as 0.05",
        ),
        (".inf", "slos[0].tpot: .inf is not a finite number"),
        (
            "{threshold: 0.05}",
            "slos[0].tpot: expected a number of seconds such as 0.05",
        ),
    ] {
        let yaml = format!("slos:\n  - name: a\n    objective: 0.99\n    tpot: {value}\n");
        let error = refused(&yaml);
        assert_eq!(
            error,
            format!("--config.file test.yaml: line 4, column 11: {want}"),
            "{yaml}"
        );
    }
    // null is an absent threshold: the SLO counts e2el only.
    let spec = from_yaml("slos:\n  - name: a\n    objective: 0.99\n    tpot: null\n    e2el: 20\n")
        .unwrap()
        .slos;
    assert_eq!(spec.slos[0].slis.len(), 1);
    assert_eq!(spec.slos[0].slis[0].sli, Sli::E2el);
}

#[test]
fn an_objective_written_as_a_percentage_says_which_fraction_to_write() {
    for (value, want) in [
        (
            "99.9%",
            "slos[0].objective: \"99.9%\" is not a fraction: write 0.999",
        ),
        (
            "\"95 %\"",
            "slos[0].objective: \"95 %\" is not a fraction: write 0.95",
        ),
        (
            "high",
            "slos[0].objective: \"high\" is not a fraction such as 0.99",
        ),
    ] {
        let yaml = format!("slos:\n  - name: a\n    objective: {value}\n    tpot: 0.05\n");
        let error = refused(&yaml);
        assert_eq!(
            error,
            format!("--config.file test.yaml: line 3, column 16: {want}"),
            "{yaml}"
        );
    }
    let error = refused(
        "slos:\n  - name: a\n    objective: 0.99\n    tpot: 0.05\n    objectives: {tpot: 95%}\n",
    );
    assert!(
        error.ends_with("\"95%\" is not a fraction: write 0.95"),
        "{error}"
    );
}

#[test]
fn a_missing_field_names_the_entry_and_slos_without_a_value_is_refused() {
    assert_eq!(
        refused("slos:\n  - name: a\n    tpot: 0.05\n    match:\n      model: x\n"),
        "--config.file test.yaml: line 4, column 5: slos[0]: missing field `objective`"
    );
    assert_eq!(
        refused("slos:\n"),
        "--config.file test.yaml: line 1, column 5: slos: no value: write `slos: []` for no SLO, \
         or leave the key out for the shipped default"
    );
}
