//! Which vLLM releases a group's set of input series looks like (docs/METRICS.md, "What the
//! corrector serves per version"): a pure function over the group's role keys, shown on
//! `/status` and in `/api/v1/groups`.
//!
//! The releases differ in three series the rules read (`vllm/v1/metrics/loggers.py`,
//! `PrometheusStatLogger.__init__`, per release):
//!
//! | ITL names | request TPOT | `prompt_tokens_by_source_total` | releases |
//! |---|---|---|---|
//! | old only | no | no | 0.10.0–0.10.1 |
//! | both | no | no | 0.10.2 |
//! | both | yes | no | 0.11–0.14 (0.12–0.14 show the old name only with `--show-hidden-metrics-for-version`) |
//! | new only | yes | no | 0.12–0.15 |
//! | new only | yes | yes | 0.16 and later |
//!
//! Any other combination looks like no release, and so does an incomplete group (a set no
//! release exposes, `Group::incomplete`: the caller's test, cached per role set). Bucket edges are not read: custom edges (0.34's `--custom-histogram-buckets`) show in
//! the buckets, not in which series exist, so 0.34 is "0.16 and later" here. The range is what the
//! series say, not a version the target reports: a relabelling that drops the by-source counter
//! makes a 0.22 look like 0.12–0.15.

use super::classify::{Input, Part, RoleKey};

/// The vLLM releases whose series set `keys` (a group's non-stale role keys) is, as the table of
/// the module doc says: `0.10.0–0.10.1`, `0.10.2`, `0.11–0.14`, `0.12–0.15` or `0.16 and later`.
/// `None` for any other combination. One pass over the keys.
pub(crate) fn looks_like(keys: impl IntoIterator<Item = RoleKey>) -> Option<&'static str> {
    let (mut new_itl, mut old_itl, mut tpot, mut by_source) = (false, false, false, false);
    for key in keys {
        match key.input {
            Input::Itl(_) => new_itl = true,
            Input::OldItl(_) => old_itl = true,
            Input::Tpot(Part::Count) => tpot = true,
            Input::LocalCompute => by_source = true,
            _ => {}
        }
    }
    match (old_itl, new_itl, tpot, by_source) {
        (true, false, false, false) => Some("0.10.0–0.10.1"),
        (true, true, false, false) => Some("0.10.2"),
        (true, true, true, false) => Some("0.11–0.14"),
        (false, true, true, false) => Some("0.12–0.15"),
        (false, true, true, true) => Some("0.16 and later"),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
