//! Reading the corrector's `/metrics` with the crate's exposition parser.

use promtext::{Format, ParsedSample, parse};

/// One histogram as served: `(le, cumulative count)` ascending, `_sum`, `_count`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Histogram {
    /// `(upper bound, cumulative count)`, ascending, last bound `+Inf`.
    pub buckets: Vec<(f64, f64)>,
    /// `_sum`.
    pub sum: f64,
    /// `_count`.
    pub count: f64,
}

/// A parsed `/metrics` response.
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    /// The raw text.
    pub text: String,
    /// Every sample.
    pub samples: Vec<ParsedSample>,
}

fn same_labels(sample: &ParsedSample, want: &[(String, String)]) -> bool {
    let mut have: Vec<(&str, &str)> = sample
        .labels
        .iter()
        .filter(|(n, _)| n != "le")
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let mut want: Vec<(&str, &str)> = want.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    have.sort();
    want.sort();
    have == want
}

impl Snapshot {
    /// Parses text format 0.0.4; panics with the text on a parse error.
    pub(crate) fn parse_text(text: &str) -> Snapshot {
        Self::parse_as(text, Format::Text004)
    }

    /// Parses OpenMetrics; panics with the text on a parse error.
    pub(crate) fn parse_openmetrics(text: &str) -> Snapshot {
        Self::parse_as(text, Format::OpenMetrics)
    }

    fn parse_as(text: &str, format: Format) -> Snapshot {
        let exposition = parse(text, format)
            .unwrap_or_else(|e| panic!("/metrics does not parse as {format:?}: {e}\n{text}"));
        Snapshot {
            text: text.to_string(),
            samples: exposition.samples,
        }
    }

    /// The value of the sample `name` whose labels are exactly `labels` (any order).
    pub(crate) fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let mut want: Vec<(&str, &str)> = labels.to_vec();
        want.sort();
        self.samples
            .iter()
            .find(|s| {
                let mut have: Vec<(&str, &str)> = s
                    .labels
                    .iter()
                    .map(|(n, v)| (n.as_str(), v.as_str()))
                    .collect();
                have.sort();
                s.name == name && have == want
            })
            .map(|s| s.value)
    }

    /// Every sample of `family` (any suffix) carrying exactly the `group` labels (plus `le`).
    pub(crate) fn group_samples<'a>(
        &'a self,
        family: &'a str,
        group: &'a [(String, String)],
    ) -> impl Iterator<Item = &'a ParsedSample> {
        self.samples.iter().filter(move |s| {
            s.name
                .strip_prefix(family)
                .is_some_and(|suffix| matches!(suffix, "_bucket" | "_sum" | "_count"))
                && same_labels(s, group)
        })
    }

    /// True when `family` has any sample for `group`.
    pub(crate) fn has(&self, family: &str, group: &[(String, String)]) -> bool {
        self.group_samples(family, group).next().is_some()
    }

    /// The histogram `family` of `group`, if served; `le` is parsed as a float.
    pub(crate) fn histogram(&self, family: &str, group: &[(String, String)]) -> Option<Histogram> {
        let mut h = Histogram {
            buckets: Vec::new(),
            sum: f64::NAN,
            count: f64::NAN,
        };
        let mut any = false;
        for s in self.group_samples(family, group) {
            any = true;
            match &s.name[family.len()..] {
                "_bucket" => {
                    let le = s
                        .label("le")
                        .expect("bucket has le")
                        .parse::<f64>()
                        .expect("le is a float");
                    h.buckets.push((le, s.value));
                }
                "_sum" => h.sum = s.value,
                _ => h.count = s.value,
            }
        }
        h.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        any.then_some(h)
    }

    /// `(_sum, _count)` of `family` for `group`, if both are served.
    pub(crate) fn sum_count(&self, family: &str, group: &[(String, String)]) -> Option<(f64, f64)> {
        let get = |suffix: &str| {
            self.group_samples(family, group)
                .find(|s| s.name.ends_with(suffix))
                .map(|s| s.value)
        };
        Some((get("_sum")?, get("_count")?))
    }

    /// The `vllm_corrected_*` sample lines, sorted: what must not depend on arrival order.
    pub(crate) fn derived_lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .text
            .lines()
            .filter(|l| l.starts_with("vllm_corrected_"))
            .map(str::to_string)
            .collect();
        lines.sort();
        lines
    }
}
