"""Self-tests of the mock server: the bytes on the wire, not just what an HTTP library makes of them.

Run with: python3 -m pytest tests/mock -q
"""

from __future__ import annotations

import base64
import copy
import json
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import mockserver  # noqa: E402
from mockctl import MockServer  # noqa: E402

SCENARIOS = sorted((HERE.parent / "scenarios").glob("*.json"))


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def compact(value) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


# ------------------------------------------------------------------------------------------ raw client

class Response:
    def __init__(self, status, headers, body, chunks, terminated):
        self.status, self.headers, self.body = status, headers, body
        self.chunks, self.terminated = chunks, terminated


class Wire:
    """A byte-level HTTP/1.1 client over one socket, so tests see chunk framing and early EOFs."""

    def __init__(self, port: int, timeout: float = 10.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _fill(self) -> bool:
        data = self.sock.recv(65536)
        self.buf += data
        return bool(data)

    def readline(self) -> bytes:
        while b"\n" not in self.buf:
            if not self._fill():
                line, self.buf = self.buf, b""
                return line
        line, _, self.buf = self.buf.partition(b"\n")
        return line + b"\n"

    def read(self, n: int) -> bytes:
        while len(self.buf) < n and self._fill():
            pass
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def at_eof(self) -> bool:
        return not self.buf and not self._fill()

    def send(self, method="POST", path="/v1/messages", body=None, headers=None, version="HTTP/1.1"):
        data = body if isinstance(body, bytes) else (b"" if body is None else json.dumps(body).encode())
        lines = [f"{method} {path} {version}", "Host: 127.0.0.1"]
        hdrs = {"Content-Type": "application/json", "Content-Length": str(len(data))}
        hdrs.update(headers or {})
        lines += [f"{k}: {v}" for k, v in hdrs.items()]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + data)

    def read_head(self):
        status = int(self.readline().split()[1])
        headers = {}
        while True:
            line = self.readline().decode("latin-1")
            if line in ("\r\n", ""):
                return status, headers
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()

    def read_chunk(self):
        """The next chunk's data, b"" for the terminating chunk, None on EOF before it."""
        line = self.readline()
        if not line:
            return None
        size = int(line.strip(), 16)
        if size == 0:
            assert self.readline() == b"\r\n"
            return b""
        data = self.read(size)
        assert self.read(2) == b"\r\n", "chunk data must be followed by CRLF"
        return data

    def response(self) -> Response:
        status, headers = self.read_head()
        if headers.get("transfer-encoding") == "chunked":
            chunks = []
            while True:
                chunk = self.read_chunk()
                if not chunk:
                    return Response(status, headers, b"".join(chunks), chunks, chunk == b"")
                chunks.append(chunk)
        body = self.read(int(headers.get("content-length", "0")))
        return Response(status, headers, body, [body], True)

    def exchange(self, **kw) -> Response:
        self.send(**kw)
        return self.response()


# ------------------------------------------------------------------------------------- reference decoders

def parse_sse(data: bytes):
    """Reference SSE decoder: (event name or None, data string) for each dispatched event."""
    events, name, lines = [], None, []
    for line in re.split(r"\r\n|\r|\n", data.decode("utf-8")):
        if line == "":
            if lines:
                events.append((name, "\n".join(lines)))
            name, lines = None, []
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                name = value
            elif field == "data":
                lines.append(value)
    return events


def reassemble_anthropic(events):
    """What an SDK's stream accumulator builds from Messages API events."""
    msg, partial = None, {}
    for name, raw in events:
        data = json.loads(raw)
        assert data["type"] == name, "the event: line and data.type must agree"
        if name == "message_start":
            msg = copy.deepcopy(data["message"])
        elif name == "content_block_start":
            assert data["index"] == len(msg["content"])
            msg["content"].append(copy.deepcopy(data["content_block"]))
            partial[data["index"]] = ""
        elif name == "content_block_delta":
            block, delta = msg["content"][data["index"]], data["delta"]
            kind = delta["type"]
            if kind == "text_delta":
                block["text"] += delta["text"]
            elif kind == "thinking_delta":
                block["thinking"] += delta["thinking"]
            elif kind == "signature_delta":
                block["signature"] = delta["signature"]
            elif kind == "citations_delta":
                block.setdefault("citations", []).append(delta["citation"])
            elif kind == "input_json_delta":
                partial[data["index"]] += delta["partial_json"]
            else:
                raise AssertionError(f"unexpected delta {kind}")
        elif name == "content_block_stop":
            block = msg["content"][data["index"]]
            if block["type"] in mockserver.TOOL_BLOCK_KINDS:
                block["input"] = json.loads(partial[data["index"]] or "{}")
        elif name == "message_delta":
            msg.update(data["delta"])
            msg["usage"] = data["usage"]
    return msg


def reassemble_openai(datas):
    """What an OpenAI-compatible stream accumulator builds from chat.completion.chunk data lines."""
    assert datas[-1] == "[DONE]"
    chunks = [json.loads(d) for d in datas[:-1]]
    out = {k: v for k, v in chunks[0].items() if k not in ("choices", "usage")}
    out["object"] = "chat.completion"
    choices = {}
    for chunk in chunks:
        assert chunk["object"] == "chat.completion.chunk"
        for ch in chunk["choices"]:
            c = choices.setdefault(ch["index"], {"index": ch["index"], "message": {}, "finish_reason": None})
            m, d = c["message"], ch["delta"]
            for key in ("role",):
                if key in d:
                    m[key] = d[key]
            for key in ("content", "reasoning_content", "reasoning"):
                if d.get(key) is not None:
                    m[key] = m.get(key, "") + d[key]
            for frag in d.get("tool_calls", []):
                calls = m.setdefault("tool_calls", [])
                if frag["index"] == len(calls):
                    calls.append({"id": frag["id"], "type": frag["type"],
                                  "function": {"name": frag["function"]["name"], "arguments": ""}})
                calls[frag["index"]]["function"]["arguments"] += frag["function"].get("arguments", "")
            if ch["finish_reason"]:
                c["finish_reason"] = ch["finish_reason"]
        if chunk.get("usage"):
            assert chunk["choices"] == [], "usage comes in a final chunk with empty choices"
            out["usage"] = chunk["usage"]
    out["choices"] = [choices[i] for i in sorted(choices)]
    return out


# ---------------------------------------------------------------------------------------------- fixtures

@pytest.fixture
def mock():
    with MockServer() as server:
        yield server


def serve(mock, *responses):
    mock.load({"responses": list(responses)})
    return mock


# ------------------------------------------------------------------------------------------------ bodies

def test_json_body_is_byte_exact(mock):
    payload = {"type": "message", "text": "caf\u00e9 \U0001F642", "n": [1, 2.5, None]}
    serve(mock, {"json": payload, "status": 201, "headers": {"X-Extra": "1"}})
    with Wire(mock.port) as w:
        r = w.exchange(body={"model": "m"})
    assert r.status == 201
    assert r.body == compact(payload)
    assert r.headers["content-length"] == str(len(r.body))
    assert r.headers["content-type"] == "application/json"
    assert r.headers["request-id"] == "req_mock_0"
    assert r.headers["x-extra"] == "1"


