//! Parser of the Prometheus text exposition format 0.0.4 and of OpenMetrics text 1.0.
//!
//! Used by the integration tests (to read fixtures and `/metrics`) and by the `inspect` command.
//! It is not on the hot path: clarity over speed.
//!
//! Sources: the Prometheus "Exposition formats" specification (text format 0.0.4: comments
//! `# HELP`/`# TYPE`, label escapes `\\` `\"` `\n`, values as Go `ParseFloat` with `+Inf`, `-Inf`,
//! `NaN`, optional integer timestamp in milliseconds) and the OpenMetrics 1.0 specification
//! (`# UNIT`, the mandatory final `# EOF`, timestamps in seconds as a float, exemplars after ` # `).
//!
//! ```
//! use vllm_corrector_promtext::{Format, MetricKind, parse};
//! let text = "# TYPE vllm:generation_tokens_total counter\n\
//!             vllm:generation_tokens_total{model_name=\"m\",engine=\"0\"} 1240.0\n";
//! let exposition = parse(text, Format::Text004).unwrap();
//! assert_eq!(exposition.samples[0].value, 1240.0);
//! assert_eq!(exposition.kind_of("vllm:generation_tokens_total"), Some(MetricKind::Counter));
//! ```

use std::collections::BTreeMap;

/// Which text format the input is in. It decides the timestamp unit and whether `# EOF` is required.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Prometheus text format 0.0.4 (`text/plain; version=0.0.4`): timestamps are integer
    /// milliseconds, `# EOF` is not expected, unknown comments are ignored.
    Text004,
    /// OpenMetrics text 1.0 (`application/openmetrics-text`): timestamps are float seconds, the
    /// input must end with `# EOF`, exemplars after ` # ` are skipped.
    OpenMetrics,
}

impl Format {
    /// The format named by an HTTP `Content-Type` value: OpenMetrics for
    /// `application/openmetrics-text…`, text 0.0.4 for anything else.
    pub fn from_content_type(content_type: &str) -> Format {
        let media = content_type.split(';').next().unwrap_or("").trim();
        if media.eq_ignore_ascii_case("application/openmetrics-text") {
            Format::OpenMetrics
        } else {
            Format::Text004
        }
    }
}

/// The type of a metric family, from its `# TYPE` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetricKind {
    /// `counter`.
    Counter,
    /// `gauge`.
    Gauge,
    /// `histogram`.
    Histogram,
    /// `summary`.
    Summary,
    /// `untyped` (0.0.4) or `unknown` (OpenMetrics).
    Untyped,
    /// `gaugehistogram` (OpenMetrics).
    GaugeHistogram,
    /// `info` (OpenMetrics).
    Info,
    /// `stateset` (OpenMetrics).
    StateSet,
}

impl MetricKind {
    fn from_token(token: &str) -> Option<MetricKind> {
        Some(match token {
            "counter" => MetricKind::Counter,
            "gauge" => MetricKind::Gauge,
            "histogram" => MetricKind::Histogram,
            "summary" => MetricKind::Summary,
            "untyped" | "unknown" => MetricKind::Untyped,
            "gaugehistogram" => MetricKind::GaugeHistogram,
            "info" => MetricKind::Info,
            "stateset" => MetricKind::StateSet,
            _ => return None,
        })
    }
}

/// One sample line: `name{labels} value [timestamp]`.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedSample {
    /// The sample's metric name as written (with any `_bucket`, `_sum`, `_count`, `_total` suffix).
    pub name: String,
    /// Label pairs in the order written, values unescaped. `__name__` is not among them.
    pub labels: Vec<(String, String)>,
    /// The value; `+Inf`, `-Inf` and `NaN` are accepted.
    pub value: f64,
    /// Timestamp in milliseconds since the Unix epoch, when the line has one (OpenMetrics seconds
    /// are converted, rounded to the nearest millisecond).
    pub timestamp_ms: Option<i64>,
}

