#!/usr/bin/env python3
"""Functions longer than a limit (default 100 lines), tables aside: the count docs/ARCHITECTURE.md
gives ("Measures of the layout").

Reads every `.rs` file under `crates/`, `src/`, `tests/`, `benches/`, `examples/` and `fuzz/`, finds
each `fn` item with a body and measures it from its `fn` line to its closing brace. A function with
few lines of control flow (`let`, `if`, `for`, `while`, `match`, `loop`, `return`, `=>`, `?;`: fewer
than 12 % of its lines) is a table of rows or registrations, listed apart and not counted.
Text, not a parser: strings, chars and comments are skipped well enough for rustfmt-formatted code.

Usage: python3 scripts/long_functions.py [--limit N] [--list]
Prints `functions over N lines: K (tables aside: T)` and, with --list, each one as path:line length name.
"""

import argparse
import os
import re
import sys

# A function with fewer lines of control flow than this share of its length is a table.
TABLE_CODE_PERCENT = 12
ROOTS = ["crates", "src", "tests", "benches", "examples", "fuzz"]
FN = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?(?:extern\s+\"C\"\s+)?fn\s+(\w+)")
CODE = re.compile(r"\b(let|if|for|while|match|return|loop)\b|=>|\?;")


def strip(line, state):
    """`line` without comments and string contents; `state` carries a block comment or a string
    across lines ('block', 'str', or None)."""
    out = []
    i = 0
    while i < len(line):
        c = line[i]
        if state == "block":
            if line.startswith("*/", i):
                state = None
                i += 2
            else:
                i += 1
            continue
        if state == "str":
            if c == "\\":
                i += 2
            elif c == '"':
                state = None
                i += 1
            else:
                i += 1
            continue
        if line.startswith("//", i):
            break
        if line.startswith("/*", i):
            state = "block"
            i += 2
            continue
        if c == '"':
            state = "str"
            i += 1
            continue
        if c == "'":
            # A char literal ('x', '\n', '{'); a lifetime has no closing quote nearby.
            m = re.match(r"'(\\.|[^\\'])'", line[i:])
            if m:
                i += len(m.group(0))
                continue
        out.append(c)
        i += 1
    return "".join(out), state


def functions(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    state = None
    clean = []
    for line in lines:
        text, state = strip(line, state)
        clean.append(text)
    found = []
    for start, line in enumerate(clean):
        m = FN.match(line)
        if not m:
            continue
        depth, opened, end = 0, False, None
        for j in range(start, len(clean)):
            for c in clean[j]:
                if c == "{":
                    depth += 1
                    opened = True
                elif c == "}":
                    depth -= 1
                elif c == ";" and not opened and depth == 0:
                    end = -1
                    break
            if end is not None:
                break
            if opened and depth == 0:
                end = j
                break
        if end is None or end < 0:
            continue
        length = end - start + 1
        code = sum(1 for k in range(start, end + 1) if CODE.search(clean[k]))
        found.append((start + 1, length, m.group(1), code))
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    long, tables = [], []
    for root in ROOTS:
        for dirpath, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d not in ("target", "node_modules"))
            for name in sorted(files):
                if not name.endswith(".rs"):
                    continue
                path = os.path.join(dirpath, name)
                for line, length, fn, code in functions(path):
                    if length <= args.limit:
                        continue
                    entry = (path, line, length, fn)
                    (tables if code * 100 < TABLE_CODE_PERCENT * length else long).append(entry)
    print(f"functions over {args.limit} lines: {len(long)} (tables aside: {len(tables)})")
    if args.list:
        for path, line, length, fn in long:
            print(f"  {path}:{line} {length} {fn}")
        for path, line, length, fn in tables:
            print(f"  table {path}:{line} {length} {fn}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
