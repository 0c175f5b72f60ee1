//! Ground truth: per-request records, per-step records, and the `vllm bench serve` quantities
//! over any window `[from, to)` of the server's clock.
//!
//! * Request-level quantities take the requests that **finished** in the window (finish time =
//!   engine timestamp of the last output), the way a benchmark client reports them.
//! * Iteration-level quantities take the output batches (steps) whose engine timestamp falls in
//!   the window: exactly what the increase of vLLM's counters between a scrape at `from` and a
//!   scrape at `to` covers, because a snapshot at `t` holds every step that ended before `t`.
//!
//! Percentiles follow numpy: `np.percentile(.., method="linear")` and `np.median`, as
//! `vllm/benchmarks/serve.py` computes them.

use std::collections::BTreeMap;

use serde::Serialize;

use super::engine::{OutputRecord, Request, StepReport};
use super::model::{ItlObservation, PromptTokens, SimConfig};

/// One finished request, as written to the truth file. Times are seconds of simulated time
/// (add `epoch_unix_ms / 1000` for Unix time).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestRecord {
    /// Request id.
    pub id: u64,
    /// `model_name` label.
    pub(crate) model_name: String,
    /// `engine` label.
    pub engine: String,
    /// Arrival, s.
    pub arrival_s: f64,
    /// First scheduled, s.
    pub(crate) scheduled_s: f64,
    /// First output, s.
    pub(crate) first_output_s: f64,
    /// Finish (last output), s.
    pub finish_s: f64,
    /// Generated tokens.
    pub n: u32,
    /// `finished_reason` label value.
    pub(crate) finished_reason: &'static str,
    /// The `max_tokens` parameter.
    pub max_tokens: u32,
    /// Prompt tokens by source.
    pub prompt: PromptTokens,
    /// Last − first output, s.
    pub(crate) decode_time_s: f64,
    /// `decode_time / (n − 1)`, 0 when n ≤ 1 (vLLM's request TPOT value).
    pub(crate) tpot_s: f64,
    /// Every output in order.
    pub outputs: Vec<OutputRecord>,
    #[serde(skip)]
    engine_index: usize,
    #[serde(skip)]
    finish_ns: u64,
    #[serde(skip)]
    arrival_ns: u64,
    /// End of the step of its first output, ns; `None` without any output.
    #[serde(skip)]
    first_ns: Option<u64>,
}

impl RequestRecord {
    /// Its time to first token, s, as the simulator observes it into
    /// `vllm:time_to_first_token_seconds` (the end of the step of its first output, less its
    /// arrival, in ns): `None` when it had no output at all (every simulated request has one,
    /// possibly of 0 tokens).
    pub fn ttft_s(&self) -> Option<f64> {
        self.first_ns
            .map(|f| f.saturating_sub(self.arrival_ns) as f64 / 1e9)
    }

    /// Its end-to-end latency, s, as observed into `vllm:e2e_request_latency_seconds`.
    pub fn e2el_s(&self) -> f64 {
        self.finish_ns.saturating_sub(self.arrival_ns) as f64 / 1e9
    }

    /// vLLM's request TPOT, s, as observed into `vllm:request_time_per_output_token_seconds`:
    /// 0 when `n ≤ 1`.
    pub fn tpot_s(&self) -> f64 {
        self.tpot_s
    }

    /// Its finish time, ns of simulated time.
    pub fn finish_ns(&self) -> u64 {
        self.finish_ns
    }

    /// The end of the step of its first output (when TTFT is observed), ns of simulated time;
    /// `None` without any output.
    pub fn first_output_ns(&self) -> Option<u64> {
        self.first_ns
    }
}

/// The iteration-level facts of one output batch.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct StepRecord {
    engine: usize,
    time_ns: u64,
    generation_tokens: u64,
    first_outputs: u64,
    zero_token_first_outputs: u64,
    itl_count: u64,
    itl_sum_s: f64,
    tokens_after_first: u64,
    drafts: u64,
    draft_tokens: u64,
    accepted: u64,
    prompt_total: u64,
    local_compute: u64,
    local_cache_hit: u64,
    external_kv_transfer: u64,
}