impl ParsedSample {
    /// The value of label `name`, if the sample has it.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A parsed exposition: every sample in input order, and the metadata comments by family name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exposition {
    /// Every sample line, in input order.
    pub samples: Vec<ParsedSample>,
    /// `# TYPE` by family name, as written on the `# TYPE` line.
    pub(crate) types: BTreeMap<String, MetricKind>,
    /// `# HELP` text by family name, unescaped.
    pub help: BTreeMap<String, String>,
    /// `# UNIT` by family name (OpenMetrics).
    pub(crate) units: BTreeMap<String, String>,
}

/// Suffixes a sample name may add to its family name (0.0.4 and OpenMetrics).
const SAMPLE_SUFFIXES: [&str; 8] = [
    "_bucket", "_sum", "_count", "_total", "_created", "_gsum", "_gcount", "_info",
];

impl Exposition {
    /// The type of the family a sample named `sample_name` belongs to: the `# TYPE` of the name
    /// itself, else of the name with one of `_bucket`, `_sum`, `_count`, `_total`, `_created`,
    /// `_gsum`, `_gcount`, `_info` removed. `None` when no `# TYPE` line covers it.
    pub fn kind_of(&self, sample_name: &str) -> Option<MetricKind> {
        if let Some(kind) = self.types.get(sample_name) {
            return Some(*kind);
        }
        SAMPLE_SUFFIXES
            .iter()
            .filter_map(|suffix| sample_name.strip_suffix(suffix))
            .find_map(|family| self.types.get(family).copied())
    }
}

/// What is wrong with a line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ParseErrorKind {
    /// The metric name is missing or does not match `[a-zA-Z_:][a-zA-Z0-9_:]*`.
    #[error("invalid metric name")]
    InvalidMetricName,
    /// A label name does not match `[a-zA-Z_][a-zA-Z0-9_]*`.
    #[error("invalid label name")]
    InvalidLabelName,
    /// A label name appears twice in one sample.
    #[error("duplicate label name {0:?}")]
    DuplicateLabel(String),
    /// The label set is malformed (missing `=`, quote, comma or closing brace).
    #[error("malformed label set: {0}")]
    MalformedLabels(&'static str),
    /// A backslash in a label value is followed by something other than `\`, `"` or `n`.
    #[error("invalid escape sequence in label value")]
    InvalidEscape,
    /// The value is missing or is not a float.
    #[error("invalid sample value {0:?}")]
    InvalidValue(String),
    /// The timestamp is not an integer (0.0.4) or a float (OpenMetrics).
    #[error("invalid timestamp {0:?}")]
    InvalidTimestamp(String),
    /// Unexpected text after the value and timestamp.
    #[error("unexpected text after the sample: {0:?}")]
    TrailingText(String),
    /// A `# TYPE` line with an unknown type, or a `# HELP`/`# TYPE`/`# UNIT` line without a name.
    #[error("malformed metadata comment: {0}")]
    MalformedComment(String),
    /// A second `# TYPE` line for the same family.
    #[error("second TYPE line for family {0:?}")]
    DuplicateType(String),
    /// OpenMetrics: a line after `# EOF`.
    #[error("content after # EOF")]
    ContentAfterEof,
    /// OpenMetrics: the input does not end with `# EOF`.
    #[error("missing # EOF")]
    MissingEof,
}

/// A parse failure: the 1-based line number and what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {kind}")]
pub struct ParseError {
    /// 1-based line number of the offending line (for [`ParseErrorKind::MissingEof`], the line
    /// after the last one).
    pub(crate) line: usize,
    /// What is wrong.
    pub(crate) kind: ParseErrorKind,
}

