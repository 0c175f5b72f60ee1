//! Label validation and normalisation (remote-write notes, checklist items 1 and 2).

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
        }
    }
}

/// Normalises a label set in place: drops labels with empty values, sorts by name, then validates.
///
/// # Errors
/// Returns the first [`LabelError`] found; the caller rejects the whole series with that reason.
pub fn normalize_labels(labels: &mut Vec<Label<'_>>) -> Result<(), LabelError> {
    let _ = labels;
    todo!("protocol helper")
}
