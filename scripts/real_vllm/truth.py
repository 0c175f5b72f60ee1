"""Reduce a captured batch to fixture files and compute its truth from them.

Usage: python truth.py RAW_BATCH_DIR FIXTURE_BATCH_DIR
       python truth.py --window FIXTURE_DIR RAW_BATCH_DIR...
       python truth.py --goodput RAW_BATCH_DIR FIXTURE_BATCH_DIR

The third form is for the goodput batches (`batches.py --goodput`): goodput_truth.py reduces them
(frames too) and adds the `goodput` section to this truth.

The second form makes one window out of batches that ran back to back on one server (nothing
else ran between them): BEFORE of the first, AFTER of the last, the requests of all of them.
Its TPOT truth is the mean over n > 1 recomputed from the per-request results, as the bench does.

Reads RAW/{before.prom, after.prom, bench.json, batch.json}; writes into FIXTURE:
  before.prom, after.prom  the dumps reduced to vllm:* families (HELP/TYPE kept, as served)
  bench.json               per request: input_len, output_len, ttft, itl_count, itl_sum, latency
                           (seconds); and the bench summary's mean/median/p90/p99 TTFT, TPOT, ITL,
                           E2EL in ms, as `vllm bench serve` printed them. Releases before 0.32
                           (0.14, 0.22) save no per-request `latencies`; latency is then
                           ttft + Σ itls, which is how their client measures it (the last chunk's
                           time − the send time, with ttft and each itl read off the same clock),
                           and `latency_from` says so
  truth.json               counts from the per-request results and raw counter deltas from the
                           reduced dumps (see `truth()`)
  batch.json               copied
Nothing here is typed by hand: every number comes from the bench file or the dumps.
"""

import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(__file__))
from promtext import Dump, reduce_to_vllm  # noqa: E402

SUMMARY_KEYS = [f"{stat}_{m}_ms" for m in ("ttft", "tpot", "itl", "e2el")
                for stat in ("mean", "median", "p50", "p90", "p99")]


def reduce_bench(raw: dict) -> dict:
    reqs = []
    saved = "latencies" in raw
    for i, n in enumerate(raw["output_lens"]):
        err = raw["errors"][i]
        itls = raw["itls"][i] or []
        latency = raw["latencies"][i] if saved else raw["ttfts"][i] + sum(itls)
        reqs.append({
            "input_len": raw["input_lens"][i],
            "output_len": n,
            "ttft": raw["ttfts"][i],
            "itl_count": len(itls),
            "itl_sum": sum(itls),
            "latency": latency,
            **({"error": err} if err else {}),
        })
    summary = {k: raw[k] for k in SUMMARY_KEYS if k in raw}
    for k in ("completed", "failed", "total_input_tokens", "total_output_tokens", "duration"):
        if k in raw:
            summary[k] = raw[k]
    return {"latency_from": "latencies" if saved else "ttft + sum(itls)", "requests": reqs,
            "summary": summary}


def delta(before: Dump, after: Dump, name: str, **match) -> float:
    return after.total(name, **match) - before.total(name, **match)


