//! The filters of `/status` and `/api/v1/groups` (docs/HTTP.md, "Filters"): which groups a page
//! lists, by labels and by what their families show.
//!
//! * `match[]=<selector>`: a label selector as PromQL writes one, `{job="vllm",instance=~"a.*"}`,
//!   with `=`, `!=`, `=~` and `!~` (regular expressions anchored at both ends, RE2 syntax as in
//!   Prometheus; a missing label matches `""`). Repeated, a group matching any selector is
//!   listed, as in the Prometheus HTTP API's `match[]`.
//! * `state=served|degraded|withheld`: groups with a family in that state; an SLI that the SLO
//!   counters leave out (an SLI note: `not_a_bucket_edge`, `incomplete`) is withheld in
//!   `vllm_corrected_slo`, as `vllm_corrector_family_info` shows it.
//! * `reason=<reason>`: groups with a family, or an SLI, withheld (or degraded) for that reason
//!   (`missing_input`, `incomplete`, `limit`, …: `engine::WithheldReason`; `not_a_bucket_edge`:
//!   `engine::slo::SliNoteReason`).
//! * `family=<corrected family>`: `state` and `reason` look at that family only.
//!
//! Everything given must hold. A selector is parsed here, in a few lines, rather than by a PromQL
//! parser: it is the matcher list only, no metric name, function or operator.

use engine::slo::{SliNote, SliNoteReason};
use engine::{Family, FamilyStatus, GroupFilter, WithheldReason};
use regex::{Regex, RegexBuilder};

/// Most `match[]` selectors in one request.
pub(crate) const MAX_SELECTORS: usize = 16;

/// Most label matchers in one request, over all its selectors: a request's matching costs at most
/// this many regex runs per group (each over a label value of at most
/// `limits.max_label_value_length` bytes), and runs outside the engine lock
/// (`super::super::status`).
pub(crate) const MAX_MATCHERS: usize = 64;

/// The compiled size a matcher's regular expression may take (the `regex` crate's
/// `size_limit`): a request cannot make the server build a huge automaton.
const REGEX_BYTES: usize = 256 * 1024;

/// How one label matcher compares.
#[derive(Debug, Clone)]
enum Op {
    Equal(String),
    NotEqual(String),
    Matches(Regex),
    NotMatches(Regex),
}

/// One `name op "value"` of a selector.
#[derive(Debug, Clone)]
struct Matcher {
    name: String,
    op: Op,
}

impl Matcher {
    fn matches(&self, labels: &[(String, String)]) -> bool {
        let value = labels
            .iter()
            .find(|(n, _)| *n == self.name)
            .map_or("", |(_, v)| v.as_str());
        match &self.op {
            Op::Equal(v) => value == v,
            Op::NotEqual(v) => value != v,
            Op::Matches(re) => re.is_match(value),
            Op::NotMatches(re) => !re.is_match(value),
        }
    }
}

/// The filters of one page request; the default lists every group.
#[derive(Debug, Clone, Default)]
pub(crate) struct Filter {
    /// `match[]`: a group is listed when it matches every matcher of one of them.
    selectors: Vec<Vec<Matcher>>,
    /// `state=`.
    state: Option<&'static str>,
    /// `reason=`.
    reason: Option<&'static str>,
    /// `family=`.
    family: Option<Family>,
    /// The filter's own query parameters, form-encoded, for the next page's link.
    pub(crate) query: String,
}

impl PartialEq for Filter {
    fn eq(&self, other: &Self) -> bool {
        self.query == other.query
    }
}

impl Eq for Filter {}

impl Filter {
    /// Takes the query parameter `name=value` if it is one of the filter's: `Ok(true)`; unknown
    /// names are left to the caller (`Ok(false)`).
    ///
    /// # Errors
    /// What is wrong with the value, in words: a selector that does not parse, more than
    /// [`MAX_SELECTORS`], a state, reason or family no group can have.
    pub(crate) fn take(&mut self, name: &str, value: &str) -> Result<bool, String> {
        match name {
            "match[]" => {
                if self.selectors.len() == MAX_SELECTORS {
                    return Err(format!("more than {MAX_SELECTORS} match[] selectors"));
                }
                let matchers = selector(value)?;
                let total = self.selectors.iter().map(Vec::len).sum::<usize>() + matchers.len();
                if total > MAX_MATCHERS {
                    return Err(format!(
                        "more than {MAX_MATCHERS} label matchers over all match[] selectors"
                    ));
                }
                self.selectors.push(matchers);
            }
            "state" => {
                self.state = Some(
                    ["served", "degraded", "withheld"]
                        .into_iter()
                        .find(|s| *s == value)
                        .ok_or_else(|| {
                            format!("state={value:?} is none of served, degraded, withheld")
                        })?,
                );
            }
            "reason" => {
                let mut all: Vec<&'static str> =
                    WithheldReason::ALL.iter().map(|r| r.as_str()).collect();
                for note in SliNoteReason::ALL.map(SliNoteReason::as_str) {
                    if !all.contains(&note) {
                        all.push(note);
                    }
                }
                self.reason =
                    Some(all.iter().copied().find(|r| *r == value).ok_or_else(|| {
                        format!("reason={value:?} is none of {}", all.join(", "))
                    })?);
            }
            "family" => {
                self.family = Some(
                    Family::ALL
                        .into_iter()
                        .find(|f| f.name() == value)
                        .ok_or_else(|| format!("family={value:?} is no corrected family"))?,
                );
            }
            _ => return Ok(false),
        }
        self.query.push_str(
            &form_urlencoded::Serializer::new(String::new())
                .append_pair(name, value)
                .finish(),
        );
        self.query.push('&');
        Ok(true)
    }
}

