#!/usr/bin/env python3
"""The import graphs of the core (`src/`), of the two binding crates (`bindings/c/src`, `bindings/python/src`)
and of the Python package (`python/tooloop/`), and a check on them.

Fails (exit 1) when modules import each other in a circle, in any of these trees; when a module of the core's
layers (RANKS) imports one above it; when a module of the core names the crate root (`crate::Error`) instead of
the module that defines what it uses; or when a binding reaches past the core's public face. Prints each graph
as `module -> modules it names`, one line per module, then every problem found. CI runs it from scripts/test.sh
(and `--self-test`, which checks these rules on small made-up trees).

Rust: the nodes are the top-level modules of a crate's `src/` (a folder such as `src/agent/` is one node); an
edge is any `crate::x` path or `use crate::{x, ...}` item in code (comments and string literals are not code),
or `super::x` from a top-level file. Test-only code is not code the layers are made of: `#[cfg(test)]` items,
`mod tests { ... }` blocks, files a `#[cfg(test)] mod x;` declares, and files under a `tests/` folder are left
out. Python: the nodes are the package's modules (`cli` subpackage modules as `cli.x`), plus the package itself
(`__init__`); an edge is an `import`/`from ... import` of another of them.

The core's root (`src/lib.rs`) re-exports what a user of the library needs. Inside the core that root is no
node a module may import: it re-exports from everywhere, so an edge to it would hide an edge to anything; a
module names the module that defines the item (`crate::error::Error`).

The core's public face is the crate root's own items: what `src/lib.rs` defines or re-exports (`tooloop::Agent`,
`tooloop::Error`, ...), never a path through one of its modules (`tooloop::http::...`, `tooloop::rules::...`).
The bindings are doors like any host: they name `tooloop::Item` only, so what a binding needs is visible in one
place (the root's re-exports, where it is documented), and the inner modules can move without breaking them.

It must never import the code it checks or need anything beyond the standard library.
"""

from __future__ import annotations

import ast
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Imports known to close a circle today, as (graph title, from, to), each with what it takes; the check
# ignores these edges (and only these). Each one that goes must be deleted here; the list should end empty.
ALLOWED: dict[tuple[str, str, str], str] = {
}


