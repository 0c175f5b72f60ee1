//! How the tools show each corrected family (`docs/ENGINE.md`, "The rule registry"). The engine
//! says what a family is (its name, help, type, inputs and evaluation); this table says how
//! `inspect`, `demo` and `rules` show it: the words of notes, the `inspect` column and `--json`
//! key, the `demo` rows, the unit, the raw vLLM reading it is compared with, its truth in the
//! simulator's terms, and its PromQL recording rules. One entry per registered family, found
//! with [`of`] (the SLO counters, which have no mean, in [`SLO`]); its `tests` module checks
//! that every family has exactly one.

use engine::slo::Sli;
use engine::{CounterMetric, Family};

/// The unit of a family's mean `Δ_sum / Δ_count`, for display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    /// Seconds (tables show milliseconds).
    Seconds,
    /// A count per count (tokens per iteration, tokens per output).
    Ratio,
}

/// A raw vLLM reading a family is compared with: `Δ num / Δ den + offset` between two dumps, each
/// side the first of its alternative series names that both dumps hold (the new ITL name before
/// the old one).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RawMean {
    /// Numerator series names, by preference.
    pub(crate) num: &'static [&'static str],
    /// Denominator series names, by preference.
    pub(crate) den: &'static [&'static str],
    /// Added to the ratio (1 for vLLM's acceptance length `1 + accepted / drafts`).
    pub(crate) offset: f64,
}

/// What a family's `_sum` or `_count` counts, in the simulator's per-request and per-output terms
/// (`sim::truth`, crates/sim): the truth the demo compares the family with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Measured {
    /// Σ per-request TPOT over finished requests with n > 1, seconds.
    TpotSum,
    /// Finished requests with n > 1.
    TpotRequests,
    /// The 99th percentile of per-request TPOT over requests with n > 1 (numpy), seconds.
    TpotP99,
    /// Σ of every gap between a request's consecutive outputs, seconds.
    ItlSum,
    /// Outputs after each request's first.
    ItlOutputs,
    /// Tokens carried by outputs after each request's first.
    TokensAfterFirst,
    /// Locally computed prompt tokens plus generated tokens.
    LocalIterationTokens,
    /// Engine iterations (output batches).
    Iterations,
}

/// A p99 row of the demo: estimated from buckets on both sides, so exact only within one bucket.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct P99Row {
    /// Row label.
    pub(crate) label: &'static str,
    /// Plain-output key.
    pub(crate) key: &'static str,
    /// The raw vLLM histogram compared with it.
    pub(crate) raw: &'static str,
    /// Its truth.
    pub(crate) truth: Measured,
}

/// How the tools show one corrected family.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Presentation {
    /// The family shown (a name no rule has does not compile: [`Family::named`]).
    pub(crate) family: Family,
    /// Words for notes: `canonical TPOT`.
    pub(crate) words: &'static str,
    /// `inspect` column header.
    pub(crate) column: &'static str,
    /// `inspect --json` key of the mean.
    pub(crate) json_key: &'static str,
    /// `demo` row label and plain-output key of the mean.
    pub(crate) demo: (&'static str, &'static str),
    /// The demo's p99 row of a histogram family, if it shows one.
    pub(crate) demo_p99: Option<P99Row>,
    /// Unit of the mean.
    pub(crate) unit: Unit,
    /// The raw vLLM reading of the same quantity, as a user would read it uncorrected.
    pub(crate) raw: Option<RawMean>,
    /// The truth of the mean: `(what _sum counts, what _count counts)`.
    pub(crate) truth: (Measured, Measured),
    /// The PromQL recording rules of `vllm-corrector rules`: `(name suffix, expression)`, the
    /// suffix appended to the family name without its `vllm_corrected_` prefix. Empty when PromQL
    /// cannot express the family.
    pub(crate) promql: &'static [(&'static str, &'static str)],
    /// One line for the `rules` header: what is recorded and how exact it is.
    pub(crate) promql_note: &'static str,
}

/// The families the tools show as a latency or ratio (every one but the SLO counters, which
/// have no mean), in registry order.
pub(crate) fn shown() -> impl Iterator<Item = Family> {
    Family::ALL.into_iter().filter(|f| get(*f).is_some())
}

/// The presentation of `family`, if the tools show it ([`shown`]).
pub(crate) fn get(family: Family) -> Option<&'static Presentation> {
    PRESENTATIONS.iter().find(|p| p.family == family)
}

/// The presentation of `family`.
///
/// # Panics
/// When [`PRESENTATIONS`] has no entry for it, which its `tests` module rules out for every
/// registered family.
pub(crate) fn of(family: Family) -> &'static Presentation {
    PRESENTATIONS
        .iter()
        .find(|p| p.family == family)
        .unwrap_or_else(|| panic!("{family:?} has no entry in crates/tools/src/presentation.rs"))
}

