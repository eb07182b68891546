"""A run held to something outside the model's word (issue 41 items 1–3), in Python and in the `tooloop`
command, against the mock server: the ``check`` command (its failure reaches the model, the run ends only
when it passes, ``check_failed`` when turns run out), the evidence on every result (``files_changed``,
``commands_run``), a false claim challenged once, and a run a guard stops still answering."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

from _support import agent_for, clean_env, run_cli, text_reply, tool_reply

TEST = "import x\nassert x.add(2, 3) == 5, 'add(2, 3) is wrong: ' + repr(x.add(2, 3))\nprint('ok')\n"
WRONG = "def add(a, b):\n    return a - b\n"
RIGHT = "def add(a, b):\n    return a + b\n"


def _workspace(d: Path) -> Path:
    d.mkdir(exist_ok=True)
    (d / "test_x.py").write_text(TEST)
    (d / "x.py").write_text(WRONG)
    return d


def _write(i: str, path: str, content: str) -> Any:
    return tool_reply((i, "write_file", {"path": path, "content": content}))


def _bash(i: str, command: str) -> Any:
    return tool_reply((i, "bash", {"command": command}))


def _last_message(request: Any) -> str:
    return json.dumps(request["body"]["messages"][-1])


def test_python_check_failure_reaches_the_model_and_the_result_carries_the_check_and_the_evidence(
        mock: Any, tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    server = mock({"responses": [
        text_reply("Done."),
        _write("w1", "test_x.py", "print('ok')\n"),
        _write("w2", "x.py", RIGHT),
        _bash("b1", "echo made > made.txt"),
        text_reply("Fixed."),
    ]})
    agent = agent_for(server, builtin_tools=True, workspace=str(ws), sandbox="off", check="python3 test_x.py")
    result = agent.run("make the test pass")
    reqs = server.requests()
    told = _last_message(reqs[1])
    assert "The check `python3 test_x.py` failed (exit 1)" in told and "add(2, 3) is wrong: -1" in told
    refused = _last_message(reqs[2])
    assert "test_x.py is read-only in this run" in refused, refused
    assert (ws / "test_x.py").read_text() == TEST
    assert result.check == {"command": "python3 test_x.py", "passed": True, "exit_code": 0,
                            "output_tail": "ok", "runs": 2}
    assert result.files_changed == ["x.py", "made.txt"]
    assert result.commands_run == [{"command": "echo made > made.txt", "exit_code": 0}]
    assert result.unverified is None and result.stop_reason == "end_turn"


def test_python_after_check_hook_sees_the_failed_check_and_its_answer_is_what_the_model_reads(
        mock: Any, tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    server = mock({"responses": [text_reply("Done."), _write("w1", "x.py", RIGHT), text_reply("Fixed.")]})
    seen: List[Tuple[Dict[str, Any], str]] = []

    def after_check(check: Dict[str, Any], message: str) -> Optional[str]:
        seen.append((check, message))
        return message + "\n\nhint: add, not subtract"

    agent = agent_for(server, builtin_tools=True, workspace=str(ws), sandbox="off", check="python3 test_x.py",
                      hooks={"after_check": after_check})
    result = agent.run("make the test pass")
    assert len(seen) == 1, "called on the failure only"
    check, message = seen[0]
    assert check["passed"] is False and check["exit_code"] == 1 and check["runs"] == 1
    assert "add(2, 3) is wrong: -1" in check["output_tail"]
    assert message.startswith("The check `python3 test_x.py` failed (exit 1)")
    told = server.requests()[1]["body"]["messages"][-1]["content"]
    text = told if isinstance(told, str) else "".join(b.get("text", "") for b in told)
    assert text == message + "\n\nhint: add, not subtract"
    assert result.check is not None and result.check["passed"] and result.text == "Fixed."


def test_python_after_check_hook_returning_a_non_string_or_raising_ends_the_run_and_the_conversation_stays_valid(
        mock: Any, tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    server = mock({"responses": [text_reply("Done."), text_reply("unused")]})
    agent = agent_for(server, builtin_tools=True, workspace=str(ws), sandbox="off", check="python3 test_x.py",
                      hooks={"after_check": lambda check, message: 42})
    with pytest.raises(TypeError, match="after_check hook must return None or a string"):
        agent.run("make the test pass")
    assert len(server.requests()) == 1
    assert agent.messages[-1]["role"] == "assistant"

    class Boom(Exception):
        pass

    def boom(check: Dict[str, Any], message: str) -> None:
        raise Boom("the hint broke")

    server = mock({"responses": [text_reply("Done."), text_reply("unused")]})
    agent = agent_for(server, builtin_tools=True, workspace=str(ws), sandbox="off", check="python3 test_x.py",
                      hooks={"after_check": boom})
    with pytest.raises(Boom, match="the hint broke"):
        agent.run("make the test pass")
    assert len(server.requests()) == 1


def test_python_a_false_claim_is_challenged_once_then_the_result_says_unverified(mock: Any, tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    server = mock({"responses": [text_reply("I ran `python3 test_x.py`: the test passed."),
                                 text_reply("The test passed.")]})
    agent = agent_for(server, builtin_tools=True, workspace=str(ws), sandbox="off", verify_claims=True)
    result = agent.run("fix x.py")
    reqs = server.requests()
    assert len(reqs) == 2
    assert "it never ran" in _last_message(reqs[1]) and "files changed: none" in _last_message(reqs[1])
    assert result.unverified and "no command ran" in result.unverified
    assert result.files_changed == [] and result.commands_run == []


def test_cli_check_that_still_fails_when_turns_run_out_prints_check_failed_and_exits_1(
        tooloop_exe: str, tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    steps = [_write("w1", "x.py", "def add(a, b):\n    return a * b\n"), _write("w2", "x.py", WRONG)]
    from mockctl import MockServer
    with MockServer({"responses": steps}) as server:
        proc = run_cli(tooloop_exe, ws, clean_env(tmp_path, server), "-p", "--yes", "--max-turns", "2",
                       "--sandbox", "off", "--check", "python3 test_x.py", "fix x.py")
    assert proc.returncode == 1
    assert "tooloop: check failed: `python3 test_x.py` exited 1" in proc.stderr.splitlines()


def test_cli_json_output_carries_the_check_and_the_evidence(tooloop_exe: str, tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    steps = [_write("w1", "x.py", RIGHT), _bash("b1", "python3 test_x.py"), text_reply("Fixed; the test passes.")]
    from mockctl import MockServer
    with MockServer({"responses": steps}) as server:
        proc = run_cli(tooloop_exe, ws, clean_env(tmp_path, server), "--output-format", "json", "--yes",
                       "--sandbox", "off", "--check", "python3 test_x.py", "fix x.py")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["check"]["passed"] is True and out["check"]["runs"] == 1
    assert out["files_changed"] == ["x.py"]
    assert out["commands_run"] == [{"command": "python3 test_x.py", "exit_code": 0}]
    assert out["unverified"] is None and out["is_error"] is False
    assert "tooloop: check passed" in proc.stderr


def test_cli_a_change_request_answered_without_a_change_is_told_once_then_exits_1_unverified(
        tooloop_exe: str, tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    steps = [text_reply("Renamed add to plus everywhere."), text_reply("Done: renamed.")]
    from mockctl import MockServer
    with MockServer({"responses": steps}) as server:
        proc = run_cli(tooloop_exe, ws, clean_env(tmp_path, server), "-p", "--yes", "rename add to plus")
        reqs = server.requests()
    assert len(reqs) == 2
    assert "the task asks for changes, and no file was changed" in _last_message(reqs[1])
    assert proc.returncode == 1
    assert any(line.startswith("tooloop: unverified: the task asks for changes") for line in proc.stderr.splitlines())


def test_a_change_request_is_read_in_any_clause_of_the_tasks_first_sentences() -> None:
    from tooloop.cli.evidence import asks_for_changes

    # The bench's traceback task: its first sentence names no change; a run that changed nothing answered
    # "I made the change" and was not challenged.
    assert asks_for_changes("`python3 report.py` crashes. Run it, read the traceback and fix the cause in "
                            "report.py (scores.json is right).")
    assert asks_for_changes("settings.py defines LIMIT; write its value into limit.txt")
    assert asks_for_changes("please add a --verbose flag") and asks_for_changes("Explain x.py, then add a docstring")
    for question in ("why does the test fail?", "what does echo 42 print?", "explain main.py",
                     "show me how to add a flag", "Why is it slow? Fix it.", "The build is broken.\n\nfix: later",
                     "It crashes. It fails. It is slow. Fix it."):
        assert not asks_for_changes(question), question


def test_a_task_that_asks_to_run_something_before_a_change_is_read_as_run_first() -> None:
    from tooloop.cli.evidence import asks_to_run_first

    # The bench's traceback and failing_test tasks: what to change is in what the run prints.
    assert asks_to_run_first("`python3 report.py` crashes. Run it, read the traceback and fix the cause in "
                             "report.py (scores.json is right).")
    assert asks_to_run_first("`python3 test_stats.py` fails. Run it, find the bug in stats.py and fix it.")
    assert asks_to_run_first("Please run the tests and fix what fails.")
    for later in ("Create hello.py that prints exactly Hello, world! and run it to check.",
                  "Rename get_data to load_data everywhere, then run main.py to check.",
                  "Add a currency to prices. Run main.py.", "Why does it crash? Run it.",
                  "Explain x.py.", "It crashes. It fails. It is slow. Run it."):
        assert not asks_to_run_first(later), later


@pytest.mark.parametrize("task,draft", [
    ("`python3 t.py` crashes. Run it, read the traceback and fix the cause in t.py.", False),
    ("Fix t.py so that it prints ok, then run it.", True),
])
def test_cli_a_run_first_task_gets_its_tools_from_the_first_request(
        tooloop_exe: str, tmp_path: Path, task: str, draft: bool) -> None:
    from _support import small_window_run

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "t.py").write_text("print(undefined)\n")
    proc, bodies = small_window_run(tooloop_exe, ws, tmp_path, [text_reply("It prints ok now.")] * 3, task,
                                    "--sandbox", "off")
    # The draft (the first request without tools) would guess what the run prints: a task that asks to run
    # something first starts with the tools instead.
    assert bool(bodies[0].get("tools")) is not draft, proc.stderr


def test_cli_a_run_the_guard_stops_still_prints_the_models_answer(tooloop_exe: str, tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    steps = [_bash(f"b{i}", "echo 42") for i in range(5)] + [text_reply("The answer is 42.")]
    from mockctl import MockServer
    with MockServer({"responses": steps}) as server:
        # The runaway guard alone (progress detection has a wrap-up of its own before it stops a run).
        proc = run_cli(tooloop_exe, ws, clean_env(tmp_path, server), "-p", "--yes", "--sandbox", "off",
                       "--no-progress-guard", "what does echo 42 print?")
        reqs = server.requests()
    assert reqs[-1]["body"].get("tool_choice") == {"type": "none"}
    assert "The answer is 42." in proc.stdout
    assert proc.returncode == 1, "the guard fired: the task did not end on its own"


def test_cli_a_guard_stop_after_work_the_check_vouches_for_exits_0_with_check_passed(
        tooloop_exe: str, tmp_path: Path) -> None:
    """The model fixed the code, then looped: the guard fires, the check runs once more at the stop and passes,
    so the task is done (exit 0), in text and in JSON; without a check the same run exits 1."""
    steps = ([_write("w1", "x.py", RIGHT)] + [_bash(f"b{i}", "echo 42") for i in range(5)]
             + [text_reply("Fixed.")])
    from mockctl import MockServer
    for fmt in (["-p"], ["--output-format", "json"]):
        ws = _workspace(tmp_path / f"ws{len(fmt)}")
        with MockServer({"responses": steps}) as server:
            proc = run_cli(tooloop_exe, ws, clean_env(tmp_path, server), *fmt, "--yes", "--sandbox", "off",
                           "--no-progress-guard", "--check", "python3 test_x.py", "fix x.py")
        assert proc.returncode == 0, proc.stderr
        assert "tooloop: check passed" in proc.stderr
        if fmt == ["-p"]:
            assert "runaway guard" in proc.stderr, "the guard's line still says what happened"
        else:
            out = json.loads(proc.stdout)
            assert out["stop_reason"] == "repetition" and out["is_error"] is False
    ws = _workspace(tmp_path / "ws-nocheck")
    with MockServer({"responses": steps}) as server:
        proc = run_cli(tooloop_exe, ws, clean_env(tmp_path, server), "-p", "--yes", "--sandbox", "off",
                       "--no-progress-guard", "fix x.py")
    assert proc.returncode == 1, "without a check nothing vouches for the work"
