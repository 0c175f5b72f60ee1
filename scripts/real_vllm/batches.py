"""Run `vllm bench serve` batches against a running vLLM and dump /metrics around each.

Usage: python batches.py --vllm VLLM_BIN --url http://127.0.0.1:PORT --tokenizer DIR
                         --out DIR --server TAG [--only NAME,...] [--goodput]

TAG is the running server's configuration (`versions.py`: d3, d5, d0, h0, kv). For every batch
that runs on it (BATCHES below), in order, with LABEL = <batch>_<TAG>:
  OUT/<label>/before.prom   GET /metrics right before the batch (raw exposition text)
  OUT/<label>/bench.json    `vllm bench serve --save-result --save-detailed` (per-request results)
  OUT/<label>/after.prom    GET /metrics right after it
  OUT/<label>/batch.json    the batch's spec, the bench command line and wall-clock start/end
Each batch is sequential and alone on the server, so the dumps' differences are that batch's.

With --goodput it runs the GOODPUT batches instead (and only those): after an unrecorded warm-up,
the batch's bench runs start together, each with `--goodput`, and `frames.Poller` reads /metrics
every 0.5 s from right before them to right after (OUT/<label>/frames.jsonl; before.prom and
after.prom are its first and last frame). bench-<run>.json is each run's result; batch.json also
holds a (unix, monotonic) clock pair, so the bench's per-request `start_times` (perf_counter,
CLOCK_MONOTONIC like time.monotonic) can be put on the frames' wall clock.
"""

import argparse
import json
import os
import subprocess
import time
import urllib.request

from frames import Poller

# Shared bench settings: short random prompts, a few concurrent requests, percentiles of all four
# latency metrics. With the random dataset `vllm bench serve` always sends ignore_eos=true; the
# eos batch overrides it through --extra-body.
COMMON = [
    "--backend", "openai", "--endpoint", "/v1/completions", "--dataset-name", "random",
    "--request-rate", "inf", "--max-concurrency", "4", "--seed", "7",
    "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
    "--num-warmups", "0", "--disable-tqdm",
]

# The server tags a batch runs on: every kind on the main server of each version (d3 on 0.22 and
# 0.32, d0 and h0 on 0.14, which has no spec decoding on CPU); the 5-draft server only where the
# draft length matters (requests cut mid-step); the DecodeBenchConnector server (kv, no drafts) on
# the batches whose prompts it turns into KV transfers.
MAIN = ("d3", "d0", "h0")

# name -> (server tags it runs on, bench arguments, what it covers)
BATCHES = {
    "one_token": (MAIN + ("kv",), [
        "--num-prompts", "24", "--random-input-len", "32", "--random-output-len", "1",
        "--random-range-ratio", "0", "--temperature", "0",
    ], "max_tokens=1: every request has n = 1, so no TPOT and no ITL sample"),
    "greedy": (MAIN + ("d5", "kv"), [
        "--num-prompts", "32", "--random-input-len", "48", "--random-output-len", "40",
        "--random-range-ratio", "0.6", "--temperature", "0",
    ], "temperature 0: the random tied-embedding model repeats its last token and the n-gram "
       "drafts are accepted; max_tokens 16-64 cuts every request, often mid-step"),
    "long": (("d3",), [
        "--num-prompts", "16", "--random-input-len", "48", "--random-output-len", "384",
        "--random-range-ratio", "0", "--temperature", "0",
    ], "greedy with 384 tokens per request: with n-gram drafts a short request can finish on "
       "the server (0.22: about 33 ms for 40 tokens) before the client has read its first chunk "
       "(30-40 ms of HTTP and client overhead on 2 shared cores), and the client then reads every "
       "later chunk in one burst; a long decode is streamed to the client as it happens"),
    "sampled": (MAIN + ("kv",), [
        "--num-prompts", "24", "--random-input-len", "48", "--random-output-len", "40",
        "--random-range-ratio", "0.5", "--temperature", "1.0",
    ], "temperature 1 over the whole vocabulary: drafts are almost never accepted"),
    "prefix": (MAIN + ("kv",), [
        "--num-prompts", "24", "--random-prefix-len", "160", "--random-input-len", "16",
        "--random-output-len", "32", "--random-range-ratio", "0.5", "--temperature", "0",
    ], "a 160-token prefix shared by every prompt: prefix-cache hits (the CPU backend's KV "
       "blocks are 128 tokens, so one full block of the prefix is cached); greedy"),
    "eos": (MAIN, [
        "--num-prompts", "24", "--random-input-len", "48", "--random-output-len", "64",
        "--random-range-ratio", "0", "--temperature", "0.2",
        "--extra-body", json.dumps({"ignore_eos": False}),
    ], "temperature 0.2: the repeated token or </s> (given a logit excess in the model) is "
       "drawn most often, so some requests end by EOS at random lengths, with some accepted "
       "drafts (top-k is not used: with n-gram drafts it crashes vLLM 0.32's CPU rejection "
       "sampler, `k.max()` on an empty tensor in apply_top_k_only)"),
    "stop": (MAIN + ("d5",), [
        "--num-prompts", "24", "--random-input-len", "48", "--random-output-len", "48",
        "--random-range-ratio", "0", "--temperature", "0",
        "--extra-body", json.dumps({"stop": ["a", "e", "i", "o"], "min_tokens": 9}),
    ], "greedy with stop strings (a, e, i, o: the OpenAI API allows 4) checked after 9 tokens: "
       "the detokenizer ends requests on a stop string, usually in the middle of a step's "
       "accepted tokens"),
}