/// Parses a whole exposition in `format`.
///
/// Blank lines are skipped. In 0.0.4, comments other than `# HELP` and `# TYPE` are ignored; in
/// OpenMetrics, `# EOF` must be the last line. Errors: the first malformed line, as a
/// [`ParseError`] with its line number.
pub fn parse(input: &str, format: Format) -> Result<Exposition, ParseError> {
    let mut exposition = Exposition::default();
    let mut seen_eof = false;
    let mut line_count = 0;
    for (index, raw) in input.lines().enumerate() {
        let line_no = index + 1;
        line_count = line_no;
        let err = |kind| ParseError {
            line: line_no,
            kind,
        };
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if seen_eof {
            if format == Format::OpenMetrics {
                return Err(err(ParseErrorKind::ContentAfterEof));
            }
            continue;
        }
        if line.trim().is_empty() {
            continue;
        }
        if let Some(comment) = line.trim_start().strip_prefix('#') {
            if comment.trim() == "EOF" {
                seen_eof = format == Format::OpenMetrics;
                continue;
            }
            parse_comment(comment, format, &mut exposition).map_err(err)?;
            continue;
        }
        let sample = parse_sample(line, format).map_err(err)?;
        exposition.samples.push(sample);
    }
    if format == Format::OpenMetrics && !seen_eof {
        return Err(ParseError {
            line: line_count + 1,
            kind: ParseErrorKind::MissingEof,
        });
    }
    Ok(exposition)
}

/// Handles the text after `#`: `HELP`, `TYPE`, `UNIT` or a free comment.
fn parse_comment(
    comment: &str,
    format: Format,
    out: &mut Exposition,
) -> Result<(), ParseErrorKind> {
    let comment = comment.trim_start();
    let (keyword, rest) = split_token(comment);
    if !matches!(keyword, "HELP" | "TYPE" | "UNIT") {
        return Ok(()); // A free comment (0.0.4); OpenMetrics has none but tolerating them is harmless.
    }
    let (family, text) = split_token(rest.trim_start());
    if family.is_empty() {
        return Err(ParseErrorKind::MalformedComment(format!(
            "# {keyword} without a metric name"
        )));
    }
    if !is_metric_name(family) {
        return Err(ParseErrorKind::InvalidMetricName);
    }
    match keyword {
        "HELP" => {
            let help = unescape(text.trim_start(), format == Format::OpenMetrics)?;
            out.help.insert(family.to_string(), help);
        }
        "TYPE" => {
            let token = text.trim();
            let kind = MetricKind::from_token(token).ok_or_else(|| {
                ParseErrorKind::MalformedComment(format!("unknown type {token:?}"))
            })?;
            if out.types.insert(family.to_string(), kind).is_some() {
                return Err(ParseErrorKind::DuplicateType(family.to_string()));
            }
        }
        _ => {
            out.units
                .insert(family.to_string(), text.trim().to_string());
        }
    }
    Ok(())
}

/// Splits at the first space or tab: `(token, rest)`.
fn split_token(s: &str) -> (&str, &str) {
    match s.find([' ', '\t']) {
        Some(i) => (&s[..i], &s[i + 1..]),
        None => (s, ""),
    }
}

/// Parses `name{labels} value [timestamp] [# exemplar]`.
fn parse_sample(line: &str, format: Format) -> Result<ParsedSample, ParseErrorKind> {
    let line = line.trim_start();
    let name_end = line.find(['{', ' ', '\t']).unwrap_or(line.len());
    let name = &line[..name_end];
    if !is_metric_name(name) {
        return Err(ParseErrorKind::InvalidMetricName);
    }
    let mut rest = line[name_end..].trim_start();
    let mut labels = Vec::new();
    if let Some(after_brace) = rest.strip_prefix('{') {
        rest = parse_labels(after_brace, &mut labels)?;
    }
    let mut tokens = rest.split([' ', '\t']).filter(|t| !t.is_empty());
    let value_token = tokens
        .next()
        .ok_or_else(|| ParseErrorKind::InvalidValue(String::new()))?;
    let value = parse_value(value_token)
        .ok_or_else(|| ParseErrorKind::InvalidValue(value_token.to_string()))?;
    let mut timestamp_ms = None;
    if let Some(token) = tokens.next() {
        if format == Format::OpenMetrics && token == "#" {
            return Ok(ParsedSample {
                name: name.to_string(),
                labels,
                value,
                timestamp_ms,
            });
        }
        timestamp_ms = Some(parse_timestamp(token, format)?);
    }
    if let Some(token) = tokens.next()
        && (format != Format::OpenMetrics || token != "#")
    {
        return Err(ParseErrorKind::TrailingText(token.to_string()));
    }
    Ok(ParsedSample {
        name: name.to_string(),
        labels,
        value,
        timestamp_ms,
    })
}

