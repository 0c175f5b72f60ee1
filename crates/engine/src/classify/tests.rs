//! The vocabulary table against the classifier, the pre-filter and the simulator's exposition.

use super::*;

fn l<'a>(name: &'a str, value: &'a str) -> Label<'a> {
    Label { name, value }
}

/// [`super::classify`] under vLLM's own prefix.
fn classify(name: &str, labels: &[Label<'_>]) -> Option<RoleKey> {
    super::classify(name, DEFAULT_METRIC_PREFIX, labels)
}

/// [`super::may_be_read`] under vLLM's own prefix.
fn may_be_read(name: &str) -> bool {
    super::may_be_read(name, DEFAULT_METRIC_PREFIX)
}

/// [`super::is_read_family`] under vLLM's own prefix.
fn is_read_family(family: &str) -> bool {
    super::is_read_family(family, DEFAULT_METRIC_PREFIX)
}

#[test]
fn every_classified_name_may_be_read_and_unread_names_may_not() {
    let le1 = [l("le", "1.0")];
    let local = [l("source", "local_compute")];
    let mut classified = 0;
    for base in [
        "inter_token_latency_seconds",
        "time_per_output_token_seconds",
        "request_time_per_output_token_seconds",
    ] {
        for suffix in ["_bucket", "_sum", "_count"] {
            let name = format!("vllm:{base}{suffix}");
            assert!(
                classify(&name, &le1).is_some() && may_be_read(&name),
                "{name}"
            );
            classified += 1;
        }
    }
    for name in [
        "vllm:request_generation_tokens_bucket",
        "vllm:request_generation_tokens_count",
        "vllm:generation_tokens_total",
        "vllm:time_to_first_token_seconds_count",
        "vllm:iteration_tokens_total_count",
        "vllm:spec_decode_num_accepted_tokens_total",
        "vllm:spec_decode_num_drafts_total",
    ] {
        assert!(
            classify(name, &le1).is_some() && may_be_read(name),
            "{name}"
        );
        classified += 1;
    }
    assert!(classify("vllm:prompt_tokens_by_source_total", &local).is_some());
    assert!(may_be_read("vllm:prompt_tokens_by_source_total"));
    let per_pos = "vllm:spec_decode_num_accepted_tokens_per_pos_total";
    let key = classify(per_pos, &[l("position", "2")]).unwrap();
    assert_eq!((key.input, key.bound()), (Input::AcceptedPerPos, 2.0));
    assert!(may_be_read(per_pos) && classify(per_pos, &[l("position", "x")]).is_none());
    // 9 histogram names + 7 + 2: every input of classify.
    assert_eq!(classified + 2, 18);
    for name in [
        "vllm:inter_token_latency_seconds_created",
        "vllm:inter_token_latency_seconds",
        "vllm:request_time_per_output_token_seconds_bucketx",
        "vllm:num_requests_running",
        "vllm:generation_tokens_created",
        "vllm:spec_decode_num_draft_tokens_total",
        "inter_token_latency_seconds_bucket",
        "up",
    ] {
        assert!(
            !may_be_read(name) && classify(name, &le1).is_none(),
            "{name}"
        );
    }
}

#[test]
fn only_families_a_rule_reads_are_read_families() {
    for family in [
        "vllm:inter_token_latency_seconds",
        "vllm:generation_tokens",
        "vllm:generation_tokens_total",
        "vllm:iteration_tokens_total",
        "vllm:prompt_tokens_by_source_total",
        "vllm:spec_decode_num_drafts",
        // Read only while an SLO has an E2EL threshold; its metadata is kept all the same.
        "vllm:e2e_request_latency_seconds",
    ] {
        assert!(is_read_family(family), "{family}");
    }
    for family in [
        "vllm:num_requests_running",
        "vllm:iteration_tokens",
        "up",
        "node_cpu_seconds_total",
        "vllm:request_queue_time_seconds",
        "",
    ] {
        assert!(!is_read_family(family), "{family}");
    }
}

#[test]
fn the_read_vocabulary_is_exactly_what_classify_reads() {
    // Every listed name is read (with its restriction satisfied) and passes may_be_read.
    for read in READ_NAMES {
        let labels: Vec<Label<'_>> = match read.only {
            Some(("le", _)) => vec![l("le", "1.0")],
            Some(("source", value)) => vec![l("source", value)],
            Some(("finished_reason", _)) => vec![l("finished_reason", "abort")],
            Some(other) => panic!("unexpected restriction {other:?}"),
            None => vec![l("le", "0.5"), l("position", "0")],
        };
        assert!(
            classify(read.name, &labels).is_some() && may_be_read(read.name),
            "{}",
            read.name
        );
    }
    // Every name may_be_read admits is listed: try each listed base with every suffix a
    // histogram or counter can carry, and a few neighbours.
    let listed: Vec<&str> = READ_NAMES.iter().map(|r| r.name).collect();
    for base in [
        "inter_token_latency_seconds",
        "time_per_output_token_seconds",
        "request_time_per_output_token_seconds",
        "request_generation_tokens",
        "generation_tokens",
        "time_to_first_token_seconds",
        "prompt_tokens_by_source",
        "iteration_tokens_total",
        "spec_decode_num_accepted_tokens",
        "spec_decode_num_drafts",
        "prompt_tokens",
        "spec_decode_num_accepted_tokens_per_pos",
    ] {
        for suffix in [
            "",
            "_total",
            "_bucket",
            "_sum",
            "_count",
            "_created",
            "_total_count",
        ] {
            let name = format!("vllm:{base}{suffix}");
            let read = may_be_read(&name)
                && (classify(&name, &[l("le", "1")]).is_some()
                    || classify(&name, &[l("source", "local_compute")]).is_some()
                    || classify(&name, &[l("position", "0")]).is_some());
            assert_eq!(read, listed.contains(&name.as_str()), "{name}");
        }
    }
    // The le regex admits the spellings senders use, each parsing to 1.
    for text in ["1", "1.0", "1.00"] {
        assert_eq!(parse_le(text), Some(1.0));
    }
}

