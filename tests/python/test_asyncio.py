"""The asyncio API (DESIGN "Round four"): ``await agent.arun``, ``async for ... in agent.astream``,
``await client.acreate`` and ``client.astream`` give what the sync API gives; ``async def`` tools and
permission checks are awaited on the caller's loop; cancelling the awaiting task stops the run quickly with the
conversation valid; the loop is never blocked. Plain ``asyncio.run`` (no pytest-asyncio)."""

from __future__ import annotations

import asyncio
import contextvars
import json
import os
import subprocess
import sys
import threading
import time
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple

import pytest

import tooloop
from _support import agent_for, assert_valid_view, scenario, text_reply, tool_reply, tool_results

WIRES = [("anthropic", "anthropic_tool_then_text"), ("openai", "openai_tool_calls")]


def normalized(x: Any) -> Any:
    """A record (event, RunResult, ...) as plain data, with the timings that differ between two runs zeroed."""
    fields = getattr(type(x), "_fields", None)
    if fields is not None:
        return (type(x).__name__, {f: 0 if f == "duration_ms" else normalized(getattr(x, f)) for f in fields})
    if isinstance(x, list):
        return [normalized(v) for v in x]
    if isinstance(x, dict):
        return {k: normalized(v) for k, v in x.items()}
    return x


def weather_agent(server: Any, provider: str, **kwargs: Any) -> Any:
    agent = agent_for(server, provider=provider, **kwargs)
    agent.add_tool(tooloop.tool(lambda city: f"sunny in {city}", name="get_weather", description="w"))
    return agent


@pytest.mark.parametrize("provider,name", WIRES)
def test_arun_returns_the_same_result_as_run(mock: Any, provider: str, name: str) -> None:
    server = mock(name)
    expected = weather_agent(server, provider).run("weather?")
    server.load(scenario(name))
    agent = weather_agent(server, provider)
    got = asyncio.run(agent.arun("weather?"))
    assert isinstance(got, tooloop.RunResult)
    assert normalized(got) == normalized(expected)
    assert_valid_view(agent.messages)


@pytest.mark.parametrize("provider,name", WIRES)
def test_astream_yields_the_same_events_in_the_same_order_as_stream(mock: Any, provider: str, name: str) -> None:
    server = mock(name)
    expected = list(weather_agent(server, provider).stream("weather?"))
    server.load(scenario(name))
    agent = weather_agent(server, provider)

    async def collect() -> Tuple[List[Any], Any]:
        stream = agent.astream("weather?")
        return [e async for e in stream], stream.result

    events, result = asyncio.run(collect())
    assert [e.type for e in events] == [e.type for e in expected]
    assert normalized(events) == normalized(expected)
    assert isinstance(events[-1], tooloop.DoneEvent) and result is events[-1].result


def test_arun_and_acreate_raise_the_same_exception_classes_as_the_sync_api(mock: Any) -> None:
    server = mock("anthropic_errors_401")
    with pytest.raises(tooloop.AuthenticationError) as sync_error:
        agent_for(server).run("hi")
    server.load(scenario("anthropic_errors_401"))
    with pytest.raises(tooloop.AuthenticationError) as async_error:
        asyncio.run(agent_for(server).arun("hi"))
    assert str(async_error.value) == str(sync_error.value)

    async def stream() -> None:
        async for _ in agent_for(server).astream("hi"):
            pass

    server.load(scenario("anthropic_errors_401"))
    with pytest.raises(tooloop.AuthenticationError):
        asyncio.run(stream())
    server.load(scenario("anthropic_errors_401"))
    client = tooloop.Client(api_key="sk-ant-mock", base_url=server.base_url, max_retries=0)
    with pytest.raises(tooloop.AuthenticationError):
        asyncio.run(client.acreate(model="claude-sonnet-4-6", max_tokens=64, messages=[{"role": "user", "content": "hi"}]))


REQUEST = {"model": "claude-sonnet-4-6", "max_tokens": 256, "messages": [{"role": "user", "content": "hi"}]}