/// Parses the label pairs after `{` into `out`; returns the text after the closing `}`.
fn parse_labels<'a>(
    mut s: &'a str,
    out: &mut Vec<(String, String)>,
) -> Result<&'a str, ParseErrorKind> {
    loop {
        s = s.trim_start();
        if let Some(after) = s.strip_prefix('}') {
            return Ok(after);
        }
        let name_end = s
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(s.len());
        let name = &s[..name_end];
        if !is_label_name(name) {
            return Err(ParseErrorKind::InvalidLabelName);
        }
        s = s[name_end..].trim_start();
        s = s.strip_prefix('=').ok_or(ParseErrorKind::MalformedLabels(
            "expected '=' after a label name",
        ))?;
        s = s.trim_start();
        s = s.strip_prefix('"').ok_or(ParseErrorKind::MalformedLabels(
            "expected '\"' to open a label value",
        ))?;
        let (value, after) = read_label_value(s)?;
        if out.iter().any(|(n, _)| n == name) {
            return Err(ParseErrorKind::DuplicateLabel(name.to_string()));
        }
        out.push((name.to_string(), value));
        s = after.trim_start();
        if let Some(after_comma) = s.strip_prefix(',') {
            s = after_comma;
        } else if !s.starts_with('}') {
            return Err(ParseErrorKind::MalformedLabels(
                "expected ',' or '}' after a label value",
            ));
        }
    }
}

/// Reads an escaped label value up to its closing quote; returns the value and the text after it.
fn read_label_value(s: &str) -> Result<(String, &str), ParseErrorKind> {
    let mut value = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((value, &s[i + 1..])),
            '\\' => match chars.next() {
                Some((_, '\\')) => value.push('\\'),
                Some((_, '"')) => value.push('"'),
                Some((_, 'n')) => value.push('\n'),
                _ => return Err(ParseErrorKind::InvalidEscape),
            },
            c => value.push(c),
        }
    }
    Err(ParseErrorKind::MalformedLabels("unterminated label value"))
}

/// Unescapes `# HELP` text: `\\` and `\n` (and `\"` in OpenMetrics). Other backslashes stay as
/// written in 0.0.4, as Prometheus's own parser does; OpenMetrics rejects them.
fn unescape(s: &str, open_metrics: bool) -> Result<String, ParseErrorKind> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => out.push('\\'),
            Some('n') => out.push('\n'),
            Some('"') if open_metrics => out.push('"'),
            Some(other) if !open_metrics => {
                out.push('\\');
                out.push(other);
            }
            None if !open_metrics => out.push('\\'),
            _ => return Err(ParseErrorKind::InvalidEscape),
        }
    }
    Ok(out)
}

/// A float as Go's `ParseFloat` reads it in expositions: decimal or exponent notation, and the
/// special values `+Inf`, `-Inf`, `Inf`, `NaN` (any case).
fn parse_value(token: &str) -> Option<f64> {
    let unsigned = token.strip_prefix(['+', '-']).unwrap_or(token);
    let special = unsigned.eq_ignore_ascii_case("inf") || unsigned.eq_ignore_ascii_case("nan");
    let numeric = unsigned.starts_with(|c: char| c.is_ascii_digit() || c == '.');
    if !(special || numeric) {
        return None; // Rust would also accept "infinity"; the exposition formats do not.
    }
    token.parse::<f64>().ok()
}

/// A timestamp in milliseconds: an integer in 0.0.4, float seconds in OpenMetrics.
fn parse_timestamp(token: &str, format: Format) -> Result<i64, ParseErrorKind> {
    let invalid = || ParseErrorKind::InvalidTimestamp(token.to_string());
    match format {
        Format::Text004 => token.parse::<i64>().map_err(|_| invalid()),
        Format::OpenMetrics => {
            let seconds = parse_value(token)
                .filter(|s| s.is_finite())
                .ok_or_else(invalid)?;
            Ok((seconds * 1000.0).round() as i64)
        }
    }
}

/// `[a-zA-Z_:][a-zA-Z0-9_:]*`.
fn is_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// `[a-zA-Z_][a-zA-Z0-9_]*`.
fn is_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests;
