//! Renders the derived (corrected) families for `GET /metrics`, in OpenMetrics 1.0.0 or the
//! Prometheus text format 0.0.4.
//!
//! Shapes (sources: the OpenMetrics 1.0 specification and Prometheus' "Exposition formats" page):
//! * [`FamilyKind::Histogram`]: `# TYPE name histogram`, then per group `name_bucket{…,le="…"}` for
//!   every bound ending with `le="+Inf"`, `name_sum{…}` and `name_count{…}`.
//! * [`FamilyKind::SumCount`]: `# TYPE name summary` with only `name_sum{…}` and `name_count{…}`
//!   (a summary without quantiles is valid in both formats).
//!
//! * In OpenMetrics only, a histogram family whose buckets may be fractional
//!   ([`Family::fractional_buckets`], the acceptance-corrected ITL): OpenMetrics 1.0 requires a
//!   histogram's bucket and count values to be integers, so it is written as three families of
//!   type `unknown`, `name_bucket`, `name_sum` and `name_count`, each one value per sample. The
//!   sample names, labels and values are those of the text format, so PromQL reads them alike
//!   (docs/METRICS.md, "OpenMetrics and fractional buckets").
//!
//! Label values are escaped (`\` → `\\`, `"` → `\"`, newline → `\n`). `le` is printed as vLLM
//! prints it and Prometheus 3 normalises it ([`float::write_le`]: `0.01`, `1.0`, `20.0`, `1e+06`,
//! `+Inf`), so a PromQL join `on(le)` against vLLM's raw series matches. Values are printed as
//! Prometheus prints them ([`float::write_value`]: the shortest decimal that round-trips to the
//! same `f64`, in Go's layout: `4`, `0.125`, `1.5e+06`).
//!
//! The final `# EOF` of OpenMetrics is not written here: the caller appends it after the
//! self-metrics.

use engine::{CounterMetric, DerivedValue, Family, FamilyKind, GroupOutputs};
use protocol::float;

/// An exposition format of `GET /metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0.0 text (ends with `# EOF`).
    OpenMetrics,
    /// Prometheus text format 0.0.4 (no `# EOF`, no `# UNIT`).
    Text,
}

impl Format {
    /// The response `Content-Type` of this format.
    pub(crate) fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Text => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

/// Where the rendering of the derived families stopped. From the default cursor,
/// [`RenderCursor::write_window`] appends every derived family (in [`Family::ALL`] order) of a
/// list of groups, each family's groups in the list's order (`/metrics`: ascending labels), taking
/// the groups a window at a time; a family with no group to show is left out entirely (no
/// `# HELP`/`# TYPE` lines either). The output is the same whether it is written at once or in
/// pieces, so `/metrics` is sent in chunks without holding the whole page or every group.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RenderCursor {
    /// Index into [`Family::ALL`] of the family being written.
    family: usize,
    /// Which of the family's parts is being written: 0, or for a family written as three
    /// `unknown` families in OpenMetrics, the index into [`UNKNOWN_PARTS`].
    part: usize,
    /// Index (in the whole list) of the next group of that part.
    group: usize,
    /// Whether the part's `# HELP`/`# TYPE` lines are written.
    header_written: bool,
}

/// Why [`RenderCursor::write_window`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// Every family is written.
    Done,
    /// `out` reached the length asked for.
    Full,
    /// The next group to write ([`RenderCursor::next_group`]) is not in the window.
    NeedGroups,
}

/// The families a histogram of fractional buckets is written as in OpenMetrics, by suffix.
const UNKNOWN_PARTS: [&str; 3] = ["_bucket", "_sum", "_count"];

impl RenderCursor {
    /// The family being written; `None` once every family is written.
    pub(crate) fn family(&self) -> Option<Family> {
        Family::ALL.get(self.family).copied()
    }

    /// Index, in the whole list of groups, of the next group to write.
    pub(crate) fn next_group(&self) -> usize {
        self.group
    }

