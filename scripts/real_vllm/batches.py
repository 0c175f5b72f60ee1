"""Run `vllm bench serve` batches against a running vLLM and dump /metrics around each.

Usage: python batches.py --vllm VLLM_BIN --url http://127.0.0.1:PORT --tokenizer DIR
                         --out DIR --server TAG [--only NAME,...]

TAG is the running server's configuration (`versions.py`: d3, d5, d0, h0, kv). For every batch
that runs on it (BATCHES below), in order, with LABEL = <batch>_<TAG>:
  OUT/<label>/before.prom   GET /metrics right before the batch (raw exposition text)
  OUT/<label>/bench.json    `vllm bench serve --save-result --save-detailed` (per-request results)
  OUT/<label>/after.prom    GET /metrics right after it
  OUT/<label>/batch.json    the batch's spec, the bench command line and wall-clock start/end
Each batch is sequential and alone on the server, so the dumps' differences are that batch's.
"""

import argparse
import json
import os
import subprocess
import time
import urllib.request

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
    args = ap.parse_args()
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


if __name__ == "__main__":
    main()
