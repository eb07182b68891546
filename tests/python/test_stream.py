"""Agent.stream(): typed events as they happen, and leaving the loop early cancels the run and leaves the
conversation valid and the agent ready for the next run."""

from __future__ import annotations

import gc
import time
from typing import Any, List

import pytest

import tooloop
from _support import agent_for, assert_valid_view, scenario, text_reply, unmarked


def test_stream_yields_typed_events_in_order_and_done_last(mock: Any) -> None:
    server = mock("anthropic_tool_then_text")
    agent = agent_for(server)
    agent.add_tool(tooloop.tool(lambda city: f"sunny in {city}", name="get_weather", description="w"))
    events = list(agent.stream("weather?"))
    kinds = [e.type for e in events]
    assert kinds[-1] == "done" and kinds.count("done") == 1
    assert kinds.count("turn") == 2
    assert kinds.index("tool_use") < kinds.index("tool_result") < len(kinds) - 1
    assert set(kinds) <= {"text", "thinking", "tool_use", "tool_result", "turn", "usage", "done"}
    assert "usage" in kinds
    tool_use = next(e for e in events if isinstance(e, tooloop.ToolUseEvent))
    assert (tool_use.name, tool_use.input) == ("get_weather", {"city": "Paris"})
    tool_result = next(e for e in events if isinstance(e, tooloop.ToolResultEvent))
    assert (tool_result.content, tool_result.is_error, tool_result.id) == ("sunny in Paris", False, tool_use.id)
    turns = [e for e in events if isinstance(e, tooloop.TurnEvent)]
    assert [(t.turn, t.stop_reason) for t in turns] == [(1, "tool_use"), (2, "end_turn")]
    assert turns[0].usage.input_tokens > 0
    done = events[-1]
    assert isinstance(done, tooloop.DoneEvent)
    # Text deltas of the last turn add up to the result's text.
    last_turn_start = kinds.index("tool_result")
    text = "".join(e.text for e in events[last_turn_start:] if isinstance(e, tooloop.TextEvent))
    assert text == done.result.text
    assert len([e for e in events[last_turn_start:] if isinstance(e, tooloop.TextEvent)]) > 1  # really streamed
    usage = [e for e in events if isinstance(e, tooloop.UsageEvent)][-1]
    assert usage.run.output_tokens == done.result.usage.output_tokens


def test_stream_result_is_kept_on_the_iterator(mock: Any) -> None:
    agent = agent_for(mock("anthropic_text"))
    stream = agent.stream("hi")
    assert stream.result is None
    for _ in stream:
        pass
    assert stream.result is not None and stream.result.text.startswith("Hello!")
    with pytest.raises(StopIteration):
        next(stream)


def test_breaking_out_of_the_loop_cancels_the_run(mock: Any) -> None:
    server = mock("anthropic_stream_stall")  # stalls 30 s after the first delta
    agent = agent_for(server)
    started = time.monotonic()
    for event in agent.stream("hi"):
        if event.type == "text":
            break
    elapsed = time.monotonic() - started
    print(f"break → run stopped after {elapsed:.2f} s")
    assert elapsed < 3
    # The run is over (not merely abandoned): the agent takes the next run at once.
    assert agent.history[-1]["status"] == "error"
    assert agent.history[-1]["content"] == [{"type": "text", "text": "This tex"}]
    assert_valid_view(agent.messages)
    server.load({"responses": [text_reply("second answer")]})
    assert agent.run("again").text == "second answer"
    sent = server.requests()[0]["body"]["messages"]
    assert_valid_view(sent)
    assert unmarked(sent[-1]["content"][-1]) == {"type": "text", "text": "again"}


def test_close_and_with_block_cancel_the_run(mock: Any) -> None:
    server = mock("anthropic_stream_stall")
    agent = agent_for(server)
    with agent.stream("hi") as events:
        first = next(events)
        assert first.type in ("text", "usage")
    server.load(scenario("anthropic_stream_stall"))
    stream = agent.stream("hi again")
    next(stream)
    started = time.monotonic()
    stream.close()
    assert time.monotonic() - started < 1.5
    with pytest.raises(StopIteration):
        next(stream)
    assert_valid_view(agent.messages)


def test_a_dropped_iterator_cancels_its_run(mock: Any) -> None:
    server = mock("anthropic_stream_stall")
    agent = agent_for(server)
    stream = agent.stream("hi")
    next(stream)
    del stream
    gc.collect()
    server.load({"responses": [text_reply("fine")]})
    assert agent.run("next").text == "fine"


def test_stream_raises_the_run_error_after_the_events_so_far(mock: Any) -> None:
    server = mock("anthropic_stream_drop")
    seen: List[str] = []
    with pytest.raises(tooloop.StreamInterruptedError):
        for event in agent_for(server).stream("hi"):
            seen.append(event.type)
    assert "text" in seen and "done" not in seen


def test_cancel_from_the_iterator_ends_the_stream_with_cancelled(mock: Any) -> None:
    server = mock("anthropic_stream_stall")
    stream = agent_for(server).stream("hi")
    next(stream)
    stream.cancel()
    with pytest.raises(tooloop.Cancelled):
        for _ in stream:
            pass
