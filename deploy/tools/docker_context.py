#!/usr/bin/env python3
"""Copy the files a `docker build .` context would hold into a directory.

Usage: docker_context.py DEST_DIR

No Docker engine runs on the CI machines, so scripts/check-deploy.sh runs the
Dockerfile's build steps in DEST_DIR instead: a file that .dockerignore leaves
out is then missing there too, and the build fails as `docker build` would.

Candidates are the files git knows in the repository (tracked, plus untracked
ones that .gitignore does not ignore). .dockerignore rules are applied as Docker
applies them: in order, the last matching rule wins, a rule starting with ``!``
re-includes, and a rule matches a path when it matches the path or any of its
parent directories. Patterns use shell wildcards (``**`` is not needed here and
not supported).
"""
import fnmatch
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def read_rules(path):
    """Return [(pattern, exclude)] from a .dockerignore file, comments dropped."""
    rules = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        exclude = not line.startswith("!")
        pattern = line.lstrip("!").strip().strip("/")
        if pattern.startswith("./"):
            pattern = pattern[2:]
        rules.append((pattern, exclude))
    return rules


def excluded(rel_path, rules):
    """True when the rules leave ``rel_path`` (a POSIX relative path) out of the context."""
    parts = rel_path.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    result = False
    for pattern, exclude in rules:
        if any(fnmatch.fnmatchcase(prefix, pattern) for prefix in prefixes):
            result = exclude
    return result


def candidate_files():
    """Repository files as a fresh clone plus the working tree would hold them."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=ROOT, check=True, capture_output=True).stdout
    return sorted({name for name in out.decode("utf-8").split("\0") if name and (ROOT / name).is_file()})


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    dest = pathlib.Path(argv[1])
    dest.mkdir(parents=True, exist_ok=True)
    rules = read_rules(ROOT / ".dockerignore")
    copied = 0
    for name in candidate_files():
        if excluded(name, rules):
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, target)  # fresh mtimes: cargo rebuilds the crate from these files
        copied += 1
    print("docker context: %d files in %s" % (copied, dest))
    return 0 if copied else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
