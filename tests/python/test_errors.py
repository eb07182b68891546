"""The exception tree: every API error class with its attributes (agent and client), connection errors,
timeouts, interrupted streams (a mid-stream overloaded_error is an OverloadedError), max_turns, config
errors, and retry-after being honoured."""

from __future__ import annotations

import time
from typing import Any, Dict, Type

import pytest

import tooloop
from _support import agent_for, assert_valid_view, text_reply

API_ERRORS = [
    (400, "invalid_request_error", tooloop.BadRequestError),
    (401, "authentication_error", tooloop.AuthenticationError),
    (403, "permission_error", tooloop.PermissionDeniedError),
    (404, "not_found_error", tooloop.NotFoundError),
    (413, "request_too_large", tooloop.RequestTooLargeError),
    (429, "rate_limit_error", tooloop.RateLimitError),
    (500, "api_error", tooloop.InternalServerError),
    (529, "overloaded_error", tooloop.OverloadedError),
]

REQUEST = {"model": "claude-sonnet-4-6", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}


def error_response(status: int, etype: str, message: str, **extra: Any) -> Dict[str, Any]:
    return {"status": status, "json": {"type": "error", "error": {"type": etype, "message": message}}, **extra}


def test_the_tree_is_the_documented_one() -> None:
    for _, _, cls in API_ERRORS:
        assert issubclass(cls, tooloop.APIError)
    assert issubclass(tooloop.APIError, tooloop.Error)
    assert issubclass(tooloop.APITimeoutError, tooloop.APIConnectionError)
    assert issubclass(tooloop.APIConnectionError, tooloop.Error)
    for cls in (tooloop.StreamInterruptedError, tooloop.MaxTurnsExceeded, tooloop.Cancelled, tooloop.ConfigError,
                tooloop.InvalidResponseError, tooloop.ToolAbortedError, tooloop.SessionError):
        assert issubclass(cls, tooloop.Error)
        assert not issubclass(cls, tooloop.APIError)
    assert issubclass(tooloop.Error, Exception)


@pytest.mark.parametrize("status,etype,cls", API_ERRORS, ids=[e[1] for e in API_ERRORS])
def test_agent_api_errors_carry_status_request_id_type_and_message(
        mock: Any, status: int, etype: str, cls: Type[tooloop.APIError]) -> None:
    server = mock([error_response(status, etype, f"mock says {etype}", headers={"request-id": f"req_{status}"})])
    agent = agent_for(server, max_retries=0)
    with pytest.raises(cls) as info:
        agent.run("hi")
    e = info.value
    assert type(e) is cls
    assert (e.status_code, e.request_id, e.type, e.message) == (status, f"req_{status}", etype, f"mock says {etype}")
    assert f"mock says {etype}" in str(e) and str(status) in str(e)
    assert len(server.requests()) == 1
    # The failed request left the conversation valid: the user's input is kept.
    assert agent.messages == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert agent.history[-1]["status"] == "error"


@pytest.mark.parametrize("status,etype,cls", API_ERRORS, ids=[e[1] for e in API_ERRORS])
def test_client_create_raises_the_same_classes(mock: Any, status: int, etype: str, cls: Type[tooloop.APIError]) -> None:
    server = mock([error_response(status, etype, "nope")])
    client = tooloop.Client(base_url=server.base_url, api_key="k", max_retries=0)
    with pytest.raises(cls) as info:
        client.create(REQUEST)
    assert (info.value.status_code, info.value.request_id, info.value.type) == (status, "req_mock_0", etype)


def test_unknown_status_is_a_plain_api_error(mock: Any) -> None:
    server = mock([error_response(418, "teapot_error", "short and stout")])
    with pytest.raises(tooloop.APIError) as info:
        agent_for(server, max_retries=0).run("hi")
    assert type(info.value) is tooloop.APIError
    assert (info.value.status_code, info.value.type, info.value.message) == (418, "teapot_error", "short and stout")


