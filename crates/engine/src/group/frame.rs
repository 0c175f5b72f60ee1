//! A group's frames (its samples at one timestamp) and the role sets a plan reads, as lists and
//! as bit masks, so that "does this frame hold every input of that family" is one test.

/// The group's samples at one timestamp: `values[role]`, NaN where the role has no sample yet.
#[derive(Debug, Clone)]
pub(crate) struct Frame {
    pub(crate) ts: i64,
    pub(crate) values: Vec<f64>,
    /// Bit `r` set when `values[r]` holds a sample, for roles below [`MASK_ROLES`].
    pub(crate) present: RoleMask,
}

/// A set of role indices below [`MASK_ROLES`], one bit each.
pub(crate) type RoleMask = u128;

/// Roles that the masks cover. A group with more roles (never seen from vLLM: 51 series per engine,
/// 73 with both ITL names) falls back to scanning the values.
pub(crate) const MASK_ROLES: usize = RoleMask::BITS as usize;

/// The mask of `roles`, or `None` when one of them is beyond [`MASK_ROLES`].
fn mask_of(roles: &[usize]) -> Option<RoleMask> {
    roles
        .iter()
        .try_fold(0, |m, &r| (r < MASK_ROLES).then(|| m | (1 << r)))
}

impl Frame {
    pub(crate) fn new(ts: i64, roles: usize) -> Frame {
        Frame {
            ts,
            values: vec![f64::NAN; roles],
            present: 0,
        }
    }

    fn holds(&self, roles: &[usize]) -> bool {
        roles
            .iter()
            .all(|r| self.values.get(*r).is_some_and(|v| !v.is_nan()))
    }

    /// True when the frame holds a sample of every role of `plan`: one test when the plan's roles
    /// fit in a mask.
    pub(crate) fn holds_plan(&self, plan: &PlanRoles) -> bool {
        match plan.mask {
            Some(mask) => self.present & mask == mask,
            None => self.holds(&plan.roles),
        }
    }
}

/// The roles a plan reads, as a list and (when they fit) as a mask, and in the order of their
/// role keys (what the output hold compares, `crate::hold`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PlanRoles {
    pub(crate) roles: Vec<usize>,
    mask: Option<RoleMask>,
    /// `roles`, sorted by the role key of each.
    pub(crate) by_key: Vec<usize>,
}

impl PlanRoles {
    /// The roles `roles` of a plan, whose keys `key` gives.
    pub(crate) fn new<K: Ord>(roles: Vec<usize>, key: impl Fn(usize) -> K) -> PlanRoles {
        let mut by_key = roles.clone();
        by_key.sort_by_key(|r| key(*r));
        PlanRoles {
            mask: mask_of(&roles),
            roles,
            by_key,
        }
    }
}
