"""Sessions in a SQLite database for the CLI, and ``tooloop sessions``.

``--session-db PATH`` (or ``TOOLOOP_SESSION_DB``, or ``"sessionDb"`` in the user's settings.json) keeps the
CLI's sessions in one database instead of one JSONL file each: a new session is ``PATH#<new id>``, ``--continue`` takes this workspace's latest session there,
``--resume ID`` an id (or unique prefix) of it. ``tooloop sessions`` lists sessions from either store (id,
start, turns, tools used, tokens, cost, the first line of the task), filtered by workspace and date;
``tooloop sessions migrate SOURCE DEST`` copies sessions between the stores.

Reads databases only through the package's public functions (``tooloop.load_session``,
``tooloop.migrate_session``) and the compiled module's listing; must never write to a database except through
them.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple, TypedDict, Union

from . import paths

if TYPE_CHECKING:
    from tooloop.types import DbSession

DB_SUFFIXES = (".db", ".sqlite", ".sqlite3")


class SessionSummary(TypedDict):
    """One row of ``tooloop sessions``."""

    id: str
    session: str                     # the spec that opens it: a file path or ``db#id``
    started: Optional[_dt.datetime]
    turns: int
    tools: int                       # tool calls the model made
    tokens: int
    cost_usd: Optional[float]
    task: str                        # the first line of the first task


def split_spec(session: Union[str, "os.PathLike[str]"]) -> Optional[Tuple[Path, str]]:
    """``(db, id)`` of a database session spec, else None (the core's rule: the first ``#`` after a path
    ending in .db, .sqlite or .sqlite3)."""
    text = os.fspath(session)
    at = text.find("#")
    while at >= 0:
        if text[:at].endswith(DB_SUFFIXES):
            return Path(text[:at]), text[at + 1:]
        at = text.find("#", at + 1)
    return None


def configured_db(args: argparse.Namespace) -> Optional[Path]:
    """The database of ``--session-db``, else ``TOOLOOP_SESSION_DB``, else the ``"sessionDb"`` setting of the
    user's settings file (None: JSONL files)."""
    value = getattr(args, "session_db", None) or os.environ.get("TOOLOOP_SESSION_DB") or None
    if value:
        return Path(value).expanduser()
    return _settings_db()


def _settings_db() -> Optional[Path]:
    """``"sessionDb"`` of the user's ``settings.json`` (a path; relative to the file's folder), else None. Only
    the user's own file counts: a project's settings cannot move where the user's sessions are written. A
    broken file is reported where the settings are loaded, not here."""
    from .config import ConfigProblem
    from .settings import read_settings, user_settings_file

    path = user_settings_file()
    try:
        value = read_settings(path).get("sessionDb")
    except ConfigProblem:
        return None
    if not isinstance(value, str) or not value.strip():
        return None
    db = Path(value).expanduser()
    return db if db.is_absolute() else path.parent / db


def _rows(db: Path) -> List[DbSession]:
    import tooloop

    return tooloop.list_sessions(db)


def _same_workspace(row: DbSession, workspace: Path) -> bool:
    ws = row.get("workspace")
    if not ws:
        return False
    try:
        return Path(ws).resolve() == workspace.resolve()
    except OSError:
        return False


def session_spec(args: argparse.Namespace, db: Path, workspace: Path) -> Path:
    """The session this start uses in ``db``: new, the workspace's latest (``--continue``) or ``--resume ID``.
    Raises ConfigProblem with a message for the user."""
    from .config import ConfigProblem

    if not db.name.endswith(DB_SUFFIXES):
        raise ConfigProblem(f"--session-db {db}: a session database's name ends in .db, .sqlite or .sqlite3")
    try:
        rows = [r for r in _rows(db) if r.get("records")]
    except Exception as e:
        raise ConfigProblem(str(e)) from None
    if getattr(args, "continue_", False):
        own = [r for r in rows if _same_workspace(r, workspace)]
        if not own:
            raise ConfigProblem(f"no earlier session to continue in {workspace} (in {db})")
        latest = max(own, key=lambda r: (r["updated_at"], r["id"]))
        return Path(f"{db}#{latest['id']}")
    resume = getattr(args, "resume", None)
    if resume:
        exact = [r for r in rows if r["id"] == resume]
        matches = exact or [r for r in rows if str(r["id"]).startswith(resume)]
        if len(matches) == 1:
            return Path(f"{db}#{matches[0]['id']}")
        if len(matches) > 1:
            names = ", ".join(sorted(str(r["id"]) for r in matches)[:5])
            raise ConfigProblem(f"session id {resume!r} is ambiguous: {names}")
        raise ConfigProblem(f"no session {resume!r} in {db}")
    return Path(f"{db}#{paths.new_session_id()}")


