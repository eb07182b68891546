"""Undo: the CLI's checkpoints (each file's bytes and mode before the agent's first change to it in a
message) put files back byte for byte, across tasks and in a resumed session, and `/undo`, `/undo N` and
`/diff` in the REPL (on a pseudo-terminal, against the mock server). Undo writes only inside the workspace:
files go back through the library's race-free handles (`tooloop.restore_file`), so a symlink a command
plants at the temporary name, or a folder swapped for a symlink, cannot redirect the write, the mode or the
removal."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path

import pytest

import tooloop
from tooloop.cli.checkpoints import Checkpoints

from _support import SCENARIOS, MockServer
from _terminal import PROMPT, Term, term_env


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


# -- checkpoints, without a terminal -----------------------------------------------------------------

def test_checkpoints_restore_bytes_and_modes_across_tasks(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_bytes(b"one\r\ntwo")
    os.chmod(ws / "a.txt", 0o640)
    cp = Checkpoints.for_session(tmp_path / "s" / "20260101-000000-abcd.jsonl", ws)
    cp.begin_task("first")
    cp.before_call("write_file", {"path": "a.txt"})
    (ws / "a.txt").write_bytes(b"changed\n")
    cp.before_call("edit_file", {"path": "a.txt"})          # the task's first state is kept
    (ws / "a.txt").write_bytes(b"changed again\n")
    cp.before_call("write_file", {"path": "new/b.txt"})
    (ws / "new").mkdir()
    (ws / "new" / "b.txt").write_text("b\n")
    cp.before_call("write_file", {"path": "../outside.txt"})   # outside the workspace: never recorded
    cp.before_call("bash", {"command": "rm -rf /"})             # not a file tool
    cp.begin_task("second, no changes")
    assert cp.diff()[0] == "--- a/a.txt"
    # A new process (a resumed session) sees the same checkpoints.
    again = Checkpoints.for_session(tmp_path / "s" / "20260101-000000-abcd.jsonl", ws)
    assert [t["text"] for t in again.tasks] == ["first", "second, no changes"]
    # A run that changes nothing leaves no folder behind.
    idle = Checkpoints.for_session(tmp_path / "s" / "20260101-000000-ffff.jsonl", ws)
    idle.begin_task("just a question")
    assert not (tmp_path / "s" / "20260101-000000-ffff.checkpoints").exists()
    with pytest.raises(ValueError):
        cp.undo(3)
    n, restored = cp.undo(2)
    assert n == 2 and {(r.path, r.action) for r in restored} == {("a.txt", "restored"), ("new/b.txt", "removed")}
    assert (ws / "a.txt").read_bytes() == b"one\r\ntwo" and stat.S_IMODE((ws / "a.txt").stat().st_mode) == 0o640
    assert not (ws / "new" / "b.txt").exists()
    assert cp.diff() == [] and cp.tasks == []
    folder = tmp_path / "s" / "20260101-000000-abcd.checkpoints"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in folder.rglob("*") if p.is_file())


def test_undo_never_writes_through_a_folder_that_now_leads_out_of_the_workspace(tmp_path):
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (ws / "d").mkdir(parents=True)
    outside.mkdir()
    (ws / "d" / "f.txt").write_text("before\n")
    cp = Checkpoints.for_session(tmp_path / "s" / "x.jsonl", ws)
    cp.begin_task("t")
    cp.before_call("write_file", {"path": "d/f.txt"})
    (ws / "d" / "f.txt").unlink()
    (ws / "d").rmdir()
    (ws / "d").symlink_to(outside)
    _, restored = cp.undo(1)
    assert [(r.path, r.action) for r in restored] == [("d/f.txt", "skipped")]
    assert list(outside.iterdir()) == []


# -- /undo and /diff in the REPL ---------------------------------------------------------------------------

def test_undo_restores_files_byte_for_byte_and_diff_shows_the_changes(tooloop_exe, ws, tmp_path):
    app = b"# app\nprint('v1')\r\nno newline at end"
    (ws / "app.py").write_bytes(app)
    (ws / "run.sh").write_bytes(b"#!/bin/sh\necho original\n")
    os.chmod(ws / "run.sh", 0o754)
    with MockServer(SCENARIOS / "cli_repl_undo.json") as mock:
        with Term(tooloop_exe, ["--yes"], ws, term_env(tmp_path, mock, NO_COLOR="1")) as term:
            term.expect(PROMPT)
            term.type("first task")
            term.expect("Task one done.")
            term.expect(PROMPT)
            assert (ws / "sub" / "new.txt").read_text() == "brand new\n"
            assert b"print('v2')" in (ws / "app.py").read_bytes()
            term.type("second task")
            term.expect("Task two done.")
            term.expect(PROMPT)
            term.type("/diff")
            term.expect(r"\+\+\+ b/app.py")
            term.expect(r"\+print\('v3'\)")
            term.expect(r"\+echo replaced")
            term.expect(PROMPT)
            term.type("/undo")                           # before "second task": task one's state
            term.expect(r"restored app.py \(\+3 -1 lines\)")
            term.expect("bash are not undone")
            term.expect(PROMPT)
            assert b"print('v2')" in (ws / "app.py").read_bytes()
            assert (ws / "sub" / "new.txt").exists()
            term.type("/undo 3")
            term.expect("nothing to undo: there is only 1 message")
            term.expect(PROMPT)
            term.type("/undo 1")                         # before "first task": as at the start
            term.expect(r"restored run.sh")
            term.expect("removed sub/new.txt")
            term.expect(PROMPT)
            term.type("/diff")
            term.expect("no file changes by the agent")
            term.expect(PROMPT)
            term.type("and now?")
            term.expect("Noted the undo.")
            term.quit()
        reqs = mock.requests()
    assert (ws / "app.py").read_bytes() == app
    assert (ws / "run.sh").read_bytes() == b"#!/bin/sh\necho original\n"
    assert stat.S_IMODE((ws / "run.sh").stat().st_mode) == 0o754
    assert not (ws / "sub" / "new.txt").exists()
    # The model is told its changes are gone.
    last = json.dumps(reqs[-1]["body"]["messages"][-1])
    assert "undid the file changes" in last and "and now?" in last
    # Checkpoints live beside the session, owner-only.
    [folder] = (tmp_path / "home").glob("sessions/*/*.checkpoints")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert files and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files)
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o700 for p in folder.rglob("*") if p.is_dir())


def test_checkpoints_record_the_state_a_file_change_event_carries(tmp_path: Path) -> None:
    """The CLI keeps undo state from the run's file_change events (what the core read before the tool
    wrote), not from a snapshot taken in the permission callable."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_bytes(b"changed by the tool\n")
    (ws / "new.txt").write_text("created\n")
    cp = Checkpoints.for_session(tmp_path / "s" / "20260101-000000-eeee.jsonl", ws)
    cp.begin_task("edit")
    cp.record_change(tooloop.FileChangeEvent("toolu_1", "edit_file", "a.txt", "modified", None,
                                             base64.b64encode(b"\xffbefore").decode(), 0o600))
    # A second change of the same file in the task: the first state is the one kept.
    cp.record_change(tooloop.FileChangeEvent("toolu_2", "write_file", "a.txt", "modified", "in between", None,
                                             0o644))
    cp.record_change(tooloop.FileChangeEvent("toolu_3", "write_file", "new.txt", "created"))
    cp.record_change(tooloop.FileChangeEvent("toolu_4", "write_file", "../out.txt", "created"))  # never kept
    assert cp.errors == []
    n, restored = cp.undo(1)
    assert n == 1 and {(r.path, r.action) for r in restored} == {("a.txt", "restored"), ("new.txt", "removed")}
    assert (ws / "a.txt").read_bytes() == b"\xffbefore" and stat.S_IMODE((ws / "a.txt").stat().st_mode) == 0o600
    assert not (ws / "new.txt").exists()
