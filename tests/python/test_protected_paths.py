"""``protected_paths=`` through the Python door: sandboxed bash ("workspace-write", as root where the read-only
view exists) cannot change `.git/config`, `.git/hooks/*`, `.tooloop/*` or `.mcp.json`, writes elsewhere in the
workspace work, and ``protected_paths=[]`` lifts it; a path leaving the workspace is a ConfigError."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List

import pytest

import tooloop

FILES = {".git/config": "[core]\n", ".git/hooks/pre-commit": "#!/bin/sh\n",
         ".tooloop/settings.local.json": "{}\n", ".mcp.json": "{}\n"}
COMMAND = ("for f in .git/config .git/hooks/pre-commit .tooloop/settings.local.json .mcp.json; do "
           "echo evil > $f 2>/dev/null && echo WROTE $f; done; echo ok > elsewhere.txt && echo WROTE-ELSEWHERE")


class Brain:
    def __init__(self) -> None:
        self.requests: List[Dict[str, Any]] = []

    def __call__(self, request: Dict[str, Any]) -> Dict[str, Any]:
        self.requests.append(request)
        if len(self.requests) == 1:
            return {"content": [{"type": "tool_use", "id": "c1", "name": "bash", "input": {"command": COMMAND}}],
                    "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 5}}
        return {"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn",
                "usage": {"input_tokens": 10, "output_tokens": 5}}


def _bash_output(brain: Brain) -> str:
    for m in brain.requests[1]["messages"]:
        if isinstance(m["content"], list):
            for b in m["content"]:
                if b.get("type") == "tool_result":
                    c = b["content"]
                    return c if isinstance(c, str) else "".join(x.get("text", "") for x in c)
    raise AssertionError("no tool result")


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    for rel, content in FILES.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(content)
    return ws


@pytest.mark.skipif(os.geteuid() != 0 or tooloop._tooloop.sandbox_support() is None,
                    reason="needs root (the read-only view) and Landlock")
@pytest.mark.parametrize("lifted", [False, True])
def test_sandboxed_bash_cannot_change_protected_paths_unless_lifted(tmp_path: Path, lifted: bool) -> None:
    ws = _workspace(tmp_path)
    brain = Brain()
    extra: Dict[str, Any] = {"protected_paths": []} if lifted else {}
    agent = tooloop.Agent(provider=brain, builtin_tools=["bash"], workspace=ws, **extra)
    agent.run("go")
    out = _bash_output(brain)
    assert "WROTE-ELSEWHERE" in out, out
    for rel, content in FILES.items():
        if lifted:
            assert (ws / rel).read_text() == "evil\n", (rel, out)
        else:
            assert f"WROTE {rel}" not in out and (ws / rel).read_text() == content, (rel, out)


def test_a_protected_path_leaving_the_workspace_is_a_config_error() -> None:
    for bad in ["../x", "/etc/passwd"]:
        with pytest.raises(tooloop.ConfigError, match="protected_paths"):
            tooloop.Agent(provider=Brain(), protected_paths=[bad])
