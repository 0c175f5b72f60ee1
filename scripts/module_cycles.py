#!/usr/bin/env python3
"""Fails when two modules of one crate use each other, directly or around a circle.

For every member of the workspace (and the root binary) it walks the module tree from the crate
root (`mod x;`, `#[path = ...]`; `#[cfg(test)]` modules left out, as `cargo modules dependencies`
leaves them out without `--cfg-test`), reads every `use` tree and every `crate::`/`super::`/`self::`
path in the code, resolves each to the module that defines the item (following `pub use`
re-exports, globs included), and looks for strongly connected components of that graph.

A path is a use of the module that defines the item, not of the one that re-exports it: a child
naming `super::Engine`, re-exported by `lib.rs` from `state.rs`, uses `state`. A crate root that
defines items its children use and also re-exports from them is a circle.

usage: scripts/module_cycles.py [REPO_ROOT]     exit status 1 and the circles when there are any
docs/ARCHITECTURE.md, "Rules of the layout", says why.
"""
import pathlib
import re
import sys

ITEM = re.compile(r'\b(?:pub(?:\([^)]*\))?\s+)?(?:async\s+|const\s+|unsafe\s+)*'
                  r'(?:fn|struct|enum|trait|type|const|static|union|macro_rules!)\s+([A-Za-z_][A-Za-z0-9_]*)')
MOD_DECL = re.compile(r'((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?mod\s+([A-Za-z_][A-Za-z0-9_]*)\s*([;{])')


def blank(part):
    """`part` as spaces, its newlines kept: offsets into the stripped code stay offsets into the text."""
    return re.sub(r'[^\n]', ' ', part)


