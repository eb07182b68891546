"""Hints on a Python error whose cause the workspace names (issue 41): with the compact prompt, a command's
output that ends in a traceback a small model keeps misreading gets one line saying what the workspace shows.

On the real model (Qwen2.5-Coder-1.5B), the test a small model writes for a module often does not import what
it tests (``slugify(...)`` in test_slug.py with no ``from slug import slugify``), or uses ``unittest`` without
importing it; the model reads the NameError, answers that the test failed, and stops or writes the same test
again. The hint is built from evidence only, never from a guess about the code: the traceback's last line and
file, and the names the workspace's own Python files define at their top level (read with ``ast``, never
run), or the keys of the JSON file the failing file reads. What it answers: a name used without its import
(a workspace module's, or a standard module used as one), a module called as a function, a name a workspace
module does not have, a module name close to a workspace file's, a key the JSON file's objects do not have
(and the one key the file does not read, asked as "if that is the key meant", where there is one),
a call that does not fit how a workspace function is defined, a standard module pip was asked to install
(`pip install json`, a real run's answer to a KeyError), and a line that is not Python (a shell command or a
code fence left in the file). It says nothing when the workspace does not answer the error.

The CLI's policy, on for the compact prompt (an ``after_tool`` hook, after the user's own PostToolUse hooks,
and an ``after_check`` hook on a failed ``--check``); the library only carries the two hooks. Must never:
change a result that is not a failed command's or a failed check's, or run, import or write anything of the
workspace's.
Standard library only, and the library's ``rules.check_files`` (the files a check keeps read-only).
"""

from __future__ import annotations

import ast
import difflib
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Tuple

#: The tool whose results are read (the built-in shell tool).
TOOL = "bash"
#: The workspace's Python files read for their names: at most this many, each at most this large.
MAX_FILES = 200
MAX_BYTES = 200_000

_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+)', re.M)
_NAME_ERROR = re.compile(r"^NameError: name '(\w+)' is not defined", re.M)
_NOT_CALLABLE = re.compile(r"^TypeError: 'module' object is not callable", re.M)
_NO_ATTRIBUTE = re.compile(r"^AttributeError: module '(\w+)' has no attribute '(\w+)'", re.M)
_CANNOT_IMPORT = re.compile(r"^ImportError: cannot import name '(\w+)' from '(\w+)'", re.M)
_NO_MODULE = re.compile(r"^ModuleNotFoundError: No module named '(\w+)'", re.M)
_KEY_ERROR = re.compile(r"^KeyError: '([^'\n]+)'$", re.M)
_SIGNATURE = re.compile(
    r"^TypeError: (?:(\w+)\.)?(\w+)\(\) (?:takes|got an unexpected keyword|missing \d+ required)", re.M)
_NO_DISTRIBUTION = re.compile(r"^ERROR: No matching distribution found for (\w+)\s*$", re.M)
_JSON_NAME = re.compile(r"""['"]([\w./-]+\.json)['"]""")
_SYNTAX = re.compile(r"^SyntaxError: invalid syntax", re.M)
#: A line that is not Python at all: a command to run the file (left in it from the answer's text), or a
#: Markdown code fence.
_NOT_PYTHON = re.compile(r"^(?:\$\s*)?(?:python3?|pip3?|pytest|bash|sh)\s+[\w./-]|^```")

_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ()))


def _parsed(workspace: Path) -> Dict[str, Optional[ast.Module]]:
    """The workspace's top-level Python modules (``name.py`` at its root), by name, parsed (None for a file
    that is too large or does not parse)."""
    found: Dict[str, Optional[ast.Module]] = {}
    try:
        paths = sorted(p for p in workspace.glob("*.py") if p.is_file())[:MAX_FILES]
    except OSError:
        return found
    for path in paths:
        tree = None
        try:
            if _readable(path, workspace):
                tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (OSError, SyntaxError, ValueError, RecursionError):
            pass
        found[path.stem] = tree
    return found