def test_retries_exhausted_on_529_raise_overloaded(mock: Any) -> None:
    server = mock("anthropic_529_overloaded")
    with pytest.raises(tooloop.OverloadedError) as info:
        agent_for(server).run("hi")  # default max_retries=2: three attempts
    assert len(server.requests()) == 3
    assert info.value.request_id == "req_mock_2"


def test_retry_after_is_honoured(mock: Any) -> None:
    server = mock([error_response(429, "rate_limit_error", "slow down", headers={"retry-after": "1"}),
                   text_reply("after the wait")])
    agent = agent_for(server)
    started = time.monotonic()
    result = agent.run("hi")
    elapsed = time.monotonic() - started
    print(f"retry-after: 1 waited {elapsed:.2f} s")
    assert result.text == "after the wait"
    assert len(server.requests()) == 2
    assert 0.95 <= elapsed < 5


def test_retry_after_ms_is_honoured_by_the_client(mock: Any) -> None:
    server = mock([error_response(529, "overloaded_error", "busy", headers={"retry-after-ms": "700"}),
                   text_reply("ok")])
    started = time.monotonic()
    message = tooloop.Client(base_url=server.base_url, api_key="k").create(REQUEST)
    elapsed = time.monotonic() - started
    print(f"retry-after-ms: 700 waited {elapsed:.2f} s")
    assert message["content"][0]["text"] == "ok"
    assert 0.65 <= elapsed < 5


def test_rate_limit_error_exposes_retry_after(mock: Any) -> None:
    server = mock([error_response(429, "rate_limit_error", "later", headers={"retry-after": "120"})])
    with pytest.raises(tooloop.RateLimitError) as info:
        agent_for(server, max_retries=1).run("hi")  # 120 s is more than we wait: given up at once
    assert info.value.retry_after == 120.0
    assert len(server.requests()) == 1


def test_midstream_overloaded_event_is_an_overloaded_error_with_the_partial_message(mock: Any) -> None:
    server = mock("anthropic_stream_error_midstream")
    agent = agent_for(server)
    texts = []
    with pytest.raises(tooloop.OverloadedError) as info:
        for event in agent.stream("hi"):
            if event.type == "text":
                texts.append(event.text)
    e = info.value
    assert isinstance(e, tooloop.StreamInterruptedError) and isinstance(e, tooloop.APIError)
    assert e.status_code == 529 and e.type == "overloaded_error" and e.message == "Overloaded"
    assert e.request_id == "req_mock_0"
    assert "".join(texts) == "The answer is being"
    assert e.partial["content"] == [{"type": "text", "text": "The answer is being"}]
    assert len(server.requests()) == 1  # content had reached us: never retried
    assert_valid_view(agent.messages)


def test_midstream_error_through_the_client(mock: Any) -> None:
    server = mock("anthropic_stream_error_midstream")
    client = tooloop.Client(base_url=server.base_url, api_key="k")
    events = []
    with pytest.raises(tooloop.OverloadedError):
        with client.stream(REQUEST) as stream:
            for event in stream:
                events.append(event["type"])
    assert events[:2] == ["message_start", "content_block_start"]


def test_dropped_stream_is_interrupted_with_the_partial_message(mock: Any) -> None:
    server = mock("anthropic_stream_drop")
    agent = agent_for(server)
    with pytest.raises(tooloop.StreamInterruptedError) as info:
        agent.run("hi")
    assert not isinstance(info.value, tooloop.APIError)
    partial_text = info.value.partial["content"][0]["text"]
    assert partial_text and "".join(partial_text)
    assert len(server.requests()) == 1
    assert agent.history[-1]["status"] == "error"
    assert agent.history[-1]["content"][0]["text"] == partial_text
    assert_valid_view(agent.messages)


def test_connection_closed_without_response_is_a_connection_error(mock: Any) -> None:
    server = mock([{"fault": {"type": "close"}}])
    with pytest.raises(tooloop.APIConnectionError) as info:
        agent_for(server, max_retries=0).run("hi")
    assert not isinstance(info.value, tooloop.APITimeoutError)