/// Everything the simulator has produced, for truth windows and the truth file.
#[derive(Debug, Clone, Default)]
pub struct TruthLog {
    engine_labels: Vec<(String, String)>,
    steps: Vec<StepRecord>,
    requests: Vec<RequestRecord>,
    /// How the ITL histograms observe an output (the metrics' rule, so `itl_count` and
    /// `itl_sum_seconds` count what they count).
    itl_observation: ItlObservation,
    /// The request TPOT histogram's bounds (the `inter_token_latency` bucket family, custom or
    /// default), for the canonical TPOT truth's buckets.
    itl_bounds: Vec<f64>,
}

/// One cumulative bucket count: requests with value ≤ `le` (`le` printed as vLLM does).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BucketCount {
    /// Upper bound as vLLM prints it (`"0.05"`, `"1.0"`, `"+Inf"`).
    pub le: String,
    /// Cumulative count.
    pub count: u64,
}

/// Canonical TPOT: per-request `decode_time / (n − 1)` over finished requests with n > 1.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TpotTruth {
    /// Requests with n > 1.
    pub count: u64,
    /// Σ TPOT, s.
    pub sum_seconds: f64,
    /// Mean, s (`null` when count = 0).
    pub(crate) mean_seconds: Option<f64>,
    /// `np.median`, s.
    pub(crate) median_seconds: Option<f64>,
    /// `np.percentile(.., 99)`, s.
    pub p99_seconds: Option<f64>,
    /// Cumulative counts on the request TPOT histogram's bounds (the `inter_token_latency`
    /// bucket family, custom or default), `+Inf` last.
    pub buckets: Vec<BucketCount>,
}

/// Request-level truth over the requests finished in a window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestTruth {
    /// Finished requests.
    pub finished: u64,
    /// Finished requests by `finished_reason`.
    pub(crate) finished_by_reason: BTreeMap<&'static str, u64>,
    /// Finished requests with n ≤ 1 (vLLM observes TPOT 0 for them).
    pub n_le_1: u64,
    /// Σ n.
    pub(crate) generation_tokens: u64,
    /// The `vllm bench serve` TPOT distribution.
    pub canonical_tpot: TpotTruth,
    /// What vLLM's raw request-TPOT histogram holds: `_count` (every finished request).
    pub(crate) raw_tpot_count: u64,
    /// Raw `_sum`, s (equals the canonical sum: n ≤ 1 requests add 0).
    pub(crate) raw_tpot_sum_seconds: f64,
    /// Σ decode time / Σ (n − 1): time per token after the first, token-weighted.
    pub(crate) token_weighted_seconds_per_token: Option<f64>,
}

/// Iteration-level truth over the output batches in a window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IterationTruth {
    /// Output batches (`iteration_tokens_total_count` increase).
    pub iterations: u64,
    /// Generated tokens (`generation_tokens_total` increase).
    pub(crate) generation_tokens: u64,
    /// First outputs (TTFT observations).
    pub(crate) first_outputs: u64,
    /// First outputs that carried 0 tokens (n = 0 requests).
    pub zero_token_first_outputs: u64,
    /// ITL observations: one per non-first output, or one per token of those outputs with
    /// [`ItlObservation::PerToken`] (then equal to `tokens_after_first`).
    pub itl_count: u64,
    /// Σ ITL, s (the same with either observation, up to rounding).
    pub itl_sum_seconds: f64,
    /// Tokens carried by non-first outputs.
    pub tokens_after_first: u64,
    /// Requests-with-drafts per step (`spec_decode_num_drafts`).
    pub(crate) drafts: u64,
    /// Draft tokens verified.
    pub(crate) draft_tokens: u64,
    /// Drafts accepted (`spec_decode_num_accepted_tokens` increase), counted before the cut of a
    /// request's last output: `tokens_after_first ≤ itl_count + accepted_tokens`.
    pub(crate) accepted_tokens: u64,
    /// Prompt tokens credited, by source.
    pub(crate) prompt_tokens: PromptTotals,
    /// Σ (locally computed prompt tokens + generated tokens): the ≥ 0.23 `iteration_tokens` sum.
    pub iteration_tokens_local_sum: u64,
    /// Σ (all credited prompt tokens + generated tokens): the ≤ 0.22 `iteration_tokens` sum.
    pub(crate) iteration_tokens_all_sum: u64,
    /// Σ ITL / ITL count: raw per-output mean, s (per token with [`ItlObservation::PerToken`]).
    pub(crate) raw_itl_mean_seconds: Option<f64>,
    /// Σ ITL / tokens after the first: true time per token, s.
    pub(crate) token_weighted_itl_seconds: Option<f64>,
    /// Σ ITL / tokens after the first: the per-token time the acceptance-corrected family's mean
    /// must give, s. Not Σ ITL / (ITL count + accepted): accepted drafts are counted before a
    /// request's last output is cut at its last token, so that denominator counts tokens never
    /// emitted.
    pub(crate) acceptance_corrected_itl_seconds: Option<f64>,
    /// 1 + accepted / drafts.
    pub acceptance_length: Option<f64>,
    /// Local-compute iteration tokens per iteration.
    pub(crate) local_compute_tokens_per_iteration: Option<f64>,
}

