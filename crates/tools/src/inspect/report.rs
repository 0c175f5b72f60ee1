//! What `inspect` prints per group: one value per corrected family (registry order) and the raw
//! readings, why each missing value is missing, as JSON or as a table.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::ser::{Serialize, SerializeMap, Serializer};

use super::slos::{self, SloReport};
use crate::presentation::{self, Unit};
use crate::readings::{Interval, RAW_ITL, RAW_TPOT};
use crate::table::{Cell, Table, Tone};
use engine::{FAMILIES, Family, WithheldReason};

/// The JSON object of one group (`--json`): `labels`, then each value by its key, then `slos`,
/// `note` and `null_reasons`. Seconds are seconds; a value is `null` when the dumps cannot
/// support it.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupReport {
    /// The group's labels (series labels minus `__name__`, `le`, `source`, `position`,
    /// `finished_reason`).
    pub labels: BTreeMap<String, String>,
    /// `(key, value)` in [`value_keys`] order: each family's `Δ_sum / Δ_count` under its
    /// `inspect --json` key (`canonical_tpot_mean_seconds`, …), then the raw
    /// readings `raw_tpot_mean_seconds` (n ≤ 1 requests counted as 0) and `raw_itl_mean_seconds`
    /// (seconds per output, whatever its tokens).
    pub(crate) values: Vec<(&'static str, Option<f64>)>,
    /// Each SLO whose counters the dumps hold or the engine computed for the group (key `slos`,
    /// [`SloReport`]); `null` when the dumps cannot support any value (a reset, a group in one
    /// dump only), with the reason under `slos` in `null_reasons`.
    pub slos: Option<Vec<SloReport>>,
    /// The table's note: why the values are all `null` (`counter reset (AFTER line N)`, `counter
    /// reset, or dumps swapped …`, `no new observation …`, `only in BEFORE`), or which family
    /// is withheld and why; `null` in the JSON when there is nothing to say.
    pub(crate) note: String,
    /// For each value that is `null`, keyed by its key, why: `counter_reset`,
    /// `counter_reset_or_swapped`, `only_in_before`, `only_in_after`, `no_new_observation` (its
    /// count did not grow), `missing_input` (a dump lacks the series), or the engine's
    /// [`engine::WithheldReason`] (`no_le_1_bound`, `incomplete`, `inconsistent_inputs`).
    pub null_reasons: BTreeMap<&'static str, &'static str>,
}

impl Serialize for GroupReport {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.values.len() + 4))?;
        map.serialize_entry("labels", &self.labels)?;
        for (key, value) in &self.values {
            map.serialize_entry(key, value)?;
        }
        map.serialize_entry(presentation::SLO.json_key, &self.slos)?;
        let note = (!self.note.is_empty()).then_some(&self.note);
        map.serialize_entry("note", &note)?;
        map.serialize_entry("null_reasons", &self.null_reasons)?;
        map.end()
    }
}

/// The raw readings of the table and the JSON: `(key, words, column, series)`.
const RAW_FIELDS: [(&str, &str, &str, &str); 2] = [
    ("raw_tpot_mean_seconds", "raw TPOT", "TPOT raw ms", RAW_TPOT),
    (
        "raw_itl_mean_seconds",
        "raw ITL",
        "ITL raw ms/output",
        RAW_ITL,
    ),
];

/// Where a value comes from.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// A corrected family's mean.
    Family(Family),
    /// One of [`RAW_FIELDS`].
    Raw(usize),
}

/// Every value of a report in order: families in registry order, then the raw readings.
fn sources() -> impl Iterator<Item = Source> {
    presentation::shown()
        .map(Source::Family)
        .chain((0..RAW_FIELDS.len()).map(Source::Raw))
}

impl Source {
    fn key(self) -> &'static str {
        match self {
            Source::Family(f) => presentation::of(f).json_key,
            Source::Raw(i) => RAW_FIELDS[i].0,
        }
    }

    fn words(self) -> &'static str {
        match self {
            Source::Family(f) => presentation::of(f).words,
            Source::Raw(i) => RAW_FIELDS[i].1,
        }
    }
}

/// The JSON keys of [`GroupReport`]'s values, in order.
pub fn value_keys() -> Vec<&'static str> {
    sources().map(Source::key).collect()
}

