//! Series classification: which rule input a raw vLLM series is, decided from its name and labels.
//!
//! Names follow vLLM's v1 exposition (`vllm/v1/metrics/loggers.py` as printed by Python
//! `prometheus_client`): counters carry `_total`, histograms `_bucket{le}`/`_sum`/`_count`, and the
//! histogram `vllm:iteration_tokens_total` keeps its `_total` before the histogram suffix.

use crate::slo::Sli;
use protocol::Label;
use protocol::float::parse_le;

/// Labels that identify a series inside its group, not the group itself (docs/METRICS.md, "The
/// corrected families"): `__name__`, `le`, and the labels that split one vLLM family into series
/// (`source`, `position`, `finished_reason`). The hot path tests membership
/// with `is_rule_dimension`; `inspect` groups dump samples with this list.
pub const RULE_DIMENSIONS: [&str; 5] = ["__name__", "le", "source", "position", "finished_reason"];

/// Part of a classic histogram.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub(crate) enum Part {
    /// `_bucket{le}`: cumulative count of observations ≤ `le`.
    Bucket,
    /// `_sum`: sum of observations.
    Sum,
    /// `_count`: number of observations.
    Count,
}

/// A rule input: one raw series kind (the `le` is kept beside it in [`RoleKey`]).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub(crate) enum Input {
    /// `vllm:inter_token_latency_seconds` (seconds, one observation per output after the first).
    Itl(Part),
    /// `vllm:time_per_output_token_seconds`: the old name of the same ITL observations (vLLM ≤ 0.14).
    OldItl(Part),
    /// `vllm:request_time_per_output_token_seconds` (seconds, one observation per finished request).
    Tpot(Part),
    /// `vllm:request_generation_tokens_bucket{le="1"}`: finished requests with n ≤ 1 output tokens.
    GenLe1,
    /// `vllm:request_generation_tokens_count`: proves the token histogram exists (for `no_le_1_bound`).
    GenCount,
    /// `vllm:generation_tokens_total` (tokens).
    GenTotal,
    /// `vllm:time_to_first_token_seconds_count` (first outputs).
    TtftCount,
    /// `vllm:prompt_tokens_by_source_total{source="local_compute"}` (tokens, vLLM ≥ 0.16).
    LocalCompute,
    /// `vllm:iteration_tokens_total_count` (engine iterations).
    IterCount,
    /// `vllm:spec_decode_num_accepted_tokens_total` (accepted draft tokens): read by no rule (it
    /// counts drafts accepted beyond a request's last token, `docs/METRICS.md`), only by the
    /// completeness check, which pairs it with the drafts counter.
    Accepted,
    /// `vllm:spec_decode_num_accepted_tokens_per_pos_total{position}` (drafts whose token at that
    /// position was accepted); the position is kept in [`RoleKey::le_bits`] as a float's bits.
    AcceptedPerPos,
    /// `vllm:spec_decode_num_drafts_total` (drafts): read by no rule, only by the completeness check
    /// (vLLM registers it beside the accepted-tokens counter).
    Drafts,
    /// `vllm:time_to_first_token_seconds_bucket{le}` (requests by TTFT, observed at the first
    /// token): read only when an SLO has a TTFT threshold.
    TtftBucket,
    /// `vllm:e2e_request_latency_seconds_bucket{le}` (finished requests by E2E latency): read
    /// only when an SLO has an E2EL threshold.
    E2eBucket,
    /// `vllm:e2e_request_latency_seconds_count` (finished requests): read only when an SLO has an
    /// E2EL threshold.
    E2eCount,
    /// `vllm:request_success_total{finished_reason="abort"|"error"}` (requests finished by an
    /// abort or an error; the key's bound is 0 for abort, 1 for error): the only finished
    /// requests that may have produced no token, hence no TTFT observation. Read only when an SLO
    /// has a TTFT threshold.
    AbnormalFinishes,
}

/// The identity of a series inside its group: its input and, for buckets, the `le` bound's bits.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub(crate) struct RoleKey {
    /// Which input.
    pub(crate) input: Input,
    /// `f64::to_bits` of the `le` bound for buckets (`+Inf` included), of the position for
    /// [`Input::AcceptedPerPos`]; 0 otherwise.
    pub(crate) le_bits: u64,
}

