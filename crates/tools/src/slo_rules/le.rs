//! PromQL text pieces: an `le` matcher that finds a bucket edge however it is spelled, string
//! literals, and selectors.
//!
//! The same edge reaches Prometheus as different `le` strings: vLLM and the corrector print it as
//! Python's `prometheus_client` does (`0.1`, `20.0`, `1e-05`), other exporters as Go does (`20`),
//! and Prometheus 3 rewrites classic-histogram `le` values of scraped text to its float form on
//! ingestion (`20` becomes `20.0`). An exact `le="20"` then matches nothing and the SLI reads as
//! 100 % bad. [`le_matcher`] matches every decimal spelling of the value (leading zero optional,
//! any trailing zeros) and, for values Prometheus and Python write with an exponent (below 1e-4
//! or from 1e6 up), the exponent spellings; Pyrra solves the integer case the same way
//! (`le=~"1(\.0)?"`). Character classes (`[.]`) instead of backslashes keep the regex free of
//! PromQL string escapes.

use engine::slo::Sli;

/// vLLM's default bucket edges (seconds, `le`) of the histogram each SLI reads under `--source
/// buckets`, as vLLM registers them unless told otherwise (docs/METRICS.md, "Default bucket bounds"):
/// TTFT; canonical TPOT and per-token ITL (the ITL and request-TPOT bounds, which the corrected
/// families keep); E2EL (the request-latency bounds). A threshold elsewhere matches no bucket of
/// a vLLM that keeps its defaults.
pub(crate) const DEFAULT_EDGES: [(Sli, &[f64]); 4] = [
    (
        Sli::Ttft,
        &[
            0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
            10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
        ],
    ),
    (Sli::Tpot, &TOKEN_EDGES),
    (
        Sli::E2el,
        &[
            0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
            120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
        ],
    ),
    (Sli::ItlPerToken, &TOKEN_EDGES),
];

/// vLLM's ITL and request-TPOT bucket edges, seconds.
const TOKEN_EDGES: [f64; 19] = [
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];

/// The `le=~"…"` matcher of threshold `t` (finite, > 0), fully anchored as PromQL's `=~` is:
/// `0.05` gives `le=~"0?[.]050*"`, `20` gives `le=~"20([.]0*)?"`, `2.5` gives `le=~"2[.]50*"`.
pub(crate) fn le_matcher(t: f64) -> String {
    let mut alternatives = vec![decimal_pattern(&format!("{t}"))];
    if !(1e-4..1e6).contains(&t) {
        // `{t:e}` is Rust's shortest mantissa with the exponent: `1.5e-5`, `2e6`.
        let text = format!("{t:e}");
        if let Some((mantissa, exponent)) = text.split_once('e') {
            let (sign, digits) = match exponent.strip_prefix('-') {
                Some(digits) => ("-", digits),
                None => ("[+]?", exponent),
            };
            alternatives.push(format!("{}[eE]{sign}0*{digits}", decimal_pattern(mantissa)));
        }
    }
    format!("le=~\"{}\"", alternatives.join("|"))
}

/// The pattern of a plain decimal `text` (`20`, `0.05`, `2.5`): trailing zeros optional, and
/// the leading zero of a value below 1.
fn decimal_pattern(text: &str) -> String {
    match text.split_once('.') {
        None => format!("{text}([.]0*)?"),
        Some(("0", fraction)) => format!("0?[.]{fraction}0*"),
        Some((int, fraction)) => format!("{int}[.]{fraction}0*"),
    }
}

/// `s` as a PromQL double-quoted string literal (backslash and quote escaped).
pub(crate) fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `name{m1,m2}`, or `name` without matchers.
pub(crate) fn selector(name: &str, matchers: &[String]) -> String {
    if matchers.is_empty() {
        name.to_owned()
    } else {
        format!("{name}{{{}}}", matchers.join(","))
    }
}

/// `sum by (l1, l2) (inner)`, or `sum (inner)` without labels.
pub(crate) fn sum_by(labels: &[String], inner: &str) -> String {
    if labels.is_empty() {
        format!("sum ({inner})")
    } else {
        format!("sum by ({}) ({inner})", labels.join(", "))
    }
}
