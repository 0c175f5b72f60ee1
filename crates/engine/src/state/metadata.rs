//! The metadata cache: the type, help and unit last received for each metric family a rule reads
//! (docs/REMOTE-WRITE.md, checklist item 5). Metadata never fails a request.

use hashbrown::HashMap;

use crate::classify::is_read_family;
use protocol::{MetadataRef, MetricType};

/// A cached entry.
#[derive(Debug, Clone, PartialEq)]
struct Metadata {
    metric_type: MetricType,
    help: String,
    unit: String,
}

/// Metadata by family name, for the families rules read only ([`is_read_family`]: a few dozen
/// names), so the cache stays bounded whatever senders send.
#[derive(Debug, Default)]
pub(crate) struct MetadataCache {
    entries: HashMap<String, Metadata>,
}

impl MetadataCache {
    /// Keeps `metadata` when its family is read by a rule (last one wins); allocates only when an
    /// entry is new or changed.
    pub(crate) fn record(&mut self, metadata: &MetadataRef<'_>) {
        if !is_read_family(metadata.family_name) {
            return;
        }
        let same = |e: &Metadata| {
            e.metric_type == metadata.metric_type
                && e.help == metadata.help
                && e.unit == metadata.unit
        };
        let entry = || Metadata {
            metric_type: metadata.metric_type,
            help: metadata.help.to_owned(),
            unit: metadata.unit.to_owned(),
        };
        match self.entries.get_mut(metadata.family_name) {
            Some(existing) if same(existing) => {}
            Some(existing) => *existing = entry(),
            None => {
                self.entries
                    .insert(metadata.family_name.to_owned(), entry());
            }
        }
    }

    /// Families cached.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}
