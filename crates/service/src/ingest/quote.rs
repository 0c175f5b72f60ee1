//! Quoting the first refused series of a request in its 400 answer: its labels as
//! `{name="value", …}`, shortened.

use std::fmt::Write as _;

use super::cut_with_ellipsis;
use protocol::labels::LabelLimits;
use protocol::{Label, LabelScratch, NameMemo, SeriesLabels, WriteRequestRef};

/// The longest label text quoted in a 400 answer.
pub(super) const MAX_QUOTED_LABELS: usize = 512;

/// The labels of series `index` of `request`, refused, quoted as the engine left them. A known
/// series' labels were neither decoded nor normalised there (they stay pending), so they are
/// here, in a copy of the request (they passed both before, from the same bytes, under the same
/// `limits`): its quote is the one it got as a new series.
pub(super) fn quote_series(
    request: &WriteRequestRef<'_>,
    index: usize,
    limits: &LabelLimits,
) -> String {
    if !matches!(request.series[index].labels, SeriesLabels::Pending(_)) {
        return quote_labels(request.labels_of(&request.series[index]));
    }
    let mut copy = WriteRequestRef {
        series: vec![request.series[index].clone()],
        ..WriteRequestRef::default()
    };
    if copy.resolve(0, &mut LabelScratch::default()).is_ok() {
        let _ = copy.check_labels(0, limits, &mut NameMemo::default());
    }
    quote_labels(copy.labels_of(&copy.series[0]))
}

/// `{name="value", …}` with values escaped, cut at [`MAX_QUOTED_LABELS`] bytes.
pub(super) fn quote_labels(labels: &[Label<'_>]) -> String {
    let mut out = String::from("{");
    for (i, label) in labels.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{}={:?}", label.name, label.value);
        if cut_with_ellipsis(&mut out, MAX_QUOTED_LABELS) {
            break;
        }
    }
    out.push('}');
    out
}