def _readable(path: Path, workspace: Path) -> bool:
    """A regular file inside the workspace (a link that leads out of it is not read: a hint never shows the
    names or keys of a file elsewhere; a FIFO would block), small enough to read."""
    real = path.resolve()
    return real.is_relative_to(workspace.resolve()) and real.is_file() and real.stat().st_size <= MAX_BYTES


def _modules(workspace: Path) -> Dict[str, List[str]]:
    """The workspace's top-level Python modules that parse, and the names each defines at its top level
    (functions, classes, assigned names), in order."""
    return {name: _top_level(tree) for name, tree in _parsed(workspace).items() if tree is not None}


def _top_level(tree: ast.Module) -> List[str]:
    names: List[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.extend(t.id for t in targets if isinstance(t, ast.Name))
    return [n for n in dict.fromkeys(names) if not n.startswith("_")]


def _last_frame(output: str, workspace: Path) -> Optional[Tuple[str, int]]:
    """The traceback's last frame in a workspace file: (its path relative to the workspace, line)."""
    for path, line in reversed(_FRAME.findall(output)):
        p = Path(path)
        if not p.is_absolute():
            p = workspace / p
        try:
            rel = p.resolve().relative_to(workspace.resolve())
        except (OSError, ValueError):
            continue
        return rel.as_posix(), int(line)
    return None


def _listing(module: str, names: List[str]) -> str:
    shown = ", ".join(f"`{n}`" for n in names[:8])
    return f"{module}.py defines {shown}" if names else f"{module}.py defines no function"


def hint(output: str, workspace: Path, read_only: FrozenSet[str] = frozenset()) -> Optional[str]:
    """One line on the last Python error in `output` when the workspace's files name its cause, else None.
    No import is proposed for a file in `read_only` (the check's files: the edit would be refused)."""
    tail = output[-4000:]
    m = _NO_DISTRIBUTION.search(tail)
    if m and m.group(1) in _STDLIB:
        return f"hint: `{m.group(1)}` is part of Python's standard library: there is nothing to install; import it."
    if "Traceback (most recent call last)" in tail:
        tail = tail[tail.rfind("Traceback (most recent call last)"):]   # the last traceback only
    elif not _SYNTAX.search(tail):   # a file run directly that does not parse has no "Traceback" line
        return None
    if _SYNTAX.search(tail):
        return _not_python(tail, workspace, read_only)
    frame = _last_frame(tail, workspace)
    here = frame[0] if frame else None
    where = here or "the file"
    m = _NAME_ERROR.search(tail)
    if m and _protected(here, read_only):
        return None
    if m:
        name = m.group(1)
        own = Path(here).stem if here else None
        # Only a name used as a module on the failing line (`unittest.TestCase`): a variable may be named
        # `string` or `test` too.
        used = _line(workspace, frame) if frame else ""
        if name in _STDLIB and re.search(rf"(?<![\w.]){name}\s*\.", used):
            edit = _import_edit(workspace, here, f"import {name}")
            if edit:
                return f"hint: {where} uses the standard module {name} without importing it. {edit}"
            return (f"hint: `{name}` is a standard module that {where} uses without importing it: add "
                    f"`import {name}` at the top of {where}.")
        for module, names in _modules(workspace).items():
            if module != own and name in names:
                edit = _import_edit(workspace, here, f"from {module} import {name}")
                if edit:
                    return f"hint: {where} does not import {name}, which {module}.py defines. {edit}"
                return (f"hint: `{name}` is defined in {module}.py, and {where} does not import it: add "
                        f"`from {module} import {name}` at the top of {where}.")
        return None
    if _NOT_CALLABLE.search(tail) and frame:
        called = _called_modules(workspace, frame)
        modules = _modules(workspace)
        for module in called:
            if module in modules:
                names = modules[module]
                example = (f"`{module}.{names[0]}(...)`, or `from {module} import {names[0]}`" if names
                           else "a function in it")
                return (f"hint: `{module}` is the module {module}.py, not a function; call the function in it: "
                        f"{example} ({_listing(module, names)}).")
        return None
    m = _NO_ATTRIBUTE.search(tail) or _CANNOT_IMPORT.search(tail)
    if m:
        module, name = (m.group(1), m.group(2)) if m.re is _NO_ATTRIBUTE else (m.group(2), m.group(1))
        defined = _modules(workspace).get(module)
        if defined is None:
            return None
        close = difflib.get_close_matches(name, defined, n=1, cutoff=0.6)
        also = f"; did you mean `{close[0]}`?" if close else "."
        return f"hint: {module}.py has no `{name}`: {_listing(module, defined)}{also}"
    m = _KEY_ERROR.search(tail)
    if m and frame:
        return _json_keys(m.group(1), workspace, frame[0])
    m = _SIGNATURE.search(tail)
    if m:
        return _signature(m.group(1), m.group(2), workspace)
    m = _NO_MODULE.search(tail)
    if m:
        module = m.group(1)
        files = list(_parsed(workspace))
        if module in files or module in _STDLIB:
            return None
        close = difflib.get_close_matches(module, files, n=1, cutoff=0.6)
        if close:
            return f"hint: there is no {module}.py in the workspace; did you mean {close[0]}.py?"
        return None
    return None


def _import_edit(workspace: Path, here: Optional[str], statement: str) -> Optional[str]:
    """The edit that adds `statement` to the workspace file `here`, said as the exact `edit_file` call to
    make: after its first top-level import, else before its first statement (a module docstring stays
    first); `old_text` a whole line that occurs once in the file. None when the file does not parse or has
    no such line (the hint then says where to add it in words).

    Why a call and not words: replayed at the moment of a real run where Qwen2.5-Coder-1.5B had read "add
    `from pal import is_palindrome` at the top of test_pal.py" and rewritten the test unchanged three times,
    it added the import in 0 of 6 samples with that hint said again, and in 6 of 6 told "Make this edit:
    edit_file with path test_pal.py, old_text "import unittest" and new_text "import unittest\\nfrom pal
    import is_palindrome"" (6 of 6 too at the hint's first showing, against 3 of 6 with the words)."""
    if here is None:
        return None
    path = workspace / here
    try:
        if not _readable(path, workspace):
            return None
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
    except (OSError, SyntaxError, ValueError, RecursionError):
        return None
    lines = source.splitlines()

    def whole_line(node: ast.stmt, first: int) -> Optional[str]:
        text = lines[first - 1] if 0 < first <= len(lines) else ""
        once = bool(text.strip()) and source.count(text) == 1
        return text if once and node.col_offset == 0 and not text.startswith((" ", "\t")) else None

    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)) and n.end_lineno == n.lineno]
    for node in imports:
        line = whole_line(node, node.lineno)
        if line is not None:
            old, new = line, f"{line}\n{statement}"
            break
    else:
        body = tree.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:]   # the module's docstring
        if not body or imports:
            return None
        head = body[0]
        first = min([head.lineno] + [d.lineno for d in getattr(head, "decorator_list", [])])
        line = whole_line(head, first)
        if line is None:
            return None
        old, new = line, f"{statement}\n\n{line}"
    return f"Make this edit: {_edit_call(here, old, new)}."