/// Prompt-token totals by source (u64 sums of [`PromptTokens`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub(crate) struct PromptTotals {
    /// All prompt tokens.
    pub total: u64,
    /// Locally computed.
    pub local_compute: u64,
    /// Local prefix-cache hits.
    pub local_cache_hit: u64,
    /// External KV transfer.
    pub external_kv_transfer: u64,
}

/// Truth for one group (`model_name`, `engine`) or for all groups (`null` labels).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupTruth {
    /// `model_name`, or `null` for the total.
    pub(crate) model_name: Option<String>,
    /// `engine`, or `null` for the total.
    pub engine: Option<String>,
    /// Request-level truth.
    pub requests: RequestTruth,
    /// Iteration-level truth.
    pub iterations: IterationTruth,
}

/// Truth over `[from, to)`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowTruth {
    /// Window start, Unix seconds.
    pub(crate) from_unix_s: f64,
    /// Window end (exclusive), Unix seconds.
    pub(crate) to_unix_s: f64,
    /// Over every engine.
    pub total: GroupTruth,
    /// Per engine, in model then engine order.
    pub groups: Vec<GroupTruth>,
}

/// numpy's `_lerp(a, b, t)`: `a + (b − a)·t`, or `b − (b − a)·(1 − t)` when `t ≥ 0.5`.
fn lerp(a: f64, b: f64, t: f64) -> f64 {
    let d = b - a;
    if t >= 0.5 {
        b - d * (1.0 - t)
    } else {
        a + d * t
    }
}

/// `np.percentile(sorted, q)` with the default linear method; `sorted` ascending, non-empty.
pub fn percentile_linear(sorted: &[f64], q: f64) -> f64 {
    let n = sorted.len();
    let virt = (n - 1) as f64 * (q / 100.0);
    let lo = virt.floor();
    let i = (lo as usize).min(n - 1);
    let j = (i + 1).min(n - 1);
    lerp(sorted[i], sorted[j], virt - lo)
}

/// `np.median(sorted)`: the middle value, or the mean of the two middle values.
pub(crate) fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

fn ratio(a: f64, b: u64) -> Option<f64> {
    (b > 0).then(|| a / b as f64)
}

impl TruthLog {
    /// An empty log for the engines of `cfg`.
    pub(crate) fn new(cfg: &SimConfig) -> Self {
        let mut engine_labels = Vec::new();
        for m in &cfg.models {
            for e in 0..cfg.engines_per_model {
                engine_labels.push((m.clone(), e.to_string()));
            }
        }
        TruthLog {
            engine_labels,
            itl_observation: cfg.itl_observation,
            itl_bounds: cfg.itl_bounds(),
            ..Default::default()
        }
    }

