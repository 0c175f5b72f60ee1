//! Cumulative readings of `/metrics` dumps, per group, and what two dumps say about the interval
//! between them: raw vLLM histograms, the corrected families, their means and quantiles.
//!
//! A **group** is a series' label set minus `__name__`, `le`, `source`, `position` and
//! `finished_reason` (docs/METRICS.md, "The corrected families"), exactly as the engine groups series, so a raw `vllm:*` series
//! and the `vllm_corrected_*` series derived from it fall in the same group; the SLO counters'
//! own labels (`slo`, `sli`, `bound`) are their rows' dimensions, not group labels. Only `vllm:*` and
//! `vllm_corrected_*` samples are kept; self-metrics and anything else are ignored.
//!
//! Interval values are increases between two dumps (PromQL `increase`, without extrapolation):
//! a mean is `Δsum / Δcount` (what `rate(x_sum[w]) / rate(x_count[w])` gives over the same
//! window) and a quantile is Prometheus' `histogram_quantile` on the bucket increases.

use std::collections::BTreeMap;

use crate::presentation;
use engine::{FAMILIES, Family, FamilyKind};
use protocol::float;

pub(crate) use engine::RULE_DIMENSIONS;

/// The raw vLLM request TPOT histogram (seconds, one observation per finished request).
pub(crate) const RAW_TPOT: &str = "vllm:request_time_per_output_token_seconds";
/// The raw vLLM ITL histogram (seconds, one observation per output after the first).
pub(crate) const RAW_ITL: &str = "vllm:inter_token_latency_seconds";
/// The old name of the ITL histogram (vLLM ≤ 0.14), used only when [`RAW_ITL`] is absent.
pub(crate) const RAW_ITL_OLD: &str = "vllm:time_per_output_token_seconds";

/// One sample of a dump.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DumpSample {
    /// Sample name, with any `_bucket`/`_sum`/`_count`/`_total` suffix.
    pub name: String,
    /// Labels other than `__name__`, in any order.
    pub labels: Vec<(String, String)>,
    /// The value (a count, tokens, seconds).
    pub value: f64,
    /// The sample's own timestamp (ms since the epoch), when the dump has one.
    pub timestamp_ms: Option<i64>,
    /// 1-based line in the dump's text; 0 when the sample was not read from text.
    pub(crate) line: usize,
    /// True for a counter, histogram or summary sample (not `_created`): it only grows until a
    /// counter reset.
    pub(crate) cumulative: bool,
}

/// One series' reading in a dump.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Reading {
    /// The value.
    pub value: f64,
    /// 1-based line in the dump (0 when not from text).
    pub(crate) line: usize,
    /// The sample's timestamp, ms, if the dump had one.
    pub timestamp_ms: Option<i64>,
    /// See [`DumpSample::cumulative`].
    pub(crate) cumulative: bool,
}

/// A series inside its group: the sample name and its rule-dimension labels, sorted, with `le`
/// rewritten as the shortest float text (`"1.0"` and `"1"` are one bound).
pub(crate) type SeriesKey = (String, Vec<(String, String)>);

/// A group's label set: `(name, value)` sorted by name, rule dimensions and empty values removed.
pub(crate) type GroupKey = Vec<(String, String)>;

/// The series of one group in one dump.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct GroupSeries {
    /// Every series of the group.
    pub(crate) series: BTreeMap<SeriesKey, Reading>,
}

/// Every group of one dump.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Dump {
    /// Groups by label set.
    pub groups: BTreeMap<GroupKey, GroupSeries>,
}

/// A dump that cannot be read as one instant of a set of series.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DumpError {
    /// The same series twice in one dump.
    #[error("line {line}: series {series} appears twice (first on line {first})")]
    DuplicateSeries {
        /// Line of the second occurrence.
        line: usize,
        /// Line of the first occurrence.
        first: usize,
        /// The series, as `name{labels}`.
        series: String,
    },
}