def exists(session: Path) -> bool:
    """Whether the session holds something already (a resumed one)."""
    parts = split_spec(session)
    if parts is None:
        return session.exists()
    db, ident = parts
    try:
        return any(r["id"] == ident and r.get("records") for r in _rows(db))
    except Exception:
        return False


def session_id(session: Path) -> str:
    """The id people see: the file's name without .jsonl, or the id after ``db#``."""
    parts = split_spec(session)
    return parts[1] if parts is not None else session.stem


def has_entries(session: Path) -> bool:
    """Whether the session holds a conversation entry (an opened and closed REPL leaves none)."""
    return exists(session) if split_spec(session) is not None else paths.has_entries(session)


def checkpoint_anchor(session: Path) -> Path:
    """Where a session's checkpoints go is derived from a file path: for ``db#id`` it is ``<db>.d/<id>``, so
    two sessions of one database never share checkpoints."""
    parts = split_spec(session)
    if parts is None:
        return session
    db, ident = parts
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in ident)
    return db.parent / f"{db.name}.d" / f"{safe}.jsonl"


# ---------------------------------------------------------------------------------------------- listing

def summary(spec: str) -> SessionSummary:
    """id, started, turns, tools, tokens, cost and the task's first line of one session (either store)."""
    import tooloop

    info = tooloop.load_session(spec)
    tools = tokens = 0
    for e in info.entries:
        if e.get("role") == "assistant":
            tools += sum(1 for b in e.get("content") or [] if isinstance(b, dict) and b.get("type") == "tool_use")
            usage = e.get("usage") or {}
            tokens += (usage.get("input_tokens", 0) + usage.get("output_tokens", 0)
                       + usage.get("cache_creation_input_tokens", 0) + usage.get("cache_read_input_tokens", 0))
    return {"id": info.id, "session": spec, "started": info.started, "turns": info.turns, "tools": tools,
            "tokens": tokens, "cost_usd": info.cost_usd, "task": info.first_user_line}


def _date(text: str) -> _dt.datetime:
    try:
        return _dt.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date (YYYY-MM-DD or YYYY-MM-DDTHH:MM)") from None


def collect(dbs: Sequence[Path], workspace: Optional[Path], files: bool, since: Optional[_dt.datetime],
            until: Optional[_dt.datetime]) -> List[SessionSummary]:
    specs: List[str] = []
    for db in dbs:
        for row in _rows(db):
            if row.get("records") and (workspace is None or _same_workspace(row, workspace)):
                specs.append(f"{db}#{row['id']}")
    if files:
        if workspace is not None:
            specs += [str(p) for p in paths.list_sessions(workspace)]
        else:
            root = paths.data_dir() / "sessions"
            specs += [str(f) for f in sorted(root.glob("*/*.jsonl")) if paths.has_entries(f)]
    out = []
    for spec in specs:
        try:
            s = summary(spec)
        except Exception as e:  # a torn or foreign file is listed as what it is, never fatal
            s = {"id": Path(spec).stem, "session": spec, "started": None, "turns": 0, "tools": 0, "tokens": 0,
                 "cost_usd": None, "task": f"(unreadable: {e})"}
        started = s["started"]
        if since is not None and (started is None or started < since):
            continue
        if until is not None and (started is None or started >= until):
            continue
        out.append(s)
    out.sort(key=lambda s: (s["started"] or _dt.datetime.min, s["id"]))
    return out


def table(rows: List[SessionSummary], width: int = 120) -> List[str]:
    from .render import format_cost

    if not rows:
        return []
    cells = [(r["id"], f"{r['started']:%Y-%m-%d %H:%M}" if r["started"] else "?", str(r["turns"]), str(r["tools"]),
              f"{r['tokens']:,}", format_cost(r["cost_usd"]), r["task"]) for r in rows]
    wid = max(len(c[0]) for c in cells)
    out = [f"{'ID':<{wid}}  {'STARTED':<16}  {'TURNS':>5}  {'TOOLS':>5}  {'TOKENS':>9}  {'COST':>9}  TASK"]
    for ident, start, turns, tools, tokens, cost, task in cells:
        head = f"{ident:<{wid}}  {start:<16}  {turns:>5}  {tools:>5}  {tokens:>9}  {cost:>9}  "
        room = max(width - len(head), 10)
        out.append(head + (task if len(task) <= room else task[: room - 1] + "…"))
    return out


