"""tooloop.Agent against the mock server: tools from plain functions, results, parallel calls, thinking,
permissions, the views of the conversation, usage, reset, and the OpenAI-compatible provider."""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any, Dict, List

import pytest

import tooloop
from _support import agent_for, assert_valid_view, text_reply, tool_reply, unmarked


def last_request_messages(server: Any) -> List[Dict[str, Any]]:
    return server.requests()[-1]["body"]["messages"]  # type: ignore[no-any-return]


def tool_results(server: Any) -> List[Dict[str, Any]]:
    return [unmarked(b) for b in last_request_messages(server)[-1]["content"] if b["type"] == "tool_result"]


def test_run_calls_a_decorated_tool_and_returns_the_final_text(mock: Any) -> None:
    server = mock("anthropic_tool_then_text")
    agent = agent_for(server)
    seen = []

    @agent.tool
    def get_weather(city: str) -> str:
        """Current weather of a city."""
        seen.append(city)
        return f"18 C in {city}"

    result = agent.run("What is the weather in Paris?")
    assert seen == ["Paris"]
    assert result.text.startswith("It is currently 18 °C")
    assert result.stop_reason == "end_turn"
    assert result.turns == 2
    assert [(c.name, c.input, c.output, c.is_error) for c in result.tool_calls] == [
        ("get_weather", {"city": "Paris"}, "18 C in Paris", False)
    ]
    first = server.requests()[0]["body"]
    assert first["tools"][0]["name"] == "get_weather"
    assert first["tools"][0]["input_schema"]["properties"]["city"] == {"type": "string"}
    assert first["stream"] is True
    assert tool_results(server) == [
        {"type": "tool_result", "tool_use_id": "toolu_01A09q90qw90lq917835lq9a", "content": "18 C in Paris"}
    ]
    assert_valid_view(agent.messages)
    # The decorated function stays a function.
    assert get_weather("Rome") == "18 C in Rome"


def test_tool_returning_a_dict_is_sent_as_json(mock: Any) -> None:
    server = mock("anthropic_tool_then_text")

    def get_weather(city: str) -> Dict[str, Any]:
        """Weather."""
        return {"city": city, "temp_c": 18, "sky": "partly cloudy ☁"}

    agent = agent_for(server, tools=[get_weather])
    agent.run("weather?")
    (result,) = tool_results(server)
    assert "is_error" not in result
    assert json.loads(result["content"]) == {"city": "Paris", "temp_c": 18, "sky": "partly cloudy ☁"}


def test_tool_that_raises_becomes_an_error_result_and_is_logged(mock: Any, caplog: pytest.LogCaptureFixture) -> None:
    server = mock("anthropic_tool_then_text")
    agent = agent_for(server)

    @agent.tool
    def get_weather(city: str) -> str:
        """Weather."""
        raise ValueError(f"no station near {city}")

    with caplog.at_level(logging.ERROR, logger="tooloop"):
        result = agent.run("weather?")
    (res,) = tool_results(server)
    assert res["is_error"] is True
    assert "no station near Paris" in res["content"]
    assert result.tool_calls[0].is_error
    assert result.text.startswith("It is currently")  # the run went on
    logged = [r for r in caplog.records if r.exc_info]
    assert logged, "the tool's exception was not logged with its traceback"
    assert "no station near Paris" in str(logged[0].exc_info[1])  # type: ignore[index]


def test_keyboard_interrupt_in_a_tool_aborts_the_run_and_propagates_unchanged(mock: Any) -> None:
    server = mock({"responses": [tool_reply(("toolu_1", "stop_here", {}), ("toolu_2", "never", {})),
                                 text_reply("resumed fine")]})
    agent = agent_for(server)
    raised = KeyboardInterrupt("from the tool")
    calls: List[str] = []

    @agent.tool
    def stop_here() -> str:
        """Stops."""
        calls.append("stop_here")
        raise raised

    @agent.tool
    def never() -> str:
        """Must not run."""
        calls.append("never")
        return "ran"

    with pytest.raises(KeyboardInterrupt) as info:
        agent.run("go")
    assert info.value is raised
    assert calls == ["stop_here"]
    assert_valid_view(agent.messages)
    # Resume continues without re-running the tool that already ran.
    result = agent.resume()
    assert result.text == "resumed fine"
    assert calls == ["stop_here"]
    assert_valid_view(agent.messages)