#[test]
fn every_series_the_simulator_exposes_is_read_exactly_when_the_vocabulary_lists_it() {
    use sim::{Profile, SimConfig, Simulator, SpecConfig};
    let admits = |name: &str, labels: &[(String, String)]| {
        READ_NAMES.iter().any(|r| {
            r.name == name
                && match r.only {
                    None => true,
                    Some(("le", _)) => labels
                        .iter()
                        .any(|(n, v)| n == "le" && parse_le(v) == Some(1.0)),
                    // `abort|error`: an alternation of literal values.
                    Some((label, value)) => labels
                        .iter()
                        .any(|(n, v)| n == label && value.split('|').any(|x| x == v)),
                }
        })
    };
    let mut read = std::collections::BTreeSet::new();
    for profile in Profile::ALL {
        let cfg = SimConfig {
            profile,
            spec: Some(SpecConfig {
                num_speculative_tokens: 3,
                acceptance_prob: 0.7,
                no_draft_fraction: 0.2,
            }),
            ..SimConfig::default()
        };
        let mut sim = Simulator::new(cfg).expect("simulator config");
        sim.advance_to(20.0);
        for s in sim.snapshot().samples() {
            let labels: Vec<Label<'_>> = s
                .labels
                .iter()
                .map(|(n, v)| Label { name: n, value: v })
                .collect();
            let classified = classify(&s.name, &labels).is_some();
            assert_eq!(
                classified,
                admits(&s.name, &s.labels),
                "{profile:?}: {} {:?}",
                s.name,
                s.labels
            );
            if classified {
                read.insert(s.name.clone());
            }
        }
    }
    // Every listed name occurs in some profile's exposition.
    let listed: std::collections::BTreeSet<String> =
        READ_NAMES.iter().map(|r| r.name.to_owned()).collect();
    assert_eq!(read, listed);
}

#[test]
fn rule_dimension_test_matches_the_list() {
    for name in RULE_DIMENSIONS {
        assert!(is_rule_dimension(name), "{name}");
    }
    for name in [
        "instance",
        "engine",
        "model_name",
        "l",
        "les",
        "sources",
        "__name_",
        "finished_reasons",
        "",
    ] {
        assert!(!is_rule_dimension(name), "{name}");
    }
}

#[test]
fn le_is_parsed_as_a_float_whatever_its_formatting() {
    for text in ["1", "1.0", "1e0", "1.00"] {
        let labels = [
            l("__name__", "vllm:request_generation_tokens_bucket"),
            l("le", text),
        ];
        assert_eq!(
            classify("vllm:request_generation_tokens_bucket", &labels),
            Some(RoleKey {
                input: Input::GenLe1,
                le_bits: 0
            }),
            "le={text}"
        );
    }
    let other = [l("le", "2.0")];
    assert_eq!(
        classify("vllm:request_generation_tokens_bucket", &other),
        None
    );
    assert_eq!(parse_le("+Inf"), Some(f64::INFINITY));
    assert_eq!(parse_le("1e+06"), Some(1_000_000.0));
    assert_eq!(parse_le("NaN"), None);
}

