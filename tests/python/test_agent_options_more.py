"""The agent options beyond the loop through the Python door: planning (todo list), subagents whose tools are
Python functions, skills, MCP servers from the official SDK, the bash sandbox, close() and the context manager."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any, Dict, List

import pytest

import tooloop
from _support import assert_valid_view, mcp_python, require_landlock

ROOT = Path(__file__).resolve().parents[2]


def scripted(*replies: Dict[str, Any]) -> Any:
    """A Python model answering `replies` in order, recording each request."""
    queue = list(replies)
    seen: List[Dict[str, Any]] = []

    def model(request: Dict[str, Any]) -> Dict[str, Any]:
        seen.append(request)
        return queue.pop(0)

    model.seen = seen  # type: ignore[attr-defined]
    return model


def call(id: str, name: str, input: Any) -> Dict[str, Any]:
    return {"content": [{"type": "tool_use", "id": id, "name": name, "input": input}]}


def test_planning_keeps_a_todo_list_the_host_reads_and_sees_change() -> None:
    todos = [{"content": "read", "status": "completed"}, {"content": "write", "status": "in_progress"}]
    model = scripted(call("t1", "todo_write", {"todos": todos}),
                     call("t2", "todo_write", {"todos": [{"content": "a", "status": "in_progress"},
                                                        {"content": "b", "status": "in_progress"}]}),
                     {"content": "done"})
    agent = tooloop.Agent(provider=model, planning=True)
    events = [e for e in agent.stream("plan it") if isinstance(e, tooloop.TodoEvent)]
    assert [len(e.todos) for e in events] == [2], "one change: the second list broke the one-in-progress rule"
    assert agent.todos == todos
    assert "todo_write" in agent.tools
    assert tooloop.Agent(provider=model).todos == []


def test_a_subagent_with_python_tools_answers_the_parent_and_its_events_are_tagged() -> None:
    model = scripted(
        call("p1", "task", {"description": "find", "prompt": "find the config", "agent_type": "finder"}),
        call("c1", "grep_config", {"pattern": "port"}),
        {"content": "port is 8080"},
        {"content": "The port is 8080."},
    )
    found: List[str] = []

    def grep_config(pattern: str) -> str:
        """Search the config.

        Args:
            pattern: what to look for.
        """
        found.append(pattern)
        return "port = 8080"

    agent = tooloop.Agent(provider=model, subagents={
        "finder": tooloop.SubAgent("Finds things in the config.", system="You search.", tools=[grep_config]),
    })
    events = list(agent.stream("what port?"))
    result = events[-1].result  # type: ignore[union-attr]
    assert result.text == "The port is 8080." and found == ["port"]
    assert result.tool_calls[0].output.startswith("port is 8080")
    child = [e for e in events if isinstance(e, tooloop.SubagentEvent)]
    assert {e.parent_id for e in child} == {"p1"}
    assert any(isinstance(e.event, tooloop.ToolUseEvent) and e.event.name == "grep_config" for e in child)
    # The child's request: its own system prompt, only its own tool, the prompt alone.
    child_request = model.seen[1]
    assert child_request["system"] == "You search."
    assert [t["name"] for t in child_request["tools"]] == ["grep_config"]
    assert len(child_request["messages"]) == 1
    assert_valid_view(agent.messages)


def test_skills_are_listed_in_the_system_prompt_and_loaded_on_demand(tmp_path: Path) -> None:
    skill = tmp_path / "skills" / "deploy"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: deploy\ndescription: How we deploy.\n---\nRun make deploy.\n")
    bad = tmp_path / "skills" / "broken"
    bad.mkdir()
    (bad / "SKILL.md").write_text("no front matter\n")
    model = scripted(call("s1", "skill", {"name": "deploy"}), {"content": "ok"})
    agent = tooloop.Agent(provider=model, skills=str(tmp_path / "skills"))
    result = agent.run("deploy it")
    assert "deploy: How we deploy." in model.seen[0]["system"]
    assert "make deploy" not in model.seen[0]["system"]
    assert result.tool_calls[0].output.startswith("Run make deploy.")
    problems = agent.skills["problems"]
    assert len(problems) == 1 and problems[0]["path"].endswith("broken/SKILL.md")


def test_mcp_server_tools_from_the_official_sdk_and_close_stops_the_server() -> None:
    py = mcp_python()
    marker = f"tooloop-py-mcp-{os.getpid()}"
    model = scripted(call("m1", "mcp__docs__echo", {"text": "hi"}), {"content": "done"})
    servers = {"docs": {"command": py, "args": [str(ROOT / "tests/mcp/fastmcp_server.py"), marker]}}
    with tooloop.Agent(provider=model, mcp_servers=servers) as agent:
        assert "mcp__docs__echo" in agent.tools
        status = agent.mcp_status()
        assert status["servers"][0]["name"] == "docs" and status["servers"][0]["state"] == "connected"
        result = agent.run("echo")
        assert result.tool_calls[0].output == "echo: hi" and not result.tool_calls[0].is_error
    # Leaving the block stopped the server.
    left = subprocess.run(["pgrep", "-f", marker.replace("tooloop", "[t]ooloop")], capture_output=True).stdout
    assert left.strip() == b""
    assert agent.messages[-1]["content"][0]["text"] == "done", "the conversation stays readable after close()"


def test_builtin_bash_is_confined_to_the_workspace_by_default(tmp_path: Path) -> None:
    require_landlock()
    outside = Path(f"/tmp/tooloop-py-outside-{os.getpid()}")
    if outside.exists():
        outside.unlink()
    model = scripted(call("b1", "bash", {"command": f"touch {outside}; echo inside > in.txt"}), {"content": "ok"})
    agent = tooloop.Agent(provider=model, builtin_tools=["bash"], workspace=str(tmp_path))
    result = agent.run("go")
    out = result.tool_calls[0].output
    if "Permission denied" not in out and outside.exists():
        outside.unlink()
        pytest.fail(f"bash wrote outside the workspace: {out}")
    assert (tmp_path / "in.txt").read_text() == "inside\n"
    assert "workspace" in model.seen[0]["system"], "the model is told what it may do"
    # Off: the same command may write anywhere.
    model = scripted(call("b1", "bash", {"command": f"touch {outside}"}), {"content": "ok"})
    tooloop.Agent(provider=model, builtin_tools=["bash"], workspace=str(tmp_path), sandbox="off").run("go")
    assert outside.exists()
    outside.unlink()
    with pytest.raises(tooloop.ConfigError, match="sandbox"):
        tooloop.Agent(provider=model, sandbox="strict")


def test_bash_does_not_see_secret_variables_and_their_values_are_redacted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-python-0123456789")
    monkeypatch.setenv("HARMLESS_SETTING", "visible-value")
    (tmp_path / ".env").write_text("MY_SERVICE_TOKEN=tok-python-0123456789\n")
    model = scripted(call("b1", "bash", {"command": "env; cat .env"}), {"content": "ok"})
    agent = tooloop.Agent(provider=model, builtin_tools=["bash"], workspace=str(tmp_path), sandbox="off")
    out = agent.run("show env").tool_calls[0].output
    assert "HARMLESS_SETTING=visible-value" in out
    assert "MY_SERVICE_TOKEN=tok-python" not in out.split("MY_SERVICE_TOKEN=[redacted]")[0], out
    assert "tok-python-0123456789" not in out and "MY_SERVICE_TOKEN=[redacted]" in out, "the .env read is redacted"
    # A variable the host lets through is kept.
    model = scripted(call("b1", "bash", {"command": "echo $MY_SERVICE_TOKEN"}), {"content": "ok"})
    agent = tooloop.Agent(provider=model, builtin_tools=["bash"], workspace=str(tmp_path), sandbox="off",
                          env_passthrough=["MY_SERVICE_TOKEN"])
    assert agent.run("go").tool_calls[0].output.strip() == "tok-python-0123456789"
