//! `vllm-corrector inspect BEFORE AFTER [--json]`: the corrected values over the interval between
//! two `/metrics` dumps, next to the raw readings.
//!
//! Each dump is a file (`-` is stdin) or an `http://` URL, in the Prometheus text format 0.0.4 or
//! OpenMetrics (recognised by its final `# EOF`, or by the response's `Content-Type`). With
//! `--wait D`, AFTER is read D after BEFORE, so `inspect --wait 30s URL URL` samples one target. Dumps of
//! vLLM itself (raw `vllm:*` series) are corrected by feeding BEFORE and then AFTER into one
//! [`Engine`], the receiver's own, at two timestamps and taking the difference of its derived
//! families. Dumps of the corrector's own `/metrics` already hold `vllm_corrected_*`: those are
//! used directly (a family the dump holds is never recomputed).
//!
//! Every value is `Δsum / Δcount` between the dumps, per group (see [`super::readings`]). A value
//! the dumps cannot support is `null`: the family's input is missing from a dump, its count did
//! not grow, or a counter reset lies between the dumps (a cumulative series decreased or a
//! `_created` value changed). Dumps given in the wrong order are refused when they prove it
//! ([`super::order`]: sample timestamps, or a counter that fell while its `_created` stayed), as
//! are dumps that share no group.
//!
//! Per group it also reads the SLOs ([`SloReport`]): the SLO counters' increases (those of the
//! corrector's dump, or the engine's from the raw dumps, counting the SLOs of `--config.file`,
//! else the shipped default) beside vLLM's own histograms at the thresholds. The engine's goodput
//! bounds start at BEFORE, its baseline: they bracket the requests that finished between the
//! dumps.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use super::order;
use super::readings::{Dump, DumpSample, GroupKey, GroupSeries, Interval, series_text};
use super::slo_readings;
use engine::slo::{SloSet, SloSpec};
use engine::{
    DerivedValue, Engine, EngineConfig, FAMILIES, Family, FamilyKind, IngestReport, READ_NAMES,
    WithheldReason,
};
use protocol::{Label, Sample, normalize_labels};

mod load;
mod report;
mod slos;

pub(crate) use load::samples;
pub use load::{FETCH_TIMEOUT, InspectError, Loaded, load, load_within};
pub use report::{GroupReport, render_table, value_keys};
pub use slos::{SliReport, SloReport};

/// Arguments of `inspect`.
#[derive(Debug, Clone, clap::Args)]
pub struct InspectArgs {
    /// The earlier `/metrics` dump: a file, `-` for stdin, or an `http://` URL.
    #[arg(value_name = "BEFORE")]
    pub(crate) before: String,
    /// The later dump, taken some seconds after BEFORE: a file, `-` or an `http://` URL.
    #[arg(value_name = "AFTER")]
    pub(crate) after: String,
    /// Print a JSON array, one object per group, instead of the table.
    #[arg(long)]
    pub(crate) json: bool,
    /// Wait this long after reading BEFORE before reading AFTER (e.g. `30s`), so one URL can
    /// serve as both.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub(crate) wait: Option<Duration>,
    /// A configuration file of the service: the SLOs of its `slos:` (validated as the service
    /// does) are counted from raw dumps, and label the SLO values of every dump with their
    /// thresholds and objectives. Default: the shipped default SLO.
    #[arg(long = "config.file", value_name = "PATH")]
    pub(crate) config_file: Option<PathBuf>,
}

/// Why the engine withheld each family for a group: at AFTER, else at BEFORE (indexed by
/// [`Family::index`]).
type Withheld = BTreeMap<GroupKey, [Option<WithheldReason>; FAMILIES]>;

