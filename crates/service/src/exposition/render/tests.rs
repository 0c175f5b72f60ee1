//! Tests of `render.rs`.

use super::*;

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

fn tpot_value() -> DerivedValue {
    DerivedValue::Histogram {
        buckets: vec![
            (0.01, 0.0),
            (0.025, 2.0),
            (1.0, 3.5),
            (20.0, 4.0),
            (f64::INFINITY, 4.0),
        ],
        sum: 0.125,
        count: 4.0,
    }
}

#[test]
fn histogram_renders_every_bucket_then_sum_and_count() {
    let mut out = String::new();
    write_header(&mut out, Family::CanonicalTpot, Format::Text);
    write_group(
        &mut out,
        Family::CanonicalTpot,
        &labels(&[("engine", "0"), ("model_name", "m")]),
        &tpot_value(),
    );
    let n = "vllm_corrected_request_time_per_output_token_seconds";
    let want = format!(
        "# HELP {n} {help}\n\
         # TYPE {n} histogram\n\
         {n}_bucket{{engine=\"0\",model_name=\"m\",le=\"0.01\"}} 0\n\
         {n}_bucket{{engine=\"0\",model_name=\"m\",le=\"0.025\"}} 2\n\
         {n}_bucket{{engine=\"0\",model_name=\"m\",le=\"1.0\"}} 3.5\n\
         {n}_bucket{{engine=\"0\",model_name=\"m\",le=\"20.0\"}} 4\n\
         {n}_bucket{{engine=\"0\",model_name=\"m\",le=\"+Inf\"}} 4\n\
         {n}_sum{{engine=\"0\",model_name=\"m\"}} 0.125\n\
         {n}_count{{engine=\"0\",model_name=\"m\"}} 4\n",
        help = Family::CanonicalTpot.help()
    );
    assert_eq!(out, want);
    promtool::check(&out, Format::Text);
}

#[test]
fn sum_count_family_is_a_summary_without_quantiles() {
    let mut out = String::new();
    write_header(&mut out, Family::TokenWeightedItl, Format::OpenMetrics);
    write_group(
        &mut out,
        Family::TokenWeightedItl,
        &labels(&[("engine", "1")]),
        &DerivedValue::SumCount {
            sum: 12.5,
            count: 250.0,
        },
    );
    let n = "vllm_corrected_token_weighted_itl_seconds";
    let help = Family::TokenWeightedItl.help();
    assert_eq!(
        out,
        format!(
            "# HELP {n} {help}\n# TYPE {n} summary\n{n}_sum{{engine=\"1\"}} 12.5\n{n}_count{{engine=\"1\"}} 250\n"
        )
    );
}

#[test]
fn label_values_are_escaped() {
    let mut out = String::new();
    let value = DerivedValue::SumCount {
        sum: 1.0,
        count: 2.0,
    };
    write_header(&mut out, Family::IterationTokensLocalCompute, Format::Text);
    write_group(
        &mut out,
        Family::IterationTokensLocalCompute,
        &labels(&[("model_name", "a\\b \"q\"\nz")]),
        &value,
    );
    let n = "vllm_corrected_iteration_tokens_local_compute";
    // Backslash, quote and newline each become a two-character escape.
    assert!(
        out.contains(&format!(
            "{n}_sum{{model_name=\"a\\\\b \\\"q\\\"\\nz\"}} 1\n"
        )),
        "{out}"
    );
    promtool::check(&out, Format::Text);
}

#[test]
fn group_without_labels_has_no_braces_except_for_le() {
    let mut out = String::new();
    write_group(
        &mut out,
        Family::AcceptanceCorrectedItl,
        &[],
        &DerivedValue::Histogram {
            buckets: vec![(f64::INFINITY, 3.0)],
            sum: 0.5,
            count: 3.0,
        },
    );
    let n = "vllm_corrected_acceptance_corrected_itl_seconds";
    assert_eq!(
        out,
        format!("{n}_bucket{{le=\"+Inf\"}} 3\n{n}_sum 0.5\n{n}_count 3\n")
    );
}

#[test]
fn promtool_check_fails_on_a_lint_problem_and_on_bad_syntax() {
    // Guards the helper itself: a counter without `_total` and without HELP, and an unclosed
    // label value, must both be reported.
    for bad in ["# TYPE x counter\nx 1\n", "x{a=\"b} 1\n"] {
        let outcome = std::panic::catch_unwind(|| promtool::check(bad, Format::Text));
        if let Ok(ran) = outcome {
            assert!(!ran, "promtool accepted {bad:?}");
        }
    }
}

