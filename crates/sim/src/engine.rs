//! One vLLM engine core (a data-parallel rank): a continuous-batching step loop.
//!
//! A step starts when the engine has work; it schedules every running request for decode
//! (1 sampled token plus up to `k` drafts to verify) and admits waiting requests FIFO for prefill
//! within `max_num_seqs` and the token budget. Its engine time is
//! `step_base + step_per_token × (locally computed prompt tokens + decode tokens)`, so ITL grows
//! with the batch. When the step ends, every scheduled request emits one output in one batch:
//! the first output (from prefill) holds 1 token (0 for an engine-side failure), a decode output
//! holds 1 + accepted drafts, cut at the request's last token. The accepted drafts are counted
//! before that cut, as vLLM's scheduler does (`update_from_output` adds them to the spec-decode
//! stats before the request is checked for `max_tokens` or a stop): so the spec-decode counters can
//! exceed the tokens emitted. Source of the shape: `vllm/v1/core/sched/scheduler.py`.

use std::collections::VecDeque;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use super::model::{
    FinishReason, ItlObservation, PromptTokens, SimConfig, SpecConfig, secs_to_ns, stream_seed,
};

/// One output of a request as the frontend sees it (truth record).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct OutputRecord {
    /// Engine timestamp of the output, seconds of simulated time.
    pub time_s: f64,
    /// Tokens the output carries: 1 + accepted drafts for a decode output, cut at the request's
    /// last token.
    pub tokens: u32,
    /// Draft tokens verified in the step that produced it.
    pub(crate) drafts: u32,
    /// Drafts accepted, counted before the cut (what `spec_decode_num_accepted_tokens` adds).
    pub(crate) accepted: u32,
}

/// A request inside the simulator, from arrival to finish.
#[derive(Debug, Clone)]
pub struct Request {
    /// Unique id (arrival order within the simulator).
    pub id: u64,
    /// Model index.
    pub model: usize,
    /// Engine index within the model.
    pub engine: u32,
    /// Arrival time, ns of simulated time.
    pub(crate) arrival_ns: u64,
    /// Prompt tokens by source.
    pub prompt: PromptTokens,
    /// Tokens this request will generate.
    pub(crate) target_n: u32,
    /// The `max_tokens` parameter.
    pub max_tokens: u32,
    /// Reason it will finish with.
    pub finish_reason: FinishReason,
    /// Scripted `(drafts, accepted)` per decode step, or `None` for random draws.
    pub(crate) script: Option<VecDeque<(u32, u32)>>,
    /// Time first scheduled, ns.
    pub(crate) scheduled_ns: u64,
    /// Time of the first output, ns.
    pub(crate) first_ns: Option<u64>,
    /// Time of the newest output, ns.
    pub(crate) last_ns: u64,
    /// Tokens generated so far.
    pub tokens: u32,
    /// Outputs so far.
    pub outputs: Vec<OutputRecord>,
    /// Set while the request is in the in-flight step: `(drafts, accepted)` of its decode, or
    /// `None` for its prefill.
    pending: Option<Option<(u32, u32)>>,
}

