"""A model written in Python (provider=callable): what it is sent, what it may return, and the clear errors
for what it may not."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

import tooloop
from _support import assert_valid_view


class Brain:
    """A scripted fake model that records every request it gets."""

    def __init__(self, *replies: Any) -> None:
        self.replies = list(replies)
        self.requests: List[Dict[str, Any]] = []

    def __call__(self, request: Dict[str, Any]) -> Any:
        self.requests.append(request)
        return self.replies.pop(0)


def test_fake_brain_drives_a_tool_loop() -> None:
    brain = Brain(
        {"content": [{"type": "text", "text": "Adding."},
                     {"type": "tool_use", "id": "t1", "name": "add", "input": {"a": 2, "b": 3}}],
         "stop_reason": "tool_use", "usage": {"input_tokens": 7, "output_tokens": 3}},
        {"content": [{"type": "text", "text": "It is 5."}], "stop_reason": "end_turn",
         "usage": {"input_tokens": 9, "output_tokens": 2}},
    )
    agent = tooloop.Agent(model="fake-1", system="Be exact.", provider=brain, max_tokens=321)

    @agent.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    result = agent.run("2+3?")
    assert result.text == "It is 5."
    assert result.turns == 2
    assert (result.usage.input_tokens, result.usage.output_tokens) == (16, 5)
    first, second = brain.requests
    assert (first["model"], first["system"], first["max_tokens"]) == ("fake-1", "Be exact.", 321)
    assert first["tools"][0]["name"] == "add"
    assert first["tools"][0]["input_schema"]["required"] == ["a", "b"]
    assert "stream" not in first  # a Python model gets whole replies
    assert second["messages"][-1]["content"] == [{"type": "tool_result", "tool_use_id": "t1", "content": "5"}]
    assert_valid_view(agent.messages)


def test_stop_reason_may_be_left_out() -> None:
    brain = Brain({"content": [{"type": "tool_use", "id": "t1", "name": "ping", "input": {}}]},
                  {"content": "pong received"})
    agent = tooloop.Agent(provider=brain)
    agent.add_tool(tooloop.tool(lambda: "pong", name="ping", description="p"))
    result = agent.run("ping")
    assert result.text == "pong received" and result.stop_reason == "end_turn"
    assert result.tool_calls[0].output == "pong"


def test_thinking_blocks_from_a_python_model_round_trip() -> None:
    thinking = {"type": "thinking", "thinking": "hmm", "signature": "sig=="}
    brain = Brain({"content": [thinking, {"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
                   "stop_reason": "tool_use"},
                  {"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn"})
    agent = tooloop.Agent(provider=brain, thinking=1024)
    agent.add_tool(tooloop.tool(lambda: "", name="f", description="f"))
    events = list(agent.stream("go"))
    assert any(e.type == "thinking" and e.thinking == "hmm" for e in events)
    assert brain.requests[1]["messages"][1]["content"][0] == thinking
    assert brain.requests[0]["thinking"] == {"type": "enabled", "budget_tokens": 1024}


@pytest.mark.parametrize("reply,expected", [
    (["not", "a", "dict"], "must be an object"),
    (None, "must be an object"),
    ({"stop_reason": "end_turn"}, 'has no "content"'),
    ({"content": 42, "stop_reason": "end_turn"}, '"content" must be a list'),
    ({"content": [{"text": "no type"}]}, 'content[0] must be an object with a "type"'),
    ({"content": [], "stop_reason": "because"}, 'unknown stop_reason "because"'),
    ({"content": [{"type": "text", "text": 5}], "stop_reason": "end_turn"}, "invalid text block"),
])
def test_bad_replies_are_clear_errors(reply: Any, expected: str) -> None:
    agent = tooloop.Agent(provider=Brain(reply))
    with pytest.raises(tooloop.InvalidResponseError) as info:
        agent.run("hi")
    assert expected in str(info.value)
    assert_valid_view(agent.messages)


def test_an_exception_in_the_model_propagates_unchanged() -> None:
    class Boom(RuntimeError):
        pass

    boom = Boom("the fake model broke")

    def model(request: Dict[str, Any]) -> Dict[str, Any]:
        raise boom

    agent = tooloop.Agent(provider=model)
    with pytest.raises(Boom) as info:
        agent.run("hi")
    assert info.value is boom
    assert agent.history[-1]["status"] == "error"


def test_the_client_accepts_a_python_model_too() -> None:
    client = tooloop.Client(provider=lambda req: {"content": [{"type": "text", "text": req["messages"][0]["content"][0]["text"].upper()}]})
    message = client.create({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "echo"}]})
    assert message["content"] == [{"type": "text", "text": "ECHO"}]
    assert message["stop_reason"] == "end_turn"


def test_unchanged_messages_reach_the_model_as_the_same_dicts() -> None:
    """A request costs what is new in it: the dicts of messages that did not change since the model's last
    request are the very same objects, and every request still equals what the conversation holds."""
    import json

    turns = 6
    snapshots: List[Dict[str, Any]] = []
    requests: List[Dict[str, Any]] = []

    def model(request: Dict[str, Any]) -> Dict[str, Any]:
        requests.append(request)
        snapshots.append(json.loads(json.dumps(request)))
        k = len(requests)
        if k > turns:
            return {"content": [{"type": "text", "text": "Done."}], "stop_reason": "end_turn"}
        return {"content": [{"type": "text", "text": f"Step {k}."},
                            {"type": "tool_use", "id": f"t{k}", "name": "count", "input": {"n": k}}],
                "stop_reason": "tool_use"}

    def count(n: int) -> str:
        """Count."""
        return f"ok {n}"

    agent = tooloop.Agent(model="fake-1", provider=model, tools=[count])
    assert agent.run("Count.").text == "Done."
    assert len(requests) == turns + 1
    assert list(requests[0])[:3] == ["model", "max_tokens", "messages"]  # the wire's key order
    for k in range(2, len(requests)):
        prev, cur = requests[k - 1]["messages"], requests[k]["messages"]
        kept = len(prev) - 2  # all but the newest assistant turn and its results, which are re-rendered
        assert all(cur[i] is prev[i] for i in range(kept)), k
    for request, snapshot in zip(requests, snapshots):
        assert request == snapshot  # nothing changed a request after the model got it
    assert requests[-1]["messages"] == agent.messages[:-1]
    assert_valid_view(agent.messages)
