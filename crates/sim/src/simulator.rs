//! The simulator itself: seeded engines stepping in simulated time, their exposition snapshots
//! and the truth log (docs/SIMULATOR.md).

use std::collections::VecDeque;

use crate::engine::{EngineSim, Request};
use crate::error::SimError;
use crate::exposition::Snapshot;
use crate::metrics::MetricsRegistry;
use crate::model::{ArrivalStream, ScriptedRequest, SimConfig, default_finish_reason, secs_to_ns};
use crate::truth::{TruthDocument, TruthLog, WindowTruth};

/// The simulator: engines of every model, their metrics and the truth log, on one clock.
#[derive(Debug)]
pub struct Simulator {
    cfg: SimConfig,
    now_ns: u64,
    engines: Vec<EngineSim>,
    arrivals: Vec<ArrivalStream>,
    script: VecDeque<(u64, ScriptedRequest)>,
    next_id: u64,
    metrics: MetricsRegistry,
    truth: TruthLog,
}

impl Simulator {
    /// A simulator at time 0 with Poisson arrivals per `cfg`.
    /// Errors: [`SimError::Config`] when `cfg` does not validate.
    pub fn new(cfg: SimConfig) -> Result<Self, SimError> {
        Self::with_script(cfg, Vec::new())
    }

    /// Like [`Simulator::new`], plus hand-written requests (set `arrival_rate` to 0 for a
    /// purely scripted trace). Errors: [`SimError::Config`] for an invalid config or a scripted
    /// request naming a model or engine that does not exist or splitting its prompt wrongly.
    pub fn with_script(cfg: SimConfig, script: Vec<ScriptedRequest>) -> Result<Self, SimError> {
        cfg.validate()?;
        let mut engines = Vec::new();
        for _model in 0..cfg.models.len() {
            for e in 0..cfg.engines_per_model {
                engines.push(EngineSim::new(&cfg, e, engines.len()));
            }
        }
        let arrivals = (0..cfg.models.len())
            .map(|m| ArrivalStream::new(&cfg, m))
            .collect();
        let mut sorted = Vec::new();
        for r in script {
            let p = r.prompt;
            let ok = r.model < cfg.models.len()
                && r.engine < cfg.engines_per_model
                && p.total >= 1
                && p.local_compute + p.local_cache_hit + p.external_kv_transfer == p.total
                && r.arrival_s >= 0.0;
            if !ok {
                return Err(SimError::Config(format!(
                    "scripted request {r:?} is inconsistent"
                )));
            }
            sorted.push((secs_to_ns(r.arrival_s), r));
        }
        sorted.sort_by_key(|(t, _)| *t);
        Ok(Simulator {
            metrics: MetricsRegistry::new(&cfg),
            truth: TruthLog::new(&cfg),
            cfg,
            now_ns: 0,
            engines,
            arrivals,
            script: sorted.into(),
            next_id: 0,
        })
    }

    /// Every request still running on any engine (global engine index, request), for truth that
    /// needs the outputs of requests that have not finished yet.
    pub fn running_requests(&self) -> impl Iterator<Item = (usize, &Request)> {
        self.engines
            .iter()
            .enumerate()
            .flat_map(|(i, e)| e.running().iter().map(move |r| (i, r)))
    }

    /// The configuration.
    pub fn config(&self) -> &SimConfig {
        &self.cfg
    }

    /// Current simulated time, ns since the epoch.
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// Current time as Unix milliseconds (the snapshot timestamp), rounded down.
    pub(crate) fn now_unix_ms(&self) -> i64 {
        self.cfg.epoch_unix_ms + (self.now_ns / 1_000_000) as i64
    }

    /// Simulated ns of a Unix time in seconds, rounded to whole ms (Prometheus timestamps are
    /// ms); times before the epoch clamp to 0.
    pub(crate) fn unix_s_to_ns(&self, unix_s: f64) -> u64 {
        let ms = (unix_s * 1000.0).round() as i64 - self.cfg.epoch_unix_ms;
        (ms.max(0) as u64) * 1_000_000
    }

    /// The metric values (per engine, per family).
    #[cfg(test)]
    pub(crate) fn metrics(&self) -> &MetricsRegistry {
        &self.metrics
    }

    /// The truth log.
    pub fn truth(&self) -> &TruthLog {
        &self.truth
    }

    /// Runs every event (arrival, step end) strictly before `t_s` seconds of simulated time,
    /// then sets the clock to `t_s`. Going backwards is a no-op.
    pub fn advance_to(&mut self, t_s: f64) {
        self.advance_to_ns(secs_to_ns(t_s));
    }