def _edit_call(path: str, old: str, new: str) -> str:
    """The ``edit_file`` call a hint asks for, in words: its path, and old_text and new_text as JSON strings."""
    return (f"edit_file with path {path}, old_text {json.dumps(old, ensure_ascii=False)} and new_text "
            f"{json.dumps(new, ensure_ascii=False)}")


def _not_python(tail: str, workspace: Path, read_only: FrozenSet[str]) -> Optional[str]:
    """On a SyntaxError at a line that is not Python (``python3 test_pal.py`` left in the test, a ```` ``` ````
    fence): that line, and the exact edit that deletes it. Seen in real runs: Qwen2.5-Coder-1.5B put the
    command that runs the test at the end of the test file, read "SyntaxError: invalid syntax" and answered
    that a colon was missing."""
    frame = _last_frame(tail, workspace)
    if frame is None or _protected(frame[0], read_only):
        return None
    here, number = frame
    line = _line(workspace, frame).strip()
    if not _NOT_PYTHON.match(line):
        return None
    what = "a Markdown code fence" if line.startswith("```") else "a shell command"
    edit = _delete_edit(workspace, here, number)
    said = f"hint: line {number} of {here} is {what}, not Python: {json.dumps(line, ensure_ascii=False)}"
    return f"{said}. {edit}" if edit else f"{said}; delete that line."