/// Runs `inspect`: loads both dumps, prints the table or the JSON array to stdout.
///
/// # Errors
/// [`InspectError`] for an unreadable, malformed or mismatched dump.
pub async fn run(args: InspectArgs) -> Result<(), InspectError> {
    let is_url = args.before.starts_with("http://") || args.before.starts_with("https://");
    if is_url && args.before == args.after && args.wait.is_none() {
        return Err(InspectError::Dump {
            which: "AFTER",
            location: args.after,
            message: "the same URL as BEFORE, read at the same instant: pass --wait 30s to read it 30 s later".into(),
        });
    }
    if args.before == "-" && args.after == "-" {
        return Err(InspectError::Dump {
            which: "AFTER",
            location: args.after,
            message: "standard input is already BEFORE: at most one dump can come from `-`".into(),
        });
    }
    let (spec, set) = match &args.config_file {
        Some(path) => {
            let config = service::config::Config::from_file(path)
                .map_err(|e| InspectError::Config(e.to_string()))?;
            (config.slos, config.engine.slos)
        }
        None => default_slos(),
    };
    let before = load("BEFORE", &args.before).await?;
    if let Some(wait) = args.wait {
        tokio::time::sleep(wait).await;
    }
    let after = load("AFTER", &args.after).await?;
    let reports = inspect_with(&before, &after, &spec, &set)?;
    let text = if args.json {
        serde_json::to_string_pretty(&reports).unwrap_or_default() + "\n"
    } else {
        render_table(&args.before, &args.after, &reports)
    };
    print!("{text}");
    Ok(())
}

/// The shipped default SLO spec and the set the engine counts it by (no `match:`).
fn default_slos() -> (SloSpec, SloSet) {
    let spec = SloSpec::shipped_default();
    let set = SloSet::new(&spec, |_| None);
    (spec, set)
}

/// [`inspect_with`] the shipped default SLO.
///
/// # Errors
/// As [`inspect_with`].
pub fn inspect(before: &Loaded, after: &Loaded) -> Result<Vec<GroupReport>, InspectError> {
    let (spec, set) = default_slos();
    inspect_with(before, after, &spec, &set)
}

/// Computes one [`GroupReport`] per group of vLLM series found in either dump, in label order.
/// The engine counts the SLOs of `set` from raw dumps; `spec` (the same SLOs) labels every SLO
/// reading with its thresholds and objectives.
///
/// # Errors
/// [`InspectError::Dump`] for a malformed dump, a series twice in one dump, or a histogram whose
/// buckets differ between the dumps (each naming the line); [`InspectError::Swapped`] when AFTER
/// is proven older than BEFORE (a sample timestamp, or a counter that fell while its `_created`
/// time stayed: [`super::order`]); [`InspectError::NoCommonGroup`] when no group is in both.
/// A counter that fell without such proof (a restart) gives that group `null`s and a note.
pub fn inspect_with(
    before: &Loaded,
    after: &Loaded,
    spec: &SloSpec,
    set: &SloSet,
) -> Result<Vec<GroupReport>, InspectError> {
    let before_samples = samples(before)?;
    let after_samples = samples(after)?;
    let mut dumps = [Dump::default(), Dump::default()];
    for (dump, (loaded, list)) in dumps
        .iter_mut()
        .zip([(before, &before_samples), (after, &after_samples)])
    {
        for s in list {
            dump.insert(s.clone())
                .map_err(|e| loaded.error(e.to_string()))?;
        }
    }
    for (loaded, list) in [(before, &before_samples), (after, &after_samples)] {
        if !list
            .iter()
            .any(|s| s.name.starts_with("vllm:") || s.name.starts_with("vllm_corrected_"))
        {
            return Err(loaded.error(format!(
                "no vllm:* series in {} (an empty dump, or not a vLLM /metrics)",
                loaded.which
            )));
        }
    }
    // Each dump's own groups, before the engine's families are added: the engine runs over both
    // dumps, so it would give AFTER corrected series for BEFORE's groups (and the reverse).
    let own = |d: &Dump| -> BTreeSet<GroupKey> {
        d.groups
            .iter()
            .filter(|(_, g)| is_vllm_group(g))
            .map(|(k, _)| k.clone())
            .collect()
    };
    let (own_b, own_a) = (own(&dumps[0]), own(&dumps[1]));
    if own_b.is_disjoint(&own_a) {
        return Err(InspectError::NoCommonGroup(format!(
            "BEFORE has {} group(s), AFTER has {}",
            own_b.len(),
            own_a.len()
        )));
    }
    let (withheld, notes) = add_engine_families(&mut dumps, &before_samples, &after_samples, set);
    let [b, a] = &dumps;
    let keys: BTreeSet<&GroupKey> = own_b.union(&own_a).collect();
    let mut reports = Vec::new();
    for key in keys {
        let labels: BTreeMap<String, String> = key.iter().cloned().collect();
        let in_both = own_b.contains(key) && own_a.contains(key);
        let (Some(gb), Some(ga), true) = (b.groups.get(key), a.groups.get(key), in_both) else {
            let only = if own_b.contains(key) {
                "BEFORE"
            } else {
                "AFTER"
            };
            let reason = if only == "BEFORE" {
                "only_in_before"
            } else {
                "only_in_after"
            };
            reports.push(GroupReport::empty(
                labels,
                format!("only in {only}"),
                reason,
            ));
            continue;
        };
        if let Some(evidence) = order::swap_evidence(key, gb, ga) {
            return Err(InspectError::Swapped {
                before: before.location.clone(),
                after: after.location.clone(),
                evidence,
            });
        }
        let interval = Interval::between(gb, ga);
        if let Some(line) = interval.reset_line {
            // Without `_created` evidence of a restart, swapped dumps look the same.
            let (note, reason) = if order::restart_proven(gb, ga) {
                (
                    format!("counter reset (AFTER line {line})"),
                    "counter_reset",
                )
            } else {
                (
                    format!("counter reset, or dumps swapped (AFTER line {line})"),
                    "counter_reset_or_swapped",
                )
            };
            reports.push(GroupReport::empty(labels, note, reason));
            continue;
        }
        check_pair(before, after, key, gb, ga)?;
        let reasons = withheld.get(key).copied().unwrap_or_default();
        let mut report = GroupReport::from_interval(labels, &interval, &reasons);
        let read = slo_readings::between(gb, ga, spec);
        report.slos = Some(slos::reports(&read, spec, notes.get(key).map(|n| &n[..])));
        reports.push(report);
    }
    Ok(reports)
}

