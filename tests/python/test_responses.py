"""OpenAI's Responses API (`provider="openai-responses"`) through the Python door: the agent (JSON and stream,
a parallel tool round trip, reasoning items sent back with their encrypted_content, output_schema as
`text.format`, a 429 retried, a context overflow compacted, cancellation mid-stream) and the raw
`tooloop.Client` in the API's own shape — checked against the official `openai` SDK's Responses client on the
same mock scenarios: the same request bodies, the same events, the same final response."""

from __future__ import annotations

import copy
import json
import threading
import time
from typing import Any, Dict, List

import pytest

import tooloop
from _support import MockServer, agent_for, scenario

MODEL = "gpt-5"


def responses_agent(server: MockServer, **kwargs: Any) -> tooloop.Agent:
    kwargs.setdefault("api_key", "sk-mock")
    return agent_for(server, provider="openai-responses", model=MODEL, **kwargs)


def weather_tool(seen: List[str]) -> Any:
    @tooloop.tool
    def get_weather(city: str, units: str = "celsius") -> str:
        """Weather for a city."""
        seen.append(city)
        return f"mild in {city}"

    return get_weather


@pytest.mark.parametrize("stream", [False, True])
def test_agent_runs_parallel_function_calls_and_answers_them_by_call_id(mock: Any, stream: bool) -> None:
    server = mock("responses_tool_calls")
    seen: List[str] = []
    agent = responses_agent(server, tools=[weather_tool(seen)], stream=stream, system="Be brief.")
    result = agent.run("Paris and Tokyo?")
    assert result.text == "Paris: 18 °C, partly cloudy. Tokyo: 24 °C, clear."
    assert sorted(seen) == ["Paris", "Tokyo"]
    first, second = (r["body"] for r in server.requests())
    assert server.requests()[0]["path"] == "/v1/responses"
    assert first["instructions"] == "Be brief." and first["store"] is False
    assert first.get("stream", False) is stream
    assert first["tools"][0]["type"] == "function" and first["tools"][0]["name"] == "get_weather"
    outputs = [i for i in second["input"] if i.get("type") == "function_call_output"]
    assert [(o["call_id"], o["output"]) for o in outputs] == [
        ("call_paris", "mild in Paris"), ("call_tokyo", "mild in Tokyo")]
    calls = [i for i in second["input"] if i.get("type") == "function_call"]
    assert [c["call_id"] for c in calls] == ["call_paris", "call_tokyo"]
    # Usage: input_tokens counts the cached ones; the neutral usage splits them.
    assert result.usage.cache_read_input_tokens == 64
    # gpt-5 at $1.25 / $10 per million, cache reads at a tenth of the input price.
    expected = (82 * 1.25 + 51 * 10 + (171 - 64) * 1.25 + 64 * 0.125 + 19 * 10) / 1e6
    assert result.cost_usd == pytest.approx(expected)


@pytest.mark.parametrize("stream", [False, True])
def test_reasoning_summary_streams_as_thinking_and_the_encrypted_item_goes_back(mock: Any, stream: bool) -> None:
    server = mock("responses_reasoning_tool")
    seen: List[str] = []
    agent = responses_agent(server, tools=[weather_tool(seen)], stream=stream, thinking=2048)
    events = list(agent.stream("Weather in Paris?"))
    thinking = "".join(e.thinking for e in events if e.type == "thinking")
    assert thinking == "Checking the weather first.\n\nParis is the city asked about."
    assert events[-1].result.text == "It is 18 °C in Paris."
    first, second = (r["body"] for r in server.requests())
    assert first["reasoning"] == {"effort": "low", "summary": "auto"}
    assert first["include"] == ["reasoning.encrypted_content"]
    reasoning = [i for i in second["input"] if i.get("type") == "reasoning"]
    assert reasoning == [{"type": "reasoning", "id": "rs_1", "summary": [
        {"type": "summary_text", "text": "Checking the weather first."},
        {"type": "summary_text", "text": "Paris is the city asked about."}], "encrypted_content": "gAAAAB-enc-one=="}]
    kinds = [i.get("type", i.get("role")) for i in second["input"]]
    assert kinds == ["user", "reasoning", "function_call", "function_call_output"]


def test_output_schema_goes_out_as_text_format(mock: Any) -> None:
    answer = copy.deepcopy(scenario("responses_text")["responses"][0])
    answer["responses"]["output"][0]["content"][0]["text"] = '{"x": 1, "y": 2}'
    server = mock({"responses": [answer]})
    schema = {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
              "required": ["x", "y"], "additionalProperties": False}
    agent = responses_agent(server, output_schema=schema, output_mode="native")
    result = agent.run("A point?")
    assert result.output == {"x": 1, "y": 2}
    body = server.requests()[0]["body"]
    assert body["text"]["format"]["type"] == "json_schema"
    assert body["text"]["format"]["name"] == "output"
    assert body["text"]["format"]["schema"]["properties"] == schema["properties"]
    assert "output_config" not in body and "response_format" not in body