def test_system_exit_in_a_tool_propagates(mock: Any) -> None:
    server = mock({"responses": [tool_reply(("toolu_1", "quit", {}))]})
    agent = agent_for(server)

    @agent.tool
    def quit() -> str:
        """Quit."""
        raise SystemExit(3)

    with pytest.raises(SystemExit) as info:
        agent.run("go")
    assert info.value.code == 3


def test_parallel_safe_tools_run_concurrently_and_results_share_one_message(mock: Any) -> None:
    server = mock("anthropic_parallel_tools")
    agent = agent_for(server)
    active = []
    peak = []
    lock = threading.Lock()

    def busy(name: str) -> None:
        with lock:
            active.append(name)
            peak.append(len(active))
        time.sleep(0.3)
        with lock:
            active.remove(name)

    @agent.tool(parallel_safe=True)
    def get_weather(city: str, units: str = "celsius") -> str:
        """Weather."""
        busy(city)
        return f"{city}: 20 {units}"

    @agent.tool(parallel_safe=True)
    def get_time() -> str:
        """Time."""
        busy("time")
        return "12:00"

    started = time.monotonic()
    result = agent.run("weather and time")
    elapsed = time.monotonic() - started
    print(f"three 0.3 s tools took {elapsed:.2f} s")
    assert max(peak) >= 2, "no two tools ever ran at the same time"
    assert elapsed < 0.85
    results = tool_results(server)
    assert [r["content"] for r in results] == ["Paris: 20 celsius", "Tokyo: 20 celsius", "12:00"]
    assert len(result.tool_calls) == 3
    assert_valid_view(agent.messages)


def test_thinking_budget_is_sent_and_thinking_blocks_go_back_verbatim(mock: Any) -> None:
    server = mock("anthropic_thinking_tool")
    agent = agent_for(server, thinking=2048, max_tokens=4096)

    @agent.tool
    def get_weather(city: str) -> str:
        """Weather."""
        return "sunny"

    thinking_events = []
    for event in agent.stream("weather in Paris?"):
        if event.type == "thinking":
            thinking_events.append(event.thinking)
    first, second = server.requests()[0]["body"], server.requests()[1]["body"]
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert first["max_tokens"] == 4096
    sent_back = second["messages"][1]["content"]
    received = server.requests() and agent.history[1]["content"]
    assert sent_back[0]["type"] == "thinking"
    assert sent_back[0] == received[0]
    assert sent_back[0]["signature"].startswith("EqQBCkYIBxgC")
    assert "".join(thinking_events).startswith("The user wants the weather in Paris.")


def test_thinking_dict_passes_through(mock: Any) -> None:
    server = mock("anthropic_text")
    agent_for(server, thinking={"type": "adaptive"}).run("hi")
    assert server.requests()[0]["body"]["thinking"] == {"type": "adaptive"}


def test_redacted_thinking_is_sent_back_unchanged(mock: Any) -> None:
    server = mock("anthropic_redacted_thinking")
    agent = agent_for(server, thinking=1024)
    agent.add_tool(tooloop.Tool("get_weather", "Weather", {"type": "object", "properties": {"city": {"type": "string"}}},
                                lambda city="": "rain"))
    agent.run("weather?")
    first_reply = server.requests()[1]["body"]["messages"][1]["content"]
    assert [b["type"] for b in first_reply[:2]] == ["thinking", "redacted_thinking"]
    assert first_reply[1]["data"]


