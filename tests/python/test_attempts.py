"""Attempts in isolated copies (issue 41 item 4), in Python (``tooloop.attempts``), in the `tooloop` command
(``--attempts N``) and in ``tooloop.batch`` (a task's ``attempts``), against the mock server: attempts isolated
from each other and from the workspace, the winner applied as one undoable change, the verdict without a
check, "no attempt verified", cancel during attempts ends all of them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, List

from _support import clean_env, run_cli, text_reply, tool_reply, tool_results

TEST = "import x\nassert x.add(2, 3) == 5, 'add(2, 3) is wrong: ' + repr(x.add(2, 3))\nprint('ok')\n"
WRONG = "def add(a, b):\n    return a - b\n"
RIGHT = "def add(a, b):\n    return a + b\n"
CHECK = "python3 test_x.py"


def _workspace(d: Path) -> Path:
    d.mkdir(exist_ok=True)
    (d / "test_x.py").write_text(TEST)
    (d / "x.py").write_text(WRONG)
    (d / "old.txt").write_text("to be removed\n")
    return d


def _write(i: str, path: str, content: str) -> Any:
    return tool_reply((i, "write_file", {"path": path, "content": content}))


def _bash(i: str, command: str) -> Any:
    return tool_reply((i, "bash", {"command": command}))


def _options(server: Any) -> dict:
    return {"model": "claude-sonnet-4-6", "api_key": "sk-ant-mock", "base_url": server.base_url,
            "builtin_tools": True, "sandbox": "off", "max_turns": 3, "max_turns_policy": "return"}


def _leftovers(*folders: Path) -> List[str]:
    """The attempts' copies left in `folders` (beside a workspace that is a repository's top, else in the
    temporary folder)."""
    return [p.name for d in folders for p in d.iterdir() if "tooloop-attempt" in p.name]


def _own_tmp(tmp_path: Path, monkeypatch: Any) -> Path:
    """A temporary folder of the test's own, where copies of a workspace outside a repository go."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return tmp


def test_python_attempts_are_isolated_and_the_first_whose_check_passes_is_applied(mock: Any, tmp_path: Path,
                                                                                   monkeypatch: Any) -> None:
    import tooloop.attempts

    tmp = _own_tmp(tmp_path, monkeypatch)
    ws = _workspace(tmp_path / "ws")
    server = mock({"responses": [
        # attempt 1: a loser's writes, then an answer while the check still fails (turns run out)
        _write("a1", "loser.txt", "from attempt 1\n"),
        _write("a2", "x.py", "def add(a, b):\n    return a * b\n"),
        text_reply("Done."),
        text_reply("Done, really."),
        # attempt 2: sees none of attempt 1's work, fixes x.py, removes old.txt, adds a file
        _bash("b1", "ls; cat x.py"),
        _write("b2", "x.py", RIGHT),
        tool_reply(("b3", "bash", {"command": "rm old.txt && mkdir -p pkg && echo new > pkg/new.txt"})),
        text_reply("Fixed."),
    ]})
    seen: List[Any] = []

    def on_attempt(a: Any) -> None:
        # While the attempts run, the real workspace never changes.
        seen.append((a.n, (ws / "x.py").read_text(), (ws / "loser.txt").exists()))

    opts = _options(server)
    opts["max_turns"] = 4
    result = tooloop.attempts.run("fix x.py", attempts=2, workspace=ws, check=CHECK, on_attempt=on_attempt,
                                  **opts)
    reqs = server.requests()
    listing = tool_results(reqs[5])["b1"][0]
    assert "loser.txt" not in listing and "return a - b" in listing, listing
    assert seen == [(1, WRONG, False), (2, WRONG, False)]
    assert result.winner == 2 and result.ok
    assert [a.verdict for a in result.attempts] == ["unverified", "check_passed"]
    assert result.attempts[0].check["passed"] is False and result.attempts[1].verified_by == CHECK
    assert [a.temperature for a in result.attempts] == [0.2, 0.5]
    assert reqs[0]["body"]["temperature"] == 0.2 and reqs[4]["body"]["temperature"] == 0.5
    assert all(a.turns > 0 and a.usage.input_tokens > 0 and a.seconds > 0 for a in result.attempts)
    assert (ws / "x.py").read_text() == RIGHT
    assert not (ws / "loser.txt").exists(), "a losing attempt's write must never appear"
    assert not (ws / "old.txt").exists() and (ws / "pkg" / "new.txt").read_text() == "new\n"
    assert sorted((c["path"], c["action"]) for c in result.applied) == [
        ("old.txt", "deleted"), ("pkg/new.txt", "added"), ("x.py", "changed")]
    assert not (ws / "__pycache__").exists(), "byte-code of the check run is not applied"
    assert _leftovers(tmp_path, tmp) == [] and result.text == "Fixed."


