//! The SLO spec: which SLOs the corrector counts events for, as plain validated data.
//!
//! An [`SloSpec`] is what the `slos:` section of `--config.file` says once parsed (the service
//! parses the YAML; durations arrive here in ms, thresholds in seconds). The engine plans its SLO
//! counters by it, and `vllm-corrector rules` generates the recording rules and alerts that read
//! those counters from the same value, so the two cannot disagree. This module holds data and its
//! validation only: no YAML, no regex engine (the service compiles [`LabelMatch::regex`]).
//!
//! The SLIs are those of `vllm bench serve --goodput` plus a token-level one ([`Sli`]); an SLO
//! names a threshold for one or more of them, and an objective (the fraction of good events) over
//! a window. Semantics of the counters that implement it: `docs/SLO.md`.

use std::fmt;

mod set;

pub use set::{GroupMatcher, SloSet};

/// One SLI: a latency quantity of vLLM, compared with a threshold in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Sli {
    /// Time to first token of a request (`vllm:time_to_first_token_seconds`, observed when the
    /// first token is produced). One event per request.
    Ttft,
    /// Canonical time per output token of a request: decode time / (output tokens − 1), for
    /// requests with at least 2 output tokens only (the corrector's
    /// `vllm_corrected_request_time_per_output_token_seconds`). One event per such request.
    Tpot,
    /// End-to-end latency of a request (`vllm:e2e_request_latency_seconds`, observed at finish).
    /// One event per finished request.
    E2el,
    /// Time per generated token, from the acceptance-corrected ITL distribution (the
    /// corrector's `vllm_corrected_acceptance_corrected_itl_seconds`). One event per token.
    ItlPerToken,
}

/// What one event of an [`Sli`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventUnit {
    /// One request.
    Requests,
    /// One generated token.
    Tokens,
}

impl Sli {
    /// Every SLI, in the order of the YAML fields and of generated rules.
    pub const ALL: [Sli; 4] = [Sli::Ttft, Sli::Tpot, Sli::E2el, Sli::ItlPerToken];

    /// The YAML field and the value of the `sli` label: `ttft`, `tpot`, `e2el`, `itl_per_token`.
    pub fn name(self) -> &'static str {
        match self {
            Sli::Ttft => "ttft",
            Sli::Tpot => "tpot",
            Sli::E2el => "e2el",
            Sli::ItlPerToken => "itl_per_token",
        }
    }

    /// The short name used in text: `TTFT`, `TPOT`, `E2EL`, `ITL per token`.
    pub fn label(self) -> &'static str {
        match self {
            Sli::Ttft => "TTFT",
            Sli::Tpot => "TPOT",
            Sli::E2el => "E2EL",
            Sli::ItlPerToken => "ITL per token",
        }
    }

    /// Whether an event is a request or a token.
    pub fn unit(self) -> EventUnit {
        match self {
            Sli::ItlPerToken => EventUnit::Tokens,
            Sli::Ttft | Sli::Tpot | Sli::E2el => EventUnit::Requests,
        }
    }
}

