//! Native histograms in a write (docs/ENGINE.md, "The write path"): a custom-bucket native
//! histogram goes in as the classic series it stands for; a form the engine does not read is
//! recorded on its group, so the group's status can say how its input arrives.

use super::*;

impl Batch<'_> {
    /// One native histogram sample of a series with `labels` (decoded and normalised): its
    /// accounting, and `Ok(true)` when it was written in full, `Ok(false)` when not all of it
    /// was, or why it was refused.
    pub(super) fn apply_histogram(
        &mut self,
        labels: &[Label<'_>],
        histogram: &NativeHistogram,
        latest: i64,
    ) -> (IngestReport, Result<bool, Refusal>) {
        let mut report = IngestReport::default();
        let h = match histogram {
            NativeHistogram::OtherSchema { .. } => {
                report.reject(RejectReason::NativeHistogram, 1);
                self.record_form(labels, UnreadForm::ExponentialNativeHistogram);
                return (report, Ok(true));
            }
            NativeHistogram::Invalid(e) => {
                report.reject(RejectReason::InvalidNativeHistogram, 1);
                return (report, Err(Refusal::Histogram(*e)));
            }
            NativeHistogram::CustomBuckets(h) => h,
        };
        for (bad, reason) in [
            (h.timestamp_ms > latest, RejectReason::FutureTimestamp),
            (h.timestamp_ms <= 0, RejectReason::NonPositiveTimestamp),
        ] {
            if bad {
                report.reject(reason, histogram.sample_count());
                return (report, Err(reason.into()));
            }
        }
        let mut scratch = Vec::new();
        let mut limited = None;
        let converted =
            histogram::for_each_classic_series(labels, std::slice::from_ref(h), |labels, s| {
                let key = SeriesKey::of_labels(labels, &mut scratch);
                let refused = self.apply_labelled(Some(key), labels, s, &mut report);
                limited = limited.or(refused);
            });
        match converted {
            Ok(()) => {
                let written = accepted(&report) == report.received;
                match limited {
                    Some(reason) => (report, Err(reason.into())),
                    None => (report, Ok(written)),
                }
            }
            Err(e) => {
                report.reject(
                    RejectReason::InvalidNativeHistogram,
                    histogram.sample_count(),
                );
                (report, Err(Refusal::Histogram(e)))
            }
        }
    }

    /// For a series of `labels` (normalised) that no rule reads in this `form`, and that is a
    /// read histogram's native series or unread part (`crate::forms`): records the form in its
    /// group. False when it is such a series and its group does not exist yet (the caller does
    /// not remember it as unused, so it is looked at again), true otherwise. Costs a prefix test
    /// for most unused series, a group look-up for the few that are histogram parts.
    pub(super) fn record_form(&mut self, labels: &[Label<'_>], form: UnreadForm) -> bool {
        let name = labels
            .iter()
            .find(|l| l.name == "__name__")
            .map_or("", |l| l.value);
        let prefix = &self.parts.config.metric_prefix;
        let bit = match form {
            UnreadForm::ExponentialNativeHistogram => forms::native_bit(name, prefix),
            UnreadForm::UnreadParts => forms::unread_part_bit(name, prefix),
        };
        let Some(bit) = bit else {
            return true;
        };
        let dropped = &self.parts.config.drop_labels;
        let group = self.parts.table.hash(labels, dropped);
        let Some(slot) = self.parts.table.find(group, labels, dropped) else {
            return false;
        };
        self.parts.table.at_mut(slot).meta.forms.record(bit, form);
        true
    }
}