/// True for a group that holds a series any row is computed from: a series the engine reads,
/// or a corrected family.
fn is_vllm_group(g: &GroupSeries) -> bool {
    g.series
        .keys()
        .any(|(name, _)| READ_NAMES.iter().any(|r| r.name == name))
        || Family::ALL.iter().any(|f| g.has_family(f.name()))
}

/// Mismatches between the two readings of one group: a bucket of a histogram that only one dump
/// has.
fn check_pair(
    before: &Loaded,
    after: &Loaded,
    group: &GroupKey,
    gb: &GroupSeries,
    ga: &GroupSeries,
) -> Result<(), InspectError> {
    let series = |(name, dims): &(String, Vec<(String, String)>)| {
        let mut labels = group.clone();
        labels.extend(dims.iter().cloned());
        labels.sort();
        series_text(name, &labels)
    };
    for (this, other, dump) in [(ga, gb, after), (gb, ga, before)] {
        for (key, r) in &this.series {
            let Some(family) = key.0.strip_suffix("_bucket") else {
                continue;
            };
            if r.line > 0 && other.has_family(family) && !other.series.contains_key(key) {
                return Err(dump.error(format!(
                    "line {}: bucket {} is not in the other dump: the dumps have different bucket layouts",
                    r.line,
                    series(key)
                )));
            }
        }
    }
    Ok(())
}