impl RoleKey {
    /// The `le` bound as a float (meaningful for buckets only).
    pub(crate) fn bound(self) -> f64 {
        f64::from_bits(self.le_bits)
    }
}

fn label<'a>(labels: &[Label<'a>], name: &str) -> Option<&'a str> {
    labels.iter().find(|l| l.name == name).map(|l| l.value)
}

/// How the labels beside `__name__` select a series of a [`ReadName`] and key it in its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dim {
    /// No label is read.
    Plain,
    /// A histogram bucket: `le` parsed as a float and kept in the key.
    Le,
    /// Only the bucket whose `le` is 1, whatever its spelling; not kept.
    LeIsOne,
    /// Only the series whose label has this value; not kept.
    Only(&'static str, &'static str),
    /// `position` parsed as an integer and kept in the key.
    Position,
    /// Only the series whose label has one of these values (matched by the regex, for the keep
    /// rule), the value's index kept in the key.
    OneOf(&'static str, &'static [&'static str], &'static str),
}

/// What vLLM registers a series with: the facts the completeness check
/// ([`super::completeness`]) reads from [`READ_NAMES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Registered {
    /// By every release for every engine, with all the others.
    Always,
    /// One of the two ITL names, which every release registers (both from 0.10.2 to 0.14).
    Itl,
    /// Beside the histogram named (request TPOT beside `request_generation_tokens`, from 0.11).
    Beside(&'static str),
    /// With speculative decoding, together with the other spec-decode counters.
    SpecDecode,
    /// Only on some versions or bucket layouts; no pairing is checked.
    Optional,
}

/// One series name a rule (or the completeness check) reads: the engine's vLLM vocabulary, from
/// which the classifier (`classify`), the name pre-filter (`may_be_read`), the metadata
/// filter, the completeness check and `vllm-corrector relabel` (`crates/tools/src/relabel.rs`) are all
/// derived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadName {
    /// The full `__name__`, e.g. `vllm:inter_token_latency_seconds_bucket`.
    pub name: &'static str,
    /// `(label, regex)`: only series whose `label` matches the fully anchored regex are read
    /// (`le` of the token histogram is 1, printed `1` by Go senders and `1.0` by Python's
    /// `prometheus_client`; `source` of the prompt-token counter is `local_compute`).
    pub only: Option<(&'static str, &'static str)>,
    /// The rule input it is.
    pub(crate) input: Input,
    /// How its labels select and key it.
    pub(crate) dim: Dim,
    /// What vLLM registers it with.
    pub(crate) registered: Registered,
    /// `Some(sli)` when only the SLO counters read it, and only while some SLO has a threshold
    /// for `sli` ([`crate::slo::SloSet`]); otherwise its samples are unused.
    pub slo: Option<Sli>,
}

const fn read(name: &'static str, input: Input, dim: Dim, registered: Registered) -> ReadName {
    let only = match dim {
        Dim::LeIsOne => Some(("le", r"1(\.0+)?")),
        Dim::Only(label, value) => Some((label, value)),
        Dim::OneOf(label, _, regex) => Some((label, regex)),
        Dim::Plain | Dim::Le | Dim::Position => None,
    };
    ReadName {
        name,
        only,
        input,
        dim,
        registered,
        slo: None,
    }
}

/// The bucket, `_sum` and `_count` of one histogram.
macro_rules! histogram {
    ($base:literal, $input:path, $registered:expr) => {
        [
            read(
                concat!($base, "_bucket"),
                $input(Part::Bucket),
                Dim::Le,
                $registered,
            ),
            read(
                concat!($base, "_sum"),
                $input(Part::Sum),
                Dim::Plain,
                $registered,
            ),
            read(
                concat!($base, "_count"),
                $input(Part::Count),
                Dim::Plain,
                $registered,
            ),
        ]
    };
}

const ITL: [ReadName; 3] = histogram!(
    "vllm:inter_token_latency_seconds",
    Input::Itl,
    Registered::Itl
);
const OLD_ITL: [ReadName; 3] = histogram!(
    "vllm:time_per_output_token_seconds",
    Input::OldItl,
    Registered::Itl
);
const TPOT: [ReadName; 3] = histogram!(
    "vllm:request_time_per_output_token_seconds",
    Input::Tpot,
    Registered::Beside("vllm:request_generation_tokens")
);

