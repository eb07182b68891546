"""``tooloop.Client``: the wire layer on its own, like the official SDKs' clients.

Requests and responses are dicts in the API's own shape: a Messages API request in and a Message out for
``provider="anthropic"`` and ``"bedrock"``; a Chat Completions request in and a ``chat.completion`` out for
``provider="openai"``; a Responses request in and a ``response`` object out for ``"openai-responses"``.
``stream()`` yields every wire event as a dict, as received (Anthropic events, ping and unknown ones included;
``chat.completion.chunk`` dicts; Responses events such as ``response.output_text.delta``), and
``final_message()`` the dict ``create()`` would have returned (for OpenAI: every choice, ``content`` and
``refusal`` as the API sent them; for Responses: the terminal event's ``response``). Requests run with the GIL
released, on the calling thread (``stream()`` with a model callable, and Bedrock streams, on a worker
thread); Ctrl+C cancels them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Iterator, Optional, Union

from . import _tooloop
from ._agent import ModelFn, _model_adapter, _RunHandle
from .errors import ConfigError

if TYPE_CHECKING:
    from ._aio import AsyncMessageStream

__all__ = ["Client", "MessageStream"]


class MessageStream(_RunHandle):
    """A streaming request: iterate for the raw events (dicts), then ``final_message()``.

    Use it as a context manager: leaving the block early cancels the request.
    """

    def __init__(self, run: Union[_tooloop._Run, _tooloop._Stream]) -> None:
        self._run = run

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        # A stream read on this thread iterates itself (no Python frame per event); it raises the stream's
        # exception at the end, as __next__ does.
        if isinstance(self._run, _tooloop._Stream):
            return self._run
        return self

    def __next__(self) -> Dict[str, Any]:
        event = self._run.next_event()
        if event is None:
            # The stream has ended: raise its error, if it failed, rather than stop quietly.
            self._run.result()
            raise StopIteration
        return event

    @property
    def text_stream(self) -> Iterator[str]:
        """The text as it arrives, in coalesced ``str`` chunks (every piece that arrived since the previous
        chunk, joined; other events are skipped): the cheap way to print a streamed answer. Afterwards,
        ``final_message()`` has the whole message; a failed stream raises from the iteration."""
        while True:
            text = self._run.next_text()
            if text is None:
                self._run.result()
                return
            yield text

    def final_message(self) -> Dict[str, Any]:
        """The complete message (reading the rest of the stream first): equal to what ``create()`` returns
        for the same content."""
        return self._run.result()

    def get_final_text(self) -> str:
        """The text of the final message: its text blocks joined (Anthropic shape), the first choice's
        ``content`` (Chat Completions shape), or the ``output_text`` parts of its messages (Responses shape)."""
        message = self.final_message()
        if message.get("object") == "response":
            items = [i for i in message.get("output") or [] if i.get("type") == "message"]
            parts = [p for i in items for p in i.get("content") or [] if p.get("type") == "output_text"]
            return "".join(p.get("text", "") for p in parts)
        if message.get("object") == "chat.completion":
            choices = message.get("choices") or [{}]
            return (choices[0].get("message") or {}).get("content") or ""
        return "".join(b.get("text", "") for b in message.get("content") or [] if b.get("type") == "text")


class Client:
    """One provider, one request at a time per call: ``create(request)`` and ``stream(request)``.

    ``request`` is a body in the API's own shape: a Messages API request (``model``, ``max_tokens``,
    ``messages``, ...) for ``"anthropic"`` and ``"bedrock"`` (``model`` is then the Bedrock model id or
    inference profile id, sent in the path), a Chat Completions request (``messages`` with system/user/
    assistant/tool roles, ``tools`` in the OpenAI format, ``max_tokens`` optional, ``n``, ...) for
    ``"openai"``, a Responses request (``input`` items, ``instructions``, flat function ``tools``, ...) for
    ``"openai-responses"`` (sent as given: add ``store``/``include`` yourself for stateless reasoning).
    Unknown fields pass through; tools without ``input_schema`` (server tools) are sent as
    given. ``region`` is for Bedrock only (default ``AWS_REGION`` / ``AWS_DEFAULT_REGION``; credentials come
    from the AWS environment variables or ``~/.aws/credentials``). Errors are the same exceptions as the
    agent's. Thread-safe: calls from several threads run concurrently.
    """

    def __init__(
        self,
        provider: Union[str, ModelFn] = "anthropic",
        api_key: Optional[str] = None,
        base_url: Optional[str] = None,
        timeout: float = 600.0,
        max_retries: int = 2,
        headers: Optional[Dict[str, str]] = None,
        region: Optional[str] = None,
    ) -> None:
        if not isinstance(provider, str) and not callable(provider):
            raise ConfigError(
                f"provider must be one of {[p['name'] for p in _tooloop.PROVIDERS]} or a callable, "
                f"got {type(provider).__name__}"
            )
        core_provider: Any = provider if isinstance(provider, str) else _model_adapter(provider)
        self._core = _tooloop._Client(
            core_provider,
            api_key=api_key,
            base_url=base_url,
            timeout=float(timeout),
            max_retries=max_retries,
            headers=headers,
            region=region,
        )

    def create(self, request: Dict[str, Any]) -> Dict[str, Any]:
        """Send ``request`` (not streamed) and return the response dict."""
        return self._core.create(request)

    def stream(self, request: Dict[str, Any]) -> MessageStream:
        """Send ``request`` as a stream; iterate the returned ``MessageStream`` for its events."""
        return MessageStream(self._core.start_stream(request))

    async def acreate(self, request: Optional[Dict[str, Any]] = None, /, **fields: Any) -> Dict[str, Any]:
        """``create`` for asyncio: ``await client.acreate(**request)`` (or ``acreate(request)``, or both: the
        keywords win) returns what ``create`` would and raises the same exceptions; the request runs on a
        worker thread, so the loop is never blocked. Cancelling the awaiting task cancels the request."""
        from ._aio import create

        body = {**(request or {}), **fields}
        core = self._core
        return await create(lambda: core.start_create(body))

    def astream(self, request: Optional[Dict[str, Any]] = None, /, **fields: Any) -> AsyncMessageStream:
        """``stream`` for asyncio: ``async for event in client.astream(**request)`` yields the same raw events
        as ``stream()``, then ``await stream.final_message()`` (see ``AsyncMessageStream``). Call it from a
        coroutine: the request starts at once, on a worker thread."""
        from ._aio import message_stream

        body = {**(request or {}), **fields}
        core = self._core
        return message_stream(lambda: core.start_stream(body))

    def __repr__(self) -> str:
        return f"Client(provider={self._core.provider_name!r})"
