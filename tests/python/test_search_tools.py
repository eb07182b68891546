"""The search, fetch and background tools through the Python API and the mock server: a per-tool timeout for Python tools,
background commands of the built-in bash (started, queried through bash, read, killed, all ended by close),
and grep/glob in the default tool set."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from typing import Any, List

import pytest

import tooloop
from _support import agent_for, text_reply, tool_reply


def sleep_pids(marker: str) -> List[int]:
    """Live `sleep` processes whose command line holds `marker`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{name}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and cmd.startswith("sleep ") and marker in cmd:
            found.append(int(name))
    return found


def test_a_python_tool_past_its_timeout_is_an_error_and_is_told_to_stop(mock: Any) -> None:
    stopped = threading.Event()

    def spin() -> str:
        """Never finishes by itself."""
        try:
            while True:
                time.sleep(0.01)
        except TimeoutError:
            stopped.set()
            raise

    server = mock({"responses": [tool_reply(("toolu_1", "spin", {})), text_reply("done")]})
    agent = agent_for(server, tools=[tooloop.Tool("spin", "spins", {"type": "object"}, spin, timeout=0.5)])
    started = time.monotonic()
    result = agent.run("go")
    assert time.monotonic() - started < 5
    assert result.text == "done"
    call = result.tool_calls[0]
    assert call.is_error and "time limit of 0.5 s" in str(call.output)
    assert stopped.wait(5), "the tool was not told to stop"


def test_a_tool_blocked_in_c_code_does_not_hold_up_the_run(mock: Any) -> None:
    @tooloop.tool(timeout=0.3)
    def stuck() -> str:
        """Blocks in time.sleep."""
        time.sleep(3)
        return "late"

    assert stuck.timeout == 0.3
    server = mock({"responses": [tool_reply(("toolu_1", "stuck", {})), text_reply("done")]})
    agent = agent_for(server, tools=[stuck])
    started = time.monotonic()
    result = agent.run("go")
    assert time.monotonic() - started < 2.5
    assert result.tool_calls[0].is_error and "late" not in str(result.tool_calls[0].output)


