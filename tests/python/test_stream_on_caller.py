"""``Agent.stream`` runs the agent loop on the thread that iterates it, a step per ``next()`` (no worker
thread, no thread hop per batch of events), where the provider hands out a stream to pull (Anthropic): Python
tools and hooks see that thread's thread-locals, context variables and thread-bound objects, as in
``Agent.run``. ``cancel()`` from another thread and Ctrl+C still end a stalled stream within 200 ms with a
valid conversation. A permission callable is asked on that thread too, once the events before its question
(the call's ``tool_use`` among them) have been handed out: the CLI draws the call before it asks."""

from __future__ import annotations

import contextvars
import json
import os
import signal
import threading
import time
from typing import Any, Dict, List, Optional

import pytest

import tooloop
from _support import assert_valid_view, agent_for, caller_bound_tool, seconds_to_end, text_reply, tool_reply

REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("REQUEST_ID", default="unset")


def test_agent_stream_runs_tools_and_hooks_on_the_iterating_thread(mock: Any) -> None:
    server = mock("anthropic_text")
    server.load({"responses": [tool_reply(("toolu_1", "lookup", {"key": "a"}), text="Looking."),
                               text_reply("found it")]})
    seen: Dict[str, int] = {}
    lookup, hooks = caller_bound_tool(seen, REQUEST_ID)
    agent = agent_for(server, tools=[lookup], hooks=hooks)
    REQUEST_ID.set("r-42")
    kinds: List[str] = []
    for event in agent.stream("look a up"):
        kinds.append(event.type)
    me = threading.get_ident()
    assert seen == {"tool": me, "before_tool": me, "after_tool": me}
    results = [r for r in agent.history if r["role"] == "tool"] or agent.messages[2]["content"]
    assert "from the caller's database (request r-42)" in str(results)
    # The events keep their order: each turn's text before its end, the call between the turns.
    assert kinds[-1] == "done", kinds
    assert kinds.index("text") < kinds.index("tool_use") < kinds.index("tool_result"), kinds
    assert kinds[kinds.index("tool_result"):].count("text") == 1, kinds
    assert_valid_view(agent.messages)


def test_text_of_a_stalled_turn_arrives_before_the_turn_ends_and_cancel_from_another_thread_ends_it(
        mock: Any) -> None:
    server = mock("anthropic_stream_stall")  # stalls 30 s after the first delta
    agent = agent_for(server)
    stream = agent.stream("hi")
    started = time.monotonic()
    for event in stream:
        if event.type == "text":
            break
    assert time.monotonic() - started < 5, "the text came before the 30 s stall ended"
    took, _ = seconds_to_end(stream, agent.cancel, 0.11, tooloop.Cancelled)
    print(f"cancel() from another thread during a stalled stream → ended after {took:.3f} s")
    assert took < 0.2
    assert agent.history[-1]["status"] == "error"
    assert agent.history[-1]["content"] == [{"type": "text", "text": "This tex"}]
    assert_valid_view(agent.messages)
    server.load({"responses": [text_reply("second answer")]})
    assert [e.type for e in agent.stream("again")][-1] == "done"


def test_sigint_during_a_stalled_stream_raises_keyboard_interrupt_within_200_ms(mock: Any) -> None:
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are delivered to the main thread only")
    server = mock("anthropic_stream_stall")
    agent = agent_for(server)
    stream = agent.stream("hi")
    for event in stream:
        if event.type == "text":
            break
    took, _ = seconds_to_end(stream, lambda: os.kill(os.getpid(), signal.SIGINT), 0.13, KeyboardInterrupt)
    print(f"SIGINT during a stalled Agent.stream → KeyboardInterrupt after {took:.3f} s")
    assert took < 0.2
    assert agent.history[-1]["status"] == "error"
    assert_valid_view(agent.messages)
    server.load({"responses": [text_reply("after the interrupt")]})
    assert agent.run("again").text == "after the interrupt"


