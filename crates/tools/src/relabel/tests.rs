//! Unit tests of `crates/tools/src/relabel.rs`.

use super::*;

#[test]
fn keep_regex_names_every_read_series_once_in_vllm_namespace() {
    let regex = keep_regex(engine::DEFAULT_METRIC_PREFIX, &[Sli::Tpot]);
    assert!(
        regex.starts_with("vllm:(") && regex.ends_with(')'),
        "{regex}"
    );
    for read in READ_NAMES.iter().filter(|r| r.slo.is_none()) {
        let bare = read.name.strip_prefix("vllm:").unwrap();
        assert_eq!(
            regex.matches(&format!("|{bare};")).count()
                + regex.matches(&format!("|{bare}|")).count()
                + regex.matches(&format!("({bare}|")).count()
                + regex.matches(&format!("|{bare})")).count(),
            1,
            "{bare} in {regex}"
        );
    }
    assert!(
        regex.contains(r"request_generation_tokens_bucket;1(\.0+)?;.*"),
        "{regex}"
    );
    assert!(
        regex.contains("prompt_tokens_by_source_total;[^;]*;local_compute"),
        "{regex}"
    );
    // No single quote: the YAML uses a single-quoted scalar.
    assert!(!regex.contains('\''));
}

#[test]
fn keep_regex_keeps_the_nhcb_series_of_every_histogram_a_rule_reads() {
    // Written out, not derived: the histograms whose _bucket, _sum or _count the rules read.
    assert_eq!(
        histogram_bases(&[Sli::Tpot]),
        [
            "inter_token_latency_seconds",
            "time_per_output_token_seconds",
            "request_time_per_output_token_seconds",
            "request_generation_tokens",
            "time_to_first_token_seconds",
            "iteration_tokens_total",
        ]
    );
    // Each is an alternative of the first group, which takes any le and any source: an NHCB
    // series has neither.
    let regex = keep_regex(engine::DEFAULT_METRIC_PREFIX, &[Sli::Tpot]);
    let group = regex
        .strip_prefix("vllm:((")
        .and_then(|r| r.split_once(");[^;]*;.*|"))
        .map(|(group, _)| group)
        .expect("the first group");
    let alternatives: Vec<&str> = group.split('|').collect();
    for base in histogram_bases(&[Sli::Tpot]) {
        assert_eq!(
            alternatives.iter().filter(|a| **a == base).count(),
            1,
            "{base} in {group}"
        );
    }
}

#[test]
fn shipped_relabel_file_is_the_generated_one() {
    // Regenerate with: vllm-corrector relabel > deploy/prometheus/relabel.yml
    assert_eq!(
        include_str!("../../../../deploy/prometheus/relabel.yml"),
        render(&RelabelOptions::default())
    );
}

#[test]
fn every_shipped_remote_write_to_the_corrector_uses_the_generated_keep_rule() {
    let shipped = [
        (
            "deploy/prometheus/sidecar.yml",
            include_str!("../../../../deploy/prometheus/sidecar.yml"),
            1,
        ),
        (
            "deploy/prometheus/standalone.yml",
            include_str!("../../../../deploy/prometheus/standalone.yml"),
            1,
        ),
        (
            "deploy/prometheus/sharded.yml",
            include_str!("../../../../deploy/prometheus/sharded.yml"),
            2,
        ),
        (
            "deploy/vmagent/shard-0.relabel.yml",
            include_str!("../../../../deploy/vmagent/shard-0.relabel.yml"),
            1,
        ),
        (
            "deploy/vmagent/shard-1.relabel.yml",
            include_str!("../../../../deploy/vmagent/shard-1.relabel.yml"),
            1,
        ),
        (
            "deploy/vmagent/keep.relabel.yml",
            include_str!("../../../../deploy/vmagent/keep.relabel.yml"),
            1,
        ),
        (
            "components/sidecar-operator",
            include_str!(
                "../../../../deploy/kubernetes/components/sidecar-operator/core/prometheus.yaml"
            ),
            1,
        ),
        (
            "components/remote-write-operator",
            include_str!(
                "../../../../deploy/kubernetes/components/remote-write-operator/prometheus.yaml"
            ),
            1,
        ),
        (
            "deploy/kube-prometheus-stack/values.yaml",
            include_str!("../../../../deploy/kube-prometheus-stack/values.yaml"),
            1,
        ),
        ("README.md", include_str!("../../../../README.md"), 1),
    ];
    let quoted = format!(
        "regex: '{}'",
        keep_regex(engine::DEFAULT_METRIC_PREFIX, &[Sli::Tpot])
    );
    for (path, text, writes) in shipped {
        assert_eq!(
            text.matches(&quoted).count(),
            writes,
            "{path} lacks the generated keep rule"
        );
        assert!(
            !text.contains("regex: \"vllm:.*\""),
            "{path} still keeps every vllm:* series"
        );
    }
}
