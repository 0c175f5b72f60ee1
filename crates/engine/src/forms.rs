//! Histograms the rules read that arrive only in a form they do not read (docs/PROMETHEUS.md,
//! "Forms the corrector does not read"): as a native histogram of an exponential schema (the receiver reads
//! classic histograms and native histograms with custom buckets, schema −53), or only as parts no
//! rule reads (the `_bucket` and `_sum` of a histogram whose `_count` a rule reads, kept by a
//! relabelling that drops the `_count`). Such a group is incomplete like one whose series are
//! split across correctors, but sharding is not the cause: the log, `/status`, the API and
//! `vllm_corrector_family_info` name the histogram and the form instead.
//!
//! Each group records, per read histogram, which of the two forms it received
//! ([`FormsSeen`], 8 bytes in its bookkeeping); what is shown is the histograms of that record
//! that lack a part a rule needs and, for unread parts, whose lack is the whole of the group's
//! incompleteness ([`unread`]). A series of an unread part is looked at when the
//! engine first meets it (it is then remembered as unused, like every series no rule reads); one
//! met before its group exists is not remembered until the group exists, so it is looked at again.
//! A native histogram is looked at on every sample (native histograms are never indexed).

use super::classify::{
    DEFAULT_METRIC_PREFIX, Dim, READ_NAMES, ReadName, Registered, RoleKey, histogram_of,
};
use super::completeness;

/// How a histogram the rules read arrives when it arrives in a form they do not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnreadForm {
    /// As a native histogram of an exponential schema (schema −4 to 8): counted as
    /// `native_histogram` and not used.
    ExponentialNativeHistogram,
    /// Only as parts no rule reads (`_bucket` and `_sum` without the `_count`, say): counted as
    /// `unused_series`.
    UnreadParts,
}

impl UnreadForm {
    /// The value of the `arrives_as` label and field: `native_histogram_exponential` or
    /// `unread_parts`.
    pub fn as_str(self) -> &'static str {
        match self {
            UnreadForm::ExponentialNativeHistogram => "native_histogram_exponential",
            UnreadForm::UnreadParts => "unread_parts",
        }
    }

    /// The form in words, and what to change, for the log and `/status`.
    pub fn words(self) -> &'static str {
        match self {
            UnreadForm::ExponentialNativeHistogram => {
                "arrives only as a native histogram of an exponential schema, which the corrector \
                 does not read: send it as a classic histogram, or as a native histogram with \
                 custom buckets (convert_classic_histograms_to_nhcb)"
            }
            UnreadForm::UnreadParts => {
                "arrives only as parts the corrector does not read: a relabelling drops the parts \
                 it reads (vllm-corrector relabel prints a rule that keeps them), or they go to \
                 another corrector"
            }
        }
    }
}

/// A histogram of a group that lacks a part a rule needs and arrives in a form the rules do not
/// read ([`crate::GroupSnapshot::unread`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UnreadHistogram {
    /// The histogram's name as vLLM exposes it (`vllm:time_to_first_token_seconds`).
    pub histogram: &'static str,
    /// How it arrives.
    pub form: UnreadForm,
}

/// Which read histograms a group received in each unread form: one bit per histogram, at the
/// index in [`READ_NAMES`] of its first part.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct FormsSeen {
    native: u32,
    parts: u32,
}

const _: () = assert!(READ_NAMES.len() <= 32, "one bit per READ_NAMES entry");

impl FormsSeen {
    /// Records that the histogram at bit `bit` arrived in `form`.
    pub(crate) fn record(&mut self, bit: u8, form: UnreadForm) {
        match form {
            UnreadForm::ExponentialNativeHistogram => self.native |= 1 << bit,
            UnreadForm::UnreadParts => self.parts |= 1 << bit,
        }
    }

    /// Whether any form was recorded.
    pub(crate) fn any(self) -> bool {
        self.native | self.parts != 0
    }
}

