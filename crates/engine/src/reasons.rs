//! The reasons the engine gives, each the values of one self-metric label, each defined once with
//! [`protocol::label_enum!`] (its variants, their label values, `ALL` and `index`): why a sample
//! was not applied ([`RejectReason`]), why a family is withheld ([`WithheldReason`]), why a group
//! left ([`RemovalReason`]).

use protocol::LabelError;

protocol::label_enum! {
/// Why a received sample was not applied. Each variant is one `reason` label value of
/// `vllm_corrector_samples_rejected_total`. Invariant: received = applied + Σ rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RejectReason {
    /// The series is read by no rule (including every `*_created` series). Not an error.
    UnusedSeries => "unused_series",
    /// A sample with the same timestamp as the series' newest: an idempotent no-op (retry, resend).
    DuplicateSample => "duplicate_sample",
    /// A sample older than the series' newest sample.
    OutOfOrder => "out_of_order",
    /// A NaN that is not the staleness marker.
    NanValue => "nan_value",
    /// The sample's timestamp is older than every frame its group still keeps.
    FrameEvicted => "frame_evicted",
    /// A series the engine does not hold yet, refused because it already holds
    /// [`crate::EngineConfig::max_active_series`] series.
    ActiveSeriesLimit => "active_series_limit",
    /// A native histogram sample of a schema other than custom buckets (−53): accepted and
    /// counted, not used.
    NativeHistogram => "native_histogram",
    /// A custom-buckets native histogram sample whose bounds, spans or counts are inconsistent
    /// (`protocol::HistogramError`).
    InvalidNativeHistogram => "invalid_native_histogram",
    /// The request held more series than `limits.max_series_per_request`: none of it was applied.
    TooManySeries => "too_many_series",
    /// The sample is stamped later than receive time plus `limits.max_future_skew`: applied, it
    /// would become its series' newest and make every real sample after it out of order.
    FutureTimestamp => "future_timestamp",
    /// Processing the request panicked after it was decoded (a bug; the request is answered 400).
    /// Every sample of the request is counted here, including any the engine applied before the
    /// panic: that request's own accounting is lost with the panic.
    InternalError => "internal_error",
    /// A series the engine does not hold yet, refused because it would take the engine's state past
    /// [`crate::EngineConfig::max_state_bytes`] once the retired states and the groups that feed no family
    /// made what room they could.
    MemoryBudget => "memory_budget",
    /// A series new to its group that would give one input of the group more than
    /// [`crate::MAX_SERIES_PER_INPUT`] series: a histogram's bucket past that many bounds (or a
    /// per-position counter past that many positions). A 60,000-bucket histogram held the engine
    /// lock for seconds per scrape (docs/SCRAPES.md, "A huge histogram").
    TooManyBuckets => "too_many_buckets",
    /// The sample's timestamp is 0 or negative (ms since the Unix epoch): no scrape makes one,
    /// and applied it would sit in its group as a scrape of 1970.
    NonPositiveTimestamp => "non_positive_timestamp",
    /// A series the engine does not hold yet, of a group that can feed no family even with the
    /// rest of its request (a lone `vllm:generation_tokens_total`, what a misconfigured job
    /// floods), refused for room: groups that feed no family may hold at most a quarter of
    /// `max_active_series` and of the state budget, and take only free room within it (or a lone
    /// group's silent for 30 s), never a retired state's (docs/RELIABILITY.md, "A cardinality
    /// flood").
    FeedsNoFamily => "feeds_no_family",
}
/// The series' label set was invalid, or over a label limit.
nested Label(LabelError);
}

impl RejectReason {
    /// The configuration field of the limit behind this reason, for a reason that is a limit the
    /// engine enforces on new series: `limits.max_active_series` ([`RejectReason::ActiveSeriesLimit`])
    /// or `limits.max_memory_bytes` ([`RejectReason::MemoryBudget`]: the engine's state share of
    /// the memory budget, [`crate::EngineConfig::max_state_bytes`]). `None` for every other reason.
    pub fn limit_name(self) -> Option<&'static str> {
        match self {
            RejectReason::ActiveSeriesLimit => Some("limits.max_active_series"),
            RejectReason::MemoryBudget => Some("limits.max_memory_bytes"),
            _ => None,
        }
    }
}

