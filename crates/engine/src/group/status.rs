//! What a group says of a family beyond served or withheld (docs/ENGINE.md, "What a family's
//! status says"): the input series it lacks, and whether it is served in a degraded mode. A child
//! of `group.rs`, reading the group's cached plans and roles.

use super::*;
use crate::classify::Input;

impl Group {
    /// The input series whose absence withholds `family` ([`WithheldReason::MissingInput`]), or
    /// degrades it ([`Group::degraded`]), named as vLLM exposes it. `None` otherwise.
    pub(crate) fn missing_input(&self, family: Family) -> Option<&'static str> {
        if self.degraded(family) {
            return Some(crate::rules::input_name(Input::AcceptedPerPos));
        }
        if self.slots[family.index()].output.is_some() {
            return None;
        }
        let unplanned = match &self.slots[family.index()].plan {
            Some(plan) => plan.as_ref().err().copied(),
            None => (family.spec().plan)(&self.learned()).err(),
        };
        unplanned
            .and_then(|u| u.missing)
            .map(crate::rules::input_name)
    }

    /// True when `family` is served in a degraded mode: the acceptance-corrected buckets of a
    /// group that runs speculative decoding (it sends the drafts or accepted-tokens counter) without
    /// a contiguous `vllm:spec_decode_num_accepted_tokens_per_pos_total`, so every output of an
    /// interval gets the one mean weight (up to 38 % off per docs/ACCURACY.md) instead of the
    /// per-position split. Without speculative decoding the mean weight is exact, and nothing is
    /// degraded.
    pub(crate) fn degraded(&self, family: Family) -> bool {
        let slot = &self.slots[family.index()];
        if !matches!(family.spec().evaluation, Evaluation::AcceptanceBuckets)
            || slot.output.is_none()
        {
            return false;
        }
        let per_position = match &slot.plan {
            Some(Ok(plan)) => !plan.0.series.is_empty(),
            _ => !crate::rules::per_pos(&self.learned()).is_empty(),
        };
        let speculative = self
            .roles
            .iter()
            .any(|r| !r.stale && matches!(r.key.input, Input::Accepted | Input::Drafts));
        speculative && !per_position
    }
}
