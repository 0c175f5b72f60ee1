//! The observation points: how one output batch updates vLLM's series.
//!
//! Every update of one step happens in `MetricsRegistry::record_step`, the equivalent of
//! vLLM's one synchronous `record(scheduler_stats, iteration_stats, engine_idx)` call per output
//! batch (`vllm/v1/metrics/loggers.py`, `stats.py`).

use super::engine::{Request, StepReport};
use super::families::FAM_COUNT;
pub(crate) use super::families::{ChildOrder, Fam, FamilySpec, ITL_BOUNDS, Kind, families};
use super::model::{ItlObservation, SimConfig};
/// A `prometheus_client` histogram child: per-bucket (non-cumulative) counts, the last one
/// being `+Inf`, and the float sum in observation order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Hist {
    /// Counts per bucket, `bounds.len() + 1` entries.
    pub(crate) counts: Vec<u64>,
    /// Σ observed values.
    pub(crate) sum: f64,
}

impl Hist {
    fn observe(&mut self, bounds: &[f64], v: f64) {
        let i = bounds.iter().position(|b| v <= *b).unwrap_or(bounds.len());
        self.counts[i] += 1;
        self.sum += v;
    }

    /// Total observations (`_count`).
    #[cfg(test)]
    pub(crate) fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// The value of one child series.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    /// A counter or gauge.
    Scalar(f64),
    /// A histogram.
    Hist(Hist),
}

/// All values of the simulator, per engine: `values[engine][family][child]`.
#[derive(Debug, Clone)]
pub(crate) struct MetricsRegistry {
    /// Families in registration order.
    pub(crate) specs: Vec<FamilySpec>,
    slot: [Option<usize>; FAM_COUNT],
    /// `(model_name, engine)` label values per global engine index.
    pub(crate) engine_labels: Vec<(String, String)>,
    /// `values[engine][family position][child]`.
    pub(crate) values: Vec<Vec<Vec<Value>>>,
    local_only_iteration: bool,
    itl_observation: ItlObservation,
}

impl MetricsRegistry {
    /// Every family of `cfg.profile`, with one zeroed child per engine and label value (vLLM
    /// creates them all at start-up, so they are exposed before any request).
    pub(crate) fn new(cfg: &SimConfig) -> Self {
        let specs = families(
            cfg.profile,
            cfg.max_model_len,
            cfg.spec.map(|s| s.num_speculative_tokens),
            &cfg.bucket_overrides,
        );
        let mut slot = [None; FAM_COUNT];
        for (i, s) in specs.iter().enumerate() {
            slot[s.fam as usize] = Some(i);
        }
        let mut engine_labels = Vec::new();
        for m in &cfg.models {
            for e in 0..cfg.engines_per_model {
                engine_labels.push((m.clone(), e.to_string()));
            }
        }
        let zero = |s: &FamilySpec| {
            let n = match &s.children {
                ChildOrder::Single => 1,
                ChildOrder::ValueMajor(_, v) | ChildOrder::EngineMajor(_, v) => v.len(),
            };
            let v = match s.kind {
                Kind::Histogram => Value::Hist(Hist {
                    counts: vec![0; s.bounds.len() + 1],
                    sum: 0.0,
                }),
                _ => Value::Scalar(0.0),
            };
            vec![v; n]
        };
        let per_engine: Vec<Vec<Value>> = specs.iter().map(zero).collect();
        MetricsRegistry {
            values: vec![per_engine; engine_labels.len()],
            specs,
            slot,
            engine_labels,
            local_only_iteration: cfg.profile.iteration_tokens_local_only(),
            itl_observation: cfg.itl_observation,
        }
    }

    /// True when the profile exposes `fam`.
    #[cfg(test)]
    pub(crate) fn has(&self, fam: Fam) -> bool {
        self.slot[fam as usize].is_some()
    }

    fn child(&mut self, e: usize, fam: Fam, child: usize) -> Option<(&mut Value, &[f64])> {
        let i = self.slot[fam as usize]?;
        let bounds = &self.specs[i].bounds;
        self.values[e][i]
            .get_mut(child)
            .map(|v| (v, bounds.as_slice()))
    }

    fn inc(&mut self, e: usize, fam: Fam, child: usize, by: f64) {
        if let Some((Value::Scalar(x), _)) = self.child(e, fam, child) {
            *x += by;
        }
    }

    fn set(&mut self, e: usize, fam: Fam, v: f64) {
        if let Some((Value::Scalar(x), _)) = self.child(e, fam, 0) {
            *x = v;
        }
    }

    fn observe(&mut self, e: usize, fam: Fam, v: f64) {
        if let Some((Value::Hist(h), bounds)) = self.child(e, fam, 0) {
            h.observe(bounds, v);
        }
    }

    /// Reads a counter or gauge child (tests). `child` indexes the extra label.
    #[cfg(test)]
    pub(crate) fn scalar(&self, engine: usize, fam: Fam, child: usize) -> Option<f64> {
        match self.values[engine][self.slot[fam as usize]?].get(child)? {
            Value::Scalar(x) => Some(*x),
            Value::Hist(_) => None,
        }
    }

    /// Reads a histogram (tests and the demo).
    #[cfg(test)]
    pub(crate) fn hist(&self, engine: usize, fam: Fam) -> Option<&Hist> {
        match &self.values[engine][self.slot[fam as usize]?][0] {
            Value::Hist(h) => Some(h),
            Value::Scalar(_) => None,
        }
    }