impl Request {
    /// A request that has not been scheduled yet.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        id: u64,
        model: usize,
        engine: u32,
        arrival_ns: u64,
        prompt: PromptTokens,
        target_n: u32,
        max_tokens: u32,
        finish_reason: FinishReason,
        script: Option<VecDeque<(u32, u32)>>,
    ) -> Self {
        Request {
            id,
            model,
            engine,
            arrival_ns,
            prompt,
            target_n,
            max_tokens,
            finish_reason,
            script,
            scheduled_ns: 0,
            first_ns: None,
            last_ns: 0,
            tokens: 0,
            outputs: Vec::new(),
            pending: None,
        }
    }

    /// Time of the first output, ns of simulated time; `None` before it.
    pub fn first_output_ns(&self) -> Option<u64> {
        self.first_ns
    }

    /// Time to first token as vLLM observes it (first output − arrival, s); `None` before the
    /// first output.
    pub fn ttft_s(&self) -> Option<f64> {
        self.first_ns.map(|f| (f - self.arrival_ns) as f64 / 1e9)
    }

    /// Decode time as vLLM computes it: last output − first output, seconds.
    pub(crate) fn decode_time_s(&self) -> f64 {
        let first = self.first_ns.unwrap_or(self.last_ns);
        (self.last_ns - first) as f64 / 1e9
    }

    /// vLLM's request TPOT: `decode_time / (n − 1)`, exactly 0 when n ≤ 1
    /// (`update_from_finished_request` in `stats.py`, 0.11+).
    pub(crate) fn tpot_s(&self) -> f64 {
        if self.tokens > 1 {
            self.decode_time_s() / f64::from(self.tokens - 1)
        } else {
            0.0
        }
    }
}

/// One output produced at the end of a step, as the metrics layer observes it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OutputEvent {
    /// Arrival time of the request, ns (TTFT is measured from it).
    pub(crate) arrival_ns: u64,
    /// Prompt tokens of the request (credited at its first output).
    pub prompt: PromptTokens,
    /// Tokens carried.
    pub tokens: u32,
    /// True for the request's first output (TTFT, prompt tokens credited).
    pub(crate) is_first: bool,
    /// For a non-first output: engine time since the previous output, ns.
    pub(crate) itl_ns: Option<u64>,
}

impl OutputEvent {
    /// The ITL samples this output records, seconds, in observation order: none for a first
    /// output; otherwise one of the gap since the request's previous output
    /// ([`ItlObservation::PerOutput`]), or one of gap / k per token of its k tokens
    /// ([`ItlObservation::PerToken`]).
    pub(crate) fn itl_samples(&self, how: ItlObservation) -> impl Iterator<Item = f64> + use<> {
        let (n, v) = match (self.itl_ns, how) {
            (None, _) => (0, 0.0),
            (Some(gap), ItlObservation::PerOutput) => (1, gap as f64 / 1e9),
            (Some(gap), ItlObservation::PerToken) => {
                // A non-first output holds at least one token (the cut keeps one).
                let k = self.tokens.max(1);
                (k, gap as f64 / 1e9 / f64::from(k))
            }
        };
        std::iter::repeat_n(v, n as usize)
    }
}

/// Everything one step's output batch reports: the unit of one synchronous metrics update.
#[derive(Debug, Clone, Default)]
pub(crate) struct StepReport {
    /// Global engine index.
    pub engine: usize,
    /// Engine timestamp of the batch, ns of simulated time.
    pub(crate) end_ns: u64,
    /// The outputs, in batch order.
    pub outputs: Vec<OutputEvent>,
    /// Requests that had drafts in this step (`spec_decode_num_drafts` increment).
    pub(crate) drafts: u64,
    /// Draft tokens verified.
    pub(crate) draft_tokens: u64,
    /// Drafts accepted.
    pub(crate) accepted: u64,
    /// Accepted drafts per position (index 0 = first draft).
    pub(crate) accepted_per_pos: Vec<u64>,
    /// Prefix-cache queries (prompt tokens of admitted requests).
    pub(crate) prefix_queries: u64,
    /// Prefix-cache hits (local hit tokens of admitted requests).
    pub(crate) prefix_hits: u64,
    /// KV-connector queries (prompt tokens beyond the local hit, P/D requests only).
    pub(crate) external_queries: u64,
    /// KV-connector hits (externally transferred tokens).
    pub(crate) external_hits: u64,
    /// Running requests after the step (gauge).
    pub(crate) running: usize,
    /// Waiting requests after the step (gauge).
    pub(crate) waiting: usize,
    /// KV cache usage in `[0, 1]` after the step (gauge).
    pub(crate) kv_usage: f64,
}