def test_a_permission_callable_is_asked_on_the_iterating_thread_after_it_has_seen_the_call(
        mock: Any) -> None:
    # The CLI's shape: the permission callable waits until the iterating thread has drawn the call's
    # tool_use event. It is asked on the iterating thread, once the step's events were handed out, so it never
    # waits for itself (until the one engine, it kept the stream on a worker thread).
    server = mock("anthropic_text")
    server.load({"responses": [tool_reply(("toolu_1", "lookup", {"key": "a"})), text_reply("done")]})
    drawn = threading.Event()
    where: Dict[str, int] = {}

    def lookup(key: str) -> str:
        """Look a key up."""
        where["tool"] = threading.get_ident()
        return "value"

    def permission(call: Any) -> bool:
        assert drawn.wait(5), "the iterating thread never saw the call"
        return True

    agent = agent_for(server, tools=[lookup], permission=permission)
    for event in agent.stream("look a up"):
        if event.type == "tool_use":
            drawn.set()
    assert agent.messages[-1]["content"][0]["text"] == "done"
    assert where["tool"] == threading.get_ident()


def test_an_error_in_beginning_the_run_is_raised_from_the_iteration(mock: Any) -> None:
    # As from a worker's run: creating the stream never raises, its first next() does.
    agent = agent_for(mock("anthropic_text"))
    stream = agent.resume_stream()
    with pytest.raises(tooloop.ConfigError, match="nothing to resume"):
        next(stream)
    assert [e.type for e in agent.stream("hi")][-1] == "done"


def _chat(text: Optional[str] = None, call: Optional[Dict[str, Any]] = None, **extra: Any) -> Dict[str, Any]:
    """A Chat Completions answer for the mock: a text, or one tool call."""
    message: Dict[str, Any] = {"role": "assistant", "content": text}
    if call is not None:
        message["tool_calls"] = [{"id": "call_1", "type": "function",
                                  "function": {"name": call["name"], "arguments": json.dumps(call["input"])}}]
    completion = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
                  "choices": [{"index": 0, "message": message,
                               "finish_reason": "tool_calls" if call is not None else "stop"}],
                  "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}
    return {"openai": completion, "delta_chars": 4, **extra}


def test_an_openai_agent_stream_runs_on_the_iterating_thread_too(mock: Any) -> None:
    server = mock([_chat("Looking.", call={"name": "lookup", "input": {"key": "a"}}), _chat("found it")])
    seen: Dict[str, int] = {}

    def lookup(key: str) -> str:
        """Look a key up."""
        seen["tool"] = threading.get_ident()
        return "the value"

    agent = agent_for(server, provider="openai", model="gpt-4o-mini", tools=[lookup])
    stream = agent.stream("look a up")
    assert type(stream._run).__name__ == "_Driven", "stepped on this thread, not a worker's run"
    kinds = [event.type for event in stream]
    assert seen == {"tool": threading.get_ident()}
    assert kinds[-1] == "done" and kinds.index("text") < kinds.index("tool_use") < kinds.index("tool_result")
    assert agent.messages[-1]["content"][0]["text"] == "found it"
    assert_valid_view(agent.messages)


@pytest.mark.parametrize("how", ["cancel", "sigint"])
def test_a_stalled_openai_agent_stream_ends_within_200_ms_on_cancel_and_on_sigint(mock: Any, how: str) -> None:
    if how == "sigint" and threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are delivered to the main thread only")
    stall = {"type": "stall", "after_events": 3, "ms": 30000}  # after the first pieces of text
    server = mock([_chat("This text stalls half way.", fault=stall)])
    agent = agent_for(server, provider="openai", model="gpt-4o-mini")
    stream = agent.stream("hi")
    started = time.monotonic()
    for event in stream:
        if event.type == "text":
            break
    assert time.monotonic() - started < 5, "the text came before the 30 s stall ended"
    if how == "cancel":
        took, _ = seconds_to_end(stream, agent.cancel, 0.12, tooloop.Cancelled)
    else:
        took, _ = seconds_to_end(stream, lambda: os.kill(os.getpid(), signal.SIGINT), 0.12, KeyboardInterrupt)
    print(f"{how} during a stalled OpenAI Agent.stream → ended after {took:.3f} s")
    assert took < 0.2
    assert agent.history[-1]["status"] == "error"
    assert_valid_view(agent.messages)
    server.load({"responses": [_chat("after the stall")]})
    assert agent.run("again").text == "after the stall"


