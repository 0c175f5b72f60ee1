"""Independent oracle for the simulator's exposition (see crates/sim/src/profile_tests.rs).

Registers the 0.33 profile's families with Python prometheus_client in vLLM's registration
order (vllm/v1/metrics/loggers.py), feeds it the *hand-computed* observations of the trace in
`hand_trace_expositions_match_prometheus_client`, and prints generate_latest(). The output is
checked in as hand_trace_0.33.prom. Regenerate with:

    python3 -m venv /tmp/pc && /tmp/pc/bin/pip install prometheus_client==0.26.0
    /tmp/pc/bin/python crates/sim/src/testdata/oracle.py > crates/sim/src/testdata/hand_trace_0.33.prom
"""
import time

time.time = lambda: 1700000000.0  # the simulator's epoch: every _created value

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

R = CollectorRegistry()
L = ["model_name", "engine"]
ITL = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0]
TTFT = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
LAT = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0]
IT = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]
TOK = [1, 2, 5, 10, 20, 50, 100]  # build_1_2_5_buckets(max_model_len=100)
lv = ("m", "0")


def c(name, doc, extra=None, values=()):
    m = Counter(name, doc, L + ([extra] if extra else []), registry=R)
    if extra:
        return {v: m.labels(*lv, v) for v in values}
    return m.labels(*lv)


def g(name, doc):
    return Gauge(name, doc, L, registry=R).labels(*lv)


def h(name, doc, b):
    return Histogram(name, doc, L, buckets=b, registry=R).labels(*lv)


