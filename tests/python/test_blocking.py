"""Blocking done right: the GIL is released while a run waits, cancel() works from another thread, Ctrl+C
(SIGINT) stops a stalled run within a second with the conversation intact, two agents in two threads run
at the same time, and Client calls are cancellable the same way."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any, Dict, List

import pytest

import tooloop
from _support import agent_for, assert_valid_view, mock_env, sigint_into_stall, text_reply


def slow_text_reply(text: str, ms_between: int) -> Dict[str, Any]:
    """A text reply streamed one 8-character delta at a time, `ms_between` ms apart."""
    return {**text_reply(text), "delay_ms_between": ms_between}


def test_cancel_from_another_thread_stops_a_stalled_run(mock: Any) -> None:
    server = mock("anthropic_stream_stall")
    agent = agent_for(server)
    timer = threading.Timer(0.4, agent.cancel)
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(tooloop.Cancelled) as info:
            agent.run("hi")
    finally:
        timer.cancel()
    elapsed = time.monotonic() - started
    print(f"cancel() at 0.4 s → run ended after {elapsed:.2f} s")
    assert elapsed < 1.5
    assert info.value.partial is not None
    assert info.value.partial["content"] == [{"type": "text", "text": "This tex"}]
    assert_valid_view(agent.messages)
    server.load({"responses": [text_reply("still works")]})
    assert agent.run("again").text == "still works"


def test_cancel_between_turns_stops_before_the_next_request(mock: Any) -> None:
    server = mock("anthropic_tool_then_text")
    agent = agent_for(server)

    @agent.tool
    def get_weather(city: str) -> str:
        """Weather."""
        agent.cancel()  # from inside the run (the worker thread)
        return "sunny"

    with pytest.raises(tooloop.Cancelled):
        agent.run("weather?")
    assert len(server.requests()) == 1
    assert_valid_view(agent.messages)
    assert agent.messages[-1]["content"][0]["type"] == "tool_result"


def test_the_gil_is_released_while_a_run_waits(mock: Any) -> None:
    server = mock([slow_text_reply("x" * 80, 100)])  # ~1 s of streaming
    agent = agent_for(server)
    ticks = 0
    stop = threading.Event()

    def count() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.001)

    counter = threading.Thread(target=count)
    counter.start()
    try:
        agent.run("hi")
    finally:
        stop.set()
        counter.join()
    print(f"a Python thread ticked {ticks} times during the run")
    assert ticks > 100


def test_two_agents_in_two_threads_progress_at_the_same_time(mock: Any) -> None:
    # Each stream is 13 writes 80 ms apart (~1 s); one alone first, to know what sequential would cost.
    solo = mock([slow_text_reply("s" * 64, 80)])
    started = time.monotonic()
    agent_for(solo).run("go")
    alone = time.monotonic() - started

    servers = [mock([slow_text_reply("a" * 64, 80)]), mock([slow_text_reply("b" * 64, 80)])]
    stamps: Dict[int, List[float]] = {0: [], 1: []}
    results: Dict[int, str] = {}
    errors: List[BaseException] = []

    def work(i: int) -> None:
        try:
            agent = agent_for(servers[i])
            for event in agent.stream("go"):
                if event.type == "text":
                    stamps[i].append(time.monotonic())
                elif event.type == "done":
                    results[i] = event.result.text
        except BaseException as e:  # reported to the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    both = time.monotonic() - started
    assert not errors, errors
    assert results == {0: "a" * 64, 1: "b" * 64}
    print(f"one stream alone: {alone:.2f} s; two in two threads: {both:.2f} s")
    assert both < 1.6 * alone  # sequential would be 2x
    # Their deltas interleave in time.
    assert stamps[0][0] < stamps[1][-1] and stamps[1][0] < stamps[0][-1]


SIGINT_SCRIPT = textwrap.dedent("""
    import json, os, sys, time
    import tooloop

    agent = tooloop.Agent(base_url=os.environ["TOOLOOP_MOCK_URL"], api_key="sk-ant-mock")
    MODE = sys.argv[1]
    try:
        if MODE == "run":
            agent.run("hello")
        else:
            for event in agent.stream("hello"):
                pass
    except KeyboardInterrupt:
        print("KeyboardInterrupt at", time.monotonic(), flush=True)
        print(json.dumps({"messages": agent.messages, "history": agent.history}), flush=True)
        sys.exit(42)
    print("the run was not interrupted", flush=True)
    sys.exit(1)