/// SLO counters of one SLO `chat` with a TTFT SLI: events, good events, finished, both bounds.
fn counters_value() -> DerivedValue {
    let row = |metric, labels: &[(&str, &str)]| engine::CounterRow {
        metric,
        labels: self::labels(labels),
        layout: 7,
    };
    DerivedValue::Counters {
        rows: vec![
            row(
                CounterMetric::SloEvents,
                &[("slo", "chat"), ("sli", "ttft")],
            ),
            row(
                CounterMetric::SloGoodEvents,
                &[("slo", "chat"), ("sli", "ttft")],
            ),
            row(CounterMetric::SloFinishedRequests, &[("slo", "chat")]),
            row(
                CounterMetric::GoodputRequests,
                &[("bound", "lower"), ("slo", "chat")],
            ),
            row(
                CounterMetric::GoodputRequests,
                &[("bound", "upper"), ("slo", "chat")],
            ),
        ]
        .into(),
        values: vec![40.0, 38.0, 39.0, 35.0, 37.0],
    }
}

/// One value of `family`'s kind: fractional bucket counts only where the family's are estimates
/// (OpenMetrics requires integer histogram counts).
fn value_of(family: Family) -> DerivedValue {
    match family.kind() {
        FamilyKind::Histogram if family.fractional_buckets() => tpot_value(),
        FamilyKind::Histogram => DerivedValue::Histogram {
            buckets: vec![(0.01, 0.0), (0.025, 2.0), (1.0, 3.0), (f64::INFINITY, 4.0)],
            sum: 0.125,
            count: 4.0,
        },
        FamilyKind::SumCount => DerivedValue::SumCount {
            sum: 3.25,
            count: 7.0,
        },
        FamilyKind::Counters => counters_value(),
    }
}

#[test]
fn every_family_together_passes_promtool_and_the_strict_openmetrics_parser() {
    for format in [Format::Text, Format::OpenMetrics] {
        let mut out = String::new();
        let groups: Vec<GroupOutputs> = [
            labels(&[("engine", "0"), ("model_name", "m")]),
            labels(&[("engine", "1"), ("model_name", "m")]),
        ]
        .into_iter()
        .map(|labels| {
            let mut values: [Option<std::sync::Arc<DerivedValue>>; engine::FAMILIES] =
                Default::default();
            for family in Family::ALL {
                values[family.index()] = Some(std::sync::Arc::new(value_of(family)));
            }
            GroupOutputs {
                labels: labels.into(),
                values,
            }
        })
        .collect();
        render_groups(&mut out, &groups, format);
        // promtool 2.42 reads the text format only (OpenMetrics' `unknown` type of the
        // fractional ITL buckets is no text-format type): the OpenMetrics page goes through the
        // strict OpenMetrics parser instead.
        if format == Format::OpenMetrics {
            out.push_str("# EOF\n");
            if let Some(samples) = strict_openmetrics(&out) {
                assert!(
                    samples
                        .iter()
                        .any(|l| l.starts_with("counter vllm_corrected_goodput_requests_total ")),
                    "{samples:?}"
                );
            }
        } else {
            promtool::check(&out, format);
        }
        assert!(out.contains(
            "vllm_corrected_goodput_requests_total{engine=\"0\",model_name=\"m\",bound=\"lower\",slo=\"chat\"} 35\n"
        ));
        let counter_type = match format {
            Format::OpenMetrics => "# TYPE vllm_corrected_slo_events counter\n",
            Format::Text => "# TYPE vllm_corrected_slo_events_total counter\n",
        };
        assert_eq!(out.matches(counter_type).count(), 1, "{out}");
    }
}

