//! `vllm_corrector_family_info` as `/metrics` shows it: one series per group and family, naming
//! the group, the state, the reason and the detail; label names never repeat.

use super::*;
use engine::{Family, WithheldReason};

fn served(family: Family) -> FamilyStatus {
    FamilyStatus {
        family,
        withheld: None,
        degraded: false,
        missing_input: None,
        limit: None,
    }
}

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

#[test]
fn one_series_per_group_and_family_names_the_target_state_reason_and_detail() {
    let mut families = Family::ALL.map(served);
    families[1] = FamilyStatus {
        withheld: Some(WithheldReason::MissingInput),
        missing_input: Some("vllm:time_to_first_token_seconds_count"),
        ..served(Family::TokenWeightedItl)
    };
    families[2] = FamilyStatus {
        degraded: true,
        missing_input: Some("vllm:spec_decode_num_accepted_tokens_per_pos_total"),
        ..served(Family::AcceptanceCorrectedItl)
    };
    families[3] = FamilyStatus {
        withheld: Some(WithheldReason::Limit),
        limit: Some("limits.max_active_series"),
        ..served(Family::IterationTokensLocalCompute)
    };
    let target_labels = labels(&[("instance", "a:8000"), ("job", "vllm")]);
    // An SLI of SLO `chat` not counted: one more series, with the SLO and the SLI.
    let notes = [SliNote {
        slo: "chat".to_owned(),
        sli: engine::slo::Sli::Tpot,
        reason: engine::slo::SliNoteReason::NotABucketEdge,
        detail: "0.07 s is not an le of …".to_owned(),
    }];
    let groups = [(&target_labels[..], &families[..], &notes[..])];
    let mut out = String::new();
    render_family_info(&mut out, &groups, Format::Text);
    let target = r#"instance="a:8000",job="vllm""#;
    let expected = [
        "# HELP vllm_corrector_family_info One series per group and corrected family, always 1: the group's labels, the family, its state (served, degraded or withheld), the reason (withheld, or degraded for a missing input) and the detail (the missing input series, or the limit); and one per SLI of an SLO the group does not count (labels slo and sli)".to_owned(),
        "# TYPE vllm_corrector_family_info gauge".to_owned(),
        format!(r#"vllm_corrector_family_info{{{target},family="vllm_corrected_request_time_per_output_token_seconds",state="served"}} 1"#),
        format!(r#"vllm_corrector_family_info{{{target},family="vllm_corrected_token_weighted_itl_seconds",state="withheld",reason="missing_input",detail="vllm:time_to_first_token_seconds_count"}} 1"#),
        format!(r#"vllm_corrector_family_info{{{target},family="vllm_corrected_acceptance_corrected_itl_seconds",state="degraded",reason="missing_input",detail="vllm:spec_decode_num_accepted_tokens_per_pos_total"}} 1"#),
        format!(r#"vllm_corrector_family_info{{{target},family="vllm_corrected_iteration_tokens_local_compute",state="withheld",reason="limit",detail="limits.max_active_series"}} 1"#),
        format!(r#"vllm_corrector_family_info{{{target},family="vllm_corrected_tokens_per_output",state="served"}} 1"#),
        format!(r#"vllm_corrector_family_info{{{target},family="vllm_corrected_slo",state="served"}} 1"#),
        format!(r#"vllm_corrector_family_info{{{target},family="vllm_corrected_slo",state="withheld",reason="not_a_bucket_edge",detail="0.07 s is not an le of …",slo="chat",sli="tpot"}} 1"#),
    ];
    assert_eq!(out.lines().collect::<Vec<_>>(), expected);
}

#[test]
fn a_group_label_named_like_an_info_label_is_exported_and_nothing_is_shown_without_groups() {
    let mut out = String::new();
    render_family_info(&mut out, &[], Format::Text);
    assert_eq!(out, "", "no group: no family, no # HELP");
    let families = Family::ALL.map(served);
    let clashing = labels(&[
        ("exported_state", "x"),
        ("family", "llama"),
        ("state", "ca"),
    ]);
    let groups = [(&clashing[..], &families[..], &[][..])];
    render_family_info(&mut out, &groups, Format::Text);
    let first = out.lines().nth(2).unwrap();
    assert_eq!(
        first,
        r#"vllm_corrector_family_info{exported_state="x",exported_family="llama",exported_exported_state="ca",family="vllm_corrected_request_time_per_output_token_seconds",state="served"} 1"#
    );
    assert_eq!(out.lines().count(), 2 + engine::FAMILIES);
}
