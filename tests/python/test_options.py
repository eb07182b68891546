"""The Python door to the core's options: every keyword argument is read and checked by the core (the same
keys and rules as the C config), so unusable values are refused at creation with ConfigError naming the
parameter. Also the guards the core applies for every door: secrets redacted from tool results, tool inputs
that are not objects; the runaway guard when asked for (off by default), and never for a tool marked not
idempotent."""

from __future__ import annotations

import json
from typing import Any, Dict

import pytest

import tooloop
from _support import agent_for, assert_valid_view, text_reply, tool_reply, tool_results, unmarked

SECRET = "sk-ant-mock-python-SECRET-8c1d"


@pytest.mark.parametrize("kwargs,param", [
    ({"max_tokens": -1}, "max_tokens"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"max_tokens": 2**70}, "max_tokens"),
    ({"max_turns": 0}, "max_turns"),
    ({"timeout": -5}, "timeout"),
    ({"timeout": float("inf")}, "timeout"),
    ({"max_retries": 10**6}, "max_retries"),
    ({"thinking": True}, "thinking"),
    ({"thinking": 0}, "thinking"),
    ({"system": "bad \ud800 surrogate"}, "system"),
    ({"base_url": "not a url"}, "base_url"),
    ({"base_url": "localhost:8080"}, "base_url"),
    ({"headers": {"bad name": "x"}}, "headers"),
    ({"headers": {"x-ok": "line\r\nInjected: 1"}}, "headers"),
    ({"extra": [1, 2]}, "extra"),
    ({"builtin_tools": "yes"}, "builtin_tools"),
])
def test_unusable_options_raise_config_error_naming_the_parameter(kwargs: Dict[str, Any], param: str) -> None:
    with pytest.raises(tooloop.ConfigError) as info:
        tooloop.Agent(api_key="sk-test", **kwargs)
    assert param in str(info.value)


def test_an_api_key_of_the_wrong_type_is_never_echoed() -> None:
    with pytest.raises(tooloop.ConfigError) as info:
        tooloop.Agent(api_key=123456789123)  # type: ignore[arg-type]
    assert "123456789123" not in str(info.value) and "api_key" in str(info.value)


def test_thinking_false_means_off_like_in_c(mock: Any) -> None:
    server = mock([text_reply("hi")])
    agent = agent_for(server, thinking=False)
    agent.run("hello")
    assert "thinking" not in server.requests()[0]["body"]


def test_an_over_64_bit_integer_from_a_python_model_is_an_invalid_response() -> None:
    def model(request: Dict[str, Any]) -> Dict[str, Any]:
        return {"content": "hi", "stop_reason": "end_turn", "usage": {"input_tokens": 2**70, "output_tokens": 1}}

    agent = tooloop.Agent(provider=model)
    with pytest.raises(tooloop.InvalidResponseError) as info:
        agent.run("hello")
    assert "64 bits" in str(info.value)


def test_the_api_key_never_comes_back_through_a_tool_result(mock: Any, tmp_path: Any) -> None:
    server = mock([tool_reply(("toolu_1", "show_env", {})), text_reply("done")])
    session = tmp_path / "s.jsonl"
    agent = agent_for(server, api_key=SECRET, session=str(session))
    seen = []

    @agent.tool
    def show_env() -> str:
        """Print the environment."""
        return f"ANTHROPIC_API_KEY={SECRET}\nHOME=/root"

    for event in agent.stream("show me the env"):
        seen.append(event)
    sent = json.dumps(server.requests()[1]["body"])
    assert SECRET not in sent and "ANTHROPIC_API_KEY=[redacted]" in sent
    assert SECRET not in json.dumps(agent.messages)
    assert SECRET not in json.dumps(agent.history, default=str)
    assert SECRET not in session.read_text()
    assert all(SECRET not in repr(e) for e in seen)