# The goodput batches: bench runs that go on at the same time, each with `--goodput`. `main` sends
# faster than the server answers, up to 2 at once, so requests are in flight at every moment; it
# mixes output lengths 1..128 (uniform) with prompts of 63..191 tokens at temperature 0.8, where
# the n-gram drafts are almost all rejected and tokens come one a step. `greedy` (temperature 0,
# one after another) repeats a token, so its drafts are accepted and its tokens come several a
# step; being a closed loop, it also keeps a request in flight while the runs start and end at
# different times (each client takes 10-40 s to start).
# `one_token` adds n = 1 requests (TPOT 0 in the bench, a pass). These batches run on the larger
# model of real-vllm.sh (GOODPUT_SIZE): on the 2-layer model an engine step takes ~2 ms, every
# TPOT is under the lowest edge (10 ms) and the HTTP frontend's delays (tens of ms) dwarf the
# server's TTFT. The thresholds are default bucket edges of vLLM 0.32, chosen after trials on 2
# shared cores so that no SLI's attainment is 0 or 100 % and the goodput is below each of them.
GOODPUT_COMMON = [
    "--backend", "openai", "--endpoint", "/v1/completions", "--dataset-name", "random",
    "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
    "--num-warmups", "0", "--disable-tqdm",
]
GOODPUT_SLOS = ["ttft:80", "tpot:10", "e2el:1000"]
GOODPUT_SHAPE = ["--random-input-len", "128", "--random-output-len", "64",
                 "--random-range-ratio", json.dumps({"input": 0.5, "output": 0.99})]
GOODPUT_MAIN = ["--request-rate", "6", "--max-concurrency", "2", "--seed", "7",
                "--temperature", "0.8", *GOODPUT_SHAPE]
# name -> (server tags, warm-up bench args, {run: bench args}, --goodput SLOs, what it covers)
GOODPUT = {
    "goodput": (("d3", "d0"), GOODPUT_MAIN + ["--num-prompts", "16"], {
        "main": GOODPUT_MAIN + ["--num-prompts", "80"],
        "greedy": ["--request-rate", "inf", "--max-concurrency", "1", "--seed", "9",
                   "--temperature", "0", *GOODPUT_SHAPE, "--num-prompts", "60"],
        "one_token": ["--request-rate", "1.5", "--max-concurrency", "2", "--seed", "8",
                      "--temperature", "0.8", "--random-input-len", "128",
                      "--random-output-len", "1", "--random-range-ratio", "0",
                      "--num-prompts", "20"],
    }, GOODPUT_SLOS, "`vllm bench serve --goodput` under load: three runs at once (output "
       "1..128 sampled, 1..128 greedy, and 1), requests in flight throughout, /metrics frames "
       "every 0.5 s"),
}