impl fmt::Display for Sli {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why one SLI of one SLO is not counted for a group ([`SliNote`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SliNoteReason {
    /// The threshold is not a bucket edge (`le`) of the histogram as received: good events
    /// cannot be counted exactly, so the SLI's counters are not served. The goodput bounds use
    /// the edges around it.
    NotABucketEdge,
    /// The group lacks an input series of the SLI that every vLLM release exposes, so the
    /// pipeline drops it (a keep rule generated without the SLOs): its counters and the SLO's
    /// goodput are not served.
    Incomplete,
}

impl SliNoteReason {
    /// Every reason, in declaration order.
    pub const ALL: [SliNoteReason; 2] = [SliNoteReason::NotABucketEdge, SliNoteReason::Incomplete];

    /// The `reason` label value: `not_a_bucket_edge` or `incomplete`.
    pub fn as_str(self) -> &'static str {
        match self {
            SliNoteReason::NotABucketEdge => "not_a_bucket_edge",
            SliNoteReason::Incomplete => "incomplete",
        }
    }
}

/// One SLI of one SLO that a group does not count, and why, for `/status`, the groups API,
/// `vllm_corrector_family_info` and the log. Decided when the group's inputs or the SLOs change,
/// never per sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliNote {
    /// The SLO's name.
    pub slo: String,
    /// The SLI.
    pub sli: Sli,
    /// Why it is not counted.
    pub reason: SliNoteReason,
    /// The nearest edges below and above the threshold and how to add it as an edge
    /// (`not_a_bucket_edge`), or the input series the pipeline does not send (`incomplete`).
    pub detail: String,
}

/// One SLI of an SLO: an event is good when its value is at most `threshold_seconds`; the SLI
/// meets its objective when the fraction of good events over the window is at least
/// `objective`.
#[derive(Debug, Clone, PartialEq)]
pub struct SliTarget {
    /// Which SLI.
    pub sli: Sli,
    /// The threshold in seconds (finite, > 0). Counted exactly only where it is a bucket edge
    /// (`le`) of the histogram as received.
    pub threshold_seconds: f64,
    /// The fraction of good events aimed at, in (0, 1): the SLO's objective unless the
    /// `objectives:` map of the SLO overrides it for this SLI.
    pub objective: f64,
}

impl SliTarget {
    /// The error budget: the fraction of bad events allowed, `1 − objective`.
    pub fn error_budget(&self) -> f64 {
        1.0 - self.objective
    }
}

/// A label matcher of an SLO's `match:`: the group's value of `label` must match `regex`, fully
/// anchored as PromQL's `=~` (`^(?:regex)$`), RE2 syntax. A group without the label has the
/// empty value there, as in PromQL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelMatch {
    /// The label name (`[a-zA-Z_][a-zA-Z0-9_]*`, not reserved).
    pub label: String,
    /// The regular expression, unanchored as written by the user.
    pub regex: String,
}

/// One SLO: a name, an objective over a window, the groups it covers and its SLIs.
#[derive(Debug, Clone, PartialEq)]
pub struct Slo {
    /// The value of the `slo` label and the part of rule and alert names that tells SLOs apart:
    /// `[a-z][a-z0-9_]*`, at most [`MAX_NAME_LEN`] bytes, no `__`, no trailing `_`.
    pub name: String,
    /// Free text for alert annotations and the Sloth and Pyrra specs; may be empty.
    pub description: String,
    /// The SLO's objective, the default of each SLI's, in (0, 1).
    pub objective: f64,
    /// The SLO period in ms (budgets and burn rates), from [`MIN_WINDOW_MS`] to
    /// [`MAX_WINDOW_MS`], a whole number of minutes.
    pub window_ms: u64,
    /// The groups covered: every matcher must match (an empty list covers every group).
    pub matchers: Vec<LabelMatch>,
    /// The labels the rules aggregate by (besides `slo` and `sli`): one error ratio per
    /// distinct value set. Default [`DEFAULT_BY`].
    pub by: Vec<String>,
    /// The SLIs, at least one, each at most once, in [`Sli::ALL`] order.
    pub slis: Vec<SliTarget>,
}

impl Slo {
    /// An SLO named `name` over the default window ([`DEFAULT_WINDOW_MS`]) covering every group
    /// (no `match:`), aggregated by no label (`by: []`), with one SLI per `(sli, seconds)` of
    /// `thresholds`, in the order given, each at `objective`. For specs built in code (the demo,
    /// tests, fuzzing, examples); a configuration file's `slos:` is read by the service. Not
    /// validated: [`SloSpec::validate`] says what is wrong.
    pub fn with_thresholds(name: &str, objective: f64, thresholds: &[(Sli, f64)]) -> Slo {
        Slo {
            name: name.to_owned(),
            description: String::new(),
            objective,
            window_ms: DEFAULT_WINDOW_MS,
            matchers: Vec::new(),
            by: Vec::new(),
            slis: thresholds
                .iter()
                .map(|&(sli, threshold_seconds)| SliTarget {
                    sli,
                    threshold_seconds,
                    objective,
                })
                .collect(),
        }
    }

    /// The target of `sli`, if this SLO has one.
    pub fn target(&self, sli: Sli) -> Option<&SliTarget> {
        self.slis.iter().find(|t| t.sli == sli)
    }
}

/// Every SLO of the configuration, in file order. An empty spec counts nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct SloSpec {
    /// The SLOs; names are unique.
    pub slos: Vec<Slo>,
}