def test_client_acreate_and_astream_equal_create_and_stream(mock: Any) -> None:
    server = mock("anthropic_text")
    client = tooloop.Client(api_key="sk-ant-mock", base_url=server.base_url)
    created = client.create(REQUEST)
    server.load(scenario("anthropic_text"))
    with client.stream(REQUEST) as s:
        sync_events = list(s)
        sync_final = s.final_message()

    async def go() -> Tuple[Dict[str, Any], Dict[str, Any], List[Dict[str, Any]], Dict[str, Any], str]:
        server.load(scenario("anthropic_text"))
        by_keywords = await client.acreate(**REQUEST)
        server.load(scenario("anthropic_text"))
        by_dict = await client.acreate(REQUEST)
        server.load(scenario("anthropic_text"))
        async with client.astream(**REQUEST) as stream:
            events = [e async for e in stream]
            final = await stream.final_message()
            text = await stream.get_final_text()
        return by_keywords, by_dict, events, final, text

    by_keywords, by_dict, events, final, text = asyncio.run(go())
    assert by_keywords == created and by_dict == created
    assert events == sync_events and len(events) > 3
    assert final == sync_final
    assert text.startswith("Hello!")


def test_async_tools_and_permission_are_awaited_on_the_callers_loop_and_thread(mock: Any) -> None:
    server = mock({"responses": [tool_reply(("c1", "lookup", {"key": "a"}), ("c2", "shout", {"text": "x"})),
                                 text_reply("done")]})
    request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")
    seen: Dict[str, Any] = {}
    locks: List[asyncio.Lock] = []  # an object of the caller's loop (made there): usable only there

    async def lookup(key: str) -> str:
        """Look a key up."""
        seen["tool_loop"] = asyncio.get_running_loop()
        seen["tool_thread"] = threading.get_ident()
        async with locks[0]:
            await asyncio.sleep(0.01)
        return f"value of {key} for {request_id.get()}"

    def shout(text: str) -> str:
        """Shout."""
        seen["sync_thread"] = threading.get_ident()
        return text.upper()

    async def permission(call: tooloop.ToolCall) -> bool:
        seen.setdefault("permission_loops", []).append(asyncio.get_running_loop())
        seen["permission_thread"] = threading.get_ident()
        return True

    agent = agent_for(server, tools=[lookup, shout], permission=permission)

    async def main() -> Any:
        request_id.set("req-7")
        locks.append(asyncio.Lock())
        seen["loop"] = asyncio.get_running_loop()
        seen["thread"] = threading.get_ident()
        return await agent.arun("go")

    result = asyncio.run(main())
    assert result.text == "done"
    assert seen["tool_loop"] is seen["loop"] and seen["tool_thread"] == seen["thread"]
    assert seen["permission_loops"] == [seen["loop"], seen["loop"]] and seen["permission_thread"] == seen["thread"]
    assert seen["sync_thread"] != seen["thread"]  # sync tools stay off the loop
    answers = tool_results(server.requests()[1])
    assert answers == {"c1": ("value of a for req-7", False), "c2": ("X", False)}


def test_an_async_permission_denies_with_its_reason(mock: Any) -> None:
    server = mock({"responses": [tool_reply(("c1", "shout", {"text": "x"})), text_reply("ok")]})

    async def permission(call: tooloop.ToolCall) -> str:
        await asyncio.sleep(0)
        return "not today"

    def shout(text: str) -> str:
        """Shout."""
        raise AssertionError("denied: never runs")

    agent = agent_for(server, tools=[shout], permission=permission)
    asyncio.run(agent.arun("go"))
    assert tool_results(server.requests()[1])["c1"] == ("Permission denied: not today", True)
    # The sync run awaits the same permission on a loop of its own, as before.
    server.load({"responses": [tool_reply(("c2", "shout", {"text": "y"})), text_reply("ok")]})
    agent.run("again")
    assert tool_results(server.requests()[1])["c2"] == ("Permission denied: not today", True)


