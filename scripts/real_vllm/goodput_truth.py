"""Reduce a goodput batch (`batches.py --goodput`) to fixture files and compute its truth.

Usage: python truth.py --goodput RAW_BATCH_DIR FIXTURE_BATCH_DIR   (truth.py calls `reduce`)

Reads RAW/{before.prom, after.prom, frames.jsonl, bench-<run>.json, batch.json}; writes FIXTURE/
  before.prom, after.prom  the first and last frame, reduced to vllm:* as for the other batches
  frames.prom              every frame, reduced to frames.FAMILIES (see frames.py)
  bench.json               the requests of every run, each with its `run`, the fields of the other
                           batches' bench.json, `tpot` (the bench's formula: (latency − ttft) /
                           (n − 1), 0 when n ≤ 1) and `sent_ms` (its send time on the frames'
                           clock); `goodput_ms` (the --goodput thresholds as the bench parses
                           them) and `runs` (each run's summary, with `request_goodput`)
  truth.json               truth.truth() of the window, plus `goodput` (see goodput_truth())
  batch.json               copied
Nothing is typed by hand: every number comes from the bench files, the dumps or the frames.
"""

import json
import os
import shutil

from frames import parse_frames, read_frames, reduce_frames
from promtext import Dump, reduce_to_vllm

SUMMARY = ("completed", "failed", "duration", "request_goodput", "request_throughput",
           "total_input_tokens", "total_output_tokens", "max_concurrent_requests")
FAMILY = {
    "ttft": "vllm:time_to_first_token_seconds",
    "tpot": "vllm:request_time_per_output_token_seconds",
    "e2el": "vllm:e2e_request_latency_seconds",
}
GEN_TOKENS = "vllm:request_generation_tokens_bucket"
VALUE = {"ttft": "ttft", "tpot": "tpot", "e2el": "latency"}  # the request field of each SLI


def parse_slos(slos: list) -> dict:
    """--goodput KEY:VALUE pairs as `vllm bench serve` parses them (ms, floats)."""
    return {k: float(v) for k, v in (s.split(":") for s in slos)}


def bench_tpot(r: dict) -> float:
    """vllm/benchmarks/serve.py calculate_metrics: a request with n <= 1 has TPOT 0."""
    n = r["output_len"]
    return (r["latency"] - r["ttft"]) / (n - 1) if n > 1 else 0.0


def reduce_run(run: str, raw: dict, clock: dict) -> tuple:
    reqs = []
    for i, n in enumerate(raw["output_lens"]):
        itls = raw["itls"][i] or []
        r = {"run": run, "input_len": raw["input_lens"][i], "output_len": n,
             "ttft": raw["ttfts"][i], "itl_count": len(itls), "itl_sum": sum(itls),
             "latency": raw["latencies"][i],
             "sent_ms": round((raw["start_times"][i] - clock["monotonic"] + clock["unix"]) * 1000, 3)}
        if raw["errors"][i]:
            r["error"] = raw["errors"][i]
        else:
            r["tpot"] = bench_tpot(r)
        reqs.append(r)
    summary = {k: raw[k] for k in SUMMARY if k in raw}
    summary.update({k: v for k, v in raw.items() if k.startswith("mean_") and k.endswith("_ms")})
    return reqs, summary


def edges(dump: Dump, family: str) -> list:
    """The finite `le` values of a histogram as served, ascending."""
    les = {l["le"] for n, l, _ in dump.samples if n == family + "_bucket"} - {"+Inf"}
    return sorted(les, key=float)


def client_good(values: list, thr: float) -> int:
    # The bench's rule (serve.py: `s >= r`) and Prometheus' `le` agree: good means value <= threshold.
    return sum(1 for v in values if v <= thr)


def sli_truth(sli: str, thr: float, values: list, before: Dump, after: Dump, minus: float) -> dict:
    """One SLI: client and server counts at `thr`, and the clock gap.

    `values` are the client's, on the population the server observes (for TPOT: n >= 2, and
    `minus` = the server's n <= 1 observations, TPOT 0, taken out of its count and buckets).
    """
    fam = FAMILY[sli]
    d = lambda name, **m: after.total(name, **m) - before.total(name, **m)  # noqa: E731
    le = next((e for e in edges(after, fam) if float(e) == thr), None)
    events = d(fam + "_count") - minus
    server_mean = d(fam + "_sum") / events if events else None
    client_mean = sum(values) / len(values) if values else None
    gap = client_mean - server_mean if values and events else None
    out = {
        "threshold_s": thr, "le": le,
        "client_events": len(values), "client_good": client_good(values, thr),
        "server_events": events,
        "server_good": d(fam + "_bucket", le=le) - minus if le else None,
        "client_mean_s": client_mean, "server_mean_s": server_mean, "clock_gap_s": gap,
    }
    if gap is not None:
        g = abs(gap)
        out["client_within_gap_above"] = sum(1 for v in values if thr < v <= thr + g)
        out["client_within_gap_below"] = sum(1 for v in values if thr - g < v <= thr)
    return out


def per_edge(sli: str, values: list, before: Dump, after: Dump, minus: float) -> dict:
    fam = FAMILY[sli]
    les = edges(after, fam)
    return {"le": les, "client_good": [client_good(values, float(e)) for e in les],
            "server_good": [after.total(fam + "_bucket", le=e) - before.total(fam + "_bucket", le=e)
                            - minus for e in les]}


def gauges(dump: Dump) -> dict:
    return {"running": dump.total("vllm:num_requests_running"),
            "waiting": dump.total("vllm:num_requests_waiting")}