/// How the tools show the SLO counters (`vllm_corrected_slo`, docs/SLO.md, "SLO counters"):
/// not as a mean but per SLO, each SLI's attainment (good / events over the window) beside the
/// reading of vLLM's own histogram at the threshold, and the goodput bounds (as fractions of the
/// finished requests) beside the naive reading, the least of those raw attainments.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SloPresentation {
    /// The family shown.
    pub(crate) family: Family,
    /// Words for notes.
    pub(crate) words: &'static str,
    /// `inspect --json` key of the array of SLO readings.
    pub(crate) json_key: &'static str,
    /// The labels a counter row adds to its group's (`slo`, and `sli` or `bound`): the tools
    /// read them as the row's dimensions, as `le` is a bucket's.
    pub(crate) row_labels: [&'static str; 3],
    /// Per SLI, the histogram of vLLM's own (name without the input prefix, `vllm:` by default)
    /// a user reads the SLI from without the corrector, at the bucket of the threshold: TTFT and
    /// E2EL are exact there; vLLM's request TPOT counts every request of at most one output token
    /// as a good event of 0 s; its ITL counts one event per output, whatever its tokens (the
    /// tools fall back to the pre-0.10 name `time_per_output_token_seconds`).
    pub(crate) raw: [(Sli, &'static str); 4],
}

/// The SLO counters' presentation.
pub(crate) const SLO: SloPresentation = SloPresentation {
    family: Family::SloCounters,
    words: "SLO counters",
    json_key: "slos",
    row_labels: ["slo", "sli", "bound"],
    raw: [
        (Sli::Ttft, "time_to_first_token_seconds"),
        (Sli::Tpot, "request_time_per_output_token_seconds"),
        (Sli::E2el, "e2e_request_latency_seconds"),
        (Sli::ItlPerToken, "inter_token_latency_seconds"),
    ],
};

impl SloPresentation {
    /// The raw histogram of `sli` without the input prefix ([`SloPresentation::raw`]).
    pub(crate) fn raw_histogram(&self, sli: Sli) -> &'static str {
        self.raw
            .iter()
            .find(|(s, _)| *s == sli)
            .map_or("", |(_, name)| name)
    }

    /// True for a sample name of the family: `vllm_corrected_slo_events_total`, … (each
    /// [`CounterMetric`] with `_total`).
    pub(crate) fn is_counter(&self, name: &str) -> bool {
        name.strip_suffix("_total")
            .is_some_and(|base| CounterMetric::ALL.iter().any(|m| m.name() == base))
    }
}

/// vLLM's raw ITL mean, per output whatever its tokens: the ITL `_sum` over its `_count`, the new
/// name before the old one. Both ITL families are compared with it.
const RAW_ITL: RawMean = RawMean {
    num: &[
        "vllm:inter_token_latency_seconds_sum",
        "vllm:time_per_output_token_seconds_sum",
    ],
    den: &[
        "vllm:inter_token_latency_seconds_count",
        "vllm:time_per_output_token_seconds_count",
    ],
    offset: 0.0,
};

/// The PromQL of the ITL `_sum` and of the tokens emitted after each request's first: the exact sum
/// and count of token-weighted ITL, shared by the acceptance-corrected ITL (the same sum and count).
const SUM_AND_COUNT_PROMQL: &[(&str, &str)] = &[
    (
        "_sum",
        "(vllm:inter_token_latency_seconds_sum or vllm:time_per_output_token_seconds_sum)\n  and vllm:generation_tokens_total\n  and vllm:time_to_first_token_seconds_count",
    ),
    (
        "_count",
        "(vllm:generation_tokens_total - vllm:time_to_first_token_seconds_count)\n  and (vllm:inter_token_latency_seconds_sum or vllm:time_per_output_token_seconds_sum)",
    ),
];

/// Every family's presentation, in registry order.
pub(crate) const PRESENTATIONS: &[Presentation] = &[
    Presentation {
        family: Family::CanonicalTpot,
        words: "canonical TPOT",
        column: "TPOT canonical ms",
        json_key: "canonical_tpot_mean_seconds",
        demo: ("TPOT mean (per request, n > 1)", "tpot_mean_seconds"),
        demo_p99: Some(P99Row {
            label: "TPOT p99 (±1 bucket)",
            key: "tpot_p99_seconds",
            raw: "vllm:request_time_per_output_token_seconds",
            truth: Measured::TpotP99,
        }),
        unit: Unit::Seconds,
        raw: Some(RawMean {
            num: &["vllm:request_time_per_output_token_seconds_sum"],
            den: &["vllm:request_time_per_output_token_seconds_count"],
            offset: 0.0,
        }),
        truth: (Measured::TpotSum, Measured::TpotRequests),
        // Requests with n <= 1 fall in every TPOT bucket with TPOT 0. vLLM prints the bound `1.0`
        // (Python `repr`); Prometheus 3 normalises classic-histogram `le` values to `1`.
        promql: &[
            (
                "_bucket",
                "vllm:request_time_per_output_token_seconds_bucket\n  - ignoring(le) group_left\nvllm:request_generation_tokens_bucket{le=~\"1|1[.]0\"}",
            ),
            (
                "_sum",
                "vllm:request_time_per_output_token_seconds_sum\n  and ignoring(le)\nvllm:request_generation_tokens_bucket{le=~\"1|1[.]0\"}",
            ),
            (
                "_count",
                "vllm:request_time_per_output_token_seconds_count\n  - ignoring(le)\nvllm:request_generation_tokens_bucket{le=~\"1|1[.]0\"}",
            ),
        ],
        promql_note: "canonical TPOT, exact",
    },
    Presentation {
        family: Family::TokenWeightedItl,
        words: "token-weighted ITL",
        column: "ITL token-weighted ms",
        json_key: "token_weighted_itl_seconds",
        demo: (
            "ITL per token, token-weighted",
            "itl_token_weighted_seconds",
        ),
        demo_p99: None,
        unit: Unit::Seconds,
        raw: Some(RAW_ITL),
        truth: (Measured::ItlSum, Measured::TokensAfterFirst),
        promql: SUM_AND_COUNT_PROMQL,
        promql_note: "exact",
    },
    Presentation {
        family: Family::AcceptanceCorrectedItl,
        words: "acceptance-corrected ITL",
        column: "ITL acceptance-corr. ms",
        json_key: "acceptance_corrected_itl_seconds",
        demo: (
            "ITL per token, acceptance-corrected",
            "itl_acceptance_corrected_seconds",
        ),
        demo_p99: None,
        unit: Unit::Seconds,
        raw: Some(RAW_ITL),
        truth: (Measured::ItlSum, Measured::TokensAfterFirst),
        // The exact sum and count only: the tokens emitted after each request's first, as the
        // token-weighted count (docs/METRICS.md, "Accepted drafts are counted before truncation").
        promql: SUM_AND_COUNT_PROMQL,
        promql_note: "exact sum and count, no buckets",
    },
    Presentation {
        family: Family::IterationTokensLocalCompute,
        words: "local-compute tokens",
        column: "iteration tokens local",
        json_key: "local_compute_iteration_tokens_mean",
        demo: ("iteration tokens, local compute", "iteration_tokens_mean"),
        demo_p99: None,
        unit: Unit::Ratio,
        raw: Some(RawMean {
            num: &["vllm:iteration_tokens_total_sum"],
            den: &["vllm:iteration_tokens_total_count"],
            offset: 0.0,
        }),
        truth: (Measured::LocalIterationTokens, Measured::Iterations),
        // vLLM >= 0.16, which has the by-source counter.
        promql: &[
            (
                "_sum",
                "vllm:prompt_tokens_by_source_total{source=\"local_compute\"}\n  + ignoring(source)\nvllm:generation_tokens_total",
            ),
            (
                "_count",
                "vllm:iteration_tokens_total_count\n  and vllm:generation_tokens_total\n  and ignoring(source)\nvllm:prompt_tokens_by_source_total{source=\"local_compute\"}",
            ),
        ],
        promql_note: "exact, vLLM >= 0.16",
    },
    Presentation {
        family: Family::named("vllm_corrected_tokens_per_output"),
        words: "tokens per output",
        column: "tokens per output",
        json_key: "tokens_per_output_mean",
        demo: (
            "tokens per output (acceptance length)",
            "tokens_per_output_mean",
        ),
        demo_p99: None,
        unit: Unit::Ratio,
        // vLLM's own acceptance length, 1 + accepted / drafts: it also counts drafts that
        // `max_tokens` cut off, and leaves out outputs of steps without drafts.
        raw: Some(RawMean {
            num: &["vllm:spec_decode_num_accepted_tokens_total"],
            den: &["vllm:spec_decode_num_drafts_total"],
            offset: 1.0,
        }),
        truth: (Measured::TokensAfterFirst, Measured::ItlOutputs),
        promql: &[
            (
                "_sum",
                "(vllm:generation_tokens_total - vllm:time_to_first_token_seconds_count)\n  and (vllm:inter_token_latency_seconds_count or vllm:time_per_output_token_seconds_count)",
            ),
            (
                "_count",
                "(vllm:inter_token_latency_seconds_count or vllm:time_per_output_token_seconds_count)\n  and vllm:generation_tokens_total\n  and vllm:time_to_first_token_seconds_count",
            ),
        ],
        promql_note: "exact",
    },
];

#[cfg(test)]
mod tests;