/// Every series name a rule (or the completeness check) reads, in `Input` order. Semantics:
/// `docs/METRICS.md`, "The input series".
pub const READ_NAMES: [ReadName; 22] = [
    ITL[0],
    ITL[1],
    ITL[2],
    OLD_ITL[0],
    OLD_ITL[1],
    OLD_ITL[2],
    TPOT[0],
    TPOT[1],
    TPOT[2],
    read(
        "vllm:request_generation_tokens_bucket",
        Input::GenLe1,
        Dim::LeIsOne,
        Registered::Optional,
    ),
    read(
        "vllm:request_generation_tokens_count",
        Input::GenCount,
        Dim::Plain,
        Registered::Always,
    ),
    read(
        "vllm:generation_tokens_total",
        Input::GenTotal,
        Dim::Plain,
        Registered::Always,
    ),
    read(
        "vllm:time_to_first_token_seconds_count",
        Input::TtftCount,
        Dim::Plain,
        Registered::Always,
    ),
    read(
        "vllm:prompt_tokens_by_source_total",
        Input::LocalCompute,
        Dim::Only("source", "local_compute"),
        Registered::Optional,
    ),
    read(
        "vllm:iteration_tokens_total_count",
        Input::IterCount,
        Dim::Plain,
        Registered::Always,
    ),
    read(
        "vllm:spec_decode_num_accepted_tokens_total",
        Input::Accepted,
        Dim::Plain,
        Registered::SpecDecode,
    ),
    read(
        "vllm:spec_decode_num_drafts_total",
        Input::Drafts,
        Dim::Plain,
        Registered::SpecDecode,
    ),
    read(
        "vllm:spec_decode_num_accepted_tokens_per_pos_total",
        Input::AcceptedPerPos,
        Dim::Position,
        Registered::Optional,
    ),
    slo_read(
        "vllm:time_to_first_token_seconds_bucket",
        Input::TtftBucket,
        Dim::Le,
        Sli::Ttft,
    ),
    slo_read(
        "vllm:e2e_request_latency_seconds_bucket",
        Input::E2eBucket,
        Dim::Le,
        Sli::E2el,
    ),
    slo_read(
        "vllm:e2e_request_latency_seconds_count",
        Input::E2eCount,
        Dim::Plain,
        Sli::E2el,
    ),
    slo_read(
        "vllm:request_success_total",
        Input::AbnormalFinishes,
        Dim::OneOf("finished_reason", &FINISHED_ABNORMALLY, "abort|error"),
        Sli::Ttft,
    ),
];

/// The `finished_reason` values of requests that may finish without a token (vLLM's
/// `FinishReason.ABORT` and `ERROR`, `vllm/v1/engine/__init__.py`): a request finished by `stop`,
/// `length` or `repetition` produced at least one token, so its TTFT was observed.
pub(crate) const FINISHED_ABNORMALLY: [&str; 2] = ["abort", "error"];

/// A name read only for the SLO counters of `sli` ([`ReadName::slo`]).
const fn slo_read(name: &'static str, input: Input, dim: Dim, sli: Sli) -> ReadName {
    let mut r = read(name, input, dim, Registered::Optional);
    r.slo = Some(sli);
    r
}

/// The vLLM histogram a [`ReadName`] is a part of (its name less `_bucket`, `_sum` or `_count`),
/// or `None` for a counter.
pub(crate) fn histogram_of(read: &ReadName) -> Option<&'static str> {
    ["_bucket", "_sum", "_count"]
        .iter()
        .find_map(|suffix| read.name.strip_suffix(suffix))
}

/// The prefix vLLM gives every series it exposes, and so the [`READ_NAMES`] names.
pub const DEFAULT_METRIC_PREFIX: &str = "vllm:";

/// A [`READ_NAMES`] name less [`DEFAULT_METRIC_PREFIX`]: what follows the configured prefix
/// (`inter_token_latency_seconds_bucket`).
fn unprefixed(read: &ReadName) -> &'static str {
    read.name
        .strip_prefix(DEFAULT_METRIC_PREFIX)
        .unwrap_or(read.name)
}

/// False for an input only the SLO counters read while no SLO of `slos` has a threshold for
/// its SLI ([`ReadName::slo`]): its samples are then unused.
pub(crate) fn wanted(input: Input, slos: &crate::slo::SloSet) -> bool {
    match input {
        Input::TtftBucket => slos.reads(Sli::Ttft),
        Input::E2eBucket | Input::E2eCount => slos.reads(Sli::E2el),
        Input::AbnormalFinishes => slos.reads(Sli::Ttft),
        _ => true,
    }
}

