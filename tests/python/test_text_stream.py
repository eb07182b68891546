"""`text_stream` on the agent's stream and the raw client's: coalesced str chunks whose concatenation is the
answer's text, the outcome kept afterwards, a failed stream raising from the iteration."""

from __future__ import annotations

from typing import Any

import pytest

import tooloop
from _support import agent_for, scenario, text_reply


def test_agent_text_stream_gives_the_answer_text_and_keeps_the_result(mock: Any) -> None:
    server = mock("anthropic_tool_then_text")
    agent = agent_for(server)

    @agent.tool
    def get_weather(city: str) -> str:
        """Weather."""
        return "18 C"

    stream = agent.stream("Weather in Paris?")
    chunks = list(stream.text_stream)
    assert chunks and all(isinstance(c, str) and c for c in chunks)
    assert stream.result is not None
    # Both turns' text, in order (the tool call between them is skipped).
    assert "".join(chunks).endswith(stream.result.text)
    assert stream.result.turns == 2


def test_client_text_stream_equals_the_final_text_on_both_wires(mock: Any) -> None:
    server = mock("anthropic_text")
    client = tooloop.Client(api_key="k", base_url=server.base_url)
    with client.stream({"model": "m", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}) as s:
        text = "".join(s.text_stream)
        assert text == s.get_final_text() and text
    server = mock("openai_text")
    client = tooloop.Client(provider="openai", api_key="k", base_url=server.base_url + "/v1")
    with client.stream({"model": "m", "messages": [{"role": "user", "content": "hi"}]}) as s:
        text = "".join(s.text_stream)
        assert text == s.get_final_text() and text


def test_a_stream_that_breaks_raises_from_text_stream(mock: Any) -> None:
    server = mock("anthropic_stream_drop")
    agent = agent_for(server, max_retries=0)
    with pytest.raises(tooloop.StreamInterruptedError):
        for _ in agent.stream("hi").text_stream:
            pass


def test_client_text_stream_over_many_reads_equals_the_final_text(mock: Any) -> None:
    # Deltas arriving a few ms apart: read after read takes the text-only path (no event built per delta),
    # deltas in the API's own layout and escaped ones alike; an event taken first through the iteration is
    # not lost to it.
    text = 'He said "hi" — ✓ 日本 🎉\n\tthen a \\ backslash and\u0001 a control. ' * 3
    server = mock([{**text_reply(text), "delay_ms_between": 5}])
    client = tooloop.Client(api_key="k", base_url=server.base_url)
    with client.stream({"model": "m", "max_tokens": 500, "messages": [{"role": "user", "content": "hi"}]}) as s:
        first = next(iter(s))
        assert first["type"] == "message_start"
        chunks = list(s.text_stream)
        assert len(chunks) > 3, chunks
        assert "".join(chunks) == text == s.get_final_text()
