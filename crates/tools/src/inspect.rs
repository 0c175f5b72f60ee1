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

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use super::order;
use super::readings::{
    Dump, DumpSample, GroupKey, GroupSeries, Interval, RAW_ITERATION_TOKENS, RAW_ITL, RAW_ITL_OLD,
    RAW_TPOT, cumulative_by_suffix, series_text,
};
use super::table::{Cell, Table, Tone};
use engine::{DerivedValue, Engine, EngineConfig, Family, IngestReport, WithheldReason};
use promtext::{Exposition, Format, MetricKind};
use protocol::{Label, Sample, normalize_labels};

/// Arguments of `inspect`.
#[derive(Debug, Clone, clap::Args)]
pub struct InspectArgs {
    /// The earlier `/metrics` dump: a file, `-` for stdin, or an `http://` URL.
    #[arg(value_name = "BEFORE")]
    pub before: String,
    /// The later dump, taken some seconds after BEFORE: a file, `-` or an `http://` URL.
    #[arg(value_name = "AFTER")]
    pub after: String,
    /// Print a JSON array, one object per group, instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Wait this long after reading BEFORE before reading AFTER (e.g. `30s`), so one URL can
    /// serve as both.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub wait: Option<Duration>,
}

/// Why `inspect` failed. The message names the dump (`BEFORE`/`AFTER` and its location) and,
/// for a malformed or mismatched dump, the line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InspectError {
    /// One dump cannot be read, fetched or parsed, or contradicts the other at a line of it.
    #[error("{which} {location}: {message}")]
    Dump {
        /// `BEFORE` or `AFTER`.
        which: &'static str,
        /// The path or URL.
        location: String,
        /// What is wrong (starting with `line N:` when a line is at fault).
        message: String,
    },
    /// The two dumps have no group of vLLM series in common (different targets, or not vLLM).
    #[error("BEFORE and AFTER share no group of vLLM series: {0}")]
    NoCommonGroup(String),
    /// AFTER was taken before BEFORE: the arguments are swapped ([`super::order`]).
    #[error(
        "BEFORE {before} and AFTER {after} are swapped: {evidence}; pass the earlier dump first"
    )]
    Swapped {
        /// BEFORE's path or URL.
        before: String,
        /// AFTER's path or URL.
        after: String,
        /// The series, lines and timestamps that prove it.
        evidence: String,
    },
}

/// The JSON object of one group (`--json`). Seconds are seconds; `null` when unsupported.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupReport {
    /// The group's labels (series labels minus `__name__`, `le`, `source`, `position`,
    /// `finished_reason`).
    pub labels: BTreeMap<String, String>,
    /// Δ canonical TPOT `_sum` / Δ `_count`: mean TPOT over requests with n > 1, seconds.
    pub canonical_tpot_mean_seconds: Option<f64>,
    /// Δ token-weighted ITL `_sum` / Δ `_count`: seconds per token after each request's first.
    pub token_weighted_itl_seconds: Option<f64>,
    /// Δ acceptance-corrected ITL `_sum` / Δ `_count`: seconds per token under spec decoding.
    pub acceptance_corrected_itl_seconds: Option<f64>,
    /// Δ local-compute iteration tokens `_sum` / Δ `_count`: tokens per engine iteration.
    pub local_compute_iteration_tokens_mean: Option<f64>,
    /// Δ raw request TPOT `_sum` / Δ `_count` (n ≤ 1 requests counted as 0), seconds.
    pub raw_tpot_mean_seconds: Option<f64>,
    /// Δ raw ITL `_sum` / Δ `_count`: seconds per output, whatever its tokens.
    pub raw_itl_mean_seconds: Option<f64>,
    /// The table's note: why the values are all `null` (`counter reset (AFTER line N)`, `counter
    /// reset, or dumps swapped …`, `no new observation …`, `only in BEFORE`), or which family
    /// is withheld and why; `null` in the JSON when there is nothing to say.
    #[serde(serialize_with = "empty_as_null")]
    pub note: String,
    /// For each value above that is `null`, keyed by its field name, why: `counter_reset`,
    /// `counter_reset_or_swapped`, `only_in_before`, `only_in_after`, `no_new_observation` (its
    /// count did not grow), `missing_input` (a dump lacks the series), or the engine's
    /// [`engine::WithheldReason`] (`no_le_1_bound`, `incomplete`, `inconsistent_inputs`).
    pub null_reasons: BTreeMap<&'static str, &'static str>,
}

fn empty_as_null<S: serde::Serializer>(note: &str, s: S) -> Result<S::Ok, S::Error> {
    if note.is_empty() {
        s.serialize_none()
    } else {
        s.serialize_some(note)
    }
}

