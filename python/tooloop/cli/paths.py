"""Where the CLI keeps its files: sessions (one JSONL file per conversation, grouped by workspace) and the
REPL's input history.

Layout: ``<data>/sessions/<workspace-key>/<id>.jsonl`` and ``<data>/history``, where ``<data>`` is
``$TOOLOOP_HOME`` if set (tests), else ``$XDG_DATA_HOME/tooloop``, else ``~/.local/share/tooloop``.
Standard library only: this module is imported on every start and must stay cheap.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import re
import secrets
from pathlib import Path
from typing import List, Mapping, Optional

SESSION_SUFFIX = ".jsonl"


def data_dir(env: Optional[Mapping[str, str]] = None) -> Path:
    """The per-user data folder (not created here)."""
    env = os.environ if env is None else env
    if env.get("TOOLOOP_HOME"):
        return Path(env["TOOLOOP_HOME"]).expanduser()
    if env.get("XDG_DATA_HOME"):
        return Path(env["XDG_DATA_HOME"]).expanduser() / "tooloop"
    return Path.home() / ".local" / "share" / "tooloop"


def workspace_key(workspace: Path) -> str:
    """A folder name that identifies `workspace`: readable (the path's tail) and unique (a hash of the
    whole resolved path), so two projects called `app` never share sessions."""
    resolved = str(Path(workspace).resolve())
    digest = hashlib.sha256(resolved.encode("utf-8", "surrogateescape")).hexdigest()[:10]
    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", resolved).strip("-.") or "root"
    return f"{readable[-40:].lstrip('-.')}-{digest}"


def sessions_dir(workspace: Path, env: Optional[Mapping[str, str]] = None) -> Path:
    return data_dir(env) / "sessions" / workspace_key(workspace)


def approvals_kept_apart(workspace: Path) -> bool:
    """Whether this workspace's sessions folder (where approvals of its settings and MCP servers are kept)
    lies outside it. Inside (tooloop run in the folder that holds its own data, such as $HOME), the model's
    sandboxed bash could write approvals: then none is read or kept."""
    try:
        sessions_dir(workspace).resolve().relative_to(Path(workspace).resolve())
    except ValueError:
        return True
    except (OSError, RuntimeError):
        return False
    return False


def history_file(env: Optional[Mapping[str, str]] = None) -> Path:
    return data_dir(env) / "history"


def new_session_id(now: Optional[_dt.datetime] = None) -> str:
    """``YYYYMMDD-HHMMSS-xxxx``: sorts by creation time; the random tail keeps two starts in the same
    second apart."""
    now = now or _dt.datetime.now()
    return f"{now:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


def new_session_path(workspace: Path, env: Optional[Mapping[str, str]] = None) -> Path:
    return sessions_dir(workspace, env) / (new_session_id() + SESSION_SUFFIX)


def has_entries(path: Path) -> bool:
    """Whether a session file holds at least one conversation entry (a file with only its header line
    is a REPL that was opened and closed without a message)."""
    try:
        with open(path, "rb") as f:
            return any(b'"type":"entry"' in line.replace(b" ", b"") for line in f)
    except OSError:
        return False


def list_sessions(workspace: Path, env: Optional[Mapping[str, str]] = None) -> List[Path]:
    """This workspace's sessions that hold something, most recently used last."""
    folder = sessions_dir(workspace, env)
    try:
        files = [p for p in folder.iterdir() if p.suffix == SESSION_SUFFIX and p.is_file()]
    except OSError:
        return []
    files = [p for p in files if has_entries(p)]
    # Most recently *used* (a resumed old session becomes the latest), name as the tie-break.
    return sorted(files, key=lambda p: (p.stat().st_mtime_ns, p.name))


def latest_session(workspace: Path, env: Optional[Mapping[str, str]] = None) -> Optional[Path]:
    sessions = list_sessions(workspace, env)
    return sessions[-1] if sessions else None


class SessionNotFound(Exception):
    pass


def find_session(ident: str, workspace: Path, env: Optional[Mapping[str, str]] = None) -> Path:
    """Resolve ``--resume ID``: a path to a session file, an id (or unique id prefix) of this
    workspace's sessions, else of any workspace's.

    Raises SessionNotFound with a message for the user."""
    as_path = Path(ident).expanduser()
    if as_path.suffix == SESSION_SUFFIX and as_path.is_file():
        return as_path
    ident = ident[: -len(SESSION_SUFFIX)] if ident.endswith(SESSION_SUFFIX) else ident
    if not ident or "/" in ident or ident.startswith("."):
        raise SessionNotFound(f"no session {ident!r}")
    own = sessions_dir(workspace, env)
    root = data_dir(env) / "sessions"
    for pattern_dirs in ([own], sorted(p for p in _subdirs(root) if p != own)):
        exact = [d / (ident + SESSION_SUFFIX) for d in pattern_dirs if (d / (ident + SESSION_SUFFIX)).is_file()]
        if exact:
            return exact[0]
        matches = [p for d in pattern_dirs for p in _files(d) if p.name.startswith(ident)]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            names = ", ".join(sorted(p.stem for p in matches)[:5])
            raise SessionNotFound(f"session id {ident!r} is ambiguous: {names}")
    raise SessionNotFound(f"no session {ident!r} (sessions of this workspace are in {own})")


def _subdirs(root: Path) -> List[Path]:
    try:
        return [p for p in root.iterdir() if p.is_dir()]
    except OSError:
        return []


def _files(folder: Path) -> List[Path]:
    try:
        return [p for p in folder.iterdir() if p.suffix == SESSION_SUFFIX and p.is_file()]
    except OSError:
        return []


def remove_if_empty(path: Path) -> bool:
    """Delete a session file that never got an entry. Returns whether it was removed."""
    if path.is_file() and not has_entries(path):
        try:
            path.unlink()
            return True
        except OSError:
            return False
    return False
