"""Text the host or the project supplies reaches a request only within bounds, through the Python door:
instruction files are read only from where they are named (a workspace `AGENTS.md` linking to a private key
or to /proc/self/environ is skipped, never sent; a binary one is skipped), and a hook's text (a deny reason,
a replaced result, an on_stop continuation) is cut like tool output."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

import tooloop
from _support import agent_for, text_reply

KEY = "-----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1rZXktdjEAAAAA"
HUGE = 20 * 1024 * 1024
MARKER = "[output truncated:"


def _system(body: Dict[str, Any]) -> str:
    system = body.get("system") or ""
    return system if isinstance(system, str) else "\n".join(b.get("text", "") for b in system)


def test_an_agents_md_linking_to_a_private_key_or_the_environment_is_never_sent(
        mock: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-0123456789-secret")
    (tmp_path / "home" / ".ssh").mkdir(parents=True)
    (tmp_path / "home" / ".ssh" / "id_ed25519").write_text(KEY)
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "sub").mkdir()
    os.symlink(tmp_path / "home" / ".ssh" / "id_ed25519", repo / "AGENTS.md")
    os.symlink("/proc/self/environ", repo / "sub" / "AGENTS.md")
    (repo / "sub" / "CLAUDE.md").write_text("not read: AGENTS.md is there")
    server = mock([text_reply("ok")])
    agent = agent_for(server, model="claude-sonnet-4-6", workspace=repo / "sub", instruction_files=True)
    agent.run("hi")
    system = _system(server.requests()[0]["body"])
    assert "OPENSSH" not in system and "b3BlbnNzaC1r" not in system
    assert "MY_SERVICE_TOKEN" not in system and "PATH=" not in system
    assert agent.instructions is not None
    reasons = {Path(s["path"]).name + ":" + Path(s["path"]).parent.name: s["reason"]
               for s in agent.instructions["skipped"]}
    assert "leads outside" in reasons["AGENTS.md:repo"], reasons
    assert "leads outside" in reasons["AGENTS.md:sub"], reasons


def test_a_binary_agents_md_is_skipped_with_a_reason(mock: Any, tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_bytes(b"BINARY RULES\x00\x01")
    server = mock([text_reply("ok")])
    agent = agent_for(server, model="claude-sonnet-4-6", workspace=tmp_path, instruction_files=["AGENTS.md"])
    agent.run("hi")
    assert "BINARY RULES" not in _system(server.requests()[0]["body"])
    assert agent.instructions is not None
    assert [s["reason"] for s in agent.instructions["skipped"]] == [
        "binary (it holds NUL bytes); instructions are text"]


class Brain:
    def __init__(self, *replies: Any) -> None:
        self.replies = list(replies)
        self.requests: List[Dict[str, Any]] = []

    def __call__(self, request: Dict[str, Any]) -> Any:
        self.requests.append(request)
        return self.replies.pop(0)


def _calls(*items: Any) -> Dict[str, Any]:
    return {"content": [{"type": "tool_use", "id": i, "name": n, "input": inp} for i, n, inp in items],
            "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 5}}


def _text(t: str) -> Dict[str, Any]:
    return {"content": [{"type": "text", "text": t}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 10, "output_tokens": 5}}


def _result_texts(request: Dict[str, Any]) -> Dict[str, str]:
    out: Dict[str, str] = {}
    for m in request["messages"]:
        if isinstance(m["content"], list):
            for b in m["content"]:
                if b.get("type") == "tool_result":
                    c = b.get("content")
                    out[b["tool_use_id"]] = c if isinstance(c, str) else "".join(x.get("text", "") for x in c)
    return out


def test_a_hooks_text_is_cut_like_tool_output() -> None:
    brain = Brain(_calls(("c1", "look", {"n": 1}), ("c2", "look", {"n": 2}), ("c3", "look", {"n": 3})),
                  _text("first"), _text("second"))

    def before_tool(call: tooloop.ToolCall) -> Any:
        return "D" * HUGE if call.input["n"] == 1 else None

    def after_tool(call: tooloop.ToolCall, result: tooloop.ToolResult) -> Optional[str]:
        return "A" * HUGE if call.input["n"] == 2 else None

    def permission(call: tooloop.ToolCall) -> Any:
        return "P" * HUGE if call.input["n"] == 3 else True

    stops: List[str] = []

    def on_stop(result: tooloop.RunResult) -> Optional[str]:
        stops.append(result.text)
        return "S" * HUGE if len(stops) == 1 else None

    agent = tooloop.Agent(provider=brain, permission=permission,
                          hooks={"before_tool": before_tool, "after_tool": after_tool, "on_stop": on_stop})

    @agent.tool
    def look(n: int) -> str:
        """Look."""
        return f"saw {n}"

    result = agent.run("go")
    assert result.text == "second"
    results = _result_texts(brain.requests[1])
    for cid, letter in (("c1", "D"), ("c2", "A"), ("c3", "P")):
        assert MARKER in results[cid] and letter * 100 in results[cid], cid
        assert len(results[cid]) < 64 * 1024, (cid, len(results[cid]))
    last = brain.requests[2]["messages"][-1]["content"]
    last = last if isinstance(last, str) else "".join(b.get("text", "") for b in last)
    assert MARKER in last and len(last) < 64 * 1024
    assert sum(len(str(r)) for r in brain.requests) < 1024 * 1024