def test_429_is_retried_with_retry_after(mock: Any) -> None:
    server = mock({"responses": [
        {"status": 429, "headers": {"retry-after": "0"}, "json": {"error": {
            "message": "Rate limit reached", "type": "requests", "param": None, "code": "rate_limit_exceeded"}}},
        scenario("responses_text")["responses"][0]]})
    assert responses_agent(server).run("hi").text == "Bonjour — ça va? 👋 The answer is 42."
    assert len(server.requests()) == 2


def call_reply(k: int) -> Dict[str, Any]:
    return {"responses": {"id": f"resp_d{k}", "object": "response", "status": "completed", "model": MODEL,
                          "output": [{"type": "function_call", "id": f"fc_{k}", "call_id": f"call_{k}",
                                      "name": "dump", "arguments": json.dumps({"part": k})}],
                          "usage": {"input_tokens": 10, "output_tokens": 5}}}


def test_context_overflow_is_compacted_and_the_request_retried(mock: Any) -> None:
    summary = copy.deepcopy(scenario("responses_text")["responses"][0])
    summary["responses"]["output"][0]["content"][0]["text"] = "SUMMARY: six parts dumped."
    overflow = {"status": 400, "headers": {"x-should-retry": "false"}, "json": {"error": {
        "message": "Your input exceeds the context window of this model. Please adjust your input and try again.",
        "type": "invalid_request_error", "param": "input", "code": "context_length_exceeded"}}}
    server = mock({
        "routes": [{"match": {"path": "/v1/responses", "body_contains": "working memory"}, "response": summary}],
        "responses": [call_reply(k) for k in range(6)] + [overflow, scenario("responses_text")["responses"][0]],
    })

    @tooloop.tool
    def dump(part: int) -> str:
        """Dump one part."""
        return f"part {part}: " + "x" * 3000

    # A window the session stays under (no threshold compaction), so only the refusal can start one.
    agent = responses_agent(server, tools=[dump], context_window=8000, max_turns=None)
    events = list(agent.stream("Dump six parts."))
    assert events[-1].result.text == "Bonjour — ça va? 👋 The answer is 42."
    compactions = [e for e in events if e.type == "compaction"]
    assert [c.reason for c in compactions] == ["overflow"], "the refusal was read as an overflow and compacted"
    queued = [r for r in server.requests() if r["index"] is not None]
    refused, again = queued[6], queued[7]
    assert len(again["raw_body"]) < len(refused["raw_body"]) / 2, "the turn went out again, compacted"


def test_cancel_mid_stream_raises_cancelled_fast(mock: Any) -> None:
    answer = copy.deepcopy(scenario("responses_text")["responses"][0])
    answer["fault"] = {"type": "stall", "after_events": 5, "ms": 30000}
    server = mock({"responses": [answer]})
    stream = responses_agent(server).stream("hi")
    first_text = next(e for e in stream if e.type == "text")
    assert first_text.text == "Bonjour "
    started = time.monotonic()
    stream.cancel()
    with pytest.raises(tooloop.Cancelled):
        for _ in stream:
            pass
    assert time.monotonic() - started < 2


# ------------------------------------------------------------------------------------- the raw client

REQUEST: Dict[str, Any] = {
    "model": MODEL,
    "instructions": "Be brief.",
    "input": [{"role": "user", "content": "Weather in Paris and Tokyo?"}],
    "tools": [{"type": "function", "name": "get_weather", "description": "Weather for a city",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}, "strict": False}],
    "store": False,
    "include": ["reasoning.encrypted_content"],
    "max_output_tokens": 400,
}


def raw_client(server: MockServer) -> tooloop.Client:
    return tooloop.Client(provider="openai-responses", base_url=server.base_url + "/v1", api_key="sk-mock")


