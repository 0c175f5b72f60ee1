//! Does a group's set of input series look like something vLLM exposes? A pure function over the
//! group's role keys, used for the self-metric `vllm_corrector_groups_incomplete`.
//!
//! Every vLLM release from 0.10 to 0.33 (`vllm/v1/metrics/loggers.py`, `PrometheusStatLogger.__init__`)
//! registers these families unconditionally and together, for every engine:
//! `generation_tokens` (counter), `time_to_first_token_seconds`, `iteration_tokens_total`,
//! `request_generation_tokens` and the ITL histogram (`inter_token_latency_seconds` from 0.10.2,
//! `time_per_output_token_seconds` up to 0.14). From 0.11 `request_time_per_output_token_seconds` is
//! registered beside `request_generation_tokens`; with speculative decoding the `spec_decode_num_drafts`
//! and `spec_decode_num_accepted_tokens` counters are registered together
//! (`vllm/v1/spec_decode/metrics.py`). `prometheus_client` prints every histogram child with all its
//! `_bucket{le}` (ending in `+Inf`), `_sum` and `_count`. So a group that holds some of these series
//! but not the rest did not get them from a vLLM scrape: its series were split between corrector
//! instances (remote-write sharding by series, see `docs/PROMETHEUS.md`, "Scaling out") or filtered by a
//! `write_relabel_configs` that keeps only some `vllm:*` series.
//!
//! The check is structural: it reads only which role keys are present, never values.

use super::classify::{Dim, Input, READ_NAMES, ReadName, Registered, RoleKey, histogram_of};

/// The first reason found why a role set cannot come from any vLLM version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Incomplete {
    /// A histogram (named) has `_bucket` series but no `+Inf` bucket.
    NoInfBucket(&'static str),
    /// A histogram (named) has some of `_bucket`, `_sum`, `_count` but not all three (or, for
    /// the token histogram of which only `le="1"` is read, that bucket without `_count`).
    MissingHistogramPart(&'static str),
    /// A series vLLM always registers with every other one is absent (generation tokens counter,
    /// TTFT `_count`, iteration tokens `_count`, `request_generation_tokens_count`, or any ITL
    /// histogram).
    MissingCoreSeries(Input),
    /// A series (named) without the series vLLM registers it beside (request TPOT without
    /// `request_generation_tokens`).
    WithoutPartner(&'static str),
    /// One of the spec-decode counters (drafts, accepted tokens) without the other.
    SpecDecodeCounterAlone,
}

/// The entries of [`READ_NAMES`] that are parts of the histogram `base`.
fn parts_of(base: &'static str) -> impl Iterator<Item = usize> {
    READ_NAMES
        .iter()
        .enumerate()
        .filter(move |(_, r)| histogram_of(r) == Some(base))
        .map(|(i, _)| i)
}

/// True when part `j` of histogram `base` must be there whenever any part is. A part only the
/// SLO counters read ([`ReadName::slo`]) is read only while an SLO needs it, so its absence
/// proves nothing when the histogram has a part every group reads (the TTFT buckets beside the
/// TTFT `_count`); a histogram read only for SLOs (E2E latency) needs all of its read parts.
fn required(base: &'static str, j: usize) -> bool {
    READ_NAMES[j].slo.is_none() || parts_of(base).all(|k| READ_NAMES[k].slo.is_some())
}

/// Checks a group's (non-stale) role keys against what [`READ_NAMES`] says vLLM registers
/// together. `Ok(())` for an empty set and for every set some vLLM release exposes; otherwise the
/// first problem found.
///
/// # Errors
/// The [`Incomplete`] reason, in this order: histogram structure (in table order: ITL, old ITL,
/// request TPOT), the token histogram's `le="1"` bucket without its `_count`, a series without its
/// partner, the series every release has, an ITL histogram under either name, spec-decode counters
/// apart.
pub(crate) fn check(keys: impl IntoIterator<Item = RoleKey>) -> Result<(), Incomplete> {
    const N: usize = READ_NAMES.len();
    let (mut present, mut inf, mut any) = ([false; N], [false; N], false);
    for key in keys {
        any = true;
        if let Some(i) = READ_NAMES.iter().position(|r| r.input == key.input) {
            present[i] = true;
            inf[i] |= key.bound() == f64::INFINITY;
        }
    }
    if !any {
        return Ok(());
    }
    let entries = || READ_NAMES.iter().enumerate();
    // A full classic histogram: buckets up to `+Inf`, `_sum` and `_count`.
    for (i, read) in entries().filter(|(_, r)| r.dim == Dim::Le) {
        let Some(base) = histogram_of(read) else {
            continue;
        };
        let some = parts_of(base).any(|j| present[j]);
        if some
            && !parts_of(base)
                .filter(|j| required(base, *j))
                .all(|j| present[j])
        {
            return Err(Incomplete::MissingHistogramPart(base));
        }
        if present[i] && !inf[i] {
            return Err(Incomplete::NoInfBucket(base));
        }
    }
    // The `le="1"` bucket may be absent (custom buckets from 0.33: `no_le_1_bound`), `_count` may not.
    for (i, read) in entries().filter(|(_, r)| r.dim == Dim::LeIsOne) {
        let Some(base) = histogram_of(read) else {
            continue;
        };
        if present[i] && !parts_of(base).all(|j| present[j] || READ_NAMES[j].dim == Dim::LeIsOne) {
            return Err(Incomplete::MissingHistogramPart(base));
        }
    }
    let alone = |(i, read): &(usize, &ReadName)| match read.registered {
        Registered::Beside(partner) => present[*i] && !parts_of(partner).any(|j| present[j]),
        _ => false,
    };
    if let Some((_, read)) = entries().find(alone) {
        return Err(Incomplete::WithoutPartner(read.name));
    }
    let is = |read: &ReadName, registered| read.registered == registered;
    if let Some((_, read)) = entries().find(|(i, r)| is(r, Registered::Always) && !present[*i]) {
        return Err(Incomplete::MissingCoreSeries(read.input));
    }
    let itl = || entries().filter(|(_, r)| is(r, Registered::Itl));
    if !itl().any(|(i, _)| present[i])
        && let Some((_, count)) = itl().find(|(_, r)| r.name.ends_with("_count"))
    {
        return Err(Incomplete::MissingCoreSeries(count.input));
    }
    let spec = || entries().filter(|(_, r)| is(r, Registered::SpecDecode));
    if spec().any(|(i, _)| present[i]) && !spec().all(|(i, _)| present[i]) {
        return Err(Incomplete::SpecDecodeCounterAlone);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