/// The JSON field names of [`GroupReport`]'s values, in order, with the family each is read from
/// (`None` for the raw readings) and the words the table's note uses for it.
const VALUE_FIELDS: [(&str, Option<Family>, &str); 6] = [
    (
        "canonical_tpot_mean_seconds",
        Some(Family::CanonicalTpot),
        "canonical TPOT",
    ),
    (
        "token_weighted_itl_seconds",
        Some(Family::TokenWeightedItl),
        "token-weighted ITL",
    ),
    (
        "acceptance_corrected_itl_seconds",
        Some(Family::AcceptanceCorrectedItl),
        "acceptance-corrected ITL",
    ),
    (
        "local_compute_iteration_tokens_mean",
        Some(Family::IterationTokensLocalCompute),
        "local-compute tokens",
    ),
    ("raw_tpot_mean_seconds", None, "raw TPOT"),
    ("raw_itl_mean_seconds", None, "raw ITL"),
];

/// Why the engine withheld each family for a group: at AFTER, else at BEFORE (indexed by
/// [`Family::index`]).
type Withheld = BTreeMap<GroupKey, [Option<WithheldReason>; 4]>;

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
    let before = load("BEFORE", &args.before).await?;
    if let Some(wait) = args.wait {
        tokio::time::sleep(wait).await;
    }
    let after = load("AFTER", &args.after).await?;
    let reports = inspect(&before, &after)?;
    let text = if args.json {
        serde_json::to_string_pretty(&reports).unwrap_or_default() + "\n"
    } else {
        render_table(&args.before, &args.after, &reports)
    };
    print!("{text}");
    Ok(())
}

/// A loaded dump: where it came from, its text and its format.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    /// `BEFORE` or `AFTER`.
    pub which: &'static str,
    /// The path or URL, for messages.
    pub location: String,
    /// The exposition text.
    pub text: String,
    /// Its format.
    pub format: Format,
}

impl Loaded {
    /// A dump from text already in memory; the format is OpenMetrics when the last non-blank
    /// line is `# EOF`, else text 0.0.4.
    pub fn from_text(which: &'static str, location: &str, text: String) -> Loaded {
        let format = match text.lines().rev().find(|l| !l.trim().is_empty()) {
            Some(last) if last.trim() == "# EOF" => Format::OpenMetrics,
            _ => Format::Text004,
        };
        Loaded {
            which,
            location: location.to_owned(),
            text,
            format,
        }
    }

    fn error(&self, message: impl Into<String>) -> InspectError {
        InspectError::Dump {
            which: self.which,
            location: self.location.clone(),
            message: message.into(),
        }
    }
}

/// Reads a dump from a file, stdin (`-`) or an `http://` URL (30 s timeout, 2xx required).
///
/// # Errors
/// [`InspectError::Dump`] naming the location when it cannot be read or fetched.
pub async fn load(which: &'static str, location: &str) -> Result<Loaded, InspectError> {
    load_within(which, location, FETCH_TIMEOUT).await
}

/// How long `inspect` waits for an `http://` dump, connection and body included.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a fetch failed, in the terms a user can act on: a timeout (the server accepted and never
/// answered in time), a refused connection (nothing listens there), or reqwest's own message.
fn fetch_error(error: &reqwest::Error, timeout: Duration) -> String {
    if error.is_timeout() {
        return format!("timed out after {timeout:?}: the server did not answer in time");
    }
    let mut source: Option<&dyn std::error::Error> = Some(error);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return "connection refused: nothing listens at that address and port".to_owned();
        }
        source = e.source();
    }
    if error.is_connect() {
        let mut text = error.to_string();
        let mut inner = std::error::Error::source(error);
        while let Some(e) = inner {
            text = format!("{text}: {e}");
            inner = e.source();
        }
        return format!("cannot connect: {text}");
    }
    format!("cannot fetch: {error}")
}

/// [`load`] with an explicit fetch timeout.
///
/// # Errors
/// As [`load`].
pub async fn load_within(
    which: &'static str,
    location: &str,
    timeout: Duration,
) -> Result<Loaded, InspectError> {
    let fail = |message: String| InspectError::Dump {
        which,
        location: location.to_owned(),
        message,
    };
    if location.starts_with("https://") {
        return Err(fail(
            "https is not supported by this build (no TLS); save the dump with `curl -s URL > file` and pass the file".into(),
        ));
    }
    if location.starts_with("http://") {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| fail(format!("cannot create an HTTP client: {e}")))?;
        let response = client
            .get(location)
            .header("Accept", "text/plain;version=0.0.4")
            .send()
            .await
            .map_err(|e| fail(fetch_error(&e, timeout)))?;
        let status = response.status();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let text = response.text().await.map_err(|e| {
            fail(format!(
                "cannot read the response: {}",
                fetch_error(&e, timeout)
            ))
        })?;
        if !status.is_success() {
            return Err(fail(format!("answered {status}")));
        }
        let format = Format::from_content_type(&content_type);
        return Ok(Loaded {
            which,
            location: location.to_owned(),
            text,
            format,
        });
    }
    let text = if location == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(location)
    }
    .map_err(|e| fail(format!("cannot read: {e}")))?;
    Ok(Loaded::from_text(which, location, text))
}

