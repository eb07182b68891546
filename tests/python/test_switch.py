"""One conversation, any provider: ``Agent.set_model`` between runs and ``fallback_models`` within a run,
against two mock servers (Anthropic and OpenAI wire): what each server received, the event, the session
record and the spend."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

import pytest

import tooloop
from _support import assert_valid_view, text_reply


def thinking_call(call_id: str, signature: str) -> Dict[str, Any]:
    return {"anthropic": {"id": "m", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
                          "content": [{"type": "thinking", "thinking": "call f", "signature": signature},
                                      {"type": "tool_use", "id": call_id, "name": "f", "input": {}}],
                          "stop_reason": "tool_use", "stop_sequence": None,
                          "usage": {"input_tokens": 1000, "output_tokens": 100}}}


def openai_reply(message: Dict[str, Any], finish: str = "stop") -> Dict[str, Any]:
    return {"openai": {"id": "c", "object": "chat.completion", "created": 1, "model": "gpt-4o",
                       "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                       "usage": {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}}}


def f() -> str:
    """A tool."""
    return "f ran"


def bodies(server: Any) -> List[Dict[str, Any]]:
    return [r["body"] for r in server.requests()]


def test_set_model_switches_anthropic_to_openai_and_back_and_every_request_is_valid(
        mock: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    a = mock([thinking_call("toolu_a1", "SIG-A1"), text_reply("one"), text_reply("three")])
    b = mock([openai_reply({"role": "assistant", "content": None, "reasoning_content": "two calls",
                            "tool_calls": [{"id": "call:0", "type": "function",
                                            "function": {"name": "f", "arguments": "{}"}}]}, "tool_calls"),
              openai_reply({"role": "assistant", "content": "two"})])
    # OpenAI's key and URL come from the environment as it was when the agent was built.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", b.base_url + "/v1")
    agent = tooloop.Agent("claude-sonnet-4-6", provider="anthropic", api_key="sk-a", base_url=a.base_url,
                          tools=[f], thinking=2048, cache=False, max_retries=0)
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("OPENAI_BASE_URL")
    assert agent.run("first").text == "one"
    agent.set_model("gpt-4o", provider="openai")
    assert (agent.model, agent.provider) == ("gpt-4o", "openai")
    assert agent.run("second").text == "two"
    assert b.requests()[0]["headers"]["authorization"] == "Bearer sk-from-env"
    agent.set_model("claude-sonnet-4-6", provider="anthropic")
    assert agent.run("third").text == "three"

    for body in bodies(b):
        raw = json.dumps(body)
        assert "SIG-A1" not in raw and '"thinking"' not in raw
    last = bodies(a)[-1]
    raw = json.dumps(last)
    assert "SIG-A1" in raw, "Anthropic gets its own signature back"
    assert "two calls" not in raw, "OpenAI's reasoning is not sent to Anthropic as thinking"
    assert_valid_view(last["messages"])
    ids = [blk.get("id") or blk.get("tool_use_id") for m in last["messages"] for blk in m["content"]
           if blk["type"] in ("tool_use", "tool_result")]
    assert len(ids) == 4 and all(all(c.isalnum() or c in "_-" for c in i) for i in ids), ids
    makers = [(e.get("provider"), e.get("model")) for e in agent.history if e["role"] == "assistant"]
    assert makers[2] == ("openai", "gpt-4o") and makers[0][0] == makers[-1][0] == "anthropic"


def test_set_model_during_a_run_or_without_a_key_is_refused(mock: Any) -> None:
    a = mock([text_reply("ok")])
    seen: List[Any] = []

    def busy() -> str:
        """Tries to switch mid-run."""
        try:
            agent.set_model("claude-haiku-4-5")
        except tooloop.Error as e:
            seen.append(e)
        return "done"

    agent = tooloop.Agent("claude-sonnet-4-6", api_key="sk-a", base_url=a.base_url, tools=[busy])
    a.load([{"anthropic": {"id": "m", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
                           "content": [{"type": "tool_use", "id": "toolu_1", "name": "busy", "input": {}}],
                           "stop_reason": "tool_use", "stop_sequence": None,
                           "usage": {"input_tokens": 1, "output_tokens": 1}}}, text_reply("ok")])
    agent.run("go")
    assert seen and "busy" in str(seen[0]).lower() or "run" in str(seen[0]).lower()
    assert agent.model == "claude-sonnet-4-6"
    with pytest.raises(tooloop.ConfigError, match="OPENAI_API_KEY"):
        agent.set_model("gpt-4o", provider="openai")
    with pytest.raises(tooloop.ConfigError, match="fallback_models|set_model|unknown"):
        agent.set_model("gpt-4o", provider="openai", colour="blue")


@pytest.mark.parametrize("stream", [True, False])
def test_fallback_models_take_over_on_529_for_the_rest_of_the_run_and_the_next_run_starts_on_the_primary(
        mock: Any, tmp_path: Path, stream: bool) -> None:
    overloaded = {"status": 529, "json": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}}
    a = mock([thinking_call("toolu_p1", "SIG-P"), overloaded, text_reply("primary again")])
    b = mock([openai_reply({"role": "assistant", "content": "from the fallback"})])
    session = tmp_path / "s.jsonl"
    agent = tooloop.Agent("claude-sonnet-4-6", provider="anthropic", api_key="sk-a", base_url=a.base_url,
                          tools=[f], max_retries=0, cache=False, stream=stream, session=session,
                          max_cost_usd=5.0,
                          fallback_models=[{"provider": "openai", "model": "gpt-4o",
                                            "base_url": b.base_url + "/v1", "api_key": "sk-b"}])
    events = list(agent.stream("go"))
    fell = [e for e in events if isinstance(e, tooloop.ModelFallbackEvent)]
    assert len(fell) == 1
    assert (fell[0].from_model, fell[0].to_provider, fell[0].to_model, fell[0].reason) == \
        ("claude-sonnet-4-6", "openai", "gpt-4o", "overloaded")
    result = events[-1].result
    assert result.text == "from the fallback"
    # Usage and spend count both models' turns, each at its own price.
    assert result.usage.input_tokens == 2000
    expected = (1000 * 3.0 + 100 * 15.0) / 1e6 + (1000 * 2.5 + 100 * 10.0) / 1e6
    assert result.cost_usd == pytest.approx(expected)
    assert agent.spent_usd == pytest.approx(expected)
    # The fallback's request: no foreign signature, the primary's call answered.
    raw = json.dumps(bodies(b)[0])
    assert "SIG-P" not in raw and "toolu_p1" in raw
    # The session says which model answered and records the fallback.
    lines = [json.loads(line).get("entry", {}) for line in session.read_text().splitlines()]
    assert any((e.get("meta") or {}).get("model_fallback", {}).get("to_model") == "gpt-4o" for e in lines)
    answered = [e for e in lines if e.get("role") == "assistant" and e.get("status") == "complete"]
    assert answered[-1]["model"] == "gpt-4o" and answered[-1]["provider"] == "openai"
    # The run is over: the primary answers the next one.
    assert agent.model == "claude-sonnet-4-6"
    assert agent.run("again").text == "primary again"


def test_fallback_models_are_checked_like_any_option() -> None:
    with pytest.raises(tooloop.ConfigError, match="fallback_models"):
        tooloop.Agent("claude-sonnet-4-6", api_key="k", fallback_models=[{"provider": "nope", "model": "x"}])
    with pytest.raises(tooloop.ConfigError, match="fallback_models"):
        tooloop.Agent("claude-sonnet-4-6", api_key="k", fallback_models=[{"provider": "openai"}])
    with pytest.raises(tooloop.ConfigError, match="max_cost_usd"):
        tooloop.Agent("claude-sonnet-4-6", api_key="k", max_cost_usd=1.0, fallback_models=["unpriced-model"])


def test_set_model_onto_a_model_callable_sends_it_no_foreign_signature(mock: Any) -> None:
    a = mock([thinking_call("toolu_a1", "SIG-A1"), text_reply("one")])
    seen: List[Dict[str, Any]] = []

    def local(request: Dict[str, Any]) -> Dict[str, Any]:
        seen.append(request)
        return {"role": "assistant", "content": [{"type": "text", "text": "from the callable"}],
                "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}}

    agent = tooloop.Agent("claude-sonnet-4-6", api_key="sk-a", base_url=a.base_url, tools=[f], max_retries=0)
    assert agent.run("first").text == "one"
    agent.set_model("my-local-model", provider=local)
    assert agent.provider == "host"
    assert agent.run("second").text == "from the callable"
    raw = json.dumps(seen[0])
    assert "SIG-A1" not in raw and "toolu_a1" in raw and seen[0]["model"] == "my-local-model"
    with pytest.raises(tooloop.ConfigError):
        agent.set_model("x", provider=local, api_key="k")