def truth(bench: dict, before: Dump, after: Dump, batch: dict) -> dict:
    ok = [r for r in bench["requests"] if "error" not in r]
    n_gt_1 = [r for r in ok if r["output_len"] > 1]
    after_first = sum(max(r["output_len"] - 1, 0) for r in ok)
    tpots = [(r["latency"] - r["ttft"]) / (r["output_len"] - 1) for r in n_gt_1]
    d = lambda name, **m: delta(before, after, name, **m)  # noqa: E731
    itl = "vllm:inter_token_latency_seconds"
    old = "vllm:time_per_output_token_seconds"  # the old ITL name (0.14 with hidden metrics)
    raw = {
        "generation_tokens": d("vllm:generation_tokens_total"),
        "prompt_tokens": d("vllm:prompt_tokens_total"),
        "ttft_count": d("vllm:time_to_first_token_seconds_count"),
        "ttft_sum": d("vllm:time_to_first_token_seconds_sum"),
        "itl_count": d(f"{itl}_count"),
        "itl_sum": d(f"{itl}_sum"),
        **({"old_itl_count": d(f"{old}_count"), "old_itl_sum": d(f"{old}_sum")}
           if after.has(f"{old}_count") else {}),
        "tpot_count": d("vllm:request_time_per_output_token_seconds_count"),
        "tpot_sum": d("vllm:request_time_per_output_token_seconds_sum"),
        "e2el_count": d("vllm:e2e_request_latency_seconds_count"),
        "e2el_sum": d("vllm:e2e_request_latency_seconds_sum"),
        "request_generation_tokens_le_1": d("vllm:request_generation_tokens_bucket", le="1.0")
        or d("vllm:request_generation_tokens_bucket", le="1"),
        "request_generation_tokens_count": d("vllm:request_generation_tokens_count"),
        "spec_decode_num_accepted_tokens": d("vllm:spec_decode_num_accepted_tokens_total"),
        "spec_decode_num_drafts": d("vllm:spec_decode_num_drafts_total"),
        "spec_decode_num_draft_tokens": d("vllm:spec_decode_num_draft_tokens_total"),
        "spec_decode_num_accepted_tokens_per_pos": {
            p: v - before.by_label("vllm:spec_decode_num_accepted_tokens_per_pos_total", "position").get(p, 0.0)
            for p, v in sorted(after.by_label("vllm:spec_decode_num_accepted_tokens_per_pos_total",
                                              "position").items(), key=lambda kv: int(kv[0]))
        },
        "request_success_by_finished_reason": {
            r: v - before.by_label("vllm:request_success_total", "finished_reason").get(r, 0.0)
            for r, v in sorted(after.by_label("vllm:request_success_total", "finished_reason").items())
        },
        "prefix_cache_queries": d("vllm:prefix_cache_queries_total"),
        "prefix_cache_hits": d("vllm:prefix_cache_hits_total"),
        "prompt_tokens_by_source": {
            s: v - before.by_label("vllm:prompt_tokens_by_source_total", "source").get(s, 0.0)
            for s, v in sorted(after.by_label("vllm:prompt_tokens_by_source_total", "source").items())
        },
        "iteration_tokens_count": d("vllm:iteration_tokens_total_count"),
        "iteration_tokens_sum": d("vllm:iteration_tokens_total_sum"),
    }
    by_source = raw["prompt_tokens_by_source"]
    acc_count = raw["itl_count"] + raw["spec_decode_num_accepted_tokens"]
    return {
        "batch": batch["label"],
        "num_speculative_tokens": batch["num_speculative_tokens"],
        "requests": len(ok),
        "failed_requests": len(bench["requests"]) - len(ok),
        "requests_n_gt_1": len(n_gt_1),
        "requests_n_le_1": len(ok) - len(n_gt_1),
        "requests_n_0": sum(1 for r in ok if r["output_len"] == 0),
        "output_tokens": sum(r["output_len"] for r in ok),
        "tokens_after_first": after_first,
        "itl_samples_client": sum(r["itl_count"] for r in ok),
        # vllm bench serve prints 0 when no request has n > 1; there is no TPOT then.
        "bench_mean_tpot_s": (bench["summary"]["mean_tpot_ms"] / 1000 if "mean_tpot_ms" in bench["summary"]
                              else sum(tpots) / len(tpots)) if n_gt_1 else None,
        "recomputed_mean_tpot_s": sum(tpots) / len(tpots) if tpots else None,
        "client_token_weighted_itl_s": (sum(r["latency"] - r["ttft"] for r in ok) / after_first
                                        if after_first else None),
        "server_per_token_itl_s": raw["itl_sum"] / after_first if after_first else None,
        "raw_deltas": raw,
        "raw_tpot_mean_s": raw["tpot_sum"] / raw["tpot_count"] if raw["tpot_count"] else None,
        "raw_itl_mean_s": raw["itl_sum"] / raw["itl_count"] if raw["itl_count"] else None,
        "itl_count_plus_accepted": acc_count,
        "itl_count_plus_accepted_minus_tokens_after_first": acc_count - after_first,
        # Iteration tokens per iteration: vLLM's raw mean, and local compute + generation over
        # the same iterations (null before 0.16, which has no by-source prompt counter).
        "raw_iteration_tokens_mean": (raw["iteration_tokens_sum"] / raw["iteration_tokens_count"]
                                      if raw["iteration_tokens_count"] else None),
        "local_compute_iteration_tokens_mean": (
            (by_source["local_compute"] + raw["generation_tokens"]) / raw["iteration_tokens_count"]
            if by_source and raw["iteration_tokens_count"] else None),
    }


