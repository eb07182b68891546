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

    from .types import DbSession, HistoryEntry, SkippedLine, TornTail

__all__ = ["SessionInfo", "list_sessions", "load_session", "migrate_session"]


def _user_text(entry: HistoryEntry) -> str:
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
    entries: List[HistoryEntry]
    started: Optional[datetime.datetime]
    first_user_line: str
    turns: int
    cost_usd: Optional[float]
    torn_tail: Optional[TornTail]
    skipped: List[SkippedLine]

    def __init__(self, id: str, path: str, entries: List[HistoryEntry], started: Optional[datetime.datetime],
                 first_user_line: str, turns: int, cost_usd: Optional[float],
                 torn_tail: Optional[TornTail] = None, skipped: Optional[List[SkippedLine]] = None) -> None:
        self._init(id=id, path=path, entries=entries, started=started, first_user_line=first_user_line,
                   turns=turns, cost_usd=cost_usd, torn_tail=torn_tail, skipped=list(skipped or []))


def _database_id(spec: str) -> Optional[str]:
    """The session id of a database session spec (``runs/sessions.db#task-17`` -> ``task-17``), else None:
    the first ``#`` that ends a path in ``.db``, ``.sqlite`` or ``.sqlite3``, as the core reads it."""
    at = spec.find("#")
    while at >= 0:
        if spec[:at].endswith((".db", ".sqlite", ".sqlite3")):
            return spec[at + 1:]
        at = spec.find("#", at + 1)
    return None


def load_session(path: Union[str, os.PathLike[str]]) -> SessionInfo:
    """Read the session file at ``path``, or the database session it names (``"runs/sessions.db#task-17"``;
    ``id`` is then the session id) (see ``SessionInfo``). Raises ``tooloop.SessionError`` when it
    cannot be read; lines that do not parse are skipped and reported, never fatal."""
    import datetime

    report = _tooloop.load_session(os.fspath(path))
    entries: List[HistoryEntry] = list(report.get("entries") or [])
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
    ident = name[: -len(".jsonl")] if name.endswith(".jsonl") else name
    db_id = _database_id(os.fspath(path))
    return SessionInfo(
        id=db_id if db_id is not None else ident,
        path=str(report.get("path") or os.fspath(path)),
        entries=entries,
        started=started,
        first_user_line=first_line,
        turns=turns,
        cost_usd=float(cost) if cost is not None else None,
        torn_tail=report.get("torn_tail"),
        skipped=report.get("skipped"),
    )


def migrate_session(source: Union[str, os.PathLike[str]], dest: Union[str, os.PathLike[str]]) -> int:
    """Copy the session ``source`` names into a new session ``dest`` names: a JSONL file into a database
    session (``"runs/sessions.db#task-17"``) or back, record for record (entries, compactions, resets), so the
    conversation the API sees is the same byte for byte. Returns how many records were copied. Raises
    ``tooloop.ConfigError`` when ``dest`` already holds a session, ``tooloop.SessionError`` when either side
    cannot be read or written (a foreign or newer store is refused untouched)."""
    return _tooloop.migrate_session(os.fspath(source), os.fspath(dest))


def list_sessions(db: Union[str, os.PathLike[str]]) -> List[DbSession]:
    """The sessions of a tooloop SQLite database, oldest first (see ``tooloop.types.DbSession``); an empty list
    when the file does not exist. Raises ``tooloop.SessionError`` for a file that is not tooloop's database
    (left untouched). Each can be opened with ``Agent(session=f"{db}#{id}")``."""
    if not os.path.exists(os.fspath(db)):
        return []
    return _tooloop.list_db_sessions(os.fspath(db))
