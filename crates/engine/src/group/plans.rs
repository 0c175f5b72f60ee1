//! A group's plans (docs/ENGINE.md, "Rules"): which series each family reads, decided from the
//! roles the group has learned and what else a plan depends on (the group's labels, the SLOs
//! covering it, the roles that lapsed), cached until one of them changes.

use super::*;

pub(super) fn learned(roles: &[Role]) -> Vec<(RoleKey, usize)> {
    roles
        .iter()
        .enumerate()
        .filter(|(_, r)| !r.stale)
        .map(|(i, r)| (r.key, i))
        .collect()
}

/// No SLO: whether roles can feed a family is judged by the corrections alone (the SLO counters
/// read nothing a correction does not read but their SLOs' own buckets).
static NO_SLOS: std::sync::LazyLock<SloSet> = std::sync::LazyLock::new(SloSet::empty);

/// True when the roles of `learned` (each with its position) plan at least one family, without
/// regard to which SLOs cover the group.
pub(crate) fn plans_a_family(learned: &[(RoleKey, usize)]) -> bool {
    let context = PlanContext::new(&[], &NO_SLOS);
    Family::ALL
        .iter()
        .any(|f| (f.spec().plan)(learned, &context).is_ok())
}

/// The cached plan of `family`, decided from the learned roles when the role set changed.
pub(super) fn plan_of<'s>(
    slots: &'s mut [Slot; FAMILIES],
    roles: &[Role],
    context: &PlanContext<'_>,
    family: Family,
) -> Result<&'s (Plan, PlanRoles), Unplanned> {
    let slot = &mut slots[family.index()];
    let plan = slot.plan.get_or_insert_with(|| {
        let lapsed: Vec<RoleKey> = roles.iter().filter(|r| r.stale).map(|r| r.key).collect();
        let context = PlanContext {
            lapsed: &lapsed,
            ..*context
        };
        (family.spec().plan)(&learned(roles), &context).map(|p| {
            let plan_roles = PlanRoles::new(p.roles(), |r| roles[r].key);
            Box::new((p, plan_roles))
        })
    });
    match plan {
        Ok(p) => Ok(p),
        Err(e) => Err(*e),
    }
}

impl Group {
    /// What the group's plans depend on besides its roles.
    pub(super) fn plan_context(&self) -> PlanContext<'_> {
        PlanContext::new(&self.labels, &self.slos)
    }

    /// Counts the SLOs of `slos` that cover the group from now on; a change re-plans every
    /// family (the SLO family's state restarts when its layout changes), and the SLO rows leave
    /// `/metrics` when no SLO covers the group any more (`no_slo`), as a group new since the
    /// change would show.
    pub(crate) fn set_slos(&mut self, slos: &SloSet) {
        if self.slos != *slos {
            self.slos = slos.clone();
            self.slo_mask = slos.covering_mask(&self.labels);
            self.replan();
        }
    }

    pub(super) fn invalidate_plans(&mut self) {
        for slot in &mut self.slots {
            slot.plan = None;
            if let Some(accumulator) = &mut slot.accumulator {
                accumulator.plan_changed();
            }
        }
        self.readers = None;
        self.structurally_incomplete = std::cell::OnceCell::new();
    }

    /// The families whose plan reads `role` ([`Group::readers`]), planning every family once per
    /// role set.
    pub(super) fn readers_of(&mut self, role: usize) -> u32 {
        if self.readers.is_none() {
            let mut readers = vec![0u32; self.roles.len()];
            for family in Family::ALL {
                if let Ok((_, roles)) = plan_of(
                    &mut self.slots,
                    &self.roles,
                    &PlanContext::new(&self.labels, &self.slos),
                    family,
                ) {
                    for r in &roles.roles {
                        readers[*r] |= 1 << family.index();
                    }
                }
            }
            self.readers = Some(readers);
        }
        self.readers
            .as_ref()
            .and_then(|r| r.get(role).copied())
            .unwrap_or(0)
    }

    pub(super) fn learned(&self) -> Vec<(RoleKey, usize)> {
        learned(&self.roles)
    }

    pub(super) fn plan(&mut self, family: Family) -> Result<&(Plan, PlanRoles), Unplanned> {
        plan_of(
            &mut self.slots,
            &self.roles,
            &PlanContext::new(&self.labels, &self.slos),
            family,
        )
    }

    /// Re-plans every family after what the plans depend on changed (a role went stale, the
    /// SLOs changed): a family that no longer plans leaves `/metrics`.
    pub(super) fn replan(&mut self) {
        self.invalidate_plans();
        for family in Family::ALL {
            if self.plan(family).is_err() {
                let slot = &mut self.slots[family.index()];
                slot.output = None;
                slot.output_ts = None;
            }
        }
    }
}
