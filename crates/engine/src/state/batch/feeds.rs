//! Whether the groups a request's new series join can feed a family, judged with the whole
//! request (docs/RELIABILITY.md, "A cardinality flood"): a complete vLLM engine sent in one
//! request feeds families from its first series on, so making room treats every one of its
//! series as a real engine's, while a lone series of a flood is one that cannot
//! (`crate::state::room`). A child of `batch.rs`.

use hashbrown::HashMap;

use super::{Batch, Verdict, read_role};
use crate::classify::RoleKey;
use protocol::histogram::{self, NativeHistogram};
use protocol::{Label, WriteRequestRef};

impl Batch<'_> {
    /// The last step of pass 1: for every group a new series of the request joins that does not
    /// feed a family yet, whether it would with all the request's series (its float series and
    /// the classic series its native histograms stand for) besides those it holds. Sets the
    /// `feeds` of each [`Verdict::Input`] and lists the groups found able in `self.feeding` (for
    /// the classic series of native histograms, applied by labels).
    pub(super) fn judge(&mut self, request: &WriteRequestRef<'_>, verdicts: &mut [Verdict]) {
        let table = &*self.parts.table;
        let feeding_now = |slot: Option<u32>| slot.is_some_and(|s| !table.at(s).lone());
        let mut groups: HashMap<(u64, usize), (Option<u32>, Vec<RoleKey>)> = HashMap::new();
        for (i, verdict) in verdicts.iter_mut().enumerate() {
            match *verdict {
                Verdict::Input {
                    role,
                    group,
                    slot,
                    ref mut feeds,
                } => {
                    if feeding_now(slot) {
                        *feeds = true;
                        continue;
                    }
                    let entry = groups.entry(group).or_default();
                    entry.0 = entry.0.or(slot);
                    entry.1.push(role);
                }
                Verdict::Histograms { group, slot } if !feeding_now(slot) => {
                    let series = &request.series[i];
                    let labels = request.labels_of(series);
                    let entry = groups.entry(group).or_default();
                    entry.0 = entry.0.or(slot);
                    for h in &series.histograms {
                        if let NativeHistogram::CustomBuckets(h) = h {
                            self.classic_roles(labels, h, &mut entry.1);
                        }
                    }
                }
                _ => {}
            }
        }
        if groups.is_empty() {
            return;
        }
        for (group, (slot, roles)) in &mut groups {
            roles.sort_unstable();
            roles.dedup();
            if self.could_feed(*slot, roles) {
                self.feeding.push(*group);
            }
        }
        for verdict in verdicts {
            if let Verdict::Input { group, feeds, .. } = verdict
                && !*feeds
            {
                *feeds = self.feeding.contains(group);
            }
        }
    }

    /// Pushes onto `roles` the role of every classic series the custom-buckets native histogram
    /// `h` of a series with `labels` stands for, that a rule reads.
    fn classic_roles(
        &self,
        labels: &[Label<'_>],
        h: &protocol::CustomBuckets,
        roles: &mut Vec<RoleKey>,
    ) {
        let config = self.parts.config;
        let _ = histogram::for_each_classic_series(labels, std::slice::from_ref(h), |l, _| {
            let name = l
                .iter()
                .find(|l| l.name == "__name__")
                .map_or("", |l| l.value);
            roles.extend(read_role(config, name, l));
        });
    }

    /// Whether the group in `slot` (a new group when `None`) would plan a family with the
    /// series of `roles` (sorted, distinct) besides its own.
    pub(super) fn could_feed(&self, slot: Option<u32>, roles: &[RoleKey]) -> bool {
        match slot {
            Some(slot) => {
                let entry = self.parts.table.at(slot);
                !entry.lone() || entry.group.could_feed(roles)
            }
            None => {
                let learned: Vec<(RoleKey, usize)> =
                    roles.iter().enumerate().map(|(i, r)| (*r, i)).collect();
                crate::group::plans_a_family(&learned)
            }
        }
    }
}