def test_python_attempts_without_a_check_win_by_their_own_passing_tests_else_no_winner(
        mock: Any, tmp_path: Path) -> None:
    import tooloop.attempts

    assert tooloop.attempts.looks_like_a_test("python3 test_x.py")
    assert tooloop.attempts.looks_like_a_test("cd src && pytest -q tests/")
    assert tooloop.attempts.looks_like_a_test("cargo test --lib")
    assert not tooloop.attempts.looks_like_a_test("python3 x.py")
    assert not tooloop.attempts.looks_like_a_test("cat test_x.py | head")  # names a test, runs cat

    ws = _workspace(tmp_path / "ws")
    server = mock({"responses": [
        # attempt 1 fixes x.py but runs no test: unverified
        _write("a1", "x.py", RIGHT), text_reply("Fixed, trust me."),
        # attempt 2 writes a wrong fix and its test fails: unverified
        _write("b1", "x.py", "def add(a, b):\n    return a * b\n"), _bash("b2", CHECK),
        text_reply("Done."),
        # attempt 3 fixes it and its own test passes
        _write("c1", "x.py", RIGHT), _bash("c2", CHECK), text_reply("Fixed; the test passes."),
    ]})
    opts = _options(server)
    opts["max_turns"] = 5
    result = tooloop.attempts.run("fix x.py", attempts=3, workspace=ws, **opts)
    assert [a.verdict for a in result.attempts] == ["unverified", "unverified", "tests_passed"]
    assert result.winner == 3 and result.attempts[2].verified_by == CHECK
    assert (ws / "x.py").read_text() == RIGHT

    ws2 = _workspace(tmp_path / "ws2")
    server.load({"responses": [_write("a1", "x.py", RIGHT), text_reply("Fixed.")]})
    result = tooloop.attempts.run("fix x.py", attempts=1, workspace=ws2, **opts)
    assert result.winner is None and not result.ok and result.applied == []
    assert (ws2 / "x.py").read_text() == WRONG


def test_python_attempt_git_is_its_own_and_never_writes_the_real_repository(mock: Any, tmp_path: Path) -> None:
    import tooloop.attempts

    ws = _workspace(tmp_path / "ws")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "start"]):
        subprocess.run(cmd, cwd=ws, check=True, env=env)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ws, capture_output=True, text=True).stdout
    server = mock({"responses": [
        _write("a1", "x.py", RIGHT),
        _bash("a2", "git status --short; git -c user.name=a -c user.email=a@a commit -qam attempt && git log --oneline | wc -l"),
        text_reply("Fixed."),
    ]})
    result = tooloop.attempts.run("fix x.py", attempts=1, workspace=ws, check=CHECK, **_options(server))
    out = tool_results(server.requests()[2])["a2"][0]
    assert "M x.py" in out and out.strip().endswith("2"), out
    assert result.winner == 1 and (ws / "x.py").read_text() == RIGHT
    assert subprocess.run(["git", "rev-parse", "HEAD"], cwd=ws, capture_output=True, text=True).stdout == head
    assert subprocess.run(["git", "status", "--short"], cwd=ws, capture_output=True,
                          text=True).stdout.strip() == "M x.py"
    assert _leftovers(tmp_path) == []


def test_python_cancel_during_attempts_ends_every_attempt_and_applies_nothing(mock: Any, tmp_path: Path,
                                                                             monkeypatch: Any) -> None:
    import threading

    import tooloop.attempts

    tmp = _own_tmp(tmp_path, monkeypatch)
    ws = _workspace(tmp_path / "ws")
    stalled = dict(text_reply("never"), fault={"type": "stall", "after_events": 1, "ms": 30000})
    server = mock({"responses": [_write("a1", "x.py", RIGHT), _write("b1", "x.py", RIGHT), stalled, stalled]})
    att = tooloop.attempts.Attempts("fix x.py", 2, workspace=ws, check=CHECK, concurrency=2, **_options(server))

    def cancel_when_both_wait() -> None:
        deadline = time.monotonic() + 30
        while len(server.requests()) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        stopped.append(time.monotonic())
        att.cancel()

    stopped: List[float] = []
    th = threading.Thread(target=cancel_when_both_wait)
    th.start()
    result = att.run()
    took = time.monotonic() - stopped[0]
    th.join()
    assert len(server.requests()) == 4
    assert result.cancelled and result.winner is None and result.applied == []
    assert [a.verdict for a in result.attempts] == ["cancelled", "cancelled"]
    assert took < 5, took
    assert (ws / "x.py").read_text() == WRONG and _leftovers(tmp_path, tmp) == []