def main(argv: Sequence[str]) -> int:
    """``tooloop sessions [...]`` and ``tooloop sessions migrate SOURCE DEST``. Exit 0, 1 (failed), 2 (usage)."""
    import json
    import shutil

    if argv and argv[0] == "migrate":
        return migrate(argv[1:])
    p = argparse.ArgumentParser(prog="tooloop sessions",
                                description="List sessions (JSONL files and SQLite databases): id, start, turns, "
                                "tool calls, tokens, cost and the first line of the task. "
                                "`tooloop sessions migrate SOURCE DEST` copies sessions between the stores.")
    p.add_argument("--db", action="append", default=[], metavar="PATH",
                   help="a session database to list (repeatable; default: --session-db / TOOLOOP_SESSION_DB)")
    p.add_argument("--workspace", "-w", metavar="DIR", help="only this workspace's sessions (default: the current folder)")
    p.add_argument("--all", "-a", action="store_true", help="every workspace's sessions")
    p.add_argument("--since", type=_date, metavar="DATE", help="started on or after DATE (YYYY-MM-DD[THH:MM])")
    p.add_argument("--until", type=_date, metavar="DATE", help="started before DATE")
    p.add_argument("--json", action="store_true", help="one JSON object per session")
    p.add_argument("--session-db", metavar="PATH", help=argparse.SUPPRESS)
    args = p.parse_args(list(argv))
    dbs = [Path(d).expanduser() for d in args.db]
    if not dbs and configured_db(args) is not None:
        dbs = [configured_db(args)]  # type: ignore[list-item]
    workspace = None if args.all else Path(args.workspace or os.getcwd()).expanduser()
    if workspace is not None and not workspace.is_dir():
        print(f"tooloop: workspace {str(workspace)!r} is not a folder", file=sys.stderr)
        return 2
    try:
        rows = collect(dbs, workspace, True, args.since, args.until)
    except Exception as e:
        print(f"tooloop: {e}", file=sys.stderr)
        return 1
    if args.json:
        for r in rows:
            print(json.dumps({**r, "started": r["started"].isoformat() if r["started"] else None}))
        return 0
    lines = table(rows, width=shutil.get_terminal_size((120, 24)).columns)
    if not lines:
        print("no sessions" + (f" in {workspace.resolve()}" if workspace is not None else ""))
    for line in lines:
        print(line)
    return 0


def migrate(argv: Sequence[str]) -> int:
    """``tooloop sessions migrate SOURCE DEST``: a JSONL file into ``DB#ID`` (or a whole folder of them into
    ``DB``, each under its file name), or ``DB#ID`` back into a JSONL file."""
    import tooloop

    p = argparse.ArgumentParser(prog="tooloop sessions migrate",
                                description="Copy sessions between the stores, record for record: FILE.jsonl -> "
                                "DB#ID, FOLDER -> DB (each FOLDER/ID.jsonl as DB#ID), DB#ID -> FILE.jsonl.")
    p.add_argument("source")
    p.add_argument("dest")
    args = p.parse_args(list(argv))
    source = Path(args.source).expanduser()
    pairs = []
    if source.is_dir():
        if split_spec(args.dest) is not None or not args.dest.endswith(DB_SUFFIXES):
            print("tooloop: a folder migrates into a database: tooloop sessions migrate FOLDER runs/sessions.db",
                  file=sys.stderr)
            return 2
        pairs = [(str(f), f"{args.dest}#{f.stem}") for f in sorted(source.glob("*.jsonl"))]
    else:
        pairs = [(args.source, args.dest)]
    failed = 0
    for src, dst in pairs:
        try:
            n = tooloop.migrate_session(src, dst)
            print(f"{src} -> {dst}: {n} records")
        except tooloop.Error as e:
            failed += 1
            print(f"tooloop: {src}: {e}", file=sys.stderr)
    return 1 if failed else 0