/// The table entry of a series name under the input prefix `prefix`
/// ([`crate::EngineConfig::metric_prefix`]): `kserve_vllm:generation_tokens_total` under
/// `kserve_vllm:` is the entry of `vllm:generation_tokens_total`.
fn entry(name: &str, prefix: &str) -> Option<&'static ReadName> {
    let rest = name.strip_prefix(prefix)?;
    READ_NAMES.iter().find(|r| unprefixed(r) == rest)
}

/// Classifies a series by `__name__` (under the input prefix `prefix`, [`entry`]) and the labels
/// its [`ReadName`] entry reads.
///
/// Returns `None` for every series no rule reads, `*_created` included: the caller counts its samples as
/// `unused_series` and allocates nothing for it. A bucket whose `le` is missing or not a float is unused too.
pub(crate) fn classify(name: &str, prefix: &str, labels: &[Label<'_>]) -> Option<RoleKey> {
    let read = entry(name, prefix)?;
    let key = |le_bits| {
        Some(RoleKey {
            input: read.input,
            le_bits,
        })
    };
    match read.dim {
        Dim::Plain => key(0),
        Dim::Le => key(parse_le(label(labels, "le")?)?.to_bits()),
        Dim::LeIsOne => (parse_le(label(labels, "le")?)? == 1.0).then_some(RoleKey {
            input: read.input,
            le_bits: 0,
        }),
        Dim::Only(name, value) => (label(labels, name)? == value).then_some(RoleKey {
            input: read.input,
            le_bits: 0,
        }),
        Dim::Position => key(f64::from(label(labels, "position")?.parse::<u16>().ok()?).to_bits()),
        Dim::OneOf(name, values, _) => {
            let value = label(labels, name)?;
            let index = values.iter().position(|v| *v == value)?;
            key((index as f64).to_bits())
        }
    }
}

/// False when no rule reads any series named `name`, whatever its other labels: the first, cheap
/// test of the discard path (a name outside `prefix`, the input prefix, costs one prefix test). A name that passes may
/// still classify as unused (a token bucket whose `le` is not 1, a prompt-token source other than
/// `local_compute`). Agrees with [`classify`]: `classify(name, labels).is_some()` implies
/// `may_be_read(name, prefix)`.
pub(crate) fn may_be_read(name: &str, prefix: &str) -> bool {
    name.starts_with(prefix) && entry(name, prefix).is_some()
}

/// True when `family` is the remote-write metadata family name of series some rule reads: one of
/// [`READ_NAMES`] less its `_total`, `_bucket`, `_sum` or `_count` suffix, or whole, named as
/// Prometheus sends it (the `# TYPE` name: a counter with or without `_total`, text 0.0.4 and
/// OpenMetrics), under the input prefix `prefix`. At most a few dozen names, so the metadata
/// cache that keeps only these is bounded whatever senders send.
pub(crate) fn is_read_family(family: &str, prefix: &str) -> bool {
    let Some(rest) = family.strip_prefix(prefix) else {
        return false;
    };
    READ_NAMES.iter().any(|read| {
        unprefixed(read)
            .strip_prefix(rest)
            .is_some_and(|suffix| matches!(suffix, "" | "_total" | "_bucket" | "_sum" | "_count"))
    })
}

/// Group labels of a normalised label set: everything but [`RULE_DIMENSIONS`] and the labels
/// `dropped` names ([`crate::EngineConfig::drop_labels`]: a sender's external labels), in sorted
/// order.
pub(crate) fn group_labels<'l, 'a>(
    labels: &'l [Label<'a>],
    dropped: &'l [String],
) -> impl Iterator<Item = &'l Label<'a>> + Clone {
    labels
        .iter()
        .filter(|l| !is_rule_dimension(l.name) && !dropped.iter().any(|d| d == l.name))
}

/// True when `name` is one of [`RULE_DIMENSIONS`]; dispatches on the length first, since this runs
/// for every label of every sample a rule reads.
#[inline]
pub(crate) fn is_rule_dimension(name: &str) -> bool {
    match name.len() {
        2 => name == "le",
        6 => name == "source",
        8 => name == "__name__" || name == "position",
        15 => name == "finished_reason",
        _ => false,
    }
}

#[cfg(test)]
mod tests;
