//! The `slos:` section of `--config.file`: the YAML form of [`engine::slo::SloSpec`], parsed and
//! validated into it.
//!
//! ```yaml
//! slos:
//!   - name: chat                 # the slo label; part of rule and alert names
//!     description: chat models   # optional, for alert annotations and Sloth/Pyrra
//!     objective: 0.99            # fraction of good events, in (0, 1)
//!     window: 30d                # the SLO period (humantime); default 30d; 1h to 366d
//!     match: {model_name: "meta-llama/.*"}   # optional, fully anchored RE2 per label
//!     by: [namespace, model_name]            # optional, the aggregation of the rules
//!     ttft: 0.5                  # seconds; each threshold optional, at least one
//!     tpot: 0.05
//!     e2el: 20
//!     itl_per_token: 0.03
//!     objectives: {ttft: 0.95}   # optional per-SLI objectives, overriding `objective`
//! ```
//!
//! No `slos:` key means the shipped default ([`SloSpec::shipped_default`]); `slos: []` means no
//! SLO at all.

use std::collections::BTreeMap;

use serde::Deserialize;

use engine::slo::{DEFAULT_BY, LabelMatch, Sli, SliTarget, Slo, SloError, SloSpec};

/// One entry of `slos:`, as written. Unknown keys are refused.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SloEntry {
    /// `slo` label value, `[a-z][a-z0-9_]*`.
    name: String,
    /// Free text.
    #[serde(default)]
    description: String,
    /// Fraction of good events aimed at.
    #[serde(deserialize_with = "fraction")]
    objective: f64,
    /// The SLO period, a humantime duration (`30d`, `4w`, `7d`).
    #[serde(default = "default_window")]
    window: String,
    /// Label name to regex.
    #[serde(default, rename = "match")]
    matchers: BTreeMap<String, String>,
    /// Aggregation labels; default `[namespace, model_name]`.
    by: Option<Vec<String>>,
    /// TTFT threshold, seconds.
    #[serde(default, deserialize_with = "seconds")]
    ttft: Option<f64>,
    /// Canonical TPOT threshold, seconds.
    #[serde(default, deserialize_with = "seconds")]
    tpot: Option<f64>,
    /// E2EL threshold, seconds.
    #[serde(default, deserialize_with = "seconds")]
    e2el: Option<f64>,
    /// Per-token ITL threshold, seconds.
    #[serde(default, deserialize_with = "seconds")]
    itl_per_token: Option<f64>,
    /// Per-SLI objectives.
    #[serde(default)]
    objectives: SliObjectives,
}

/// `objectives:` of an SLO entry: an objective per SLI, overriding the SLO's.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct SliObjectives {
    #[serde(default, deserialize_with = "some_fraction")]
    ttft: Option<f64>,
    #[serde(default, deserialize_with = "some_fraction")]
    tpot: Option<f64>,
    #[serde(default, deserialize_with = "some_fraction")]
    e2el: Option<f64>,
    #[serde(default, deserialize_with = "some_fraction")]
    itl_per_token: Option<f64>,
}

/// A number in the file as written, so that a string or a mapping where a number belongs is
/// refused with what to write instead of the parser's type error.
#[derive(Deserialize)]
#[serde(untagged)]
enum Written {
    Number(f64),
    Text(String),
    Other(serde::de::IgnoredAny),
}

/// An objective as written: a number (checked to be a fraction later); a percentage such as
/// `"99.9%"` is refused with the fraction to write.
fn fraction<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let message = match Written::deserialize(d)? {
        Written::Number(v) => return Ok(v),
        Written::Text(text) => match text
            .trim()
            .strip_suffix('%')
            .map(|p| p.trim().parse::<f64>())
        {
            Some(Ok(percent)) => format!(
                "{text:?} is not a fraction: write {}",
                (percent * 1e6).round() / 1e8
            ),
            _ => format!("{text:?} is not a fraction such as 0.99"),
        },
        Written::Other(_) => "expected a fraction such as 0.99".to_owned(),
    };
    Err(serde::de::Error::custom(message))
}

/// [`fraction`] of an optional per-SLI objective.
fn some_fraction<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    fraction(d).map(Some)
}

/// `slos:` as written: a list. A key with no value is refused rather than read as absent (the
/// shipped default) or as `[]` (no SLO): the message names both.
pub(crate) fn entries<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Vec<SloEntry>>, D::Error> {
    Option::<Vec<SloEntry>>::deserialize(d)?.map(Some).ok_or_else(|| {
        serde::de::Error::custom(
            "no value: write `slos: []` for no SLO, or leave the key out for the shipped default",
        )
    })
}