    /// [`Simulator::advance_to`] in nanoseconds.
    pub(crate) fn advance_to_ns(&mut self, t_ns: u64) {
        while let Some(ev) = self.next_event() {
            if ev.time() >= t_ns {
                break;
            }
            match ev {
                Event::StepEnd(e, _) => self.complete_step(e),
                Event::Scripted(t) => self.scripted_arrival(t),
                Event::Arrival(m, t) => self.random_arrival(m, t),
                Event::StepStart(e, _) => self.engines[e].start_step(),
            }
        }
        self.now_ns = self.now_ns.max(t_ns);
    }

    fn next_event(&self) -> Option<Event> {
        // Ties: step ends (by engine), scripted arrivals, random arrivals (by model), then step
        // starts of idle engines, so requests arriving at one instant share the first step.
        let mut best: Option<Event> = None;
        let mut consider = |ev: Event, t: u64| {
            if best.is_none_or(|b| t < b.time()) {
                best = Some(ev);
            }
        };
        for (i, e) in self.engines.iter().enumerate() {
            if let Some(t) = e.step_end_ns {
                consider(Event::StepEnd(i, t), t);
            }
        }
        if let Some((t, _)) = self.script.front() {
            consider(Event::Scripted(*t), *t);
        }
        for (m, a) in self.arrivals.iter().enumerate() {
            if let Some(t) = a.next_ns {
                consider(Event::Arrival(m, t), t);
            }
        }
        for (i, e) in self.engines.iter().enumerate() {
            if let Some(t) = e.step_start_ns {
                consider(Event::StepStart(i, t), t);
            }
        }
        best
    }

    fn complete_step(&mut self, e: usize) {
        let (rep, finished) = self.engines[e].complete_step(e);
        self.metrics
            .record_step(&rep, &finished, self.cfg.profile.finish_reasons());
        self.truth.record_step(&rep, &finished);
    }

    fn scripted_arrival(&mut self, t: u64) {
        let (_, r) = self
            .script
            .pop_front()
            .expect("scripted event has a request");
        let reason = r
            .finish_reason
            .unwrap_or_else(|| default_finish_reason(&self.cfg, r.n));
        let e = r.model * self.cfg.engines_per_model as usize + r.engine as usize;
        let script = Some(r.decode_steps.into_iter().collect());
        let req = Request::new(
            self.next_id,
            r.model,
            r.engine,
            t,
            r.prompt,
            r.n,
            self.cfg.max_tokens,
            reason,
            script,
        );
        self.next_id += 1;
        self.engines[e].enqueue(req, t);
    }

    fn random_arrival(&mut self, m: usize, t: u64) {
        let d = self.arrivals[m].draw(&self.cfg);
        let per = self.cfg.engines_per_model as usize;
        let first = m * per;
        let e = (first..first + per)
            .min_by_key(|&i| (self.engines[i].load(), i))
            .expect("≥ 1 engine");
        let idx = self.engines[e].index;
        let req = Request::new(
            self.next_id,
            m,
            idx,
            t,
            d.prompt,
            d.n,
            self.cfg.max_tokens,
            d.finish_reason,
            None,
        );
        self.next_id += 1;
        self.engines[e].enqueue(req, t);
    }

    /// Every exposed sample at the current instant (timestamp = `Simulator::now_unix_ms`).
    pub fn snapshot(&self) -> Snapshot {
        self.metrics
            .snapshot(self.now_unix_ms(), self.cfg.epoch_unix_ms as f64 / 1000.0)
    }

    /// The `/metrics` body at the current instant (Prometheus text format 0.0.4).
    pub fn render_text(&self) -> String {
        self.snapshot().render_text()
    }

    /// Truth over `[from_ns, to_ns)` of simulated time.
    pub fn truth_window(&self, from_ns: u64, to_ns: u64) -> WindowTruth {
        self.truth.window(from_ns, to_ns, self.cfg.epoch_unix_ms)
    }

    /// The truth file content: config, whole-run window `[0, now)`, every finished request.
    pub(crate) fn truth_document(&self) -> TruthDocument {
        TruthDocument {
            schema: "vllm-sim-truth/1",
            epoch_unix_ms: self.cfg.epoch_unix_ms,
            end_s: self.now_ns as f64 / 1e9,
            config: self.cfg.clone(),
            window: self.truth_window(0, self.now_ns),
            requests: self.truth.requests().to_vec(),
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Event {
    StepEnd(usize, u64),
    Scripted(u64),
    Arrival(usize, u64),
    StepStart(usize, u64),
}

impl Event {
    fn time(self) -> u64 {
        match self {
            Event::StepEnd(_, t)
            | Event::Scripted(t)
            | Event::Arrival(_, t)
            | Event::StepStart(_, t) => t,
        }
    }
}