/// A rule dimension's value as a key: an `le` bound in one spelling whatever the dump's
/// ([`float::format_le`]: `1` and `1.0` are one bound), any other value as it is.
fn dim_text(name: &str, value: &str) -> String {
    match (name, float::parse_le(value)) {
        ("le", Some(bound)) => float::format_le(bound),
        _ => value.to_owned(),
    }
}

/// `name{a="x",b="y"}` for messages.
pub(crate) fn series_text(name: &str, labels: &[(String, String)]) -> String {
    let inner: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
    format!("{name}{{{}}}", inner.join(","))
}

/// True for sample names of the groups this module reads: `vllm:*` and `vllm_corrected_*`.
pub(crate) fn is_group_series(name: &str) -> bool {
    name.starts_with("vllm:") || name.starts_with("vllm_corrected_")
}

/// Whether a sample without a `# TYPE` is cumulative, from its suffix alone.
pub(crate) fn cumulative_by_suffix(name: &str) -> bool {
    ["_total", "_bucket", "_count", "_sum"]
        .iter()
        .any(|s| name.ends_with(s))
}

impl Dump {
    /// Groups `samples` (those of [`is_group_series`]; others are skipped).
    ///
    /// # Errors
    /// [`DumpError::DuplicateSeries`] when one series appears twice.
    pub(crate) fn from_samples(
        samples: impl IntoIterator<Item = DumpSample>,
    ) -> Result<Dump, DumpError> {
        let mut dump = Dump::default();
        for s in samples {
            dump.insert(s)?;
        }
        Ok(dump)
    }

    /// Adds one sample (skipped unless [`is_group_series`]).
    ///
    /// # Errors
    /// [`DumpError::DuplicateSeries`] when the dump already holds the series.
    pub(crate) fn insert(&mut self, s: DumpSample) -> Result<(), DumpError> {
        if !is_group_series(&s.name) {
            return Ok(());
        }
        let mut group: GroupKey = Vec::new();
        let mut dims = Vec::new();
        // An SLO counter's own labels (`slo`, `sli`, `bound`) tell its rows apart within the
        // group, as `le` tells buckets apart.
        let slo_row = presentation::SLO.is_counter(&s.name);
        for (k, v) in &s.labels {
            if v.is_empty() {
                continue;
            }
            let row_label = slo_row && presentation::SLO.row_labels.contains(&k.as_str());
            if RULE_DIMENSIONS.contains(&k.as_str()) || row_label {
                dims.push((k.clone(), dim_text(k, v)));
            } else {
                group.push((k.clone(), v.clone()));
            }
        }
        group.sort();
        dims.sort();
        let series = self.groups.entry(group).or_default();
        let key = (s.name, dims);
        if let Some(first) = series.series.get(&key) {
            return Err(DumpError::DuplicateSeries {
                line: s.line,
                first: first.line,
                series: series_text(&key.0, &s.labels),
            });
        }
        let reading = Reading {
            value: s.value,
            line: s.line,
            timestamp_ms: s.timestamp_ms,
            cumulative: s.cumulative,
        };
        series.series.insert(key, reading);
        Ok(())
    }
}

/// A classic histogram (cumulative buckets) or its increase over an interval.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Hist {
    /// `(upper bound, cumulative count)` ascending, last bound `+Inf`.
    pub(crate) buckets: Vec<(f64, f64)>,
    /// Sum of observations (seconds or tokens, per family).
    pub(crate) sum: f64,
    /// Number of observations.
    pub count: f64,
}

/// A `_sum` and `_count` pair (a summary without quantiles) or its increase.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SumCount {
    /// Sum (seconds or tokens, per family).
    pub(crate) sum: f64,
    /// Count (tokens, iterations or observations, per family).
    pub count: f64,
}

fn ratio(sum: f64, count: f64) -> Option<f64> {
    (count > 0.0).then(|| sum / count)
}

impl SumCount {
    /// `sum / count`, or `None` when `count` is 0.
    pub(crate) fn mean(&self) -> Option<f64> {
        ratio(self.sum, self.count)
    }

