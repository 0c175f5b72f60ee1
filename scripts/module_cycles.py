#!/usr/bin/env python3
"""Fails when sibling modules of a crate use each other, directly or around a circle.

The rule (docs/ARCHITECTURE.md, "Rules of the layout"): a child may use its parent's items and a
parent its child's; modules that share a parent form no cycle. For each workspace member and the
binary, the module tree is read from `mod x;` (`#[path]` followed, `#[cfg(test)]` modules left
out), every `use` and every `crate::`/`super::`/`self::` path is resolved to the module that
defines the item (through `pub use` re-exports, globs included), and a use of module D by module
U is credited to their ancestors just below the nearest common one: `a::x` using `b::y` is `a`
using `b`. A use between a module and its ancestor is no edge.

usage: scripts/module_cycles.py [REPO_ROOT]     exit status 1 and the cycles when there are any
"""
import pathlib
import re
import sys

NAME = r'[A-Za-z_][A-Za-z0-9_]*'
ITEM = re.compile(rf'\b(?:fn|struct|enum|trait|type|const|static|union|macro_rules!)\s+({NAME})')
MOD = re.compile(rf'((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?mod\s+({NAME})\s*([;{{])')
USE = re.compile(r'\b(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);')
NOISE = re.compile(r'//[^\n]*|/\*[\s\S]*?\*/|r(#*)"[\s\S]*?"\1|b?"(?:\\.|[^"\\])*"|b?\'(?:\\.|[^\\\'])\'')


def expand(tree):
    """`a::{b, c::{d, e as f}, *}` -> [a,b], [a,c,d], [a,c,e], [a,*]."""
    tree = re.sub(r'\s+', '', re.sub(r'\s+as\s+\w+', '', tree))
    head, brace, rest = tree.partition('{')
    if not brace:
        return [[s for s in tree.split('::') if s]]
    parts, depth, start, body = [], 0, 0, rest[:rest.rfind('}')]
    for k, ch in enumerate(body + ','):
        depth += (ch == '{') - (ch == '}')
        if ch == ',' and depth == 0:
            parts.append(body[start:k])
            start = k + 1
    prefix = [s for s in head.split('::') if s]
    return [prefix + sub for part in parts if part for sub in expand(part)]