/// A threshold as written: a number of seconds; anything else is refused saying so, with the
/// number to write for a duration such as `50ms`.
fn seconds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    let message = match Option::<Written>::deserialize(d)? {
        None => return Ok(None),
        Some(Written::Number(s)) => return Ok(Some(s)),
        Some(Written::Text(text)) => match humantime::parse_duration(text.trim()) {
            Ok(d) => format!(
                "{text:?} is not a number of seconds: write {}",
                d.as_secs_f64()
            ),
            Err(_) => format!("{text:?} is not a number of seconds such as 0.05"),
        },
        Some(Written::Other(_)) => "expected a number of seconds such as 0.05".to_owned(),
    };
    Err(serde::de::Error::custom(message))
}

fn default_window() -> String {
    "30d".to_owned()
}

impl SloEntry {
    fn threshold(&self, sli: Sli) -> Option<f64> {
        match sli {
            Sli::Ttft => self.ttft,
            Sli::Tpot => self.tpot,
            Sli::E2el => self.e2el,
            Sli::ItlPerToken => self.itl_per_token,
        }
    }
}

impl SliObjectives {
    fn get(&self, sli: Sli) -> Option<f64> {
        match sli {
            Sli::Ttft => self.ttft,
            Sli::Tpot => self.tpot,
            Sli::E2el => self.e2el,
            Sli::ItlPerToken => self.itl_per_token,
        }
    }
}

/// The validated spec of a file's `slos:` (`None`: the key is absent, so the shipped default).
///
/// # Errors
/// An [`SloError`] naming the field (`slos[0].window`, `slos[1].match.model_name`): a window that
/// is not a duration, an objective given for an SLI without a threshold, a regex that does not
/// compile, or any rule of [`SloSpec::validate`].
pub(crate) fn slo_spec(entries: Option<&[SloEntry]>) -> Result<SloSpec, SloError> {
    let Some(entries) = entries else {
        return Ok(SloSpec::shipped_default());
    };
    let slos = entries
        .iter()
        .enumerate()
        .map(|(i, entry)| slo(i, entry))
        .collect::<Result<Vec<Slo>, SloError>>()?;
    let spec = SloSpec { slos };
    spec.validate()?;
    Ok(spec)
}

fn slo(i: usize, entry: &SloEntry) -> Result<Slo, SloError> {
    let window = humantime::parse_duration(&entry.window).map_err(|e| {
        SloError::new(
            i,
            "window",
            format!("{:?} is not a duration like 30d or 4w: {e}", entry.window),
        )
    })?;
    let window_ms = u64::try_from(window.as_millis()).unwrap_or(u64::MAX);
    for sli in Sli::ALL {
        if entry.objectives.get(sli).is_some() && entry.threshold(sli).is_none() {
            return Err(SloError::new(
                i,
                &format!("objectives.{sli}"),
                format!("an objective for {sli}, which has no threshold: add `{sli}: SECONDS`"),
            ));
        }
    }
    for (label, regex) in &entry.matchers {
        regex::Regex::new(&format!("^(?:{regex})$")).map_err(|e| {
            SloError::new(
                i,
                &format!("match.{label}"),
                format!("{regex:?} is not a regular expression (RE2 syntax): {e}"),
            )
        })?;
    }
    Ok(Slo {
        name: entry.name.clone(),
        description: entry.description.clone(),
        objective: entry.objective,
        window_ms,
        matchers: entry
            .matchers
            .iter()
            .map(|(label, regex)| LabelMatch {
                label: label.clone(),
                regex: regex.clone(),
            })
            .collect(),
        by: entry
            .by
            .clone()
            .unwrap_or_else(|| DEFAULT_BY.iter().map(|s| (*s).to_owned()).collect()),
        slis: Sli::ALL
            .iter()
            .filter_map(|&sli| {
                entry.threshold(sli).map(|threshold_seconds| SliTarget {
                    sli,
                    threshold_seconds,
                    objective: entry.objectives.get(sli).unwrap_or(entry.objective),
                })
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests;

/// The SLOs the engine counts, each with its `match:` compiled into a group matcher (fully
/// anchored regexes, as PromQL's `=~`; a group without the label matches as the empty value).
/// The regexes were checked by [`slo_spec`]; one that no longer compiles matches no group.
pub(crate) fn slo_set(spec: &SloSpec) -> engine::slo::SloSet {
    engine::slo::SloSet::new(spec, |slo| {
        if slo.matchers.is_empty() {
            return None;
        }
        let compiled: Vec<(String, Option<regex::Regex>)> = slo
            .matchers
            .iter()
            .map(|m| {
                let re = regex::Regex::new(&format!("^(?:{})$", m.regex)).ok();
                (m.label.clone(), re)
            })
            .collect();
        Some(std::sync::Arc::new(move |labels: &[(String, String)]| {
            compiled.iter().all(|(label, re)| {
                let value = labels
                    .iter()
                    .find(|(n, _)| n == label)
                    .map_or("", |(_, v)| v.as_str());
                re.as_ref().is_some_and(|re| re.is_match(value))
            })
        }))
    })
}