def test_given_headers_replace_defaults(mock):
    serve(mock, {"json": {}, "headers": {"Request-Id": "req_custom", "Content-Type": "application/x-test"}})
    with Wire(mock.port) as w:
        headers = w.exchange(body={}).headers
    assert headers["request-id"] == "req_custom"
    assert headers["content-type"] == "application/x-test"


def test_raw_and_empty_bodies(mock):
    serve(mock, {"raw": '{"city": "Par', "content_type": "text/plain"}, {"status": 204})
    with Wire(mock.port) as w:
        raw = w.exchange(body={})
        empty = w.exchange(body={})
    assert raw.body == b'{"city": "Par' and raw.headers["content-type"] == "text/plain"
    assert empty.status == 204 and empty.body == b"" and empty.headers["content-length"] == "0"
    assert "content-type" not in empty.headers


def test_sse_items_and_line_endings(mock):
    items = [{"comment": "keep-alive"}, {"event": "a", "id": "7", "data": {"x": "\u00e9"}},
             {"data": "line1\nline2"}, {"raw": "event: b\r\ndata: raw\r\n\r\n"}]
    for eol in ("\n", "\r\n", "\r"):
        serve(mock, {"sse": items, "line_ending": eol})
        with Wire(mock.port) as w:
            r = w.exchange(body={})
        assert r.headers["content-type"].startswith("text/event-stream")
        assert r.headers["transfer-encoding"] == "chunked" and r.terminated
        expected = (f": keep-alive{eol}event: a{eol}id: 7{eol}data: {{\"x\":\"\u00e9\"}}{eol}{eol}"
                    f"data: line1{eol}data: line2{eol}{eol}event: b\r\ndata: raw\r\n\r\n").encode()
        assert r.body == expected
        assert len(r.chunks) == len(items), "without chunk_size each item is one HTTP chunk"
        assert parse_sse(r.body) == [("a", '{"x":"\u00e9"}'), (None, "line1\nline2"), ("b", "raw")]


def test_chunk_size_splits_anywhere(mock):
    items = [{"event": "e", "data": {"text": "\u00e9\u00e9\u00e9\u20ac\U0001F642" * 3}} for _ in range(3)]
    serve(mock, {"sse": items}, {"sse": items, "chunk_size": 5})
    with Wire(mock.port) as w:
        whole = w.exchange(body={})
        split = w.exchange(body={})
    assert split.body == whole.body
    assert [len(c) for c in split.chunks[:-1]] == [5] * (len(split.chunks) - 1)
    assert 0 < len(split.chunks[-1]) <= 5

    def decodes(chunk):
        try:
            chunk.decode("utf-8")
            return True
        except UnicodeDecodeError:
            return False
    assert not all(decodes(c) for c in split.chunks), "some boundary must fall inside a UTF-8 character"


def test_chunk_size_on_content_length_body(mock):
    payload = {"text": "x" * 100}
    serve(mock, {"json": payload, "chunk_size": 7, "delay_ms_between": 1})
    with Wire(mock.port) as w:
        r = w.exchange(body={})
    assert r.body == compact(payload) and "transfer-encoding" not in r.headers


def test_delays(mock):
    serve(mock, {"json": {}, "delay_ms": 300}, {"sse": [{"data": "a"}, {"data": "b"}, {"data": "c"}],
                                                 "delay_ms_between": 150})
    with Wire(mock.port) as w:
        t0 = time.monotonic()
        w.exchange(body={})
        t1 = time.monotonic()
        w.exchange(body={})
        t2 = time.monotonic()
    assert t1 - t0 >= 0.3
    assert t2 - t1 >= 0.3  # two gaps between three writes


# ---------------------------------------------------------------------------------- anthropic synthesis

