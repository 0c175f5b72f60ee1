"""Compare, through Prometheus' query API, the corrected families with the benchmark's truth.

Usage: python deploy_compare.py PROM_URL BATCH_ROOT [--json OUT]

Prometheus scraped vLLM every second, remote-wrote the raw vllm:* series to the corrector and
scraped the corrector back. For every BATCH_ROOT/<batch>/ with batch.json (batches.py) and
truth.json (truth.py, from the dumps taken around the batch), reads each family at two instants:
t0 = the batch's start − 0.5 s and t1 = its end + settle − 0.5 s (batches.py idled `settle`
seconds after it, longer than the corrector's lag of a send deadline plus a scrape). The
increase over the batch window is `x @ t1 − x @ t0`, which is what `x - x offset <t1−t0>`
evaluates to at t1 (exact, unlike increase()'s extrapolation to the window's edges).
"""

import json
import os
import sys
import urllib.parse
import urllib.request

from table import count as cnt, ms as m, pct, print_table, write_json

RAW_TPOT = "vllm:request_time_per_output_token_seconds"
RAW_ITL = "vllm:inter_token_latency_seconds"
CANON = "vllm_corrected_request_time_per_output_token_seconds"
TW = "vllm_corrected_token_weighted_itl_seconds"
ACC = "vllm_corrected_acceptance_corrected_itl_seconds"
SERIES = [f"{f}_{s}" for f in (RAW_TPOT, RAW_ITL, CANON, TW, ACC) for s in ("sum", "count")] + [
    "vllm:generation_tokens_total", "vllm:spec_decode_num_accepted_tokens_total"]


def query(prom: str, expr: str, t: float) -> float | None:
    url = f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr, "time": f"{t:.3f}"})
    with urllib.request.urlopen(url, timeout=10) as r:
        res = json.load(r)["data"]["result"]
    return float(res[0]["value"][1]) if res else None


def main() -> None:
    prom, root = sys.argv[1:3]
    out_json = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    rows = []
    for name in sorted(os.listdir(root)):
        d = os.path.join(root, name)
        if not os.path.isfile(os.path.join(d, "truth.json")):
            continue
        with open(os.path.join(d, "batch.json")) as f:
            b = json.load(f)
        with open(os.path.join(d, "truth.json")) as f:
            t = json.load(f)
        t0 = b["start_unix"] - 0.5
        t1 = b["end_unix"] + b["settle_s"] - 0.5
        inc = {}
        for s in SERIES:
            a, z = query(prom, f'sum({{__name__="{s}"}})', t0), query(prom, f'sum({{__name__="{s}"}})', t1)
            inc[s] = None if a is None or z is None else z - a
        ratio = lambda f: (inc[f + "_sum"] / inc[f + "_count"]  # noqa: E731
                           if inc[f + "_sum"] is not None and inc[f + "_count"] else None)
        rows.append({
            "batch": name, "t0": t0, "t1": t1, "increase": inc,
            "truth": {k: t[k] for k in ("requests", "requests_n_gt_1", "tokens_after_first",
                                        "bench_mean_tpot_s", "server_per_token_itl_s",
                                        "output_tokens")},
            "raw_tpot_mean_s": ratio(RAW_TPOT), "canonical_tpot_mean_s": ratio(CANON),
            "raw_itl_mean_s": ratio(RAW_ITL), "token_weighted_itl_s": ratio(TW),
            "acceptance_corrected_itl_s": ratio(ACC),
        })
    print_rows(rows)
    write_json(out_json, rows)


def print_rows(rows) -> None:
    """The comparison table of `rows` (the objects written to --json)."""
    print("through Prometheus (increase over each batch window; times in ms, errors vs truth)")
    hdr = ("batch", "canon n", "n>1", "tw n", "acc n", "Σ(n−1)", "gen tok", "bench out",
           "bench TPOT", "raw TPOT", "err", "canon TPOT", "err", "truth ITL", "raw ITL", "err",
           "tw ITL", "err", "acc ITL", "err")
    table = []
    for r in rows:
        i, tr = r["increase"], r["truth"]
        table.append((
            r["batch"], cnt(i[CANON + "_count"]), str(tr["requests_n_gt_1"]), cnt(i[TW + "_count"]),
            cnt(i[ACC + "_count"]), str(tr["tokens_after_first"]), cnt(i["vllm:generation_tokens_total"]),
            str(tr["output_tokens"]), m(tr["bench_mean_tpot_s"]), m(r["raw_tpot_mean_s"]),
            pct(r["raw_tpot_mean_s"], tr["bench_mean_tpot_s"]), m(r["canonical_tpot_mean_s"]),
            pct(r["canonical_tpot_mean_s"], tr["bench_mean_tpot_s"]), m(tr["server_per_token_itl_s"]),
            m(r["raw_itl_mean_s"]), pct(r["raw_itl_mean_s"], tr["server_per_token_itl_s"]),
            m(r["token_weighted_itl_s"]), pct(r["token_weighted_itl_s"], tr["server_per_token_itl_s"]),
            m(r["acceptance_corrected_itl_s"]),
            pct(r["acceptance_corrected_itl_s"], tr["server_per_token_itl_s"]),
        ))
    print_table(hdr, table)


if __name__ == "__main__":
    main()
