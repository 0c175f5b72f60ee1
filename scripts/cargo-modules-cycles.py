#!/usr/bin/env python3
"""Fails when two modules of a crate import each other, directly or through others.

Reads the item graph that `cargo modules dependencies` prints (Graphviz dot) on stdin, credits
each "uses" edge to the modules that hold its two ends (an item counts in its nearest enclosing
module; cargo-modules places the items of an `impl` under their type), and prints every strongly
connected component of more than one module (a cycle). Exit status 1 when there is one. With
--top, modules are first collapsed to the crate's top-level modules (`crate::http::write` counts
as `crate::http`).

Run (functions and types stay in the graph, so a call or a field type counts as a dependency;
cargo-modules' own --acyclic cannot be used: it also counts the edge from a type to its impl
methods, so every `impl Default` would be a cycle):

    cargo modules dependencies -p vllm-corrector-service --lib --no-externs --no-sysroot \
        --no-owns --layout dot | scripts/cargo-modules-cycles.py
"""
import re
import sys

EDGE = re.compile(r'^\s*"([^"]+)"\s*->\s*"([^"]+)"\s*\[label="uses"')
NODE = re.compile(r'^\s*"([^"]+)"\s*\[label=.*// "(\w+)" node')


def module_of(path, modules):
    """The nearest module holding `path` (itself when it is a module)."""
    parts = path.split("::")
    for end in range(len(parts), 0, -1):
        candidate = "::".join(parts[:end])
        if candidate in modules:
            return candidate
    return parts[0]


def strongly_connected(nodes, edges):
    """Tarjan's algorithm, iterative; returns the components as sorted lists."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = counter
                    counter += 1
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(edges.get(succ, ())))))
                    advanced = True
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                out.append(sorted(component))
    return out


def main():
    top = "--top" in sys.argv[1:]
    edges, nodes, modules, raw = {}, set(), set(), []
    for line in sys.stdin:
        node = NODE.match(line)
        if node and node.group(2) in ("mod", "crate"):
            modules.add(node.group(1))
        match = EDGE.match(line)
        if match:
            raw.append(match.groups())
    # cargo-modules does not print a node for every module: a lower-case path segment that has
    # items below it, with only lower-case segments above it, is a module too.
    for path in {end for edge in raw for end in edge}:
        parts = path.split("::")
        for end in range(1, len(parts)):
            if not all(p[:1].islower() or p[:1] == "_" for p in parts[:end]):
                break
            modules.add("::".join(parts[:end]))
    for a, b in raw:
        a, b = module_of(a, modules), module_of(b, modules)
        if top:
            a, b = ("::".join(x.split("::")[:2]) for x in (a, b))
        if a == b:
            continue
        nodes.update((a, b))
        edges.setdefault(a, set()).add(b)
    cycles = [c for c in strongly_connected(nodes, edges) if len(c) > 1]
    for cycle in cycles:
        print("cycle: " + " <-> ".join(cycle))
        for a in cycle:
            for b in sorted(edges.get(a, ())):
                if b in cycle:
                    print(f"  {a} -> {b}")
    if not nodes:
        # A crate of one module has no edges between modules.
        print("no \"uses\" edges between modules: nothing can form a cycle", file=sys.stderr)
        return 0
    print(f"{len(nodes)} modules, {sum(len(v) for v in edges.values())} uses edges, "
          f"{len(cycles)} cycles", file=sys.stderr)
    return 1 if cycles else 0


if __name__ == "__main__":
    sys.exit(main())