/// Feeds the raw samples into one engine counting the SLOs of `slos` (BEFORE at t = 1 s, AFTER
/// at t = 2 s) and adds its derived families, cumulative at each instant, to the dumps: for each
/// group, only the families neither dump already holds. Returns why the engine withheld the
/// others, and for each group it saw the SLIs it does not count ([`slos::Notes`]).
fn add_engine_families(
    dumps: &mut [Dump; 2],
    before: &[DumpSample],
    after: &[DumpSample],
    slos: &SloSet,
) -> (Withheld, slos::Notes) {
    // A dump is one whole scrape, read in one piece: no part of it can come late, so the engine
    // evaluates each at once (docs/ENGINE.md, "Settling").
    let mut engine = Engine::new(EngineConfig {
        settle_scrapes: 0,
        slos: slos.clone(),
        ..EngineConfig::default()
    });
    let mut withheld = Withheld::new();
    for (i, (samples, ts)) in [(before, 1_000), (after, 2_000)].into_iter().enumerate() {
        feed(&mut engine, samples, ts);
        for family in Family::ALL {
            engine.for_each_withheld(family, |labels, reason| {
                withheld.entry(labels.to_vec()).or_default()[family.index()] = Some(reason);
            });
            engine.for_each_derived(family, |labels, value| {
                let key: GroupKey = labels.to_vec();
                let own = |name: &str| match family.kind() {
                    FamilyKind::Counters => crate::presentation::SLO.is_counter(name),
                    _ => name.starts_with(family.name()),
                };
                let native = dumps.iter().any(|d| {
                    d.groups
                        .get(&key)
                        .is_some_and(|g| g.series.iter().any(|(k, r)| r.line > 0 && own(&k.0)))
                });
                if native {
                    return;
                }
                for s in derived_samples(family, labels, value) {
                    // Engine output never repeats a series: an error here cannot happen.
                    let _ = dumps[i].insert(s);
                }
            });
        }
    }
    let notes = engine
        .snapshot()
        .into_iter()
        .map(|g| {
            (
                g.labels.to_vec(),
                g.slo_notes.unwrap_or_else(|| Vec::new().into()),
            )
        })
        .collect();
    (withheld, notes)
}

fn feed(engine: &mut Engine, samples: &[DumpSample], ts: i64) {
    let mut report = IngestReport::default();
    for s in samples {
        if !s.name.starts_with("vllm:") {
            continue;
        }
        let mut labels: Vec<Label<'_>> = Vec::with_capacity(s.labels.len() + 1);
        labels.push(Label {
            name: "__name__",
            value: &s.name,
        });
        labels.extend(s.labels.iter().map(|(n, v)| Label { name: n, value: v }));
        if normalize_labels(&mut labels).is_err() {
            continue;
        }
        let sample = Sample {
            value: s.value,
            timestamp_ms: ts,
        };
        engine.ingest(&labels, &[sample], ts, &mut report);
    }
}

/// The `_bucket`/`_sum`/`_count` samples of one derived value.
fn derived_samples(
    family: Family,
    labels: &[(String, String)],
    value: &DerivedValue,
) -> Vec<DumpSample> {
    let sample = |suffix: &str, extra: Option<(String, String)>, value: f64| {
        let mut labels = labels.to_vec();
        labels.extend(extra);
        DumpSample {
            name: format!("{}{suffix}", family.name()),
            labels,
            value,
            timestamp_ms: None,
            line: 0,
            cumulative: true,
        }
    };
    match value {
        DerivedValue::Histogram {
            buckets,
            sum,
            count,
        } => {
            let mut out: Vec<DumpSample> = buckets
                .iter()
                .map(|(le, c)| {
                    let le = protocol::float::format_le(*le);
                    sample("_bucket", Some(("le".into(), le)), *c)
                })
                .collect();
            out.push(sample("_sum", None, *sum));
            out.push(sample("_count", None, *count));
            out
        }
        DerivedValue::SumCount { sum, count } => {
            vec![sample("_sum", None, *sum), sample("_count", None, *count)]
        }
        DerivedValue::Counters { rows, values } => rows
            .iter()
            .zip(values)
            .map(|(row, value)| {
                let mut labels = labels.to_vec();
                labels.extend(row.labels.iter().cloned());
                DumpSample {
                    name: format!("{}_total", row.metric.name()),
                    labels,
                    value: *value,
                    timestamp_ms: None,
                    line: 0,
                    cumulative: true,
                }
            })
            .collect(),
    }
}

#[cfg(test)]
mod slo_tests;
#[cfg(test)]
mod tests;
