//! The SLOs the engine counts, with the group matcher of each (the service compiles the
//! regexes of `match:`; the engine has no regex engine).

use std::fmt;
use std::sync::Arc;

use super::{Sli, Slo, SloSpec};

/// Whether an SLO covers a group, by its labels (sorted by name): `match:` compiled by the
/// caller (fully anchored regexes per label; a missing label matches as "").
pub type GroupMatcher = Arc<dyn Fn(&[(String, String)]) -> bool + Send + Sync>;

/// One SLO and its matcher (`None`: every group).
struct Entry {
    slo: Slo,
    matcher: Option<GroupMatcher>,
}

/// The SLOs the engine counts (`EngineConfig::slos`), in file order; cheap to clone (one `Arc`).
/// Equal when their SLOs are: a matcher is a function of its SLO's `match:`.
#[derive(Clone, Default)]
pub struct SloSet(Arc<[Entry]>);

impl SloSet {
    /// The SLOs of `spec`, each with the matcher `matcher` gives for it (`None`: every group;
    /// an SLO without `match:` needs none).
    pub fn new(spec: &SloSpec, mut matcher: impl FnMut(&Slo) -> Option<GroupMatcher>) -> SloSet {
        SloSet(
            spec.slos
                .iter()
                .map(|slo| Entry {
                    matcher: matcher(slo),
                    slo: slo.clone(),
                })
                .collect(),
        )
    }

    /// No SLO: the SLO family is withheld for every group (`no_slo`).
    pub fn empty() -> SloSet {
        SloSet::default()
    }

    /// True when no SLO is counted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Bytes the SLO counters may hold per group, charged to every group by the memory
    /// accounting (docs/RELIABILITY.md, "The memory budget"): per SLO its plan, rows, notes,
    /// state, output and holds, 2.7 KiB with a 40-byte name measured
    /// (`cargo run --release --example state_bytes slos 100 32`), so 3 KiB plus 16 bytes a byte
    /// of its name. An upper bound whether or not the SLO covers the group.
    pub(crate) fn bytes_per_group(&self) -> usize {
        self.0.iter().map(|e| 3072 + 16 * e.slo.name.len()).sum()
    }

    /// True when some SLO has a threshold for `sli`: its inputs are read.
    pub(crate) fn reads(&self, sli: Sli) -> bool {
        self.0.iter().any(|e| e.slo.target(sli).is_some())
    }

    /// Whether the SLO named `slo` covers the group of `labels` (its `match:` holds, or it has
    /// none); false for a name the set does not have. For tools that total other readings (vLLM's
    /// raw buckets, the simulator's requests) over the groups the SLO counts.
    pub fn covers(&self, slo: &str, labels: &[(String, String)]) -> bool {
        self.0
            .iter()
            .find(|e| e.slo.name == slo)
            .is_some_and(|e| e.matcher.as_ref().is_none_or(|m| m(labels)))
    }

    /// The SLOs covering the group of `labels` as bits by their index in file order (a spec holds
    /// at most [`super::MAX_SLOS`], 64; any past the 64th are not counted here).
    pub(crate) fn covering_mask(&self, labels: &[(String, String)]) -> u64 {
        self.0
            .iter()
            .take(64)
            .enumerate()
            .filter(|(_, e)| e.matcher.as_ref().is_none_or(|m| m(labels)))
            .fold(0, |mask, (i, _)| mask | 1 << i)
    }

    /// The SLOs' names, in file order.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|e| e.slo.name.as_str())
    }

    /// The SLOs covering the group of `labels`, in file order.
    pub(crate) fn covering<'s>(
        &'s self,
        labels: &'s [(String, String)],
    ) -> impl Iterator<Item = &'s Slo> + 's {
        self.0
            .iter()
            .filter(|e| e.matcher.as_ref().is_none_or(|m| m(labels)))
            .map(|e| &e.slo)
    }
}

impl PartialEq for SloSet {
    fn eq(&self, other: &SloSet) -> bool {
        self.0.len() == other.0.len()
            && self
                .0
                .iter()
                .zip(other.0.iter())
                .all(|(a, b)| a.slo == b.slo)
    }
}

impl fmt::Debug for SloSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|e| &e.slo.name))
            .finish()
    }
}
