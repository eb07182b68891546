"""Writing a file for the user: owner-only, never through a link, all or nothing.

Every file the CLI writes for the user (``tooloop export -o``, the checkpoint store, the MCP approvals) goes
through ``write_private``: a temporary file created exclusively (``O_EXCL``, mode 0600) in the target's
folder, written, fsynced, then renamed over the target. A symlink planted at the target is replaced, never
followed (``rename`` acts on the link itself); one planted at a temporary name cannot be opened, since the
name is random and the open is exclusive. A reader sees the old file or the new one, never half of one.

Standard library only. Must never: follow a symlink at the final path, leave a file readable by others, or
leave a temporary file behind when the write fails.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Union

PathLike = Union[str, "os.PathLike[str]"]


def write_private(path: PathLike, data: Union[bytes, str]) -> Path:
    """Replace `path` atomically with `data` (str is written as UTF-8), mode 0600. Returns the path. Raises
    OSError (IsADirectoryError when `path` is a folder; the folder must exist)."""
    target = Path(os.fspath(path))
    if isinstance(data, str):
        data = data.encode("utf-8")
    folder = target.parent if str(target.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=str(folder))
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fchmod(fd, 0o600)   # mkstemp's mode already; said again so a future change cannot loosen it
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _sync_folder(folder)
    return target


def _sync_folder(folder: Path) -> None:
    """Make the rename durable (best effort: some filesystems refuse fsync on a folder)."""
    try:
        dfd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)