/// Parses a dump into samples carrying their 1-based line numbers.
///
/// # Errors
/// The parser's error (`line N: …`) as [`InspectError::Dump`].
pub fn samples(dump: &Loaded) -> Result<Vec<DumpSample>, InspectError> {
    let exposition =
        promtext::parse(&dump.text, dump.format).map_err(|e| dump.error(e.to_string()))?;
    // The parser keeps sample lines in order: every non-blank line that is not a comment.
    let lines: Vec<usize> = dump
        .text
        .lines()
        .enumerate()
        .filter(|(_, l)| {
            let l = l.trim_start();
            !l.trim().is_empty() && !l.starts_with('#')
        })
        .map(|(i, _)| i + 1)
        .collect();
    Ok(exposition
        .samples
        .iter()
        .enumerate()
        .map(|(i, s)| DumpSample {
            name: s.name.clone(),
            labels: s.labels.clone(),
            value: s.value,
            timestamp_ms: s.timestamp_ms,
            line: lines.get(i).copied().unwrap_or(0),
            cumulative: is_cumulative(&exposition, &s.name),
        })
        .collect())
}

fn is_cumulative(exposition: &Exposition, name: &str) -> bool {
    if name.ends_with("_created") {
        return false;
    }
    match exposition.kind_of(name) {
        Some(MetricKind::Counter | MetricKind::Histogram | MetricKind::Summary) => true,
        Some(MetricKind::Untyped) | None => cumulative_by_suffix(name),
        Some(_) => false,
    }
}

/// Computes one [`GroupReport`] per group of vLLM series found in either dump, in label order.
///
/// # Errors
/// [`InspectError::Dump`] for a malformed dump, a series twice in one dump, or a histogram whose
/// buckets differ between the dumps (each naming the line); [`InspectError::Swapped`] when AFTER
/// is proven older than BEFORE (a sample timestamp, or a counter that fell while its `_created`
/// time stayed: [`super::order`]); [`InspectError::NoCommonGroup`] when no group is in both.
/// A counter that fell without such proof (a restart) gives that group `null`s and a note.
pub fn inspect(before: &Loaded, after: &Loaded) -> Result<Vec<GroupReport>, InspectError> {
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
    let withheld = add_engine_families(&mut dumps, &before_samples, &after_samples);
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
        reports.push(GroupReport::from_interval(labels, &interval, &reasons));
    }
    Ok(reports)
}

