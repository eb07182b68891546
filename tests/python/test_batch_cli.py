"""`tooloop batch TASKS.jsonl`: the installed command against the mock server, without a terminal (a plain line
per finished task) and under a pty (one redrawn progress line); it refuses to start without --yes or
--read-only, resumes on a second run, and exits 1 when a task did not finish."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, List

import pytest

from _support import MockServer, cli_env
from test_batch import flow


def write_tasks(path: Path, n: int, broken: int = -1) -> None:
    path.write_text("".join(json.dumps({"id": f"t{i}", "input": "BROKEN" if i == broken else f"task {i}",
                                        "workspace": f"ws/t{i}"}) + "\n" for i in range(n)))


def run(cmd: List[str], cwd: Path, env: Any) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120)
    print("exit", proc.returncode, "\n--- stdout\n" + proc.stdout + "--- stderr\n" + proc.stderr)
    return proc


def test_batch_refuses_to_start_without_saying_how_tools_are_allowed(tooloop_exe, tmp_path):
    write_tasks(tmp_path / "tasks.jsonl", 2)
    with MockServer(flow()) as mock:
        proc = run([tooloop_exe, "batch", "tasks.jsonl"], tmp_path, cli_env(tmp_path, mock))
        assert mock.requests() == []
    assert proc.returncode == 2
    assert "--yes" in proc.stderr and "--read-only" in proc.stderr
    assert not (tmp_path / "runs").exists()


def test_batch_without_a_terminal_prints_a_line_per_task_and_resumes(tooloop_exe, tmp_path):
    write_tasks(tmp_path / "tasks.jsonl", 3)
    with MockServer(flow()) as mock:
        env = cli_env(tmp_path, mock)
        proc = run([tooloop_exe, "batch", "tasks.jsonl", "--out", "runs", "--concurrency", "2", "--yes"],
                   tmp_path, env)
        assert proc.returncode == 0
        assert len(mock.requests()) == 3
        again = run([tooloop_exe, "batch", "tasks.jsonl", "--out", "runs", "--yes"], tmp_path, env)
        assert again.returncode == 0 and len(mock.requests()) == 3  # all finished: nothing sent
    finished = [line for line in proc.stderr.splitlines() if line.startswith("[")]
    assert len(finished) == 3 and all(" ok " in line for line in finished), proc.stderr
    assert "\x1b[" not in proc.stderr and "\r" not in proc.stderr
    assert "3/3 done · 0 failed" in proc.stderr
    results = [json.loads(line) for line in (tmp_path / "runs" / "results.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in results) == ["t0", "t1", "t2"] and {r["status"] for r in results} == {"ok"}
    assert all((tmp_path / "ws" / f"t{i}").is_dir() for i in range(3))
    assert (tmp_path / "runs" / "t0.jsonl").exists()


def test_batch_exits_1_when_a_task_fails_and_says_how_to_resume(tooloop_exe, tmp_path):
    bad = {"match": {"body_contains": "BROKEN"},
           "response": {"status": 400, "json": {"type": "error", "error": {"type": "invalid_request_error",
                                                                            "message": "no"}}}}
    write_tasks(tmp_path / "tasks.jsonl", 3, broken=1)
    with MockServer(flow(first=[bad])) as mock:
        proc = run([tooloop_exe, "batch", "tasks.jsonl", "--read-only", "--max-budget-usd", "5"], tmp_path,
                   cli_env(tmp_path, mock))
    assert proc.returncode == 1
    assert "1 of 3 tasks did not finish (1 error)" in proc.stderr and "again" in proc.stderr


def test_batch_on_a_terminal_redraws_one_progress_line(tooloop_exe, tmp_path):
    pexpect = pytest.importorskip("pexpect")
    write_tasks(tmp_path / "tasks.jsonl", 4)
    with MockServer(flow(delay_ms=200)) as mock:
        child = pexpect.spawn(tooloop_exe, ["batch", "tasks.jsonl", "--concurrency", "2", "--yes"], cwd=str(tmp_path),
                              env=cli_env(tmp_path, mock), encoding="utf-8", timeout=60, dimensions=(24, 120))
        child.expect(pexpect.EOF)
        child.close()
        out = child.before
    print(repr(out))
    assert child.exitstatus == 0
    assert "\r\x1b[K" in out
    assert "4/4 done · 0 failed · 0 running" in out
    assert "tokens" in out and "$" in out
    assert not [line for line in out.splitlines() if line.startswith("[")]  # no per-task lines on a terminal
