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


OA_TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
OA_REQUEST: Dict[str, Any] = {
    "model": "gpt-4o-mini",
    "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris?"}],
    "tools": OA_TOOLS, "temperature": 0.2, "future_field": {"x": 1},
}


def completion(*messages: Dict[str, Any], finish: str = "stop") -> Dict[str, Any]:
    return {"id": "chatcmpl-T1", "object": "chat.completion", "created": 1741570283, "model": "gpt-4o-mini",
            "system_fingerprint": "fp_1",
            "choices": [{"index": i, "message": m, "logprobs": None, "finish_reason": finish}
                        for i, m in enumerate(messages)],
            "usage": {"prompt_tokens": 9, "completion_tokens": 7, "total_tokens": 16}}


def openai_both_ways(mock: Any, answer: Dict[str, Any], request: Dict[str, Any]) -> Any:
    """create() and stream() of `request` against `answer`: (created, chunks, streamed, request bodies)."""
    server = mock({"responses": [{"openai": answer}, {"openai": answer}]})
    client = tooloop.Client(provider="openai", base_url=server.base_url + "/v1", api_key="sk-mock")
    created = client.create(request)
    with client.stream({**request, "stream_options": {"include_usage": True}}) as stream:
        chunks = list(stream)
        streamed = stream.final_message()
    return created, chunks, streamed, [r["body"] for r in server.requests()]


def test_openai_create_sends_the_chat_completions_request_as_given(mock: Any) -> None:
    answer = completion({"role": "assistant", "content": "Sunny, 18 °C.", "refusal": None})
    created, chunks, streamed, bodies = openai_both_ways(mock, answer, OA_REQUEST)
    assert bodies[0] == OA_REQUEST, "no translation: the body goes out as given (no max_tokens added)"
    assert bodies[1] == {**OA_REQUEST, "stream": True, "stream_options": {"include_usage": True}}
    assert created == answer
    assert streamed == answer
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]) == "Sunny, 18 °C."


def test_openai_tool_calls_and_tool_results_round_trip_in_openai_shape(mock: Any) -> None:
    answer = scenario("openai_tool_calls")["responses"][0]["openai"]
    created, _, streamed, _ = openai_both_ways(mock, answer, OA_REQUEST)
    assert created == answer and streamed == answer, "content null and refusal null kept, calls rebuilt"
    calls = created["choices"][0]["message"]["tool_calls"]
    follow_up = {**OA_REQUEST, "messages": OA_REQUEST["messages"] + [
        created["choices"][0]["message"],
        *({"role": "tool", "tool_call_id": c["id"], "content": "18 °C"} for c in calls)]}
    final = scenario("openai_tool_calls")["responses"][1]["openai"]
    _, _, streamed2, bodies = openai_both_ways(mock, final, follow_up)
    assert bodies[0]["messages"] == follow_up["messages"]
    assert [m["role"] for m in bodies[0]["messages"]] == ["system", "user", "assistant", "tool", "tool"]
    assert streamed2 == final


def test_openai_n2_keeps_every_choice_streamed_and_not(mock: Any) -> None:
    answer = completion({"role": "assistant", "content": "First answer.", "refusal": None},
                        {"role": "assistant", "content": "Second, longer answer.", "refusal": None})
    created, chunks, streamed, bodies = openai_both_ways(mock, answer, {**OA_REQUEST, "n": 2})
    assert bodies[0]["n"] == 2
    assert created == answer
    assert streamed == answer
    assert {c["choices"][0]["index"] for c in chunks if c["choices"]} == {0, 1}


def test_openai_refusal_keeps_content_and_refusal_as_given(mock: Any) -> None:
    answer = completion({"role": "assistant", "content": "", "refusal": "I can't help with that request."})
    created, _, streamed, _ = openai_both_ways(mock, answer, OA_REQUEST)
    assert created == answer
    assert streamed == answer
    assert streamed["choices"][0]["message"]["content"] == ""


def test_openai_client_refuses_a_non_dict_request(mock: Any) -> None:
    server = mock({"responses": []})
    client = tooloop.Client(provider="openai", base_url=server.base_url + "/v1", api_key="sk-mock")
    with pytest.raises(tooloop.ConfigError):
        client.create([1, 2])  # type: ignore[arg-type]


def test_server_tools_pass_through_the_anthropic_client(mock: Any) -> None:
    server = mock("anthropic_text")
    tools = [{"type": "web_search_20250305", "name": "web_search", "max_uses": 2},
             {"name": "f", "description": "d", "input_schema": {"type": "object"}}]
    tooloop.Client(base_url=server.base_url, api_key="k").create({**REQUEST, "tools": tools})
    assert server.requests()[0]["body"]["tools"] == tools


BEDROCK_SECRET = "mockSecretKey/abcdefghijklmnopqrstuvwxyz01"


def test_bedrock_client_messages_in_message_out(mock: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDMOCKPY0001")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", BEDROCK_SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", "mockSessionTokenPy")
    answer = scenario("anthropic_text")["responses"][0]["anthropic"]
    reply = {"anthropic": answer, "bedrock": {"secret_access_key": BEDROCK_SECRET}}
    server = mock({"responses": [reply, reply]})
    client = tooloop.Client(provider="bedrock", region="us-west-2", base_url=server.base_url)
    request = {**REQUEST, "model": "us.anthropic.claude-sonnet-4-6-v1:0"}
    created = client.create(request)
    with client.stream(request) as stream:
        events = list(stream)
        streamed = stream.final_message()
    assert created == answer and streamed == answer
    assert [e["type"] for e in events][0] == "message_start" and events[-1]["type"] == "message_stop"
    reqs = server.requests()
    assert reqs[0]["path"] == "/model/us.anthropic.claude-sonnet-4-6-v1%3A0/invoke"
    assert reqs[1]["path"].endswith("/invoke-with-response-stream")
    assert reqs[0]["body"]["anthropic_version"] == "bedrock-2023-05-31" and "model" not in reqs[0]["body"]
    assert reqs[0]["headers"]["x-amz-security-token"] == "mockSessionTokenPy"
    assert "Client(provider='bedrock')" == repr(client)


def test_region_is_only_for_bedrock() -> None:
    with pytest.raises(tooloop.ConfigError, match="region"):
        tooloop.Client(provider="openai", region="us-west-2", api_key="k")


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


def test_a_value_that_is_not_json_is_named_by_where_it_sits_in_the_request() -> None:
    # The path is written out only for the error (a request converts without formatting one per key).
    client = tooloop.Client(base_url="http://127.0.0.1:9", api_key="k", max_retries=0)
    bad = dict(REQUEST, messages=[{"role": "user", "content": [{"type": "text", "text": "a"},
                                                                 {"type": "text", "text": {1.5, 2}}]}])
    with pytest.raises(TypeError, match=r'^the request\["messages"\]\[0\]\["content"\]\[1\]\["text"\]: set is not'):
        client.create(bad)
    with pytest.raises(TypeError, match=r'^the request\["messages"\]\[0\]\["content"\]\[1\]\["text"\]: set is not'):
        client.stream(bad)