/// The shortest SLO window: 1 h.
pub const MIN_WINDOW_MS: u64 = 3_600_000;
/// The longest SLO window: 366 d (a range the rules' budget query can still read).
pub const MAX_WINDOW_MS: u64 = 366 * DAY_MS;
/// The reference window of the burn-rate table: 30 d.
pub const DEFAULT_WINDOW_MS: u64 = 30 * DAY_MS;
/// The longest SLO name, in bytes, so that rule names stay readable.
pub const MAX_NAME_LEN: usize = 48;
/// The most SLOs one spec holds. Each costs every group it may cover about 3 KiB of the state
/// budget (`SloSet::bytes_per_group`): 64 take 200 KiB a group, which leaves the default 224 MiB
/// state budget room for at most about 1 100 vLLM engines.
pub const MAX_SLOS: usize = 64;
/// The default aggregation labels: one SLO reading per namespace and model.
pub const DEFAULT_BY: [&str; 2] = ["namespace", "model_name"];
/// Labels the SLO series carry themselves, so neither `match:` nor `by:` may name them.
pub const RESERVED_LABELS: [&str; 4] = ["slo", "sli", "bound", "le"];
const DAY_MS: u64 = 86_400_000;

impl Default for SloSpec {
    /// The shipped default: [`SloSpec::shipped_default`].
    fn default() -> Self {
        SloSpec::shipped_default()
    }
}

impl SloSpec {
    /// The spec in force when the configuration file has no `slos:` section: one SLO named
    /// `default`, canonical TPOT at most 0.1 s for 99 % of requests over 30 days, per namespace
    /// and model, covering every group. `deploy/alerts/` ships its rules.
    pub fn shipped_default() -> SloSpec {
        SloSpec {
            slos: vec![Slo {
                name: "default".to_owned(),
                description: "canonical TPOT at most 0.1 s for 99 % of requests".to_owned(),
                objective: 0.99,
                window_ms: DEFAULT_WINDOW_MS,
                matchers: Vec::new(),
                by: DEFAULT_BY.iter().map(|s| (*s).to_owned()).collect(),
                slis: vec![SliTarget {
                    sli: Sli::Tpot,
                    threshold_seconds: 0.1,
                    objective: 0.99,
                }],
            }],
        }
    }

    /// The SLO named `name`.
    pub fn get(&self, name: &str) -> Option<&Slo> {
        self.slos.iter().find(|s| s.name == name)
    }

