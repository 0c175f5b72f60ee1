"""Compare the corrector's `inspect` on each captured batch with the benchmark's truth.

Usage: python report.py CORRECTOR_BIN FIXTURE_ROOT [--show-inspect] [--json OUT]

For every FIXTURE_ROOT/<batch>/ holding before.prom, after.prom and truth.json (truth.py), runs
`CORRECTOR_BIN inspect --json before.prom after.prom` and prints one row per batch:

  raw TPOT      Δ TPOT _sum / Δ TPOT _count from the dumps, vs the bench's mean TPOT (n > 1)
  canonical     the corrector's canonical TPOT mean, vs the bench's mean TPOT
  tw ITL        the corrector's token-weighted ITL, vs Δ ITL _sum / Σ max(n−1, 0) (server-side
                per-token truth: vLLM's own ITL time over the tokens the bench received)
  acc ITL       the corrector's acceptance-corrected ITL, vs the same truth
  acc count     Δ ITL _sum / acc ITL = the count the corrector divided by, vs Σ max(n−1, 0)
  iter raw      Δ iteration_tokens_total _sum / _count, vLLM's raw tokens per iteration
  iter local    the corrector's local-compute iteration tokens (null before vLLM 0.16: withheld,
                with the reason `inspect` gives), and the raw mean's excess over it (the cache
                hits and KV transfers vLLM 0.16-0.22 count as computed)
Errors are (value − truth) / truth.
"""

import json
import os
import subprocess
import sys

from table import ms, pct, print_table, write_json


def main() -> None:
    binary, root = sys.argv[1:3]
    show = "--show-inspect" in sys.argv
    out_json = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    rows = []
    for name in sorted(os.listdir(root)):
        d = os.path.join(root, name)
        if not os.path.isfile(os.path.join(d, "truth.json")):
            continue
        with open(os.path.join(d, "truth.json")) as f:
            t = json.load(f)
        args = [binary, "inspect", os.path.join(d, "before.prom"), os.path.join(d, "after.prom")]
        groups = json.loads(subprocess.run(args[:2] + ["--json"] + args[2:], check=True,
                                           capture_output=True, text=True).stdout or "null")
        if isinstance(groups, dict):
            groups = [groups]
        if show:
            text = subprocess.run(args, capture_output=True, text=True)
            print(f"── {name}: inspect ──\n{text.stdout}{text.stderr}")
        g = groups[0] if groups else {}
        raw = t["raw_deltas"]
        truth_itl = t["server_per_token_itl_s"]
        acc = g.get("acceptance_corrected_itl_seconds")
        acc_count = raw["itl_sum"] / acc if acc else None
        row = {
            "batch": name,
            "requests": t["requests"],
            "n_le_1": t["requests_n_le_1"],
            "tokens_after_first": t["tokens_after_first"],
            "itl_count": raw["itl_count"],
            "accepted": raw["spec_decode_num_accepted_tokens"],
            "acceptance_length": (1 + raw["spec_decode_num_accepted_tokens"] / raw["spec_decode_num_drafts"]
                                  if raw["spec_decode_num_drafts"] else None),
            "bench_tpot_mean_s": t["bench_mean_tpot_s"] if t["requests_n_gt_1"] else None,
            "raw_tpot_mean_s": g.get("raw_tpot_mean_seconds"),
            "canonical_tpot_mean_s": g.get("canonical_tpot_mean_seconds"),
            "truth_itl_per_token_s": truth_itl,
            "raw_itl_mean_s": g.get("raw_itl_mean_seconds"),
            "token_weighted_itl_s": g.get("token_weighted_itl_seconds"),
            "acceptance_corrected_itl_s": acc,
            "acceptance_corrected_count": acc_count,
            "raw_iteration_tokens_mean": t.get("raw_iteration_tokens_mean"),
            "local_compute_iteration_tokens_mean": g.get("local_compute_iteration_tokens_mean"),
            "local_compute_null_reason": (g.get("null_reasons") or {}).get(
                "local_compute_iteration_tokens_mean"),
            "groups": len(groups),
        }
        rows.append(row)
    hdr = ("batch", "req", "n≤1", "Σ(n−1)", "ITL n", "acc", "AL", "bench TPOT", "raw TPOT", "err",
           "canon TPOT", "err", "truth ITL/tok", "raw ITL", "err", "tw ITL", "err", "acc ITL", "err",
           "ITL n+acc", "−Σ(n−1)", "iter raw", "iter local", "raw excess")
    table = []
    for r in rows:
        table.append((
            r["batch"], str(r["requests"]), str(r["n_le_1"]), str(r["tokens_after_first"]),
            f"{r['itl_count']:.0f}", f"{r['accepted']:.0f}",
            "—" if r["acceptance_length"] is None else f"{r['acceptance_length']:.2f}",
            ms(r["bench_tpot_mean_s"]), ms(r["raw_tpot_mean_s"]),
            pct(r["raw_tpot_mean_s"], r["bench_tpot_mean_s"]),
            ms(r["canonical_tpot_mean_s"]), pct(r["canonical_tpot_mean_s"], r["bench_tpot_mean_s"]),
            ms(r["truth_itl_per_token_s"]), ms(r["raw_itl_mean_s"]),
            pct(r["raw_itl_mean_s"], r["truth_itl_per_token_s"]),
            ms(r["token_weighted_itl_s"]), pct(r["token_weighted_itl_s"], r["truth_itl_per_token_s"]),
            ms(r["acceptance_corrected_itl_s"]),
            pct(r["acceptance_corrected_itl_s"], r["truth_itl_per_token_s"]),
            "—" if r["acceptance_corrected_count"] is None else f"{r['acceptance_corrected_count']:.0f}",
            "—" if r["acceptance_corrected_count"] is None
            else f"{round(r['acceptance_corrected_count'] - r['tokens_after_first']):+d}",
            "—" if r["raw_iteration_tokens_mean"] is None else f"{r['raw_iteration_tokens_mean']:.2f}",
            (r["local_compute_null_reason"] or "—") if r["local_compute_iteration_tokens_mean"] is None
            else f"{r['local_compute_iteration_tokens_mean']:.2f}",
            pct(r["raw_iteration_tokens_mean"], r["local_compute_iteration_tokens_mean"]),
        ))
    print("times in ms; errors against the truth column to their left (TPOT: bench mean over n > 1; "
          "ITL: Δ ITL _sum / Σ max(n−1, 0))")
    print_table(hdr, table)
    write_json(out_json, rows)


if __name__ == "__main__":
    main()