def test_agent_tool_decorator_takes_a_timeout_and_bad_ones_are_refused(mock: Any) -> None:
    server = mock({"responses": [text_reply("x")]})
    agent = agent_for(server)

    @agent.tool(timeout=2)
    def quick() -> str:
        """Quick."""
        return "ok"

    assert quick.timeout == 2.0
    for bad in (0, -1, "5", True):
        with pytest.raises(ValueError, match="timeout must be a positive number"):
            tooloop.Tool("t", "d", {"type": "object"}, lambda: None, timeout=bad)  # type: ignore[arg-type]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_background_server_is_queried_read_killed_and_nothing_is_left_after_close(mock: Any, tmp_path: Any) -> None:
    (tmp_path / "index.txt").write_text("served by the background server\n")
    port = free_port()
    marker = f"30{os.getpid() % 1000}.4321"
    fetch = (
        "for i in $(seq 50); do python3 -c \"import urllib.request as u; "
        f"print(u.urlopen('http://127.0.0.1:{port}/index.txt').read().decode())\" 2>/dev/null && break; "
        "sleep 0.2; done"
    )
    server = mock({"responses": [
        tool_reply(("toolu_1", "bash", {"command": f"exec python3 -u -m http.server {port} --bind 127.0.0.1",
                                        "run_in_background": True})),
        tool_reply(("toolu_2", "bash", {"command": fetch + "; sleep 1", "timeout": 30})),  # the log line lands
        tool_reply(("toolu_3", "bash_output", {"id": "bash_1"})),
        tool_reply(("toolu_4", "bash_kill", {"id": "bash_1"})),
        tool_reply(("toolu_5", "bash", {"command": f"sleep {marker}", "run_in_background": True})),
        text_reply("done"),
    ]})
    agent = agent_for(server, builtin_tools=True, workspace=str(tmp_path), sandbox="off")
    result = agent.run("serve")
    outputs = [str(c.output) for c in result.tool_calls]
    assert "with id bash_1" in outputs[0]
    assert "served by the background server" in outputs[1]
    assert "GET /index.txt" in outputs[2] and "[bash_1: running]" in outputs[2]
    assert "was killed" in outputs[3]
    listed = {b["id"]: b["status"] for b in agent.background_commands}
    assert listed == {"bash_1": "killed", "bash_2": "running"}
    # Started asynchronously (setsid, the PID namespace, then bash execs sleep): wait for it to show up.
    deadline = time.monotonic() + 5
    while not sleep_pids(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sleep_pids(marker), "the second background command is not running"
    agent.close()
    deadline = time.monotonic() + 3
    while sleep_pids(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not sleep_pids(marker), "a background command outlived agent.close()"
    assert [b["status"] for b in agent.background_commands] == ["killed", "killed"]


def test_grep_and_glob_answer_through_the_agent(mock: Any, tmp_path: Any) -> None:
    (tmp_path / ".gitignore").write_text("ignored/\n")
    (tmp_path / "ignored").mkdir()
    (tmp_path / "ignored" / "x.py").write_text("TODO ignored\n")
    (tmp_path / "a.py").write_text("# TODO: one\n")
    server = mock({"responses": [
        tool_reply(("toolu_1", "grep", {"pattern": "TODO", "output_mode": "content"}),
                   ("toolu_2", "glob", {"pattern": "**/*.py"})),
        text_reply("done"),
    ]})
    agent = agent_for(server, builtin_tools=True, workspace=str(tmp_path))
    result = agent.run("find todos")
    assert [str(c.output) for c in result.tool_calls] == ["a.py:1:# TODO: one", "a.py"]
    info = agent.tool_info("grep")
    assert info is not None and info.read_only


def test_the_cli_prompts_teach_grep_and_glob_over_bash_searches(tmp_path: Any) -> None:
    from tooloop.cli.prompt import compact_system_prompt, system_prompt

    full = system_prompt(tmp_path, "ask")
    assert "Search with the grep tool (file contents) and the glob tool (file names), not with grep, rg" in full
    assert "run_in_background" in full and "bash_output" in full
    compact = compact_system_prompt(tmp_path, "ask")
    # The compact prompt goes with the small-model tool set, which leaves the search tools out.
    assert "file paths are relative to it" in compact and "grep" not in compact and len(compact) < 700
    # A small model told nothing wrote a Python file with `echo ... > hello.py` (prompt.py).
    assert "Create and change files with write_file and edit_file, never with shell commands." in compact
    for name in ("grep", "glob"):
        info = tooloop.Agent(provider=lambda r: {"content": "x"}, builtin_tools=[name], workspace=tmp_path).tool_info(name)
        assert info is not None and "instead of" in info.description and "through bash" in info.description
    assert "grep and glob" in system_prompt(tmp_path, "read-only")
    agent = tooloop.Agent(provider=lambda r: {"content": "x"}, builtin_tools=True, workspace=tmp_path)
    bash = agent.tool_info("bash")
    assert bash is not None and "grep and glob (not grep, rg or find through bash)" in bash.description


def test_the_cli_lists_background_commands_and_summarizes_the_new_tools(tmp_path: Any) -> None:
    import io
    from types import SimpleNamespace

    from tooloop.cli.render import Renderer, summarize_call
    from tooloop.cli.repl import Repl

    listed = [{"id": "bash_1", "command": "python3 -m http.server 8000", "status": "running", "exit_code": None},
              {"id": "bash_2", "command": "make watch", "status": "exited", "exit_code": 2}]
    out = io.StringIO()
    settings = SimpleNamespace(model="m", provider="anthropic", workspace=tmp_path)
    repl = Repl(SimpleNamespace(messages=[], background_commands=listed), settings, Renderer(out, color=False),
                SimpleNamespace(mode="ask"), tmp_path / "s.jsonl", threading.Event())
    repl.command("/bashes")
    text = out.getvalue()
    assert "bash_1  running" in text and "python3 -m http.server 8000" in text
    assert "bash_2  exited (2)" in text and "make watch" in text
    assert summarize_call("grep", {"pattern": "TODO", "path": "src"}) == "grep(TODO in src)"
    assert summarize_call("web_fetch", {"url": "http://x.test/"}) == "web_fetch(http://x.test/)"
    assert summarize_call("bash_output", {"id": "bash_1"}) == "bash_output(bash_1)"


def test_the_cli_asks_before_web_fetch_like_bash_but_not_before_searches(tmp_path: Any) -> None:
    from tooloop.cli.permissions import ReadOnlyPolicy

    agent = tooloop.Agent(provider=lambda r: {"content": "x"}, builtin_tools=True, workspace=tmp_path)
    policy = ReadOnlyPolicy()
    policy.bind(agent)
    for asked in ("bash", "web_fetch"):
        assert not policy.is_read_only(asked)
        assert isinstance(policy({"name": asked, "input": {}}), str)
    for free in ("grep", "glob", "bash_output", "bash_kill"):
        assert policy({"name": free, "input": {}}) is True


def test_polling_a_background_command_is_not_taken_for_a_runaway() -> None:
    # bash_output(id) called again and again (a model waiting for a build or a server) is a poll: each call
    # reads what arrived since the last one, so the runaway guard (the 3rd identical call in a row is
    # refused, the 5th ends the run) must not refuse or stop it.
    seen: List[str] = []

    def model(request: Any) -> Any:
        last = request["messages"][-1]["content"]
        if isinstance(last, list):
            for block in last:
                if block.get("type") == "tool_result":
                    content = block["content"]
                    seen.append(content if isinstance(content, str) else "".join(b.get("text", "") for b in content))
        if not seen:
            return {"content": [{"type": "tool_use", "id": "start", "name": "bash", "input": {
                "command": "for i in 1 2 3 4 5 6; do echo line $i; sleep 0.3; done", "run_in_background": True}}],
                "stop_reason": "tool_use"}
        if "exited" in seen[-1] or len(seen) > 40:
            return {"content": "finished"}
        time.sleep(0.35)  # new output each time
        return {"content": [{"type": "tool_use", "id": f"poll{len(seen)}", "name": "bash_output",
                             "input": {"id": "bash_1"}}], "stop_reason": "tool_use"}

    with tooloop.Agent(provider=model, builtin_tools=True, sandbox="off", max_turns=50) as agent:
        result = agent.run("wait for it")
    polls = seen[1:]
    assert len(polls) >= 5, seen
    assert not [p for p in polls if "not run" in p], seen
    assert result.stop_reason == "end_turn" and "exited, exit code: 0" in polls[-1], seen
    assert "".join(polls).count("line ") == 6


def test_a_background_command_ends_with_the_cli_session(tooloop_exe: str, tmp_path: Any) -> None:
    # `tooloop -p "task"`: the model starts a long background command and answers; when the command exits,
    # the background command and what it started are gone (checked in the process table).
    import subprocess

    from _support import MockServer, cli_env

    marker = f"40{os.getpid() % 1000}.5678"
    scenario = {"responses": [
        tool_reply(("toolu_1", "bash", {"command": f"echo up; sleep {marker} & sleep {marker}",
                                        "run_in_background": True})),
        tool_reply(("toolu_2", "bash", {"command": "sleep 0.5; echo waited"}), ("toolu_3", "bash_output", {"id": "bash_1"})),
        text_reply("started it"),
    ]}
    with MockServer(scenario) as server:
        proc = subprocess.run([tooloop_exe, "--yes", "-p", "start a watcher"], cwd=tmp_path,
                              env=cli_env(tmp_path, server), stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=120)
        results = [b for r in server.requests() for m in r["body"]["messages"] for b in m["content"]
                   if isinstance(b, dict) and b.get("type") == "tool_result"]
    assert proc.returncode == 0, proc.stderr
    assert "started it" in proc.stdout
    assert results and "with id bash_1" in json.dumps(results[0]), results
    assert "up\\n[bash_1: running]" in json.dumps(results[-1]), results  # it was running before the end
    deadline = time.monotonic() + 3
    while sleep_pids(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not sleep_pids(marker), "a background command outlived the CLI session"