def test_raw_client_sends_the_request_as_given_and_returns_the_response_object(mock: Any) -> None:
    answer = scenario("responses_tool_calls")["responses"][0]
    server = mock({"responses": [answer, answer]})
    client = raw_client(server)
    created = client.create(REQUEST)
    with client.stream(REQUEST) as stream:
        events = list(stream)
        streamed = stream.final_message()
    bodies = [r["body"] for r in server.requests()]
    assert bodies[0] == REQUEST and bodies[1] == {**REQUEST, "stream": True}
    assert created == answer["responses"]
    assert streamed == {**answer["responses"], "object": "response"}
    assert events[0]["type"] == "response.created" and events[-1]["type"] == "response.completed"
    args = "".join(e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta")
    assert args == '{"city":"Paris"}{"city":"Tokyo","units":"celsius"}'


def test_raw_client_stream_text_and_errors(mock: Any) -> None:
    server = mock({"responses": [scenario("responses_text")["responses"][0],
                                 {"status": 400, "json": {"error": {"message": "bad input", "type": "invalid_request_error",
                                                                    "param": "input", "code": None}}}]})
    client = raw_client(server)
    with client.stream(REQUEST) as stream:
        assert "".join(stream.text_stream) == "Bonjour — ça va? 👋 The answer is 42."
        assert stream.get_final_text() == "Bonjour — ça va? 👋 The answer is 42."
    with pytest.raises(tooloop.BadRequestError, match="bad input"):
        client.create(REQUEST)


# ------------------------------------------------------------------------- against the official SDK

openai = pytest.importorskip("openai")


def sdk_and_tooloop(name: str, index: int, request: Dict[str, Any], stream: bool) -> Any:
    """The same request through the SDK and through tooloop.Client against the same scripted answer:
    (sdk bodies and result, tooloop bodies and result)."""
    answer = scenario(name)["responses"][index]
    out = []
    for who in ("sdk", "tooloop"):
        with MockServer({"responses": [answer]}) as server:
            base = server.base_url + "/v1"
            if who == "sdk":
                sdk = openai.OpenAI(base_url=base, api_key="sk-mock", max_retries=0)
                if stream:
                    events = [e.model_dump(mode="json", exclude_unset=True) for e in
                              sdk.responses.create(**request, stream=True)]
                    final = events[-1]["response"]
                else:
                    events = []
                    final = sdk.responses.create(**request).model_dump(mode="json", exclude_unset=True)
            else:
                client = raw_client(server)
                if stream:
                    with client.stream(request) as s:
                        events = list(s)
                        final = s.final_message()
                else:
                    events, final = [], client.create(request)
            out.append(([r["body"] for r in server.requests()], events, final))
    return out


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("name", ["responses_text", "responses_tool_calls", "responses_reasoning_tool"])
def test_tooloop_and_the_openai_sdk_send_and_receive_the_same(name: str, stream: bool) -> None:
    (sdk_bodies, sdk_events, sdk_final), (tl_bodies, tl_events, tl_final) = sdk_and_tooloop(name, 0, REQUEST, stream)
    assert tl_bodies == sdk_bodies, "the same request body on the wire"
    assert json.loads(json.dumps(tl_final)) == sdk_final, "the same final response object"
    assert tl_events == sdk_events, "the same events, field for field"


@pytest.mark.parametrize("stream", [False, True])
def test_a_follow_up_with_reasoning_and_function_call_output_is_the_sdks_body_too(stream: bool) -> None:
    """The second turn as the SDK's own docs build it: the first response's output items (reasoning with its
    encrypted_content, function_call) followed by function_call_output — tooloop's agent sends the same."""
    first = scenario("responses_reasoning_tool")["responses"][0]["responses"]
    follow = {**REQUEST, "input": REQUEST["input"] + [
        {k: v for k, v in item.items() if k != "status"} for item in first["output"]] + [
        {"type": "function_call_output", "call_id": "call_1", "output": "mild in Paris"}]}
    (sdk_bodies, _, sdk_final), (tl_bodies, _, tl_final) = sdk_and_tooloop("responses_reasoning_tool", 1, follow,
                                                                          stream)
    assert tl_bodies == sdk_bodies
    assert json.loads(json.dumps(tl_final)) == sdk_final
    # And the agent, given the same turn, sends the same items (fields it adds aside: `id` of function_call).
    with MockServer(scenario("responses_reasoning_tool")) as server:
        seen: List[str] = []
        agent = responses_agent(server, tools=[weather_tool(seen)], stream=stream, system="Be brief.")
        agent.run("Weather in Paris and Tokyo?")
        sent = server.requests()[1]["body"]["input"]
    expected = [dict(i) for i in follow["input"]]
    for item in expected:
        if item.get("type") == "function_call":
            item.pop("id", None)
    assert [i for i in sent if i.get("type") != "function_call"][1:] == \
        [i for i in expected if i.get("type") != "function_call"][1:]
    assert [i for i in sent if i.get("type") == "function_call"] == \
        [i for i in expected if i.get("type") == "function_call"]


def test_threads_share_one_client(mock: Any) -> None:
    answer = scenario("responses_text")["responses"][0]
    server = mock({"routes": [{"match": {"path": "/v1/responses"}, "response": answer}], "responses": []})
    client = raw_client(server)
    results: List[str] = []

    def one() -> None:
        with client.stream(REQUEST) as s:
            results.append(s.get_final_text())

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == ["Bonjour — ça va? 👋 The answer is 42."] * 4
