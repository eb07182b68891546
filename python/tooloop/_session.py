"""``tooloop.load_session``: what a session file (JSONL, written by the core as a conversation goes) holds,
read by the core's loader without opening the file for writing, plus the summary a session list shows.

Must never: parse the file itself (the core owns the format: torn tails, skipped lines and resets are its
business), or write to it.
"""

from __future__ import annotations

import os

from . import _tooloop
from .events import _Record

# `typing` is for the type checker only: importing it costs more than the rest of `import tooloop`.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import datetime
    from typing import Any, Dict, List, Optional, Union

__all__ = ["SessionInfo", "load_session"]


def _user_text(entry: Dict[str, Any]) -> str:
    content = entry.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


class SessionInfo(_Record):
    """A session file as loaded: ``entries`` (dicts like ``Agent.history``: id, role, content, status,
    created_at, duration_ms, model, usage, stop_reason, meta) of the current conversation (after the last
    reset), and a summary: ``id`` (the file's name without ``.jsonl``), ``path``, ``started`` (creation time
    of the first entry, local time; None for an empty session), ``first_user_line`` (the first line of the
    first user input), ``turns`` (completed model turns), ``cost_usd`` (each turn priced with its own model;
    None when no turn's model has a known price), ``torn_tail`` and ``skipped`` (what the loader repaired or
    left out: ``{"line", "bytes"}`` and ``[{"line", "reason"}]``).
    """

    __slots__ = ("id", "path", "entries", "started", "first_user_line", "turns", "cost_usd", "torn_tail",
                 "skipped")
    _fields = __slots__

    id: str
    path: str
    entries: List[Dict[str, Any]]
    started: Optional[datetime.datetime]
    first_user_line: str
    turns: int
    cost_usd: Optional[float]
    torn_tail: Optional[Dict[str, int]]
    skipped: List[Dict[str, Any]]

    def __init__(self, id: str, path: str, entries: List[Dict[str, Any]], started: Optional[datetime.datetime],
                 first_user_line: str, turns: int, cost_usd: Optional[float],
                 torn_tail: Optional[Dict[str, int]] = None, skipped: Optional[List[Dict[str, Any]]] = None) -> None:
        self._init(id=id, path=path, entries=entries, started=started, first_user_line=first_user_line,
                   turns=turns, cost_usd=cost_usd, torn_tail=torn_tail, skipped=list(skipped or []))


def load_session(path: Union[str, os.PathLike[str]]) -> SessionInfo:
    """Read the session file at ``path`` (see ``SessionInfo``). Raises ``tooloop.SessionError`` when it
    cannot be read; lines that do not parse are skipped and reported, never fatal."""
    import datetime

    report = _tooloop.load_session(os.fspath(path))
    entries: List[Dict[str, Any]] = list(report.get("entries") or [])
    started = None
    if entries and isinstance(entries[0].get("created_at"), int):
        started = datetime.datetime.fromtimestamp(entries[0]["created_at"] / 1000)
    first_line = ""
    for e in entries:
        if e.get("role") == "user":
            text = _user_text(e).strip()
            if text:
                first_line = text.splitlines()[0]
                break
    turns = sum(1 for e in entries if e.get("role") == "assistant" and e.get("status") == "complete")
    cost = report.get("cost_usd")
    name = os.path.basename(os.fspath(path))
    return SessionInfo(
        id=name[: -len(".jsonl")] if name.endswith(".jsonl") else name,
        path=str(report.get("path") or os.fspath(path)),
        entries=entries,
        started=started,
        first_user_line=first_line,
        turns=turns,
        cost_usd=float(cost) if cost is not None else None,
        torn_tail=report.get("torn_tail"),
        skipped=report.get("skipped"),
    )