    /// Appends the families, from this cursor on, to `out` until `out` holds `len` bytes or more
    /// (one group of a family is never split) ([`Stop::Full`]), every family is written
    /// ([`Stop::Done`]), or the next group is not in `window` or the family being written changed
    /// ([`Stop::NeedGroups`]: call again with a window for [`Self::family`] from
    /// [`Self::next_group`]). `window` holds the groups at positions `offset..` of a list of
    /// `total` groups, with their values of the family being written at least; an entry whose
    /// value is `None` is skipped (a group that withholds the family, or left since the list was
    /// taken).
    pub(crate) fn write_window(
        &mut self,
        out: &mut String,
        window: &[GroupOutputs],
        offset: usize,
        total: usize,
        format: Format,
        len: usize,
    ) -> Stop {
        while let Some(family) = self.family() {
            let unknown = format == Format::OpenMetrics && family.fractional_buckets();
            let counters = family.kind() == FamilyKind::Counters;
            let parts = if unknown {
                UNKNOWN_PARTS.len()
            } else if counters {
                CounterMetric::ALL.len()
            } else {
                1
            };
            while self.part < parts {
                while self.group < total {
                    let Some(group) = self.group.checked_sub(offset).and_then(|i| window.get(i))
                    else {
                        return Stop::NeedGroups;
                    };
                    if out.len() >= len {
                        return Stop::Full;
                    }
                    self.group += 1;
                    let Some(value) = &group.values[family.index()] else {
                        continue;
                    };
                    if counters {
                        let metric = CounterMetric::ALL[self.part];
                        if !has_rows(value, metric) {
                            continue;
                        }
                        if !self.header_written {
                            write_counter_header(out, metric, format);
                            self.header_written = true;
                        }
                        write_counter_part(out, metric, &group.labels, value);
                        continue;
                    }
                    let suffix = UNKNOWN_PARTS[self.part % UNKNOWN_PARTS.len()];
                    if !self.header_written {
                        if unknown {
                            write_unknown_header(out, family, suffix);
                        } else {
                            write_header(out, family, format);
                        }
                        self.header_written = true;
                    }
                    if unknown {
                        write_unknown_part(out, family, suffix, &group.labels, value);
                    } else {
                        write_group(out, family, &group.labels, value);
                    }
                }
                self.part += 1;
                self.group = 0;
                self.header_written = false;
            }
            *self = RenderCursor {
                family: self.family + 1,
                ..RenderCursor::default()
            };
            // The window holds the values of the family just written.
            if total > 0 {
                return Stop::NeedGroups;
            }
        }
        Stop::Done
    }

    /// [`Self::write_window`] with every group in one window: `true` once every family is
    /// written.
    #[cfg(test)]
    pub(crate) fn write_until(
        &mut self,
        out: &mut String,
        groups: &[GroupOutputs],
        format: Format,
        len: usize,
    ) -> bool {
        loop {
            match self.write_window(out, groups, 0, groups.len(), format, len) {
                Stop::Done => return true,
                Stop::Full => return false,
                Stop::NeedGroups => {}
            }
        }
    }
}

/// Appends every derived family of `groups` to `out` at once ([`RenderCursor::write_until`]
/// from the start, without a length).
#[cfg(test)]
pub(crate) fn render_groups(out: &mut String, groups: &[GroupOutputs], format: Format) {
    RenderCursor::default().write_until(out, groups, format, usize::MAX);
}

/// Appends `# HELP name help` (escaped for `format`) and `# TYPE name kind`, the header every
/// family of every page starts with.
pub(crate) fn write_help_and_type(
    out: &mut String,
    name: &str,
    help: &str,
    kind: &str,
    format: Format,
) {
    out.push_str("# HELP ");
    out.push_str(name);
    out.push(' ');
    escape_help(out, help, format);
    out.push_str("\n# TYPE ");
    out.push_str(name);
    out.push(' ');
    out.push_str(kind);
    out.push('\n');
}

/// Appends the `# HELP` and `# TYPE unknown` lines of `family` + `suffix`, one of the three
/// families a histogram of fractional buckets is written as in OpenMetrics.
fn write_unknown_header(out: &mut String, family: Family, suffix: &str) {
    let name = format!("{}{suffix}", family.name());
    write_help_and_type(out, &name, family.help(), "unknown", Format::OpenMetrics);
}

/// Appends one group's samples of the `family` + `suffix` part (`_bucket`: one per bucket with
/// its `le`; `_sum`, `_count`: one), with the names, labels and values of the text format.
fn write_unknown_part(
    out: &mut String,
    family: Family,
    suffix: &str,
    labels: &[(String, String)],
    value: &DerivedValue,
) {
    let name = family.name();
    let (buckets, sum, count) = match value {
        DerivedValue::Histogram {
            buckets,
            sum,
            count,
        } => (&buckets[..], *sum, *count),
        DerivedValue::SumCount { sum, count } => (&[][..], *sum, *count),
        DerivedValue::Counters { .. } => return,
    };
    let mut line = |le: Option<f64>, v: f64| {
        out.push_str(name);
        out.push_str(suffix);
        write_labels(out, labels, le);
        float::write_value(out, v);
        out.push('\n');
    };
    match suffix {
        "_bucket" => {
            for &(le, cumulative) in buckets {
                line(Some(le), cumulative);
            }
        }
        "_sum" => line(None, sum),
        _ => line(None, count),
    }
}