    /// The increase from `before` to `self`; `None` when either part decreased (a reset).
    pub(crate) fn minus(&self, before: &SumCount) -> Option<SumCount> {
        (self.sum >= before.sum && self.count >= before.count).then_some(SumCount {
            sum: self.sum - before.sum,
            count: self.count - before.count,
        })
    }

    /// Adds another pair (for totals across groups: sum numerators and denominators).
    pub(crate) fn add(&mut self, other: &SumCount) {
        self.sum += other.sum;
        self.count += other.count;
    }
}

impl Hist {
    /// `sum / count`, or `None` when `count` is 0.
    pub(crate) fn mean(&self) -> Option<f64> {
        ratio(self.sum, self.count)
    }

    /// The increase from `before` to `self`; `None` when the bounds differ or any count or the
    /// sum decreased (a counter reset).
    pub(crate) fn minus(&self, before: &Hist) -> Option<Hist> {
        if self.buckets.len() != before.buckets.len() || self.sum < before.sum {
            return None;
        }
        let mut buckets = Vec::with_capacity(self.buckets.len());
        for ((le, c), (le0, c0)) in self.buckets.iter().zip(&before.buckets) {
            if le != le0 || c < c0 {
                return None;
            }
            buckets.push((*le, c - c0));
        }
        (self.count >= before.count).then_some(Hist {
            buckets,
            sum: self.sum - before.sum,
            count: self.count - before.count,
        })
    }

    /// Adds a histogram with the same bounds (totals across groups). Returns false, changing
    /// nothing, when the bounds differ.
    pub(crate) fn add(&mut self, other: &Hist) -> bool {
        let same = self.buckets.len() == other.buckets.len()
            && self
                .buckets
                .iter()
                .zip(&other.buckets)
                .all(|(a, b)| a.0 == b.0);
        if same {
            for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
                a.1 += b.1;
            }
            self.sum += other.sum;
            self.count += other.count;
        }
        same
    }

    /// Prometheus' `histogram_quantile(q, …)` on these buckets: find the bucket holding rank
    /// `q · count(+Inf)` and interpolate linearly inside it (from 0 for the first bucket); a rank in
    /// the `+Inf` bucket answers the highest finite bound. `None` when there are no observations
    /// or fewer than two buckets (PromQL's NaN). Source: `promql/quantile.go`, `bucketQuantile`.
    pub(crate) fn quantile(&self, q: f64) -> Option<f64> {
        let n = self.buckets.len();
        if n < 2 || self.buckets[n - 1].0 != f64::INFINITY {
            return None;
        }
        // Prometheus first makes the counts monotonic (a torn scrape can break that).
        let mut counts: Vec<f64> = self.buckets.iter().map(|b| b.1).collect();
        for i in 1..n {
            counts[i] = counts[i].max(counts[i - 1]);
        }
        let total = counts[n - 1];
        if total <= 0.0 || q.is_nan() {
            return None;
        }
        if q < 0.0 {
            return Some(f64::NEG_INFINITY);
        }
        if q > 1.0 {
            return Some(f64::INFINITY);
        }
        let mut rank = q * total;
        let b = counts[..n - 1]
            .iter()
            .position(|c| *c >= rank)
            .unwrap_or(n - 1);
        if b == n - 1 {
            return Some(self.buckets[n - 2].0);
        }
        if b == 0 && self.buckets[0].0 <= 0.0 {
            return Some(self.buckets[0].0);
        }
        let (start, mut in_bucket) = (if b == 0 { 0.0 } else { self.buckets[b - 1].0 }, counts[b]);
        if b > 0 {
            in_bucket -= counts[b - 1];
            rank -= counts[b - 1];
        }
        let end = self.buckets[b].0;
        Some(start + (end - start) * (rank / in_bucket))
    }
}

impl GroupSeries {
    /// The reading of `name` with rule-dimension labels `dims` (sorted), if present.
    pub(crate) fn get(&self, name: &str, dims: &[(&str, &str)]) -> Option<&Reading> {
        let key = (
            name.to_owned(),
            dims.iter()
                .map(|(k, v)| (k.to_string(), dim_text(k, v)))
                .collect(),
        );
        self.series.get(&key)
    }