/// A simulated engine core.
#[derive(Debug)]
pub(crate) struct EngineSim {
    /// Engine index within the model.
    pub(crate) index: u32,
    waiting: VecDeque<Request>,
    running: Vec<Request>,
    /// End of the in-flight step, ns; `None` when idle.
    pub(crate) step_end_ns: Option<u64>,
    /// Start of the next step of an idle engine that just received work, ns. The step is
    /// planned after every other arrival of the same instant, so simultaneous arrivals batch.
    pub(crate) step_start_ns: Option<u64>,
    rng: StdRng,
    spec: Option<SpecConfig>,
    base_ns: u64,
    per_token_ns: u64,
    max_num_seqs: usize,
    budget: u64,
    kv_capacity: u64,
    step_prefix: (u64, u64, u64, u64),
}

impl EngineSim {
    /// An idle engine. `global` is its index among all engines (seeds its acceptance draws).
    pub(crate) fn new(cfg: &SimConfig, index: u32, global: usize) -> Self {
        EngineSim {
            index,
            waiting: VecDeque::new(),
            running: Vec::new(),
            step_end_ns: None,
            step_start_ns: None,
            rng: StdRng::seed_from_u64(stream_seed(cfg.seed, 1_000_000 + global as u64)),
            spec: cfg.spec,
            base_ns: secs_to_ns(cfg.step_base_s),
            per_token_ns: secs_to_ns(cfg.step_per_token_s),
            max_num_seqs: cfg.max_num_seqs as usize,
            budget: u64::from(cfg.max_num_batched_tokens),
            kv_capacity: cfg.kv_cache_tokens,
            step_prefix: (0, 0, 0, 0),
        }
    }

    /// Requests admitted and not finished (their outputs so far are in the metrics, not yet in the
    /// truth log's finished requests).
    pub(crate) fn running(&self) -> &[Request] {
        &self.running
    }

    /// Running + waiting requests (the routing load).
    pub(crate) fn load(&self) -> usize {
        self.running.len() + self.waiting.len()
    }

    /// Queues an arrived request; an idle engine will start a step at `now_ns`.
    pub(crate) fn enqueue(&mut self, req: Request, now_ns: u64) {
        self.waiting.push_back(req);
        if self.step_end_ns.is_none() && self.step_start_ns.is_none() {
            self.step_start_ns = Some(now_ns);
        }
    }

    /// Starts the pending step of an idle engine (see [`EngineSim::step_start_ns`]).
    pub(crate) fn start_step(&mut self) {
        if let Some(t) = self.step_start_ns.take() {
            self.plan_step(t);
        }
    }

    /// Draws `(drafts, accepted)` for one decode of a request. Drafts are not clamped to the
    /// tokens the request still needs (vLLM proposes `k` whatever is left); the output is cut
    /// instead, in [`EngineSim::complete_step`].
    fn draw_decode(&mut self, req: &mut Request) -> (u32, u32) {
        if let Some(script) = req.script.as_mut() {
            let (d, a) = script.pop_front().unwrap_or((0, 0));
            return (d, a.min(d));
        }
        let Some(spec) = self.spec else { return (0, 0) };
        if self.rng.random::<f64>() < spec.no_draft_fraction {
            return (0, 0);
        }
        let d = spec.num_speculative_tokens;
        let mut a = 0;
        while a < d && self.rng.random::<f64>() < spec.acceptance_prob {
            a += 1;
        }
        (d, a)
    }

