"""A workspace's sessions at a glance, for `tooloop --list` and `/sessions`: id, start, the first line of
the first task, model turns and estimated cost, as the library's session loader (``tooloop.load_session``)
reads them.

Reads only; must never fail on a torn or foreign file (the loader skips what does not parse; a file it
cannot read at all is listed with what is known: its name).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, List, Mapping, Optional

from . import paths

if TYPE_CHECKING:
    from tooloop import SessionInfo


def summarize(path: Path) -> SessionInfo:
    import tooloop

    try:
        return tooloop.load_session(path)
    except tooloop.Error:
        return tooloop.SessionInfo(path.stem, str(path), [], None, "", 0, None)


def list_infos(workspace: Path, env: Optional[Mapping[str, str]] = None) -> List[SessionInfo]:
    """This workspace's sessions, most recently used last."""
    return [summarize(p) for p in paths.list_sessions(workspace, env)]


def table(infos: List[SessionInfo], width: int = 100) -> List[str]:
    from .render import format_cost

    if not infos:
        return []
    rows = []
    for info in infos:
        start = f"{info.started:%Y-%m-%d %H:%M}" if info.started else "?"
        turns = f"{info.turns} turn{'s' if info.turns != 1 else ''}"
        rows.append((info.id, start, turns, format_cost(info.cost_usd), info.first_user_line))
    wid = max(len(r[0]) for r in rows)
    out = []
    for ident, start, turns, cost, task in rows:
        head = f"{ident:<{wid}}  {start}  {turns:>9}  {cost:>9}  "
        room = max(width - len(head), 10)
        out.append(head + (task if len(task) <= room else task[: room - 1] + "…"))
    return out
