//! Label validation and normalisation (docs/REMOTE-WRITE.md, checklist items 1 and 2).

/// Labels kept inline in a [`SeriesRef`](crate::SeriesRef) before one heap allocation is needed. Twelve covers a
/// vLLM series as a kube-prometheus `ServiceMonitor` labels it (`__name__`, `container`,
/// `endpoint`, `engine`, `instance`, `job`, `le`, `model_name`, `namespace`, `pod`, `service`).
pub const INLINE_LABELS: usize = 12;

/// One series' labels: inline up to [`INLINE_LABELS`], so decoding a request allocates nothing
/// per series (two allocations per series were ~700 instructions per sample: CHANGELOG.md, issue 5).
pub type LabelSet<'a> = smallvec::SmallVec<[Label<'a>; INLINE_LABELS]>;

/// One label pair borrowing from the decompressed request body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Label<'a> {
    /// Label name, e.g. `__name__`, `model_name`, `le`.
    pub name: &'a str,
    /// Label value.
    pub value: &'a str,
}

crate::label_enum! {
/// Why a series' label set was rejected. Each variant is one `reason` label value of
/// `vllm_corrector_samples_rejected_total` ([`LabelError::as_str`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, thiserror::Error)]
pub enum LabelError {
    /// No labels at all (after dropping empty values).
    #[error("series has an empty label set")]
    EmptyLabelSet => "empty_label_set",
    /// No `__name__` label.
    #[error("series has no __name__ label")]
    MissingMetricName => "missing_metric_name",
    /// Two labels share a name.
    #[error("series has a duplicate label name")]
    DuplicateLabelName => "duplicate_label_name",
    /// `__name__` does not match `[a-zA-Z_:][a-zA-Z0-9_:]*`.
    #[error("series has an invalid metric name")]
    InvalidMetricName => "invalid_metric_name",
    /// A label name does not match `[a-zA-Z_][a-zA-Z0-9_]*`.
    #[error("series has an invalid label name")]
    InvalidLabelName => "invalid_label_name",
    /// A label name starts with `__`, which the Prometheus data model reserves for internal use,
    /// other than `__name__` and the metadata labels [`METADATA_LABELS`] (which are dropped).
    /// A scrape never produces one: relabelling drops every `__`-prefixed label after target
    /// relabelling (`docs/REMOTE-WRITE.md`, checklist item 2).
    #[error("series has a label name starting with __ (reserved)")]
    ReservedLabelName => "reserved_label_name",
    /// RW 2.0: `labels_refs` has an odd number of entries, so it is not a list of name/value pairs.
    #[error("series has an odd number of label references")]
    OddLabelRefs => "odd_label_refs",
    /// RW 2.0: a `labels_refs` entry points outside the request's `symbols` table.
    #[error("series has a label reference outside the symbols table")]
    SymbolRefOutOfRange => "symbol_ref_out_of_range",
    /// More labels than [`LabelLimits::max_labels_per_series`] (`limits.max_labels_per_series`).
    #[error("series has more labels than limits.max_labels_per_series")]
    TooManyLabels => "too_many_labels",
    /// A label name longer than [`LabelLimits::max_label_name_length`].
    #[error("series has a label name longer than limits.max_label_name_length")]
    LabelNameTooLong => "label_name_too_long",
    /// A label value longer than [`LabelLimits::max_label_value_length`].
    #[error("series has a label value longer than limits.max_label_value_length")]
    LabelValueTooLong => "label_value_too_long",
}
}

/// Per-series label limits of the receiver (`limits.*` in the configuration file). Remote write
/// lets receivers impose them (RW 2.0 specification, "Labels"); what the sender sees at each is in
/// `docs/RELIABILITY.md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LabelLimits {
    /// Most labels in one series, `__name__` included. Default 64.
    pub max_labels_per_series: usize,
    /// Longest label name, bytes. Default 1024.
    pub max_label_name_length: usize,
    /// Longest label value, bytes. Default 2048.
    pub max_label_value_length: usize,
}

impl Default for LabelLimits {
    fn default() -> Self {
        LabelLimits {
            max_labels_per_series: 64,
            max_label_name_length: 1024,
            max_label_value_length: 2048,
        }
    }
}