# The core's layers ("one way through the house"): host -> binding -> options -> agent -> provider
# -> http, with plain data at the bottom. An import between two ranked modules must go down a rank (the
# bottom ones may use each other); the cycle check covers the rest.
# The store is a column beside provider and http (ranks are compared only between modules that import each
# other): the conversation's entries on the plain data, the session files on them, the store seam on both, and
# compaction above the store (the store keeps compaction records as data; deciding and writing them is above).
RANKS: dict[str, int] = {
    "types": 0, "text": 0, "cancel": 0, "id": 0,
    "error": 1, "models": 1,
    "http": 2, "conversation": 2,
    "provider": 3, "session": 3,
    "session_sqlite": 4,
    "store": 5,
    "compaction": 6,
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


_CFG_TEST = re.compile(r"#\s*\[\s*cfg\s*\(\s*test\s*\)\s*\]")
_MOD_TESTS = re.compile(r"\bmod\s+tests\s*\{")


def _block_end(code: str, i: int) -> int:
    """The index just past the `}` matching the `{` at `i`."""
    depth = 0
    for j in range(i, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if not depth:
                return j + 1
    return len(code)


def _item_end(code: str, i: int) -> int:
    """The index just past the item that starts at `i` (after any more attributes): its `;` or its block."""
    n = len(code)
    while True:
        while i < n and code[i].isspace():
            i += 1
        if not code.startswith("#", i):
            break
        j = code.find("[", i)
        depth = 0
        while j < n:
            depth += {"[": 1, "]": -1}.get(code[j], 0)
            j += 1
            if not depth:
                break
        i = j
    depth = 0
    while i < n:
        c = code[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == ";" and not depth:
            return i + 1
        elif c == "{" and not depth:
            return _block_end(code, i)
        i += 1
    return n


def _strip_tests(code: str) -> tuple[str, list[str]]:
    """Code (already stripped of comments and literals) without its test-only items: each `#[cfg(test)]` item
    and each `mod tests { ... }`. Also the names of the file modules `#[cfg(test)] mod x;` declares."""
    test_files: list[str] = []
    while True:
        m = _CFG_TEST.search(code)
        if not m:
            break
        end = _item_end(code, m.end())
        decl = re.fullmatch(r"\s*(?:#\s*\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", code[m.end():end])
        if decl:
            test_files.append(decl.group(1))
        code = code[:m.start()] + code[end:]
    while True:
        m = _MOD_TESTS.search(code)
        if not m:
            break
        code = code[:m.start()] + code[_block_end(code, m.end() - 1):]
    return code, test_files


def _head(item: str) -> str:
    """`a` of a group item `a::b::{...}` or `a as b`."""
    return (item.split("::")[0].split() or [""])[0]


def _path_heads(code: str, root: str) -> set[str]:
    """The first segment of every `root::x` path and of every item of a `root::{x, y::z, ...}` group."""
    heads = set(re.findall(rf"(?<!\w){re.escape(root)}::(\w+)", code))
    for group in re.finditer(rf"(?<!\w){re.escape(root)}::\{{", code):
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
                heads.add(_head(item))
                item = ""
            j += 1
        heads.add(_head(item))
    heads.discard("")
    return heads


class Crate:
    """One Rust crate's `src/`: the import graph of its top-level modules, the crate-root items each module
    names (`crate::Item`), and the paths each names into another crate (`extern_heads[node][crate]`)."""

    def __init__(self, src: str, externs: tuple[str, ...] = ()):
        files: dict[str, str] = {}
        test_only: list[str] = []
        for dirpath, dirs, names in os.walk(src):
            dirs[:] = sorted(d for d in dirs if d != "tests")
            for name in sorted(names):
                if not name.endswith(".rs"):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8") as f:
                    files[path], declared = _strip_tests(_strip_rust(f.read()))
                # Where the file modules this one declares live.
                here = dirpath if name in ("mod.rs", "lib.rs", "main.rs") else path[:-3]
                test_only += [os.path.join(here, d) for d in declared]
        self.graph: dict[str, set[str]] = {}
        self.root_items: dict[str, set[str]] = {}
        self.extern_heads: dict[str, dict[str, set[str]]] = {}
        for path, code in files.items():
            if any(path == t + ".rs" or path.startswith(t + os.sep) for t in test_only):
                continue
            parts = os.path.relpath(path, src)[:-3].split(os.sep)
            if parts[-1] in ("mod", "lib", "main"):
                parts = parts[:-1]
            if not parts:  # the crate root: no node of the graph, but a door through the public face too
                for ext in externs:
                    self.extern_heads.setdefault("lib", {}).setdefault(ext, set()).update(_path_heads(code, ext))
                continue
            top = parts[0]
            heads = _path_heads(code, "crate")
            if len(parts) == 1:  # a top-level file: its `super` is the crate
                heads |= set(re.findall(r"\bsuper::(\w+)", code))
            self.graph.setdefault(top, set()).update(heads)
            for ext in externs:
                self.extern_heads.setdefault(top, {}).setdefault(ext, set()).update(_path_heads(code, ext))
        for k, v in self.graph.items():
            self.root_items[k] = {d for d in v if d not in self.graph and d not in ("self", "super", "crate")}
            self.graph[k] = {d for d in v if d in self.graph and d != k}


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


def report(title: str, graph: dict[str, set[str]]) -> list[str]:
    """Prints the graph; returns its circles, as `CYCLE: a b c` lines."""
    print(f"== {title}")
    for k in sorted(graph):
        print(f"{k} -> {' '.join(sorted(graph[k]))}")
    allowed = {k: {d for d in v if (title, k, d) not in ALLOWED} for k, v in graph.items()}
    for k, v in graph.items():
        for d in sorted(v - allowed[k]):
            print(f"allowed for now: {k} -> {d} ({ALLOWED[(title, k, d)]})")
    return [f"CYCLE: {title} {' '.join(comp)}" for comp in cycles(allowed)]


def root_reach(title: str, crate: Crate) -> list[str]:
    """Modules that name an item through the crate root instead of through the module that defines it."""
    return [f"ROOT: {title} {k} -> crate::{item} (name the module that defines it)"
            for k in sorted(crate.root_items) for item in sorted(crate.root_items[k])]


def inner_reach(title: str, binding: Crate, core_modules: set[str]) -> list[str]:
    """Modules of a binding that reach into one of the core's modules instead of its root's items."""
    return [f"INNER: {title} {k} -> tooloop::{m} (use what the crate root re-exports: tooloop::Item)"
            for k in sorted(binding.extern_heads) for m in sorted(binding.extern_heads[k].get("tooloop", set()))
            if m in core_modules]


BINDINGS = ("c", "python")


def check(root: str) -> list[str]:
    """Prints every graph under `root`; returns the problems found, one line each."""
    core = Crate(os.path.join(root, "src"))
    problems = report("src/", core.graph)
    problems += [f"UPWARD: {edge}" for edge in upward(core.graph)]
    problems += root_reach("src/", core)
    for name in BINDINGS:
        src = os.path.join(root, "bindings", name, "src")
        if not os.path.isdir(src):
            continue
        title = f"bindings/{name}/src/"
        binding = Crate(src, externs=("tooloop",))
        problems += report(title, binding.graph)
        problems += root_reach(title, binding)
        problems += inner_reach(title, binding, set(core.graph))
    pkg = os.path.join(root, "python", "tooloop")
    if os.path.isdir(pkg):
        problems += report("python/tooloop/", python_graph(pkg))
    return problems


def self_test() -> int:
    """The rules on small made-up trees: each must find what it is for, and nothing in test-only code."""
    import contextlib
    import io
    import tempfile

    def tree(files: dict[str, str]) -> list[str]:
        with tempfile.TemporaryDirectory() as root:
            for rel, text in files.items():
                path = os.path.join(root, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
            with contextlib.redirect_stdout(io.StringIO()):
                return check(root)

    base = {"src/lib.rs": "pub mod a; pub mod b; pub use error::Error;\n",
            "src/a.rs": "use crate::b::Thing;\n", "src/b.rs": "pub struct Thing;\n"}
    cases: list[tuple[str, dict[str, str], list[str]]] = [
        ("a clean tree", {}, []),
        ("a circle", {"src/b.rs": "use crate::a::X;\n"}, ["CYCLE: src/ a b"]),
        ("a circle inside a group", {"src/b.rs": "use crate::{self as root, a::{X, Y as Z}};\n"}, ["CYCLE: src/ a b"]),
        ("a test module's import is no edge",
         {"src/b.rs": "pub struct Thing;\n#[cfg(test)]\n#[allow(clippy::unwrap_used)]\nmod tests {\n"
                      "    use crate::a::X;\n    fn f() { let v = vec![1]; crate::a::g(v); }\n}\n"}, []),
        ("an unmarked `mod tests` block is test code too",
         {"src/b.rs": "pub struct Thing;\nmod tests { use crate::a::X; }\n"}, []),
        ("a #[cfg(test)] use and fn are no edges",
         {"src/b.rs": "#[cfg(test)]\nuse crate::a::{X, Y};\n#[cfg(test)]\nfn t() -> [u8; 2] { crate::a::g() }\n"}, []),
        ("code after a test item still counts",
         {"src/b.rs": "#[cfg(test)]\nmod tests { }\nfn f() { crate::a::g() }\n"}, ["CYCLE: src/ a b"]),
        ("a file a #[cfg(test)] `mod x;` declares is test code",
         {"src/b/mod.rs": "#[cfg(test)]\nmod helper;\n", "src/b/helper.rs": "use crate::a::X;\n"}, []),
        ("files under tests/ are test code", {"src/b/tests/x.rs": "use crate::a::X;\n"}, []),
        ("the store reaching up into compaction",
         {"src/lib.rs": "pub mod session; pub mod compaction;\n", "src/compaction.rs": "pub struct Compaction;\n",
          "src/session.rs": "use crate::compaction::Compaction;\n"}, ["UPWARD: session -> compaction"]),
        ("an item named through the crate root", {"src/b.rs": "fn f(e: &crate::Error) {}\n"},
         ["ROOT: src/ b -> crate::Error (name the module that defines it)"]),
        ("a binding circle", {"bindings/c/src/lib.rs": "mod x; mod y;\n", "bindings/c/src/x.rs": "use crate::y::A;\n",
                              "bindings/c/src/y.rs": "use super::x::B;\n"}, ["CYCLE: bindings/c/src/ x y"]),
        ("a binding reaching into a module of the core",
         {"bindings/python/src/x.rs":
          "use tooloop::{Agent, a::Inner};\nfn f() { tooloop::b::g(); ::tooloop::Error::Busy; }\n"},
         ["INNER: bindings/python/src/ x -> tooloop::a (use what the crate root re-exports: tooloop::Item)",
          "INNER: bindings/python/src/ x -> tooloop::b (use what the crate root re-exports: tooloop::Item)"]),
        ("a binding's root counts too", {"bindings/c/src/lib.rs": "pub use tooloop::b::Thing;\n"},
         ["INNER: bindings/c/src/ lib -> tooloop::b (use what the crate root re-exports: tooloop::Item)"]),
        ("a binding's test module may reach in",
         {"bindings/c/src/x.rs": "#[cfg(test)]\nmod t { use tooloop::a::X; }\n"}, []),
        ("names in comments and strings are not code",
         {"src/b.rs": "// crate::a::X\nconst S: &str = \"crate::a::X\";\n/* crate::Error */\n",
          "bindings/c/src/x.rs": "/// see `tooloop::a`\nconst S: &str = r#\"tooloop::b\"#;\n"}, []),
    ]
    failed = 0
    for name, files, want in cases:
        got = tree({**base, **files})
        if got != want:
            failed += 1
            print(f"self-test failed: {name}: got {got}, want {want}", file=sys.stderr)
    if ALLOWED:
        failed += 1
        print("self-test failed: ALLOWED is not empty", file=sys.stderr)
    if failed:
        return 1
    print(f"self-test: all {len(cases)} cases pass")
    return 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    problems = check(ROOT)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} problem(s): an import circle, an upward import, a module naming the crate root, "
              "or a binding reaching into the core's modules (see the docstring)", file=sys.stderr)
        return 1
    print("no import circles, no upward imports, every binding through the core's public face")
    return 0


if __name__ == "__main__":
    sys.exit(main())
