//! One scrape of vLLM-shaped series as engine input, for the benchmarks (`#[path]`-included).

#![allow(dead_code)]

use engine::{Engine, IngestReport};
use protocol::{Label, Sample, normalize_labels};

use super::vllm_shape::{Payloads, SeriesTemplate, compress};

pub(crate) const T0_MS: i64 = 1_700_000_000_000;
pub(crate) const STEP_MS: i64 = 15_000;

fn labels_of(t: &SeriesTemplate) -> Vec<Label<'_>> {
    let mut labels: Vec<Label<'_>> = t
        .labels
        .iter()
        .map(|(n, v)| Label { name: n, value: v })
        .collect();
    normalize_labels(&mut labels).expect("templates are valid");
    labels
}

/// One scrape's worth of engine input for `templates`: labels and a one-sample vector each.
pub(crate) struct Scrape<'t> {
    /// Normalised labels, the one-sample vector, and the template.
    pub series: Vec<(Vec<Label<'t>>, [Sample; 1], &'t SeriesTemplate)>,
}

impl<'t> Scrape<'t> {
    /// Engine input for every template (samples unset until [`Scrape::at`]).
    pub(crate) fn new(templates: &'t [SeriesTemplate]) -> Self {
        Scrape {
            series: templates
                .iter()
                .map(|t| {
                    (
                        labels_of(t),
                        [Sample {
                            value: 0.0,
                            timestamp_ms: 0,
                        }],
                        t,
                    )
                })
                .collect(),
        }
    }

    /// Sets every sample to scrape `k` (timestamp and cumulative value).
    pub(crate) fn at(&mut self, k: u64) {
        for (_, sample, t) in &mut self.series {
            sample[0] = Sample {
                value: t.value_at(k),
                timestamp_ms: T0_MS + k as i64 * STEP_MS,
            };
        }
    }

    /// Feeds every series to `engine`.
    pub(crate) fn ingest(&self, engine: &mut Engine, report: &mut IngestReport) {
        for (labels, samples, _) in &self.series {
            engine.ingest(labels, samples, 0, report);
        }
    }

    /// Samples per scrape (one per series).
    pub(crate) fn samples(&self) -> u64 {
        self.series.len() as u64
    }
}

/// The first full 500-sample request of scrape 1 of `pods` pods × 2 engines, as `(snappy body, raw body)`.
pub(crate) fn one_request(pods: usize) -> (Vec<u8>, Vec<u8>) {
    let payloads = Payloads::new(pods, 2, 4, T0_MS, STEP_MS);
    let mut first = None;
    payloads.for_each_request(1, 1, |raw, _| {
        if first.is_none() {
            first = Some(raw.to_vec());
        }
    });
    let raw = first.expect("at least one request");
    (compress(&raw), raw)
}
