//! `vllm_corrector_family_info`: one series per group and corrected family, so that PromQL (an
//! alert, a dashboard) can say which vLLM target lost which family, and why; and one per SLI of
//! an SLO that a group does not count.
//!
//! ```text
//! vllm_corrector_family_info{<the group's labels>,family="vllm_corrected_…",state="withheld",reason="missing_input",detail="vllm:…"} 1
//! vllm_corrector_family_info{<the group's labels>,family="vllm_corrected_slo",state="withheld",reason="not_a_bucket_edge",detail="0.07 s is not an le of …",slo="chat",sli="tpot"} 1
//! ```
//!
//! * `state`: `served`, `degraded` (served in a less exact mode: the acceptance-corrected buckets
//!   without the per-position series) or `withheld`.
//! * `reason`: absent when served in full; a withheld reason (`missing_input`, `no_le_1_bound`,
//!   `no_slo`, `incomplete`, `settling`, `inconsistent_inputs`, `limit`); `missing_input` when
//!   degraded; for an SLI, `not_a_bucket_edge` or `incomplete` (docs/SLO.md, "SLO counters").
//! * `detail`: absent, or the missing input series (`missing_input`) or the limit's
//!   configuration field (`limit`, e.g. `limits.max_active_series`); for an SLI, the edges around
//!   its threshold and how to add it, or the series the pipeline does not send.
//! * `slo`, `sli`: only on the series of an SLI not counted.
//! * `arrives_as`: only on a family withheld as `incomplete` whose missing input belongs to a
//!   histogram that arrives in a form the corrector does not read: `native_histogram_exponential`
//!   or `unread_parts` (`engine::UnreadForm`), so the cause is not taken for sharding.
//!
//! Cardinality: one series per live group and family (6 per vLLM engine), whatever the state,
//! plus one per SLI not counted; a change of state replaces the series (the old one goes stale at
//! the next scrape), and the group's series leave with the group. A group label named `family`,
//! `state`, `reason`, `detail`, `slo` or `sli` is shown as `exported_<name>`, as Prometheus
//! renames a target label that collides.

use engine::slo::SliNote;
use engine::{FamilyStatus, UnreadHistogram, WithheldReason};

use super::Format;
use super::render::{escape_label_value, write_help_and_type};

/// The metric name.
pub(crate) const NAME: &str = "vllm_corrector_family_info";

const HELP: &str = "One series per group and corrected family, always 1: the group's labels, the family, its state (served, degraded or withheld), the reason (withheld, or degraded for a missing input) and the detail (the missing input series, or the limit); and one per SLI of an SLO the group does not count (labels slo and sli)";

/// The labels this series adds to a group's.
const OWN: [&str; 7] = [
    "family",
    "state",
    "reason",
    "detail",
    "slo",
    "sli",
    "arrives_as",
];

/// A group's labels, the state of each of its families and its SLO notes (from
/// [`engine::GroupSnapshot`]).
#[cfg(test)]
pub(crate) type GroupFamilies<'a> = (&'a [(String, String)], &'a [FamilyStatus], &'a [SliNote]);

/// Appends `vllm_corrector_family_info` for `groups` (in the order given, families in the order
/// given: registry order), with its `# HELP` and `# TYPE` lines; nothing when there is no group.
#[cfg(test)]
pub(crate) fn render_family_info(out: &mut String, groups: &[GroupFamilies<'_>], format: Format) {
    if groups.is_empty() {
        return;
    }
    render_header(out, format);
    let mut block = String::new();
    for (group, families, notes) in groups {
        render_group(out, &mut block, group, families, &[], notes);
    }
}

/// Appends the `# HELP` and `# TYPE` lines of `vllm_corrector_family_info`.
pub(crate) fn render_header(out: &mut String, format: Format) {
    write_help_and_type(out, NAME, HELP, "gauge", format);
}

/// Appends the `vllm_corrector_family_info` series of one group: one per family of `families`,
/// in the order given (with `arrives_as` where [`arrives_as`] finds the form in `unread`), then
/// one per note of `notes` (an SLI of an SLO not counted). The group's labels are escaped once into `block` (a scratch buffer the
/// caller keeps, so a scrape of label-heavy groups allocates nothing per line), then shared by
/// the family lines.
pub(crate) fn render_group(
    out: &mut String,
    block: &mut String,
    group: &[(String, String)],
    families: &[FamilyStatus],
    unread: &[UnreadHistogram],
    notes: &[SliNote],
) {
    block.clear();
    let renamed = group_labels(group);
    for (name, value) in &renamed {
        if !block.is_empty() {
            block.push(',');
        }
        block.push_str(name);
        block.push_str("=\"");
        escape_label_value(block, value);
        block.push('"');
    }
    for family in families {
        out.push_str(NAME);
        out.push('{');
        out.push_str(block);
        let form = arrives_as(family, unread).map(|form| ("arrives_as", form));
        for (name, value) in own_labels(family).chain(form) {
            if !block.is_empty() || name != "family" {
                out.push(',');
            }
            out.push_str(name);
            out.push_str("=\"");
            escape_label_value(out, value);
            out.push('"');
        }
        out.push_str("} 1\n");
    }
    for note in notes {
        out.push_str(NAME);
        out.push('{');
        out.push_str(block);
        let family = engine::Family::SloCounters.name();
        let own = [
            ("family", family),
            ("state", "withheld"),
            ("reason", note.reason.as_str()),
            ("detail", note.detail.as_str()),
            ("slo", note.slo.as_str()),
            ("sli", note.sli.name()),
        ];
        for (i, (name, value)) in own.into_iter().enumerate() {
            if !block.is_empty() || i > 0 {
                out.push(',');
            }
            out.push_str(name);
            out.push_str("=\"");
            escape_label_value(out, value);
            out.push('"');
        }
        out.push_str("} 1\n");
    }
}

/// The group's labels, one that this series adds itself renamed `exported_<name>`.
fn group_labels(labels: &[(String, String)]) -> Vec<(std::borrow::Cow<'_, str>, &str)> {
    super::render::renamed_labels(labels, &OWN)
}

/// The form in which the histogram of `f`'s missing input arrives, when `f` is withheld as
/// `incomplete` and that histogram is one of `unread` (the group's,
/// [`engine::GroupSnapshot::unread`]): `native_histogram_exponential` or `unread_parts`.
pub(crate) fn arrives_as(f: &FamilyStatus, unread: &[UnreadHistogram]) -> Option<&'static str> {
    if f.withheld != Some(WithheldReason::Incomplete) {
        return None;
    }
    let input = f.missing_input?;
    unread
        .iter()
        .find(|u| {
            input.strip_prefix(u.histogram).is_some_and(|part| {
                ["_bucket", "_sum", "_count"]
                    .iter()
                    .any(|suffix| part.starts_with(suffix))
            })
        })
        .map(|u| u.form.as_str())
}

/// `family`, `state`, and `reason` and `detail` when the status has them.
fn own_labels(f: &FamilyStatus) -> impl Iterator<Item = (&'static str, &'static str)> {
    [
        Some(("family", f.family.name())),
        Some(("state", f.state())),
        f.reason().map(|r| ("reason", r)),
        f.detail().map(|d| ("detail", d)),
    ]
    .into_iter()
    .flatten()
}

#[cfg(test)]
mod tests;
