//! Pass 1 of a write (the module doc of [`super`]): every series looked up by its key in the
//! series index, and a series the index does not hold classified and its group found, once.

use super::*;

impl Batch<'_> {
    /// Pass 1 (module doc).
    pub(super) fn look_up(
        &mut self,
        request: &mut WriteRequestRef<'_>,
        policy: &IngestPolicy<'_>,
        samples: &Cell<u64>,
    ) -> Result<Vec<Verdict>, RequestError> {
        let mut verdicts = Vec::with_capacity(request.series.len());
        for series in &request.series {
            let known = match series.labels.key() {
                Some(key) if series.histograms.is_empty() => self.known(key),
                _ => None,
            };
            verdicts.push(known.map_or(Verdict::Unused, Verdict::Known));
        }
        let (mut memo, mut scratch) = (NameMemo::default(), LabelScratch::default());
        for (i, verdict) in verdicts.iter_mut().enumerate() {
            if matches!(verdict, Verdict::Known(_)) {
                continue;
            }
            let before = request.series[i].sample_count();
            request.resolve(i, &mut scratch)?;
            samples.set(samples.get() + request.series[i].sample_count() - before);
            let bytes = request.series.len() * SERIES_BYTES
                + request.labels.capacity() * size_of::<Label<'static>>();
            if bytes > policy.max_decoded_bytes {
                return Err(RequestError::TooLargeInMemory {
                    series: request.series.len(),
                    bytes: policy.max_decoded_bytes,
                });
            }
            if let Err(error) = request.check_labels(i, policy.labels, &mut memo) {
                *verdict = Verdict::Refused(error);
                continue;
            }
            let series = &request.series[i];
            let labels = request.labels_of(series);
            *verdict = self.route_new(labels, !series.histograms.is_empty());
        }
        self.judge(request, &mut verdicts);
        Ok(verdicts)
    }

    /// What the index holds for `key`, its group held for the batch: `None` when it holds nothing
    /// (or only a dead entry of a removed group, forgotten here), and always for a batch that does
    /// not use the index.
    #[inline]
    pub(super) fn known(&mut self, key: SeriesKey) -> Option<Target> {
        if !self.indexed {
            return None;
        }
        let target = self.parts.index.get(key, self.now_ms)?;
        if let Target::Group {
            slot, generation, ..
        } = target
        {
            if !self.parts.table.live(slot, generation) {
                self.parts.index.remove(key);
                return None;
            }
            self.parts.table.hold(slot);
        }
        Some(target)
    }

    /// Classifies a series the index does not hold, by its normalised `labels`, and finds its
    /// group (holding it for the batch), once.
    pub(super) fn route_new(&mut self, labels: &[Label<'_>], histograms: bool) -> Verdict {
        let name = labels
            .iter()
            .find(|l| l.name == "__name__")
            .map_or("", |l| l.value);
        let role = if histograms {
            None
        } else {
            read_role(self.parts.config, name, labels)
        };
        if role.is_none() && !histograms {
            return Verdict::Unused;
        }
        let dropped = &self.parts.config.drop_labels;
        let group = self.parts.table.hash(labels, dropped);
        let slot = self.parts.table.find(group, labels, dropped);
        if let Some(slot) = slot {
            self.parts.table.hold(slot);
        }
        match role {
            Some(role) => Verdict::Input {
                role,
                group,
                slot,
                feeds: false,
            },
            None => Verdict::Histograms { group, slot },
        }
    }
}
