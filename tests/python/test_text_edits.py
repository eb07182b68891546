"""Whole files a model gives as named fenced blocks in its text (``text_edits``, issue 41 items 5–6), in Python and
in the `tooloop` command, against the mock server: ``tooloop.Agent(text_edits=True)`` writes them through
``write_file``; the command turns it on with the compact prompt (small windows) and says so in that prompt, and
leaves the full prompt's tool loop as it is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from _support import SMALL_WINDOW as SMALL
from _support import agent_for, cli_env, run_cli, small_window_run, text_reply
from mockctl import MockServer

WRONG = "def add(a, b):\n    return a - b\n"
RIGHT = "def add(a, b):\n    return a + b\n"
FIXED = "Here's the fixed `calc.py`:\n\n```python\ndef add(a, b):\n    return a + b\n```\n"


def test_python_agent_with_text_edits_writes_a_named_fenced_file(mock: Any, tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text(WRONG)
    server = mock({"responses": [text_reply(FIXED), text_reply("Done.")]})
    agent = agent_for(server, builtin_tools=True, workspace=str(tmp_path), sandbox="off", text_edits=True)
    result = agent.run("fix calc.py")
    assert (tmp_path / "calc.py").read_text() == RIGHT
    assert result.text == "Done." and result.files_changed == ["calc.py"]
    [call] = result.tool_calls
    assert call.name == "write_file" and call.input == {"path": "calc.py", "content": RIGHT}
    sent = server.requests()[1]["body"]["messages"]
    assert sent[-1]["content"][0]["type"] == "tool_result"


def test_python_agent_with_draft_first_asks_without_tools_then_gives_them(mock: Any, tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text(WRONG)
    server = mock({"responses": [text_reply(FIXED), text_reply("Done.")]})
    agent = agent_for(server, builtin_tools=True, workspace=str(tmp_path), sandbox="off", draft_first=True)
    result = agent.run("fix calc.py")
    assert (tmp_path / "calc.py").read_text() == RIGHT and result.files_changed == ["calc.py"]
    first, second = (r["body"] for r in server.requests())
    assert not first.get("tools") and second["tools"]


def _cli(tooloop_exe: str, ws: Path, tmp_path: Path, *extra: str) -> Any:
    (ws / "calc.py").write_text(WRONG)
    # The third answer is there for the full prompt, which challenges an answer that changed nothing.
    replies = [text_reply(FIXED), text_reply("Done."), text_reply("Done.")]
    return small_window_run(tooloop_exe, ws, tmp_path, replies, "calc.py's add subtracts; fix it", *extra)


def test_cli_small_window_writes_a_file_the_model_gives_in_a_fenced_block(tooloop_exe: str, ws: Path,
                                                                        tmp_path: Path) -> None:
    proc, bodies = _cli(tooloop_exe, ws, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (ws / "calc.py").read_text() == RIGHT
    system = json.dumps(bodies[0]["system"])
    assert "its path on a line, then the file in a fenced code block" in system
    assert len(bodies) == 2 and bodies[1]["messages"][-1]["content"][0]["type"] == "tool_result"
    # The first request is the draft: no tools, asking for whole files (draft_first); then the tool loop.
    assert not bodies[0].get("tools") and "without tools" in json.dumps(bodies[0]["messages"])
    assert bodies[1]["tools"]


def test_cli_no_draft_offers_the_tools_from_the_first_request(tooloop_exe: str, ws: Path, tmp_path: Path) -> None:
    proc, bodies = _cli(tooloop_exe, ws, tmp_path, "--no-draft")
    assert proc.returncode == 0, proc.stderr
    assert (ws / "calc.py").read_text() == RIGHT, "text_edits still writes the fenced file"
    assert bodies[0]["tools"] and "without tools" not in json.dumps(bodies[0]["messages"])


def test_cli_full_prompt_keeps_the_tool_loop_and_a_fenced_block_stays_text(tooloop_exe: str, ws: Path,
                                                                           tmp_path: Path) -> None:
    proc, bodies = _cli(tooloop_exe, ws, tmp_path, "--prompt", "full")
    assert (ws / "calc.py").read_text() == WRONG, proc.stderr
    assert "fenced code block" not in json.dumps(bodies[0]["system"])


def test_cli_small_window_draft_cut_off_writes_its_whole_files_and_asks_for_the_rest(tooloop_exe: str, ws: Path,
                                                                                     tmp_path: Path) -> None:
    # The draft outran max_tokens inside the test's block: calc.py is written, the test is asked for with the
    # tools in the same run (no cut-off correction as a new message), and the command ends by itself.
    (ws / "calc.py").write_text(WRONG)
    cut = text_reply(FIXED + "\ntest_calc.py\n```python\nimport calc\nassert calc.add(2, 3) ==")
    cut["anthropic"]["stop_reason"] = "max_tokens"
    with MockServer({"responses": [cut, text_reply("Done.")]}) as server:
        proc = run_cli(tooloop_exe, ws, cli_env(tmp_path, server), *SMALL, "--provider", "anthropic",
                       "--base-url", server.base_url, "fix calc.py and add test_calc.py")
        bodies = [r["body"] for r in server.requests()]
    assert proc.returncode == 0, proc.stderr
    assert (ws / "calc.py").read_text() == RIGHT and not (ws / "test_calc.py").exists()
    assert len(bodies) == 2 and bodies[1]["tools"]
    last = json.dumps(bodies[1]["messages"][-1])
    assert "your draft ended inside the block of `test_calc.py`" in last, last
    assert "cut off at the output token limit" not in json.dumps(bodies[1]["messages"])


def test_cli_small_window_answer_that_writes_tool_results_back_is_corrected(tooloop_exe: str, ws: Path,
                                                                           tmp_path: Path) -> None:
    # Qwen2.5-Coder-1.5B answered its draft's failing test with the results written back in its chat template's
    # <tool_response> tags, and the command ended 0: now that answer gets a correction, as a text tool call does.
    (ws / "calc.py").write_text(WRONG)
    echo = text_reply("<tool_response>\nupdated calc.py\n</tool_response>")
    with MockServer({"responses": [text_reply(FIXED), echo, text_reply("Fixed add in calc.py.")]}) as server:
        proc = run_cli(tooloop_exe, ws, cli_env(tmp_path, server), *SMALL, "--provider", "anthropic",
                       "--base-url", server.base_url, "calc.py's add subtracts; fix it")
        bodies = [r["body"] for r in server.requests()]
    assert proc.returncode == 0, proc.stderr
    assert len(bodies) == 3 and proc.stdout.strip() == "Fixed add in calc.py.", proc.stdout
    assert "repeated tool results as text" in json.dumps(bodies[2]["messages"][-1])