def test_explicit_tool_objects_and_tools_list(mock: Any) -> None:
    server = mock("anthropic_tool_then_text")

    def impl(city: str) -> str:
        return f"fog in {city}"

    weather = tooloop.Tool("get_weather", "Weather by city",
                           {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}, impl)
    agent = agent_for(server, tools=[weather])
    assert agent.tools == ["get_weather"]
    agent.run("weather?")
    assert tool_results(server)[0]["content"] == "fog in Paris"
    assert server.requests()[0]["body"]["tools"][0]["description"] == "Weather by city"


def test_duplicate_or_invalid_tool_names_are_config_errors(mock: Any) -> None:
    agent = agent_for(mock("anthropic_text"))

    @agent.tool
    def f() -> str:
        """F."""
        return ""

    with pytest.raises(tooloop.ConfigError, match="already registered"):
        agent.add_tool(f)
    assert agent.remove_tool("f") is True
    assert agent.tools == []


def test_permission_false_denies_with_a_default_reason(mock: Any) -> None:
    server = mock("anthropic_tool_then_text")
    asked = []

    def permission(call: tooloop.ToolCall) -> bool:
        asked.append((call.id, call.name, call.input))
        return False

    ran = []
    agent = agent_for(server, permission=permission)

    @agent.tool
    def get_weather(city: str) -> str:
        """Weather."""
        ran.append(city)
        return "sunny"

    agent.run("weather?")
    assert asked == [("toolu_01A09q90qw90lq917835lq9a", "get_weather", {"city": "Paris"})]
    assert ran == []
    (res,) = tool_results(server)
    assert res["is_error"] is True and "Permission denied" in res["content"]


def test_permission_reason_string_reaches_the_model_and_true_allows(mock: Any) -> None:
    server = mock("anthropic_parallel_tools")

    def permission(call: tooloop.ToolCall) -> Any:
        return True if call.name == "get_time" else f"not {call.input['city']}, sorry"

    agent = agent_for(server, permission=permission)
    agent.add_tool(tooloop.tool(lambda city, units="c": "x", name="get_weather", description="w"))

    @agent.tool
    def get_time() -> str:
        """Time."""
        return "noon"

    agent.run("go")
    contents = [(r.get("is_error", False), r["content"]) for r in tool_results(server)]
    assert contents[0] == (True, "Permission denied: not Paris, sorry")
    assert contents[1] == (True, "Permission denied: not Tokyo, sorry")
    assert contents[2] == (False, "noon")


def test_an_exception_in_the_permission_callable_propagates(mock: Any) -> None:
    server = mock("anthropic_tool_then_text")

    class PolicyBug(Exception):
        pass

    def permission(call: tooloop.ToolCall) -> bool:
        raise PolicyBug("oops")

    agent = agent_for(server, permission=permission)
    agent.add_tool(tooloop.tool(lambda city: "x", name="get_weather", description="w"))
    with pytest.raises(PolicyBug):
        agent.run("go")
    assert_valid_view(agent.messages)


def test_messages_history_and_usage(mock: Any) -> None:
    server = mock("anthropic_tool_then_text")
    agent = agent_for(server)
    agent.add_tool(tooloop.tool(lambda city: "sunny", name="get_weather", description="w"))
    result = agent.run("weather?")
    messages = agent.messages
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[0]["content"] == [{"type": "text", "text": "weather?"}]
    history = agent.history
    assert [h["role"] for h in history] == ["user", "assistant", "tool", "assistant"]
    assert all(h["status"] == "complete" and h["id"] for h in history)
    assert history[1]["usage"]["input_tokens"] > 0 and history[1]["model"] == "claude-sonnet-4-6"
    assert history[2]["meta"]["tool_name"] == "get_weather"
    usage = agent.usage
    assert usage.input_tokens == result.usage.input_tokens > 0
    assert usage.output_tokens == result.usage.output_tokens > 0
    assert usage.cost_usd is not None and usage.cost_usd > 0
    assert isinstance(usage, tooloop.Usage)