#[test]
fn negative_zero_le_is_the_same_bound_as_zero() {
    // Found by the rw1 fuzz target: "-0.0" and "0.0" became two buckets with equal bounds.
    assert_eq!(parse_le("-0.0").map(f64::to_bits), Some(0.0f64.to_bits()));
    assert_eq!(
        parse_le("-0").map(f64::to_bits),
        parse_le("0").map(f64::to_bits)
    );
}

#[test]
fn created_series_and_unread_series_are_unused() {
    assert_eq!(
        classify("vllm:inter_token_latency_seconds_created", &[]),
        None
    );
    assert_eq!(classify("vllm:generation_tokens_created", &[]), None);
    assert_eq!(classify("vllm:num_requests_running", &[]), None);
    assert_eq!(
        classify("vllm:spec_decode_num_draft_tokens_total", &[]),
        None
    );
}

#[test]
fn histogram_parts_and_old_itl_name() {
    let b = [l("le", "0.05")];
    let key = classify("vllm:time_per_output_token_seconds_bucket", &b).unwrap();
    assert_eq!(key.input, Input::OldItl(Part::Bucket));
    assert_eq!(key.bound(), 0.05);
    assert_eq!(
        classify("vllm:inter_token_latency_seconds_sum", &[])
            .unwrap()
            .input,
        Input::Itl(Part::Sum)
    );
    assert_eq!(
        classify("vllm:request_time_per_output_token_seconds_count", &[])
            .unwrap()
            .input,
        Input::Tpot(Part::Count)
    );
    assert_eq!(
        classify("vllm:inter_token_latency_seconds_bucket", &[]),
        None,
        "bucket without le"
    );
}

#[test]
fn only_local_compute_prompt_tokens_are_read() {
    let name = "vllm:prompt_tokens_by_source_total";
    assert_eq!(
        classify(name, &[l("source", "local_compute")])
            .unwrap()
            .input,
        Input::LocalCompute
    );
    assert_eq!(classify(name, &[l("source", "local_cache_hit")]), None);
    assert_eq!(classify(name, &[l("source", "external_kv_transfer")]), None);
}

#[test]
fn group_labels_drop_rule_dimensions() {
    let labels = [
        l("__name__", "x"),
        l("engine", "0"),
        l("le", "1.0"),
        l("model_name", "m"),
        l("position", "2"),
        l("source", "local_compute"),
    ];
    let names: Vec<_> = group_labels(&labels, &[]).map(|l| l.name).collect();
    assert_eq!(names, ["engine", "model_name"]);
    let dropped = ["model_name".to_owned()];
    let names: Vec<_> = group_labels(&labels, &dropped).map(|l| l.name).collect();
    assert_eq!(names, ["engine"]);
}

#[test]
fn a_platform_prefix_reads_the_renamed_inputs_and_not_vllms_own_names() {
    let prefix = "kserve_vllm:";
    let le = [l("le", "0.05")];
    let renamed = super::classify(
        "kserve_vllm:inter_token_latency_seconds_bucket",
        prefix,
        &le,
    );
    let own = super::classify(
        "vllm:inter_token_latency_seconds_bucket",
        DEFAULT_METRIC_PREFIX,
        &le,
    );
    assert!(renamed.is_some());
    assert_eq!(renamed, own, "the renamed series is the same input");
    assert!(super::may_be_read(
        "kserve_vllm:generation_tokens_total",
        prefix
    ));
    assert!(!super::may_be_read("vllm:generation_tokens_total", prefix));
    assert!(!super::may_be_read(
        "kserve_vllm:num_requests_running",
        prefix
    ));
    assert_eq!(
        super::classify("vllm:inter_token_latency_seconds_bucket", prefix, &le),
        None
    );
    assert!(super::is_read_family(
        "kserve_vllm:inter_token_latency_seconds",
        prefix
    ));
    assert!(super::is_read_family(
        "kserve_vllm:generation_tokens",
        prefix
    ));
    assert!(!super::is_read_family("vllm:generation_tokens", prefix));
    assert!(!super::is_read_family("kserve_vllm:", prefix));
}
