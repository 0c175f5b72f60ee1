//! Resolving what [`super::decode`] leaves pending, for the series the receiver does not know
//! (docs/REMOTE-WRITE.md, "The canonical `TimeSeries`, and the provisional key"): their labels
//! decoded, and a provisional series walked for its exact key, samples and histograms.

use super::*;

/// Resolving what [`super::decode`] leaves pending: the RW 1.0 side of [`SeriesLabels`].
impl WriteRequestRef<'_> {
    /// Decodes the pending labels of series `index` ([`SeriesLabels::Pending`] to
    /// [`SeriesLabels::Decoded`]) into the label arena, exactly as the protobuf message defines
    /// them (same labels, same order); a series whose key was provisional is walked first, so its
    /// key, samples, histograms and exemplars become exact. Nothing for labels already decoded or
    /// invalid, or an index out of range. `scratch` is reused between calls.
    ///
    /// # Errors
    /// [`ProtocolError::Protobuf`] for a malformed `Label`, a label that is not UTF-8, or (for a
    /// provisional key) any error of the walk; the labels then stay pending.
    pub fn resolve(
        &mut self,
        index: usize,
        scratch: &mut LabelScratch,
    ) -> Result<(), ProtocolError> {
        let Some(series) = self.series.get_mut(index) else {
            return Ok(());
        };
        let SeriesLabels::Pending(pending) = series.labels else {
            return Ok(());
        };
        // One walk: a provisional series is walked once for its samples and its label spans
        // together; a walked one whose labels lead reads only their bytes again.
        let message = pending.message;
        let spans = &mut scratch.spans;
        spans.clear();
        let key = if pending.provisional {
            series.samples.clear();
            series.histograms.clear();
            series.exemplars = 0;
            let run_end = walk_series(message, Some(spans), Some(series))?;
            run_end.map(|end| SeriesKey::of(&message[..end]))
        } else {
            let labels = match pending.labels_end as usize {
                0 => message,
                end => &message[..end],
            };
            walk_series(labels, Some(spans), None)?;
            pending.key
        };
        let start = self.labels.len();
        if let Err(e) = labels_of(message, &scratch.spans, &mut self.labels) {
            self.labels.truncate(start);
            return Err(e);
        }
        let range = LabelRange::since(start, &self.labels)?;
        let key =
            key.unwrap_or_else(|| SeriesKey::of_labels(&self.labels[start..], &mut scratch.text));
        series.labels = SeriesLabels::Decoded { range, key };
        Ok(())
    }

    /// Resolves every series' labels ([`WriteRequestRef::resolve`]): afterwards the request is
    /// what a decoder that decodes everything would give. For tools, tests and fuzzing; the
    /// receiver resolves only the series it does not know.
    ///
    /// # Errors
    /// The error of the first series, in wire order, that does not resolve.
    pub fn resolve_all(&mut self) -> Result<(), ProtocolError> {
        let mut scratch = LabelScratch::default();
        (0..self.series.len()).try_for_each(|i| self.resolve(i, &mut scratch))
    }

    /// Walks every series whose key is still provisional (`PendingLabels::provisional`), leaving
    /// its labels pending: afterwards every series' samples, histograms and exemplars are exact.
    /// For a request refused whole before its labels are decoded, so that its samples are counted
    /// as [`WriteRequestRef::resolve_all`] would count them.
    ///
    /// # Errors
    /// The [`ProtocolError::Protobuf`] of the first such series, in wire order, whose framing,
    /// sample or histogram does not decode.
    pub fn walk_provisional(&mut self) -> Result<(), ProtocolError> {
        for series in &mut self.series {
            if let SeriesLabels::Pending(pending) = &mut series.labels
                && pending.provisional
            {
                let message = pending.message;
                series.samples.clear();
                series.histograms.clear();
                series.exemplars = 0;
                let run_end = walk_series(message, None, Some(series))?;
                series.labels = SeriesLabels::Pending(pending_after_walk(message, run_end));
            }
        }
        Ok(())
    }
}