    /// True when the group has any series of histogram or summary `family`.
    pub(crate) fn has_family(&self, family: &str) -> bool {
        ["_bucket", "_sum", "_count"].iter().any(|suffix| {
            let name = format!("{family}{suffix}");
            self.series.keys().any(|(n, _)| *n == name)
        })
    }

    /// The classic histogram `family` (`_bucket{le}`, `_sum`, `_count`); `None` unless the `+Inf`
    /// bucket, `_sum` and `_count` are all present.
    pub(crate) fn hist(&self, family: &str) -> Option<Hist> {
        let bucket = format!("{family}_bucket");
        let mut buckets: Vec<(f64, f64)> = self
            .series
            .iter()
            .filter(|((n, dims), _)| *n == bucket && dims.len() == 1 && dims[0].0 == "le")
            .filter_map(|((_, dims), r)| Some((float::parse_le(&dims[0].1)?, r.value)))
            .collect();
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        if buckets.last().map(|b| b.0) != Some(f64::INFINITY) {
            return None;
        }
        let sc = self.sum_count(family)?;
        Some(Hist {
            buckets,
            sum: sc.sum,
            count: sc.count,
        })
    }

    /// `family_sum` and `family_count`, when both are present.
    pub(crate) fn sum_count(&self, family: &str) -> Option<SumCount> {
        Some(SumCount {
            sum: self.get(&format!("{family}_sum"), &[])?.value,
            count: self.get(&format!("{family}_count"), &[])?.value,
        })
    }

    /// The raw ITL family of the group: [`RAW_ITL`], or [`RAW_ITL_OLD`] when the new name is
    /// absent (as the engine chooses).
    pub(crate) fn itl_family(&self) -> &'static str {
        if self.has_family(RAW_ITL) {
            RAW_ITL
        } else {
            RAW_ITL_OLD
        }
    }

    /// Evidence of a counter reset between `before` and `self` (the later dump): the first line (in
    /// the later dump) of a cumulative series that decreased or of a `_created` series whose value
    /// changed (the counter was recreated). `None` when there is none.
    pub(crate) fn reset_since(&self, before: &GroupSeries) -> Option<usize> {
        self.series
            .iter()
            .filter_map(|(key, after)| {
                let old = before.series.get(key)?;
                let recreated = key.0.ends_with("_created") && after.value != old.value;
                let decreased = after.cumulative && after.value < old.value;
                (recreated || decreased).then_some(after.line)
            })
            // A line of the dump (> 0) is better evidence than a value computed from it (0).
            .min_by_key(|line| (*line == 0, *line))
    }
}

/// What two dumps of one group say about the interval between them. Every value is an increase
/// (`after − before`), or `None` when a dump lacks the family or a counter reset lies between.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Interval {
    /// Line (in the later dump) proving a counter reset; every value is then `None`.
    pub(crate) reset_line: Option<usize>,
    /// Raw request TPOT histogram (n ≤ 1 requests included as 0), seconds.
    pub(crate) raw_tpot: Option<Hist>,
    /// Raw ITL histogram, seconds per output.
    pub(crate) raw_itl: Option<Hist>,
    /// Each corrected family's increase, by [`Family::index`]; a sum/count family is a [`Hist`]
    /// without buckets.
    pub families: [Option<Hist>; FAMILIES],
    /// The increases of each family's raw counterpart ([`presentation::Presentation::raw`]): numerator
    /// as `sum`, denominator as `count`, by [`Family::index`].
    pub raw: [Option<SumCount>; FAMILIES],
    /// The raw histogram whose p99 the demo compares with each family's
    /// ([`presentation::Presentation::demo_p99`]), by [`Family::index`].
    pub(crate) raw_hist: [Option<Hist>; FAMILIES],
}

fn hist_delta(before: &GroupSeries, after: &GroupSeries, family: &str) -> Option<Hist> {
    after.hist(family)?.minus(&before.hist(family)?)
}

fn sum_count_delta(before: &GroupSeries, after: &GroupSeries, family: &str) -> Option<SumCount> {
    after.sum_count(family)?.minus(&before.sum_count(family)?)
}

