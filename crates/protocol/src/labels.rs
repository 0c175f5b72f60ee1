//! Label validation and normalisation (docs/REMOTE-WRITE.md, checklist items 1 and 2).

/// One label pair borrowing from the decompressed request body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Label<'a> {
    /// Label name, e.g. `__name__`, `model_name`, `le`.
    pub name: &'a str,
    /// Label value.
    pub value: &'a str,
}

/// Why a series' label set was rejected. Each variant is one `reason` label value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, thiserror::Error)]
pub enum LabelError {
    /// No labels at all (after dropping empty values).
    #[error("series has an empty label set")]
    EmptyLabelSet,
    /// No `__name__` label.
    #[error("series has no __name__ label")]
    MissingMetricName,
    /// Two labels share a name.
    #[error("series has a duplicate label name")]
    DuplicateLabelName,
    /// `__name__` does not match `[a-zA-Z_:][a-zA-Z0-9_:]*`.
    #[error("series has an invalid metric name")]
    InvalidMetricName,
    /// A label name does not match `[a-zA-Z_][a-zA-Z0-9_]*`.
    #[error("series has an invalid label name")]
    InvalidLabelName,
    /// RW 2.0: `labels_refs` has an odd number of entries, so it is not a list of name/value pairs.
    #[error("series has an odd number of label references")]
    OddLabelRefs,
    /// RW 2.0: a `labels_refs` entry points outside the request's `symbols` table.
    #[error("series has a label reference outside the symbols table")]
    SymbolRefOutOfRange,
    /// More labels than [`LabelLimits::max_labels_per_series`] (`limits.max_labels_per_series`).
    #[error("series has more labels than limits.max_labels_per_series")]
    TooManyLabels,
    /// A label name longer than [`LabelLimits::max_label_name_length`].
    #[error("series has a label name longer than limits.max_label_name_length")]
    LabelNameTooLong,
    /// A label value longer than [`LabelLimits::max_label_value_length`].
    #[error("series has a label value longer than limits.max_label_value_length")]
    LabelValueTooLong,
}

