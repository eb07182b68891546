"""Structured output through the Python door: output_schema as a dict, a pydantic model, a dataclass or a
TypedDict (the schema derived as for tools, the value built), on both wires against the mock, from a model
written in Python, in streams, from a SubAgent, and OutputValidationError with the last answer attached."""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any, Dict, List

import pytest

import tooloop
from _support import agent_for, assert_valid_view

if sys.version_info >= (3, 11):
    from typing import TypedDict
else:  # pragma: no cover
    from typing_extensions import TypedDict

pydantic = pytest.importorskip("pydantic")


class Weather(pydantic.BaseModel):  # type: ignore[misc,name-defined]
    city: str
    temp_c: float


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Pair(TypedDict):
    name: str
    count: int


def a_text(text: str) -> Dict[str, Any]:
    return {"anthropic": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
                          "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                          "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 5}}}


def a_call(id: str, name: str, input: Any) -> Dict[str, Any]:
    return {"anthropic": {"id": "msg_2", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
                          "content": [{"type": "tool_use", "id": id, "name": name, "input": input}],
                          "stop_reason": "tool_use", "stop_sequence": None,
                          "usage": {"input_tokens": 10, "output_tokens": 5}}}


def o_call(id: str, name: str, args: str) -> Dict[str, Any]:
    return {"openai": {"id": "c", "object": "chat.completion", "created": 1, "model": "m",
                       "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                           "role": "assistant", "content": None,
                           "tool_calls": [{"id": id, "type": "function",
                                           "function": {"name": name, "arguments": args}}]}}],
                       "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}}


def test_a_pydantic_model_gives_the_schema_and_the_result_is_an_instance(mock: Any) -> None:
    server = mock({"responses": [a_text('{"city": "Paris", "temp_c": 18.5}')]})
    agent = agent_for(server, output_schema=Weather, cache=False)
    result = agent.run("Weather in Paris?")
    assert isinstance(result.output, Weather)
    assert result.output == Weather(city="Paris", temp_c=18.5)
    sent = server.requests()[0]["body"]["output_config"]["format"]["schema"]
    assert set(sent["required"]) == {"city", "temp_c"} and sent["additionalProperties"] is False


def test_a_dataclass_over_a_local_openai_server_uses_the_final_answer_tool(mock: Any) -> None:
    server = mock({"responses": [o_call("c1", "final_answer", '{"x": 1, "y": 2}')]})
    agent = agent_for(server, provider="openai", model="qwen3", output_schema=Point)
    result = agent.run("a point")
    assert result.output == Point(1, 2)
    body = server.requests()[0]["body"]
    assert [t["function"]["name"] for t in body["tools"]] == ["final_answer"]
    assert body["tool_choice"] == "required"


def test_a_typed_dict_and_a_plain_schema_give_dicts(mock: Any) -> None:
    server = mock({"responses": [a_text('{"name": "a", "count": 2}'), a_text('[1, 2, 3]')]})
    agent = agent_for(server, output_schema=Pair)
    assert agent.run("one").output == {"name": "a", "count": 2}
    agent2 = agent_for(server, output_schema={"type": "array", "items": {"type": "integer"}})
    assert agent2.run("two").output == [1, 2, 3]


def test_an_invalid_answer_is_corrected_then_retries_run_out_with_the_last_answer(mock: Any) -> None:
    server = mock({"responses": [a_text('{"city": "Paris"}'), a_text('{"city": "Paris", "temp_c": 18}')]})
    agent = agent_for(server, output_schema=Weather)
    assert agent.run("weather").output == Weather(city="Paris", temp_c=18)
    assert "missing required property" in server.requests()[1]["raw_body"]

    server = mock({"responses": [a_text("sunny"), a_text('{"city": 1, "temp_c": 2}')]})
    agent = agent_for(server, output_schema=Weather, output_retries=1)
    with pytest.raises(tooloop.OutputValidationError) as info:
        agent.run("weather")
    e = info.value
    assert isinstance(e, tooloop.Error)
    assert e.output == {"city": 1, "temp_c": 2} and e.text == '{"city": 1, "temp_c": 2}'
    assert e.attempts == 2 and any("$.city" in x for x in e.errors)
    assert_valid_view(agent.messages)


def test_a_python_model_reads_the_schema_and_a_stream_ends_with_the_output() -> None:
    seen: List[Dict[str, Any]] = []

    def model(request: Dict[str, Any]) -> Dict[str, Any]:
        seen.append(request)
        return {"content": [{"type": "text", "text": json.dumps({"city": "Oslo", "temp_c": -2})}]}

    agent = tooloop.Agent(provider=model, output_schema=Weather)
    events = list(agent.stream("weather"))
    done = events[-1]
    assert isinstance(done, tooloop.DoneEvent)
    assert done.result.output == Weather(city="Oslo", temp_c=-2)
    assert seen[0]["output_config"]["format"]["type"] == "json_schema"


def test_a_subagent_with_a_class_schema_hands_the_parent_its_json(mock: Any) -> None:
    server = mock({"responses": [
        a_call("p1", "task", {"description": "d", "prompt": "find a point", "agent_type": "finder"}),
        a_text('{"x": 3, "y": 4}'),
        a_text("done"),
    ]})
    agent = agent_for(server, subagents={"finder": tooloop.SubAgent("Finds points", output_schema=Point)})
    result = agent.run("go")
    assert result.output is None and result.text == "done"
    child = server.requests()[1]["body"]["output_config"]["format"]["schema"]
    assert child["required"] == ["x", "y"]
    last = server.requests()[2]["body"]["messages"][-1]["content"][0]
    assert last["type"] == "tool_result"
    text = last["content"] if isinstance(last["content"], str) else last["content"][0]["text"]
    assert json.loads(text) == {"x": 3, "y": 4}


def test_a_bad_output_schema_is_a_config_error() -> None:
    with pytest.raises(tooloop.ConfigError, match="output_schema"):
        tooloop.Agent(provider=lambda r: {}, output_schema="not a schema")  # type: ignore[arg-type]
