//! The metadata cache: the type, help and unit last received for each metric family a rule reads
//! (docs/REMOTE-WRITE.md, checklist item 5). Metadata never fails a request.
//!
//! Bounded by a constant: at most the read families' names (a few dozen), each with a help of at
//! most [`MAX_METADATA_HELP_BYTES`] and a unit of at most [`MAX_METADATA_UNIT_BYTES`]; an entry
//! past either is dropped and counted as `too_long` (docs/RELIABILITY.md, "The memory budget").

use hashbrown::HashMap;

use crate::classify::is_read_family;
use protocol::{
    MAX_METADATA_HELP_BYTES, MAX_METADATA_UNIT_BYTES, MetadataDropReason, MetadataRef, MetricType,
};

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
    /// entry is new or changed. Other families' metadata is ignored (`Ok`).
    ///
    /// # Errors
    /// [`MetadataDropReason::TooLong`] for a read family's entry whose help or unit is past its
    /// cap: it is not kept (the entry cached before stays).
    pub(crate) fn record(
        &mut self,
        metadata: &MetadataRef<'_>,
        prefix: &str,
    ) -> Result<(), MetadataDropReason> {
        if !is_read_family(metadata.family_name, prefix) {
            return Ok(());
        }
        if metadata.help.len() > MAX_METADATA_HELP_BYTES
            || metadata.unit.len() > MAX_METADATA_UNIT_BYTES
        {
            return Err(MetadataDropReason::TooLong);
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
        Ok(())
    }

    /// Heap bytes the entries hold (names, help and unit texts; the table's own slots aside).
    pub(crate) fn text_bytes(&self) -> usize {
        self.entries
            .iter()
            .map(|(name, e)| name.len() + e.help.len() + e.unit.len())
            .sum()
    }

    /// Families cached.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests;