def test_unknown_model_has_no_cost_estimate() -> None:
    agent = tooloop.Agent(model="my-local-llama", provider=lambda req: {"content": "hi", "usage": {"input_tokens": 3}})
    agent.run("hi")
    assert agent.usage.input_tokens == 3
    assert agent.usage.cost_usd is None


def test_reset_clears_the_conversation(mock: Any) -> None:
    server = mock({"responses": [text_reply("one"), text_reply("two")]})
    agent = agent_for(server)
    agent.run("first")
    agent.reset()
    assert agent.messages == [] and agent.history == []
    agent.run("second")
    assert [m["content"][0]["text"] for m in last_request_messages(server)] == ["second"]


def test_system_prompt_and_model_are_sent(mock: Any) -> None:
    server = mock("anthropic_text")
    agent_for(server, model="claude-opus-4-5", system="Be brief.", max_tokens=100).run("hi")
    body = unmarked(server.requests()[0]["body"])
    # A string system prompt goes out as one text block, the form that carries a prompt-caching marker.
    assert body["system"] in ("Be brief.", [{"type": "text", "text": "Be brief."}])
    assert (body["model"], body["max_tokens"]) == ("claude-opus-4-5", 100)
    headers = server.requests()[0]["headers"]
    assert headers["x-api-key"] == "sk-ant-mock"