CITED = {"id": "msg_01Cite", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
         "content": [
             {"type": "text", "text": "The grass is green.", "citations": [
                 {"type": "char_location", "cited_text": "The grass is green.", "document_index": 0,
                  "document_title": "Doc", "start_char_index": 0, "end_char_index": 20}]},
             {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {"query": "grass"}},
             {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01", "content": []},
             {"type": "some_future_block", "payload": {"a": 1}}],
         "stop_reason": "end_turn", "stop_sequence": None,
         "usage": {"input_tokens": 10, "output_tokens": 20}}

ANTHROPIC_MESSAGES = [pytest.param(r["anthropic"], id=f"{p.stem}[{i}]")
                      for p in SCENARIOS for i, r in enumerate(load(p)["responses"]) if "anthropic" in r]
ANTHROPIC_MESSAGES.append(pytest.param(CITED, id="citations_and_unknown_blocks"))


@pytest.mark.parametrize("message", ANTHROPIC_MESSAGES)
def test_anthropic_stream_reconstructs_message(mock, message):
    serve(mock, {"anthropic": message, "delta_chars": 5}, {"anthropic": message})
    with Wire(mock.port) as w:
        streamed = w.exchange(body={"model": "claude-sonnet-4-6", "stream": True})
        plain = w.exchange(body={"model": "claude-sonnet-4-6"})
    assert plain.body == compact(message)
    assert streamed.terminated
    events = parse_sse(streamed.body)
    assert len(streamed.chunks) == len(events)
    assert reassemble_anthropic(events) == message

    names = [n for n, _ in events]
    assert names[:2] == ["message_start", "ping"] and names[-2:] == ["message_delta", "message_stop"]
    start = json.loads(events[0][1])["message"]
    assert start["content"] == [] and start["stop_reason"] is None
    assert start["usage"] == dict(message["usage"], output_tokens=1)
    deltas = [json.loads(d) for n, d in events if n == "content_block_delta"]
    for d in deltas:
        if d["delta"]["type"] == "text_delta":
            assert 0 < len(d["delta"]["text"]) <= 5
        if d["delta"]["type"] == "input_json_delta":
            assert 0 < len(d["delta"]["partial_json"]) <= 7
    for index, block in enumerate(message["content"]):
        kinds = [d["delta"]["type"] for d in deltas if d["index"] == index]
        if block["type"] == "thinking":
            assert kinds.count("signature_delta") == 1 and kinds[-1] == "signature_delta"
        elif block["type"] in ("tool_use", "server_tool_use") and block["input"] == {}:
            assert kinds == [], "an empty input streams no input_json_delta"
        elif block["type"] not in ("text", "thinking", "tool_use", "server_tool_use"):
            assert kinds == [], "other blocks arrive whole in content_block_start"


# ------------------------------------------------------------------------------------- openai synthesis

OPENAI_COMPLETIONS = [pytest.param(r["openai"], id=f"{p.stem}[{i}]")
                      for p in SCENARIOS for i, r in enumerate(load(p)["responses"]) if "openai" in r]
OPENAI_COMPLETIONS.append(pytest.param(
    {"id": "chatcmpl-reason", "object": "chat.completion", "created": 1, "model": "deepseek-reasoner",
     "choices": [{"index": 0, "message": {"role": "assistant", "content": "42",
                                          "reasoning_content": "Let me think about it."},
                  "finish_reason": "stop"}],
     "usage": {"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14}}, id="reasoning_content"))


def normalized(completion):
    """The fields a stream can carry, as an accumulator would hold them."""
    out = {"id": completion["id"], "choices": []}
    for c in completion["choices"]:
        m = c["message"]
        msg = {"role": "assistant", "content": m.get("content") or ""}
        for key in ("reasoning_content", "reasoning", "tool_calls"):
            if m.get(key):
                msg[key] = m[key]
        out["choices"].append({"index": c["index"], "message": msg, "finish_reason": c["finish_reason"]})
    return out


@pytest.mark.parametrize("include_usage", [False, True])
@pytest.mark.parametrize("completion", OPENAI_COMPLETIONS)
def test_openai_stream_reconstructs_completion(mock, completion, include_usage):
    serve(mock, {"openai": completion, "delta_chars": 3}, {"openai": completion})
    body = {"model": "gpt-4o-mini", "stream": True}
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    with Wire(mock.port) as w:
        streamed = w.exchange(path="/v1/chat/completions", body=body)
        plain = w.exchange(path="/v1/chat/completions", body={"model": "gpt-4o-mini"})
    assert plain.body == compact(completion)
    events = parse_sse(streamed.body)
    assert all(name is None for name, _ in events), "OpenAI streams have no event: lines"
    datas = [d for _, d in events]
    rebuilt = reassemble_openai(datas)
    assert normalized(rebuilt) == normalized(completion)
    assert rebuilt["model"] == completion["model"]
    first = {"role": "assistant", "content": "" if isinstance(completion["choices"][0]["message"].get("content"), str)
             else None}
    if "refusal" in completion["choices"][0]["message"]:
        first["refusal"] = None
    assert json.loads(datas[0])["choices"][0]["delta"] == first
    if include_usage:
        assert rebuilt["usage"] == completion["usage"]
        assert all("usage" in json.loads(d) for d in datas[:-1])
    else:
        assert "usage" not in rebuilt and all("usage" not in json.loads(d) for d in datas[:-1])


# ------------------------------------------------------------------------------------- responses synthesis

RESPONSES = [pytest.param(r["responses"], id=f"{p.stem}[{i}]")
             for p in SCENARIOS for i, r in enumerate(load(p)["responses"]) if "responses" in r]


@pytest.mark.parametrize("response", RESPONSES)
def test_responses_stream_reconstructs_the_response(mock, response):
    serve(mock, {"responses": response, "delta_chars": 3}, {"responses": response})
    with Wire(mock.port) as w:
        streamed = w.exchange(path="/v1/responses", body={"model": "gpt-5", "stream": True})
        plain = w.exchange(path="/v1/responses", body={"model": "gpt-5"})
    assert plain.body == compact(response)
    events = parse_sse(streamed.body)
    datas = [json.loads(d) for _, d in events]
    assert [name for name, _ in events] == [d["type"] for d in datas], "event: names the data's type"
    assert [d["sequence_number"] for d in datas] == list(range(len(datas)))
    assert datas[0]["type"] == "response.created" and datas[0]["response"]["output"] == []
    assert datas[-1]["type"] == "response.completed" and datas[-1]["response"]["output"] == response["output"]
    done = [d["item"] for d in datas if d["type"] == "response.output_item.done"]
    assert done == response["output"], "output_item.done carries each item whole"
    for d in datas:
        if d["type"] == "response.output_item.added" and d["item"]["type"] == "reasoning":
            assert "encrypted_content" not in d["item"], "only the done item has the encrypted content"
    for oi, item in enumerate(response["output"]):
        if item["type"] == "message":
            text = "".join(d["delta"] for d in datas if d["type"] == "response.output_text.delta"
                           and d["output_index"] == oi)
            assert text == "".join(p["text"] for p in item["content"])
        if item["type"] == "function_call":
            args = "".join(d["delta"] for d in datas if d["type"] == "response.function_call_arguments.delta"
                           and d["output_index"] == oi)
            assert args == item["arguments"]
        if item["type"] == "reasoning":
            for si, part in enumerate(item["summary"]):
                text = "".join(d["delta"] for d in datas if d["type"] == "response.reasoning_summary_text.delta"
                               and d["output_index"] == oi and d["summary_index"] == si)
                assert text == part["text"]


def test_openai_interleaved_tool_calls(mock):
    completion = load(HERE.parent / "scenarios" / "openai_tool_calls.json")["responses"][0]["openai"]
    serve(mock, {"openai": completion, "interleave_tool_calls": True})
    with Wire(mock.port) as w:
        r = w.exchange(path="/v1/chat/completions", body={"stream": True})
    datas = [d for _, d in parse_sse(r.body)]
    order = [json.loads(d)["choices"][0]["delta"]["tool_calls"][0]["index"]
             for d in datas[:-1] if "tool_calls" in json.loads(d)["choices"][0]["delta"]]
    assert order[:4] == [0, 1, 0, 1]
    assert normalized(reassemble_openai(datas)) == normalized(completion)


# --------------------------------------------------------------------------- connections, queue, recording

def test_keep_alive_two_requests_one_socket(mock):
    serve(mock, {"json": {"n": 1}}, {"anthropic": CITED})
    with Wire(mock.port) as w:
        first = w.exchange(body={})
        second = w.exchange(body={"stream": True})
        assert first.body == b'{"n":1}'
        assert second.terminated and reassemble_anthropic(parse_sse(second.body)) == CITED
        w.send(method="GET", path="/_mock/health", body=b"", headers={"Connection": "close"})
        closing = w.response()
        assert closing.headers["connection"] == "close" and w.at_eof()


def test_http10_closes_after_response(mock):
    with Wire(mock.port) as w:
        w.send(method="GET", path="/_mock/health", body=b"", version="HTTP/1.0")
        assert json.loads(w.response().body) == {"ok": True}
        assert w.at_eof()


def test_queue_order_is_global_across_connections(mock):
    serve(mock, *[{"json": {"n": i}} for i in range(4)])
    a, b = Wire(mock.port), Wire(mock.port)
    try:
        got = [json.loads(conn.exchange(body={"from": tag}).body)["n"]
               for conn, tag in ((a, "a"), (b, "b"), (b, "b"), (a, "a"))]
    finally:
        a.close()
        b.close()
    assert got == [0, 1, 2, 3]
    recorded = mock.requests()
    assert [r["index"] for r in recorded] == [0, 1, 2, 3]
    assert [r["body"]["from"] for r in recorded] == ["a", "b", "b", "a"]


def test_recording(mock):
    serve(mock, {"json": {}}, {"json": {}}, {"json": {}})
    with Wire(mock.port) as w:
        w.exchange(path="/v1/messages?beta=true", body={"model": "m", "stream": False},
                   headers={"X-Api-Key": "sk-ant-test", "Anthropic-Version": "2023-06-01"})
        w.exchange(body=b"not json")
        # A chunked request body, split in two chunks.
        w.sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                       b"5\r\n{\"a\":\r\n2\r\n1}\r\n0\r\n\r\n")
        w.response()
        w.exchange(method="GET", path="/_mock/health", body=b"")
    first, second, third = mock.requests()
    assert first["method"] == "POST" and first["path"] == "/v1/messages" and first["query"] == "beta=true"
    assert first["headers"]["x-api-key"] == "sk-ant-test"
    assert first["headers"]["anthropic-version"] == "2023-06-01"
    assert all(k == k.lower() for k in first["headers"])
    assert first["body"] == {"model": "m", "stream": False}
    assert json.loads(first["raw_body"]) == first["body"]
    assert second["body"] is None and second["raw_body"] == "not json"
    assert third["body"] == {"a": 1} and third["path"] == "/v1/chat/completions"


def test_queue_exhausted(mock):
    serve(mock, {"json": {}})
    with Wire(mock.port) as w:
        w.exchange(body={})
        r = w.exchange(body={})
    assert r.status == 500
    assert r.headers["x-should-retry"] == "false"
    err = json.loads(r.body)
    assert err["type"] == "error" and err["error"]["type"] == "api_error"
    assert err["error"]["message"].startswith("mock: no scenario response left for request 1")


def test_expect_path(mock):
    serve(mock, {"expect": {"path": "/v1/messages"}, "json": {"ok": 1}},
          {"expect": {"path": "/v1/messages", "method": "POST"}, "json": {"ok": 2}})
    with Wire(mock.port) as w:
        ok = w.exchange(path="/v1/messages?x=1", body={})
        bad = w.exchange(path="/v1/chat/completions", body={})
    assert ok.status == 200 and json.loads(ok.body) == {"ok": 1}
    assert bad.status == 400
    message = json.loads(bad.body)["error"]["message"]
    assert "/v1/messages" in message and "/v1/chat/completions" in message


# ---------------------------------------------------------------------------------------------- faults

def stream_of(n):
    return [{"event": "e", "data": {"i": i}} for i in range(n)]


def test_drop_after_events(mock):
    serve(mock, {"sse": stream_of(10), "fault": {"type": "drop", "after_events": 4}})
    with Wire(mock.port) as w:
        r = w.exchange(body={})
        assert not r.terminated, "no zero-length chunk after a drop"
        assert [json.loads(d)["i"] for _, d in parse_sse(r.body)] == [0, 1, 2, 3]
        assert w.at_eof()


def test_drop_after_bytes_in_content_length_body(mock):
    serve(mock, {"json": {"text": "x" * 50}, "fault": {"type": "drop", "after_bytes": 10}},
          {"anthropic": CITED, "fault": {"type": "drop", "after_events": 5}})
    with Wire(mock.port) as w:
        w.send(body={})
        _, headers = w.read_head()
        assert int(headers["content-length"]) == len(compact({"text": "x" * 50}))
        assert w.read(1000) == compact({"text": "x" * 50})[:10]
        assert w.at_eof()
    with Wire(mock.port) as w:  # after_events on a JSON-mode reply: the body is cut before its first byte
        w.send(body={})
        _, headers = w.read_head()
        assert int(headers["content-length"]) > 0 and w.at_eof()


def test_drop_with_chunk_size_cuts_exactly_after_event(mock):
    items = stream_of(6)
    cut = sum(len(mockserver.encode_sse(i, "\n")) for i in items[:3])
    serve(mock, {"sse": items, "chunk_size": 4, "fault": {"type": "drop", "after_events": 3}})
    with Wire(mock.port) as w:
        r = w.exchange(body={})
    assert not r.terminated and len(r.body) == cut and all(len(c) <= 4 for c in r.chunks)


def test_close_fault(mock):
    serve(mock, {"fault": {"type": "close"}, "json": {}}, {"json": {"after": True}})
    with Wire(mock.port) as w:
        w.send(body={})
        assert w.at_eof()
    assert len(mock.requests()) == 1, "the request is still recorded"


def test_stall_blocks_only_its_connection(mock):
    serve(mock, {"sse": stream_of(5), "fault": {"type": "stall", "after_events": 2, "ms": 2500}},
          {"json": {"other": True}})
    with Wire(mock.port) as stalled:
        t0 = time.monotonic()
        stalled.send(body={})
        stalled.read_head()
        assert [stalled.read_chunk() for _ in range(2)] == [mockserver.encode_sse(i, "\n") for i in stream_of(2)]
        assert stalled.buf == b""
        stalled.sock.settimeout(1.0)
        with pytest.raises(socket.timeout):
            stalled.sock.recv(1)  # nothing arrives during the stall...
        with Wire(mock.port) as other:  # ...while another connection is served
            assert json.loads(other.exchange(body={}).body) == {"other": True}
            assert json.loads(other.exchange(method="GET", path="/_mock/health", body=b"").body) == {"ok": True}
        stalled.sock.settimeout(10)
        rest = []
        while (chunk := stalled.read_chunk()):
            rest.append(chunk)
        assert chunk == b"" and len(rest) == 3
        assert time.monotonic() - t0 >= 2.5


def test_stall_headers(mock):
    serve(mock, {"json": {}, "fault": {"type": "stall_headers", "ms": 400}})
    with Wire(mock.port) as w:
        t0 = time.monotonic()
        w.exchange(body={})
    assert time.monotonic() - t0 >= 0.4


def test_sigterm_during_long_stall_exits_promptly():
    server = MockServer({"responses": [{"sse": stream_of(3), "fault": {"type": "stall", "after_events": 1,
                                                                       "ms": 30000}}]}).start()
    proc = server.proc
    with Wire(server.port) as w:
        w.send(body={})
        w.read_head()
        w.read_chunk()
        t0 = time.monotonic()
        server.stop()
        assert time.monotonic() - t0 < 3
    assert proc.returncode == 0


# ------------------------------------------------------------------------------------- control & startup

def test_control_endpoints(mock):
    serve(mock, {"json": {"n": 0}})
    with Wire(mock.port) as w:
        assert json.loads(w.exchange(method="GET", path="/_mock/health", body=b"").body) == {"ok": True}
        assert json.loads(w.exchange(method="GET", path="/_mock/requests", body=b"").body) == []
        w.exchange(body={"x": 1})
        assert len(json.loads(w.exchange(method="GET", path="/_mock/requests", body=b"").body)) == 1
        loaded = w.exchange(path="/_mock/scenario", body={"responses": [{"json": {"n": "new"}}]})
        assert loaded.status == 200
        assert json.loads(w.exchange(method="GET", path="/_mock/requests", body=b"").body) == []
        assert json.loads(w.exchange(body={}).body) == {"n": "new"}
        bad = w.exchange(path="/_mock/scenario", body={"responses": [{"jsn": {}}]})
        assert bad.status == 400 and "jsn" in json.loads(bad.body)["error"]["message"]
        assert w.exchange(method="GET", path="/_mock/nope", body=b"").status == 404
    assert len(mock.requests()) == 1, "control requests are never recorded"


def test_start_protocol_and_bad_scenario(tmp_path):
    proc = subprocess.Popen([sys.executable, str(HERE / "mockserver.py")], stdout=subprocess.PIPE)
    try:
        line = proc.stdout.readline().decode()
        assert re.fullmatch(r"PORT \d+\n", line)
        with Wire(int(line.split()[1])) as w:
            r = w.exchange(body={})
            assert r.status == 500, "no scenario means an empty queue"
    finally:
        proc.terminate()
        proc.wait(5)
        proc.stdout.close()
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"responses": [{"json": {}, "sse": []}]}))
    done = subprocess.run([sys.executable, str(HERE / "mockserver.py"), str(bad)],
                          capture_output=True, text=True, timeout=10)
    assert done.returncode == 2 and done.stdout == "" and "more than one body kind" in done.stderr


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_scenario_files_serve_in_both_modes(path):
    """Every starter scenario is valid and every response renders as JSON and as a stream."""
    responses = mockserver.parse_scenario(load(path))
    assert responses
    for resp in responses:
        for stream in (False, True):
            request = {"stream": stream, "stream_options": {"include_usage": True}}
            built = mockserver.build_body(resp, request)
            data = b"".join(built.segments)
            if built.streamed:
                assert parse_sse(data)
            else:
                json.loads(data)


def test_mockctl_run_passes_env_and_exit_code(tmp_path):
    scenario = tmp_path / "s.json"
    scenario.write_text(json.dumps({"responses": [{"json": {"hello": "c"}}]}))
    out = tmp_path / "requests.json"
    child = (
        "import json, os, sys, urllib.request\n"
        "url = os.environ['TOOLOOP_MOCK_URL']\n"
        "assert os.environ['ANTHROPIC_BASE_URL'] == url\n"
        "assert os.environ['OPENAI_BASE_URL'] == url + '/v1'\n"
        "assert os.environ['ANTHROPIC_API_KEY'] == 'sk-ant-mock' and os.environ['OPENAI_API_KEY'] == 'sk-mock'\n"
        "opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))\n"
        "req = urllib.request.Request(url + '/v1/messages', data=b'{\"q\": 1}', method='POST')\n"
        "assert json.load(opener.open(req)) == {'hello': 'c'}\n"
        "sys.exit(7)\n"
    )
    done = subprocess.run([sys.executable, str(HERE / "mockctl.py"), "run", "--requests-out", str(out),
                           str(scenario), "--", sys.executable, "-c", child],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 7, done.stderr
    assert json.loads(out.read_text())[0]["body"] == {"q": 1}
    usage = subprocess.run([sys.executable, str(HERE / "mockctl.py"), "run", str(scenario)],
                           capture_output=True, text=True, timeout=10)
    assert usage.returncode == 2 and "usage" in usage.stderr


def test_mockserver_class_lifecycle():
    server = MockServer(HERE.parent / "scenarios" / "anthropic_text.json")
    with server:
        proc = server.proc
        assert server.base_url == f"http://127.0.0.1:{server.port}"
        with Wire(server.port) as w:
            assert w.exchange(body={}).status == 200
        assert server.requests()[0]["path"] == "/v1/messages"
    assert proc.poll() is not None and server.proc is None


def test_concurrent_clients_each_get_one_response(mock):
    n = 20
    serve(mock, *[{"json": {"n": i}, "delay_ms": 20} for i in range(n)])
    got, lock = [], threading.Lock()

    def worker():
        with Wire(mock.port) as w:
            value = json.loads(w.exchange(body={}).body)["n"]
        with lock:
            got.append(value)

    threads = [threading.Thread(target=worker) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == list(range(n))
    assert sorted(r["index"] for r in mock.requests()) == list(range(n))


# ----------------------------------------------------------------------------------------------- bedrock

def parse_frames(data: bytes):
    """Reference AWS event-stream decoder: [(headers dict, payload)], checking both CRCs."""
    import struct
    import zlib
    frames, pos = [], 0
    while pos < len(data):
        total, hlen, pcrc = struct.unpack(">III", data[pos:pos + 12])
        assert zlib.crc32(data[pos:pos + 8]) == pcrc, "prelude CRC"
        frame = data[pos:pos + total]
        assert zlib.crc32(frame[:-4]) == struct.unpack(">I", frame[-4:])[0], "message CRC"
        headers, h = {}, 12
        while h < 12 + hlen:
            n = frame[h]
            name = frame[h + 1:h + 1 + n].decode()
            assert frame[h + 1 + n] == 7, "string header"
            vlen = struct.unpack(">H", frame[h + 2 + n:h + 4 + n])[0]
            headers[name] = frame[h + 4 + n:h + 4 + n + vlen].decode()
            h += 4 + n + vlen
        frames.append((headers, frame[12 + hlen:-4]))
        pos += total
    return frames


BEDROCK_MSG = {"id": "msg_b1", "type": "message", "role": "assistant", "model": "claude",
               "content": [{"type": "text", "text": "Hello from Bedrock \u2014 \U0001F642"}],
               "stop_reason": "end_turn", "stop_sequence": None, "usage": {"input_tokens": 3, "output_tokens": 5}}
BEDROCK_BODY = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 10,
                "messages": [{"role": "user", "content": "hi"}]}
STREAM_PATH = "/model/us.anthropic.claude-v1%3A0/invoke-with-response-stream"


def test_bedrock_stream_is_event_stream_frames_of_the_anthropic_events(mock):
    serve(mock, {"anthropic": BEDROCK_MSG, "bedrock": {"check": False}, "chunk_size": 5})
    with Wire(mock.port) as w:
        r = w.exchange(path=STREAM_PATH, body=BEDROCK_BODY)
    assert r.status == 200 and r.headers["content-type"] == "application/vnd.amazon.eventstream"
    assert r.headers["x-amzn-requestid"] == "req_mock_0"
    frames = parse_frames(r.body)
    events = [json.loads(base64.b64decode(json.loads(p)["bytes"])) for _, p in frames]
    want = [d for _, d in mockserver.anthropic_events(BEDROCK_MSG, mockserver.DEFAULT_DELTA_CHARS)]
    assert [e["type"] for e in events] == [e["type"] for e in want]
    assert events[:-1] == want[:-1]
    assert "amazon-bedrock-invocationMetrics" in events[-1]
    assert all(h == {":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"}
               for h, _ in frames)


def test_bedrock_exception_frame_and_corrupt_crc(mock):
    serve(mock, {"anthropic": BEDROCK_MSG, "bedrock": {"check": False, "exception": {
        "type": "throttlingException", "message": "slow down", "after_events": 2}}},
        {"anthropic": BEDROCK_MSG, "bedrock": {"check": False, "corrupt_crc_after_events": 1}})
    with Wire(mock.port) as w:
        frames = parse_frames(w.exchange(path=STREAM_PATH, body=BEDROCK_BODY).body)
        assert len(frames) == 3
        assert frames[2][0][":message-type"] == "exception"
        assert frames[2][0][":exception-type"] == "throttlingException"
        assert json.loads(frames[2][1]) == {"message": "slow down"}
        body = w.exchange(path=STREAM_PATH, body=BEDROCK_BODY).body
    with pytest.raises(AssertionError, match="message CRC"):
        parse_frames(body)


def test_bedrock_checks_the_signed_request(mock):
    good_auth = ("AWS4-HMAC-SHA256 Credential=AKID/20251130/us-west-2/bedrock/aws4_request, "
                 "SignedHeaders=host;x-amz-date, Signature=" + "0" * 64)
    serve(mock, *[{"anthropic": BEDROCK_MSG, "bedrock": True}] * 5)
    with Wire(mock.port) as w:
        r = w.exchange(path=STREAM_PATH, body=BEDROCK_BODY)
        assert r.status == 403 and r.headers["x-amzn-errortype"].startswith("MissingAuthenticationTokenException")
        r = w.exchange(path=STREAM_PATH, body=BEDROCK_BODY,
                       headers={"Authorization": good_auth, "X-Amz-Date": "20251130T123000Z"})
        assert r.status == 200
        r = w.exchange(path=STREAM_PATH, body=BEDROCK_BODY, headers={
            "Authorization": good_auth, "X-Amz-Date": "20251130T123000Z", "X-Amz-Security-Token": "t"})
        assert r.status == 403 and b"x-amz-security-token" in r.body, "a session token must be signed"
        r = w.exchange(path=STREAM_PATH, body=dict(BEDROCK_BODY, model="m", stream=True),
                       headers={"Authorization": good_auth, "X-Amz-Date": "20251130T123000Z"})
        assert r.status == 400 and b"[model]" in r.body and b"[stream]" in r.body
        r = w.exchange(path="/v1/messages", body=BEDROCK_BODY)
        assert r.status == 404


# ------------------------------------------------------------------------------------------ context window

def block_bytes(block) -> int:
    """README's rule, written independently: compact JSON of the block without cache_control, UTF-8."""
    if isinstance(block, dict):
        block = {k: v for k, v in block.items() if k != "cache_control"}
    return len(json.dumps(block, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def anthropic_blocks(body):
    blocks = list(body.get("tools", []))
    system = body.get("system")
    blocks += [{"type": "text", "text": system}] if isinstance(system, str) else list(system or [])
    for msg in body["messages"]:
        content = msg["content"]
        blocks += [{"type": "text", "text": content}] if isinstance(content, str) else content
    return blocks


def ceil_div(a, b):
    return -(-a // b)


def text_block(text, cache=False):
    block = {"type": "text", "text": text}
    if cache:
        block["cache_control"] = {"type": "ephemeral"}
    return block


TOOL = {"name": "get_weather", "description": "Weather \u2014 by city", "input_schema": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
ANTHROPIC_BODY = {
    "model": "claude-sonnet-4-6", "max_tokens": 100, "tools": [TOOL],
    "system": "You are terse. \u00e9\U0001F642",
    "messages": [{"role": "user", "content": "What is the weather in Paris?"},
                 {"role": "assistant", "content": [
                     {"type": "text", "text": "Checking."},
                     {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
                 {"role": "user", "content": [
                     {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny",
                      "cache_control": {"type": "ephemeral"}}]}]}
TEXT_MSG = {"id": "msg_ctx", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
            "content": [{"type": "text", "text": "Hello there"}], "stop_reason": "end_turn",
            "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 7}}
OPENAI_COMPLETION = {"id": "chatcmpl-ctx", "object": "chat.completion", "created": 1, "model": "gpt",
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"},
                                  "finish_reason": "stop"}],
                     "usage": {"prompt_tokens": 1, "completion_tokens": 3, "total_tokens": 4}}


def test_estimate_follows_the_documented_rule(mock):
    mock.load({"context": {"chars_per_token": 3}, "responses": [{"json": {}}, {"json": {}}]})
    openai_body = {"model": "gpt", "messages": [{"role": "system", "content": "Be brief \u00e9"},
                                                {"role": "user", "content": "hi"}],
                   "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}
    with Wire(mock.port) as w:
        w.exchange(body=ANTHROPIC_BODY)
        w.exchange(path="/v1/chat/completions", body=openai_body)
    first, second = mock.requests()
    total = sum(block_bytes(b) for b in anthropic_blocks(ANTHROPIC_BODY))
    assert first["tokens"] == ceil_div(total, 3)
    total = sum(block_bytes(b) for b in openai_body["messages"] + openai_body["tools"])
    assert second["tokens"] == ceil_div(total, 3)
    assert "cache_read" not in second and first["cache_read"] == 0
    assert mockserver.tokens_ceil(10, 2.5) == 4 and mockserver.tokens_ceil(11, 2.5) == 5
    readme_example = mockserver.prompt_blocks("anthropic", {"messages": [{"role": "user", "content": "hi"}]})
    assert [len(b.data) for b in readme_example] == [27]


def test_over_limit_is_refused_without_taking_from_the_queue(mock):
    small = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    big = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x" * 400}]}
    estimate = ceil_div(block_bytes({"type": "text", "text": "x" * 400}), 4)
    mock.load({"context": {"limit": 50}, "responses": [{"json": {"n": 0}}, {"json": {"n": 1}}]})
    with Wire(mock.port) as w:
        r = w.exchange(body=big)
        assert r.status == 400 and r.headers["x-should-retry"] == "false"
        assert r.body == compact({"type": "error", "error": {
            "type": "invalid_request_error", "message": f"prompt is too long: {estimate} tokens > 50 maximum"}})
        o = w.exchange(path="/v1/chat/completions", body={"model": "g", "messages": [{"role": "user",
                                                                                        "content": "x" * 400}]})
        o_estimate = ceil_div(block_bytes({"role": "user", "content": "x" * 400}), 4)
        assert o.status == 400 and json.loads(o.body) == {"error": {
            "message": f"This model's maximum context length is 50 tokens. However, your messages resulted in "
                       f"{o_estimate} tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}
        ok = w.exchange(body=small)
    assert json.loads(ok.body) == {"n": 0} and ok.headers["request-id"] == "req_mock_0"
    refused, refused_o, answered = mock.requests()
    assert refused["index"] is None and refused["rejected"] == "context_limit" and refused["tokens"] == estimate
    assert refused_o["index"] is None and refused_o["rejected"] == "context_limit"
    assert answered["index"] == 0 and "rejected" not in answered


def test_usage_is_rewritten_in_json_and_stream_mode(mock):
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hello " * 30}]}
    estimate = ceil_div(block_bytes(text_block("hello " * 30)), 4)
    mock.load({"context": {}, "responses": [{"anthropic": TEXT_MSG}, {"anthropic": TEXT_MSG},
                                            {"openai": OPENAI_COMPLETION}, {"openai": OPENAI_COMPLETION}]})
    want = {"input_tokens": estimate, "output_tokens": 7, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0}
    openai_body = {"model": "g", "messages": [{"role": "user", "content": "hello"}]}
    o_estimate = ceil_div(block_bytes(openai_body["messages"][0]), 4)
    with Wire(mock.port) as w:
        assert json.loads(w.exchange(body=body).body)["usage"] == want
        events = parse_sse(w.exchange(body=dict(body, stream=True)).body)
        plain = json.loads(w.exchange(path="/v1/chat/completions", body=openai_body).body)
        streamed = parse_sse(w.exchange(path="/v1/chat/completions", body=dict(
            openai_body, stream=True, stream_options={"include_usage": True})).body)
    start, delta = json.loads(events[0][1]), json.loads(events[-2][1])
    assert start["message"]["usage"] == dict(want, output_tokens=1)
    assert delta["type"] == "message_delta" and delta["usage"] == want
    o_want = {"prompt_tokens": o_estimate, "completion_tokens": 3, "total_tokens": o_estimate + 3,
              "prompt_tokens_details": {"cached_tokens": 0}}
    assert plain["usage"] == o_want
    assert reassemble_openai([d for _, d in streamed])["usage"] == o_want
    assert TEXT_MSG["usage"] == {"input_tokens": 1, "output_tokens": 7}, "the scenario is not mutated"


def test_usage_off_leaves_the_body_alone(mock):
    mock.load({"context": {"usage": False}, "responses": [{"anthropic": TEXT_MSG}]})
    with Wire(mock.port) as w:
        r = w.exchange(body={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert r.body == compact(TEXT_MSG)
    assert mock.requests()[0]["tokens"] == ceil_div(block_bytes(text_block("hi")), 4)


def test_prompt_cache_simulation(mock):
    system = [text_block("S" * 300, cache=True)]
    first = [{"role": "user", "content": [text_block("U" * 200 + " first question", cache=True)]}]
    req1 = {"model": "m", "max_tokens": 5, "system": system, "messages": first}
    plain_first = [{"role": "user", "content": [text_block("U" * 200 + " first question")]}]
    req2 = {"model": "m", "max_tokens": 5, "system": system, "messages": plain_first + [
        {"role": "assistant", "content": "An answer."},
        {"role": "user", "content": [text_block("second question", cache=True)]}]}
    changed = copy.deepcopy(req2)
    changed["messages"][0]["content"][0]["text"] = "V" + changed["messages"][0]["content"][0]["text"][1:]
    del changed["system"]
    changed_system = dict(changed, system=[text_block("S" * 300)])  # its prefix is cached by request 1
    mock.load({"context": {}, "responses": [{"anthropic": TEXT_MSG}] * 5})
    with Wire(mock.port) as w:
        r1 = json.loads(w.exchange(body=req1).body)["usage"]
        r2 = json.loads(w.exchange(body=req2).body)["usage"]
        r3 = json.loads(w.exchange(body=changed).body)["usage"]
        r4 = json.loads(w.exchange(body=req1).body)["usage"]
        w.exchange(body=changed_system)
    rec1, rec2, rec3, rec4, rec5 = mock.requests()

    prefix1 = sum(block_bytes(b) for b in anthropic_blocks(req1))
    assert rec1["cache_read"] == 0 and rec1["cache_creation"] == prefix1 // 4 > 0
    assert r1["cache_creation_input_tokens"] == prefix1 // 4 and r1["cache_read_input_tokens"] == 0
    assert r1["input_tokens"] == rec1["tokens"] - prefix1 // 4

    prefix2 = sum(block_bytes(b) for b in anthropic_blocks(req2))
    assert rec2["cache_read"] == prefix1 // 4, "request 2 reads request 1's cached prefix"
    assert rec2["cache_creation"] == prefix2 // 4 - prefix1 // 4
    assert r2["input_tokens"] + r2["cache_read_input_tokens"] + r2["cache_creation_input_tokens"] == rec2["tokens"]

    assert rec3["cache_read"] == 0, "a changed first message reads nothing"
    assert rec3["cache_creation"] == sum(block_bytes(b) for b in anthropic_blocks(changed)) // 4
    assert r3["cache_read_input_tokens"] == 0

    assert rec4["cache_read"] == prefix1 // 4 and rec4["cache_creation"] == 0 and r4["cache_creation_input_tokens"] == 0
    assert rec5["cache_read"] == block_bytes(system[0]) // 4, "the unchanged system prompt is still a cached prefix"


def test_cache_lookback_min_tokens_and_reset(mock):
    # 25 message blocks; a breakpoint 21 blocks past the cached one is out of the 20-block lookback.
    msgs = [{"role": "user", "content": [text_block(f"block {i}") for i in range(25)]}]
    at = copy.deepcopy(msgs)
    at[0]["content"][2]["cache_control"] = {"type": "ephemeral"}
    near, far = copy.deepcopy(msgs), copy.deepcopy(msgs)
    near[0]["content"][21]["cache_control"] = {"type": "ephemeral"}
    far[0]["content"][22]["cache_control"] = {"type": "ephemeral"}
    scenario = {"context": {"min_cache_tokens": 10}, "responses": [{"json": {}}] * 4}
    mock.load(scenario)
    with Wire(mock.port) as w:
        for body in (at, far, near):
            w.exchange(body={"model": "m", "messages": body})
    cached, missed, hit = mock.requests()
    assert cached["cache_creation"] > 0 and missed["cache_read"] == 0 and hit["cache_read"] == cached["cache_creation"]

    tiny = [{"role": "user", "content": [text_block("hi", cache=True)]}]
    mock.load(scenario)
    with Wire(mock.port) as w:
        w.exchange(body={"model": "m", "messages": tiny})
        w.exchange(body={"model": "m", "messages": near})
    small, again = mock.requests()
    assert small["cache_creation"] == 0, "below min_cache_tokens nothing is written"
    assert again["cache_read"] == 0, "loading a scenario clears the cache"


def test_cache_off_and_error_replies_write_nothing(mock):
    body = {"model": "m", "messages": [{"role": "user", "content": [text_block("x" * 100, cache=True)]}]}
    mock.load({"context": {"cache": False}, "responses": [{"anthropic": TEXT_MSG}] * 2})
    with Wire(mock.port) as w:
        w.exchange(body=body)
        usage = json.loads(w.exchange(body=body).body)["usage"]
    assert usage["cache_read_input_tokens"] == 0 and usage["cache_creation_input_tokens"] == 0
    assert all(r["cache_read"] == 0 and r["cache_creation"] == 0 for r in mock.requests())
    mock.load({"context": {}, "responses": [{"status": 429, "json": {}}, {"json": {}}]})
    with Wire(mock.port) as w:
        w.exchange(body=body)
        w.exchange(body=body)
    assert [r["cache_read"] for r in mock.requests()] == [0, 0], "a 429 caches nothing"


def test_count_tokens_is_answered_by_the_server(mock):
    body = {"model": "m", "messages": [{"role": "user", "content": "y" * 1000}]}
    estimate = ceil_div(block_bytes(text_block("y" * 1000)), 4)
    mock.load({"context": {"limit": 10}, "responses": [{"json": {"n": 0}}]})
    with Wire(mock.port) as w:
        r = w.exchange(path="/v1/messages/count_tokens", body=body)
        assert r.status == 200 and json.loads(r.body) == {"input_tokens": estimate}
        assert json.loads(w.exchange(path="/v1/messages", body={"messages": []}).body) == {"n": 0}
    counted, queued = mock.requests()
    assert counted["index"] is None and counted["tokens"] == estimate and "rejected" not in counted
    assert queued["index"] == 0
    serve(mock, {"json": {"queued": True}})  # without context it is an ordinary queued request
    with Wire(mock.port) as w:
        assert json.loads(w.exchange(path="/v1/messages/count_tokens", body=body).body) == {"queued": True}
    assert mock.requests()[0]["index"] == 0 and "tokens" not in mock.requests()[0]


# -------------------------------------------------------------------------------------------------- routes

def test_routes_answer_by_content(mock):
    summary = {"anthropic": dict(TEXT_MSG, content=[{"type": "text", "text": "SUMMARY"}])}
    mock.load({"context": {}, "routes": [
        {"match": {"path": "/v1/messages", "body_contains": "SUMMARY-REQUEST"}, "response": summary, "times": 2},
        {"match": {"method": "GET"}, "response": {"json": {"models": []}}}],
        "responses": [{"json": {"n": 0}}, {"json": {"n": 1}}]})
    ask = {"model": "m", "messages": [{"role": "user", "content": "please SUMMARY-REQUEST"}]}
    with Wire(mock.port) as w:
        first = w.exchange(body=ask)
        assert json.loads(first.body)["content"][0]["text"] == "SUMMARY"
        assert json.loads(first.body)["usage"]["input_tokens"] > 1, "a routed reply gets its usage too"
        assert json.loads(w.exchange(body={"messages": []}).body) == {"n": 0}
        assert json.loads(w.exchange(path="/v1/messages?beta=true", body=ask).body)["content"][0]["text"] == "SUMMARY"
        assert json.loads(w.exchange(body=ask).body) == {"n": 1}, "times exhausted: back to the queue"
        assert json.loads(w.exchange(method="GET", path="/v1/models", body=b"").body) == {"models": []}
    recs = mock.requests()
    assert [(r["index"], r.get("route")) for r in recs] == [(None, 0), (0, None), (None, 0), (1, None), (None, 1)]
    assert recs[4]["tokens"] == 0 and "cache_read" not in recs[4]
    assert summary["anthropic"]["usage"] == {"input_tokens": 1, "output_tokens": 7}
    mock.load({"routes": [{"match": {"body_contains": "X"}, "response": {"json": {"r": 1}}, "times": 1}]})
    with Wire(mock.port) as w:
        r = w.exchange(body={"q": "X"})
        assert json.loads(r.body) == {"r": 1} and r.headers["request-id"] == "req_mock_a0"
        assert w.exchange(body={"q": "X"}).status == 500, "route counters reset on load, then exhaust"


def test_routed_request_can_still_be_refused_for_size(mock):
    mock.load({"context": {"limit": 5}, "routes": [{"response": {"json": {"routed": True}}}]})
    with Wire(mock.port) as w:
        assert w.exchange(body={"messages": [{"role": "user", "content": "z" * 100}]}).status == 400
        assert json.loads(w.exchange(body={"messages": []}).body) == {"routed": True}
    refused, routed = mock.requests()
    assert refused["rejected"] == "context_limit" and "route" not in refused and routed["route"] == 0


@pytest.mark.parametrize("scenario, message", [
    ({"responses": [], "contxt": {}}, "contxt"),
    ({"context": []}, "context must be an object"),
    ({"context": {"limt": 5}}, "limt"),
    ({"context": {"limit": "5"}}, "context.limit"),
    ({"context": {"limit": True}}, "context.limit"),
    ({"context": {"chars_per_token": 0}}, "chars_per_token"),
    ({"context": {"chars_per_token": "4"}}, "chars_per_token"),
    ({"context": {"usage": 1}}, "context.usage"),
    ({"context": {"cache": "yes"}}, "context.cache"),
    ({"context": {"min_cache_tokens": -1}}, "min_cache_tokens"),
    ({"routes": {}}, "routes must be an array"),
    ({"routes": [{"match": {}}]}, "needs a response"),
    ({"routes": [{"match": {"pth": "/"}, "response": {}}]}, "match"),
    ({"routes": [{"match": {"path": 1}, "response": {}}]}, "match.path"),
    ({"routes": [{"response": {}, "times": -1}]}, "times"),
    ({"routes": [{"response": {}, "tims": 1}]}, "tims"),
    ({"routes": [{"response": {"jsn": {}}}]}, "routes[0].response"),
])
def test_bad_context_and_routes_are_refused(scenario, message):
    with pytest.raises(mockserver.ScenarioError, match=re.escape(message)):
        mockserver.load_scenario(scenario)


def test_bad_routes_refused_over_http(mock):
    with Wire(mock.port) as w:
        bad = w.exchange(path="/_mock/scenario", body={"routes": [{"response": {"fault": {"type": "x"}}}]})
    assert bad.status == 400 and "routes[0].response" in json.loads(bad.body)["error"]["message"]


# ------------------------------------------------------------------------------------- rendered once

def test_a_route_answer_is_rendered_once_and_served_as_the_same_bytes_and_writes(mock):
    # A benchmark's small streamed answers must cost the server its writes, not an encoding per request: the
    # render is kept per scenario response (and request shape), and serves the same chunks every time.
    routes = [{"match": {"path": "/v1/messages"}, "response": {"anthropic": CITED, "delta_chars": 5}},
              {"match": {"path": "/v1/chat/completions"},
               "response": {"openai": OPENAI_COMPLETIONS[0].values[0], "delta_chars": 3}}]
    mock.load({"responses": [], "routes": routes})
    with Wire(mock.port) as w:
        first = [w.exchange(body={"stream": True}) for _ in range(3)]
        plain = w.exchange(body={})
        chat = w.exchange(path="/v1/chat/completions", body={"stream": True})
        chat_usage = w.exchange(path="/v1/chat/completions",
                                body={"stream": True, "stream_options": {"include_usage": True}})
        chat_again = w.exchange(path="/v1/chat/completions", body={"stream": True})
    assert all(r.chunks == first[0].chunks and r.terminated for r in first)
    assert len(first[0].chunks) == len(list(mockserver.anthropic_events(CITED, 5)))
    assert plain.body == compact(CITED), "the JSON answer of the same response is its own render"
    assert chat_again.chunks == chat.chunks
    assert b'"usage"' in chat_usage.body and chat_usage.body != chat.body, "include_usage is part of the key"

    server = mockserver.MockServer(mockserver.load_scenario({"responses": [], "routes": routes}))
    resp = server.scenario.routes[0]["response"]
    body, writes, _ = server.rendered(resp, {"stream": True}, {}, keep=True)
    assert server.rendered(resp, {"stream": True}, {}, keep=True)[1] is writes, "served from the render"
    assert server.rendered(resp, {}, {}, keep=True)[0].streamed is False
    assert server.rendered(dict(resp), {"stream": True}, {}, keep=True)[1] is not writes, "another object"
    server.install(server.scenario)
    assert server.rendered(resp, {"stream": True}, {}, keep=True)[1] is not writes, "a new scenario starts over"


def test_a_fault_fires_at_the_same_place_on_every_serving_of_a_rendered_answer(mock):
    route = {"match": {}, "response": {"sse": stream_of(10), "fault": {"type": "drop", "after_events": 4}}}
    mock.load({"responses": [], "routes": [route]})
    for _ in range(2):
        with Wire(mock.port) as w:
            r = w.exchange(body={})
            assert not r.terminated
            assert [json.loads(d)["i"] for _, d in parse_sse(r.body)] == [0, 1, 2, 3]
            assert w.at_eof()
