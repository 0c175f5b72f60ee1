//! Unit tests of the exposition parser. Expected values are read off the input text by hand.

use super::*;

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

#[test]
fn python_prometheus_client_histogram_block_parses_with_types() {
    // The shape vLLM prints through Python prometheus_client: HELP, TYPE, `le="1.0"`, `+Inf`,
    // and a `_created` gauge block after the histogram.
    let text = "\
# HELP vllm:request_generation_tokens Number of generation tokens processed.
# TYPE vllm:request_generation_tokens histogram
vllm:request_generation_tokens_bucket{engine=\"0\",le=\"1.0\",model_name=\"m\"} 4.0
vllm:request_generation_tokens_bucket{engine=\"0\",le=\"1e+06\",model_name=\"m\"} 32.0
vllm:request_generation_tokens_bucket{engine=\"0\",le=\"+Inf\",model_name=\"m\"} 32.0
vllm:request_generation_tokens_count{engine=\"0\",model_name=\"m\"} 32.0
vllm:request_generation_tokens_sum{engine=\"0\",model_name=\"m\"} 1100.0
# HELP vllm:request_generation_tokens_created Number of generation tokens processed.
# TYPE vllm:request_generation_tokens_created gauge
vllm:request_generation_tokens_created{engine=\"0\",model_name=\"m\"} 1.7000000005e+09
";
    let e = parse(text, Format::Text004).unwrap();
    assert_eq!(e.samples.len(), 6);
    assert_eq!(e.samples[0].name, "vllm:request_generation_tokens_bucket");
    assert_eq!(
        e.samples[0].labels,
        labels(&[("engine", "0"), ("le", "1.0"), ("model_name", "m")])
    );
    assert_eq!(e.samples[0].value, 4.0);
    assert_eq!(e.samples[0].timestamp_ms, None);
    assert_eq!(e.samples[1].label("le"), Some("1e+06"));
    assert_eq!(e.samples[4].value, 1100.0);
    assert_eq!(e.samples[5].value, 1_700_000_000.5);
    assert_eq!(
        e.kind_of("vllm:request_generation_tokens_bucket"),
        Some(MetricKind::Histogram)
    );
    assert_eq!(
        e.kind_of("vllm:request_generation_tokens_sum"),
        Some(MetricKind::Histogram)
    );
    // The `_created` family has its own TYPE line, which wins over the suffix rule.
    assert_eq!(
        e.kind_of("vllm:request_generation_tokens_created"),
        Some(MetricKind::Gauge)
    );
    assert_eq!(
        e.help["vllm:request_generation_tokens"],
        "Number of generation tokens processed."
    );
    assert_eq!(e.kind_of("vllm:other"), None);
}

#[test]
fn special_values_and_timestamps_in_text_004() {
    let text = "a +Inf\nb -Inf 1700000000123\nc NaN\nd 1e-3 -5\ne Inf\n";
    let e = parse(text, Format::Text004).unwrap();
    assert_eq!(e.samples[0].value, f64::INFINITY);
    assert_eq!(e.samples[1].value, f64::NEG_INFINITY);
    assert_eq!(e.samples[1].timestamp_ms, Some(1_700_000_000_123));
    assert!(e.samples[2].value.is_nan());
    assert_eq!(e.samples[3].value, 0.001);
    assert_eq!(e.samples[3].timestamp_ms, Some(-5));
    assert_eq!(e.samples[4].value, f64::INFINITY);
}

#[test]
fn label_escapes_are_unescaped() {
    // Written: a\\b  q\"q  x\ny  ->  a\b  q"q  x<newline>y
    let text = r#"m{a="a\\b",b="q\"q",c="x\ny",d="",e="{,}="} 1"#;
    let e = parse(text, Format::Text004).unwrap();
    assert_eq!(
        e.samples[0].labels,
        labels(&[
            ("a", "a\\b"),
            ("b", "q\"q"),
            ("c", "x\ny"),
            ("d", ""),
            ("e", "{,}=")
        ])
    );
}

#[test]
fn whitespace_trailing_comma_and_empty_braces_are_accepted() {
    let text = "m { a = \"1\" , b=\"2\", }\t7  123\nn{} 8\n\n   \n";
    let e = parse(text, Format::Text004).unwrap();
    assert_eq!(e.samples[0].labels, labels(&[("a", "1"), ("b", "2")]));
    assert_eq!(e.samples[0].value, 7.0);
    assert_eq!(e.samples[0].timestamp_ms, Some(123));
    assert_eq!(e.samples[1].labels, Vec::new());
    assert_eq!(e.samples.len(), 2);
}

#[test]
fn help_escapes_and_free_comments() {
    let text = "# some free comment\n# HELP m line one\\nline \\\\two \\q\n# TYPE m untyped\nm 1\n";
    let e = parse(text, Format::Text004).unwrap();
    // 0.0.4 keeps an unknown escape (`\q`) as written.
    assert_eq!(e.help["m"], "line one\nline \\two \\q");
    assert_eq!(e.types["m"], MetricKind::Untyped);
}

#[test]
fn errors_carry_the_line_number() {
    let cases: &[(&str, usize, ParseErrorKind)] = &[
        ("ok 1\n9bad 1\n", 2, ParseErrorKind::InvalidMetricName),
        (
            "ok 1\n\nm{1a=\"x\"} 1\n",
            3,
            ParseErrorKind::InvalidLabelName,
        ),
        (
            "m{a=\"x\",a=\"y\"} 1\n",
            1,
            ParseErrorKind::DuplicateLabel("a".into()),
        ),
        ("m{a=\"x\\t\"} 1\n", 1, ParseErrorKind::InvalidEscape),
        (
            "m{a=\"x\"\n",
            1,
            ParseErrorKind::MalformedLabels("expected ',' or '}' after a label value"),
        ),
        (
            "m{a=\"x} 1\n",
            1,
            ParseErrorKind::MalformedLabels("unterminated label value"),
        ),
        (
            "m{a \"x\"} 1\n",
            1,
            ParseErrorKind::MalformedLabels("expected '=' after a label name"),
        ),
        (
            "m{a=\"x\" b=\"y\"} 1\n",
            1,
            ParseErrorKind::MalformedLabels("expected ',' or '}' after a label value"),
        ),
        ("m\n", 1, ParseErrorKind::InvalidValue(String::new())),
        ("m one\n", 1, ParseErrorKind::InvalidValue("one".into())),
        (
            "m infinity\n",
            1,
            ParseErrorKind::InvalidValue("infinity".into()),
        ),
        (
            "m 1 1.5\n",
            1,
            ParseErrorKind::InvalidTimestamp("1.5".into()),
        ),
        ("m 1 2 3\n", 1, ParseErrorKind::TrailingText("3".into())),
        (
            "# TYPE m countr\n",
            1,
            ParseErrorKind::MalformedComment("unknown type \"countr\"".into()),
        ),
        (
            "# TYPE m gauge\n# TYPE m gauge\n",
            2,
            ParseErrorKind::DuplicateType("m".into()),
        ),
        (
            "# HELP\n",
            1,
            ParseErrorKind::MalformedComment("# HELP without a metric name".into()),
        ),
    ];
    for (text, line, kind) in cases {
        let err = parse(text, Format::Text004).expect_err(text);
        assert_eq!((err.line, &err.kind), (*line, kind), "input {text:?}");
    }
}

#[test]
fn error_display_names_the_line() {
    let err = parse("ok 1\nm one\n", Format::Text004).unwrap_err();
    assert_eq!(err.to_string(), "line 2: invalid sample value \"one\"");
}

#[test]
fn openmetrics_units_float_second_timestamps_exemplars_and_eof() {
    let text = "\
# TYPE vllm_corrected_token_weighted_itl_seconds summary
# UNIT vllm_corrected_token_weighted_itl_seconds seconds
# HELP vllm_corrected_token_weighted_itl_seconds Help with \\\"quotes\\\".
vllm_corrected_token_weighted_itl_seconds_sum{engine=\"0\"} 43.0 1700000000.25
vllm_corrected_token_weighted_itl_seconds_count{engine=\"0\"} 1800 # {trace_id=\"a\"} 1.0 1.5
x_bucket{le=\"0.1\"} 3 17.0 # {trace_id=\"b\"} 0.05
# EOF
";
    let e = parse(text, Format::OpenMetrics).unwrap();
    assert_eq!(
        e.units["vllm_corrected_token_weighted_itl_seconds"],
        "seconds"
    );
    assert_eq!(
        e.help["vllm_corrected_token_weighted_itl_seconds"],
        "Help with \"quotes\"."
    );
    assert_eq!(e.samples[0].value, 43.0);
    assert_eq!(e.samples[0].timestamp_ms, Some(1_700_000_000_250));
    assert_eq!(e.samples[1].value, 1800.0);
    assert_eq!(e.samples[1].timestamp_ms, None);
    assert_eq!(e.samples[2].timestamp_ms, Some(17_000));
    assert_eq!(
        e.kind_of("vllm_corrected_token_weighted_itl_seconds_count"),
        Some(MetricKind::Summary)
    );
}

#[test]
fn openmetrics_requires_eof_last() {
    let missing = parse("m 1\n", Format::OpenMetrics).unwrap_err();
    assert_eq!(
        (missing.line, missing.kind),
        (2, ParseErrorKind::MissingEof)
    );
    let after = parse("m 1\n# EOF\nn 2\n", Format::OpenMetrics).unwrap_err();
    assert_eq!(
        (after.line, after.kind),
        (3, ParseErrorKind::ContentAfterEof)
    );
    // In 0.0.4, `# EOF` is just a comment and later lines still count.
    assert_eq!(
        parse("m 1\n# EOF\nn 2\n", Format::Text004)
            .unwrap()
            .samples
            .len(),
        2
    );
}

#[test]
fn content_type_selects_the_format() {
    assert_eq!(
        Format::from_content_type("application/openmetrics-text; version=1.0.0; charset=utf-8"),
        Format::OpenMetrics
    );
    assert_eq!(
        Format::from_content_type("text/plain; version=0.0.4; charset=utf-8"),
        Format::Text004
    );
    assert_eq!(Format::from_content_type(""), Format::Text004);
}

#[test]
fn crlf_line_endings_are_tolerated() {
    let e = parse("# TYPE m gauge\r\nm{a=\"b\"} 2\r\n", Format::Text004).unwrap();
    assert_eq!(e.samples[0].value, 2.0);
    assert_eq!(e.types["m"], MetricKind::Gauge);
}