def test_python_max_cost_usd_bounds_the_attempts_together(mock: Any, tmp_path: Path) -> None:
    import tooloop.attempts

    ws = _workspace(tmp_path / "ws")
    costly = text_reply("Done.")
    costly["anthropic"]["usage"] = {"input_tokens": 100000, "output_tokens": 5}   # about $0.30 at sonnet's price
    server = mock({"responses": [costly, costly]})
    opts = _options(server)
    opts["max_tokens"] = 100
    result = tooloop.attempts.run("fix x.py", attempts=2, workspace=ws, max_cost_usd=0.2, **opts)
    # Attempt 1 fits the cap alone and spends past it; attempt 2, alone under a cap of its own, would run too.
    assert [a.stop_reason for a in result.attempts] == ["end_turn", "budget"]
    assert len(server.requests()) == 1 and result.winner is None


# -- the `tooloop` command ---------------------------------------------------------------------------------------

def _cli_steps() -> List[Any]:
    return [
        # attempt 1 (temperature 0.2): a wrong fix and a stray file; the check still fails when turns run out
        _write("a1", "loser.txt", "from attempt 1\n"), _write("a2", "x.py", "def add(a, b):\n    return a * b\n"),
        text_reply("Done."),
        # attempt 2: the fix, and a file removed
        _write("b1", "x.py", RIGHT), _bash("b2", "rm old.txt"), text_reply("Fixed."),
    ]


def test_cli_attempts_apply_the_winner_as_one_change_that_undo_takes_back(tooloop_exe: str, tmp_path: Path) -> None:
    from _terminal import PROMPT, Term, term_env
    from mockctl import MockServer

    ws = _workspace(tmp_path / "ws")
    with MockServer({"responses": _cli_steps()}) as server:
        proc = run_cli(tooloop_exe, ws, clean_env(tmp_path, server), "-p", "--yes", "--sandbox", "off",
                       "--max-turns", "3", "--attempts", "2", "--check", CHECK, "fix x.py")
        assert len(server.requests()) == 6
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Fixed.\n"
    err = proc.stderr.splitlines()
    assert any(line.startswith("tooloop: attempt 1: unverified") for line in err), err
    assert any(line.startswith("2 *") and "check passed" in line for line in err), err
    assert "tooloop: attempt 2 applied: 2 files changed (tooloop --continue, then /undo, takes it back)" in err
    assert (ws / "x.py").read_text() == RIGHT and not (ws / "old.txt").exists()
    assert not (ws / "loser.txt").exists()
    # One change: a single /undo in the continued session puts every file back.
    with MockServer({"responses": []}) as server:
        with Term(tooloop_exe, ["--yes", "--continue"], ws, term_env(tmp_path, server, NO_COLOR="1")) as term:
            term.expect(PROMPT)
            term.type("/undo")
            term.expect(r"restored old.txt")
            term.expect(r"restored x.py")
            term.expect("bash are not undone")
            term.quit()
    assert (ws / "x.py").read_text() == WRONG
    assert (ws / "old.txt").read_text() == "to be removed\n"


def test_cli_attempts_json_output_carries_every_attempt_and_no_winner_exits_1(tooloop_exe: str, tmp_path: Path) -> None:
    from mockctl import MockServer

    ws = _workspace(tmp_path / "ws")
    steps = [_write("a1", "x.py", RIGHT), text_reply("Fixed, no test run."),
             _write("b1", "x.py", RIGHT), _bash("b2", "python3 -c 'print(1)'"), text_reply("Fixed.")]
    with MockServer({"responses": steps}) as server:
        proc = run_cli(tooloop_exe, ws, clean_env(tmp_path, server), "--output-format", "json", "--yes",
                       "--sandbox", "off", "--attempts", "2", "fix x.py")
    assert proc.returncode == 1
    out = json.loads(proc.stdout)
    assert out["is_error"] is True and out["winner"] is None and out["applied"] == []
    assert [a["verdict"] for a in out["attempts"]] == ["unverified", "unverified"]
    assert [a["n"] for a in out["attempts"]] == [1, 2]
    assert all(a["turns"] >= 2 and a["usage"]["input_tokens"] > 0 and "seconds" in a for a in out["attempts"])
    assert "tooloop: no attempt verified: the workspace is unchanged" in proc.stderr
    assert (ws / "x.py").read_text() == WRONG
    # Why none was verified can be read: each attempt's conversation is kept, beside the start's session (which
    # no attempt became), and is no session of the workspace.
    kept = [Path(a["session"]) for a in out["attempts"]]
    folder = kept[0].parent
    assert folder.name == out["session_id"] + ".attempts" and kept == [folder / "attempt-1.jsonl",
                                                                      folder / "attempt-2.jsonl"]
    assert f"tooloop: each attempt's conversation is kept in {folder}" in proc.stderr
    assert oct(folder.stat().st_mode & 0o777) == "0o700"
    texts = [[b.get("text") for e in _entries(k) for b in e["content"] if b.get("type") == "text"] for k in kept]
    assert "Fixed, no test run." in texts[0] and "Fixed." in texts[1] and "Fixed." not in texts[0]
    assert not (folder.parent / (out["session_id"] + ".jsonl")).exists()
    listed = run_cli(tooloop_exe, ws, clean_env(tmp_path), "--list")
    assert listed.returncode == 0 and listed.stdout.startswith("no sessions in "), listed


