#!/usr/bin/env python3
"""Fails when a doc or a code comment cites a repository path, or a heading of one of our pages,
that does not exist.

Read: every Markdown file; the comments (`//`, `///`, `//!`) of every Rust file; the `#` comment
lines of shell, Python, TOML and YAML files and Dockerfiles. Checked:

* **Paths.** A word that starts with one of the repository's top-level directories and a `/`
  (`docs/ENGINE.md`, `crates/engine/src/rules/`, `tests/fixtures/vllm-0.33`) must exist, taken from
  the repository root or from the citing file's folder or one above it (so a crate may cite
  `src/lib.rs`). Not read as paths: a word that continues a longer path or a URL (`vllm/docs/x.md`,
  `https://…/docs/x`), and a placeholder or glob (`fuzz/seeds/<target>/`, `crates/*/src`): the
  word is cut at `<`, `*`, `{` or `…` and then skipped. Other projects' paths
  (`vllm/v1/metrics/loggers.py`, Prometheus' `storage/remote/…`) start with no top-level
  directory of ours and are not read.
* **Markdown links** (`[text](target)`) without a scheme: the target, from the linking file's
  folder; with `#anchor`, a heading of that page whose GitHub anchor it is.
* **Quoted headings**: a `.md` path followed by `, "Heading"` (or `"Heading"`), possibly across
  a wrapped line: a heading of that page, or the bold words that open one of its paragraphs or
  list items, contain the quoted text.

In a Markdown code fence a word is a path only with a file extension or a trailing `/`
(`kubectl port-forward deploy/vllm-corrector` names a Deployment).

usage: scripts/doc_paths.py [REPO_ROOT]   prints FILE:LINE: what is missing, exit status 1 if any
"""
import os
import pathlib
import re
import subprocess
import sys

SKIP_DIRS = {'.git', 'target', 'corpus', 'artifacts', 'node_modules'}
HASH_COMMENTS = ('.sh', '.py', '.toml', '.yml', '.yaml')
LINK = re.compile(r'\]\(([^)\s]+)\)')
QUOTED = re.compile(r'([\w./-]+\.md)`?,?\s*"([^"<]+)"')
URL = re.compile(r'\b[a-z][a-z0-9+.-]*://\S+')


def files(root):
    """Tracked and untracked-but-not-ignored files when `root` is a git work tree, else all files."""
    try:
        out = subprocess.run(['git', '-C', str(root), 'ls-files', '-z', '--cached', '--others',
                              '--exclude-standard'], capture_output=True, check=True).stdout
        return sorted({root / p for p in out.decode().split('\0') if p and (root / p).is_file()})
    except (OSError, subprocess.CalledProcessError):
        found = []
        for folder, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
            found += [pathlib.Path(folder) / n for n in names]
        return sorted(found)


def cited_text(path):
    """[(line number, text)] of the parts of `path` that may cite paths; None to skip the file."""
    try:
        lines = path.read_text(encoding='utf-8').split('\n')
    except (UnicodeDecodeError, OSError):
        return None
    if path.suffix == '.md':
        return list(enumerate(lines, 1))
    if path.suffix == '.rs':
        out = []
        for n, line in enumerate(lines, 1):
            # a `//` inside a string literal is no comment
            at = re.sub(r'"(?:\\.|[^"\\])*"', lambda m: ' ' * len(m.group(0)), line).find('//')
            if at >= 0:
                out.append((n, re.sub(r'^//[/!]?', '', line[at:])))
        return out
    if path.suffix in HASH_COMMENTS or path.name == 'Dockerfile':
        return [(n, line.lstrip().lstrip('#')) for n, line in enumerate(lines, 1)
                if line.lstrip().startswith('#') and not line.startswith('#!')]
    return None


def fenced(path):
    """The numbers of the lines inside the code fences of a Markdown file."""
    out, inside = set(), False
    for n, line in enumerate(path.read_text(encoding='utf-8').split('\n'), 1):
        if line.startswith('```'):
            inside = not inside
        elif inside:
            out.add(n)
    return out


