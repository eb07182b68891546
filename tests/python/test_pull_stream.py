"""Client.stream pulled on the calling thread: no worker thread, the GIL released while it waits,
cancel() from another thread and Ctrl+C (SIGINT) ending a stalled stream within 200 ms, and event dicts built
from the wire bytes equal to the wire JSON."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any, Dict, List
from urllib.parse import urlparse

import pytest

import tooloop
from _support import mock_env, seconds_to_end, sigint_into_stall, text_reply

REQUEST: Dict[str, Any] = {"model": "claude-sonnet-4-6", "max_tokens": 256,
                           "messages": [{"role": "user", "content": "hi"}]}


def test_anthropic_client_stream_reads_on_the_calling_thread_without_a_worker(mock: Any) -> None:
    # A fresh process: no idle worker from an earlier test. The worker path names its threads tooloop-run.
    server = mock([text_reply("pulled on this thread " * 20)])
    script = textwrap.dedent("""
        import os, sys, tooloop
        def names():
            out = []
            for t in os.listdir("/proc/self/task"):
                with open(f"/proc/self/task/{t}/comm") as f:
                    out.append(f.read().strip())
            return out
        client = tooloop.Client(base_url=os.environ["TOOLOOP_MOCK_URL"], api_key="k")
        seen = []
        with client.stream({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}) as s:
            for event in s:
                seen.extend(names())
            text = s.get_final_text()
        assert text == "pulled on this thread " * 20, text
        print("tooloop-run" in seen, type(s._run).__name__)
    """)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                       env={**os.environ, **mock_env(server.base_url)})
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["False", "_Stream"]


def test_cancel_from_another_thread_ends_a_stalled_pulled_stream_within_200_ms(mock: Any) -> None:
    server = mock("anthropic_stream_stall")
    stream = tooloop.Client(base_url=server.base_url, api_key="k").stream(REQUEST)
    first = next(stream)
    assert first["type"] == "message_start"
    # While this thread waits in the stall, another Python thread runs (the GIL is released).
    ticks: List[float] = []
    stop = threading.Event()

    def tick() -> None:
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.005)

    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        took, info = seconds_to_end(stream, stream.cancel, 0.4, tooloop.Cancelled)
    finally:
        stop.set()
        ticker.join()
    print(f"cancel() → the stalled stream ended after {took * 1000:.0f} ms; {len(ticks)} ticks of another thread")
    assert took < 0.2 + 0.15  # 200 ms, with room for a loaded machine's scheduler
    assert len(ticks) > 20
    assert info.value.partial is not None
    assert info.value.partial["content"] == [{"type": "text", "text": "This tex"}]


SIGINT_SCRIPT = textwrap.dedent("""
    import os, sys, time
    import tooloop

    client = tooloop.Client(base_url=os.environ["TOOLOOP_MOCK_URL"], api_key="sk-ant-mock")
    stream = client.stream({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
    assert type(stream._run).__name__ == "_Stream"
    try:
        for event in stream if sys.argv[1] == "events" else stream.text_stream:
            pass
    except KeyboardInterrupt:
        print("KeyboardInterrupt at", time.monotonic(), flush=True)
        sys.exit(42)
    sys.exit(1)
""")


@pytest.mark.parametrize("mode", ["events", "text"])
def test_sigint_during_a_stalled_pulled_stream_raises_keyboard_interrupt_within_200_ms(mock: Any, mode: str) -> None:
    code, out, err, sent = sigint_into_stall(mock("anthropic_stream_stall"), SIGINT_SCRIPT, mode)
    assert code == 42, (out, err)
    took = float(out.split()[-1]) - sent  # when the script saw KeyboardInterrupt (same monotonic clock)
    print(f"SIGINT → KeyboardInterrupt after {took * 1000:.0f} ms")
    assert took < 0.2 + 0.15


def test_event_dicts_equal_the_wire_json(mock: Any) -> None:
    # Text deltas are built from a borrowed parse, the rest parsed in full: either way each dict must be the
    # event's JSON as sent, escapes and non-ASCII included; a text delta with an extra field too.
    text = 'plain "quoted" \\ back\\slash\nnew line, ünïcödé, 東京, emoji 🎉 and \t tab'
    reply = text_reply(text)
    server = mock([reply, reply])
    u = urlparse(server.base_url)
    conn = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port)
    conn.request("POST", "/v1/messages", json.dumps({**REQUEST, "stream": True}),
                 {"content-type": "application/json", "x-api-key": "k", "anthropic-version": "2023-06-01"})
    body = conn.getresponse().read().decode()
    conn.close()
    wire = [json.loads(line[len("data: "):]) for line in body.splitlines() if line.startswith("data: ")]
    assert sum(1 for e in wire if e["type"] == "content_block_delta") > 1
    with tooloop.Client(base_url=server.base_url, api_key="k").stream(REQUEST) as stream:
        got = list(stream)
    assert got == wire
    # An extra field in a text delta is kept (the full parse takes over).
    extra = [{"raw": "event: message_start\ndata: " + json.dumps({"type": "message_start", "message": {
        "id": "msg_x", "type": "message", "role": "assistant", "model": "m", "content": [], "stop_reason": None,
        "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}}) + "\n\n"},
        {"raw": 'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
                '"content_block":{"type":"text","text":""}}\n\n'},
        {"raw": 'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
                '"delta":{"type":"text_delta","text":"hi"},"x_extra":1}\n\n'},
        {"raw": 'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'},
        {"raw": 'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn",'
                '"stop_sequence":null},"usage":{"output_tokens":1}}\n\n'},
        {"raw": 'event: message_stop\ndata: {"type":"message_stop"}\n\n'}]
    server.load({"responses": [{"sse": extra}]})
    with tooloop.Client(base_url=server.base_url, api_key="k").stream(REQUEST) as stream:
        events = list(stream)
        assert stream.get_final_text() == "hi"
    assert events[2] == {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"},
                         "x_extra": 1}


def _closed_connections_to(port: int) -> int:
    """Client sockets to `port` in TIME_WAIT (closed by this side: a connection that was not reused)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if int(cols[2].rsplit(":", 1)[1], 16) == port and cols[3] == "06":
                count += 1
    return count


def test_finished_streams_hand_their_connection_back_to_the_pool(mock: Any) -> None:
    # A stream that ends at message_stop reads the rest of its (chunked) body, so the next request reuses the
    # connection instead of opening one: small streamed requests stay as cheap as create().
    server = mock([text_reply(f"reply {i}") for i in range(20)])
    port = urlparse(server.base_url).port or 0
    client = tooloop.Client(base_url=server.base_url, api_key="k")
    for i in range(20):
        with client.stream(REQUEST) as stream:
            assert "".join(stream.text_stream) == f"reply {i}"
    closed = _closed_connections_to(port)
    print(f"20 streamed requests: {closed} connections closed")
    assert closed <= 2


def test_event_dicts_built_from_the_text_equal_the_wire_json_for_every_kind_of_value(mock: Any) -> None:
    # Every event but the non-text deltas and errors reaches Python as its JSON text and is built straight
    # from it: ints (negative, past i64), floats, exponents, escapes, nesting, null and booleans, duplicate
    # keys (the last one wins, where the first stood) and event types newer than the code must come out as
    # json.loads gives them, and the stream must still fold into its message.
    start = ('{"type":"message_start","message":{"id":"msg_v","type":"message","role":"assistant","model":"m",'
             '"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1},'
             '"x":{"neg":-5,"big":18446744073709551615,"f":1.5,"exp":1e5,"esc":"\\u00e9\\ud83d\\ude00\\n\\"",'
             '"nested":[[],{},[1,[2,{"a":null}]]],"t":true,"f2":false}}}')
    events = [
        ("message_start", start),
        ("ping", '{"type":"ping","dup":1,"other":2,"dup":3}'),
        ("content_block_start", '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}'),
        ("content_block_delta", '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}}'),
        ("future_thing", '{"type":"future_thing","payload":{"k":[1,2.25,"s"]}}'),
        ("content_block_stop", '{"type":"content_block_stop","index":0}'),
        ("message_delta", '{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},'
                          '"usage":{"output_tokens":2}}'),
        ("message_stop", '{"type":"message_stop"}'),
    ]
    server = mock([])
    server.load({"responses": [{"sse": [{"raw": f"event: {name}\ndata: {data}\n\n"} for name, data in events]}]})
    with tooloop.Client(base_url=server.base_url, api_key="k").stream(REQUEST) as stream:
        got = list(stream)
        final = stream.final_message()
    assert got == [json.loads(data) for _, data in events]
    assert [list(e) for e in got] == [list(json.loads(data)) for _, data in events], "key order as sent"
    assert isinstance(got[0]["message"]["x"]["exp"], float) and got[0]["message"]["x"]["big"] == 2**64 - 1
    assert final["content"] == [{"type": "text", "text": "ok"}] and final["usage"]["output_tokens"] == 2


def test_every_stream_hands_out_dicts_of_its_own(mock: Any) -> None:
    # The events' keys and type names are shared interned strings; the dicts themselves never are: a caller
    # that changes an event or the final message changes nothing another stream (or create) hands out.
    server = mock([text_reply("same answer")] * 3)
    client = tooloop.Client(base_url=server.base_url, api_key="k")
    with client.stream(REQUEST) as stream:
        first = list(stream)
        final = stream.final_message()
    wire = json.loads(json.dumps(first))
    for event in first:
        event["type"] = "changed"
        event.clear()
    final["content"].append({"type": "text", "text": "added"})
    final["usage"]["output_tokens"] = -1
    with client.stream(REQUEST) as stream:
        second = list(stream)
        again = stream.final_message()
    assert second == wire
    assert again["content"] == [{"type": "text", "text": "same answer"}] and again["usage"]["output_tokens"] >= 0
    assert all(type(k) is str for e in second for k in e) and list(second[0]) == list(wire[0])


CHAT = {"id": "chatcmpl-p", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "pulled chat text, in pieces"},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 6, "total_tokens": 11}}
CHAT_REQUEST: Dict[str, Any] = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}