def test_nothing_listening_is_a_connection_error() -> None:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    agent = tooloop.Agent(base_url=f"http://127.0.0.1:{port}", api_key="k", max_retries=0)
    with pytest.raises(tooloop.APIConnectionError):
        agent.run("hi")


def test_a_stalled_stream_hits_the_timeout_with_the_partial_message(mock: Any) -> None:
    server = mock("anthropic_stream_stall")
    started = time.monotonic()
    with pytest.raises(tooloop.APITimeoutError) as info:
        agent_for(server, timeout=0.5, max_retries=0).run("hi")
    elapsed = time.monotonic() - started
    print(f"0.5 s timeout fired after {elapsed:.2f} s")
    assert elapsed < 3
    assert info.value.phase in ("idle", "total") and info.value.timeout == 0.5
    assert info.value.partial is not None
    assert info.value.partial["content"][0]["text"] == "This tex"


def test_garbage_response_is_an_invalid_response_error(mock: Any) -> None:
    server = mock([{"raw": "this is not json", "headers": {"request-id": "req_garbage"}}])
    with pytest.raises(tooloop.InvalidResponseError) as info:
        tooloop.Client(base_url=server.base_url, api_key="k").create(REQUEST)
    assert info.value.request_id == "req_garbage"
    assert "not JSON" in str(info.value)


def test_missing_api_key_is_a_config_error_naming_the_variable() -> None:
    with pytest.raises(tooloop.ConfigError, match="ANTHROPIC_API_KEY"):
        tooloop.Agent()
    with pytest.raises(tooloop.ConfigError, match="OPENAI_API_KEY"):
        tooloop.Client(provider="openai")


def test_bad_arguments_are_config_errors() -> None:
    with pytest.raises(tooloop.ConfigError, match="provider.*bedrock-ish"):
        tooloop.Agent(provider="bedrock-ish", api_key="k")
    with pytest.raises(tooloop.ConfigError):
        tooloop.Agent(provider=42, api_key="k")  # type: ignore[arg-type]
    with pytest.raises(tooloop.ConfigError, match="timeout"):
        tooloop.Agent(api_key="k", timeout=0)
    with pytest.raises(tooloop.ConfigError, match="thinking"):
        tooloop.Agent(api_key="k", thinking=True)
    with pytest.raises(tooloop.ConfigError, match="max_turns"):
        tooloop.Agent(api_key="k", max_turns=0)
    # ConfigError is also a ValueError, as Python code expects of a bad argument.
    assert issubclass(tooloop.ConfigError, ValueError)


def test_invalid_client_request_is_a_config_error(mock: Any) -> None:
    client = tooloop.Client(base_url=mock("anthropic_text").base_url, api_key="k")
    with pytest.raises(tooloop.ConfigError, match="max_tokens"):
        client.create({"model": "m", "messages": []})
    with pytest.raises(TypeError, match="not JSON-serializable"):
        client.create({"model": "m", "max_tokens": 5, "messages": [], "metadata": {"x": object()}})


def test_session_file_that_cannot_be_written_is_a_session_error(tmp_path: Any) -> None:
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(tooloop.SessionError):
        tooloop.Agent(provider=lambda r: {"content": "x"}, session=tmp_path / "a_file" / "s.jsonl")


def test_errors_can_be_raised_and_caught_by_user_code() -> None:
    e = tooloop.RateLimitError("slow", status_code=429, request_id="r", type="rate_limit_error")
    assert (e.message, e.status_code, e.request_id, e.type, str(e)) == ("slow", 429, "r", "rate_limit_error", "slow")
    with pytest.raises(tooloop.Error):
        raise tooloop.MaxTurnsExceeded("stop", turns=3)


def test_error_event_as_the_first_event_is_an_overloaded_error_too(mock: Any) -> None:
    server = mock([{"sse": [{"event": "error", "data": {"type": "error", "error": {
        "type": "overloaded_error", "message": "Overloaded"}}}]}])
    with pytest.raises(tooloop.OverloadedError) as info:
        agent_for(server, max_retries=0).run("hi")
    assert info.value.status_code == 529 and info.value.type == "overloaded_error"
