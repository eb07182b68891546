"""Approval as a pause (issue 39 item 1, issue 40 item 3): ``agent.stream(..., pause_for_approval=True)`` and
``agent.astream(...)`` pause the run at each tool call that needs a decision; the consumer answers the
``ApprovalRequestEvent`` itself (``stream.approve(id, decision)`` / ``await stream.approve(...)``) and the run
goes on. Parallel calls pause together; the ``permission`` callable is not asked; cancelling while paused
answers the waiting calls as interrupted. Without the option, ``permission=`` works as before."""

from __future__ import annotations

import asyncio
from typing import Any, List

import pytest

import tooloop
from _support import agent_for, assert_valid_view, text_reply, tool_reply, tool_results

TWO_CALLS = {"responses": [tool_reply(("c1", "shout", {"text": "a"}), ("c2", "shout", {"text": "b"})),
                           text_reply("done")]}


def shouting_agent(server: Any, ran: List[str], **kwargs: Any) -> Any:
    def shout(text: str) -> str:
        """Shout."""
        ran.append(text)
        return text.upper()

    return agent_for(server, tools=[tooloop.tool(shout, parallel_safe=True)], **kwargs)


def never_asked(call: tooloop.ToolCall) -> bool:
    raise AssertionError(f"the permission callable is not asked in a pausing run: {call}")


def test_a_stream_pauses_at_parallel_calls_and_its_consumer_approves_one_and_denies_the_other(mock: Any) -> None:
    server = mock(TWO_CALLS)
    ran: List[str] = []
    agent = shouting_agent(server, ran, permission=never_asked)
    stream = agent.stream("go", pause_for_approval=True)
    asked: List[str] = []
    events: List[Any] = []
    for event in stream:
        events.append(event)
        if isinstance(event, tooloop.ApprovalRequestEvent):
            asked.append(event.id)
            if event.id == "c1":
                # Both calls of the batch wait together, and nothing has run yet.
                assert [c.id for c in stream.pending_approvals()] == ["c1", "c2"]
                assert ran == []
                with pytest.raises(ValueError):
                    stream.approve("c9")
                stream.approve("c1")
            else:
                assert [c.id for c in stream.pending_approvals()] == ["c2"]
                stream.approve("c2", "not b")
    assert asked == ["c1", "c2"] and ran == ["a"]
    assert isinstance(events[-1], tooloop.DoneEvent) and stream.result is not None
    results = [(e.id, e.denied) for e in events if isinstance(e, tooloop.ToolResultEvent)]
    assert results == [("c1", False), ("c2", True)]
    answers = tool_results(server.requests()[1])
    assert answers == {"c1": ("A", False), "c2": ("Permission denied: not b", True)}
    assert_valid_view(agent.messages)


def test_a_paused_stream_refuses_to_go_on_unanswered_and_cancelling_it_answers_the_calls(mock: Any) -> None:
    server = mock(TWO_CALLS)
    ran: List[str] = []
    agent = shouting_agent(server, ran)
    stream = agent.stream("go", pause_for_approval=True)
    asked = []
    while len(asked) < 2:
        event = next(stream)
        if isinstance(event, tooloop.ApprovalRequestEvent):
            asked.append(event.id)
    with pytest.raises(tooloop.ConfigError, match="c1, c2"):
        next(stream)
    stream.close()
    assert ran == []
    assert_valid_view(agent.messages)
    last = agent.messages[-1]["content"]
    assert [b["tool_use_id"] for b in last] == ["c1", "c2"]
    assert all(b["is_error"] and "interrupted" in str(b["content"]) for b in last)
    # The agent is free, the conversation goes on.
    server.load({"responses": [text_reply("fine")]})
    assert agent.run("and now?").text == "fine"


def test_an_astream_consumer_answers_its_approval_events_with_await_approve(mock: Any) -> None:
    server = mock(TWO_CALLS)
    ran: List[str] = []
    agent = shouting_agent(server, ran, permission=never_asked)

    async def go() -> List[Any]:
        events = []
        async with agent.astream("go", pause_for_approval=True) as stream:
            async for event in stream:
                events.append(event)
                if isinstance(event, tooloop.ApprovalRequestEvent):
                    await stream.approve(event.id, True if event.id == "c1" else tooloop.ALLOW_READ_ONLY)
        return events

    events = asyncio.run(go())
    assert [e.id for e in events if isinstance(e, tooloop.ApprovalRequestEvent)] == ["c1", "c2"]
    assert isinstance(events[-1], tooloop.DoneEvent)
    answers = tool_results(server.requests()[1])
    # shout is not read-only: allowed only read-only, it is refused with a reason the model reads.
    assert answers["c1"] == ("A", False) and answers["c2"][1] is True
    assert ran == ["a"]
    assert_valid_view(agent.messages)


def test_without_the_option_the_permission_callable_answers_as_before(mock: Any) -> None:
    server = mock(TWO_CALLS)
    ran: List[str] = []
    asked: List[str] = []

    def permission(call: tooloop.ToolCall) -> Any:
        asked.append(call.id)
        return True if call.id == "c1" else "no"

    agent = shouting_agent(server, ran, permission=permission)
    assert agent.run("go").text == "done"
    assert asked == ["c1", "c2"] and ran == ["a"]
    server.load(TWO_CALLS)
    events = list(agent.stream("go"))
    assert asked == ["c1", "c2", "c1", "c2"] and ran == ["a", "a"]
    assert isinstance(events[-1], tooloop.DoneEvent)
    with pytest.raises(tooloop.ConfigError):
        agent.stream("x").approve("c1")


SUBAGENT = {"responses": [
    tool_reply(("p1", "task", {"description": "shout", "prompt": "shout a", "agent_type": "shouter"})),
    tool_reply(("k1", "shout", {"text": "a"})),
    text_reply("shouted A"),
    text_reply("done"),
]}


def test_a_subagents_call_pauses_the_stream_as_its_event_and_the_parent_stream_approves_it(mock: Any) -> None:
    server = mock(SUBAGENT)
    ran: List[str] = []
    agent = shouting_agent(server, ran, subagents={"shouter": tooloop.SubAgent("Shouts.", tools=["shout"])})
    stream = agent.stream("go", pause_for_approval=True)
    asked: List[Any] = []
    for event in stream:
        if isinstance(event, tooloop.ApprovalRequestEvent):
            asked.append((None, event.id))
            stream.approve(event.id)
        elif isinstance(event, tooloop.SubagentEvent) and isinstance(event.event, tooloop.ApprovalRequestEvent):
            # The child's question, marked as the child's, waits for the parent stream's answer.
            asked.append((event.parent_id, event.event.id))
            assert [c.id for c in stream.pending_approvals()] == ["k1"] and ran == []
            stream.approve(event.event.id)
    assert asked == [(None, "p1"), ("p1", "k1")] and ran == ["a"]
    assert stream.result is not None and stream.result.text == "done"
    assert tool_results(server.requests()[2]) == {"k1": ("A", False)}
    assert_valid_view(agent.messages)
