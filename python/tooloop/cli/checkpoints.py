"""Checkpoints of the files the agent writes or edits, for `/undo` and `/diff`.

Each time a write-kind tool (write_file, edit_file, or a host's own) changes a file, the run's ``file_change``
event carries what the file was before; the runner hands it to `record_change`, which saves those bytes and
mode, once per file per user message ("task"), in
``<session>.checkpoints/`` beside the session file: ``manifest.json`` (tasks and, per task, what each file
was before its first change) and ``blobs/<sha256>``. Folder 0700, files 0600: they may hold secrets.

`undo(n)` puts every file touched during the last n tasks back as it was before the earliest of them (a
file that did not exist is removed). What bash changes is not tracked, and the conversation itself is not
rolled back: the caller tells the model in the next message.

Must never: write outside the workspace, follow a path out of it, or raise into the agent's worker thread.
Files in the workspace are put back by the library (`tooloop.restore_file`: race-free directory handles);
this module writes only its own checkpoint folder beside the session file.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

if TYPE_CHECKING:
    from tooloop import FileChangeEvent

#: The built-in tools that change a file named by their "path" input.
FILE_TOOLS = ("write_file", "edit_file")

Record = Dict[str, Any]   # {"existed": bool, "mode": int | None, "blob": str | None}


@dataclass
class Restored:
    path: str
    action: str          # "restored" | "removed" | "unchanged" | "skipped"
    added: int = 0       # lines the undo adds back
    removed: int = 0     # lines the undo takes away


def _private_dir(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)


def _write_private(path: Path, data: bytes) -> None:
    """Atomically replace `path` with `data`, owner-only, never through a link (private_files)."""
    from .private_files import write_private

    write_private(path, data)


def _lines(data: Optional[bytes]) -> List[str]:
    if data is None:
        return []
    return data.decode("utf-8", "replace").splitlines(keepends=True)


def _is_binary(data: Optional[bytes]) -> bool:
    return data is not None and b"\0" in data[:8000]


class Checkpoints:
    def __init__(self, folder: Path, workspace: Path):
        self.folder = Path(folder)
        self.workspace = Path(workspace).resolve()
        self._lock = threading.Lock()
        self.tasks: List[Dict[str, Any]] = []
        self.errors: List[str] = []
        try:
            data = json.loads((self.folder / "manifest.json").read_text(encoding="utf-8"))
            if isinstance(data, dict) and isinstance(data.get("tasks"), list):
                self.tasks = [t for t in data["tasks"] if isinstance(t, dict) and isinstance(t.get("files"), dict)]
        except (OSError, ValueError):
            pass

    @classmethod
    def for_session(cls, session: Path, workspace: Path) -> Checkpoints:
        session = Path(session)
        return cls(session.with_name(session.stem + ".checkpoints"), workspace)

    # -- recording ------------------------------------------------------------------------------------
    def begin_task(self, text: str) -> None:
        """A user message is about to be sent: changes from now on belong to it."""
        first = (text.strip().splitlines() or [""])[0]
        with self._lock:
            self.tasks.append({"text": first[:200], "at": int(time.time() * 1000), "files": {}})
            if self.folder.is_dir():
                # Written once there is something to undo (a task without changes creates no folder), so
                # that a resumed session counts its messages as this one did.
                try:
                    self._save()
                except OSError:
                    pass

    def _relative(self, raw: Any) -> Optional[str]:
        if not isinstance(raw, str) or not raw:
            return None
        target = Path(raw) if os.path.isabs(raw) else self.workspace / raw
        try:
            # The parent is resolved (symlinked folders), the name itself is not: the tools replace it.
            resolved = target.parent.resolve() / target.name
            rel = resolved.relative_to(self.workspace)
        except (OSError, ValueError):
            return None
        return None if str(rel) in ("", ".") else rel.as_posix()

    def before_call(self, name: str, inp: Dict[str, Any], path_field: Optional[str] = None) -> None:
        """Snapshot a file a call is about to change, from the disk (for a host without the run's events;
        the CLI records from ``file_change`` events, see `record_change`): a built-in file tool's, or, with
        `path_field` (``Agent.tool_info(name).path_field`` of a tool of kind "write"), any tool's. Never raises."""
        field = path_field or ("path" if name in FILE_TOOLS else None)
        if field is None:
            return
        self._keep_first(inp.get(field), lambda rel: self._snapshot(self.workspace / rel))

    def record_change(self, event: FileChangeEvent) -> None:
        """A file tool changed a file (a ``file_change`` event, which says what the file was before): keep
        that state, unless the task already holds an earlier one. Never raises."""
        def before(rel: str) -> Record:
            data = event.before_bytes
            if data is not None:
                return self._store(data, int(event.before_mode or 0o644))
            if event.before_too_large or event.kind != "created":
                self.errors.append(f"the content of {rel!r} before the change was not kept (too large)")
                return {"existed": True, "mode": None, "blob": None}   # cannot restore: left alone
            return {"existed": False, "mode": None, "blob": None}

        self._keep_first(event.path, before)

    def _keep_first(self, path: Any, state: Callable[[str], Record]) -> None:
        """Keep ``state(rel)`` for the file at ``path`` in the current task, unless the task already holds the
        state before its first change (that one is kept). Never raises: a checkpoint problem must not stop the
        agent's work."""
        try:
            rel = self._relative(path)
            if rel is None:
                return
            with self._lock:
                if not self.tasks:
                    self.tasks.append({"text": "", "at": int(time.time() * 1000), "files": {}})
                files = self.tasks[-1]["files"]
                if rel in files:
                    return
                files[rel] = state(rel)
                self._save()
        except Exception as e:
            self.errors.append(f"checkpoint of {path!r} failed: {e}")

    def _store(self, data: bytes, mode: int) -> Record:
        digest = hashlib.sha256(data).hexdigest()
        blobs = self.folder / "blobs"
        _private_dir(self.folder)
        _private_dir(blobs)
        if not (blobs / digest).exists():
            _write_private(blobs / digest, data)
        return {"existed": True, "mode": mode, "blob": digest}

    def _snapshot(self, path: Path) -> Record:
        if path.is_symlink() or (path.exists() and not path.is_file()):
            return {"existed": True, "mode": None, "blob": None}   # not ours to restore: left alone
        if not path.exists():
            return {"existed": False, "mode": None, "blob": None}
        return self._store(path.read_bytes(), path.stat().st_mode & 0o7777)

    def _save(self) -> None:
        _private_dir(self.folder)
        _write_private(self.folder / "manifest.json",
                       json.dumps({"version": 1, "tasks": self.tasks}, indent=1).encode("utf-8"))

    def _blob(self, record: Record) -> Optional[bytes]:
        if not record.get("existed") or not record.get("blob"):
            return None
        return (self.folder / "blobs" / str(record["blob"])).read_bytes()

    def _earliest(self, tasks: List[Dict[str, Any]]) -> Dict[str, Record]:
        first: Dict[str, Record] = {}
        for task in tasks:
            for rel, record in task["files"].items():
                first.setdefault(rel, record)
        return first

    # -- undo and diff ---------------------------------------------------------------------------------
    def undo(self, n: int = 1) -> Tuple[int, List[Restored]]:
        """Put the files back as they were before the n-th last task; drop those tasks. Returns (tasks
        undone, what happened to each file). Raises ValueError when there are fewer than n tasks."""
        with self._lock:
            if n < 1 or n > len(self.tasks):
                raise ValueError(f"there {'is' if len(self.tasks) == 1 else 'are'} only {len(self.tasks)} "
                                 f"message{'s' if len(self.tasks) != 1 else ''} to undo")
            undone = self.tasks[-n:]
            out: List[Restored] = []
            for rel, record in sorted(self._earliest(undone).items()):
                if self._relative(rel) != rel:
                    # A folder on the way became a symlink out of the workspace since: never write there.
                    out.append(Restored(rel, "skipped"))
                    continue
                path = self.workspace / rel
                before = self._blob(record)
                now = path.read_bytes() if path.is_file() else None
                if before is None and not record.get("existed"):
                    if now is None and not path.exists():
                        out.append(Restored(rel, "unchanged"))
                        continue
                    if path.is_dir() and not path.is_symlink():
                        out.append(Restored(rel, "skipped"))
                        continue
                    if not self._restore(rel, None, 0, out):
                        continue
                    out.append(Restored(rel, "removed", 0, len(_lines(now))))
                    continue
                if before is None:
                    continue  # was a folder or something else we never wrote: leave it
                diff = list(difflib.unified_diff(_lines(now), _lines(before), n=0))
                added = sum(1 for d in diff if d.startswith("+") and not d.startswith("+++"))
                removed = sum(1 for d in diff if d.startswith("-") and not d.startswith("---"))
                mode = int(record.get("mode") or 0o644)
                if now == before and path.is_file() and (path.stat().st_mode & 0o7777) == mode:
                    out.append(Restored(rel, "unchanged"))
                    continue
                if not self._restore(rel, before, mode, out):
                    continue
                out.append(Restored(rel, "restored", added, removed))
            del self.tasks[-n:]
            if self.folder.exists():
                self._save()
            return n, out

    def _restore(self, rel: str, data: Optional[bytes], mode: int, out: List[Restored]) -> bool:
        """Write (or remove) through the library's race-free workspace handles: the temporary file, the
        mode and the rename never follow a symlink a command planted meanwhile. False (and "skipped")
        when the library refuses because the path now leads out of the workspace."""
        import tooloop

        try:
            tooloop.restore_file(self.workspace, rel, data, mode)
        except OSError as e:
            out.append(Restored(rel, "skipped"))
            self.errors.append(f"undo of {rel} refused: {e}")
            return False
        return True

    def diff(self) -> List[str]:
        """Unified diff of every file the agent changed in this session: from before its first change
        to now."""
        with self._lock:
            first = self._earliest(self.tasks)
        out: List[str] = []
        for rel, record in sorted(first.items()):
            path = self.workspace / rel
            before = self._blob(record)
            now = path.read_bytes() if path.is_file() else None
            if before == now:
                continue
            if _is_binary(before) or _is_binary(now):
                out.append(f"binary file {rel} changed")
                continue
            a = f"a/{rel}" if before is not None else "/dev/null"
            b = f"b/{rel}" if now is not None else "/dev/null"
            lines = list(difflib.unified_diff(_lines(before), _lines(now), a, b))
            out.extend(ln.rstrip("\n") for ln in lines)
        return out


def summary(restored: List[Restored]) -> List[str]:
    lines = []
    for r in restored:
        if r.action == "removed":
            lines.append(f"removed {r.path} (the agent created it)")
        elif r.action == "restored":
            lines.append(f"restored {r.path} (+{r.added} -{r.removed} lines)")
        elif r.action == "skipped":
            lines.append(f"skipped {r.path}: its folder now leads out of the workspace")
    return lines
