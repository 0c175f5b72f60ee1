"""Poll vLLM's /metrics while a batch runs, and reduce the polls to a compact frames file.

A frame is one GET /metrics: the wall-clock ms when it was sent and when its body had arrived,
and the served text. `Poller` keeps every frame of a batch in RAW/frames.jsonl (one JSON object a
line: `sent_ms`, `received_ms`, `text` or `error`), the first taken right before the batch and the
last right after it. `reduce_frames` keeps, of each frame, only the lines of FAMILIES (HELP, TYPE
and samples, in the order and format vLLM served them; the `_created` families are dropped) under
a header comment line:

    # frame <index> sent_ms=<unix ms> received_ms=<unix ms>

so each frame between two headers is valid text exposition on its own. <index> counts every poll
from 0; a poll whose reduced text is the same as both the previous and the next poll's is left
out (the bench clients take 10-40 s to start, idle), so a gap in the indices stands for polls
that read exactly the frames on both sides of the gap. The first and last polls are always kept,
and so is the last poll before anything changes. Standard library only.
"""

import json
import threading
import time
import urllib.request

from promtext import family_of

# Histograms: their _bucket, _sum and _count samples are kept.
HISTOGRAMS = (
    "vllm:time_to_first_token_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:request_time_per_output_token_seconds",
    "vllm:request_generation_tokens",
    "vllm:inter_token_latency_seconds",
)
# Counters and gauges, by their sample name.
SCALARS = (
    "vllm:generation_tokens_total",
    "vllm:spec_decode_num_accepted_tokens_total",
    "vllm:spec_decode_num_drafts_total",
    "vllm:spec_decode_num_accepted_tokens_per_pos_total",
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
)
FAMILIES = frozenset(HISTOGRAMS + SCALARS
                     + tuple(h + s for h in HISTOGRAMS for s in ("_bucket", "_sum", "_count")))


def now_ms() -> int:
    return int(time.time() * 1000)


class Poller:
    """GET URL/metrics every `interval` seconds on a thread, from start() to stop().

    start() takes the first frame itself before returning and stop() the last one after the
    thread has ended, so the first and last frames bracket everything sent in between. A poll
    that takes longer than the interval skips the slots it overran (the timestamps show it).
    """

    def __init__(self, url: str, path: str, interval: float = 0.5):
        self.url, self.interval = url + "/metrics", interval
        self.out = open(path, "w")
        self.frames = 0
        self.first = self.last = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _poll(self) -> dict:
        sent = now_ms()
        try:
            with urllib.request.urlopen(self.url, timeout=10) as r:
                frame = {"sent_ms": sent, "received_ms": now_ms(), "text": r.read().decode()}
        except OSError as e:
            frame = {"sent_ms": sent, "received_ms": now_ms(), "error": str(e)}
        self.out.write(json.dumps(frame) + "\n")
        self.frames += 1
        return frame

    def _run(self) -> None:
        t0 = time.monotonic()
        k = 1
        while not self._stop.wait(max(0.0, t0 + k * self.interval - time.monotonic())):
            self._poll()
            k = max(k + 1, int((time.monotonic() - t0) / self.interval) + 1)

    def start(self) -> dict:
        self.first = self._poll()
        if "error" in self.first:
            raise SystemExit(f"GET {self.url} failed before the batch: {self.first['error']}")
        self._thread.start()
        return self.first

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        self.last = self._poll()
        self.out.close()
        if "error" in self.last:
            raise SystemExit(f"GET {self.url} failed after the batch: {self.last['error']}")
        return self.last


def read_frames(path: str) -> list:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def parse_frames(text: str) -> list:
    """Read a frames file back: [{"index", "sent_ms", "received_ms", "text"}, ...]."""
    frames = []
    for line in text.splitlines(keepends=True):
        if line.startswith("# frame "):
            index, sent, received = line.split()[2:5]
            frames.append({"index": int(index), "sent_ms": int(sent.split("=")[1]),
                           "received_ms": int(received.split("=")[1]), "text": ""})
        else:
            frames[-1]["text"] += line
    return frames


def reduce_text(text: str) -> str:
    """The lines of FAMILIES in `text`, in the order served."""
    return "".join(l + "\n" for l in text.splitlines() if family_of(l) in FAMILIES)


def reduce_frames(frames: list) -> str:
    """The frames file: every poll that read /metrics, reduced, under its header line, except
    the polls that read the same as the polls on both sides of them."""
    texts = [reduce_text(f["text"]) if "text" in f else None for f in frames]
    out = []
    for i, f in enumerate(frames):
        if texts[i] is None:
            continue  # a failed poll (none so far): its index stays unused
        if 0 < i < len(frames) - 1 and texts[i - 1] == texts[i] == texts[i + 1]:
            continue
        out.append(f"# frame {i} sent_ms={f['sent_ms']} received_ms={f['received_ms']}\n")
        out.append(texts[i])
    return "".join(out)