    /// Records one output batch and the requests it finished.
    pub(crate) fn record_step(&mut self, rep: &StepReport, finished: &[Request]) {
        let mut s = StepRecord {
            engine: rep.engine,
            time_ns: rep.end_ns,
            ..Default::default()
        };
        for o in &rep.outputs {
            s.generation_tokens += u64::from(o.tokens);
            if o.is_first {
                s.first_outputs += 1;
                s.zero_token_first_outputs += u64::from(o.tokens == 0);
                s.prompt_total += u64::from(o.prompt.total);
                s.local_compute += u64::from(o.prompt.local_compute);
                s.local_cache_hit += u64::from(o.prompt.local_cache_hit);
                s.external_kv_transfer += u64::from(o.prompt.external_kv_transfer);
            }
            if o.itl_ns.is_some() {
                s.tokens_after_first += u64::from(o.tokens);
            }
            for itl in o.itl_samples(self.itl_observation) {
                s.itl_count += 1;
                s.itl_sum_s += itl;
            }
        }
        s.drafts = rep.drafts;
        s.draft_tokens = rep.draft_tokens;
        s.accepted = rep.accepted;
        self.steps.push(s);
        for r in finished {
            let (model_name, engine) = self.engine_labels[rep.engine].clone();
            let secs = |ns: u64| ns as f64 / 1e9;
            self.requests.push(RequestRecord {
                id: r.id,
                model_name,
                engine,
                arrival_s: secs(r.arrival_ns),
                scheduled_s: secs(r.scheduled_ns),
                first_output_s: secs(r.first_ns.unwrap_or(r.last_ns)),
                finish_s: secs(r.last_ns),
                n: r.tokens,
                finished_reason: r.finish_reason.as_str(),
                max_tokens: r.max_tokens,
                prompt: r.prompt,
                decode_time_s: r.decode_time_s(),
                tpot_s: r.tpot_s(),
                outputs: r.outputs.clone(),
                engine_index: rep.engine,
                finish_ns: r.last_ns,
                arrival_ns: r.arrival_ns,
                first_ns: r.first_ns,
            });
        }
    }

    /// Finished requests, in finish order.
    pub fn requests(&self) -> &[RequestRecord] {
        &self.requests
    }

    /// Truth over `[from_ns, to_ns)` of simulated time; `epoch_ms` labels it in Unix seconds.
    pub(crate) fn window(&self, from_ns: u64, to_ns: u64, epoch_ms: i64) -> WindowTruth {
        let unix = |ns: u64| (epoch_ms as f64 + ns as f64 / 1e6) / 1000.0;
        let total = self.group(None, from_ns, to_ns);
        let groups = (0..self.engine_labels.len())
            .map(|e| self.group(Some(e), from_ns, to_ns))
            .collect();
        WindowTruth {
            from_unix_s: unix(from_ns),
            to_unix_s: unix(to_ns),
            total,
            groups,
        }
    }