    /// Checks every rule of the field docs above except that the regexes compile (the caller
    /// compiles them).
    ///
    /// # Errors
    /// The first [`SloError`], naming the field as `slos[i].field`.
    pub fn validate(&self) -> Result<(), SloError> {
        if self.slos.len() > MAX_SLOS {
            return Err(SloError::new(
                MAX_SLOS,
                "name",
                format!(
                    "{} SLOs, more than {MAX_SLOS}: each costs every vLLM engine about 3 KiB of \
                     the state budget",
                    self.slos.len()
                ),
            ));
        }
        for (i, slo) in self.slos.iter().enumerate() {
            validate_slo(i, slo)?;
            for (j, earlier) in self.slos[..i].iter().enumerate() {
                if earlier.name == slo.name {
                    return Err(SloError::new(
                        i,
                        "name",
                        format!("{:?} is already the name of slos[{j}]", slo.name),
                    ));
                }
                if earlier.name.replace('_', "") == slo.name.replace('_', "") {
                    return Err(SloError::new(
                        i,
                        "name",
                        format!(
                            "{:?} differs from slos[{j}] {:?} only in underscores, so their alert \
                             names (CamelCase) would be the same",
                            slo.name, earlier.name
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

fn validate_slo(i: usize, slo: &Slo) -> Result<(), SloError> {
    let err = |field: &str, message: String| SloError::new(i, field, message);
    let name = &slo.name;
    let well_formed = name.as_bytes().first().is_some_and(u8::is_ascii_lowercase)
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !name.contains("__")
        && !name.ends_with('_');
    if !well_formed {
        return Err(err(
            "name",
            format!(
                "{name:?} is not a name like chat or chat_fast: lower-case letters, digits and \
                 single underscores, starting with a letter and not ending with an underscore (it becomes part of rule names)"
            ),
        ));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(err(
            "name",
            format!("{name:?} is longer than {MAX_NAME_LEN} bytes"),
        ));
    }
    check_objective(&slo.objective).map_err(|m| err("objective", m))?;
    if slo.window_ms < MIN_WINDOW_MS || slo.window_ms > MAX_WINDOW_MS {
        return Err(err(
            "window",
            format!("{} is outside 1h..=366d", duration_text(slo.window_ms)),
        ));
    }
    if !slo.window_ms.is_multiple_of(60_000) {
        return Err(err(
            "window",
            format!(
                "{} is not a whole number of minutes",
                duration_text(slo.window_ms)
            ),
        ));
    }
    if slo.slis.is_empty() {
        return Err(SloError {
            field: format!("slos[{i}]"),
            message: "no threshold: give at least one of ttft, tpot, e2el, itl_per_token (seconds)"
                .to_owned(),
        });
    }
    for (k, target) in slo.slis.iter().enumerate() {
        let field = target.sli.name();
        if slo.slis[..k].iter().any(|t| t.sli == target.sli) {
            return Err(err(field, "given twice".to_owned()));
        }
        let t = target.threshold_seconds;
        if !(t.is_finite() && t > 0.0) {
            return Err(err(
                field,
                format!("{t} is not a threshold in seconds (finite, > 0)"),
            ));
        }
        check_objective(&target.objective).map_err(|m| err(&format!("objectives.{field}"), m))?;
    }
    for m in &slo.matchers {
        check_label(&m.label).map_err(|msg| err(&format!("match.{}", m.label), msg))?;
    }
    for (k, label) in slo.by.iter().enumerate() {
        check_label(label).map_err(|msg| err(&format!("by[{k}]"), msg))?;
        if slo.by[..k].contains(label) {
            return Err(err(
                &format!("by[{k}]"),
                format!("{label:?} is given twice"),
            ));
        }
    }
    Ok(())
}

fn check_objective(objective: &f64) -> Result<(), String> {
    if objective.is_finite() && *objective > 0.0 && *objective < 1.0 {
        Ok(())
    } else {
        Err(format!(
            "{objective} is not a fraction in (0, 1) such as 0.99 (99 %)"
        ))
    }
}

/// A label name the SLO series can be matched or aggregated on.
fn check_label(label: &str) -> Result<(), String> {
    let valid = label
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !valid {
        return Err(format!(
            "{label:?} is not a label name ([a-zA-Z_][a-zA-Z0-9_]*)"
        ));
    }
    if label.starts_with("__") {
        return Err(format!("{label:?} is reserved (labels starting with __)"));
    }
    if RESERVED_LABELS.contains(&label) {
        return Err(format!(
            "{label:?} is a label of the SLO series themselves (slo, sli, bound, le)"
        ));
    }
    Ok(())
}

/// `ms` as a Prometheus duration in days, hours and minutes (`30d`, `1h30m`, `2d19h12m`);
/// `None` unless it is a positive whole number of minutes.
pub fn format_ms(ms: u64) -> Option<String> {
    if ms == 0 || !ms.is_multiple_of(60_000) {
        return None;
    }
    let minutes = ms / 60_000;
    let (d, h, m) = (minutes / 1440, minutes / 60 % 24, minutes % 60);
    let mut out = String::new();
    for (n, unit) in [(d, "d"), (h, "h"), (m, "m")] {
        if n > 0 {
            out.push_str(&format!("{n}{unit}"));
        }
    }
    Some(out)
}

/// `ms` as a Prometheus duration with every unit down to ms (`90s`, `2h30s`, `1d500ms`, `0s`),
/// for messages about a window that [`format_ms`] cannot print.
fn duration_text(ms: u64) -> String {
    let units = [
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "m"),
        (1_000, "s"),
        (1, "ms"),
    ];
    let mut out = String::new();
    let mut rest = ms;
    for (size, unit) in units {
        if rest >= size {
            out.push_str(&format!("{}{unit}", rest / size));
            rest %= size;
        }
    }
    if out.is_empty() {
        out.push_str("0s");
    }
    out
}

/// Why an [`SloSpec`] was refused: the field (`slos[1].objective`) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct SloError {
    /// The field at fault, as written in the YAML file: `slos[1].objective`,
    /// `slos[0].objectives.ttft`, `slos[2].match.model_name`.
    pub field: String,
    /// What is wrong and what is accepted.
    pub message: String,
}

impl SloError {
    /// The error of field `field` of `slos[index]`.
    pub fn new(index: usize, field: &str, message: impl Into<String>) -> SloError {
        SloError {
            field: format!("slos[{index}].{field}"),
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests;
