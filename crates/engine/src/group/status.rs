//! What a group says of a family beyond served or withheld (docs/ENGINE.md, "What a family's
//! status says"): the input series it lacks, and whether it is served in a degraded mode. A child
//! of `group.rs`, reading the group's cached plans and roles.

use super::*;
use crate::classify::Input;

impl Group {
    /// The input series whose absence withholds `family` ([`WithheldReason::MissingInput`]), or
    /// degrades it ([`Group::degraded`]), named as vLLM exposes it. `None` otherwise.
    pub(crate) fn missing_input(&self, family: Family) -> Option<&'static str> {
        if let Some(input) = self.degrading_input(family) {
            return Some(crate::rules::input_name(input));
        }
        if self.slots[family.index()].output.is_some() {
            return None;
        }
        let unplanned = match &self.slots[family.index()].plan {
            Some(plan) => plan.as_ref().err().copied(),
            None => (family.spec().plan)(&self.learned(), &self.plan_context()).err(),
        };
        unplanned
            .and_then(|u| u.missing)
            .map(crate::rules::input_name)
    }

    /// True when `family` is served in a degraded mode, as its rule says
    /// ([`crate::rules::Spec::degrades`]: for the acceptance-corrected buckets, speculative decoding
    /// without the accepted-tokens-per-position counter).
    pub(crate) fn degraded(&self, family: Family) -> bool {
        self.degrading_input(family).is_some()
    }

    /// The input whose absence degrades `family` while it is served.
    fn degrading_input(&self, family: Family) -> Option<Input> {
        let degrades = family.spec().degrades?;
        let slot = &self.slots[family.index()];
        slot.output.as_ref()?;
        let learned = self.learned();
        match &slot.plan {
            Some(Ok(plan)) => degrades(&plan.0, &learned),
            _ => (family.spec().plan)(&learned, &self.plan_context())
                .ok()
                .and_then(|plan| degrades(&plan, &learned)),
        }
    }

    /// The group's non-stale role keys, in no particular order.
    pub(crate) fn live_keys(&self) -> impl Iterator<Item = crate::classify::RoleKey> + Clone + '_ {
        self.roles.iter().filter(|r| !r.stale).map(|r| r.key)
    }

    /// The vLLM releases the group's series set looks like ([`crate::version::looks_like`]);
    /// `None` while the group is incomplete, as no release exposes its set.
    pub(crate) fn looks_like(&self) -> Option<&'static str> {
        if self.incomplete() {
            return None;
        }
        crate::version::looks_like(self.live_keys())
    }

    /// Why SLIs of the SLOs covering the group are not counted (the notes of the families'
    /// plans, [`crate::slo::SliNote`]); `None` when there is none.
    pub(crate) fn slo_notes(&self) -> Option<std::sync::Arc<[crate::slo::SliNote]>> {
        let mut learned = None;
        Family::ALL.into_iter().find_map(|family| {
            let notes = match &self.slots[family.index()].plan {
                Some(Ok(plan)) => plan.0.notes().cloned(),
                Some(Err(_)) => None,
                None => (family.spec().plan)(
                    learned.get_or_insert_with(|| self.learned()),
                    &self.plan_context(),
                )
                .ok()
                .and_then(|p| p.notes().cloned()),
            };
            notes.filter(|n| !n.is_empty())
        })
    }
}
