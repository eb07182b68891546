#!/usr/bin/env python3
"""The import graph of the core (`src/`) and of the Python package (`python/tooloop/`), and a check on it.

Fails (exit 1) when modules import each other in a circle, in either tree, or when a module of the core's
layers (RANKS) imports one above it. Prints each graph as
`module -> modules it names`, one line per module, then every circle found. CI runs it from scripts/test.sh.

Rust: the nodes are the top-level modules of `src/` (a folder such as `src/agent/` is one node); an edge is any
`crate::x` path or `use crate::{x, ...}` item in code (comments and string literals are not code), or `super::x`
from a top-level file. Python: the nodes are the package's modules (`cli` subpackage modules as `cli.x`), plus
the package itself (`__init__`); an edge is an `import`/`from ... import` of another of them.

It must never import the code it checks or need anything beyond the standard library.
"""

from __future__ import annotations

import ast
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Imports known to close a circle today, each with what it takes; the check ignores these edges (and only
# these). Each one that goes must be deleted here; the list should end empty.
ALLOWED: dict[tuple[str, str], str] = {
}


# The core's layers ("one way through the house"): host -> binding -> options -> agent -> provider
# -> http, with plain data at the bottom. An import between two ranked modules must go down a rank (the
# bottom ones may use each other); the cycle check covers the rest.
RANKS: dict[str, int] = {
    "types": 0, "text": 0, "cancel": 0, "id": 0,
    "error": 1, "models": 1,
    "http": 2,
    "provider": 3,
    "agent": 8,
    "options": 9,
}


def upward(graph: dict[str, set[str]]) -> list[str]:
    """Imports from a ranked module to one of a higher rank (or the same, above the bottom)."""
    bad = []
    for a, deps in sorted(graph.items()):
        for b in sorted(deps):
            if a in RANKS and b in RANKS and (RANKS[b] > RANKS[a] or (RANKS[b] == RANKS[a] and RANKS[a] > 0)):
                bad.append(f"{a} -> {b}")
    return bad


def _strip_rust(text: str) -> str:
    """Removes comments, string and char literals from Rust source, keeping the code's shape."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'r(#*)"', text[i:])
            assert m
            end = text.find('"' + m.group(1), i + len(m.group(0)))
            i = n if end < 0 else end + 1 + len(m.group(1))
            out.append('""')
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            out.append('""')
        elif c == "'" and re.match(r"'(\\.[^']*|[^\\'])'", text[i:i + 12]):
            m = re.match(r"'(\\.[^']*|[^\\'])'", text[i:])
            assert m
            i += len(m.group(0))
            out.append("' '")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def rust_graph(src: str) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for dirpath, _dirs, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith(".rs"):
                continue
            path = os.path.join(dirpath, name)
            parts = os.path.relpath(path, src)[:-3].split(os.sep)
            if parts[-1] in ("mod", "lib", "main"):
                parts = parts[:-1]
            if not parts:
                continue
            top = parts[0]
            deps = graph.setdefault(top, set())
            with open(path, encoding="utf-8") as f:
                code = _strip_rust(f.read())
            deps.update(re.findall(r"\bcrate::(\w+)", code))
            for group in re.finditer(r"\bcrate::\{", code):
                # The top-level names of a `crate::{a, b::{c, d}, e}` group.
                depth, j, item = 1, group.end(), ""
                while j < len(code) and depth:
                    ch = code[j]
                    if ch == "{":
                        depth += 1
                    elif ch == "}":
                        depth -= 1
                    if depth == 1 and ch not in "{},":
                        item += ch
                    if depth == 1 and ch == ",":
                        deps.add(item.strip().split("::")[0])
                        item = ""
                    j += 1
                deps.add(item.strip().split("::")[0])
            if len(parts) == 1:  # a top-level file: its `super` is the crate
                deps.update(re.findall(r"\bsuper::(\w+)", code))
    return {k: {d for d in v if d in graph and d != k} for k, v in graph.items()}


def python_graph(pkg: str) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    modules: dict[str, str] = {}
    for dirpath, _dirs, files in os.walk(pkg):
        for name in files:
            if name.endswith(".py"):
                rel = os.path.relpath(os.path.join(dirpath, name), pkg)[:-3].replace(os.sep, ".")
                modules[rel] = os.path.join(dirpath, name)

    def node(mod: str) -> str:
        return "cli" if mod == "cli.__init__" else mod

    def resolve(name: str) -> str | None:
        for cand in (name, name + ".__init__"):
            if cand in modules:
                return node(cand)
        return None

    for rel, path in modules.items():
        me = node(rel)
        deps = graph.setdefault(me, set())
        package = rel.rsplit(".", 1)[0] if "." in rel else ""
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for stmt in ast.walk(tree):
            targets: list[str] = []
            if isinstance(stmt, ast.Import):
                targets = [a.name for a in stmt.names]
            elif isinstance(stmt, ast.ImportFrom):
                if stmt.level:
                    base = package.split(".") if package else []
                    base = base[: len(base) - (stmt.level - 1)] if stmt.level > 1 else base
                    prefix = ".".join(base + ([stmt.module] if stmt.module else []))
                else:
                    prefix = stmt.module or ""
                # `from X import y` names the module X.y when there is one, else something of X.
                for a in stmt.names:
                    sub = f"{prefix}.{a.name}" if prefix else a.name
                    if sub == "_tooloop":  # the compiled module: below everything
                        continue
                    targets.append(sub if sub in modules or sub + ".__init__" in modules else prefix)
            for t in targets:
                if t.startswith("tooloop."):
                    t = t[len("tooloop."):]
                elif t == "tooloop":
                    t = "__init__"
                elif stmt.__class__ is ast.Import or not getattr(stmt, "level", 0):
                    continue
                if t == "_tooloop":
                    continue
                r = resolve(t if t else "__init__")
                if r and r != me:
                    deps.add(r)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def report(title: str, graph: dict[str, set[str]]) -> list[list[str]]:
    print(f"== {title}")
    for k in sorted(graph):
        print(f"{k} -> {' '.join(sorted(graph[k]))}")
    allowed = {k: {d for d in v if (k, d) not in ALLOWED} for k, v in graph.items()}
    for k, v in graph.items():
        for d in sorted(v - allowed[k]):
            print(f"allowed for now: {k} -> {d} ({ALLOWED[(k, d)]})")
    found = cycles(allowed)
    for comp in found:
        print(f"CYCLE: {' '.join(comp)}")
    return found


def main() -> int:
    core = rust_graph(os.path.join(ROOT, "src"))
    bad = report("src/", core)
    for edge in upward(core):
        print(f"UPWARD: {edge}")
        bad.append([edge])
    bad += report("python/tooloop/", python_graph(os.path.join(ROOT, "python", "tooloop")))
    if bad:
        print(f"{len(bad)} import circle(s) or upward import(s): a lower module must not import a higher one",
              file=sys.stderr)
        return 1
    print("no import circles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