def paragraphs(parts):
    """Runs of consecutive lines joined by spaces, each with a map from offset to line number."""
    runs, text, starts, last = [], '', [], None
    for n, line in parts:
        if last is not None and n != last + 1:
            runs.append((text, starts))
            text, starts = '', []
        starts.append((len(text), n))
        text += line + ' '
        last = n
    if starts:
        runs.append((text, starts))
    return runs


def line_at(starts, offset):
    return max(n for start, n in starts if start <= offset)


def headings(page, lead_ins=False):
    """The headings of a Markdown page (outside code fences), as written; with `lead_ins` also the
    bold words that open a paragraph or a list item (`**Slow clients**`), which pages cite too."""
    out, inside = [], False
    for line in page.read_text(encoding='utf-8').split('\n'):
        inside ^= line.startswith('```')
        bold = re.match(r'\s*(?:[-*] )?\*\*([^*]+)\*\*', line) if lead_ins else None
        if not inside and (re.match(r'#{1,6} ', line) or bold):
            out.append(bold.group(1) if bold else line.lstrip('#').strip())
    return out


def anchor(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r'[^\w\- ]', '', heading.lower()).replace(' ', '-')


def check(root):
    """[(file, line, message)] for every citation that does not resolve, and how many were read."""
    tops = sorted((p.name for p in root.iterdir() if p.is_dir() and p.name not in SKIP_DIRS
                   and not p.name.startswith('.')), key=len, reverse=True)
    word = re.compile(r'(?<![\w./~-])(?:' + '|'.join(map(re.escape, tops)) + r')/[\w./-]*')
    missing, checked = [], 0
    for file in files(root):
        parts = cited_text(file)
        if not parts:
            continue
        bases = [root] + [p for p in file.parents if root in p.parents]
        code = fenced(file) if file.suffix == '.md' else set()
        for text, starts in paragraphs(parts):
            bare = URL.sub(lambda m: ' ' * len(m.group(0)), text)
            for m in word.finditer(bare):
                path = m.group(0).rstrip('.,:;')
                if bare[m.end():m.end() + 1] in ('<', '*', '{', '…') or path.endswith('...'):
                    continue
                if line_at(starts, m.start()) in code and not re.search(r'(\.\w+|/)$', path):
                    continue  # in a command, `deploy/x` may be kubectl's name of a Deployment
                checked += 1
                if not any((base / path).exists() for base in bases):
                    missing.append((file, line_at(starts, m.start()), f'no such path: {path}'))
            for m in LINK.finditer(text if file.suffix == '.md' else ''):
                target, _, frag = m.group(1).partition('#')
                if re.match(r'[a-z][a-z0-9+.-]*:', target):
                    continue
                checked += 1
                page = (file.parent / target) if target else file
                if not page.exists():
                    missing.append((file, line_at(starts, m.start()), f'link to no such path: {target}'))
                elif frag and page.suffix == '.md' and frag not in map(anchor, headings(page)):
                    missing.append((file, line_at(starts, m.start()), f'no heading #{frag} in {target or file.name}'))
            for m in QUOTED.finditer(bare):
                page = next((base / m.group(1) for base in bases + [file.parent] if (base / m.group(1)).is_file()), None)
                checked += page is not None
                quoted = re.sub(r'\s+', ' ', m.group(2).replace('`', '')).strip().lower()
                if page and not any(quoted in h.replace('`', '').lower() for h in headings(page, True)):
                    missing.append((file, line_at(starts, m.start()), f'no heading "{quoted}" in {m.group(1)}'))
    return missing, checked


def main(root):
    missing, checked = check(root)
    for file, line, what in missing:
        print(f'{file.relative_to(root)}:{line}: {what}')
    print(f'scripts/doc_paths.py: {checked} citations read, {len(missing)} that do not resolve')
    return 1 if missing else 0


if __name__ == '__main__':
    sys.exit(main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else '.').resolve()))
