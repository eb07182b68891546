"""tooloop.Client, the wire layer alone: create() returns the provider's own JSON, stream() yields every
event as received and final_message() equals what create() returns for the same content."""

from __future__ import annotations

import time
from typing import Any, Dict

import pytest

import tooloop
from _support import scenario

REQUEST: Dict[str, Any] = {"model": "claude-sonnet-4-6", "max_tokens": 256,
                           "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize("name", ["anthropic_text", "anthropic_parallel_tools", "anthropic_thinking_tool",
                                  "anthropic_redacted_thinking"])
def test_stream_final_message_equals_create(mock: Any, name: str) -> None:
    server = mock(name)
    client = tooloop.Client(base_url=server.base_url, api_key="sk-ant-mock")
    created = client.create(REQUEST)
    create_body = server.requests()[0]["body"]
    server.load(scenario(name))
    with client.stream(REQUEST) as stream:
        events = list(stream)
        streamed = stream.final_message()
    assert streamed == created
    assert created == scenario(name)["responses"][0]["anthropic"]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert "ping" in kinds  # every event as received
    assert create_body.get("stream") is None and server.requests()[0]["body"]["stream"] is True
    assert create_body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


def test_stream_deltas_add_up_to_the_text(mock: Any) -> None:
    server = mock("anthropic_text")
    stream = tooloop.Client(base_url=server.base_url, api_key="k").stream(REQUEST)
    text = "".join(e["delta"]["text"] for e in stream if e["type"] == "content_block_delta")
    assert text == stream.get_final_text()
    assert server.requests()[0]["body"]["stream"] is True
    assert server.requests()[0]["headers"]["anthropic-version"] == "2023-06-01"


def test_final_message_without_iterating_reads_the_rest(mock: Any) -> None:
    server = mock("anthropic_text")
    with tooloop.Client(base_url=server.base_url, api_key="k").stream(REQUEST) as stream:
        message = stream.final_message()
    assert message["stop_reason"] == "end_turn"


def test_extra_request_fields_pass_through(mock: Any) -> None:
    server = mock("anthropic_text")
    request = {**REQUEST, "metadata": {"user_id": "u1"}, "future_field": [1, 2], "temperature": 0.5,
               "system": [{"type": "text", "text": "S", "cache_control": {"type": "ephemeral"}}]}
    tooloop.Client(base_url=server.base_url, api_key="k").create(request)
    body = server.requests()[0]["body"]
    assert body["metadata"] == {"user_id": "u1"} and body["future_field"] == [1, 2]
    assert body["temperature"] == 0.5 and body["system"][0]["cache_control"] == {"type": "ephemeral"}


def test_client_headers_are_sent_with_every_request(mock: Any) -> None:
    server = mock({"responses": [scenario("anthropic_text")["responses"][0]] * 2})
    client = tooloop.Client(base_url=server.base_url, api_key="k", headers={"anthropic-beta": "b1,b2"})
    client.create(REQUEST)
    with client.stream(REQUEST) as s:
        s.final_message()
    assert [r["headers"]["anthropic-beta"] for r in server.requests()] == ["b1,b2", "b1,b2"]


def test_openai_client_returns_chat_completion_shapes(mock: Any) -> None:
    server = mock("openai_tool_calls")
    client = tooloop.Client(provider="openai", base_url=server.base_url + "/v1", api_key="sk-mock")
    created = client.create({**REQUEST, "model": "gpt-4o-mini"})
    assert created["object"] == "chat.completion"
    assert created["choices"][0]["finish_reason"] == "tool_calls"
    server.load(scenario("openai_tool_calls"))
    with client.stream({**REQUEST, "model": "gpt-4o-mini"}) as stream:
        chunks = list(stream)
        final = stream.final_message()
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert final["choices"][0]["message"]["tool_calls"] == created["choices"][0]["message"]["tool_calls"]
    assert server.requests()[0]["path"] == "/v1/chat/completions"


def test_leaving_the_with_block_early_cancels_the_request(mock: Any) -> None:
    server = mock("anthropic_stream_stall")
    client = tooloop.Client(base_url=server.base_url, api_key="k")
    started = time.monotonic()
    with client.stream(REQUEST) as stream:
        for event in stream:
            if event["type"] == "content_block_delta":
                break
    assert time.monotonic() - started < 2
    stream.close()  # idempotent


def test_cancelled_stream_raises_cancelled(mock: Any) -> None:
    server = mock("anthropic_stream_stall")
    stream = tooloop.Client(base_url=server.base_url, api_key="k").stream(REQUEST)
    next(stream)
    stream.cancel()
    with pytest.raises(tooloop.Cancelled) as info:
        stream.final_message()
    assert info.value.partial is not None


def test_concurrent_calls_on_one_client(mock: Any) -> None:
    import threading

    server = mock([{**scenario("anthropic_text")["responses"][0], "delay_ms": 600} for _ in range(2)])
    client = tooloop.Client(base_url=server.base_url, api_key="k")
    out = []
    threads = [threading.Thread(target=lambda: out.append(client.create(REQUEST))) for _ in range(2)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    elapsed = time.monotonic() - started
    print(f"two 0.6 s requests on one client took {elapsed:.2f} s")
    assert len(out) == 2 and elapsed < 1.1
