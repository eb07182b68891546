"""A workspace's sessions at a glance, for `tooloop --list` and `/sessions`: id, start, the first line of
the first task, model turns and estimated cost, read from the session files (JSONL, see src/session.rs).

Reads only; must never fail on a torn or foreign file (a line that doesn't parse is skipped).
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from . import paths


@dataclass
class SessionInfo:
    id: str
    path: Path
    started: Optional[_dt.datetime]
    task: str
    turns: int
    cost: Optional[float]


def _user_text(entry: Mapping[str, Any]) -> str:
    content = entry.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content
                         if isinstance(b, dict) and b.get("type") == "text")
    return ""


def summarize(path: Path) -> SessionInfo:
    from .render import estimate_cost

    started: Optional[_dt.datetime] = None
    task = ""
    turns = 0
    cost: Optional[float] = 0.0
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        if record.get("type") == "session" and isinstance(record.get("created_at"), int):
            started = _dt.datetime.fromtimestamp(record["created_at"] / 1000)
        entry = record.get("entry")
        if record.get("type") != "entry" or not isinstance(entry, dict):
            continue
        if entry.get("role") == "user" and not task:
            text = _user_text(entry).strip()
            task = text.splitlines()[0] if text else ""
        elif entry.get("role") == "assistant" and entry.get("status") != "error":
            turns += 1
            usage: Dict[str, Any] = entry.get("usage") or {}
            try:
                one = estimate_cost(str(entry.get("model") or ""), usage)
            except Exception:
                one = None
            cost = None if cost is None or one is None else cost + one
    return SessionInfo(path.stem, path, started, task, turns, cost)


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
        cost = format_cost(info.cost) if info.cost is not None else "cost n/a"
        rows.append((info.id, start, turns, cost, info.task))
    wid = max(len(r[0]) for r in rows)
    out = []
    for ident, start, turns, cost, task in rows:
        head = f"{ident:<{wid}}  {start}  {turns:>9}  {cost:>9}  "
        room = max(width - len(head), 10)
        out.append(head + (task if len(task) <= room else task[: room - 1] + "…"))
    return out