impl LabelLimits {
    /// Checks one series' labels as sent (before [`normalize_labels`], so that an oversized set
    /// costs no sort). Labels with empty values count too: they are on the wire.
    ///
    /// # Errors
    /// [`LabelError::TooManyLabels`], then [`LabelError::LabelNameTooLong`] or
    /// [`LabelError::LabelValueTooLong`] for the first label over a length limit.
    pub fn check(&self, labels: &[Label<'_>]) -> Result<(), LabelError> {
        if labels.len() > self.max_labels_per_series {
            return Err(LabelError::TooManyLabels);
        }
        for label in labels {
            if label.name.len() > self.max_label_name_length {
                return Err(LabelError::LabelNameTooLong);
            }
            if label.value.len() > self.max_label_value_length {
                return Err(LabelError::LabelValueTooLong);
            }
        }
        Ok(())
    }
}

/// Labels that describe a series rather than name it, which a Prometheus with the
/// `type-and-unit-labels` feature (3.6 and later) adds to what it scrapes and sends in remote
/// write 2.0: `__type__` (`counter`, `histogram`, …) and `__unit__`. Normalising drops them, as
/// an empty value is dropped: the corrector reads a series' type from its name, and keeping them
/// would split one vLLM engine's series into a group per type (`docs/REMOTE-WRITE.md`, checklist
/// item 2).
pub const METADATA_LABELS: [&str; 2] = ["__type__", "__unit__"];

/// True when `name` is one of [`METADATA_LABELS`].
fn is_metadata_label(name: &str) -> bool {
    name.starts_with("__") && METADATA_LABELS.contains(&name)
}

/// True when `name` starts with `__` and is neither `__name__` nor a metadata label.
fn is_reserved_label_name(name: &str) -> bool {
    name.starts_with("__") && name != METRIC_NAME_LABEL && !is_metadata_label(name)
}

/// Normalises a label set in place: drops labels with empty values and the metadata labels
/// [`METADATA_LABELS`], sorts by name, then validates.
///
/// `labels` is one series' label set as decoded (borrowing from the request body). On success it is
/// sorted by name, free of empty values, and holds a valid `__name__`. The rules are those of the
/// Prometheus data model (`prometheus.io/docs/concepts/data_model`, classic character set) and of
/// docs/REMOTE-WRITE.md, checklist items 1 and 2: an empty value means "label absent".
///
/// # Errors
/// Returns the first [`LabelError`] in this order; the caller rejects the whole series with it:
/// [`LabelError::EmptyLabelSet`], [`LabelError::DuplicateLabelName`],
/// [`LabelError::MissingMetricName`], [`LabelError::InvalidMetricName`],
/// [`LabelError::InvalidLabelName`], [`LabelError::ReservedLabelName`]. On error `labels` holds
/// the non-empty labels, possibly sorted.
pub fn normalize_labels(labels: &mut Vec<Label<'_>>) -> Result<(), LabelError> {
    let (len, result) = normalize_labels_in_place(labels);
    labels.truncate(len);
    result
}

/// [`normalize_labels`] on a slice (for example one series' range of a flat request): moves the
/// labels with a non-empty value to the front, in order, and normalises them there.
///
/// Returns the number of labels kept (`labels[..n]` is the normalised set, also on error, as
/// [`normalize_labels`] leaves its vector) and the outcome.
///
/// # Errors
/// As [`normalize_labels`], in the same order.
pub(crate) fn normalize_labels_in_place(
    labels: &mut [Label<'_>],
) -> (usize, Result<(), LabelError>) {
    normalize_labels_memo(labels, &mut NameMemo::default())
}

/// Label names that `normalize_labels_memo` found valid, by their position in the series
/// (position 0 is usually `__name__`, which is not checked), and the last valid metric name.
///
/// Names repeat from series to series of one request (every series of a vLLM pod has the same
/// label names, and histogram buckets share a metric name), and comparing a name with the one
/// validated at the same position in the previous series costs less than checking its characters
/// again (~450 instructions per series on vLLM-shaped requests, CHANGELOG.md, issue 5). Keep one
/// memo per request: it borrows the request body.
#[derive(Debug, Default)]
pub struct NameMemo<'a> {
    names: smallvec::SmallVec<[&'a str; INLINE_LABELS]>,
    metric_name: &'a str,
}

/// [`normalize_labels_in_place`], skipping the character checks of names equal to those `memo`
/// holds at the same position; every name found valid is remembered.
///
/// # Errors
/// As [`normalize_labels`], in the same order.
pub(crate) fn normalize_labels_memo<'a>(
    labels: &mut [Label<'a>],
    memo: &mut NameMemo<'a>,
) -> (usize, Result<(), LabelError>) {
    if let Some(result) = normalized_already(labels, memo) {
        return (labels.len(), result);
    }
    let mut len = 0;
    for i in 0..labels.len() {
        if !labels[i].value.is_empty() && !is_metadata_label(labels[i].name) {
            labels.swap(len, i);
            len += 1;
        }
    }
    let labels = &mut labels[..len];
    if labels.is_empty() {
        return (0, Err(LabelError::EmptyLabelSet));
    }
    // Prometheus sends sorted label sets: strictly increasing names have no duplicate and need
    // no sort. Names almost always differ in their first byte, which is compared first.
    let increasing = labels.windows(2).all(|w| {
        let (a, b) = (w[0].name.as_bytes(), w[1].name.as_bytes());
        match a.first().cmp(&b.first()) {
            std::cmp::Ordering::Less => true,
            std::cmp::Ordering::Greater => false,
            std::cmp::Ordering::Equal => a < b,
        }
    });
    if !increasing {
        labels.sort_unstable_by(|a, b| a.name.cmp(b.name));
        if labels.windows(2).any(|w| w[0].name == w[1].name) {
            return (len, Err(LabelError::DuplicateLabelName));
        }
    }
    let mut metric_name = None;
    let mut invalid_label_name = false;
    let mut reserved = false;
    for label in labels.iter() {
        if label.name == METRIC_NAME_LABEL {
            metric_name = Some(label.value);
        } else if !is_valid_label_name(label.name) {
            invalid_label_name = true;
        } else if is_reserved_label_name(label.name) {
            reserved = true;
        }
    }
    let result = match metric_name {
        None => Err(LabelError::MissingMetricName),
        Some(name) if !is_valid_metric_name(name) => Err(LabelError::InvalidMetricName),
        Some(_) if invalid_label_name => Err(LabelError::InvalidLabelName),
        Some(_) if reserved => Err(LabelError::ReservedLabelName),
        Some(_) => Ok(()),
    };
    (len, result)
}

/// The outcome of [`normalize_labels_in_place`] in one pass when `labels` need no change (every
/// value non-empty, names strictly increasing: what Prometheus sends); `None` otherwise.
#[inline]
fn normalized_already<'a>(
    labels: &[Label<'a>],
    memo: &mut NameMemo<'a>,
) -> Option<Result<(), LabelError>> {
    let mut previous: &[u8] = b"";
    let mut metric_name = None;
    let mut invalid_label_name = false;
    let mut reserved = false;
    for (i, label) in labels.iter().enumerate() {
        let name = label.name.as_bytes();
        // Names almost always differ in their first byte, which is compared first.
        let increasing = match previous.first().cmp(&name.first()) {
            std::cmp::Ordering::Less => true,
            std::cmp::Ordering::Greater => false,
            std::cmp::Ordering::Equal => previous < name,
        };
        if label.value.is_empty() || !increasing {
            return None;
        }
        if name == METRIC_NAME_LABEL.as_bytes() {
            metric_name = Some(label.value);
        } else if memo.names.get(i) != Some(&label.name) {
            if !is_valid_label_name(label.name) {
                invalid_label_name = true;
            } else if name.starts_with(b"__") {
                // Never remembered: a metadata label takes the path that drops it.
                if is_metadata_label(label.name) {
                    return None;
                }
                reserved |= is_reserved_label_name(label.name);
            } else if let Some(known) = memo.names.get_mut(i) {
                *known = label.name;
            } else if memo.names.len() == i {
                memo.names.push(label.name);
            }
        }
        previous = name;
    }
    let label_error = if invalid_label_name {
        Some(LabelError::InvalidLabelName)
    } else if reserved {
        Some(LabelError::ReservedLabelName)
    } else {
        None
    };
    Some(match metric_name {
        _ if labels.is_empty() => return None,
        None => Err(LabelError::MissingMetricName),
        Some(name) if name == memo.metric_name => label_error.map_or(Ok(()), Err),
        Some(name) if !is_valid_metric_name(name) => Err(LabelError::InvalidMetricName),
        Some(name) => match label_error {
            None => {
                memo.metric_name = name;
                Ok(())
            }
            Some(e) => Err(e),
        },
    })
}

/// The label that carries the metric name.
pub(crate) const METRIC_NAME_LABEL: &str = "__name__";

/// True when `name` matches `[a-zA-Z_:][a-zA-Z0-9_:]*`, the classic metric-name character set
/// (colons are allowed: vLLM names are `vllm:*`).
pub(crate) fn is_valid_metric_name(name: &str) -> bool {
    valid_name(name, true)
}

/// True when `name` matches `[a-zA-Z_][a-zA-Z0-9_]*`, the classic label-name character set. Names
/// starting with `__` pass this check (`__name__` is one); normalising refuses the reserved ones
/// ([`LabelError::ReservedLabelName`]).
pub fn is_valid_label_name(name: &str) -> bool {
    valid_name(name, false)
}

/// Per byte: bit 1 when it may start a metric name (`[a-zA-Z_:]`), bit 2 when it may follow
/// (`[a-zA-Z0-9_:]`); bits 4 and 8 the same without `:` (label names).
const NAME_BYTES: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        let alpha = c.is_ascii_alphabetic() || c == b'_';
        let mut bits = 0;
        if alpha || c == b':' {
            bits |= 1 | 2;
        }
        if c.is_ascii_digit() {
            bits |= 2 | 8;
        }
        if alpha {
            bits |= 4 | 8;
        }
        table[b] = bits;
        b += 1;
    }
    table
};

fn valid_name(name: &str, allow_colon: bool) -> bool {
    let bytes = name.as_bytes();
    let Some((&first, rest)) = bytes.split_first() else {
        return false;
    };
    let (start, follow) = if allow_colon { (1, 2) } else { (4, 8) };
    NAME_BYTES[usize::from(first)] & start != 0
        && rest
            .iter()
            .all(|&b| NAME_BYTES[usize::from(b)] & follow != 0)
}

#[cfg(test)]
mod tests;