/// Appends the `# HELP` and `# TYPE` lines of `family`.
pub(crate) fn write_header(out: &mut String, family: Family, format: Format) {
    let kind = match family.kind() {
        FamilyKind::Histogram => "histogram",
        FamilyKind::SumCount => "summary",
        FamilyKind::Counters => "unknown",
    };
    write_help_and_type(out, family.name(), family.help(), kind, format);
}

/// The labels the SLO counters' rows carry themselves: a group label of one of these names is
/// shown as `exported_<name>` on their lines, as Prometheus renames a target label that collides
/// (docs/SLO.md, "SLO counters").
const ROW_LABELS: [&str; 3] = ["slo", "sli", "bound"];

/// `labels` with each name of `own` (labels the series adds itself) renamed `exported_<name>`,
/// prefixed again while that is taken too, so no label name repeats. Values are borrowed; only a
/// renamed name is allocated.
pub(super) fn renamed_labels<'l>(
    labels: &'l [(String, String)],
    own: &[&str],
) -> Vec<(std::borrow::Cow<'l, str>, &'l str)> {
    let taken = |name: &str| own.contains(&name) || labels.iter().any(|(n, _)| n == name);
    labels
        .iter()
        .map(|(name, value)| {
            if !own.contains(&name.as_str()) {
                return (std::borrow::Cow::Borrowed(name.as_str()), value.as_str());
            }
            let mut renamed = format!("exported_{name}");
            while taken(&renamed) {
                renamed.insert_str(0, "exported_");
            }
            (std::borrow::Cow::Owned(renamed), value.as_str())
        })
        .collect()
}

/// True when `value` has a row of `metric`.
fn has_rows(value: &DerivedValue, metric: CounterMetric) -> bool {
    matches!(value, DerivedValue::Counters { rows, .. } if rows.iter().any(|r| r.metric == metric))
}

/// Appends the `# HELP` and `# TYPE … counter` lines of `metric` (OpenMetrics names the family
/// without `_total`, the text format names the sample).
fn write_counter_header(out: &mut String, metric: CounterMetric, format: Format) {
    let name = match format {
        Format::OpenMetrics => metric.name().to_owned(),
        Format::Text => format!("{}_total", metric.name()),
    };
    write_help_and_type(out, &name, metric.help(), "counter", format);
}

/// Appends one group's rows of `metric`: `name_total{group labels, row labels} value`.
fn write_counter_part(
    out: &mut String,
    metric: CounterMetric,
    labels: &[(String, String)],
    value: &DerivedValue,
) {
    let DerivedValue::Counters { rows, values } = value else {
        return;
    };
    let group = renamed_labels(labels, &ROW_LABELS);
    for (row, v) in rows.iter().zip(values).filter(|(r, _)| r.metric == metric) {
        out.push_str(metric.name());
        out.push_str("_total{");
        let pairs = group.iter().map(|(n, v)| (n.as_ref(), *v));
        let own = row.labels.iter().map(|(n, v)| (n.as_str(), v.as_str()));
        for (i, (name, value)) in pairs.chain(own).enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(name);
            out.push_str("=\"");
            escape_label_value(out, value);
            out.push('"');
        }
        out.push_str("} ");
        float::write_value(out, *v);
        out.push('\n');
    }
}

/// Appends one group's samples of `family`. `labels` are the group's labels (valid names), in
/// the order given. A [`DerivedValue::Histogram`] under a sum/count family shows only its sum and
/// count; a [`DerivedValue::SumCount`] under a histogram family is skipped (a histogram needs its
/// `+Inf` bucket), which the engine never produces.
pub(crate) fn write_group(
    out: &mut String,
    family: Family,
    labels: &[(String, String)],
    value: &DerivedValue,
) {
    let name = family.name();
    let (sum, count) = match (family.kind(), value) {
        (
            FamilyKind::Histogram,
            DerivedValue::Histogram {
                buckets,
                sum,
                count,
            },
        ) => {
            // The group's labels are escaped once, then shared by every bucket line.
            let mut block = String::with_capacity(256);
            write_label_pairs(&mut block, labels);
            for &(le, cumulative) in buckets {
                out.push_str(name);
                out.push_str("_bucket{");
                out.push_str(&block);
                if !labels.is_empty() {
                    out.push(',');
                }
                out.push_str("le=\"");
                with_le_text(le, |text| out.push_str(text));
                out.push_str("\"} ");
                float::write_value(out, cumulative);
                out.push('\n');
            }
            (*sum, *count)
        }
        (FamilyKind::SumCount, DerivedValue::Histogram { sum, count, .. })
        | (FamilyKind::SumCount, DerivedValue::SumCount { sum, count }) => (*sum, *count),
        (FamilyKind::Histogram, DerivedValue::SumCount { .. }) => {
            debug_assert!(false, "{name}: a histogram family got a sum/count value");
            return;
        }
        (FamilyKind::Counters, value) => {
            for metric in CounterMetric::ALL {
                write_counter_part(out, metric, labels, value);
            }
            return;
        }
        (_, DerivedValue::Counters { .. }) => {
            debug_assert!(
                false,
                "{name}: counters under a histogram or sum/count family"
            );
            return;
        }
    };
    for (suffix, v) in [("_sum", sum), ("_count", count)] {
        out.push_str(name);
        out.push_str(suffix);
        write_labels(out, labels, None);
        float::write_value(out, v);
        out.push('\n');
    }
}