impl Filter {
    /// Whether the filter has `match[]` selectors, whose regexes may be worth running outside
    /// the engine lock.
    pub(crate) fn matches_labels(&self) -> bool {
        !self.selectors.is_empty()
    }
}

impl GroupFilter for Filter {
    fn labels(&self, labels: &[(String, String)]) -> bool {
        self.selectors.is_empty()
            || self
                .selectors
                .iter()
                .any(|s| s.iter().all(|m| m.matches(labels)))
    }

    fn reads_families(&self) -> bool {
        self.state.is_some() || self.reason.is_some() || self.family.is_some()
    }

    fn families(&self, families: &[FamilyStatus], notes: &[SliNote]) -> bool {
        let statuses = families.iter().map(|f| (f.family, f.state(), f.reason()));
        let slis = notes
            .iter()
            .map(|n| (Family::SloCounters, "withheld", Some(n.reason.as_str())));
        statuses.chain(slis).any(|(family, state, reason)| {
            self.family.is_none_or(|f| f == family)
                && self.state.is_none_or(|s| s == state)
                && self.reason.is_none_or(|r| reason == Some(r))
        })
    }
}

/// A selector `{name op "value", …}` (braces required, a trailing comma allowed; values in double
/// or single quotes with the PromQL escapes `\"`, `\'`, `\\`, `\n`, `\t`).
///
/// # Errors
/// Where it stops parsing and what it expected.
fn selector(text: &str) -> Result<Vec<Matcher>, String> {
    let bad = |what: &str| format!("match[]={text:?}: {what}");
    let inner = text
        .trim()
        .strip_prefix('{')
        .and_then(|t| t.strip_suffix('}'))
        .ok_or_else(|| bad("a selector is {name=\"value\", …}"))?;
    let mut rest = inner.trim_start();
    let mut matchers = Vec::new();
    while !rest.is_empty() {
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let (name, after) = rest.split_at(end);
        if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(bad("expected a label name"));
        }
        let after = after.trim_start();
        let (op, after) = ["=~", "!~", "!=", "="]
            .into_iter()
            .find_map(|op| after.strip_prefix(op).map(|a| (op, a.trim_start())))
            .ok_or_else(|| bad(&format!("expected =, !=, =~ or !~ after {name}")))?;
        let (value, after) = quoted(after).ok_or_else(|| bad("expected a quoted value"))?;
        let regex = |value: &str| {
            RegexBuilder::new(&format!("^(?:{value})$"))
                .size_limit(REGEX_BYTES)
                .build()
                .map_err(|e| bad(&format!("{value:?} is not a regular expression: {e}")))
        };
        let op = match op {
            "=" => Op::Equal(value),
            "!=" => Op::NotEqual(value),
            "=~" => Op::Matches(regex(&value)?),
            _ => Op::NotMatches(regex(&value)?),
        };
        matchers.push(Matcher {
            name: name.to_owned(),
            op,
        });
        rest = after.trim_start();
        match rest.strip_prefix(',') {
            Some(r) => rest = r.trim_start(),
            None if rest.is_empty() => {}
            None => return Err(bad("expected , or } after a matcher")),
        }
    }
    if matchers.is_empty() {
        return Err(bad("a selector needs at least one matcher"));
    }
    Ok(matchers)
}

/// The quoted string at the start of `text`, unescaped, and what follows it.
fn quoted(text: &str) -> Option<(String, &str)> {
    let mut chars = text.char_indices();
    let (_, quote) = chars.next().filter(|(_, c)| *c == '"' || *c == '\'')?;
    let mut value = String::new();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => value.push(match chars.next()?.1 {
                'n' => '\n',
                't' => '\t',
                other => other,
            }),
            c if c == quote => return Some((value, &text[i + 1..])),
            c => value.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests;