impl LabelError {
    /// The `reason` label value used in `vllm_corrector_samples_rejected_total`.
    pub fn reason(self) -> &'static str {
        match self {
            LabelError::EmptyLabelSet => "empty_label_set",
            LabelError::MissingMetricName => "missing_metric_name",
            LabelError::DuplicateLabelName => "duplicate_label_name",
            LabelError::InvalidMetricName => "invalid_metric_name",
            LabelError::InvalidLabelName => "invalid_label_name",
            LabelError::OddLabelRefs => "odd_label_refs",
            LabelError::SymbolRefOutOfRange => "symbol_ref_out_of_range",
            LabelError::TooManyLabels => "too_many_labels",
            LabelError::LabelNameTooLong => "label_name_too_long",
            LabelError::LabelValueTooLong => "label_value_too_long",
        }
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

/// Normalises a label set in place: drops labels with empty values, sorts by name, then validates.
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
/// [`LabelError::InvalidLabelName`]. On error `labels` holds the non-empty labels, possibly sorted.
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
pub fn normalize_labels_in_place(labels: &mut [Label<'_>]) -> (usize, Result<(), LabelError>) {
    normalize_labels_memo(labels, &mut NameMemo::default())
}

/// Label names that [`normalize_labels_memo`] found valid, by their position in the series
/// (position 0 is usually `__name__`, which is not checked), and the last valid metric name.
///
/// Names repeat from series to series of one request (every series of a vLLM pod has the same
/// label names, and histogram buckets share a metric name), and comparing a name with the one
/// validated at the same position in the previous series costs less than checking its characters
/// again (~450 instructions per series on vLLM-shaped requests, docs/PERFORMANCE.md). Keep one
/// memo per request: it borrows the request body.
#[derive(Debug, Default)]
pub struct NameMemo<'a> {
    names: smallvec::SmallVec<[&'a str; super::INLINE_LABELS]>,
    metric_name: &'a str,
}

/// [`normalize_labels_in_place`], skipping the character checks of names equal to those `memo`
/// holds at the same position; every name found valid is remembered.
///
/// # Errors
/// As [`normalize_labels`], in the same order.
pub fn normalize_labels_memo<'a>(
    labels: &mut [Label<'a>],
    memo: &mut NameMemo<'a>,
) -> (usize, Result<(), LabelError>) {
    if let Some(result) = normalized_already(labels, memo) {
        return (labels.len(), result);
    }
    let mut len = 0;
    for i in 0..labels.len() {
        if !labels[i].value.is_empty() {
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
    for label in labels.iter() {
        if label.name == METRIC_NAME_LABEL {
            metric_name = Some(label.value);
        } else if !is_valid_label_name(label.name) {
            invalid_label_name = true;
        }
    }
    let result = match metric_name {
        None => Err(LabelError::MissingMetricName),
        Some(name) if !is_valid_metric_name(name) => Err(LabelError::InvalidMetricName),
        Some(_) if invalid_label_name => Err(LabelError::InvalidLabelName),
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
            } else if let Some(known) = memo.names.get_mut(i) {
                *known = label.name;
            } else if memo.names.len() == i {
                memo.names.push(label.name);
            }
        }
        previous = name;
    }
    Some(match metric_name {
        _ if labels.is_empty() => return None,
        None => Err(LabelError::MissingMetricName),
        Some(name) if name == memo.metric_name => {
            if invalid_label_name {
                Err(LabelError::InvalidLabelName)
            } else {
                Ok(())
            }
        }
        Some(name) if !is_valid_metric_name(name) => Err(LabelError::InvalidMetricName),
        Some(name) if !invalid_label_name => {
            memo.metric_name = name;
            Ok(())
        }
        Some(_) if invalid_label_name => Err(LabelError::InvalidLabelName),
        Some(_) => Ok(()),
    })
}

/// The label that carries the metric name.
pub const METRIC_NAME_LABEL: &str = "__name__";

/// True when `name` matches `[a-zA-Z_:][a-zA-Z0-9_:]*`, the classic metric-name character set
/// (colons are allowed: vLLM names are `vllm:*`).
pub fn is_valid_metric_name(name: &str) -> bool {
    valid_name(name, true)
}

/// True when `name` matches `[a-zA-Z_][a-zA-Z0-9_]*`, the classic label-name character set. Names
/// starting with `__` (reserved for internal use) are accepted: `__name__` is one.
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
mod tests {
    use super::*;

    fn l<'a>(name: &'a str, value: &'a str) -> Label<'a> {
        Label { name, value }
    }

    /// The classic character classes, byte by byte, as the data model states them.
    fn naive_valid_name(name: &str, allow_colon: bool) -> bool {
        let start = |c: char| c.is_ascii_alphabetic() || c == '_' || (allow_colon && c == ':');
        let mut chars = name.chars();
        chars.next().is_some_and(start) && chars.all(|c| start(c) || c.is_ascii_digit())
    }

    #[test]
    fn name_memo_never_changes_a_result() {
        // Series drawn from a few names (valid and not) in a few orders, normalised in sequence
        // with one memo and each with none: every outcome and every kept label set is the same.
        let names = [
            "__name__", "engine", "en-gine", "le", "1le", "pod", "_x", "é",
        ];
        let values = ["vllm:a_bucket", "vllm:a_bucket", "1bad", "up", "", "x"];
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        let mut memo = NameMemo::default();
        let mut with_memo_ok = 0;
        for _ in 0..20_000 {
            let mut picked: Vec<Label<'_>> = (0..1 + next(5))
                .map(|_| l(names[next(names.len())], values[next(values.len())]))
                .collect();
            if next(3) > 0 {
                picked.sort_by_key(|label| label.name);
                picked.dedup_by_key(|label| label.name);
            }
            let (mut a, mut b) = (picked.clone(), picked);
            let with = normalize_labels_memo(&mut a, &mut memo);
            let without = normalize_labels_in_place(&mut b);
            assert_eq!(with, without, "{a:?}");
            assert_eq!(a[..with.0], b[..without.0]);
            with_memo_ok += usize::from(with.1.is_ok());
        }
        // The draw reaches both outcomes often.
        assert!((1_000..19_000).contains(&with_memo_ok), "{with_memo_ok}");
    }

    #[test]
    fn name_check_agrees_with_the_character_classes() {
        // Every single byte in every position of names of length 1..=17, and random strings.
        for len in 1..=17 {
            for pos in 0..len {
                for b in 0..=255u8 {
                    let mut bytes = vec![b'x'; len];
                    bytes[pos] = b;
                    let Ok(name) = std::str::from_utf8(&bytes) else {
                        continue;
                    };
                    for colon in [false, true] {
                        assert_eq!(
                            valid_name(name, colon),
                            naive_valid_name(name, colon),
                            "{name:?} {colon}"
                        );
                    }
                }
            }
        }
        assert!(
            !valid_name("aé", false)
                && !valid_name("éa", true)
                && !valid_name("abcdefgh\u{80}", true)
        );
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..20_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let len = (state % 24) as usize;
            let alphabet = b"aZ_:09/-.@[`{";
            let name: String = (0..len)
                .map(|i| {
                    char::from(alphabet[((state >> (i % 60)) % alphabet.len() as u64) as usize])
                })
                .collect();
            for colon in [false, true] {
                assert_eq!(
                    valid_name(&name, colon),
                    naive_valid_name(&name, colon),
                    "{name:?}"
                );
            }
        }
    }

    #[test]
    fn sorted_valid_set_is_kept_as_is() {
        let mut v = vec![
            l("__name__", "vllm:num_requests_running"),
            l("engine", "0"),
            l("model_name", "m"),
        ];
        let expected = v.clone();
        normalize_labels(&mut v).unwrap();
        assert_eq!(v, expected);
    }

    #[test]
    fn unsorted_labels_are_sorted_by_name() {
        let mut v = vec![
            l("model_name", "m"),
            l("Zone", "a"),
            l("__name__", "up"),
            l("engine", "0"),
        ];
        normalize_labels(&mut v).unwrap();
        // Byte order: 'Z' (0x5A) < '_' (0x5F) < 'e' (0x65) < 'm' (0x6D).
        let names: Vec<&str> = v.iter().map(|x| x.name).collect();
        assert_eq!(names, ["Zone", "__name__", "engine", "model_name"]);
        assert_eq!(v[3].value, "m", "values travel with their names");
    }

    #[test]
    fn empty_values_are_dropped() {
        let mut v = vec![l("__name__", "up"), l("instance", ""), l("job", "vllm")];
        normalize_labels(&mut v).unwrap();
        assert_eq!(v, vec![l("__name__", "up"), l("job", "vllm")]);
    }

    #[test]
    fn empty_label_set_is_rejected() {
        assert_eq!(
            normalize_labels(&mut vec![]),
            Err(LabelError::EmptyLabelSet)
        );
        // Only empty values: empty after dropping them.
        let mut v = vec![l("__name__", ""), l("job", "")];
        assert_eq!(normalize_labels(&mut v), Err(LabelError::EmptyLabelSet));
    }

    #[test]
    fn duplicate_label_names_are_rejected() {
        let mut v = vec![l("__name__", "up"), l("job", "a"), l("job", "b")];
        assert_eq!(
            normalize_labels(&mut v),
            Err(LabelError::DuplicateLabelName)
        );
        // Duplicates that only meet after sorting.
        let mut v = vec![l("job", "a"), l("__name__", "up"), l("job", "a")];
        assert_eq!(
            normalize_labels(&mut v),
            Err(LabelError::DuplicateLabelName)
        );
        // Two metric names.
        let mut v = vec![l("__name__", "a"), l("__name__", "b")];
        assert_eq!(
            normalize_labels(&mut v),
            Err(LabelError::DuplicateLabelName)
        );
    }

    #[test]
    fn missing_metric_name_is_rejected() {
        let mut v = vec![l("job", "vllm"), l("model_name", "m")];
        assert_eq!(normalize_labels(&mut v), Err(LabelError::MissingMetricName));
        // An empty __name__ is the same as none.
        let mut v = vec![l("__name__", ""), l("job", "vllm")];
        assert_eq!(normalize_labels(&mut v), Err(LabelError::MissingMetricName));
    }

    #[test]
    fn invalid_metric_names_are_rejected() {
        for bad in ["1up", "vllm-x", "a b", "ümlaut", "vllm:é", "a.b"] {
            let mut v = vec![l("__name__", bad)];
            assert_eq!(
                normalize_labels(&mut v),
                Err(LabelError::InvalidMetricName),
                "{bad}"
            );
        }
        for good in ["vllm:e2e_request_latency_seconds_bucket", ":x", "_", "A9:_"] {
            let mut v = vec![l("__name__", good)];
            assert_eq!(normalize_labels(&mut v), Ok(()), "{good}");
        }
    }

    #[test]
    fn invalid_label_names_are_rejected() {
        for bad in ["9le", "a:b", "model-name", "é", "a b"] {
            let mut v = vec![l("__name__", "up"), l(bad, "x")];
            assert_eq!(
                normalize_labels(&mut v),
                Err(LabelError::InvalidLabelName),
                "{bad}"
            );
        }
        for good in ["le", "_x", "__meta_internal", "Z9_"] {
            let mut v = vec![l("__name__", "up"), l(good, "x")];
            assert_eq!(normalize_labels(&mut v), Ok(()), "{good}");
        }
    }

    #[test]
    fn first_error_follows_the_documented_order() {
        // Duplicate beats an invalid label name that sorts before it.
        let mut v = vec![
            l("__name__", "up"),
            l("9bad", "x"),
            l("job", "a"),
            l("job", "b"),
        ];
        assert_eq!(
            normalize_labels(&mut v),
            Err(LabelError::DuplicateLabelName)
        );
        // A missing name beats an invalid label name.
        let mut v = vec![l("9bad", "x")];
        assert_eq!(normalize_labels(&mut v), Err(LabelError::MissingMetricName));
        // An invalid metric name beats an invalid label name.
        let mut v = vec![l("__name__", "1up"), l("9bad", "x")];
        assert_eq!(normalize_labels(&mut v), Err(LabelError::InvalidMetricName));
    }
}