def window(fx: str, raw_dirs: list) -> None:
    os.makedirs(fx, exist_ok=True)
    for name, src in (("before.prom", raw_dirs[0]), ("after.prom", raw_dirs[-1])):
        with open(os.path.join(src, name)) as f, open(os.path.join(fx, name), "w") as g:
            g.write(reduce_to_vllm(f.read()))
    reqs, parts, latency_from = [], [], set()
    for d in raw_dirs:
        with open(os.path.join(d, "bench.json")) as f:
            reduced = reduce_bench(json.load(f))
        reqs += reduced["requests"]
        latency_from.add(reduced["latency_from"])
        with open(os.path.join(d, "batch.json")) as f:
            parts.append(json.load(f))
    bench = {"latency_from": " / ".join(sorted(latency_from)), "requests": reqs, "summary": {}}
    batch = {"name": "window", "label": os.path.basename(os.path.normpath(fx)),
             "server": parts[0].get("server"), "serve_args": parts[0].get("serve_args"),
             "num_speculative_tokens": parts[0]["num_speculative_tokens"],
             "covers": "every batch of one server, back to back, as one metric window: "
                       + ", ".join(p["label"] for p in parts),
             "parts": [p["label"] for p in parts],
             "start_unix": parts[0]["start_unix"], "end_unix": parts[-1]["end_unix"]}
    with open(os.path.join(fx, "bench.json"), "w") as f:
        json.dump(bench, f, indent=1)
    with open(os.path.join(fx, "batch.json"), "w") as f:
        json.dump(batch, f, indent=1)
    write_truth(fx, bench, batch)


def write_truth(fx: str, bench: dict, batch: dict) -> None:
    # Truth from the reduced files only, so the committed fixture reproduces it.
    with open(os.path.join(fx, "before.prom")) as f:
        before = Dump(f.read())
    with open(os.path.join(fx, "after.prom")) as f:
        after = Dump(f.read())
    t = truth(bench, before, after, batch)
    with open(os.path.join(fx, "truth.json"), "w") as f:
        json.dump(t, f, indent=1)
        f.write("\n")
    print(json.dumps({k: t[k] for k in ("batch", "requests", "requests_n_le_1", "output_tokens",
                                         "tokens_after_first", "itl_samples_client")}))


def main() -> None:
    if sys.argv[1] == "--window":
        window(sys.argv[2], sys.argv[3:])
        return
    if sys.argv[1] == "--goodput":
        from goodput_truth import reduce as reduce_goodput
        t = reduce_goodput(sys.argv[2], sys.argv[3], truth)
        g = t["goodput"]
        print(json.dumps({"batch": t["batch"], "requests": t["requests"],
                          "requests_n_le_1": t["requests_n_le_1"],
                          "good_from_records": g["good_from_records"],
                          "good_from_request_goodput": g["good_from_request_goodput"],
                          "client_attainment": g["client_attainment"],
                          "server_attainment": g["server_attainment"]}))
        return
    raw_dir, fx = sys.argv[1:3]
    os.makedirs(fx, exist_ok=True)
    for name in ("before.prom", "after.prom"):
        with open(os.path.join(raw_dir, name)) as f, open(os.path.join(fx, name), "w") as g:
            g.write(reduce_to_vllm(f.read()))
    with open(os.path.join(raw_dir, "bench.json")) as f:
        bench = reduce_bench(json.load(f))
    with open(os.path.join(fx, "bench.json"), "w") as f:
        json.dump(bench, f, indent=1)
    shutil.copy(os.path.join(raw_dir, "batch.json"), os.path.join(fx, "batch.json"))
    with open(os.path.join(fx, "batch.json")) as f:
        batch = json.load(f)
    write_truth(fx, bench, batch)


if __name__ == "__main__":
    main()