impl GroupReport {
    /// The value under `key`, `None` when it is `null` or there is no such key.
    pub fn get(&self, key: &str) -> Option<f64> {
        self.values
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, v)| *v)
    }

    pub(super) fn empty(
        labels: BTreeMap<String, String>,
        note: String,
        reason: &'static str,
    ) -> GroupReport {
        GroupReport {
            null_reasons: sources()
                .map(|s| (s.key(), reason))
                .chain([(presentation::SLO.json_key, reason)])
                .collect(),
            labels,
            values: sources().map(|s| (s.key(), None)).collect(),
            slos: None,
            note,
        }
    }

    pub(super) fn from_interval(
        labels: BTreeMap<String, String>,
        i: &Interval,
        withheld: &[Option<WithheldReason>; FAMILIES],
    ) -> GroupReport {
        let raw = [i.raw_tpot.as_ref(), i.raw_itl.as_ref()];
        // Each value, and whether its family is in both dumps (its increase exists).
        let read = |s: Source| match s {
            Source::Family(f) => (i.mean(f), i.family(f).is_some()),
            Source::Raw(r) => (raw[r].and_then(|h| h.mean()), raw[r].is_some()),
        };
        let mut report = GroupReport {
            null_reasons: BTreeMap::new(),
            labels,
            values: sources().map(|s| (s.key(), read(s).0)).collect(),
            slos: None,
            note: String::new(),
        };
        let mut withheld_words = Vec::new();
        let mut quiet_words = Vec::new();
        for source in sources() {
            let (value, present) = read(source);
            if value.is_some() {
                continue;
            }
            let family = match source {
                Source::Family(f) => Some(f),
                Source::Raw(_) => None,
            };
            let reason = match family.and_then(|f| withheld[f.index()]) {
                _ if present => "no_new_observation",
                Some(r) => r.as_str(),
                None => "missing_input",
            };
            if reason != "no_new_observation" && family.is_some() {
                withheld_words.push(format!("{} {}", source.words(), reason.replace('_', " ")));
            } else if reason == "no_new_observation" {
                quiet_words.push(source.words());
            }
            report.null_reasons.insert(source.key(), reason);
        }
        let idle = report.null_reasons.len() == report.values.len()
            && report
                .null_reasons
                .values()
                .all(|r| *r == "no_new_observation");
        if idle {
            report.note =
                "no new observation between the dumps (an idle engine, or the same scrape twice)"
                    .into();
        } else {
            // Say why every `—` of the table is there, as `--json`'s null_reasons do.
            let mut parts = Vec::new();
            if !withheld_words.is_empty() {
                parts.push(format!("withheld: {}", withheld_words.join(", ")));
            }
            if !quiet_words.is_empty() {
                parts.push(format!(
                    "nothing new between the dumps for {}",
                    quiet_words.join(", ")
                ));
            }
            report.note = parts.join("; ");
        }
        report
    }
}

fn cell(v: Option<f64>, unit: Unit) -> Cell {
    match (v, unit) {
        (Some(v), Unit::Seconds) => Cell::plain(format!("{:.3}", v * 1000.0)),
        (Some(v), Unit::Ratio) => Cell::plain(format!("{v:.2}")),
        (None, _) => Cell::new("—", Tone::Dim),
    }
}

fn labels_text(labels: &[(&String, &String)]) -> String {
    let inner: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
    inner.join(",")
}

/// The table's value columns: `(header, key, unit)`. A raw reading's column comes right before
/// the first family whose raw counterpart reads the same series.
fn columns() -> Vec<(&'static str, &'static str, Unit)> {
    let mut out = Vec::new();
    let mut raw_done = [false; RAW_FIELDS.len()];
    for family in presentation::shown() {
        let shown = presentation::of(family);
        for (i, (key, _, column, series)) in RAW_FIELDS.iter().enumerate() {
            let same = shown
                .raw
                .is_some_and(|r| r.num.first().is_some_and(|n| n.starts_with(series)));
            if same && !raw_done[i] {
                raw_done[i] = true;
                out.push((*column, *key, Unit::Seconds));
            }
        }
        out.push((shown.column, shown.json_key, shown.unit));
    }
    for (i, (key, _, column, _)) in RAW_FIELDS.iter().enumerate() {
        if !raw_done[i] {
            out.push((*column, *key, Unit::Seconds));
        }
    }
    out
}

/// The human-readable table of `reports` (what `inspect` prints without `--json`).
pub fn render_table(before: &str, after: &str, reports: &[GroupReport]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "vllm-corrector inspect: BEFORE {before}, AFTER {after}"
    );
    let _ = writeln!(
        out,
        "Each value is Δ_sum / Δ_count between the dumps, as rate(x_sum[w]) / rate(x_count[w]) over the same window; — = the dumps cannot support it."
    );
    // Labels every group shares are printed once, above the table.
    let common: Vec<(&String, &String)> = match reports.first() {
        Some(first) if reports.len() > 1 => first
            .labels
            .iter()
            .filter(|(k, v)| reports.iter().all(|r| r.labels.get(*k) == Some(*v)))
            .collect(),
        _ => Vec::new(),
    };
    if !common.is_empty() {
        let _ = writeln!(out, "Labels of every group: {}", labels_text(&common));
    }
    let _ = writeln!(out);
    let columns = columns();
    let mut headers = vec!["group"];
    headers.extend(columns.iter().map(|(h, _, _)| *h));
    headers.push("note");
    let mut table = Table::new(&headers);
    let mut slo_rows = Vec::new();
    for r in reports {
        let own: Vec<(&String, &String)> =
            r.labels.iter().filter(|kv| !common.contains(kv)).collect();
        let mut row = vec![Cell::plain(labels_text(&own))];
        row.extend(columns.iter().map(|(_, key, unit)| cell(r.get(key), *unit)));
        row.push(Cell::plain(r.note.clone()));
        table.push(row);
        if let Some(s) = &r.slos {
            slo_rows.push((labels_text(&own), &s[..]));
        }
    }
    out.push_str(&table.render(false));
    out.push_str(&slos::render(&slo_rows));
    out
}
