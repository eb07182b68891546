"""What a host asks the library instead of knowing it: which tools are read-only, whether a
tool call was denied, what a run and a conversation cost, what a session file holds. Against the mock
server, with the core's own price table and session loader."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

import tooloop
from _support import agent_for, text_reply, tool_reply

# claude-sonnet-4-6 list prices: 3 $/M input, 15 $/M output.
TOOL_TURN = (20 * 3 + 8 * 15) / 1e6
TEXT_TURN = (10 * 3 + 5 * 15) / 1e6


def test_read_only_flows_from_tool_and_decorators_to_the_core_registry() -> None:
    agent = tooloop.Agent(provider=lambda r: {"content": "x"}, builtin_tools=True)

    @agent.tool(read_only=True)
    def lookup(key: str) -> str:
        """Look a key up."""
        return key

    @agent.tool
    def store(key: str) -> str:
        """Store a key."""
        return key

    agent.add_tool(tooloop.tool(lambda q: q, name="search", read_only=True))
    agent.add_tool(tooloop.Tool("peek", "Peek.", {"type": "object"}, lambda: "x", read_only=True))

    info = agent.tool_info("lookup")
    assert info is not None and info.read_only is True and info.name == "lookup"
    assert info.input_schema["properties"] == {"key": {"type": "string"}}
    assert agent.tool_info("store").read_only is False  # type: ignore[union-attr]
    assert agent.tool_info("search").read_only is True  # type: ignore[union-attr]
    assert agent.tool_info("peek").read_only is True  # type: ignore[union-attr]
    # The built-ins: the core says which of them only read.
    assert agent.tool_info("read_file").read_only is True  # type: ignore[union-attr]
    for name in ("bash", "write_file", "edit_file"):
        assert agent.tool_info(name).read_only is False, name  # type: ignore[union-attr]
    assert agent.tool_info("nope") is None


def test_tool_read_only_survives_re_decoration_and_shows_in_repr() -> None:
    t = tooloop.tool(lambda x: x, name="t", read_only=True)
    assert t.read_only and "read_only=True" in repr(t)
    assert tooloop.tool(name="u")(t).read_only is True
    assert tooloop.Tool("v", "", {"type": "object"}, lambda: 1).read_only is False


def test_denied_flag_on_events_and_run_records(mock: Any) -> None:
    server = mock({"responses": [
        tool_reply(("toolu_1", "write_it", {"text": "a"}), ("toolu_2", "read_it", {})),
        text_reply("done"),
    ]})
    agent = agent_for(server, permission=lambda call: call.name == "read_it" or "no writing today")

    @agent.tool
    def write_it(text: str) -> str:
        """Write."""
        raise AssertionError("a denied tool must not run")

    @agent.tool
    def read_it() -> str:
        """Read; fails on purpose, with text that looks like a denial."""
        raise PermissionError("Permission denied: /etc/shadow")

    events = list(agent.stream("go"))
    results = {e.id: e for e in events if isinstance(e, tooloop.ToolResultEvent)}
    assert results["toolu_1"].denied is True and results["toolu_1"].is_error is True
    assert "no writing today" in str(results["toolu_1"].content)
    # An error whose text starts like a denial is still just an error.
    assert results["toolu_2"].denied is False and results["toolu_2"].is_error is True
    done = events[-1]
    assert isinstance(done, tooloop.DoneEvent)
    records = {r.id: r for r in done.result.tool_calls}
    assert records["toolu_1"].denied is True
    assert records["toolu_2"].denied is False


def test_run_and_conversation_cost_come_from_the_core(mock: Any) -> None:
    server = mock({"responses": [tool_reply(("toolu_1", "f", {})), text_reply("one"), text_reply("two")]})
    agent = agent_for(server, model="claude-sonnet-4-6")
    agent.add_tool(tooloop.tool(lambda: "ok", name="f"))
    assert agent.cost_usd is None  # nothing priced yet
    first = agent.run("a")
    assert first.cost_usd == pytest.approx(TOOL_TURN + TEXT_TURN)
    assert first.usage.cost_usd == first.cost_usd
    second = agent.run("b")
    assert second.cost_usd == pytest.approx(TEXT_TURN)
    assert agent.cost_usd == pytest.approx(TOOL_TURN + 2 * TEXT_TURN)


def test_unknown_model_run_has_no_cost() -> None:
    agent = tooloop.Agent(model="my-llama", provider=lambda r: {"content": "hi", "usage": {"input_tokens": 3}})
    assert agent.run("hi").cost_usd is None
    assert agent.cost_usd is None


def test_load_session_gives_entries_and_a_summary(mock: Any, tmp_path: Path) -> None:
    server = mock({"responses": [tool_reply(("toolu_1", "f", {})), text_reply("done")]})
    path = tmp_path / "s1.jsonl"
    agent = agent_for(server, model="claude-sonnet-4-6", session=path)
    agent.add_tool(tooloop.tool(lambda: "ok", name="f"))
    agent.run("fix the bug\nin main.py")
    del agent

    info = tooloop.load_session(path)
    assert isinstance(info, tooloop.SessionInfo)
    assert info.id == "s1" and Path(info.path) == path
    assert info.first_user_line == "fix the bug"
    assert info.turns == 2
    assert info.cost_usd == pytest.approx(TOOL_TURN + TEXT_TURN)
    assert [e["role"] for e in info.entries] == ["user", "assistant", "tool", "assistant"]
    assert info.started is not None and info.torn_tail is None and info.skipped == []
    assert pickle.loads(pickle.dumps(info)) == info


def test_load_session_reports_a_torn_tail_and_never_writes(mock: Any, tmp_path: Path) -> None:
    server = mock({"responses": [text_reply("hello")]})
    path = tmp_path / "s2.jsonl"
    agent_for(server, session=path).run("hi")
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"type": "entry", "entry": {"id"')  # a crash mid-write
    before = path.read_bytes()
    info = tooloop.load_session(path)
    assert info.torn_tail is not None
    assert info.turns == 1 and info.first_user_line == "hi"
    assert path.read_bytes() == before  # reading repairs nothing: the file is not opened for writing


def test_load_session_of_a_missing_file_raises_session_error(tmp_path: Path) -> None:
    with pytest.raises(tooloop.SessionError):
        tooloop.load_session(tmp_path / "nope.jsonl")