    /// Schedules a step starting at `start_ns` if there is work.
    fn plan_step(&mut self, start_ns: u64) {
        let mut tokens: u64 = 0;
        let mut running = std::mem::take(&mut self.running);
        for r in &mut running {
            let (d, a) = self.draw_decode(r);
            r.pending = Some(Some((d, a)));
            tokens += 1 + u64::from(d);
        }
        self.running = running;
        let mut admitted = 0usize;
        let (mut pq, mut ph, mut eq, mut eh) = (0, 0, 0, 0);
        while let Some(front) = self.waiting.front() {
            let need = u64::from(front.prompt.local_compute);
            let fits = tokens + need <= self.budget || admitted == 0;
            if self.running.len() >= self.max_num_seqs || !fits {
                break;
            }
            let mut r = self.waiting.pop_front().expect("front exists");
            r.scheduled_ns = start_ns;
            r.pending = Some(None);
            tokens += need;
            admitted += 1;
            pq += u64::from(r.prompt.total);
            ph += u64::from(r.prompt.local_cache_hit);
            if r.prompt.external_kv_transfer > 0 {
                eq += u64::from(r.prompt.total - r.prompt.local_cache_hit);
                eh += u64::from(r.prompt.external_kv_transfer);
            }
            self.running.push(r);
        }
        if self.running.is_empty() {
            self.step_end_ns = None;
            return;
        }
        self.step_prefix = (pq, ph, eq, eh);
        self.step_end_ns = Some(start_ns + self.base_ns + self.per_token_ns * tokens);
    }

    /// Ends the in-flight step: applies every output, removes finished requests, plans the
    /// next step at the same instant. Returns the batch report and the finished requests.
    pub(crate) fn complete_step(&mut self, global: usize) -> (StepReport, Vec<Request>) {
        let end = self
            .step_end_ns
            .take()
            .expect("complete_step on an idle engine");
        let k = self.spec.map_or(0, |s| s.num_speculative_tokens as usize);
        let mut rep = StepReport {
            engine: global,
            end_ns: end,
            accepted_per_pos: vec![0; k],
            ..Default::default()
        };
        (
            rep.prefix_queries,
            rep.prefix_hits,
            rep.external_queries,
            rep.external_hits,
        ) = self.step_prefix;
        let mut finished = Vec::new();
        let mut still = Vec::with_capacity(self.running.len());
        for mut r in std::mem::take(&mut self.running) {
            let Some(pending) = r.pending.take() else {
                still.push(r);
                continue;
            };
            let (tokens, drafts, accepted, is_first) = match pending {
                None => (u32::from(r.target_n > 0), 0, 0, true),
                // Cut at the request's last token (max_tokens or a stop); `a` stays as counted.
                Some((d, a)) => (
                    (1 + a).min(r.target_n.saturating_sub(r.tokens).max(1)),
                    d,
                    a,
                    false,
                ),
            };
            if drafts > 0 {
                rep.drafts += 1;
                rep.draft_tokens += u64::from(drafts);
                rep.accepted += u64::from(accepted);
                for p in 0..accepted as usize {
                    if p >= rep.accepted_per_pos.len() {
                        rep.accepted_per_pos.resize(p + 1, 0);
                    }
                    rep.accepted_per_pos[p] += 1;
                }
            }
            let itl_ns = if is_first {
                None
            } else {
                Some(end - r.last_ns)
            };
            if is_first {
                r.first_ns = Some(end);
            }
            r.last_ns = end;
            r.tokens += tokens;
            r.outputs.push(OutputRecord {
                time_s: end as f64 / 1e9,
                tokens,
                drafts,
                accepted,
            });
            let done = r.tokens >= r.target_n;
            rep.outputs.push(OutputEvent {
                arrival_ns: r.arrival_ns,
                prompt: r.prompt,
                tokens,
                is_first,
                itl_ns,
            });
            if done {
                finished.push(r)
            } else {
                still.push(r)
            }
        }
        self.running = still;
        let used: u64 = self
            .running
            .iter()
            .map(|r| u64::from(r.prompt.total + r.tokens))
            .sum();
        rep.running = self.running.len();
        rep.waiting = self.waiting.len();
        rep.kv_usage = (used as f64 / self.kv_capacity as f64).min(1.0);
        self.plan_step(end);
        (rep, finished)
    }
}