/// The bit of the read histogram named `base` (under [`DEFAULT_METRIC_PREFIX`]): the index of its
/// first part in [`READ_NAMES`].
fn bit_of(base: &str) -> Option<u8> {
    READ_NAMES
        .iter()
        .position(|r| histogram_of(r) == Some(base))
        .map(|i| i as u8)
}

/// The bit of the read histogram whose name, less vLLM's `vllm:`, is `rest`. No allocation: it
/// runs for every unused series the engine meets.
fn bit_of_rest(rest: &str) -> Option<u8> {
    READ_NAMES
        .iter()
        .position(|r| {
            histogram_of(r).and_then(|base| base.strip_prefix(DEFAULT_METRIC_PREFIX)) == Some(rest)
        })
        .map(|i| i as u8)
}

/// The bit of a read histogram whose native histogram series is named `name` (its base name,
/// under the input prefix `prefix`).
pub(crate) fn native_bit(name: &str, prefix: &str) -> Option<u8> {
    bit_of_rest(name.strip_prefix(prefix)?)
}

/// The bit of a read histogram of which `name` (under `prefix`), a series no rule reads, is a
/// part: `_bucket`, `_sum` or `_count`. The caller only asks about series classified unused.
pub(crate) fn unread_part_bit(name: &str, prefix: &str) -> Option<u8> {
    let rest = name.strip_prefix(prefix)?;
    let base = ["_bucket", "_sum", "_count"]
        .iter()
        .find_map(|suffix| rest.strip_suffix(suffix))?;
    bit_of_rest(base)
}

/// True for a part of a histogram that every group of a vLLM with that histogram has, which a
/// rule reads: not one read only for an SLO, not one only some layouts have (`le="1"`).
fn needed(read: &ReadName) -> bool {
    read.slo.is_none() && read.registered != Registered::Optional
}

/// The histograms of `seen` that lack a needed part among `keys` (a group's non-stale role
/// keys), each with the form it arrived in (an exponential native histogram first, when both).
/// Histograms seen only as unread parts are left out unless the set, with the parts they lack,
/// is one a vLLM exposes ([`completeness::check`]): otherwise something else is missing too, and
/// the split or the filter is the likelier cause. An exponential native histogram is always
/// named: no split makes one.
pub(crate) fn unread(
    seen: FormsSeen,
    keys: impl Iterator<Item = RoleKey> + Clone,
) -> Vec<UnreadHistogram> {
    let mut out = Vec::new();
    if !seen.any() {
        return out;
    }
    for (i, read) in READ_NAMES.iter().enumerate() {
        let Some(base) = histogram_of(read) else {
            continue;
        };
        if bit_of(base) != Some(i as u8) {
            continue;
        }
        let form = if seen.native & (1 << i) != 0 {
            UnreadForm::ExponentialNativeHistogram
        } else if seen.parts & (1 << i) != 0 {
            UnreadForm::UnreadParts
        } else {
            continue;
        };
        let lacks = READ_NAMES
            .iter()
            .filter(|r| histogram_of(r) == Some(base) && needed(r))
            .any(|r| !keys.clone().any(|k| k.input == r.input));
        if lacks {
            out.push(UnreadHistogram {
                histogram: base,
                form,
            });
        }
    }
    // Unread parts are the cause only when the set would be whole with the parts those
    // histograms lack: a target whose series are split across correctors also leaves a
    // histogram's unread parts at one of them, with other read series missing besides.
    if out.iter().any(|u| u.form == UnreadForm::UnreadParts) {
        let filled = out.iter().flat_map(|u| {
            READ_NAMES
                .iter()
                .filter(move |r| histogram_of(r) == Some(u.histogram) && needed(r))
                .map(|r| RoleKey {
                    input: r.input,
                    le_bits: if r.dim == Dim::Le {
                        f64::INFINITY.to_bits()
                    } else {
                        0
                    },
                })
        });
        if completeness::check(keys.chain(filled)).is_err() {
            out.retain(|u| u.form == UnreadForm::ExponentialNativeHistogram);
        }
    }
    out
}

#[cfg(test)]
mod tests;
