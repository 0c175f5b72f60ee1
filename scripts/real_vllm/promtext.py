"""A small reader of the Prometheus text exposition format (0.0.4), enough for vLLM's /metrics.

Only what the harness needs: sample lines become (name, labels, value); HELP/TYPE comments are
kept verbatim for reducing a dump. Escapes in label values (\\, \", \\n) are decoded.
"""

import math
import re

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def _parse_labels(s: str, i: int):
    labels = {}
    # s[i] == "{"
    i += 1
    while True:
        while i < len(s) and s[i] in " ,":
            i += 1
        if s[i] == "}":
            return labels, i + 1
        m = _NAME.match(s, i)
        name = m.group(0)
        i = m.end()
        assert s[i] == "=" and s[i + 1] == '"', s
        i += 2
        out = []
        while s[i] != '"':
            if s[i] == "\\":
                nxt = s[i + 1]
                out.append({"n": "\n", "\\": "\\", '"': '"'}.get(nxt, nxt))
                i += 2
            else:
                out.append(s[i])
                i += 1
        labels[name] = "".join(out)
        i += 1


def parse(text: str):
    """Yield (name, labels: dict, value: float) for every sample line."""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _NAME.match(line)
        name = m.group(0)
        i = m.end()
        labels = {}
        if i < len(line) and line[i] == "{":
            labels, i = _parse_labels(line, i)
        rest = line[i:].split()
        v = rest[0]
        value = {"+Inf": math.inf, "-Inf": -math.inf, "NaN": math.nan}.get(v)
        yield name, labels, float(v) if value is None else value


def family_of(line: str) -> str:
    """The metric name a sample or HELP/TYPE line belongs to ('' for other comments)."""
    if line.startswith("# HELP ") or line.startswith("# TYPE "):
        return line.split()[2]
    if line.startswith("#"):
        return ""
    m = _NAME.match(line)
    return m.group(0) if m else ""


def reduce_to_vllm(text: str) -> str:
    """Keep the vllm:* sample lines and their HELP/TYPE lines, in the order vLLM served them."""
    return "".join(l + "\n" for l in text.splitlines() if family_of(l).startswith("vllm:"))


class Dump:
    """Samples of one /metrics dump, summed over series matching a label filter."""

    def __init__(self, text: str):
        self.samples = list(parse(text))

    def total(self, name: str, **match) -> float:
        return sum(v for n, l, v in self.samples
                   if n == name and all(l.get(k) == w for k, w in match.items()))

    def by_label(self, name: str, label: str) -> dict:
        out = {}
        for n, l, v in self.samples:
            if n == name and label in l:
                out[l[label]] = out.get(l[label], 0.0) + v
        return out

    def has(self, name: str) -> bool:
        return any(n == name for n, _, _ in self.samples)