class Crate:
    def __init__(self, root_file):
        self.code = {}  # module path (a tuple) -> its code, comments and literals blanked
        self.load((), root_file)

    def load(self, mod, file):
        text = file.read_text(encoding='utf-8')
        code = NOISE.sub(lambda m: re.sub(r'\S', ' ', m.group(0)), text)  # offsets kept
        kept, pos = [], 0
        for m in MOD.finditer(code):
            if m.start() < pos:
                continue  # inside a test module left out
            attrs, name, end = text[m.start():m.start() + len(m.group(1))], m.group(2), m.end()
            if m.group(3) == '{':  # an inline module's code stays its parent's; a test one goes
                depth = 0
                for end in range(m.end() - 1, len(code)):
                    depth += (code[end] == '{') - (code[end] == '}')
                    if depth == 0:
                        break
                end += 1
            if 'cfg(test)' in attrs:
                kept.append(code[pos:m.start()])
                pos = end
            elif m.group(3) == ';':
                path = re.search(r'#\[path\s*=\s*"([^"]+)"\]', attrs)
                base = file.parent if file.name in ('lib.rs', 'main.rs', 'mod.rs') else file.parent / file.stem
                child = file.parent / path.group(1) if path else base / f'{name}.rs'
                child = child if child.exists() else base / name / 'mod.rs'
                if child.exists():
                    self.load(mod + (name,), child)
        code = ''.join(kept) + code[pos:]
        self.code[mod] = code

    def absolute(self, mod, segs):
        """The path `segs`, written in `mod`, from the crate root; None outside the crate."""
        cur = list(mod)
        if not segs:
            return None
        if segs[0] == 'crate':
            cur, segs = [], segs[1:]
        elif segs[0] in ('super', 'self'):
            while segs and segs[0] in ('super', 'self'):
                if segs[0] == 'super' and not cur:
                    return None
                cur, segs = (cur[:-1] if segs[0] == 'super' else cur), segs[1:]
        elif tuple(cur + segs[:1]) not in self.code:
            return None  # another crate, or std
        return tuple(cur) + tuple(segs)

    def defines(self, mod, name):
        return any(m.group(1) == name for m in ITEM.finditer(self.code[mod]))

    def reexports(self, mod):
        return [(p[-1], a) for m in USE.finditer(self.code[mod]) if m.group(1)
                for p in expand(m.group(2)) for a in [self.absolute(mod, p)] if a]

    def resolve(self, path, seen=frozenset()):
        """The module defining the item at `path` (absolute)."""
        k = max(k for k in range(len(path) + 1) if path[:k] in self.code)
        mod, rest = path[:k], path[k:]
        if not rest or rest[0] == '*' or (mod, rest[0]) in seen or self.defines(mod, rest[0]):
            return mod
        seen = seen | {(mod, rest[0])}
        for alias, target in self.reexports(mod):
            if alias == rest[0]:
                return self.resolve(target + rest[1:], seen)
        for alias, target in self.reexports(mod):
            if alias == '*':
                found = self.resolve(target[:-1] + rest, seen)
                if self.defines(found, rest[0]):
                    return found
        return mod

    def uses(self, mod):
        """(module used, the path that uses it) for every path written in `mod`."""
        code = self.code[mod]
        paths = [(m.group(1), p) for m in USE.finditer(code) for p in expand(m.group(2))]
        paths += [(None, m.group(0).split('::'))
                  for m in re.finditer(rf'\b(?:crate|super|self)(?:::{NAME})+', USE.sub(' ', code))]
        names = set(re.findall(NAME, USE.sub(' ', code)))
        for public, p in paths:
            path = self.absolute(mod, p)
            if path is None:
                continue
            if path[-1] != '*':
                yield self.resolve(path), p
                continue
            if public and path[:-1] in self.code:
                yield path[:-1], p  # `pub use x::*` re-exports all of x
            for name in names:  # a glob uses what the module names of it
                found = self.resolve(path[:-1] + (name,))
                if self.defines(found, name):
                    yield found, p

    def edges(self):
        """{a: {b: {paths}}} for siblings a, b where something in a uses something in b."""
        out = {}
        for user in self.code:
            for used, p in self.uses(user):
                k = 0
                while k < min(len(user), len(used)) and user[k] == used[k]:
                    k += 1
                if k < len(user) and k < len(used):  # neither is the other's ancestor
                    out.setdefault(user[:k + 1], {}).setdefault(used[:k + 1], set()).add('::'.join(p))
        return out


def cycles(graph):
    """Each set of modules that reach each other, when it has more than one."""
    def reach(v):
        seen, todo = set(), [v]
        while todo:
            for w in graph.get(todo.pop(), ()):
                if w not in seen:
                    seen.add(w)
                    todo.append(w)
        return seen
    r = {v: reach(v) for v in graph}
    return sorted({tuple(sorted(w for w in r[v] if v in r.get(w, ()))) for v in graph if v in r[v]})


def main(root):
    failed = 0
    for file in sorted(root.glob('crates/*/src/lib.rs')) + [root / 'src/main.rs']:
        crate = Crate(file)
        graph = crate.edges()
        name = file.parent.parent.name if file.parent.parent != root else 'vllm-corrector (binary)'
        found = cycles(graph)
        print(f'{name}: {len(crate.code)} modules, {sum(map(len, graph.values()))} sibling uses, '
              f'{len(found)} cycles')
        for comp in found:
            failed += 1
            print('  cycle: ' + ', '.join('::'.join(('crate',) + m) for m in comp))
            for a in comp:
                for b, via in sorted(graph[a].items()):
                    if b in comp:
                        print(f'    crate::{"::".join(a)} -> crate::{"::".join(b)}: {", ".join(sorted(via))}')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else '.').resolve()))