def _delete_edit(workspace: Path, here: str, number: int) -> Optional[str]:
    """The ``edit_file`` call that deletes line `number` of `here`: ``old_text`` the line (with a neighbour
    where the line alone occurs more than once), ``new_text`` the rest."""
    path = workspace / here
    try:
        if not _readable(path, workspace):
            return None
        source = path.read_text(encoding="utf-8")
    except (OSError, ValueError):
        return None
    lines = source.splitlines()
    i = number - 1
    if not 0 <= i < len(lines):
        return None
    for a, b in ((i, i), (i - 1, i), (i, i + 1), (i - 1, i + 1)):
        if a < 0 or b >= len(lines):
            continue
        old = "\n".join(lines[a:b + 1])
        if old.strip() and source.count(old) == 1:
            new = "\n".join(lines[a:i] + lines[i + 1:b + 1])
            return f"Make this edit: {_edit_call(here, old, new)}."
    return None


def _json_keys(key: str, workspace: Path, here: str) -> Optional[str]:
    """On a KeyError: the keys of the objects in a workspace JSON file the failing file names, when the
    missing key is not among them."""
    try:
        if not _readable(workspace / here, workspace):
            return None
        source = (workspace / here).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for name in dict.fromkeys(_JSON_NAME.findall(source)):
        path = workspace / name
        try:
            if not _readable(path, workspace):
                continue
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        objects = [data] if isinstance(data, dict) else [x for x in data[:50] if isinstance(x, dict)] \
            if isinstance(data, list) else []
        keys = list(dict.fromkeys(k for o in objects for k in o))
        if keys and key not in keys:
            shown = ", ".join(f"`{k}`" for k in keys[:12])
            said = f"hint: the objects in {name}, which {here} reads, have the keys {shown}; none is `{key}`."
            return said + _one_unread_key(key, keys, source, here)
    return None


def _one_unread_key(key: str, keys: List[str], source: str, here: str) -> str:
    """When the failing file names, as a string, every key of the objects but one: that key, and the exact
    edit that reads it where the file subscripts the missing key (where that subscript occurs once). Said
    as a question ("if that is the key meant"): which key is meant is the model's to judge. Replayed on the
    real model at a kept run's KeyError (`row['user']`, the keys `name` and `score`), 5 seeds: with the keys
    alone, no answer edited report.py at once (two named `row['name']`: one in words, one after calls that
    rewrote scores.json again); with this, 4 made the named edit and the fifth described it."""
    def named(k: str) -> bool:
        return re.search(r"""(['"])%s\1""" % re.escape(k), source) is not None
    unread = [k for k in keys if not named(k)]
    if len(unread) != 1:
        return ""
    read = [k for k in keys if k != unread[0]]
    said = (f" {here} reads {', '.join(f'`{k}`' for k in read[:12])} as well; the one key it does not read is "
            f"`{unread[0]}`." if read else f" {here} does not read `{unread[0]}`.")
    subscripts = [m.group(0) for m in re.finditer(r"""\w+\[(['"])%s\1\]""" % re.escape(key), source)]
    old = subscripts[0] if len(subscripts) == 1 else ""
    quote = old[old.index("[") + 1] if old else ""
    if not old or quote in unread[0] or "\\" in unread[0]:   # a key the same quotes could not hold as is
        return said
    new = old[:old.index("[")] + f"[{quote}{unread[0]}{quote}]"
    return f"{said} If that is the key meant, make this edit: {_edit_call(here, old, new)}."


