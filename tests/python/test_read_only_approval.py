"""A permission callable that answers ``tooloop.ALLOW_READ_ONLY`` ("let it run, it looks like it only reads")
lets the call run with no power to write: bash under the kernel's read-only sandbox, whatever the command really
does; a read-only tool as it is; any other tool refused with a reason. Against the mock server (Messages API)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, List

import tooloop

from _support import agent_for, require_landlock, text_reply, tool_reply


def test_allow_read_only_keeps_bash_from_writing_whatever_it_looks_like(mock: Any, tmp_path: Path) -> None:
    require_landlock()
    (tmp_path / "notes.txt").write_text("alpha\n")
    commands = ["awk 'BEGIN{print \"touch pwned1\" | \"sh\"}'", "sort -o pwned2 notes.txt",
                "ls #'\ntouch pwned3", "cat notes.txt"]
    server = mock({"responses": [
        *[tool_reply((f"toolu_{i}", "bash", {"command": c})) for i, c in enumerate(commands)],
        tool_reply(("toolu_w", "write_file", {"path": "pwned4", "content": "x"})),
        tool_reply(("toolu_r", "read_file", {"path": "notes.txt"})),
        text_reply("done"),
    ]})
    asked: List[str] = []

    def permission(call: tooloop.ToolCall) -> Any:
        asked.append(call.name)
        return tooloop.ALLOW_READ_ONLY

    agent = agent_for(server, builtin_tools=True, workspace=str(tmp_path), permission=permission)
    result = agent.run("look around")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"], "a read-only approval wrote"
    calls = {c.id: c for c in result.tool_calls}
    assert "alpha" in calls["toolu_3"].output and not calls["toolu_3"].is_error
    assert calls["toolu_w"].is_error and "allowed only if it changes nothing" in calls["toolu_w"].output
    assert "alpha" in calls["toolu_r"].output and not calls["toolu_r"].is_error
    assert asked == ["bash"] * 4 + ["write_file", "read_file"]
    assert repr(tooloop.ALLOW_READ_ONLY) == "tooloop.ALLOW_READ_ONLY"