def get_metrics(url: str) -> str:
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        return r.read().decode()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vllm", required=True)
    ap.add_argument("--url", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--model", default="tiny-llama")
    ap.add_argument("--out", required=True)
    ap.add_argument("--server", required=True, help="the server's tag (versions.py)")
    ap.add_argument("--drafts", type=int, required=True, help="its num_speculative_tokens")
    ap.add_argument("--serve-args", default="[]", help="its vllm serve arguments, JSON")
    ap.add_argument("--only", default="")
    ap.add_argument("--settle", type=float, default=2.0,
                    help="idle seconds before and after each batch (longer through Prometheus)")
    ap.add_argument("--goodput", action="store_true", help="run the GOODPUT batches instead")
    args = ap.parse_args()
    if args.goodput:
        goodput_batches(args)
        return
    only = set(filter(None, args.only.split(",")))
    host, port = args.url.rsplit("//", 1)[1].split(":")
    for name, (servers, bench_args, covers) in BATCHES.items():
        if args.server not in servers or (only and name not in only):
            continue
        label = f"{name}_{args.server}"
        d = os.path.join(args.out, label)
        os.makedirs(d, exist_ok=True)
        cmd = [args.vllm, "bench", "serve", *COMMON, "--host", host, "--port", port,
               "--model", args.model, "--tokenizer", args.tokenizer, *bench_args,
               "--save-result", "--save-detailed", "--result-dir", d,
               "--result-filename", "bench.json", "--label", label]
        time.sleep(args.settle)  # let the previous batch's last records land
        with open(os.path.join(d, "before.prom"), "w") as f:
            f.write(get_metrics(args.url))
        t0 = time.time()
        with open(os.path.join(d, "bench.log"), "w") as log:
            subprocess.run(cmd, check=True, stdout=log, stderr=subprocess.STDOUT)
        t1 = time.time()
        # vLLM records a finished request's stats right after sending its last chunk.
        time.sleep(args.settle)
        with open(os.path.join(d, "after.prom"), "w") as f:
            f.write(get_metrics(args.url))
        with open(os.path.join(d, "batch.json"), "w") as f:
            json.dump({"name": name, "label": label, "server": args.server,
                       "serve_args": json.loads(args.serve_args),
                       "num_speculative_tokens": args.drafts, "covers": covers,
                       "bench_args": COMMON + bench_args,
                       "start_unix": t0, "end_unix": t1, "settle_s": args.settle}, f, indent=1)
        print(f"{label}: {t1 - t0:.1f} s", flush=True)


def goodput_batches(args) -> None:
    only = set(filter(None, args.only.split(",")))
    host, port = args.url.rsplit("//", 1)[1].split(":")
    for name, (servers, warmup, runs, slos, covers) in GOODPUT.items():
        if args.server not in servers or (only and name not in only):
            continue
        label = f"{name}_{args.server}"
        d = os.path.join(args.out, label)
        os.makedirs(d, exist_ok=True)
        base = [args.vllm, "bench", "serve", *GOODPUT_COMMON, "--host", host, "--port", port,
                "--model", args.model, "--tokenizer", args.tokenizer]
        # A fresh server compiles and warms its kernels on the first requests: not in the window.
        with open(os.path.join(d, "warmup.log"), "w") as log:
            subprocess.run(base + warmup, check=True, stdout=log, stderr=subprocess.STDOUT)
        time.sleep(args.settle)
        poller = Poller(args.url, os.path.join(d, "frames.jsonl"))
        poller.start()
        clock = {"unix": time.time(), "monotonic": time.monotonic()}
        procs = {}
        for run, run_args in runs.items():
            cmd = base + run_args + ["--goodput", *slos, "--save-result", "--save-detailed",
                                     "--result-dir", d, "--result-filename", f"bench-{run}.json",
                                     "--label", f"{label}-{run}"]
            procs[run] = subprocess.Popen(cmd, stdout=open(os.path.join(d, f"bench-{run}.log"), "w"),
                                          stderr=subprocess.STDOUT)
        failed = [run for run, p in procs.items() if p.wait() != 0]
        t1 = time.time()
        time.sleep(args.settle)  # the last finished requests' records land
        poller.stop()
        if failed:
            raise SystemExit(f"{label}: bench run(s) {failed} failed (see {d}/bench-*.log)")
        for fname, frame in (("before.prom", poller.first), ("after.prom", poller.last)):
            with open(os.path.join(d, fname), "w") as f:
                f.write(frame["text"])
        with open(os.path.join(d, "batch.json"), "w") as f:
            json.dump({"name": name, "label": label, "server": args.server,
                       "serve_args": json.loads(args.serve_args),
                       "num_speculative_tokens": args.drafts, "covers": covers,
                       "goodput": slos, "warmup_args": GOODPUT_COMMON + warmup,
                       "runs": {run: GOODPUT_COMMON + a + ["--goodput", *slos]
                                for run, a in runs.items()},
                       "clock": clock, "start_unix": clock["unix"], "end_unix": t1,
                       "settle_s": args.settle, "poll_interval_s": poller.interval,
                       "polls": poller.frames}, f, indent=1)
        print(f"{label}: {t1 - clock['unix']:.1f} s, {poller.frames} frames", flush=True)


if __name__ == "__main__":
    main()
