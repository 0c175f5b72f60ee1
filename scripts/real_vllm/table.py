"""The table layout shared by report.py and deploy_compare.py: cell formats and right-aligned
columns, so both print their comparisons the same way. Standard library only."""

import json


def pct(value, truth):
    """The relative error (value − truth) / truth as `+1.23 %`; `—` without a value or a truth."""
    if value is None or truth in (None, 0):
        return "—"
    return f"{(value - truth) / truth * 100:+.2f} %"


def ms(seconds):
    """Seconds as milliseconds with three decimals; `—` for None."""
    return "—" if seconds is None else f"{seconds * 1000:.3f}"


def count(value):
    """A count rounded to a whole number; `—` for None."""
    return "—" if value is None else f"{value:.0f}"


def print_table(header, rows):
    """Prints `header` and `rows` (tuples of strings) with every column right-aligned to its widest
    cell, two spaces apart."""
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    print("  ".join(h.rjust(w) for h, w in zip(header, widths)))
    for row in rows:
        print("  ".join(c.rjust(w) for c, w in zip(row, widths)))


def write_json(path, rows):
    """Writes `rows` to `path` as indented JSON with a final newline (nothing when `path` is None)."""
    if path is None:
        return
    with open(path, "w") as f:
        json.dump(rows, f, indent=1)
        f.write("\n")