/// Parses `text` with Python `prometheus_client`'s strict OpenMetrics parser
/// (`text_string_to_metric_families`) and returns one line per sample, `type sample le value`
/// (`le` empty when absent, the value as Python's `repr`). `None` when Python or
/// `prometheus_client` is missing and `CI` is unset (the caller skips, loudly); panics when they
/// are missing under `CI` (scripts/test.sh installs them) or when the parser rejects the text.
fn strict_openmetrics(text: &str) -> Option<Vec<String>> {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    const SCRIPT: &str = "import sys\n\
        try:\n    from prometheus_client.openmetrics.parser import text_string_to_metric_families as p\n\
        except ImportError:\n    sys.exit(3)\n\
        for f in p(sys.stdin.read()):\n    for s in f.samples:\n        \
        print(f.type, s.name, s.labels.get('le', ''), repr(float(s.value)))\n";
    let missing = |why: &str| {
        assert!(
            std::env::var_os("CI").is_none(),
            "{why}, and CI is set: run scripts/test.sh"
        );
        eprintln!("\n!!!!!!!! SKIPPED: {why}; scripts/test.sh installs it. !!!!!!!!\n");
        None
    };
    let child = Command::new("python3")
        .args(["-c", SCRIPT])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let Ok(mut child) = child else {
        return missing("python3 is not installed");
    };
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write to python3");
    let output = child.wait_with_output().expect("python3 runs");
    if output.status.code() == Some(3) {
        return missing("Python's prometheus_client is not installed");
    }
    assert!(
        output.status.success(),
        "prometheus_client's OpenMetrics parser rejected the page:\n{}\n--- input ---\n{text}",
        String::from_utf8_lossy(&output.stderr)
    );
    Some(
        String::from_utf8(output.stdout)
            .expect("utf-8")
            .lines()
            .map(str::to_owned)
            .collect(),
    )
}

#[test]
fn the_openmetrics_page_parses_with_a_strict_parser() {
    // Issue 23 item 9: the acceptance-corrected buckets are token-weighted shares (here 2.5 and
    // 7.25 tokens), which OpenMetrics 1.0 forbids in a histogram; prometheus_client rejected the
    // page ("Bucket value must be an integer"). They are served as `unknown` families with the
    // same sample names and values; every other family keeps its type.
    let acceptance = DerivedValue::Histogram {
        buckets: vec![(0.01, 2.5), (0.025, 7.25), (f64::INFINITY, 9.0)],
        sum: 0.1875,
        count: 9.0,
    };
    let mut values: [Option<std::sync::Arc<DerivedValue>>; engine::FAMILIES] = Default::default();
    for family in Family::ALL {
        values[family.index()] = Some(std::sync::Arc::new(match family.kind() {
            _ if family == Family::AcceptanceCorrectedItl => acceptance.clone(),
            FamilyKind::Histogram => DerivedValue::Histogram {
                buckets: vec![(0.01, 0.0), (0.025, 2.0), (f64::INFINITY, 4.0)],
                sum: 0.125,
                count: 4.0,
            },
            FamilyKind::SumCount => DerivedValue::SumCount {
                sum: 3.25,
                count: 7.0,
            },
            FamilyKind::Counters => counters_value(),
        }));
    }
    let groups = [GroupOutputs {
        labels: labels(&[("engine", "0"), ("model_name", "m")]).into(),
        values,
    }];
    let mut page = String::new();
    render_groups(&mut page, &groups, Format::OpenMetrics);
    page.push_str("# EOF\n");
    let Some(samples) = strict_openmetrics(&page) else {
        return;
    };
    let n = Family::AcceptanceCorrectedItl.name();
    let of = |name: &str| -> Vec<String> {
        samples
            .iter()
            .filter(|s| s.split(' ').nth(1) == Some(name))
            .cloned()
            .collect()
    };
    assert_eq!(
        of(&format!("{n}_bucket")),
        [
            format!("unknown {n}_bucket 0.01 2.5"),
            format!("unknown {n}_bucket 0.025 7.25"),
            format!("unknown {n}_bucket +Inf 9.0"),
        ]
    );
    assert_eq!(
        of(&format!("{n}_sum")),
        [format!("unknown {n}_sum  0.1875")]
    );
    assert_eq!(
        of(&format!("{n}_count")),
        [format!("unknown {n}_count  9.0")]
    );
    // The integer families keep their types: canonical TPOT a histogram, the others summaries.
    let tpot = Family::CanonicalTpot.name();
    assert_eq!(
        of(&format!("{tpot}_bucket"))[0],
        format!("histogram {tpot}_bucket 0.01 0.0")
    );
    let weighted = Family::TokenWeightedItl.name();
    assert_eq!(
        of(&format!("{weighted}_count")),
        [format!("summary {weighted}_count  7.0")]
    );
}