/// True for a group that holds a series any row is computed from.
fn is_vllm_group(g: &GroupSeries) -> bool {
    let families = [
        RAW_TPOT,
        RAW_ITL,
        RAW_ITL_OLD,
        RAW_ITERATION_TOKENS,
        "vllm:generation_tokens_total",
    ];
    families
        .iter()
        .any(|f| g.has_family(f) || g.get(f, &[]).is_some())
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

/// Feeds the raw samples into one engine (BEFORE at t = 1 s, AFTER at t = 2 s) and adds its
/// derived families, cumulative at each instant, to the dumps: for each group, only the
/// families neither dump already holds. Returns why the engine withheld the others.
fn add_engine_families(
    dumps: &mut [Dump; 2],
    before: &[DumpSample],
    after: &[DumpSample],
) -> Withheld {
    let mut engine = Engine::new(EngineConfig::default());
    let mut withheld = Withheld::new();
    for (i, (samples, ts)) in [(before, 1_000), (after, 2_000)].into_iter().enumerate() {
        feed(&mut engine, samples, ts);
        for family in Family::ALL {
            engine.for_each_withheld(family, |labels, reason| {
                withheld.entry(labels.to_vec()).or_default()[family.index()] = Some(reason);
            });
            engine.for_each_derived(family, |labels, value| {
                let key: GroupKey = labels.to_vec();
                let native = dumps.iter().any(|d| {
                    d.groups.get(&key).is_some_and(|g| {
                        g.series
                            .iter()
                            .any(|(k, r)| r.line > 0 && k.0.starts_with(family.name()))
                    })
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
    withheld
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
                    let le = if le.is_infinite() {
                        "+Inf".into()
                    } else {
                        le.to_string()
                    };
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
    }
}

impl GroupReport {
    fn empty(labels: BTreeMap<String, String>, note: String, reason: &'static str) -> GroupReport {
        GroupReport {
            null_reasons: VALUE_FIELDS
                .iter()
                .map(|(field, _, _)| (*field, reason))
                .collect(),
            labels,
            canonical_tpot_mean_seconds: None,
            token_weighted_itl_seconds: None,
            acceptance_corrected_itl_seconds: None,
            local_compute_iteration_tokens_mean: None,
            raw_tpot_mean_seconds: None,
            raw_itl_mean_seconds: None,
            note,
        }
    }

    fn from_interval(
        labels: BTreeMap<String, String>,
        i: &Interval,
        withheld: &[Option<WithheldReason>; 4],
    ) -> GroupReport {
        // Whether each value's family is in both dumps (its increase exists), in VALUE_FIELDS order.
        let present = [
            i.canonical_tpot.is_some(),
            i.token_weighted_itl.is_some(),
            i.acceptance_corrected_itl.is_some(),
            i.local_compute_iteration_tokens.is_some(),
            i.raw_tpot.is_some(),
            i.raw_itl.is_some(),
        ];
        let mut report = GroupReport {
            null_reasons: BTreeMap::new(),
            labels,
            canonical_tpot_mean_seconds: i.canonical_tpot.as_ref().and_then(|h| h.mean()),
            token_weighted_itl_seconds: i.token_weighted_itl.and_then(|s| s.mean()),
            acceptance_corrected_itl_seconds: i
                .acceptance_corrected_itl
                .as_ref()
                .and_then(|h| h.mean()),
            local_compute_iteration_tokens_mean: i
                .local_compute_iteration_tokens
                .and_then(|s| s.mean()),
            raw_tpot_mean_seconds: i.raw_tpot.as_ref().and_then(|h| h.mean()),
            raw_itl_mean_seconds: i.raw_itl.as_ref().and_then(|h| h.mean()),
            note: String::new(),
        };
        let values = [
            report.canonical_tpot_mean_seconds,
            report.token_weighted_itl_seconds,
            report.acceptance_corrected_itl_seconds,
            report.local_compute_iteration_tokens_mean,
            report.raw_tpot_mean_seconds,
            report.raw_itl_mean_seconds,
        ];
        let mut withheld_words = Vec::new();
        let mut quiet_words = Vec::new();
        for (((field, family, words), value), present) in
            VALUE_FIELDS.iter().zip(values).zip(present)
        {
            if value.is_some() {
                continue;
            }
            let reason = match family.and_then(|f| withheld[f.index()]) {
                _ if present => "no_new_observation",
                Some(r) => r.as_str(),
                None => "missing_input",
            };
            if reason != "no_new_observation" && family.is_some() {
                withheld_words.push(format!("{words} {}", reason.replace('_', " ")));
            } else if reason == "no_new_observation" {
                quiet_words.push(*words);
            }
            report.null_reasons.insert(field, reason);
        }
        let idle = report.null_reasons.len() == values.len()
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

fn ms(v: Option<f64>) -> Cell {
    match v {
        Some(v) => Cell::plain(format!("{:.3}", v * 1000.0)),
        None => Cell::new("—", Tone::Dim),
    }
}

fn labels_text(labels: &[(&String, &String)]) -> String {
    let inner: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
    inner.join(",")
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
    let mut table = Table::new(&[
        "group",
        "TPOT raw ms",
        "TPOT canonical ms",
        "ITL raw ms/output",
        "ITL token-weighted ms",
        "ITL acceptance-corr. ms",
        "iteration tokens local",
        "note",
    ]);
    for r in reports {
        let own: Vec<(&String, &String)> =
            r.labels.iter().filter(|kv| !common.contains(kv)).collect();
        let tokens = match r.local_compute_iteration_tokens_mean {
            Some(v) => Cell::plain(format!("{v:.2}")),
            None => Cell::new("—", Tone::Dim),
        };
        table.push(vec![
            Cell::plain(labels_text(&own)),
            ms(r.raw_tpot_mean_seconds),
            ms(r.canonical_tpot_mean_seconds),
            ms(r.raw_itl_mean_seconds),
            ms(r.token_weighted_itl_seconds),
            ms(r.acceptance_corrected_itl_seconds),
            tokens,
            Cell::plain(r.note.clone()),
        ]);
    }
    out.push_str(&table.render(false));
    out
}

#[cfg(test)]
#[path = "inspect_tests.rs"]
mod tests;