/// What a sender is told when this reason refuses some of a series' samples (the 400 answer names
/// the first such series: docs/REMOTE-WRITE.md, checklist item 1); a label refusal reads as its
/// [`LabelError`].
impl std::fmt::Display for RejectReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = match self {
            RejectReason::Label(e) => return e.fmt(f),
            RejectReason::FutureTimestamp => {
                "sample timestamp beyond limits.max_future_skew past the receiver's clock"
            }
            RejectReason::NonPositiveTimestamp => {
                "sample timestamp 0 or negative: timestamps are milliseconds since the Unix epoch"
            }
            RejectReason::ActiveSeriesLimit => {
                "limits.max_active_series reached: new series are refused until idle or stale groups leave"
            }
            RejectReason::MemoryBudget => {
                "limits.max_memory_bytes: the engine's share of the memory budget is spent; new series are refused until idle or stale groups leave"
            }
            RejectReason::FeedsNoFamily => {
                "a new series of a group that can feed no family, and no room for it within the quarter of limits.max_active_series and of the memory budget such groups may hold: check the scrape job that sends it"
            }
            RejectReason::TooManyBuckets => {
                "a histogram with more than 1024 buckets (engine::MAX_SERIES_PER_INPUT) in one group: further buckets are refused"
            }
            RejectReason::InvalidNativeHistogram => "invalid native histogram",
            other => other.as_str(),
        };
        f.write_str(text)
    }
}

protocol::label_enum! {
/// Why a family is absent for a group. Each variant is one `reason` label value of
/// `vllm_corrector_groups_withheld`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WithheldReason {
    /// A series the rule needs has never been seen for the group (for example vLLM < 0.11 has no
    /// request TPOT histogram, and < 0.16 has no `prompt_tokens_by_source_total`).
    MissingInput => "missing_input",
    /// `vllm:request_generation_tokens` has no `le="1"` bound: canonical TPOT cannot be exact.
    NoLeOneBound => "no_le_1_bound",
    /// No SLO of the configuration covers the group (`slos:` and its `match:`): the SLO family
    /// has nothing to count. Not a fault: the alerts and the withheld gauge leave it out.
    NoSlo => "no_slo",
    /// The inputs are present but no timestamp yet has a sample of every one of them; or an input
    /// is missing from a group whose set of series no vLLM version exposes (its target's series
    /// are split across correctors or filtered: the pipeline, not vLLM, lacks it; the family
    /// info's `detail` names the missing series).
    Incomplete => "incomplete",
    /// A series new to the group arrived fewer than `EngineConfig::settle_scrapes` scrapes ago (a
    /// new target, a corrector restart) and the group has not been served yet: its first frames
    /// may hold only part of a histogram's buckets, so nothing is evaluated until no new series
    /// arrives for that long (docs/ENGINE.md, "Settling").
    Settling => "settling",
    /// The inputs contradict each other (for example more n ≤ 1 requests than TPOT requests).
    InconsistentInputs => "inconsistent_inputs",
    /// A series of the group was refused by a limit (`limits.max_active_series` or the memory
    /// budget, [`RejectReason::limit_name`]) within the group's last two scrape intervals (at
    /// least 30 s), and the family lacks an input or a complete frame: the group is incomplete
    /// because the corrector refused its new series, not because of sharding. Reported instead
    /// of `missing_input` and `incomplete` while it lasts.
    Limit => "limit",
}
}

impl WithheldReason {
    /// The reasons any family can give, whatever its rule: a missing input, an incomplete
    /// frame, settling, and a limit. A rule adds its own ([`crate::Family::withheld_reasons`]).
    pub(crate) const COMMON: [WithheldReason; 4] = [
        WithheldReason::MissingInput,
        WithheldReason::Incomplete,
        WithheldReason::Settling,
        WithheldReason::Limit,
    ];
}

protocol::label_enum! {
/// Why a group left `/metrics`: the `reason` of `vllm_corrector_groups_removed_total` and of the
/// log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RemovalReason {
    /// Every input series got a staleness marker.
    Stale => "stale",
    /// No sample for `engine.idle_timeout`.
    Idle => "idle",
    /// No new sample for `engine.missed_scrapes` of its own scrape intervals (and at least
    /// `engine.missed_scrapes_min_wait`).
    MissedScrapes => "missed_scrapes",
    /// Evicted to make room for another group's new series: it could feed no family
    /// (docs/RELIABILITY.md, "A cardinality flood").
    Evicted => "evicted",
}
}

// Every entry of each `ALL` sits at its own index (the macro's contract, checked once here).
const _: () = {
    let mut i = 0;
    while i < RejectReason::ALL.len() {
        assert!(RejectReason::ALL[i].index() == i, "RejectReason::ALL");
        i += 1;
    }
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reason_has_its_own_label_value() {
        let mut labels: Vec<&str> = RejectReason::ALL.iter().map(|r| r.as_str()).collect();
        labels.sort_unstable();
        labels.dedup();
        assert_eq!(labels.len(), RejectReason::ALL.len());
        assert_eq!(RejectReason::ALL.len(), 15 + LabelError::ALL.len());
        assert_eq!(
            RejectReason::Label(LabelError::ReservedLabelName).as_str(),
            "reserved_label_name"
        );
    }

    #[test]
    fn a_label_refusal_reads_as_its_label_error() {
        for e in LabelError::ALL {
            assert_eq!(RejectReason::Label(e).to_string(), e.to_string());
        }
    }
}