    fn group(&self, engine: Option<usize>, from: u64, to: u64) -> GroupTruth {
        let in_group = |e: usize| engine.is_none_or(|g| g == e);
        // Steps and requests are appended in time order, so the window is a contiguous range.
        let steps = window_slice(&self.steps, |s| s.time_ns, from, to);
        let reqs = window_slice(&self.requests, |r| r.finish_ns, from, to);
        let mut it = IterationTruth::default_zero();
        for s in steps.iter().filter(|s| in_group(s.engine)) {
            it.iterations += 1;
            it.generation_tokens += s.generation_tokens;
            it.first_outputs += s.first_outputs;
            it.zero_token_first_outputs += s.zero_token_first_outputs;
            it.itl_count += s.itl_count;
            it.itl_sum_seconds += s.itl_sum_s;
            it.tokens_after_first += s.tokens_after_first;
            it.drafts += s.drafts;
            it.draft_tokens += s.draft_tokens;
            it.accepted_tokens += s.accepted;
            it.prompt_tokens.total += s.prompt_total;
            it.prompt_tokens.local_compute += s.local_compute;
            it.prompt_tokens.local_cache_hit += s.local_cache_hit;
            it.prompt_tokens.external_kv_transfer += s.external_kv_transfer;
            it.iteration_tokens_local_sum += s.local_compute + s.generation_tokens;
            it.iteration_tokens_all_sum += s.prompt_total + s.generation_tokens;
        }
        it.raw_itl_mean_seconds = ratio(it.itl_sum_seconds, it.itl_count);
        it.token_weighted_itl_seconds = ratio(it.itl_sum_seconds, it.tokens_after_first);
        it.acceptance_corrected_itl_seconds = it.token_weighted_itl_seconds;
        it.acceptance_length = ratio(it.accepted_tokens as f64, it.drafts).map(|x| 1.0 + x);
        it.local_compute_tokens_per_iteration =
            ratio(it.iteration_tokens_local_sum as f64, it.iterations);

        let mut finished_by_reason = BTreeMap::new();
        let (mut finished, mut n_le_1, mut gen_tokens, mut raw_sum) = (0u64, 0u64, 0u64, 0.0f64);
        let (mut decode_sum, mut after_first) = (0.0f64, 0u64);
        let mut tpots = Vec::new();
        for r in reqs.iter().filter(|r| in_group(r.engine_index)) {
            finished += 1;
            *finished_by_reason.entry(r.finished_reason).or_insert(0) += 1;
            gen_tokens += u64::from(r.n);
            raw_sum += r.tpot_s;
            if r.n <= 1 {
                n_le_1 += 1;
            } else {
                tpots.push(r.tpot_s);
                decode_sum += r.decode_time_s;
                after_first += u64::from(r.n - 1);
            }
        }
        let sum_seconds: f64 = tpots.iter().sum();
        let mut sorted = tpots.clone();
        sorted.sort_by(f64::total_cmp);
        let mut buckets: Vec<BucketCount> = self
            .itl_bounds
            .iter()
            .map(|b| BucketCount {
                le: protocol::float::format_le(*b),
                count: tpots.iter().filter(|t| **t <= *b).count() as u64,
            })
            .collect();
        buckets.push(BucketCount {
            le: "+Inf".into(),
            count: tpots.len() as u64,
        });
        let nonempty = !sorted.is_empty();
        let canonical_tpot = TpotTruth {
            count: tpots.len() as u64,
            sum_seconds,
            mean_seconds: ratio(sum_seconds, tpots.len() as u64),
            median_seconds: nonempty.then(|| median(&sorted)),
            p99_seconds: nonempty.then(|| percentile_linear(&sorted, 99.0)),
            buckets,
        };
        let requests = RequestTruth {
            finished,
            finished_by_reason,
            n_le_1,
            generation_tokens: gen_tokens,
            canonical_tpot,
            raw_tpot_count: finished,
            raw_tpot_sum_seconds: raw_sum,
            token_weighted_seconds_per_token: ratio(decode_sum, after_first),
        };
        let labels = engine.map(|e| self.engine_labels[e].clone());
        GroupTruth {
            model_name: labels.as_ref().map(|l| l.0.clone()),
            engine: labels.map(|l| l.1),
            requests,
            iterations: it,
        }
    }
}

fn window_slice<T>(v: &[T], key: impl Fn(&T) -> u64, from: u64, to: u64) -> &[T] {
    let a = v.partition_point(|x| key(x) < from);
    let b = v.partition_point(|x| key(x) < to).max(a);
    &v[a..b]
}

impl IterationTruth {
    fn default_zero() -> Self {
        IterationTruth {
            iterations: 0,
            generation_tokens: 0,
            first_outputs: 0,
            zero_token_first_outputs: 0,
            itl_count: 0,
            itl_sum_seconds: 0.0,
            tokens_after_first: 0,
            drafts: 0,
            draft_tokens: 0,
            accepted_tokens: 0,
            prompt_tokens: PromptTotals::default(),
            iteration_tokens_local_sum: 0,
            iteration_tokens_all_sum: 0,
            raw_itl_mean_seconds: None,
            token_weighted_itl_seconds: None,
            acceptance_corrected_itl_seconds: None,
            acceptance_length: None,
            local_compute_tokens_per_iteration: None,
        }
    }
}

/// The truth file: the run's configuration, its whole-run window and every finished request.
#[derive(Debug, Clone, Serialize)]
pub struct TruthDocument {
    /// Schema id, `"vllm-sim-truth/1"`.
    pub(crate) schema: &'static str,
    /// Unix ms of simulated time 0.
    pub epoch_unix_ms: i64,
    /// Simulated time the run reached, s.
    pub(crate) end_s: f64,
    /// The configuration (profile, seed, workload).
    pub(crate) config: SimConfig,
    /// Truth over `[0, end)`.
    pub(crate) window: WindowTruth,
    /// Finished requests, in finish order.
    pub requests: Vec<RequestRecord>,
}
