"""Every file tooloop writes for the user is private and never written through a link (issue 37, item 7):
`tooloop export -o FILE` creates FILE 0600, replaces a symlink planted at FILE instead of writing through it,
and replaces an existing file atomically; the same helper writes the checkpoint store and the MCP approvals.
The installed command against the mock server."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from _support import MockServer, cli_env, run_cli, text_reply


def a_session(exe: str, ws: Path, tmp_path: Path) -> str:
    with MockServer({"responses": [text_reply("hello")]}) as mock:
        proc = run_cli(exe, ws, cli_env(tmp_path, mock), "--output-format", "json", "say hello")
    assert proc.returncode == 0, proc.stderr
    return str(json.loads(proc.stdout.splitlines()[-1])["session_id"])


def test_export_writes_a_private_file_and_replaces_a_planted_symlink_instead_of_following_it(
        tooloop_exe, ws, tmp_path):
    session = a_session(tooloop_exe, ws, tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's own file\n")
    os.chmod(victim, 0o644)
    os.symlink(victim, ws / "traj.json")          # planted by a repository (or the agent) at the output path
    old_umask = os.umask(0o022)
    try:
        proc = run_cli(tooloop_exe, ws, cli_env(tmp_path), "export", session, "-o", "traj.json")
    finally:
        os.umask(old_umask)
    assert proc.returncode == 0, proc.stderr
    assert victim.read_text() == "the user's own file\n", "the export was written through the symlink"
    out = ws / "traj.json"
    st = os.lstat(out)
    assert stat.S_ISREG(st.st_mode), "the symlink is replaced by the trajectory file"
    assert stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
    assert json.loads(out.read_text())["session_id"] == session
    assert [p.name for p in ws.iterdir() if p.name.startswith(".traj.json")] == [], "no temporary file left"


def test_export_over_an_existing_file_leaves_it_private(tooloop_exe, ws, tmp_path):
    session = a_session(tooloop_exe, ws, tmp_path)
    out = tmp_path / "traj.json"
    out.write_text("old")
    os.chmod(out, 0o644)
    proc = run_cli(tooloop_exe, ws, cli_env(tmp_path), "export", session, "--format", "json", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    assert json.loads(out.read_text())["session_id"] == session


def test_export_to_a_folder_fails_with_one_line_and_leaves_nothing(tooloop_exe, ws, tmp_path):
    session = a_session(tooloop_exe, ws, tmp_path)
    (ws / "dir").mkdir()
    proc = run_cli(tooloop_exe, ws, cli_env(tmp_path), "export", session, "-o", "dir")
    assert proc.returncode == 1 and "cannot write dir" in proc.stderr and "Traceback" not in proc.stderr
    assert list((ws / "dir").iterdir()) == [] and not [p for p in ws.iterdir() if p.name.startswith(".dir.")]


def test_mcp_approvals_are_written_privately_and_not_through_a_link(tmp_path, monkeypatch):
    from tooloop.cli import features

    monkeypatch.setenv("TOOLOOP_HOME", str(tmp_path / "home"))
    ws = tmp_path / "ws"
    ws.mkdir()
    target = features.approvals_file(ws)
    target.parent.mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_text("keep")
    os.symlink(victim, target)
    os.symlink(victim, target.with_suffix(".tmp"))   # at the temporary name the old code used, too
    features.save_approvals(ws, {"srv": "hash"})
    assert victim.read_text() == "keep"
    assert stat.S_ISREG(os.lstat(target).st_mode) and stat.S_IMODE(os.lstat(target).st_mode) == 0o600
    assert json.loads(target.read_text()) == {"srv": "hash"}


def test_batch_never_appends_its_results_through_a_planted_symlink(tooloop_exe, tmp_path):
    from test_batch import flow

    (tmp_path / "tasks.jsonl").write_text(json.dumps({"id": "t0", "input": "task 0", "workspace": "ws/t0"}) + "\n")
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's own file\n")
    (tmp_path / "runs").mkdir()
    os.symlink(victim, tmp_path / "runs" / "results.jsonl")   # shipped in a cloned repository
    with MockServer(flow()) as mock:
        proc = run_cli(tooloop_exe, tmp_path, cli_env(tmp_path, mock), "batch", "tasks.jsonl", "--yes")
        assert mock.requests() == []
    assert proc.returncode == 2 and "results.jsonl is a symbolic link" in proc.stderr, proc.stderr
    assert victim.read_text() == "the user's own file\n"