def test_cli_attempts_with_a_session_database_keep_their_conversations_beside_its_checkpoints(
        tooloop_exe: str, tmp_path: Path) -> None:
    from mockctl import MockServer

    ws = _workspace(tmp_path / "ws")
    db = tmp_path / "db" / "sessions.db"
    steps = [_write("a1", "x.py", RIGHT), text_reply("Fixed.")]
    with MockServer({"responses": steps}) as server:
        proc = run_cli(tooloop_exe, ws, clean_env(tmp_path, server), "--output-format", "json", "--yes",
                       "--sandbox", "off", "--session-db", str(db), "--attempts", "1", "fix x.py")
    assert proc.returncode == 1
    out = json.loads(proc.stdout)
    kept = Path(out["attempts"][0]["session"])
    assert kept.parent.parent == db.parent / "sessions.db.d" and kept.parent.name.endswith(".attempts"), kept
    assert "Fixed." in [b.get("text") for e in _entries(kept) for b in e["content"]]


def test_cli_attempts_folder_is_new_and_private_each_start_and_an_unused_one_is_removed(tmp_path: Path) -> None:
    from tooloop.cli.attempts import _kept, attempts_folder

    session = tmp_path / "sessions" / "20261204-120000-ab12.jsonl"
    first = attempts_folder(session)
    (first / "attempt-1.jsonl").write_text("{}\n")
    second = attempts_folder(session)   # the name is taken: another folder, empty, never the first's files
    assert first == session.with_name("20261204-120000-ab12.attempts") and second != first
    assert second.parent == first.parent and second.name.startswith(first.name + "-") and not any(second.iterdir())
    assert all(oct(f.stat().st_mode & 0o777) == "0o700" for f in (first, second))
    _kept(second)
    _kept(first)
    assert not second.exists() and (first / "attempt-1.jsonl").is_file()


def _entries(session: Path) -> List[Any]:
    lines = [json.loads(line) for line in session.read_text().splitlines() if line.strip()]
    return [r["entry"] for r in lines if r.get("type") == "entry"]