def test_an_async_tool_keeps_its_timeout_on_the_callers_loop(mock: Any) -> None:
    server = mock({"responses": [tool_reply(("c1", "slow", {})), text_reply("ok")]})
    cancelled: List[bool] = []

    async def slow() -> str:
        """Slow."""
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "late"

    agent = agent_for(server)
    agent.add_tool(tooloop.tool(slow, timeout=0.3))

    async def main() -> Any:
        started = time.monotonic()
        result = await agent.arun("go")
        await asyncio.sleep(0.2)  # the coroutine is told to stop a little after the core answered
        return result, time.monotonic() - started

    result, elapsed = asyncio.run(main())
    assert result.text == "ok" and elapsed < 5
    content, is_error = tool_results(server.requests()[1])["c1"]
    assert is_error and "time limit of 0.3 s" in content
    assert cancelled == [True]


def stall_then_ok(server: Any) -> None:
    server.load({"responses": [text_reply("second answer")]})


async def cancel_after_request(server: Any, task: "asyncio.Task[Any]", cancel: Callable[[], Any],
                               after: float = 0.4) -> float:
    """Wait until the server has the request and ``after`` seconds more (into the stall), call ``cancel``;
    seconds from then until ``task`` ends with CancelledError."""
    deadline = time.monotonic() + 20
    while not server.requests() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    await asyncio.sleep(after)
    started = time.monotonic()
    cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return time.monotonic() - started


def test_cancelling_an_arun_task_mid_stream_raises_cancelled_error_fast_and_keeps_the_conversation(mock: Any) -> None:
    server = mock("anthropic_stream_stall")  # stalls 30 s after the first delta
    agent = agent_for(server)

    async def main() -> float:
        task = asyncio.ensure_future(agent.arun("hi"))
        return await cancel_after_request(server, task, task.cancel)

    elapsed = asyncio.run(main())
    print(f"task.cancel() -> CancelledError in {elapsed * 1000:.0f} ms")
    assert elapsed < 0.2
    assert_valid_view(agent.messages)
    stall_then_ok(server)
    assert asyncio.run(agent.arun("again")).text == "second answer"
    assert_valid_view(server.requests()[0]["body"]["messages"])


def test_aclose_and_leaving_async_with_stop_an_astream_run(mock: Any) -> None:
    server = mock("anthropic_stream_stall")
    agent = agent_for(server)

    async def main() -> float:
        stream = agent.astream("hi")
        async for event in stream:
            if event.type == "text":
                break
        started = time.monotonic()
        await stream.aclose()
        elapsed = time.monotonic() - started
        server.load(scenario("anthropic_stream_stall"))
        async with agent.astream("hi again") as events:
            async for event in events:
                if event.type == "text":
                    break
        return elapsed

    elapsed = asyncio.run(main())
    assert elapsed < 0.2
    assert_valid_view(agent.messages)
    stall_then_ok(server)
    assert asyncio.run(agent.arun("next")).text == "second answer"


def test_wait_for_timeout_cancels_an_astream_consumer(mock: Any) -> None:
    server = mock("anthropic_stream_stall")
    agent = agent_for(server)

    async def consume() -> None:
        async for _ in agent.astream("hi"):
            pass

    async def main() -> float:
        started = time.monotonic()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(consume(), 0.8)
        return time.monotonic() - started - 0.8

    late = asyncio.run(main())
    assert late < 0.2
    assert_valid_view(agent.messages)
    stall_then_ok(server)
    assert asyncio.run(agent.arun("again")).text == "second answer"


def test_cancelling_mid_async_tool_answers_the_call_and_raises_fast(mock: Any) -> None:
    server = mock({"responses": [tool_reply(("c1", "wait_forever", {})), text_reply("after")]})
    entered: List[bool] = []
    tool_cancelled: List[bool] = []

    async def wait_forever() -> str:
        """Wait."""
        entered.append(True)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            tool_cancelled.append(True)
            raise
        return "never"

    agent = agent_for(server, tools=[wait_forever])

    async def main() -> float:
        task = asyncio.ensure_future(agent.arun("go"))
        while not entered:
            await asyncio.sleep(0.01)
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - started

    elapsed = asyncio.run(main())
    assert elapsed < 0.2 and tool_cancelled == [True]
    assert_valid_view(agent.messages)
    last_user = agent.messages[-1]
    assert last_user["content"][0]["tool_use_id"] == "c1"
    server.load({"responses": [text_reply("resumed")]})
    assert asyncio.run(agent.aresume()).text == "resumed"


