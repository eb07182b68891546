"""The control doors in Python: hooks=, permission_rules=, max_cost_usd= (result.cost_usd,
stop_reason "budget"), instruction_files=."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

import tooloop
from _support import assert_valid_view


class Brain:
    """A scripted fake model that records every request."""

    def __init__(self, *replies: Any) -> None:
        self.replies = list(replies)
        self.requests: List[Dict[str, Any]] = []

    def __call__(self, request: Dict[str, Any]) -> Any:
        self.requests.append(request)
        return self.replies.pop(0)


def calls(*items: Any, usage: Optional[Dict[str, int]] = None) -> Dict[str, Any]:
    return {"content": [{"type": "tool_use", "id": i, "name": n, "input": inp} for i, n, inp in items],
            "stop_reason": "tool_use", "usage": usage or {"input_tokens": 10, "output_tokens": 5}}


def text(t: str, usage: Optional[Dict[str, int]] = None) -> Dict[str, Any]:
    return {"content": [{"type": "text", "text": t}], "stop_reason": "end_turn",
            "usage": usage or {"input_tokens": 10, "output_tokens": 5}}


def results_of(request: Dict[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for m in request["messages"]:
        if isinstance(m["content"], list):
            for b in m["content"]:
                if b.get("type") == "tool_result":
                    c = b.get("content")
                    if isinstance(c, list):
                        c = "".join(x.get("text", "") for x in c)
                    out[b["tool_use_id"]] = (c, bool(b.get("is_error")))
    return out


def test_hooks_run_in_order_and_can_deny_rewrite_and_replace() -> None:
    log: List[str] = []
    brain = Brain(calls(("c1", "look", {"n": 1}), ("c2", "look", {"n": 2}), ("c3", "look", {"n": 3}),
                        ("c4", "rm", {})),
                  text("done"))

    def before_tool(call: tooloop.ToolCall) -> Any:
        log.append(f"before {call.name} {call.input}")
        if call.input.get("n") == 2:
            return "not this one"
        if call.input.get("n") == 3:
            return {"input": {"n": 30}}
        return None

    def after_tool(call: tooloop.ToolCall, result: tooloop.ToolResult) -> Optional[str]:
        log.append(f"after {call.name} {result.text} {result.is_error}")
        return "REPLACED" if call.input == {"n": 1} else None

    def permission(call: tooloop.ToolCall) -> bool:
        log.append(f"permission {call.name} {call.input}")
        return True

    seen: List[Dict[str, Any]] = []
    agent = tooloop.Agent(provider=brain, permission=permission, permission_rules={"deny": ["rm"]},
                          hooks={"before_tool": before_tool, "after_tool": after_tool,
                                 "before_request": seen.append})

    @agent.tool
    def look(n: int) -> str:
        """Look."""
        log.append(f"tool look {n}")
        return f"saw {n}"

    @agent.tool
    def rm() -> str:
        """Remove."""
        log.append("tool rm")
        return "gone"

    result = agent.run("go")
    assert result.text == "done"
    assert log == [
        "before look {'n': 1}", "permission look {'n': 1}", "tool look 1", "after look saw 1 False",
        "before look {'n': 2}",
        "before look {'n': 3}", "permission look {'n': 30}", "tool look 30", "after look saw 30 False",
    ]
    r = results_of(brain.requests[1])
    assert r["c1"] == ("REPLACED", False)
    assert r["c2"][1] and "not this one" in r["c2"][0]
    assert r["c3"] == ("saw 30", False)
    assert r["c4"][1] and "rule rm" in r["c4"][0]
    assert [c.denied for c in result.tool_calls] == [False, True, False, True]
    assert len(seen) == 2 and seen[1]["messages"] == brain.requests[1]["messages"]
    assert_valid_view(agent.messages)


@pytest.mark.parametrize("kind", ["before_tool", "after_tool", "before_request", "on_stop"])
def test_a_hook_that_raises_ends_the_run_with_its_exception_and_the_conversation_stays_valid(kind: str) -> None:
    class Boom(Exception):
        pass

    def boom(*args: Any) -> None:
        raise Boom(f"{kind} exploded")

    brain = Brain(calls(("c1", "look", {})), text("done"), text("done again"))
    agent = tooloop.Agent(provider=brain, hooks={kind: boom})
    ran: List[int] = []
    agent.add_tool(tooloop.tool(lambda: ran.append(1) or "ok", name="look", description="l"))
    with pytest.raises(Boom, match="exploded"):
        agent.run("go")
    assert_valid_view(agent.messages)
    assert ran == ([] if kind in ("before_tool", "before_request") else [1])
    agent.set_hooks(None)
    if kind != "on_stop":
        assert agent.resume().text in ("done", "done again")


def test_a_hook_that_raises_in_a_subagents_call_ends_the_parents_run_with_its_exception() -> None:
    class Boom(Exception):
        pass

    def before_tool(call: tooloop.ToolCall) -> None:
        if call.name == "look":
            raise Boom("the check broke")

    brain = Brain(calls(("p1", "task", {"description": "d", "prompt": "look", "agent_type": "explore"})),
                  calls(("k1", "look", {})), text("parent done"))
    ran: List[int] = []
    look = tooloop.tool(lambda: ran.append(1) or "ok", name="look", description="l")
    agent = tooloop.Agent(provider=brain, tools=[look], hooks={"before_tool": before_tool},
                          subagents={"explore": tooloop.SubAgent("explores", tools=["look"])})
    with pytest.raises(Boom, match="the check broke"):
        agent.run("go")
    assert len(brain.requests) == 2, "the parent did not carry on after its hook failed in the child"
    assert ran == []
    assert_valid_view(agent.messages)
    agent.set_hooks(None)
    assert agent.resume().text == "parent done"


def test_a_hook_returning_the_wrong_type_is_a_clear_type_error() -> None:
    brain = Brain(calls(("c1", "look", {})), text("done"))
    agent = tooloop.Agent(provider=brain, hooks={"before_tool": lambda call: 42})
    agent.add_tool(tooloop.tool(lambda: "ok", name="look", description="l"))
    with pytest.raises(TypeError, match="before_tool hook must return"):
        agent.run("go")
    assert_valid_view(agent.messages)
    with pytest.raises(tooloop.ConfigError, match="unknown hook"):
        tooloop.Agent(provider=brain, hooks={"after_call": print})


def test_on_stop_sends_a_new_user_message_and_the_run_goes_on() -> None:
    brain = Brain(text("first"), text("second"))
    stops: List[str] = []

    def on_stop(result: tooloop.RunResult) -> Optional[str]:
        stops.append(result.text)
        return "check again" if result.text == "first" else None

    agent = tooloop.Agent(provider=brain, hooks={"on_stop": on_stop})
    result = agent.run("go")
    assert result.text == "second" and result.turns == 2
    assert stops == ["first", "second"]
    assert brain.requests[1]["messages"][-1]["content"] in ("check again", [{"type": "text", "text": "check again"}])


def test_permission_rules_allow_skips_the_callable_and_ask_goes_to_it() -> None:
    brain = Brain(calls(("c1", "bash", {"command": "npm test -- -x"}), ("c2", "bash", {"command": "npm test && rm x"}),
                        ("c3", "bash", {"command": "git push"})),
                  text("done"))
    asked: List[str] = []

    def permission(call: tooloop.ToolCall) -> bool:
        asked.append(call.input["command"])
        return False

    agent = tooloop.Agent(provider=brain, permission=permission,
                          permission_rules={"allow": ["Bash(npm test:*)"], "ask": ["bash(git push:*)"]})

    @agent.tool
    def bash(command: str) -> str:
        """Run."""
        return f"ran {command}"

    result = agent.run("go")
    assert asked == ["npm test && rm x", "git push"]
    assert [c.denied for c in result.tool_calls] == [False, True, True]
    with pytest.raises(tooloop.ConfigError, match="permission_rules"):
        tooloop.Agent(provider=brain, permission_rules={"allow": ["bash(npm"]})


def test_max_cost_usd_stops_with_budget_and_cost_usd_is_reported() -> None:
    big = {"input_tokens": 100_000, "output_tokens": 1000}  # $0.315 a turn on claude-sonnet-4-6
    brain = Brain(*[calls((f"c{i}", "look", {"i": i}), usage=big) for i in range(10)])
    agent = tooloop.Agent(model="claude-sonnet-4-6", provider=brain, max_cost_usd=1.0)
    agent.add_tool(tooloop.tool(lambda i: "ok", name="look", description="l"))
    result = agent.run("go")
    assert result.stop_reason == "budget"
    assert len(brain.requests) == 3 and result.turns == 3
    assert result.cost_usd is not None and result.cost_usd == pytest.approx(0.945) and result.cost_usd <= 1.0
    assert agent.spent_usd <= 1.0
    assert_valid_view(agent.messages)
    with pytest.raises(tooloop.ConfigError, match="max_cost_usd"):
        tooloop.Agent(model="my-local-model", provider=brain, max_cost_usd=1.0)
    with pytest.raises(tooloop.ConfigError, match="max_cost_usd"):
        tooloop.Agent(provider=brain, max_cost_usd=-1)
    # A cap of 0: nothing is sent, and the result says so with a known cost of 0.
    zero = Brain(text("never sent"))
    result = tooloop.Agent(model="claude-sonnet-4-6", provider=zero, max_cost_usd=0).run("go")
    assert (result.stop_reason, result.turns, result.cost_usd) == ("budget", 0, 0.0) and zero.requests == []


def test_instruction_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "sub").mkdir()
    (repo / "AGENTS.md").write_text("Use tabs.")
    (repo / "sub" / "CLAUDE.md").write_text("Run make check.")
    brain = Brain(text("ok"), text("ok"), text("ok"))
    agent = tooloop.Agent(provider=brain, system="Base.", workspace=repo / "sub", instruction_files=True)
    agent.run("hi")
    system = brain.requests[0]["system"]
    system = system if isinstance(system, str) else "".join(b["text"] for b in system)
    assert system.index("Base.") < system.index("Use tabs.") < system.index("Run make check.")
    assert str((repo / "sub" / "CLAUDE.md").resolve()) in system
    assert agent.instructions is not None and len(agent.instructions["files"]) == 2
    # Off by default in the library.
    plain = tooloop.Agent(provider=brain, workspace=repo / "sub")
    plain.run("hi")
    assert "Use tabs." not in str(brain.requests[1].get("system"))
    assert plain.instructions is None
    # A list: exactly those.
    only = tooloop.Agent(provider=brain, workspace=repo, instruction_files=[repo / "sub" / "CLAUDE.md"])
    only.run("hi")
    assert "Run make check." in str(brain.requests[2]["system"]) and "Use tabs." not in str(brain.requests[2]["system"])
    if hasattr(os, "mkfifo"):
        os.unlink(repo / "AGENTS.md")
        os.mkfifo(repo / "AGENTS.md")
        fifo = tooloop.Agent(provider=brain, workspace=repo, instruction_files=True)
        assert fifo.instructions is not None
        assert any("not a regular file" in s["reason"] for s in fifo.instructions["skipped"])


def test_rule_helpers_for_hosts(tmp_path: Path) -> None:
    from tooloop import _tooloop, rules

    assert _tooloop.match_rules({"allow": ["Bash(npm test:*)"]}, "bash", {"command": "npm test"}, "/w") == \
        ("allow", "Bash(npm test:*)")
    assert _tooloop.match_rules({"deny": ["Read(.env)"]}, "read_file", {"path": ".env"}, "/w") == ("deny", "Read(.env)")
    assert _tooloop.match_rules({}, "bash", {"command": "x"}, "/w") is None
    assert _tooloop.read_only_command("git status && ls | head")
    assert not _tooloop.read_only_command("rm -rf x")
    assert _tooloop.split_command("timeout 5 a && b") == ["a", "b"]
    # The files a check keeps read-only, read as the core reads them: bash's grammar, a pytest node id's file,
    # a folder; never the root, a path out of the workspace or one that does not exist.
    (tmp_path / "test_x.py").write_text("")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_y.py").write_text("")
    assert rules.check_files("python3 test_x.py && pytest -q tests/ . ./ ../x missing.py test_x.py::test_a",
                             tmp_path) == ["test_x.py", "tests"]
    assert rules.check_files("cd . && python3 -m pytest 'tests/test_y.py::test_b' -q", str(tmp_path)) == \
        ["tests/test_y.py"]
    assert rules.check_files("pytest -q", tmp_path) == []
    # Claude Code's meanings: Edit covers every file-changing tool; shell keywords hide nothing.
    assert _tooloop.match_rules({"deny": ["Edit(secret/**)"]}, "write_file", {"path": "secret/k"}, "/w") == \
        ("deny", "Edit(secret/**)")
    assert _tooloop.match_rules({"deny": ["Bash(rm:*)"]}, "bash", {"command": "if true; then rm -rf x; fi"},
                                "/w") == ("deny", "Bash(rm:*)")
    assert _tooloop.match_rules({"deny": ["Bash(rm:*)"]}, "bash", {"command": "/bin/rm x"}, "/w") == \
        ("deny", "Bash(rm:*)")


def test_tool_result_is_the_text_with_its_details_and_a_missing_instruction_file_is_refused(tmp_path: Path) -> None:
    r = tooloop.ToolResult([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], is_error=True)
    assert r == "a\nb" and r.upper() == "A\nB" and r.is_error and not r.denied
    assert r.content == r.output == r["content"]
    with pytest.raises(tooloop.ConfigError, match="instruction_files"):
        tooloop.Agent(provider=Brain(), instruction_files=[tmp_path / "missing.md"])
