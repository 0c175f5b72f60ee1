//! Series classification: which rule input a raw vLLM series is, decided from its name and labels.
//!
//! Names follow vLLM's v1 exposition (`vllm/v1/metrics/loggers.py` as printed by Python
//! `prometheus_client`): counters carry `_total`, histograms `_bucket{le}`/`_sum`/`_count`, and the
//! histogram `vllm:iteration_tokens_total` keeps its `_total` before the histogram suffix.

use protocol::Label;

/// Labels that identify a series inside its group, not the group itself (docs/METRICS.md, "The corrected families"); the hot
/// path tests membership with [`is_rule_dimension`].
#[cfg(test)]
pub(crate) const RULE_DIMENSIONS: [&str; 5] =
    ["__name__", "le", "source", "position", "finished_reason"];

/// Part of a classic histogram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Part {
    /// `_bucket{le}`: cumulative count of observations ≤ `le`.
    Bucket,
    /// `_sum`: sum of observations.
    Sum,
    /// `_count`: number of observations.
    Count,
}

/// A rule input: one raw series kind (the `le` is kept beside it in [`RoleKey`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Input {
    /// `vllm:inter_token_latency_seconds` (seconds, one observation per output after the first).
    Itl(Part),
    /// `vllm:time_per_output_token_seconds`: the old name of the same ITL observations (vLLM ≤ 0.14).
    OldItl(Part),
    /// `vllm:request_time_per_output_token_seconds` (seconds, one observation per finished request).
    Tpot(Part),
    /// `vllm:request_generation_tokens_bucket{le="1"}`: finished requests with n ≤ 1 output tokens.
    GenLe1,
    /// `vllm:request_generation_tokens_count`: proves the token histogram exists (for `no_le_1_bound`).
    GenCount,
    /// `vllm:generation_tokens_total` (tokens).
    GenTotal,
    /// `vllm:time_to_first_token_seconds_count` (first outputs).
    TtftCount,
    /// `vllm:prompt_tokens_by_source_total{source="local_compute"}` (tokens, vLLM ≥ 0.16).
    LocalCompute,
    /// `vllm:iteration_tokens_total_count` (engine iterations).
    IterCount,
    /// `vllm:spec_decode_num_accepted_tokens_total` (accepted draft tokens): read by no rule (it
    /// counts drafts accepted beyond a request's last token, `docs/METRICS.md`), only by the
    /// completeness check, which pairs it with the drafts counter.
    Accepted,
    /// `vllm:spec_decode_num_accepted_tokens_per_pos_total{position}` (drafts whose token at that
    /// position was accepted); the position is kept in [`RoleKey::le_bits`] as a float's bits.
    AcceptedPerPos,
    /// `vllm:spec_decode_num_drafts_total` (drafts): read by no rule, only by the completeness check
    /// (vLLM registers it beside the accepted-tokens counter).
    Drafts,
}

/// The identity of a series inside its group: its input and, for buckets, the `le` bound's bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct RoleKey {
    /// Which input.
    pub input: Input,
    /// `f64::to_bits` of the `le` bound for buckets (`+Inf` included), of the position for
    /// [`Input::AcceptedPerPos`]; 0 otherwise.
    pub le_bits: u64,
}

impl RoleKey {
    /// The `le` bound as a float (meaningful for buckets only).
    pub fn bound(self) -> f64 {
        f64::from_bits(self.le_bits)
    }
}

fn label<'a>(labels: &[Label<'a>], name: &str) -> Option<&'a str> {
    labels.iter().find(|l| l.name == name).map(|l| l.value)
}

/// Parses an `le` value as Prometheus does: a float, with `+Inf`/`Inf` accepted. `-0.0` becomes
/// `0.0`: they are one bound, and the role key compares bits.
pub(crate) fn parse_le(value: &str) -> Option<f64> {
    match value {
        "+Inf" | "Inf" | "+inf" | "inf" => Some(f64::INFINITY),
        v => v
            .parse::<f64>()
            .ok()
            .filter(|f| !f.is_nan())
            .map(|f| f + 0.0),
    }
}

