"""`/undo` writes only inside the workspace (issue 20, item 1): the CLI's checkpoints put files back through
the library's race-free handles (`tooloop.restore_file`), so a symlink a command plants at the temporary
name, or a folder swapped for a symlink, cannot redirect the write, the mode or the removal."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import tooloop
from tooloop.cli.checkpoints import Checkpoints


def _setup(tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "bashrc"
    victim.write_text("precious\n")
    os.chmod(victim, 0o600)
    cp = Checkpoints(tmp_path / "s.checkpoints", ws)
    return ws, outside, victim, cp


def test_undo_never_writes_through_a_symlink_planted_at_its_temporary_name(tmp_path: Path) -> None:
    ws, _outside, victim, cp = _setup(tmp_path)
    target = ws / "a.txt"
    target.write_text("original\n")
    os.chmod(target, 0o755)
    cp.begin_task("edit a")
    cp.before_call("write_file", {"path": "a.txt"})
    target.write_text("changed by the agent\n")
    # What bash could do between the edit and the undo: plant symlinks at every name the old undo used.
    for name in (".a.txt.tooloop-undo.tmp", ".a.txt.tmp"):
        os.symlink(victim, ws / name)
    n, restored = cp.undo(1)
    assert n == 1 and [r.action for r in restored] == ["restored"]
    assert victim.read_text() == "precious\n"
    assert (victim.stat().st_mode & 0o7777) == 0o600, "the victim was re-permissioned"
    assert not target.is_symlink()
    assert target.read_text() == "original\n"
    assert (target.stat().st_mode & 0o7777) == 0o755


def test_undo_of_a_created_file_never_removes_outside(tmp_path: Path) -> None:
    ws, outside, victim, cp = _setup(tmp_path)
    (ws / "sub").mkdir()
    cp.begin_task("create")
    cp.before_call("write_file", {"path": "sub/bashrc"})
    (ws / "sub" / "bashrc").write_text("new\n")
    # The folder becomes a symlink out of the workspace: the undo must not remove outside/bashrc.
    (ws / "sub" / "bashrc").unlink()
    (ws / "sub").rmdir()
    os.symlink(outside, ws / "sub")
    _, restored = cp.undo(1)
    assert [r.action for r in restored] == ["skipped"]
    assert victim.read_text() == "precious\n"


def test_restore_file_is_public_and_refuses_paths_out(tmp_path: Path) -> None:
    ws, outside, victim, _cp = _setup(tmp_path)
    assert tooloop.restore_file(ws, "d/x.txt", b"x", 0o640) == "written"
    assert (ws / "d" / "x.txt").read_bytes() == b"x"
    assert ((ws / "d" / "x.txt").stat().st_mode & 0o7777) == 0o640
    assert tooloop.restore_file(ws, "d/x.txt", None) == "removed"
    assert tooloop.restore_file(ws, "d/x.txt", None) == "absent"
    os.symlink(outside, ws / "out")
    for path in ("out/bashrc", "../outside/bashrc", str(victim)):
        with pytest.raises(OSError, match="outside|leads"):
            tooloop.restore_file(ws, path, b"pwned", 0o777)
    with pytest.raises(OSError):
        tooloop.restore_file(ws, "out/bashrc", None)
    assert victim.read_text() == "precious\n"