    /// Applies one step's output batch: vLLM's `record()` for that engine.
    /// `finished` are the requests that finished in the batch, in batch order.
    pub(crate) fn record_step(&mut self, rep: &StepReport, finished: &[Request], reasons: &[&str]) {
        let e = rep.engine;
        // Scheduler stats.
        self.set(e, Fam::Running, rep.running as f64);
        self.set(e, Fam::Waiting, rep.waiting as f64);
        self.set(e, Fam::GpuCacheUsage, rep.kv_usage);
        self.set(e, Fam::KvCacheUsage, rep.kv_usage);
        for fam in [Fam::GpuPrefixQueries, Fam::PrefixQueries] {
            self.inc(e, fam, 0, rep.prefix_queries as f64);
        }
        for fam in [Fam::GpuPrefixHits, Fam::PrefixHits] {
            self.inc(e, fam, 0, rep.prefix_hits as f64);
        }
        self.inc(
            e,
            Fam::ExternalPrefixQueries,
            0,
            rep.external_queries as f64,
        );
        self.inc(e, Fam::ExternalPrefixHits, 0, rep.external_hits as f64);
        // vLLM 0.34 credits prefix hits to `device` and a connector's hits to the tier it
        // reports; the simulated connector reports none, so `external_unspecified`.
        self.inc(
            e,
            Fam::PromptTokensCachedBySource,
            0,
            rep.prefix_hits as f64,
        );
        self.inc(
            e,
            Fam::PromptTokensCachedBySource,
            4,
            rep.external_hits as f64,
        );
        // Spec-decode stats travel in the scheduler stats of the same batch; vLLM only sends
        // them when some request had drafts.
        if rep.drafts > 0 {
            self.inc(e, Fam::SpecDrafts, 0, rep.drafts as f64);
            self.inc(e, Fam::SpecDraftTokens, 0, rep.draft_tokens as f64);
            self.inc(e, Fam::SpecAccepted, 0, rep.accepted as f64);
            for (p, n) in rep.accepted_per_pos.iter().enumerate() {
                self.inc(e, Fam::SpecAcceptedPerPos, p, *n as f64);
            }
        }
        // Iteration stats: one pass over the outputs (`update_from_output`).
        let (mut gen_tokens, mut prompt_total, mut local, mut hit, mut ext) =
            (0u64, 0u64, 0u64, 0u64, 0u64);
        let mut ttfts = Vec::new();
        let mut itls = Vec::new();
        for o in &rep.outputs {
            gen_tokens += u64::from(o.tokens);
            if o.is_first {
                prompt_total += u64::from(o.prompt.total);
                local += u64::from(o.prompt.local_compute);
                hit += u64::from(o.prompt.local_cache_hit);
                ext += u64::from(o.prompt.external_kv_transfer);
                ttfts.push((rep.end_ns - o.arrival_ns) as f64 / 1e9);
            }
            itls.extend(o.itl_samples(self.itl_observation));
        }
        self.inc(e, Fam::Preemptions, 0, 0.0);
        self.inc(e, Fam::PromptTokens, 0, prompt_total as f64);
        for (child, v) in [local, hit, ext].into_iter().enumerate() {
            self.inc(e, Fam::PromptTokensBySource, child, v as f64);
        }
        self.inc(e, Fam::PromptTokensCached, 0, (hit + ext) as f64);
        self.inc(e, Fam::GenerationTokens, 0, gen_tokens as f64);
        let credited = if self.local_only_iteration {
            local
        } else {
            prompt_total
        };
        self.observe(e, Fam::IterationTokens, (credited + gen_tokens) as f64);
        for t in ttfts {
            self.observe(e, Fam::Ttft, t);
        }
        for itl in itls {
            self.observe(e, Fam::Itl, itl);
            self.observe(e, Fam::OldTpot, itl);
        }
        // Finished requests (`update_from_finished_request`).
        for r in finished {
            let reason = reasons
                .iter()
                .position(|x| *x == r.finish_reason.as_str())
                .unwrap_or(0);
            self.inc(e, Fam::RequestSuccess, reason, 1.0);
            let s = |ns: u64| ns as f64 / 1e9;
            let first = r.first_ns.unwrap_or(r.last_ns);
            self.observe(e, Fam::E2e, s(rep.end_ns - r.arrival_ns));
            self.observe(e, Fam::QueueTime, s(r.scheduled_ns - r.arrival_ns));
            self.observe(e, Fam::PrefillTime, s(first - r.scheduled_ns));
            self.observe(e, Fam::InferenceTime, s(r.last_ns - r.scheduled_ns));
            self.observe(e, Fam::DecodeTime, r.decode_time_s());
            let cached = r.prompt.local_cache_hit + r.prompt.external_kv_transfer;
            self.observe(
                e,
                Fam::PrefillKvComputed,
                f64::from(r.prompt.total - cached),
            );
            self.observe(e, Fam::RequestPromptTokens, f64::from(r.prompt.total));
            self.observe(e, Fam::RequestGenerationTokens, f64::from(r.tokens));
            self.observe(e, Fam::RequestTpot, r.tpot_s());
            self.observe(e, Fam::RequestParamsMaxTokens, f64::from(r.max_tokens));
        }
    }
}
