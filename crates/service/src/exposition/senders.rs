//! `vllm_corrector_group_recent_rejected_samples`: per group, its samples refused as duplicates
//! and out of order over the last one to two minutes of receive time, shown only while non-zero,
//! so an alert or a query names the target that two senders write with the same labels (an HA
//! pair of Prometheus servers with the same external labels writing one corrector).
//!
//! ```text
//! vllm_corrector_group_recent_rejected_samples{<the group's labels>,reason="out_of_order"} 12
//! ```
//!
//! Cardinality: two series at most per group, and only for groups with recent rejects (none in a
//! healthy deployment). A group label named `reason` is shown as `exported_reason`, as in
//! `vllm_corrector_family_info` (`super::info`).

use super::Format;
use super::render::{escape_label_value, renamed_labels, write_help_and_type};

/// The metric name.
pub(crate) const NAME: &str = "vllm_corrector_group_recent_rejected_samples";

const HELP: &str = "Samples of the group refused as duplicate_sample or out_of_order over the last one to two minutes of receive time, shown only while non-zero: steady, two senders write the group with the same labels (an HA pair with the same external labels); once, a resent batch";

/// The label this series adds to a group's.
const OWN: [&str; 1] = ["reason"];

/// Appends the `# HELP` and `# TYPE` lines.
pub(crate) fn render_header(out: &mut String, format: Format) {
    write_help_and_type(out, NAME, HELP, "gauge", format);
}

/// Appends the series of one group with `rejects` (`duplicate_sample`, `out_of_order`), one per
/// non-zero count.
pub(crate) fn render_group(out: &mut String, group: &[(String, String)], rejects: [u64; 2]) {
    let renamed = renamed_labels(group, &OWN);
    for (reason, n) in ["duplicate_sample", "out_of_order"]
        .into_iter()
        .zip(rejects)
    {
        if n == 0 {
            continue;
        }
        out.push_str(NAME);
        out.push('{');
        for (name, value) in &renamed {
            out.push_str(name);
            out.push_str("=\"");
            escape_label_value(out, value);
            out.push_str("\",");
        }
        out.push_str("reason=\"");
        out.push_str(reason);
        out.push_str("\"} ");
        out.push_str(&n.to_string());
        out.push('\n');
    }
}