drafts = c("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.")
draft_tokens = c("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.")
accepted = c("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.")
per_pos = c("vllm:spec_decode_num_accepted_tokens_per_pos", "Accepted tokens per draft position.", "position", ["0", "1"])
running = g("vllm:num_requests_running", "Number of requests in model execution batches.")
waiting = g("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
kv = g("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
pq = c("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.")
ph = c("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.")
eq = c("vllm:external_prefix_cache_queries", "External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of queried tokens.")
eh = c("vllm:external_prefix_cache_hits", "External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of cached tokens.")
pre = c("vllm:num_preemptions", "Cumulative number of preemption from the engine.")
prompt = c("vllm:prompt_tokens", "Number of prefill tokens processed.")
by_src = c("vllm:prompt_tokens_by_source", "Number of prompt tokens by source.", "source", ["local_compute", "local_cache_hit", "external_kv_transfer"])
cached = c("vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external).")
gen = c("vllm:generation_tokens", "Number of generation tokens processed.")
success = c("vllm:request_success", "Count of successfully processed requests.", "finished_reason", ["stop", "length", "abort", "error", "repetition"])
req_prompt = h("vllm:request_prompt_tokens", "Number of prefill tokens processed.", TOK)
req_gen = h("vllm:request_generation_tokens", "Number of generation tokens processed.", TOK)
iters = h("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", IT)
h("vllm:request_max_num_generation_tokens", "Histogram of maximum number of requested generation tokens.", TOK)
h("vllm:request_params_n", "Histogram of the n request parameter.", [1, 2, 5, 10, 20])
max_tok = h("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", TOK)
ttft = h("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT)
itl = h("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", ITL)
tpot = h("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.", ITL)
e2e = h("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", LAT)
queue = h("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", LAT)
infer = h("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", LAT)
prefill = h("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", LAT)
decode = h("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", LAT)
kv_computed = h("vllm:request_prefill_kv_computed_tokens", "Histogram of new KV tokens computed during prefill (excluding cached tokens).", TOK)

s = lambda ns: ns / 1e9  # the simulator's engine timestamps are integer nanoseconds

# Hand trace (times in ms; step = 10 ms + 2 ms per computed token; k = 2 drafts):
# R0 arrives 0, prompt 100 = 60 computed + 32 local hit + 8 KV transfer, n = 7,
#    decode steps (drafts, accepted) = (2,2), (2,0), (2->1 clamped, 1).
#    prefill 0..130 (60 tokens); decode 130..146 (3 tokens), 146..162 (3), 162..176 (2).
#    outputs: 130 ms 1 token, 146 ms 3 tokens, 162 ms 1 token, 176 ms 2 tokens.
# R1 arrives 1000, prompt 10 computed, n = 1: one step 1000..1030 (10 + 2*10).
# R2 arrives 2000, prompt 20 computed, n = 0 (engine error): one step 2000..2050 (10 + 2*20).
# Snapshot at 3000 ms.
def step(prompt_tokens=None, gen_tokens=0, iteration=0, ttft_ns=None, itl_ns=None):
    if prompt_tokens:
        total, local, hit, ext = prompt_tokens
        pq.inc(total); ph.inc(hit)
        if ext:
            eq.inc(total - hit); eh.inc(ext)
        prompt.inc(total); by_src["local_compute"].inc(local); by_src["local_cache_hit"].inc(hit)
        by_src["external_kv_transfer"].inc(ext); cached.inc(hit + ext)
    else:
        pq.inc(0); ph.inc(0); prompt.inc(0)
        for v in by_src.values():
            v.inc(0)
        cached.inc(0)
    pre.inc(0)
    gen.inc(gen_tokens)
    iters.observe(iteration)
    if ttft_ns is not None:
        ttft.observe(s(ttft_ns))
    if itl_ns is not None:
        itl.observe(s(itl_ns))


def finish(reason, e2e_ns, queue_ns, prefill_ns, infer_ns, decode_ns, prompt_total, kv_comp, n, tpot_v):
    success[reason].inc()
    e2e.observe(s(e2e_ns)); queue.observe(s(queue_ns)); prefill.observe(s(prefill_ns))
    infer.observe(s(infer_ns)); decode.observe(s(decode_ns)); kv_computed.observe(kv_comp)
    req_prompt.observe(prompt_total); req_gen.observe(n); tpot.observe(tpot_v); max_tok.observe(256)


# R0 step 1 (ends 130 ms): first output 1 token; iteration tokens (0.33) = 60 computed + 1.
step((100, 60, 32, 8), gen_tokens=1, iteration=61, ttft_ns=130_000_000)
# R0 step 2 (146 ms): 3 tokens, 2 drafts, 2 accepted (positions 0 and 1).
drafts.inc(1); draft_tokens.inc(2); accepted.inc(2); per_pos["0"].inc(1); per_pos["1"].inc(1)
step(gen_tokens=3, iteration=3, itl_ns=16_000_000)
# R0 step 3 (162 ms): 1 token, 2 drafts, 0 accepted.
drafts.inc(1); draft_tokens.inc(2); accepted.inc(0); per_pos["0"].inc(0); per_pos["1"].inc(0)
step(gen_tokens=1, iteration=1, itl_ns=16_000_000)
# R0 step 4 (176 ms): 2 tokens, 1 draft (clamped: 1 token left after the sampled one), 1 accepted.
drafts.inc(1); draft_tokens.inc(1); accepted.inc(1); per_pos["0"].inc(1); per_pos["1"].inc(0)
step(gen_tokens=2, iteration=2, itl_ns=14_000_000)
# R0 finishes: e2e 176, queue 0, prefill 130, inference 176, decode 46 ms; TPOT = 0.046 / 6.
finish("stop", 176_000_000, 0, 130_000_000, 176_000_000, 46_000_000, 100, 60, 7, s(46_000_000) / 6)
# R1 (1030 ms): 1 token, TTFT 30 ms, iteration 10 + 1; finishes stop with TPOT exactly 0.
step((10, 10, 0, 0), gen_tokens=1, iteration=11, ttft_ns=30_000_000)
finish("stop", 30_000_000, 0, 30_000_000, 30_000_000, 0, 10, 10, 1, 0)
# R2 (2050 ms): 0 tokens, TTFT 50 ms, iteration 20 + 0; finishes error, n = 0, TPOT 0.
step((20, 20, 0, 0), gen_tokens=0, iteration=20, ttft_ns=50_000_000)
finish("error", 50_000_000, 0, 50_000_000, 50_000_000, 0, 20, 20, 0, 0)
running.set(0); waiting.set(0); kv.set(0.0)

print(generate_latest(R).decode(), end="")
