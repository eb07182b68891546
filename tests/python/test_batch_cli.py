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
from test_batch import final, flow


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


def bash_flow(command: str) -> Any:
    """Each task calls bash once with `command`, then answers with what the call returned."""
    call = {"anthropic": {"id": "msg_b", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
                          "content": [{"type": "tool_use", "id": "toolu_bash1", "name": "bash",
                                       "input": {"command": command}}],
                          "stop_reason": "tool_use", "stop_sequence": None,
                          "usage": {"input_tokens": 10, "output_tokens": 5}}}
    return {"responses": [], "routes": [{"match": {"body_contains": "toolu_bash1"}, "response": flow()["routes"][0]["response"]},
                                        {"match": {}, "response": call}]}


def test_batch_runs_by_the_settings_rules_and_keeps_sessions_in_one_database(tooloop_exe, tmp_path):
    # No --yes or --read-only: allow rules in the settings say how calls are allowed. A call they allow runs;
    # with --yes, a deny rule of the settings still refuses its calls.
    write_tasks(tmp_path / "tasks.jsonl", 2)
    # The user's own settings file: a workspace's counts only once approved. A redirection to a file is no
    # plain command: an allow rule never covers `echo made > made.txt` (issue 38).
    settings = tmp_path / "config" / "tooloop" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"permissions": {"allow": ["Bash(echo:*)", "Bash(tee:*)"]}}))
    env = cli_env(tmp_path, None, XDG_CONFIG_HOME=str(tmp_path / "config"))
    with MockServer(bash_flow("echo made | tee made.txt")) as mock:
        env.update(cli_env(tmp_path, mock))
        proc = run([tooloop_exe, "batch", "tasks.jsonl", "--session-db", "store/all.db"], tmp_path, env)
        assert proc.returncode == 0
        results = [b for r in mock.requests() for m in r["body"]["messages"] for b in m["content"]
                   if isinstance(b, dict) and b.get("type") == "tool_result"]
    assert len(results) == 2 and not any(b.get("is_error") for b in results), results
    assert all((tmp_path / "ws" / f"t{i}" / "made.txt").read_text() == "made\n" for i in range(2))
    assert not list((tmp_path / "runs").glob("t*.jsonl")), "the sessions are in the database"
    import tooloop

    assert sorted(s["id"] for s in tooloop.list_sessions(tmp_path / "store" / "all.db")) == ["t0", "t1"]
    done = [json.loads(line) for line in (tmp_path / "runs" / "results.jsonl").read_text().splitlines()]
    assert {d["session"] for d in done} == {f"store/all.db#t{i}" for i in range(2)}

    # A call no rule allows is refused (nobody can be asked); --yes with a deny rule refuses it too.
    for flags, rules in (([], {"allow": ["Bash(ls:*)"]}), (["--yes"], {"deny": ["bash(echo:*)"]})):
        settings.write_text(json.dumps({"permissions": rules}))
        for i in range(2):
            (tmp_path / "ws" / f"t{i}" / "made.txt").unlink(missing_ok=True)
        with MockServer(bash_flow("echo made > made.txt")) as mock:
            env.update(cli_env(tmp_path, mock))
            proc = run([tooloop_exe, "batch", "tasks.jsonl", "--out", f"runs{len(flags)}", *flags], tmp_path, env)
            assert proc.returncode == 0
            results = [b for r in mock.requests() for m in r["body"]["messages"] for b in m["content"]
                       if isinstance(b, dict) and b.get("type") == "tool_result"]
        assert len(results) == 2 and all(b.get("is_error") for b in results), results
        assert not any((tmp_path / "ws" / f"t{i}" / "made.txt").exists() for i in range(2))

    # Rules that allow nothing do not count: the batch refuses to start.
    settings.write_text(json.dumps({"permissions": {"deny": ["bash"]}}))
    proc = run([tooloop_exe, "batch", "tasks.jsonl"], tmp_path, cli_env(tmp_path, None, ANTHROPIC_API_KEY="k"))
    assert proc.returncode == 2 and "allow rules" in proc.stderr


def test_batch_max_budget_usd_holds_when_the_server_answers_as_an_unpriced_model(tooloop_exe, tmp_path):
    # Every answer claims to come from `claude-mock-1`, a name without a price, for $0.315 of tokens at the
    # price of the model asked for. Before, each request cost $0 and all eight tasks ran past the $1 budget.
    answer = final(usage={"input_tokens": 100_000, "output_tokens": 1000})
    answer["anthropic"]["model"] = "claude-mock-1"
    write_tasks(tmp_path / "tasks.jsonl", 8)
    with MockServer({"responses": [], "routes": [{"match": {}, "response": answer}]}) as mock:
        proc = run([tooloop_exe, "batch", "tasks.jsonl", "--concurrency", "2", "--yes", "--max-budget-usd", "1"],
                   tmp_path, cli_env(tmp_path, mock))
        sent = len(mock.requests())
    assert 1 <= sent and sent * 0.315 <= 1.0, f"{sent} requests sent: more than the budget allows"
    assert proc.returncode == 1
    results = [json.loads(line) for line in (tmp_path / "runs" / "results.jsonl").read_text().splitlines()]
    assert {r["status"] for r in results} == {"ok", "budget"}, results
    assert sum(r["cost_usd"] or 0.0 for r in results) <= 1.0