def _signature(owner: Optional[str], name: str, workspace: Path) -> Optional[str]:
    """On a call that does not fit a function's parameters: how a workspace module defines it (for
    ``Item.__init__``, the method of the class ``Item``)."""
    for module, tree in _parsed(workspace).items():
        if tree is None:
            continue
        scope: List[ast.stmt] = tree.body
        if owner is not None:
            classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == owner]
            if not classes:
                continue
            scope = classes[0].body
        for node in scope:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                label = f"{owner}.{name}" if owner else name
                return (f"hint: `{label}` is defined in {module}.py (line {node.lineno}) as `def {name}("
                        f"{ast.unparse(node.args)})`: change it there, or call it as it is defined.")
    return None


def _line(workspace: Path, frame: Tuple[str, int]) -> str:
    """The traceback frame's line of its file ("" when there is none, or the file is not one to read: a
    FIFO the model made would block the command)."""
    path, line = workspace / frame[0], frame[1]
    try:
        if not _readable(path, workspace):
            return ""
        with path.open(encoding="utf-8", errors="replace") as f:
            for n, text in enumerate(f, 1):
                if n == line:
                    return text
    except OSError:
        pass
    return ""


def _called_modules(workspace: Path, frame: Tuple[str, int]) -> List[str]:
    """The names called on the traceback frame's line (``pal("x")`` gives ``pal``)."""
    return re.findall(r"(?<![\w.])(\w+)\s*\(", _line(workspace, frame))


def after_tool_hook(workspace: Path,
                    before: Optional[Callable[..., Optional[str]]] = None) -> Callable[..., Optional[str]]:
    """An ``after_tool`` hook: `before` (the user's PostToolUse hooks) first, then the hint appended to a
    ``bash`` result whose error the workspace answers."""
    root = Path(os.path.abspath(workspace))

    def after_tool(call: Any, result: Any) -> Optional[str]:   # (tooloop.ToolCall, tooloop.ToolResult)
        replaced = before(call, result) if before is not None else None
        text = replaced if replaced is not None else result.text
        if call.name != TOOL or result.denied:
            return replaced
        line = hint(text, root)
        if line is None or line in text:
            return replaced
        return f"{text}\n\n{line}"

    return after_tool


def after_check_hook(workspace: Path, command: str) -> Callable[[Dict[str, Any], str], Optional[str]]:
    """An ``after_check`` hook: the hint appended to a failed check's message when the workspace answers its
    error (a check's failure is a user message, not a ``bash`` result, so ``after_tool`` never sees it). The
    files and folders `command` names are read as the run starts with the library's own reading
    (``tooloop.rules.check_files``), the files it keeps read-only: no edit is proposed in them. Why: with
    ``--attempts 3 --check "python3 test_pal.py"``, attempts of a real run swapped ``import unittest`` for
    ``from pal import is_palindrome`` and back on each check failure until their time ran out."""
    from tooloop.rules import check_files

    root = Path(os.path.abspath(workspace))
    read_only = frozenset(check_files(command, root))

    def after_check(check: Dict[str, Any], message: str) -> Optional[str]:
        line = hint(str(check.get("output_tail") or ""), root, read_only)
        if line is None or line in message:
            return None
        return f"{message}\n\n{line}"

    return after_check


def _protected(path: Optional[str], read_only: FrozenSet[str]) -> bool:
    """Whether the workspace file `path` is one of `read_only` (the check's files and folders) or inside one
    of its folders: the library refuses an edit there."""
    return path is not None and any(path == p or path.startswith(p + "/") for p in read_only)