def strip(text):
    """The code without comments, string and char literals (blanked, same length and lines)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            out.append(blank(text[i:j]))
            i = j
        elif text.startswith('/*', i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith('/*', j):
                    depth, j = depth + 1, j + 2
                elif text.startswith('*/', j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(blank(text[i:j]))
            i = j
        elif c == 'r' and re.match(r'r#*"', text[i:i + 10]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == '_')):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            end = n if end < 0 else end + 1 + len(hashes)
            out.append('"' + blank(text[i + 1:end - 1]) + '"')
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == '\\' else 1
            out.append('"' + blank(text[i + 1:j]) + '"')
            i = j + 1
        elif c == "'" and re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:]):
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:])
            out.append("'" + blank(m.group(1)) + "'")
            i += m.end()
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def block_end(code, open_brace):
    depth = 0
    for k in range(open_brace, len(code)):
        if code[k] == '{':
            depth += 1
        elif code[k] == '}':
            depth -= 1
            if depth == 0:
                return k + 1
    return len(code)


def expand_use(tree):
    """`a::{b, c::{d, e as f}, *}` -> [['a','b'], ['a','c','d'], ['a','c','e'], ['a','*']]."""
    tree = re.sub(r'\s*(::|\{|\}|,)\s*', r'\1', re.sub(r'\s+', ' ', tree)).strip()
    def parse(s):
        paths, depth, start = [], 0, 0
        parts = []
        for k, ch in enumerate(s):
            if ch == '{':
                depth += 1
            elif ch == '}':
                depth -= 1
            elif ch == ',' and depth == 0:
                parts.append(s[start:k])
                start = k + 1
        parts.append(s[start:])
        for part in parts:
            if not part:
                continue
            if '{' in part:
                head, _, rest = part.partition('{')
                head = [h for h in head.split('::') if h]
                for sub in parse(rest[:rest.rfind('}')]):
                    paths.append(head + sub)
            else:
                part = re.split(r' as ', part.strip())[0]
                paths.append([h for h in part.split('::') if h])
        return paths
    return parse(tree)


class Crate:
    def __init__(self, root_file):
        self.modules = {}  # path tuple -> dict(file, code, children)
        self.load((), root_file, None)

    def load(self, path, file, _):
        text = file.read_text(encoding='utf-8')
        code = strip(text)
        # inline #[cfg(test)] modules and their bodies are left out
        kept, children, pos = [], [], 0
        for m in MOD_DECL.finditer(code):
            if m.start() < pos:
                continue
            attrs, name, end = m.group(1), m.group(2), m.group(3)
            is_test = 'cfg(test)' in attrs
            if end == '{':
                close = block_end(code, m.end() - 1)
                if is_test:
                    kept.append(code[pos:m.start()])
                    pos = close
                continue
            if is_test:
                continue
            raw_attrs = text[m.start():m.start() + len(attrs)]
            pm = re.search(r'#\[path\s*=\s*"([^"]+)"\]', raw_attrs)
            base = file.parent
            if pm:
                child = base / pm.group(1)
            else:
                if file.name not in ('lib.rs', 'main.rs', 'mod.rs'):
                    base = base / file.stem
                child = base / f'{name}.rs'
                if not child.exists():
                    child = base / name / 'mod.rs'
            children.append((name, child))
        kept.append(code[pos:])
        code = ''.join(kept)
        self.modules[path] = {'file': file, 'code': code}
        for name, child in children:
            if child.exists():
                self.load(path + (name,), child, None)

    def defines(self, mod, name):
        return any(m.group(1) == name for m in ITEM.finditer(self.modules[mod]['code']))

    def reexports(self, mod):
        """(name or '*', target absolute path) of `pub use` / `pub(crate) use` in `mod`."""
        out = []
        for m in re.finditer(r'\bpub(?:\([^)]*\))?\s+use\s+([^;]+);', self.modules[mod]['code']):
            for p in expand_use(m.group(1)):
                ab = self.absolute(mod, p)
                if ab is not None:
                    out.append((p[-1], ab))
        return out

    def absolute(self, mod, segs):
        segs = list(segs)
        if not segs:
            return None
        cur = list(mod)
        if segs[0] == 'crate':
            cur, segs = [], segs[1:]
        elif segs[0] in ('super', 'self'):
            while segs and segs[0] in ('super', 'self'):
                if segs[0] == 'super':
                    if not cur:
                        return None
                    cur.pop()
                segs = segs[1:]
        elif tuple(cur + [segs[0]]) in self.modules:
            pass  # a child module named without `self::`
        else:
            return None  # an external crate or std
        return tuple(cur) + tuple(segs)

    def resolve(self, ab, seen=None):
        """The module that defines the item at absolute path `ab`."""
        seen = seen or set()
        k = len(ab)
        while k > 0 and ab[:k] not in self.modules:
            k -= 1
        mod, rest = ab[:k], ab[k:]
        if not rest or rest[0] == '*' or (mod, rest[0]) in seen:
            return mod
        seen.add((mod, rest[0]))
        name = rest[0]
        if self.defines(mod, name):
            return mod
        for alias, target in self.reexports(mod):
            if alias == name:
                return self.resolve(target, seen)
        for alias, target in self.reexports(mod):
            if alias == '*':
                sub = self.resolve(target + (name,), seen)
                if sub != target[:len(sub)] or self.defines(sub, name):
                    return sub
        return mod

    def edges(self):
        out = {}
        for mod, info in self.modules.items():
            code = info['code']
            paths = []
            reexported = set()
            for m in re.finditer(r'\b(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);', code):
                for p in expand_use(m.group(2)):
                    paths.append(p)
                    if m.group(1):
                        reexported.add(tuple(p))
            no_use = re.sub(r'\buse\s+[^;]+;', ' ', code)
            for m in re.finditer(r'\b(?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+', no_use):
                paths.append(m.group(0).split('::'))
            for p in paths:
                ab = self.absolute(mod, p)
                if ab is None:
                    continue
                if ab[-1] == '*' and ab[:-1] in self.modules and tuple(p) in reexported:
                    if ab[:-1] != mod:  # `pub use x::*` re-exports all of x: a use of x
                        out.setdefault(mod, {}).setdefault(ab[:-1], set()).add('::'.join(p))
                    continue
                if ab[-1] == '*' and ab[:-1] in self.modules:
                    # a glob uses what the module names of it: each re-export or item of the
                    # globbed module whose name appears in this module's code
                    globbed = ab[:-1]
                    named = set(re.findall(r'[A-Za-z_][A-Za-z0-9_]*', re.sub(r'\buse\s+[^;]+;', ' ', code)))
                    targets = set()
                    for alias, t in self.reexports(globbed):
                        if alias == '*':
                            targets |= {self.resolve(t + (n,)) for n in named if self.defines(self.resolve(t + (n,)), n)}
                        elif alias in named:
                            targets.add(self.resolve(t))
                    if any(m.group(1) in named for m in ITEM.finditer(self.modules[globbed]['code'])):
                        targets.add(globbed)
                    for target in targets - {mod}:
                        out.setdefault(mod, {}).setdefault(target, set()).add('::'.join(p))
                    continue
                target = self.resolve(ab)
                if target != mod:
                    out.setdefault(mod, {}).setdefault(target, set()).add('::'.join(p))
        return out


def circles(graph):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)
    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def main(root):
    roots = sorted(root.glob('crates/*/src/lib.rs')) + [root / 'src/main.rs']
    failed = 0
    for file in roots:
        crate = Crate(file)
        graph = crate.edges()
        name = file.parent.parent.name if file.parent.parent != root else 'vllm-corrector (binary)'
        found = circles(graph)
        print(f'{name}: {len(crate.modules)} modules, {sum(len(t) for t in graph.values())} module uses, '
              f'{len(found)} circles')
        for comp in found:
            failed += 1
            names = {m: '::'.join(('crate',) + m) for m in comp}
            print('  circle: ' + ', '.join(sorted(names.values())))
            for a in comp:
                for b, via in sorted(graph.get(a, {}).items()):
                    if b in comp:
                        print(f'    {names[a]} -> {names[b]}: {", ".join(sorted(via))}')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else '.').resolve()))