def test_a_subagents_events_arrive_as_it_works_and_its_tools_run_on_the_iterating_thread() -> None:
    # One engine: the child's run is stepped within the parent's steps, on the thread that iterates.
    def use(i: str, name: str, inp: Dict[str, Any]) -> Dict[str, Any]:
        return {"content": [{"type": "tool_use", "id": i, "name": name, "input": inp}], "stop_reason": "tool_use",
                "usage": {"input_tokens": 10, "output_tokens": 5}}

    def say(t: str) -> Dict[str, Any]:
        return {"content": [{"type": "text", "text": t}], "stop_reason": "end_turn",
                "usage": {"input_tokens": 10, "output_tokens": 5}}

    replies = [use("p1", "task", {"description": "d", "prompt": "look", "agent_type": "explore"}),
               use("k1", "look", {}), say("found it"), say("parent done")]
    asked: List[Dict[str, Any]] = []

    def brain(request: Dict[str, Any]) -> Dict[str, Any]:
        asked.append(request)
        return replies.pop(0)

    where: Dict[str, int] = {}

    def look() -> str:
        where["tool"] = threading.get_ident()
        return "ok"

    agent = tooloop.Agent(provider=brain, tools=[tooloop.tool(look, name="look", description="l")],
                          subagents={"explore": tooloop.SubAgent("explores", tools=["look"])})
    seen = [(event.type, len(asked)) for event in agent.stream("go")]
    assert seen[-1][0] == "done"
    assert where["tool"] == threading.get_ident()
    # The child's first event came while it had made one request of its two: not in one piece at its end.
    assert next(n for kind, n in seen if kind == "subagent") == 2, seen
    assert_valid_view(agent.messages)


def test_a_subagents_call_is_handed_out_before_the_permission_callable_is_asked_about_it() -> None:
    # The CLI draws a child's call, then asks: the child's pause ends the parent's step, its events are handed
    # out, and the callable answers at the next step, on the iterating thread.
    def use(i: str, name: str, inp: Dict[str, Any]) -> Dict[str, Any]:
        return {"content": [{"type": "tool_use", "id": i, "name": name, "input": inp}], "stop_reason": "tool_use",
                "usage": {"input_tokens": 10, "output_tokens": 5}}

    replies = [use("p1", "task", {"description": "d", "prompt": "look", "agent_type": "explore"}),
               use("k1", "look", {}),
               {"content": [{"type": "text", "text": "found"}], "stop_reason": "end_turn"},
               {"content": [{"type": "text", "text": "parent done"}], "stop_reason": "end_turn"}]
    drawn: List[str] = []
    asked: List[str] = []

    def permission(call: Any) -> bool:
        assert call.id in drawn, f"asked about {call.id} before its tool_use was handed out"
        asked.append(call.id)
        return True

    agent = tooloop.Agent(provider=lambda request: replies.pop(0),
                          tools=[tooloop.tool(lambda: "ok", name="look", description="l")],
                          subagents={"explore": tooloop.SubAgent("explores", tools=["look"])}, permission=permission)
    for event in agent.stream("go"):
        inner = event.event if event.type == "subagent" else event
        if inner.type == "tool_use":
            drawn.append(inner.id)
    assert asked == ["p1", "k1"]
    assert agent.messages[-1]["content"][0]["text"] == "parent done"
