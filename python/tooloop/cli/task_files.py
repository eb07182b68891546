"""The files a task names, shown with it (the compact prompt's world): "fix the bug in calc.py" is sent with
calc.py's text under it, as aider sends the files it is given, so a small model can answer at once (with
`text_edits`, the whole fixed file in a fenced block) instead of spending turns reading — or guessing what a
file holds, as it did with "settings.py defines LIMIT; write its value into limit.txt" (it wrote 100).

Only names that are existing regular files inside the workspace, as written in the task (`calc.py`,
`src/app.py`, in backticks or not), never a dotfile or a path through one (`.env`, `.git/config`), never a
file that is not UTF-8 text, and together within a budget of the context window (a file that does not fit
is left out whole, never cut: the model reads it with read_file). Must never: follow a name outside the
workspace (a symlink or `..` that leaves it is skipped), or change the task's own words.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import List, Optional, Tuple

#: A file name as a task writes it: `calc.py`, src/app.py, test_x.py (an extension is needed).
_NAME = re.compile(r"(?<![\w./-])((?:[\w-]+/)*[\w-][\w.-]*\.[A-Za-z0-9]{1,8})(?![\w/-])")
#: The share of the context window (in tokens, ~4 characters each) the files may take.
WINDOW_SHARE = 0.25
HEADER = "The files the task names, as they are now:"


def named_files(task: str, workspace: Path, budget_chars: int) -> List[Tuple[str, str]]:
    """(name as written, text) of the files `task` names, in the order named, within `budget_chars`."""
    try:
        root = workspace.resolve(strict=True)
    except OSError:
        return []
    found: List[Tuple[str, str]] = []
    seen = set()
    left = budget_chars
    for m in _NAME.finditer(task):
        name = m.group(1).rstrip(".")
        if name in seen or any(part.startswith(".") for part in Path(name).parts):
            continue
        seen.add(name)
        try:
            path = (root / name).resolve(strict=True)
            path.relative_to(root)
            # Its size first: a named multi-gigabyte log is never read, only left out.
            if not path.is_file() or path.stat().st_size > left:
                continue
            text = path.read_bytes().decode("utf-8")
        except (OSError, ValueError):   # missing, outside the workspace, not UTF-8
            continue
        if len(text) > left:
            continue
        left -= len(text)
        found.append((name, text))
    return found


def with_named_files(task: str, workspace: Path, window: Optional[int]) -> str:
    """`task`, then the files it names in fenced blocks under their names (the format `text_edits` reads
    back); `task` unchanged when it names none that fit."""
    budget = int((window or 4096) * WINDOW_SHARE * 4)
    files = named_files(task, workspace, budget)
    if not files:
        return task
    parts = [task, "", HEADER]
    for name, text in files:
        # A fence longer than any run of backticks in the file, so the file cannot close it.
        fence = "`" * max(3, 1 + max((len(r) for r in re.findall(r"`+", text)), default=0))
        body = text if text.endswith("\n") or not text else text + "\n"
        parts += ["", name, fence + "\n" + body + fence]
    return "\n".join(parts)