fn histogram(labels: &[Label<'_>], suffix: &str, make: fn(Part) -> Input) -> Option<RoleKey> {
    match suffix {
        "_bucket" => {
            let le = parse_le(label(labels, "le")?)?;
            Some(RoleKey {
                input: make(Part::Bucket),
                le_bits: le.to_bits(),
            })
        }
        "_sum" => Some(RoleKey {
            input: make(Part::Sum),
            le_bits: 0,
        }),
        "_count" => Some(RoleKey {
            input: make(Part::Count),
            le_bits: 0,
        }),
        _ => None,
    }
}

/// Classifies a series by `__name__` (and `le`/`source` where the rule needs them).
///
/// Returns `None` for every series no rule reads, `*_created` included: the caller counts its samples as
/// `unused_series` and allocates nothing for it. A bucket whose `le` is missing or not a float is unused too.
pub(crate) fn classify(name: &str, labels: &[Label<'_>]) -> Option<RoleKey> {
    let plain = |input| Some(RoleKey { input, le_bits: 0 });
    if let Some(suffix) = name.strip_prefix("vllm:inter_token_latency_seconds") {
        return histogram(labels, suffix, Input::Itl);
    }
    if let Some(suffix) = name.strip_prefix("vllm:time_per_output_token_seconds") {
        return histogram(labels, suffix, Input::OldItl);
    }
    if let Some(suffix) = name.strip_prefix("vllm:request_time_per_output_token_seconds") {
        return histogram(labels, suffix, Input::Tpot);
    }
    match name {
        "vllm:request_generation_tokens_bucket" => {
            let le = parse_le(label(labels, "le")?)?;
            (le == 1.0).then_some(RoleKey {
                input: Input::GenLe1,
                le_bits: 0,
            })
        }
        "vllm:request_generation_tokens_count" => plain(Input::GenCount),
        "vllm:generation_tokens_total" => plain(Input::GenTotal),
        "vllm:time_to_first_token_seconds_count" => plain(Input::TtftCount),
        "vllm:prompt_tokens_by_source_total" => (label(labels, "source")? == "local_compute")
            .then_some(RoleKey {
                input: Input::LocalCompute,
                le_bits: 0,
            }),
        "vllm:iteration_tokens_total_count" => plain(Input::IterCount),
        "vllm:spec_decode_num_accepted_tokens_total" => plain(Input::Accepted),
        "vllm:spec_decode_num_drafts_total" => plain(Input::Drafts),
        "vllm:spec_decode_num_accepted_tokens_per_pos_total" => {
            let pos = label(labels, "position")?.parse::<u16>().ok()?;
            Some(RoleKey {
                input: Input::AcceptedPerPos,
                le_bits: f64::from(pos).to_bits(),
            })
        }
        _ => None,
    }
}

/// One series name a rule reads, with the single label value it is restricted to, if any: the
/// engine's vocabulary, from which `vllm-corrector relabel` derives the narrowest
/// `write_relabel_configs` ((`vllm-corrector relabel`, crates/tools/src/relabel.rs)). Agrees with [`classify`] and [`may_be_read`]
/// (tested below).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadName {
    /// The full `__name__`, e.g. `vllm:inter_token_latency_seconds_bucket`.
    pub name: &'static str,
    /// `(label, regex)`: only series whose `label` matches the fully anchored regex are read
    /// (`le` of the token histogram is 1, printed `1` by Go senders and `1.0` by Python's
    /// `prometheus_client`; `source` of the prompt-token counter is `local_compute`).
    pub only: Option<(&'static str, &'static str)>,
}

const fn any(name: &'static str) -> ReadName {
    ReadName { name, only: None }
}

/// Every series name a rule (or the completeness check) reads, in [`Input`] order.
pub const READ_NAMES: [ReadName; 18] = [
    any("vllm:inter_token_latency_seconds_bucket"),
    any("vllm:inter_token_latency_seconds_sum"),
    any("vllm:inter_token_latency_seconds_count"),
    any("vllm:time_per_output_token_seconds_bucket"),
    any("vllm:time_per_output_token_seconds_sum"),
    any("vllm:time_per_output_token_seconds_count"),
    any("vllm:request_time_per_output_token_seconds_bucket"),
    any("vllm:request_time_per_output_token_seconds_sum"),
    any("vllm:request_time_per_output_token_seconds_count"),
    ReadName {
        name: "vllm:request_generation_tokens_bucket",
        only: Some(("le", r"1(\.0+)?")),
    },
    any("vllm:request_generation_tokens_count"),
    any("vllm:generation_tokens_total"),
    any("vllm:time_to_first_token_seconds_count"),
    ReadName {
        name: "vllm:prompt_tokens_by_source_total",
        only: Some(("source", "local_compute")),
    },
    any("vllm:iteration_tokens_total_count"),
    any("vllm:spec_decode_num_accepted_tokens_total"),
    any("vllm:spec_decode_num_drafts_total"),
    any("vllm:spec_decode_num_accepted_tokens_per_pos_total"),
];

/// False when no rule reads any series named `name`, whatever its other labels: the first, cheap
/// test of the discard path. A name that passes may still classify as unused (a token bucket whose
/// `le` is not 1, a prompt-token source other than `local_compute`). Agrees with [`classify`]:
/// `classify(name, labels).is_some()` implies `may_be_read(name)`.
pub(crate) fn may_be_read(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("vllm:") else {
        return false;
    };
    for histogram in [
        "inter_token_latency_seconds",
        "time_per_output_token_seconds",
        "request_time_per_output_token_seconds",
    ] {
        if let Some(suffix) = rest.strip_prefix(histogram) {
            return matches!(suffix, "_bucket" | "_sum" | "_count");
        }
    }
    matches!(
        rest,
        "request_generation_tokens_bucket"
            | "request_generation_tokens_count"
            | "generation_tokens_total"
            | "time_to_first_token_seconds_count"
            | "prompt_tokens_by_source_total"
            | "iteration_tokens_total_count"
            | "spec_decode_num_accepted_tokens_total"
            | "spec_decode_num_drafts_total"
            | "spec_decode_num_accepted_tokens_per_pos_total"
    )
}

/// True when `family` is the remote-write metadata family name of series some rule reads: one of
/// [`READ_NAMES`] less its `_total`, `_bucket`, `_sum` or `_count` suffix, or whole, named as
/// Prometheus sends it (the `# TYPE` name: a counter with or without `_total`, text 0.0.4 and
/// OpenMetrics). At most a few dozen names, so the metadata cache that keeps only these is
/// bounded whatever senders send.
pub(crate) fn is_read_family(family: &str) -> bool {
    family.starts_with("vllm:")
        && READ_NAMES.iter().any(|read| {
            read.name.strip_prefix(family).is_some_and(|suffix| {
                matches!(suffix, "" | "_total" | "_bucket" | "_sum" | "_count")
            })
        })
}

/// Group labels of a normalised label set: everything but [`RULE_DIMENSIONS`], in sorted order.
pub(crate) fn group_labels<'l, 'a>(
    labels: &'l [Label<'a>],
) -> impl Iterator<Item = &'l Label<'a>> + Clone {
    labels.iter().filter(|l| !is_rule_dimension(l.name))
}

/// True when `name` is one of [`RULE_DIMENSIONS`]; dispatches on the length first, since this runs
/// for every label of every sample a rule reads.
#[inline]
pub(crate) fn is_rule_dimension(name: &str) -> bool {
    match name.len() {
        2 => name == "le",
        6 => name == "source",
        8 => name == "__name__" || name == "position",
        15 => name == "finished_reason",
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l<'a>(name: &'a str, value: &'a str) -> Label<'a> {
        Label { name, value }
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
        ] {
            assert!(is_read_family(family), "{family}");
        }
        for family in [
            "vllm:num_requests_running",
            "vllm:iteration_tokens",
            "up",
            "node_cpu_seconds_total",
            "vllm:e2e_request_latency_seconds",
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
                        Some((label, value)) => {
                            labels.iter().any(|(n, v)| n == label && v == value)
                        }
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
        let names: Vec<_> = group_labels(&labels).map(|l| l.name).collect();
        assert_eq!(names, ["engine", "model_name"]);
    }
}