def test_a_tool_input_that_is_not_an_object_is_the_same_in_messages_and_in_the_request(mock: Any) -> None:
    server = mock([tool_reply(("toolu_1", "add", [1, 2])), text_reply("done")])
    agent = agent_for(server)
    ran = []

    @agent.tool
    def add(a: int = 0, b: int = 0) -> int:
        """Add."""
        ran.append((a, b))
        return a + b

    result = agent.run("add")
    assert ran == [] and result.text == "done"
    assert agent.messages[:3] == unmarked(server.requests()[1]["body"]["messages"])
    assert agent.messages[1]["content"][0]["input"] == {}
    assert "JSON object" in agent.messages[2]["content"][0]["content"]
    assert_valid_view(agent.messages)


def test_the_runaway_guard_stops_a_model_that_repeats_itself() -> None:
    calls = []

    def model(request: Dict[str, Any]) -> Dict[str, Any]:
        n = len(request["messages"])
        return {"content": [{"type": "tool_use", "id": f"t{n}", "name": "ping", "input": {"x": 1}}]}

    agent = tooloop.Agent(provider=model, progress_guard=True)

    @agent.tool
    def ping(x: int) -> str:
        """Ping."""
        calls.append(x)
        return "pong"

    result = agent.run("go")
    assert result.stop_reason == "repetition"
    assert len(calls) == 2
    assert_valid_view(agent.messages)


def _roll_dice_turn(mock: Any, **options: Any) -> Any:
    """One turn of four roll_dice({}) calls over the wire, then an answer: (server, the rolls that ran, the tool
    results the second request carried)."""
    server = mock([tool_reply(*[(f"toolu_roll{i}", "roll_dice", {}) for i in range(4)]), text_reply("rolled")])
    rolls = []
    idempotent = options.pop("idempotent", True)

    @tooloop.tool(idempotent=idempotent)
    def roll_dice() -> str:
        """Roll a die."""
        rolls.append(len(rolls) + 1)
        return str(rolls[-1])

    agent = agent_for(server, tools=[roll_dice], **options)
    result = agent.run("roll four times")
    assert result.stop_reason == "end_turn" and result.text == "rolled"
    assert_valid_view(agent.messages)
    return rolls, tool_results(server.requests()[1])


def test_a_host_tool_called_with_the_same_input_again_runs_every_time_by_default(mock: Any) -> None:
    # Issue 38: the third roll_dice({}) of a turn was refused ("same call and same input as the previous 2").
    rolls, results = _roll_dice_turn(mock)
    assert rolls == [1, 2, 3, 4]
    assert results == {f"toolu_roll{i}": (str(i + 1), False) for i in range(4)}


def test_progress_guard_refuses_the_third_identical_call(mock: Any) -> None:
    rolls, results = _roll_dice_turn(mock, progress_guard=True)
    assert rolls == [1, 2]
    content, is_error = results["toolu_roll2"]
    assert is_error and content.startswith("not run: same call and same input as the previous 2 calls"), content


def test_a_tool_marked_not_idempotent_runs_every_time_with_progress_guard_on(mock: Any) -> None:
    rolls, results = _roll_dice_turn(mock, progress_guard=True, idempotent=False)
    assert rolls == [1, 2, 3, 4]
    assert results == {f"toolu_roll{i}": (str(i + 1), False) for i in range(4)}
    # The same through tooloop.Tool(...) and agent.tool(...).
    t = tooloop.Tool("poll", "Poll.", {"type": "object"}, lambda: "x", idempotent=False)
    assert t.idempotent is False and tooloop.tool(t).idempotent is False
    assert tooloop.tool(lambda: 1, name="n").idempotent is True


def test_temperature_is_sent_and_checked(mock: Any) -> None:
    server = mock([text_reply("hi")])
    agent_for(server, temperature=0.2).run("hello")
    assert server.requests()[0]["body"]["temperature"] == 0.2
    with pytest.raises(tooloop.ConfigError, match="temperature"):
        tooloop.Agent(api_key="k", temperature=5)