def test_api_key_and_base_url_default_to_the_environment(mock: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    server = mock("anthropic_text")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-from-env")
    assert tooloop.Agent().run("hi").text.startswith("Hello!")
    assert server.requests()[0]["headers"]["x-api-key"] == "sk-from-env"


def test_input_as_content_blocks(mock: Any) -> None:
    server = mock("anthropic_text")
    agent_for(server).run([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])
    assert unmarked(server.requests()[0]["body"]["messages"][0]["content"]) == [
        {"type": "text", "text": "a"}, {"type": "text", "text": "b"}]


def test_max_turns_return_keeps_the_conversation_and_resume_continues(mock: Any) -> None:
    server = mock({"responses": [tool_reply(("toolu_1", "step", {})), text_reply("finished")]})
    agent = agent_for(server, max_turns=1)
    agent.add_tool(tooloop.tool(lambda: "stepped", name="step", description="s"))
    with pytest.raises(tooloop.MaxTurnsExceeded) as info:
        agent.run("go")
    assert info.value.turns == 1
    assert_valid_view(agent.messages)
    assert agent.resume().text == "finished"
    assert len(server.requests()) == 2


def test_openai_provider_runs_parallel_tool_calls(mock: Any) -> None:
    server = mock("openai_tool_calls")
    agent = agent_for(server, provider="openai", model="gpt-4o-mini", api_key="sk-mock")
    cities = []

    @agent.tool
    def get_weather(city: str, units: str = "celsius") -> str:
        """Weather."""
        cities.append(city)
        return f"mild in {city}"

    result = agent.run("Paris and Tokyo?")
    assert sorted(cities) == ["Paris", "Tokyo"]
    assert result.text
    second = server.requests()[1]
    assert second["path"] == "/v1/chat/completions"
    tool_msgs = [m for m in second["body"]["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_msgs] == ["mild in Paris", "mild in Tokyo"]
    assert second["headers"]["authorization"] == "Bearer sk-mock"


def test_builtin_tools_work_in_the_workspace(mock: Any, tmp_path: Any) -> None:
    server = mock({"responses": [
        tool_reply(("toolu_w", "write_file", {"path": "notes/a.txt", "content": "hello"})),
        tool_reply(("toolu_r", "read_file", {"path": "notes/a.txt"})),
        tool_reply(("toolu_x", "read_file", {"path": "../outside.txt"})),
        text_reply("done"),
    ]})
    agent = agent_for(server, builtin_tools=["read_file", "write_file"], workspace=str(tmp_path))
    assert agent.tools == ["read_file", "write_file"]
    result = agent.run("write and read")
    assert (tmp_path / "notes" / "a.txt").read_text() == "hello"
    outputs = [(c.name, c.is_error) for c in result.tool_calls]
    assert outputs == [("write_file", False), ("read_file", False), ("read_file", True)]
    assert "hello" in result.tool_calls[1].output


def test_builtin_tools_true_registers_all_of_them(tmp_path: Any) -> None:
    agent = tooloop.Agent(provider=lambda r: {"content": "x"}, builtin_tools=True, workspace=tmp_path)
    assert agent.tools == ["bash", "read_file", "write_file", "edit_file", "grep", "glob", "web_fetch", "bash_output",
                           "bash_kill"]
    with pytest.raises(tooloop.ConfigError, match="unknown built-in tool"):
        tooloop.Agent(provider=lambda r: {"content": "x"}, builtin_tools=["nope"], workspace=tmp_path)


def test_a_second_concurrent_run_is_refused_as_busy(mock: Any) -> None:
    server = mock("anthropic_stream_stall")
    agent = agent_for(server)
    stream = agent.stream("hi")
    first = next(stream)  # the run is now streaming (and stalled)
    assert first.type in ("text", "usage")
    with pytest.raises(tooloop.BusyError, match="busy") as refused:
        agent.run("again")
    # What it is, not a configuration problem: a host retries a busy agent, it does not fix its arguments.
    assert not isinstance(refused.value, tooloop.ConfigError)
    assert isinstance(refused.value, tooloop.Error)
    stream.close()
    assert_valid_view(agent.messages)


def test_a_stream_outlives_its_agent_object(mock: Any) -> None:
    import gc

    server = mock("anthropic_tool_then_text")
    agent = agent_for(server)
    agent.add_tool(tooloop.tool(lambda city: "sunny", name="get_weather", description="w"))
    stream = agent.stream("weather?")
    del agent
    gc.collect()
    events = list(stream)
    assert events[-1].type == "done" and events[-1].result.turns == 2


def test_a_tool_may_run_another_agent() -> None:
    inner = tooloop.Agent(provider=lambda req: {"content": "inner says hi"})
    calls = iter([
        {"content": [{"type": "tool_use", "id": "t1", "name": "ask_inner", "input": {"q": "hello"}}]},
        {"content": "outer done"},
    ])
    outer = tooloop.Agent(provider=lambda req: next(calls))

    @outer.tool
    def ask_inner(q: str) -> str:
        """Ask the inner agent."""
        return inner.run(q).text

    result = outer.run("go")
    assert result.text == "outer done"
    assert result.tool_calls[0].output == "inner says hi"


def test_permission_must_answer_true_false_or_a_reason() -> None:
    calls = iter([{"content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]}])
    agent = tooloop.Agent(provider=lambda req: next(calls), permission=lambda call: None)  # type: ignore[arg-type,return-value]
    agent.add_tool(tooloop.tool(lambda: "ran", name="f", description="f"))
    with pytest.raises(TypeError, match="True, False or a reason"):
        agent.run("go")
    assert_valid_view(agent.messages)


def test_headers_and_extra_request_fields_pass_through_unchanged(mock: Any) -> None:
    server = mock("anthropic_text")
    agent = agent_for(server, headers={"anthropic-beta": "context-1m-2025-08-07", "x-trace": "t1"},
                      extra={"metadata": {"user_id": "u-42"}, "service_tier": "auto"})
    agent.run("hi")
    sent = server.requests()[0]
    assert sent["headers"]["anthropic-beta"] == "context-1m-2025-08-07"
    assert sent["headers"]["x-trace"] == "t1"
    assert sent["headers"]["x-api-key"] == "sk-ant-mock", "a custom header does not replace the key"
    assert sent["body"]["metadata"] == {"user_id": "u-42"}
    assert sent["body"]["service_tier"] == "auto"