/// Writes `{a="x",b="y"[,le="…"]} ` (or just a space when there are no labels at all).
fn write_labels(out: &mut String, labels: &[(String, String)], le: Option<f64>) {
    if labels.is_empty() && le.is_none() {
        out.push(' ');
        return;
    }
    out.push('{');
    write_label_pairs(out, labels);
    if let Some(le) = le {
        if !labels.is_empty() {
            out.push(',');
        }
        out.push_str("le=\"");
        with_le_text(le, |text| out.push_str(text));
        out.push('"');
    }
    out.push_str("} ");
}

/// Writes `a="x",b="y"` (escaped values, no braces).
pub(super) fn write_label_pairs(out: &mut String, labels: &[(String, String)]) {
    for (i, (name, value)) in labels.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(name);
        out.push_str("=\"");
        escape_label_value(out, value);
        out.push('"');
    }
}

thread_local! {
    /// `le` texts already formatted on this thread, by bits: every group repeats the same bounds.
    static LE_TEXTS: std::cell::RefCell<Vec<(u64, String)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Calls `f` with [`float::format_le`] of `le`, formatting each distinct bound once per thread (at most
/// 256 kept).
fn with_le_text(le: f64, f: impl FnOnce(&str)) {
    LE_TEXTS.with_borrow_mut(|cache| {
        let bits = le.to_bits();
        if let Some((_, text)) = cache.iter().find(|(b, _)| *b == bits) {
            return f(text);
        }
        let text = float::format_le(le);
        f(&text);
        if cache.len() < 256 {
            cache.push((bits, text));
        }
    })
}

/// Escapes a label value: `\` → `\\`, `"` → `\"`, newline → `\n` (same in both formats).
pub(crate) fn escape_label_value(out: &mut String, value: &str) {
    if !value.bytes().any(|b| matches!(b, b'\\' | b'"' | b'\n')) {
        out.push_str(value);
        return;
    }
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// Escapes HELP text: `\` and newline in both formats, and `"` too in OpenMetrics.
pub(super) fn escape_help(out: &mut String, help: &str, format: Format) {
    for c in help.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if format == Format::OpenMetrics => out.push_str("\\\""),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
pub(crate) mod promtool {
    //! Runs `promtool check metrics` (Prometheus 2.42 reads the text format 0.0.4 on stdin).

    use std::io::Write as _;
    use std::process::{Command, Stdio};

    use super::Format;

    /// Checks `text` with promtool. Returns `false` when promtool is absent and `CI` is unset (the
    /// caller then skips); panics when promtool is absent in CI or reports a problem.
    ///
    /// promtool 2.42 parses only 0.0.4. Fed OpenMetrics, it reads each counter's `x_total` samples as
    /// an untyped family apart from `# TYPE x counter` and reports `x_total no help text`. For
    /// OpenMetrics, exactly those reports are accepted, and only for a counter declared as `x`.
    pub(crate) fn check(text: &str, format: Format) -> bool {
        let child = Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound && std::env::var_os("CI").is_none() =>
            {
                eprintln!(
                    "SKIPPED: promtool not found ({e}); install it (apt-get install prometheus) to run this check"
                );
                return false;
            }
            Err(e) => panic!("promtool is required in CI (apt-get install prometheus): {e}"),
        };
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(text.as_bytes())
            .expect("write to promtool");
        let output = child.wait_with_output().expect("promtool runs");
        let report = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let unexpected: Vec<&str> = report
            .lines()
            .filter(|line| !line.trim().is_empty())
            .filter(|line| {
                format != Format::OpenMetrics || !is_openmetrics_counter_artifact(line, text)
            })
            .collect();
        assert!(
            unexpected.is_empty() && (output.status.success() || format == Format::OpenMetrics),
            "promtool check metrics failed ({}):\n{report}\n--- input ---\n{text}",
            output.status
        );
        true
    }

    fn is_openmetrics_counter_artifact(line: &str, text: &str) -> bool {
        let Some(name) = line.strip_suffix(" no help text") else {
            return false;
        };
        let Some(family) = name.strip_suffix("_total") else {
            return false;
        };
        text.lines()
            .any(|l| l == format!("# TYPE {family} counter"))
    }
}

#[cfg(test)]
mod tests;
