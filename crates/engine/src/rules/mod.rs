//! The correction rules as data (`docs/ENGINE.md`, "The rule registry"): one file per rule, one
//! [`REGISTRY`] that every part of the product iterates.
//!
//! A rule has a [`Spec`] (the corrected family's name, help, type, and how the clients show it),
//! decides a [`Plan`] from the roles a group has learned (which of its series it reads), and
//! evaluates a complete frame. A stateful rule also gives [`Stateful`] hooks: its state, how it is
//! seeded for a bucket layout, and how one frame advances it; the group replays and commits frames
//! through those hooks alone (`super::group`). Semantics: `docs/METRICS.md`, "The corrected
//! families".

mod acceptance;
mod acceptance_corrected_itl;
mod canonical_tpot;
mod iteration_tokens_local_compute;
mod rule;
mod token_weighted_itl;
mod tokens_per_output;

pub(crate) use acceptance::Committed;
#[cfg(test)]
pub(crate) use acceptance::ItlPoint;
#[cfg(test)]
pub(crate) use acceptance::{
    ESTIMATOR, Estimator, acceptance_interval, acceptance_interval_with, interpolate,
    interpolate_from,
};
#[cfg(test)]
pub(crate) use rule::HistRoles;
pub use rule::{Measured, P99Row, RawMean, Spec, Unit};
pub(crate) use rule::{Plan, Registered, Stateful};

/// Every rule, in exposition order. A family's [`crate::Family`] is its index here.
/// Adding a family is one file under `crates/engine/src/rules/` and one line here (`docs/ENGINE.md`,
/// "Adding a family").
pub(crate) const REGISTRY: &[Registered] = &[
    canonical_tpot::RULE,
    token_weighted_itl::RULE,
    acceptance_corrected_itl::RULE,
    iteration_tokens_local_compute::RULE,
    tokens_per_output::RULE,
];

/// Number of corrected families: the length of per-family arrays.
pub const FAMILIES: usize = REGISTRY.len();

// At most one stateful rule: the state document (`--storage.path`, format version 1) and the
// retired states hold one state per group. A second one needs a new format version.
const _: () = {
    let (mut i, mut stateful) = (0, 0);
    while i < REGISTRY.len() {
        if REGISTRY[i].stateful.is_some() {
            stateful += 1;
        }
        i += 1;
    }
    assert!(stateful <= 1, "at most one stateful rule (state format 1)");
    assert!(REGISTRY.len() < 64, "a family index fits in a u8");
};

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;