def test_cli_attempts_need_yes(tooloop_exe: str, tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    proc = run_cli(tooloop_exe, ws, clean_env(tmp_path), "-p", "--attempts", "2", "fix x.py")
    assert proc.returncode == 2 and "--attempts runs attempts with no one to ask: add --yes" in proc.stderr


def test_cli_ctrl_c_during_attempts_ends_all_of_them_and_leaves_the_workspace_untouched(
        tooloop_exe: str, tmp_path: Path) -> None:
    from mockctl import MockServer

    ws = _workspace(tmp_path / "ws")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    stalled = dict(text_reply("never"), fault={"type": "stall", "after_events": 1, "ms": 30000})
    steps = [_write("a1", "x.py", RIGHT), _write("b1", "x.py", RIGHT), stalled, stalled]
    with MockServer({"responses": steps}) as server:
        proc = subprocess.Popen([tooloop_exe, "-p", "--yes", "--sandbox", "off", "--attempts", "2",
                                 "--concurrency", "2", "--check", CHECK, "fix x.py"], cwd=ws,
                                env=clean_env(tmp_path, server, TMPDIR=str(tmp)), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 30
            while len(server.requests()) < 4 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert len(server.requests()) == 4, "both attempts should be waiting on a stalled answer"
            time.sleep(0.3)
            sent = time.monotonic()
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=15)
            took = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    print(out, err)
    assert proc.returncode == 130
    assert took < 5, took
    assert "interrupted: every attempt stopped; the workspace is as it was" in err
    assert (ws / "x.py").read_text() == WRONG
    assert _leftovers(tmp_path, tmp) == [] and sorted(p.name for p in ws.iterdir()) == ["old.txt", "test_x.py", "x.py"]


# -- tooloop.batch -----------------------------------------------------------------------------------------------

def test_batch_task_with_attempts_applies_the_verified_one_and_records_every_attempt(mock: Any, tmp_path: Path) -> None:
    import tooloop.batch

    ws = _workspace(tmp_path / "ws")
    server = mock({"responses": [
        _write("a1", "loser.txt", "1\n"), text_reply("Done."), text_reply("Done."),
        _write("b1", "x.py", RIGHT), text_reply("Fixed."),
    ]})
    opts = _options(server)
    opts["check"] = CHECK
    [r] = tooloop.batch.run([{"id": "t1", "input": "fix x.py", "workspace": str(ws), "attempts": 2}], opts,
                            out=tmp_path / "out", progress=False)
    assert r.ok and r.text == "Fixed." and r.session is None
    assert r.attempts["winner"] == 2
    assert [a["verdict"] for a in r.attempts["attempts"]] == ["unverified", "check_passed"]
    assert (ws / "x.py").read_text() == RIGHT and not (ws / "loser.txt").exists()
    line = json.loads((tmp_path / "out" / "results.jsonl").read_text().splitlines()[-1])
    assert line["attempts"]["winner"] == 2 and line["attempts"]["applied"] == [{"path": "x.py", "action": "changed"}]


def test_cli_batch_attempts_field_runs_isolated_attempts_and_a_line_may_not_widen_it(
        tooloop_exe: str, tmp_path: Path) -> None:
    from mockctl import MockServer

    ws = _workspace(tmp_path / "ws")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "t1", "input": "fix x.py", "workspace": "ws", "attempts": 2}) + "\n")
    steps = [_write("a1", "loser.txt", "1\n"), text_reply("Done."), text_reply("Done."),
             _write("b1", "x.py", RIGHT), text_reply("Fixed.")]
    with MockServer({"responses": steps}) as server:
        proc = run_cli(tooloop_exe, tmp_path, clean_env(tmp_path, server), "batch", "tasks.jsonl", "--yes",
                       "--attempts", "2", "--check", CHECK, "--max-turns", "3")
    assert proc.returncode == 0, proc.stderr
    line = json.loads((tmp_path / "runs" / "results.jsonl").read_text().splitlines()[-1])
    assert line["status"] == "ok" and line["attempts"]["winner"] == 2
    assert [a["verdict"] for a in line["attempts"]["attempts"]] == ["unverified", "check_passed"]
    assert (ws / "x.py").read_text() == RIGHT and not (ws / "loser.txt").exists()

    tasks.write_text(json.dumps({"id": "t2", "input": "fix x.py", "workspace": "ws", "attempts": 3}) + "\n")
    proc = run_cli(tooloop_exe, tmp_path, clean_env(tmp_path), "batch", "tasks.jsonl", "--yes", "--attempts", "2")
    assert proc.returncode == 2
    assert "\"attempts\" must be a whole number from 1 to the command line's --attempts (2)" in proc.stderr


def test_a_winning_attempt_never_writes_a_protected_path_into_the_workspace(mock: Any, tmp_path: Path,
                                                                            monkeypatch: Any) -> None:
    """An attempt's copy is its own workspace: its bash may create `.tooloop/settings.json` or `.mcp.json`
    there. Applied, they would land in the real workspace without the question a file tool asks about a
    protected path; they are skipped, with the reason, and the rest of the winner is applied."""
    import tooloop.attempts

    _own_tmp(tmp_path, monkeypatch)
    ws = _workspace(tmp_path / "ws")
    server = mock({"responses": [
        _write("a1", "x.py", RIGHT),
        tool_reply(("a2", "bash", {"command": "mkdir -p .tooloop .claude && echo '{\"hooks\": {}}' > "
                                               ".tooloop/settings.json && echo '{}' > .mcp.json && "
                                               "echo x > .claude/settings.json"})),
        text_reply("Fixed."),
    ]})
    result = tooloop.attempts.run("fix add", attempts=1, workspace=str(ws), check=CHECK, **_options(server))
    assert result.winner == 1
    assert (ws / "x.py").read_text() == RIGHT
    for rel in (".tooloop/settings.json", ".mcp.json", ".claude/settings.json"):
        assert not (ws / rel).exists(), f"{rel} was applied from the attempt"
        assert any(s["path"] == rel and "protected" in s["reason"] for s in result.skipped), result.skipped
