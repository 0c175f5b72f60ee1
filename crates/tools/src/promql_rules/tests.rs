//! Tests of `promql_rules.rs`.

use super::*;

#[test]
fn default_names_are_the_corrector_family_names() {
    let text = render(&RulesOptions::default());
    for family in crate::presentation::shown() {
        assert!(
            text.contains(&format!("record: {}_sum", family.name())),
            "{family:?}\n{text}"
        );
        assert!(
            text.contains(&format!("record: {}_count", family.name())),
            "{family:?}\n{text}"
        );
    }
    assert!(text.contains("record: vllm_corrected_request_time_per_output_token_seconds_bucket\n"));
    assert!(
        !text.contains("acceptance_corrected_itl_seconds_bucket"),
        "PromQL cannot express these buckets"
    );
    assert!(text.ends_with('\n'));
}

#[test]
fn options_set_prefix_group_and_interval() {
    let options = RulesOptions {
        name_prefix: "x:".into(),
        group_name: "g".into(),
        interval: Some("15s".into()),
    };
    let text = render(&options);
    assert!(
        text.contains("record: x:token_weighted_itl_seconds_sum\n"),
        "{text}"
    );
    assert!(
        text.contains("name: g\n") && text.contains("interval: 15s\n"),
        "{text}"
    );
    assert!(!render(&RulesOptions::default()).contains("interval:"));
}

/// `deploy/rules/` ships the default output for users who apply files, not binaries.
#[test]
fn deploy_rules_file_is_the_rendered_default() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/rules/vllm-corrected.promql.rules.yml"
    );
    let want = render(&RulesOptions::default());
    if std::env::var_os("VLLM_CORRECTOR_BLESS").is_some() {
        std::fs::write(path, &want).expect("write the rules file");
    }
    let have = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        have == want,
        "{path} is not `vllm-corrector rules` output: regenerate it with\n  vllm-corrector rules > {path}\nor\n  VLLM_CORRECTOR_BLESS=1 cargo test --lib promql_rules"
    );
}

#[test]
fn flags_reject_bad_prefixes_and_durations() {
    assert!(parse_prefix("vllm_promql_").is_ok() && parse_prefix("a:b_").is_ok());
    assert!(
        parse_prefix("").is_err() && parse_prefix("1x").is_err() && parse_prefix("a-b").is_err()
    );
    // vLLM's namespace, however it continues; a prefix merely starting with "vllm" is fine.
    for bad in ["vllm:", "vllm:corrected_", "vllm:x:"] {
        let error = parse_prefix(bad).unwrap_err();
        assert!(error.contains("vLLM's own namespace"), "{bad:?}: {error}");
    }
    assert!(parse_prefix("vllm_").is_ok() && parse_prefix("vllmx:").is_ok());
    for ok in ["15s", "1m", "1m30s", "500ms", "2h", "10s0ms"] {
        assert_eq!(parse_interval(ok), Ok(ok.to_string()));
    }
    for bad in ["", "15", "s", "1.5s", "15 s", "1mm", "0s", "00m", "0m0s"] {
        assert!(parse_interval(bad).is_err(), "{bad:?}");
    }
    assert_eq!(parse_group_name("g"), Ok("g".to_string()));
    for bad in ["", " ", "\t"] {
        assert!(parse_group_name(bad).is_err(), "{bad:?}");
    }
}