def in_flight(ok: list, frames: list) -> dict:
    """Requests in flight, client-side (sent_ms .. sent_ms + latency) and in vLLM's gauges."""
    spans = sorted((r["sent_ms"], r["sent_ms"] + r["latency"] * 1000) for r in ok)
    first, last = spans[0][0], max(e for _, e in spans)
    longest_idle, reach = 0.0, spans[0][1]
    for s, e in spans[1:]:
        longest_idle = max(longest_idle, s - reach)
        reach = max(reach, e)
    inside = [f for f in frames if "text" in f and first <= f["sent_ms"] <= last]
    server_idle = 0
    for f in inside:
        g = gauges(Dump(f["text"]))
        server_idle += g["running"] + g["waiting"] == 0
    return {
        "first_sent_ms": first, "last_end_ms": last,
        "client_longest_idle_ms": longest_idle,
        "client_max_in_flight": max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans),
        "frames_in_span": len(inside),
        "frames_in_span_with_gauges_zero": server_idle,
    }


def goodput_truth(bench: dict, before: Dump, after: Dump, frames: list) -> dict:
    slos = {k: v / 1000 for k, v in bench["goodput_ms"].items()}
    ok = [r for r in bench["requests"] if "error" not in r]
    le1 = (after.total(GEN_TOKENS, le="1.0") - before.total(GEN_TOKENS, le="1.0"))
    values = {sli: [r[VALUE[sli]] for r in ok if sli != "tpot" or r["output_len"] > 1]
              for sli in FAMILY}
    good = [r for r in ok if all(r[VALUE[sli]] <= thr for sli, thr in slos.items())]
    runs = {}
    for run, s in bench["runs"].items():
        mine = [r for r in ok if r["run"] == run]
        runs[run] = {"completed": s["completed"], "duration_s": s["duration"],
                     "request_goodput": s["request_goodput"],
                     "good_from_request_goodput": s["request_goodput"] * s["duration"],
                     "good_from_records": sum(1 for r in good if r["run"] == run)}
    from_rate = sum(round(r["good_from_request_goodput"]) for r in runs.values())
    slis = {sli: sli_truth(sli, slos[sli], values[sli], before, after, le1 if sli == "tpot" else 0)
            for sli in FAMILY if sli in slos}
    # The bench's own TPOT SLI counts n <= 1 requests as passes (TPOT 0).
    if "tpot" in slis:
        slis["tpot"]["bench_events"] = len(ok)
        slis["tpot"]["bench_good"] = client_good([r["tpot"] for r in ok], slos["tpot"])
    bad = {sli: [r for r in ok if r[VALUE[sli]] > slos[sli]] for sli in slis}
    n_bad = {}
    for sli_bad in bad.values():
        for r in sli_bad:
            n_bad[id(r)] = n_bad.get(id(r), 0) + 1
    return {
        "config_ms": bench["goodput_ms"],
        "completed": len(ok),
        "failed": len(bench["requests"]) - len(ok),
        "good_from_records": len(good),
        "good_from_request_goodput": from_rate,
        "good_counts_agree": from_rate == len(good),
        "runs": runs,
        "requests_n_le_1": sum(1 for r in ok if r["output_len"] <= 1),
        "client_bad": {sli: len(b) for sli, b in bad.items()},
        "client_bad_in_two_or_more_slis": sum(1 for c in n_bad.values() if c >= 2),
        "client_attainment": {sli: 1 - len(b) / len(ok) for sli, b in bad.items()},
        "client_goodput_ratio": len(good) / len(ok),
        "server_attainment": {sli: s["server_good"] / s["server_events"] for sli, s in slis.items()
                              if s["server_good"] is not None and s["server_events"]},
        "server_request_generation_tokens_le_1": le1,
        "slis": slis,
        "per_edge": {sli: per_edge(sli, values[sli], before, after, le1 if sli == "tpot" else 0)
                     for sli in FAMILY},
        "in_flight_gauges": {"before": gauges(before), "after": gauges(after)},
        "in_flight": in_flight(ok, frames),
    }


def reduce(raw_dir: str, fx: str, truth_fn) -> dict:
    """Write the fixture files of one goodput batch; return its truth."""
    os.makedirs(fx, exist_ok=True)
    with open(os.path.join(raw_dir, "batch.json")) as f:
        batch = json.load(f)
    shutil.copy(os.path.join(raw_dir, "batch.json"), os.path.join(fx, "batch.json"))
    for name in ("before.prom", "after.prom"):
        with open(os.path.join(raw_dir, name)) as f, open(os.path.join(fx, name), "w") as g:
            g.write(reduce_to_vllm(f.read()))
    with open(os.path.join(fx, "frames.prom"), "w") as f:
        f.write(reduce_frames(read_frames(os.path.join(raw_dir, "frames.jsonl"))))
    reqs, runs = [], {}
    for run in batch["runs"]:
        with open(os.path.join(raw_dir, f"bench-{run}.json")) as f:
            r, s = reduce_run(run, json.load(f), batch["clock"])
        reqs += r
        runs[run] = s
    bench = {"latency_from": "latencies", "goodput_ms": parse_slos(batch["goodput"]),
             "runs": runs, "requests": reqs, "summary": {}}
    with open(os.path.join(fx, "bench.json"), "w") as f:
        json.dump(bench, f, indent=1)
    # Truth from the reduced files only, so the committed fixture reproduces it.
    with open(os.path.join(fx, "before.prom")) as f:
        before = Dump(f.read())
    with open(os.path.join(fx, "after.prom")) as f:
        after = Dump(f.read())
    with open(os.path.join(fx, "frames.prom")) as f:
        frames = parse_frames(f.read())
    t = truth_fn(bench, before, after, batch)
    t["goodput"] = goodput_truth(bench, before, after, frames)
    with open(os.path.join(fx, "truth.json"), "w") as f:
        json.dump(t, f, indent=1)
        f.write("\n")
    return t
