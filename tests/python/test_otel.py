"""OpenTelemetry spans of runs (python/tooloop/_otel.py, bindings/python/src/otel.rs), checked with the SDK's
in-memory exporter: names, parents (under the caller's span; parallel tool calls; a child agent; an async and
a streamed run), the GenAI attributes, a failed tool call's and a cancelled run's ``error.type``, content only
with the opt-in, and nothing imported when the program does not use OpenTelemetry."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from typing import Any, Dict, Iterator, List

import pytest

import tooloop
from _support import agent_for, text_reply, tool_reply
from test_asyncio import cancel_after_request

otel_trace = pytest.importorskip("opentelemetry.trace")
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402
from opentelemetry.util._once import Once  # noqa: E402


@pytest.fixture(scope="module")
def exporter() -> Iterator[InMemorySpanExporter]:
    exp = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exp))
    otel_trace.set_tracer_provider(provider)
    try:
        yield exp
    finally:
        # The global provider is set once per process: put the default back for the tests after these.
        otel_trace._TRACER_PROVIDER = None
        otel_trace._TRACER_PROVIDER_SET_ONCE = Once()


@pytest.fixture
def spans(exporter: InMemorySpanExporter) -> Iterator[InMemorySpanExporter]:
    exporter.clear()
    yield exporter


def named(spans: List[ReadableSpan], prefix: str) -> List[ReadableSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


def parent_of(span: ReadableSpan) -> Any:
    return span.parent.span_id if span.parent is not None else None


def attrs(span: ReadableSpan) -> Dict[str, Any]:
    return dict(span.attributes or {})


def weather_agent(server: Any) -> Any:
    agent = agent_for(server)

    @agent.tool(parallel_safe=True)
    def get_weather(city: str, units: str = "celsius") -> str:
        """Weather."""
        return f"{city}: 20 {units}"

    @agent.tool(parallel_safe=True)
    def get_time() -> str:
        """Time."""
        raise RuntimeError("the clock is broken")

    return agent


def test_a_run_inside_a_callers_span_is_an_invoke_agent_tree_with_parallel_tool_calls(mock: Any, spans: Any) -> None:
    server = mock("anthropic_parallel_tools")
    agent = weather_agent(server)
    tracer = otel_trace.get_tracer("test")
    with tracer.start_as_current_span("web request") as request:
        agent.run("weather and time")
    done = spans.get_finished_spans()
    [run] = named(done, "invoke_agent")
    assert run.name == "invoke_agent"
    assert run.kind == SpanKind.INTERNAL
    assert parent_of(run) == request.get_span_context().span_id
    assert run.context.trace_id == request.get_span_context().trace_id
    a = attrs(run)
    assert a["gen_ai.operation.name"] == "invoke_agent"
    assert a["gen_ai.provider.name"] == "anthropic"
    assert a["gen_ai.request.model"] == "claude-sonnet-4-6"
    assert a["gen_ai.usage.input_tokens"] == 1200
    assert a["gen_ai.usage.output_tokens"] == 187
    assert a["gen_ai.response.finish_reasons"] == ("end_turn",)
    assert "error.type" not in a
    assert "otel.name" not in a and "otel.kind" not in a

    chats = named(done, "chat ")
    assert [c.name for c in chats] == ["chat claude-sonnet-4-6"] * 2
    for c in chats:
        assert c.kind == SpanKind.CLIENT
        assert parent_of(c) == run.context.span_id
        assert attrs(c)["gen_ai.operation.name"] == "chat"
        assert attrs(c)["gen_ai.response.model"] == "claude-sonnet-4-6"
    assert attrs(chats[0])["gen_ai.response.id"] == "msg_01Gx4aK2zWnq8YbR5tLdJ3pV"
    assert attrs(chats[0])["gen_ai.usage.output_tokens"] == 156
    assert attrs(chats[0])["gen_ai.response.finish_reasons"] == ("tool_use",)

    tools = {attrs(t)["gen_ai.tool.call.id"]: t for t in named(done, "execute_tool ")}
    assert len(tools) == 3
    for t in tools.values():
        assert parent_of(t) == run.context.span_id, t.name
        assert attrs(t)["gen_ai.tool.type"] == "function"
        assert "gen_ai.tool.call.arguments" not in attrs(t), "content without the opt-in"
    paris = tools["toolu_01T1x1fJ34qAmk2tNTrN7Up6"]
    assert paris.name == "execute_tool get_weather"
    assert paris.status.status_code != StatusCode.ERROR
    clock = tools["toolu_01PqZ8sNd3kVbT6cYwR2hXjL"]
    assert clock.name == "execute_tool get_time"
    assert attrs(clock)["error.type"] == "tool_error"
    assert clock.status.status_code == StatusCode.ERROR


def test_spans_a_tool_makes_nest_under_its_execute_tool_span_also_on_parallel_threads(mock: Any, spans: Any) -> None:
    server = mock("anthropic_parallel_tools")
    agent = agent_for(server)
    tracer = otel_trace.get_tracer("tool code")

    @agent.tool(parallel_safe=True)
    def get_weather(city: str, units: str = "celsius") -> str:
        """Weather."""
        with tracer.start_as_current_span(f"lookup {city}"):
            return f"{city}: 20 {units}"

    @agent.tool(parallel_safe=True)
    def get_time() -> str:
        """Time."""
        return "12:00"

    agent.run("weather and time")
    done = spans.get_finished_spans()
    tools = {attrs(t)["gen_ai.tool.call.id"]: t for t in named(done, "execute_tool ")}
    [paris] = named(done, "lookup Paris")
    [tokyo] = named(done, "lookup Tokyo")
    assert parent_of(paris) == tools["toolu_01T1x1fJ34qAmk2tNTrN7Up6"].context.span_id
    assert parent_of(tokyo) == tools["toolu_01HwT5wq2YcGZRr7sXk9LmPq"].context.span_id


def test_content_is_on_the_spans_only_with_the_conventions_opt_in(mock: Any, spans: Any,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    server = mock("anthropic_parallel_tools")
    agent = weather_agent(server)
    agent.run("weather and time")
    done = spans.get_finished_spans()
    tools = {attrs(t)["gen_ai.tool.call.id"]: attrs(t) for t in named(done, "execute_tool ")}
    paris = tools["toolu_01T1x1fJ34qAmk2tNTrN7Up6"]
    assert paris["gen_ai.tool.call.arguments"] == '{"city":"Paris"}'
    assert paris["gen_ai.tool.call.result"] == "Paris: 20 celsius"
    assert "gen_ai.output.messages" in attrs(named(done, "chat ")[1])


def test_a_cancelled_arun_ends_its_spans_with_error_type_cancelled_under_the_tasks_span(mock: Any,
                                                                                       spans: Any) -> None:
    server = mock("anthropic_stream_stall")
    agent = agent_for(server)
    tracer = otel_trace.get_tracer("test")

    async def main() -> Any:
        with tracer.start_as_current_span("job") as job:
            task = asyncio.ensure_future(agent.arun("hi"))
            await cancel_after_request(server, task, task.cancel)
            return job

    job = asyncio.run(main())
    done = spans.get_finished_spans()
    [run] = named(done, "invoke_agent")
    assert parent_of(run) == job.get_span_context().span_id
    assert attrs(run)["error.type"] == "cancelled"
    assert run.status.status_code == StatusCode.ERROR
    [chat] = named(done, "chat ")
    assert parent_of(chat) == run.context.span_id
    assert attrs(chat)["error.type"] == "cancelled"


def test_a_streamed_run_reports_the_same_spans(mock: Any, spans: Any) -> None:
    server = mock({"responses": [tool_reply(("toolu_w", "get_weather", {"city": "Oslo"})), text_reply("cold")]})
    agent = weather_agent(server)
    tracer = otel_trace.get_tracer("test")
    with tracer.start_as_current_span("caller") as caller:
        events = list(agent.stream("weather in Oslo"))
    assert events
    done = spans.get_finished_spans()
    [run] = named(done, "invoke_agent")
    assert parent_of(run) == caller.get_span_context().span_id
    assert [parent_of(c) for c in named(done, "chat ")] == [run.context.span_id] * 2
    [tool] = named(done, "execute_tool get_weather")
    assert parent_of(tool) == run.context.span_id


def test_a_child_agents_run_nests_under_its_task_call(mock: Any, spans: Any) -> None:
    server = mock({"responses": [
        tool_reply(("toolu_task", "task", {"agent_type": "finder", "description": "find", "prompt": "find it"})),
        text_reply("found it"),
        text_reply("done"),
    ]})
    agent = agent_for(server, subagents={"finder": tooloop.SubAgent("Finds things.")})
    agent.run("go")
    done = spans.get_finished_spans()
    runs = named(done, "invoke_agent")
    parent_run = next(r for r in runs if r.name == "invoke_agent")
    child_run = next(r for r in runs if r.name == "invoke_agent finder")
    assert attrs(child_run)["gen_ai.agent.name"] == "finder"
    [task] = named(done, "execute_tool task")
    assert parent_of(task) == parent_run.context.span_id
    assert parent_of(child_run) == task.context.span_id
    [child_chat] = [c for c in named(done, "chat ") if parent_of(c) == child_run.context.span_id]
    assert child_chat.context.trace_id == parent_run.context.trace_id


def test_import_tooloop_imports_no_opentelemetry_and_a_run_without_it_imports_none() -> None:
    code = ("import sys, tooloop\n"
            "assert not [m for m in sys.modules if m.startswith('opentelemetry')]\n"
            "assert tooloop._otel.span_sink() is None\n"
            "assert not [m for m in sys.modules if m.startswith('opentelemetry')]\n")
    subprocess.run([sys.executable, "-c", code], check=True, env=dict(os.environ))