def streaming_replies(n: int, text_chars: int = 400, delay_ms: int = 2) -> Dict[str, Any]:
    """``n`` text replies, each streamed in small writes with a pause between them (a run of ~0.3 s)."""
    reply = text_reply(("word " * (text_chars // 5)).strip())
    return {"responses": [{**reply, "chunk_size": 200, "delay_ms_between": delay_ms} for _ in range(n)]}


async def ticker(lags: List[float], stop: asyncio.Event, period: float = 0.005) -> None:
    """Sleeps ``period`` at a time and records how late each wake-up was (the loop's lag)."""
    while not stop.is_set():
        before = time.monotonic()
        await asyncio.sleep(period)
        lags.append(time.monotonic() - before - period)


def test_sixteen_agents_streaming_at_once_never_block_the_loop(mock: Any) -> None:
    server = mock(streaming_replies(16))
    agents = [agent_for(server) for _ in range(16)]

    async def consume(agent: Any) -> int:
        n = 0
        async for _ in agent.astream("hi"):
            n += 1
        return n

    async def main() -> Tuple[List[int], List[float], List[float]]:
        # The machine's own noise first: the same ticker on an idle loop (a loaded 2-core CI box preempts the
        # loop thread for tens of ms with no tooloop around), then with the agents streaming.
        idle: List[float] = []
        stop = asyncio.Event()
        tick = asyncio.ensure_future(ticker(idle, stop))
        await asyncio.sleep(0.5)
        stop.set()
        await tick
        lags: List[float] = []
        stop = asyncio.Event()
        tick = asyncio.ensure_future(ticker(lags, stop))
        counts = await asyncio.gather(*(consume(a) for a in agents))
        stop.set()
        await tick
        return list(counts), lags, idle

    counts, lags, idle = asyncio.run(main())
    assert all(c > 20 for c in counts), counts
    print(f"loop lag with 16 agents: max {max(lags) * 1000:.1f} ms over {len(lags)} ticks "
          f"(idle loop: max {max(idle) * 1000:.1f} ms)")
    assert max(lags) < 0.05 + max(idle)
    for a in agents:
        assert a.messages[-1]["content"][0]["text"].startswith("word word")


def test_arun_works_under_uvloop(mock: Any) -> None:
    uvloop = pytest.importorskip("uvloop")
    server = mock({"responses": [tool_reply(("c1", "lookup", {"key": "a"})), text_reply("done")]})
    seen: Dict[str, Any] = {}

    async def lookup(key: str) -> str:
        """Look up."""
        seen["loop"] = asyncio.get_running_loop()
        return "v"

    agent = agent_for(server, tools=[lookup])

    async def main() -> Any:
        result = await agent.arun("go")
        return result, asyncio.get_running_loop()

    if not hasattr(uvloop, "run"):
        pytest.skip("uvloop older than 0.18 (no uvloop.run)")
    result, loop = uvloop.run(main())
    assert result.text == "done"
    assert seen["loop"] is loop and type(loop).__module__.startswith("uvloop")


# -- an ASGI app serving an agent while other requests keep being answered ------------------------------------

def asgi_app(agent: Any) -> Callable[..., Awaitable[None]]:
    """A hand-written ASGI app: ``POST /ask`` runs the agent on the body, ``GET /ping`` answers at once."""

    async def app(scope: Dict[str, Any], receive: Callable[[], Awaitable[Dict[str, Any]]],
                  send: Callable[[Dict[str, Any]], Awaitable[None]]) -> None:
        assert scope["type"] == "http"
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if scope["path"] == "/ask":
            result = await agent.arun(body.decode())
            payload = json.dumps({"answer": result.text}).encode()
        else:
            payload = b'{"pong": true}'
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": payload})

    return app


async def call_asgi(app: Callable[..., Awaitable[None]], method: str, path: str, body: bytes = b"") -> Dict[str, Any]:
    sent: List[Dict[str, Any]] = []

    async def receive() -> Dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Dict[str, Any]) -> None:
        sent.append(message)

    await app({"type": "http", "method": method, "path": path, "headers": []}, receive, send)
    assert sent[0]["status"] == 200
    result: Dict[str, Any] = json.loads(sent[1]["body"])
    return result


def test_an_asgi_app_answers_other_requests_while_an_agent_runs(mock: Any) -> None:
    slow = {**text_reply("the agent's answer"), "delay_ms": 600}
    server = mock({"responses": [slow]})
    app = asgi_app(agent_for(server))

    async def main() -> Tuple[Dict[str, Any], List[float], float]:
        started = time.monotonic()
        ask = asyncio.ensure_future(call_asgi(app, "POST", "/ask", b"question"))
        pings: List[float] = []
        while not ask.done():
            t = time.monotonic()
            assert await call_asgi(app, "GET", "/ping") == {"pong": True}
            pings.append(time.monotonic() - t)
            await asyncio.sleep(0.02)
        return await ask, pings, time.monotonic() - started

    answer, pings, elapsed = asyncio.run(main())
    assert answer == {"answer": "the agent's answer"}
    assert elapsed >= 0.6 and len(pings) >= 10  # pings kept being answered while the agent waited
    assert max(pings) < 0.05


def test_the_async_example_runs(mock: Any) -> None:
    from pathlib import Path

    from mockctl import mock_env

    server = mock("anthropic_tool_then_text")
    example = Path(__file__).resolve().parents[2] / "examples" / "python" / "async_agent.py"
    proc = subprocess.run([sys.executable, str(example), "Weather in Paris?"], capture_output=True, text=True,
                          timeout=60, env={**os.environ, **mock_env(server.base_url)})
    assert proc.returncode == 0, proc.stderr
    assert "[tool] get_weather({'city': 'Paris'})" in proc.stdout
    assert "It is currently 18 °C" in proc.stdout
    assert list(tool_results(server.requests()[1]).values()) == [("18 °C and sunny in Paris", False)]


def test_a_refused_second_arun_leaves_the_first_runs_tools_on_the_loop(mock: Any) -> None:
    server = mock({"responses": [tool_reply(("c1", "gate", {})), tool_reply(("c2", "where", {})), text_reply("end")]})
    seen: Dict[str, Any] = {}

    async def main() -> Any:
        gate_open = asyncio.Event()
        entered = asyncio.Event()

        async def gate() -> str:
            """Wait for the gate."""
            entered.set()
            await gate_open.wait()
            return "open"

        async def where() -> str:
            """Where am I."""
            seen["loop"] = asyncio.get_running_loop()
            return "here"

        agent = agent_for(server, tools=[gate, where])
        first = asyncio.ensure_future(agent.arun("go"))
        await entered.wait()
        with pytest.raises(tooloop.BusyError):
            await agent.arun("second")
        gate_open.set()
        result = await first
        assert seen["loop"] is asyncio.get_running_loop()
        return result

    assert asyncio.run(main()).text == "end"


def test_cancelling_mid_sync_tool_with_a_timeout_raises_fast_and_answers_the_call(mock: Any) -> None:
    server = mock({"responses": [tool_reply(("c1", "slow", {})), text_reply("after")]})
    entered = threading.Event()

    def slow() -> str:
        """Slow."""
        entered.set()
        time.sleep(3)
        return "late"

    agent = agent_for(server)
    agent.add_tool(tooloop.tool(slow, timeout=60))

    async def main() -> float:
        task = asyncio.ensure_future(agent.arun("go"))
        while not entered.is_set():
            await asyncio.sleep(0.01)
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - started

    elapsed = asyncio.run(main())
    assert elapsed < 0.2
    assert_valid_view(agent.messages)
    assert agent.messages[-1]["content"][0]["tool_use_id"] == "c1"
