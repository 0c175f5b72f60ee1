#!/usr/bin/env python3
"""Peak RSS of a corrector binary answering /api/v1/groups, /status and /metrics with N one-series
groups (issue 23 item 1; docs/RELIABILITY.md, "Responses").

Starts BINARY on a free loopback port, remote-writes N lone `vllm:generation_tokens_total` series
(RW 1.0, each its own group, as a cardinality flood sends them), then for each scenario resets the
process's peak RSS (`echo 5 > /proc/PID/clear_refs`, needs root or the process's owner), runs it and
prints the peak (VmHWM) and the response bytes. A paged binary is walked through every page; an
unpaged one answers the whole list at once. Last, one and three `/metrics` scrapes of 600 groups
whose series carry 20 labels of 2 000 bytes (a page of tens of MB).

    python3 scripts/response_memory.py target/release/vllm-corrector [N [MAX_MEMORY_BYTES]]

The default budget (384 MiB) holds about 65 000 lone groups (the rest are evicted for room, as
groups that feed no family); MAX_MEMORY_BYTES, written to a temporary `--config.file` as
`limits.max_memory_bytes`, raises it so that all N are held.

Standard library only: the snappy stream is written with literal blocks (valid snappy, not
compressed) and the protobuf by hand.
"""

import json
import os
import re
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, payload):
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def series(labels, value, ts):
    body = b"".join(
        field(1, field(1, n.encode()) + field(2, v.encode())) for n, v in labels
    )
    sample = b"\x09" + struct.pack("<d", value) + b"\x10" + varint(ts)
    return field(1, body + field(2, sample))


def snappy_literal(data):
    out = bytearray(varint(len(data)))
    for i in range(0, len(data), 65536):
        chunk = data[i : i + 65536]
        out += bytes([61 << 2]) + struct.pack("<H", len(chunk) - 1) + chunk
    return bytes(out)


def post(base, body):
    request = urllib.request.Request(
        base + "/api/v1/write",
        data=snappy_literal(body),
        headers={
            "Content-Type": "application/x-protobuf",
            "Content-Encoding": "snappy",
            "X-Prometheus-Remote-Write-Version": "0.1.0",
        },
    )
    with urllib.request.urlopen(request) as response:
        response.read()


def status(pid):
    text = open(f"/proc/{pid}/status").read()
    rss = int(re.search(r"VmRSS:\s+(\d+)", text).group(1))
    hwm = int(re.search(r"VmHWM:\s+(\d+)", text).group(1))
    return rss // 1024, hwm // 1024


def get(url):
    with urllib.request.urlopen(url, timeout=300) as response:
        return response.read()


def walk(base, path):
    """Every page of `path` (following `next` or the "next page" link); total bytes, pages, max page."""
    total, pages, largest = 0, 0, 0
    url = base + path
    while url:
        body = get(url)
        total += len(body)
        pages += 1
        largest = max(largest, len(body))
        url = None
        if path.startswith("/api"):
            nxt = json.loads(body).get("next")
            if nxt:
                url = f"{base}/api/v1/groups?after={nxt}"
        else:
            m = re.search(rb'<a id="next-page" href="([^"]+)"', body)
            if m:
                url = base + "/" + m.group(1).decode().replace("&amp;", "&")
    return total, pages, largest


def start(binary, n, config):
    """The binary on a free loopback port, holding `n` one-series groups: (process, base URL)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [binary, f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"]
        + ([f"--config.file={config}"] if config else [])
    )
    for _ in range(100):
        try:
            get(base + "/-/healthy")
            break
        except OSError:
            time.sleep(0.1)
    now = int(time.time() * 1000)
    for first in range(0, n, 2000):
        body = b"".join(
            series(
                [
                    ("__name__", "vllm:generation_tokens_total"),
                    ("engine", "0"),
                    ("instance", f"10.0.{i // 250}.{i % 250}:8000"),
                    ("job", "flood"),
                    ("model_name", "m"),
                ],
                1.0,
                now,
            )
            for i in range(first, min(n, first + 2000))
        )
        post(base, body)
    return proc, base


def concurrently(k, base, path):
    results = []
    threads = [
        threading.Thread(target=lambda: results.append(walk(base, path)))
        for _ in range(k)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total, pages, largest = results[0]
    return f"{total} bytes in {pages} response(s), largest {largest} bytes"


SCENARIOS = [
    ("one walk of /api/v1/groups", 1, "/api/v1/groups"),
    ("three walks of /api/v1/groups at once", 3, "/api/v1/groups"),
    ("one walk of /status", 1, "/status"),
    ("three walks of /status at once", 3, "/status"),
]


def main():
    binary = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    config = tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False)
    config.write("engine:\n  settle_scrapes: 0\n")
    if len(sys.argv) > 3:
        config.write(f"limits:\n  max_memory_bytes: {int(sys.argv[3])}\n")
    config.close()
    config = config.name
    print(f"{binary}, {n} one-series groups, a fresh process per scenario:")
    for name, k, path in SCENARIOS:
        proc, base = start(binary, n, config)
        try:
            groups = get(base + "/metrics").decode()
            held = re.search(r"^vllm_corrector_active_groups (\d+)", groups, re.M)
            rss, _ = status(proc.pid)
            open(f"/proc/{proc.pid}/clear_refs", "w").write("5")
            began = time.time()
            detail = concurrently(k, base, path)
            _, hwm = status(proc.pid)
            print(
                f"  {name}: RSS {rss} MiB before ({held.group(1) if held else '?'} groups held), "
                f"peak {hwm} MiB, {time.time() - began:.1f} s; {detail}"
            )
        finally:
            proc.terminate()
            proc.wait()
    # /metrics: 600 groups serving token-weighted ITL whose series carry 20 labels of 2 000 bytes,
    # repeated on every line of the page (issue 23 item 3's shape), sent 50 groups a request.
    for k in (1, 3):
        proc, base = start(binary, 0, config)
        try:
            now = int(time.time() * 1000)
            for ts, scale, first in (
                (ts, scale, first)
                for ts, scale in ((now - 15_000, 1.0), (now, 2.0))
                for first in range(0, 600, 50)
            ):
                body = b"".join(
                    series(
                        [("__name__", name), ("instance", f"vllm-{g}:8000")]
                        + [(f"pad_{i:02}", f"{i:02}" * 1000) for i in range(20)],
                        value * scale,
                        ts,
                    )
                    for g in range(first, first + 50)
                    for name, value in (
                        ("vllm:inter_token_latency_seconds_sum", 2.4),
                        ("vllm:generation_tokens_total", 1000.0),
                        ("vllm:time_to_first_token_seconds_count", 40.0),
                    )
                )
                post(base, body)
            rss, _ = status(proc.pid)
            open(f"/proc/{proc.pid}/clear_refs", "w").write("5")
            began = time.time()
            sizes = []
            threads = [
                threading.Thread(target=lambda: sizes.append(len(get(base + "/metrics"))))
                for _ in range(k)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            _, hwm = status(proc.pid)
            print(
                f"  {k} /metrics at once (600 label-heavy groups): RSS {rss} MiB before, "
                f"peak {hwm} MiB, {time.time() - began:.1f} s; {sizes[0]} bytes each"
            )
        finally:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