/// The increase of the first of `names` that both dumps hold.
fn series_delta(before: &GroupSeries, after: &GroupSeries, names: &[&str]) -> Option<f64> {
    names.iter().find_map(|name| {
        let (b, a) = (before.get(name, &[])?, after.get(name, &[])?);
        (a.value >= b.value).then_some(a.value - b.value)
    })
}

fn add_opt<T: Clone>(total: &mut Option<T>, part: &Option<T>, add: impl FnOnce(&mut T, &T)) {
    match (total.as_mut(), part) {
        (Some(t), Some(p)) => add(t, p),
        (None, Some(p)) => *total = Some(p.clone()),
        (_, None) => {}
    }
}

impl Interval {
    /// The increases of every family from `before` to `after` (one group).
    pub(crate) fn between(before: &GroupSeries, after: &GroupSeries) -> Interval {
        if let Some(line) = after.reset_since(before) {
            return Interval {
                reset_line: Some(line),
                ..Interval::default()
            };
        }
        let itl = after.itl_family();
        let families = Family::ALL.map(|f| match f.kind() {
            FamilyKind::Histogram => hist_delta(before, after, f.name()),
            FamilyKind::SumCount => sum_count_delta(before, after, f.name()).map(|sc| Hist {
                buckets: Vec::new(),
                sum: sc.sum,
                count: sc.count,
            }),
            // The SLO counters have no sum and count to read as a latency.
            FamilyKind::Counters => None,
        });
        let raw = Family::ALL.map(|f| {
            let raw = presentation::get(f)?.raw?;
            Some(SumCount {
                sum: series_delta(before, after, raw.num)?,
                count: series_delta(before, after, raw.den)?,
            })
        });
        let raw_hist =
            Family::ALL.map(|f| hist_delta(before, after, presentation::get(f)?.demo_p99?.raw));
        Interval {
            reset_line: None,
            raw_tpot: hist_delta(before, after, RAW_TPOT),
            raw_itl: hist_delta(before, after, itl),
            families,
            raw,
            raw_hist,
        }
    }

    /// The increase of `family`'s corrected series.
    pub(crate) fn family(&self, family: Family) -> Option<&Hist> {
        self.families[family.index()].as_ref()
    }

    /// `Δ_sum / Δ_count` of `family`, `None` without an increase of its count.
    pub(crate) fn mean(&self, family: Family) -> Option<f64> {
        self.family(family)?.mean()
    }

    /// The raw reading of `family`'s quantity: `Δ num / Δ den + offset` ([`presentation::RawMean`]).
    pub(crate) fn raw_mean(&self, family: Family) -> Option<f64> {
        let offset = presentation::of(family).raw?.offset;
        Some(self.raw[family.index()]?.mean()? + offset)
    }

    /// Adds another group's interval: numerators and denominators are summed, never ratios. A
    /// family missing in one group adds nothing; histograms with other bounds are left out.
    pub(crate) fn add(&mut self, other: &Interval) {
        let hist = |t: &mut Hist, p: &Hist| {
            t.add(p);
        };
        add_opt(&mut self.raw_tpot, &other.raw_tpot, hist);
        add_opt(&mut self.raw_itl, &other.raw_itl, hist);
        for (t, p) in self.families.iter_mut().zip(&other.families) {
            add_opt(t, p, hist);
        }
        for (t, p) in self.raw.iter_mut().zip(&other.raw) {
            add_opt(t, p, SumCount::add);
        }
        for (t, p) in self.raw_hist.iter_mut().zip(&other.raw_hist) {
            add_opt(t, p, hist);
        }
    }

    /// The sum of every group's interval between two dumps (groups present in both).
    pub(crate) fn total(before: &Dump, after: &Dump) -> Interval {
        let mut total = Interval::default();
        for (key, a) in &after.groups {
            if let Some(b) = before.groups.get(key) {
                total.add(&Interval::between(b, a));
            }
        }
        total
    }
}

#[cfg(test)]
mod tests;