def test_an_openai_client_stream_is_read_on_the_calling_thread_with_the_wire_chunks_and_the_message(
        mock: Any) -> None:
    server = mock([])
    server.load({"responses": [], "routes": [{"match": {}, "response": {"openai": CHAT, "delta_chars": 4}}]})
    u = urlparse(server.base_url)
    conn = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port)
    conn.request("POST", "/v1/chat/completions", json.dumps({**CHAT_REQUEST, "stream": True}),
                 {"content-type": "application/json"})
    body = conn.getresponse().read().decode()
    conn.close()
    wire = [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: {")]
    client = tooloop.Client("openai", base_url=server.base_url + "/v1", api_key="k")
    with client.stream(CHAT_REQUEST) as stream:
        assert type(stream._run).__name__ == "_Stream", "pulled on this thread, not a worker's run"
        chunks = list(stream)
        final = stream.final_message()
    assert chunks == wire and len(chunks) > 3
    made = client.create(CHAT_REQUEST)
    assert final["id"] == made["id"] and final["object"] == "chat.completion"
    assert [(c["message"], c["finish_reason"]) for c in final["choices"]] == \
        [(c["message"], c["finish_reason"]) for c in made["choices"]]
    with client.stream(CHAT_REQUEST) as stream:
        pieces = list(stream.text_stream)
        assert "".join(pieces) == CHAT["choices"][0]["message"]["content"]  # type: ignore[index]
        assert stream.get_final_text() == "".join(pieces)


def test_a_stalled_openai_client_stream_ends_within_200_ms_on_cancel(mock: Any) -> None:
    stall = {"type": "stall", "after_events": 3, "ms": 30000}
    server = mock([{"openai": CHAT, "delta_chars": 4, "fault": stall}])
    stream = tooloop.Client("openai", base_url=server.base_url + "/v1", api_key="k").stream(CHAT_REQUEST)
    assert next(stream)["object"] == "chat.completion.chunk"
    took, _ = seconds_to_end(stream, stream.cancel, 0.3, tooloop.Cancelled)
    print(f"cancel() → the stalled OpenAI stream ended after {took * 1000:.0f} ms")
    assert took < 0.2 + 0.15


OPENAI_SIGINT_SCRIPT = textwrap.dedent("""
    import os, sys, time
    import tooloop

    client = tooloop.Client("openai", base_url=os.environ["TOOLOOP_MOCK_URL"] + "/v1", api_key="k")
    stream = client.stream({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert type(stream._run).__name__ == "_Stream"
    try:
        for event in stream if sys.argv[1] == "events" else stream.text_stream:
            pass
    except KeyboardInterrupt:
        print("KeyboardInterrupt at", time.monotonic(), flush=True)
        sys.exit(42)
    sys.exit(1)
""")


@pytest.mark.parametrize("mode", ["events", "text"])
def test_sigint_during_a_stalled_openai_client_stream_raises_keyboard_interrupt_within_200_ms(
        mock: Any, mode: str) -> None:
    server = mock([{"openai": CHAT, "delta_chars": 4, "fault": {"type": "stall", "after_events": 3, "ms": 30000}}])
    code, out, err, sent = sigint_into_stall(server, OPENAI_SIGINT_SCRIPT, mode)
    assert code == 42, (out, err)
    took = float(out.split()[-1]) - sent
    print(f"SIGINT → KeyboardInterrupt after {took * 1000:.0f} ms")
    assert took < 0.2 + 0.15