""")


@pytest.mark.parametrize("mode", ["run", "stream"])
def test_sigint_during_a_stalled_stream_raises_keyboard_interrupt_within_a_second(mock: Any, mode: str) -> None:
    code, out, err, sent = sigint_into_stall(mock("anthropic_stream_stall"), SIGINT_SCRIPT, mode)
    elapsed = time.monotonic() - sent
    print(f"SIGINT → process exited after {elapsed:.3f} s")
    assert code == 42, (out, err)
    assert elapsed < 1.0
    state = json.loads(out.splitlines()[1])
    assert_valid_view(state["messages"])
    assert state["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]
    last = state["history"][-1]
    assert (last["role"], last["status"]) == ("assistant", "error")
    assert last["content"] == [{"type": "text", "text": "This tex"}]


def test_sigint_while_a_python_tool_runs_ends_the_run_without_another_request(mock: Any, tmp_path: Any) -> None:
    # The tool (Python, on the calling thread) gets the KeyboardInterrupt; the run stops right there, without a
    # second request, and the conversation stays valid (tests/python/test_run_on_caller.py times it).
    server = mock("anthropic_tool_then_text")
    marker = tmp_path / "tool_started"
    script = textwrap.dedent(f"""
        import json, os, sys, time
        import tooloop
        agent = tooloop.Agent(base_url=os.environ["TOOLOOP_MOCK_URL"], api_key="k")
        @agent.tool
        def get_weather(city: str) -> str:
            "Weather."
            open({str(marker)!r}, "w").close()
            time.sleep(0.5)
            return "sunny"
        try:
            agent.run("weather?")
        except KeyboardInterrupt:
            print(json.dumps(agent.messages), flush=True)
            sys.exit(42)
        sys.exit(1)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **mock_env(server.base_url)})
    try:
        deadline = time.monotonic() + 20
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 42, (out, err)
    messages = json.loads(out)
    assert_valid_view(messages)
    assert messages[-1]["content"][0]["type"] == "tool_result"
    assert len(server.requests()) == 1


def test_client_create_is_cancelled_by_sigint(mock: Any) -> None:
    server = mock([{**text_reply("late"), "delay_ms": 30000}])
    script = textwrap.dedent("""
        import os, sys, tooloop
        client = tooloop.Client(base_url=os.environ["TOOLOOP_MOCK_URL"], api_key="k")
        try:
            client.create({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
        except KeyboardInterrupt:
            sys.exit(42)
        sys.exit(1)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, **mock_env(server.base_url)})
    try:
        deadline = time.monotonic() + 20
        while not server.requests() and time.monotonic() < deadline:
            time.sleep(0.02)
        sent = time.monotonic()
        os.kill(proc.pid, signal.SIGINT)
        proc.wait(timeout=10)
        elapsed = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    print(f"SIGINT → client process exited after {elapsed:.3f} s")
    assert proc.returncode == 42
    assert elapsed < 1.0


def test_keyboard_interrupt_is_not_swallowed_in_the_main_thread(mock: Any) -> None:
    # The in-process version of Ctrl+C: a signal handler raising in the main thread ends the wait.
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are delivered to the main thread only")
    server = mock("anthropic_stream_stall")
    agent = agent_for(server)

    class Alarm(Exception):
        pass

    def on_alarm(signum: int, frame: Any) -> None:
        raise Alarm()

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    started = time.monotonic()
    try:
        with pytest.raises(Alarm):
            agent.run("hi")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert time.monotonic() - started < 1.5
    assert_valid_view(agent.messages)
    server.load({"responses": [text_reply("ok")]})
    assert agent.run("again").text == "ok"


def test_cancel_right_after_starting_is_not_lost() -> None:
    # The run may not have begun on its worker when cancel() comes; it must still be cancelled. The worker
    # needs the GIL to call the Python model: a long switch interval keeps a loaded machine from handing it
    # over between stream() and cancel(), which would let the run finish first (a race of the test, not of
    # the library).
    interval = sys.getswitchinterval()
    sys.setswitchinterval(5.0)
    try:
        for _ in range(20):
            agent = tooloop.Agent(provider=lambda req: {"content": "answered"})
            stream = agent.stream("hi")
            agent.cancel()
            with pytest.raises(tooloop.Cancelled):
                list(stream)
            assert_valid_view(agent.messages)
    finally:
        sys.setswitchinterval(interval)
