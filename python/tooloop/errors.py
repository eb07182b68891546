"""The exceptions of tooloop: one tree under ``tooloop.Error``, one class per kind of core error.

::

    Error
    ├── APIError                     status_code, request_id, type, message, retry_after
    │   ├── BadRequestError          400 invalid_request_error
    │   ├── AuthenticationError      401 authentication_error
    │   ├── PermissionDeniedError    403 permission_error
    │   ├── NotFoundError            404 not_found_error
    │   ├── RequestTooLargeError     413 request_too_large
    │   ├── RateLimitError           429 rate_limit_error
    │   ├── InternalServerError      500 api_error (and other 5xx)
    │   └── OverloadedError          529 overloaded_error
    ├── APIConnectionError           the connection failed or broke before any content arrived
    │   └── APITimeoutError          connect / idle / total timeout (partial: what had arrived)
    ├── StreamInterruptedError       a stream broke after content had arrived (partial: the message so far)
    ├── MaxTurnsExceeded             the run reached max_turns (turns); resume() continues
    ├── Cancelled                    cancel() was called (partial: what had streamed in)
    ├── ToolAbortedError             a tool ended the run on purpose (tool)
    ├── InvalidResponseError         the response broke the protocol (or a Python model returned garbage)
    ├── SessionError                 reading or writing the session file failed
    ├── OutputValidationError        the final answer did not match output_schema (errors, output, text)
    ├── BusyError                    a run was started while one is in progress on the same agent
    └── ConfigError (also ValueError) a bad argument or configuration (missing API key, duplicate tool, ...)

An ``error`` event inside a stream (e.g. ``overloaded_error`` after some text) raises an exception that is
BOTH a ``StreamInterruptedError`` (with ``partial``) and the ``APIError`` subclass of its error type, so
``except OverloadedError`` catches a mid-stream overload as it catches a 529. Its ``status_code`` is the
status the API uses for that error type (529 for ``overloaded_error``): the HTTP response itself was a 200.

The compiled module raises these through ``_from_core``; a Python tool's ``KeyboardInterrupt`` (or any other
``BaseException`` that is not an ``Exception``) is re-raised unchanged instead.
"""

from __future__ import annotations

# `typing` is for the type checker only: importing it costs more than the rest of `import tooloop`.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Tuple, Type

__all__ = [
    "Error",
    "APIError",
    "BadRequestError",
    "AuthenticationError",
    "PermissionDeniedError",
    "NotFoundError",
    "RequestTooLargeError",
    "RateLimitError",
    "InternalServerError",
    "OverloadedError",
    "APIConnectionError",
    "APITimeoutError",
    "StreamInterruptedError",
    "MaxTurnsExceeded",
    "Cancelled",
    "ToolAbortedError",
    "InvalidResponseError",
    "SessionError",
    "OutputValidationError",
    "BusyError",
    "ConfigError",
]


class Error(Exception):
    """Base class of every error tooloop raises. ``message`` is the text of ``str(error)``."""

    message: str

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message


class APIError(Error):
    """The API answered with an error (after any retries).

    ``message`` is the API's own ``error.message``; ``str(error)`` adds the status, type and request id.
    """

    status_code: Optional[int]
    request_id: Optional[str]
    type: Optional[str]
    retry_after: Optional[float]

    def __init__(
        self,
        message: str = "",
        *,
        status_code: Optional[int] = None,
        request_id: Optional[str] = None,
        type: Optional[str] = None,
        retry_after: Optional[float] = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.request_id = request_id
        self.type = type
        self.retry_after = retry_after

    def __str__(self) -> str:
        text = getattr(self, "_display", None)
        return text if isinstance(text, str) else self.message


class BadRequestError(APIError):
    """400 ``invalid_request_error``: the request is wrong; retrying won't help."""


class AuthenticationError(APIError):
    """401 ``authentication_error``: missing or invalid API key."""


class PermissionDeniedError(APIError):
    """403 ``permission_error``: the key may not use this model or feature."""


class NotFoundError(APIError):
    """404 ``not_found_error``: wrong model name or base URL."""


class RequestTooLargeError(APIError):
    """413 ``request_too_large``."""


class RateLimitError(APIError):
    """429 ``rate_limit_error`` (after the retries; ``retry_after`` is what the server asked for)."""


class InternalServerError(APIError):
    """500 ``api_error`` and other 5xx statuses."""


class OverloadedError(APIError):
    """529 ``overloaded_error``, or an ``overloaded_error`` event in the middle of a stream."""


class APIConnectionError(Error):
    """The connection could not be made, or broke before any content arrived (after any retries)."""


class APITimeoutError(APIConnectionError):
    """A timeout fired. ``phase`` is ``connect``, ``idle`` or ``total``; ``timeout`` its length in seconds;
    ``partial`` the message received before it fired when a stream had started (else None)."""

    phase: Optional[str]
    timeout: Optional[float]
    partial: Optional[Dict[str, Any]]

    def __init__(
        self,
        message: str = "",
        *,
        phase: Optional[str] = None,
        timeout: Optional[float] = None,
        partial: Optional[Dict[str, Any]] = None,
    ) -> None:
        super().__init__(message)
        self.phase = phase
        self.timeout = timeout
        self.partial = partial


class StreamInterruptedError(Error):
    """A stream broke after content had reached the caller. It is not retried (that would duplicate
    output); ``partial`` is the assistant message as far as it had arrived (a dict in the Messages shape)."""

    partial: Dict[str, Any]

    def __init__(self, message: str = "", *, partial: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.partial = partial if partial is not None else {}


class MaxTurnsExceeded(Error):
    """The run made ``turns`` model requests (its max_turns) without finishing. The conversation is valid:
    ``agent.resume()`` continues it."""

    turns: int

    def __init__(self, message: str = "", *, turns: int = 0) -> None:
        super().__init__(message)
        self.turns = turns


class Cancelled(Error):
    """``cancel()`` stopped the run or request. ``partial`` is what had streamed in, if anything."""

    partial: Optional[Dict[str, Any]]

    def __init__(self, message: str = "cancelled", *, partial: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.partial = partial


class ToolAbortedError(Error):
    """A tool ended the run on purpose (a fatal tool error, not a result the model reads)."""

    tool: str

    def __init__(self, message: str = "", *, tool: str = "") -> None:
        super().__init__(message)
        self.tool = tool


class InvalidResponseError(Error):
    """The response did not follow the protocol (malformed JSON, a missing field, a bad event), or a Python
    model callable returned something that is not a valid message."""

    request_id: Optional[str]

    def __init__(self, message: str = "", *, request_id: Optional[str] = None) -> None:
        super().__init__(message)
        self.request_id = request_id


class SessionError(Error):
    """Reading or writing the session file failed (``errno`` is the OS error number, when there is one)."""

    errno: Optional[int]

    def __init__(self, message: str = "", *, errno: Optional[int] = None) -> None:
        super().__init__(message)
        self.errno = errno


class OutputValidationError(Error):
    """The run's final answer did not match ``output_schema`` after ``output_retries`` corrections.

    ``errors`` lists what was wrong with the last answer; ``output`` is that answer as JSON (None when it did
    not parse) and ``text`` as the model wrote it; ``attempts`` counts the answers given. The conversation is
    valid: ``agent.resume()`` or a new ``run`` may go on."""

    errors: List[str]
    output: Any
    text: str
    attempts: int

    def __init__(
        self, message: str = "", *, errors: Optional[List[str]] = None, output: Any = None, text: str = "",
        attempts: int = 0,
    ) -> None:
        super().__init__(message)
        self.errors = list(errors or [])
        self.output = output
        self.text = text
        self.attempts = attempts


class BusyError(Error):
    """A run, resume or compaction was started while a run is in progress on the same agent (one at a time),
    possibly on another thread or from inside one of its own callbacks. Nothing was changed: wait for the run
    to end, or ``cancel()`` it, then try again."""


class ConfigError(Error, ValueError):
    """A configuration or argument problem: unknown provider, missing API key, invalid tool name or schema,
    a tool name that is already registered, ..."""


# The core's ApiErrorKind names → classes, and the status each error type stands for.
_API_CLASSES: Dict[str, Tuple[Type[APIError], Optional[int]]] = {
    "bad_request": (BadRequestError, 400),
    "authentication": (AuthenticationError, 401),
    "permission_denied": (PermissionDeniedError, 403),
    "not_found": (NotFoundError, 404),
    "request_too_large": (RequestTooLargeError, 413),
    "rate_limit": (RateLimitError, 429),
    "internal_server": (InternalServerError, 500),
    "overloaded": (OverloadedError, 529),
    "other": (APIError, None),
}

_MIDSTREAM: Dict[Type[APIError], Type[APIError]] = {}


def _midstream_class(api_cls: Type[APIError]) -> Type[APIError]:
    """``StreamInterrupted<Name>``: a subclass of both StreamInterruptedError and ``api_cls`` (cached)."""
    cls = _MIDSTREAM.get(api_cls)
    if cls is None:
        name = "StreamInterrupted" + api_cls.__name__
        cls = type(name, (StreamInterruptedError, api_cls), {"__module__": __name__, "__doc__": (
            f"An error event of type {api_cls.__name__} inside a stream, after content had arrived.")})
        _MIDSTREAM[api_cls] = cls
    return cls


def _new(cls: Type[Error], message: str) -> Any:
    # Built without the classes' __init__ signatures: the attributes are set from the core's description.
    exc = cls.__new__(cls)
    Exception.__init__(exc, message)
    exc.message = message
    return exc


def _set_api(exc: Any, info: Dict[str, Any], status: Optional[int]) -> None:
    exc.message = info.get("api_message") or info.get("message", "")
    exc._display = info.get("message", "")
    exc.status_code = status
    exc.request_id = info.get("request_id")
    exc.type = info.get("error_type") or None
    exc.retry_after = info.get("retry_after")


def _from_core(info: Dict[str, Any]) -> BaseException:
    """The exception for a core error described by ``info`` (built by the compiled module)."""
    kind = info.get("kind")
    message = str(info.get("message", ""))
    exc: Any
    if kind == "api":
        cls, canonical = _API_CLASSES.get(info.get("api_kind", "other"), (APIError, None))
        exc = _new(cls, message)
        status = info.get("status_code")
        # An error event as the very first event of a stream arrives with HTTP 200: report the status
        # its error type stands for, as for an error event later in the stream.
        if canonical is not None and (status is None or status < 400):
            status = canonical
        _set_api(exc, info, status)
    elif kind == "stream_interrupted":
        if "api_kind" in info:
            api_cls, canonical = _API_CLASSES.get(info["api_kind"], (APIError, None))
            exc = _new(_midstream_class(api_cls), message)
            status = info.get("status_code")
            _set_api(exc, info, canonical if canonical is not None else status)
        else:
            exc = _new(StreamInterruptedError, message)
        exc.partial = info.get("partial") or {}
    elif kind == "connection":
        exc = _new(APIConnectionError, message)
    elif kind == "timeout":
        exc = _new(APITimeoutError, message)
        exc.phase = info.get("phase")
        exc.timeout = info.get("after")
        exc.partial = info.get("partial")
    elif kind == "cancelled":
        exc = _new(Cancelled, message)
        exc.partial = info.get("partial")
    elif kind == "max_turns":
        exc = _new(MaxTurnsExceeded, message)
        exc.turns = int(info.get("turns") or 0)
    elif kind == "tool_aborted":
        exc = _new(ToolAbortedError, message)
        exc.tool = info.get("tool", "")
    elif kind == "invalid_response":
        exc = _new(InvalidResponseError, message)
        exc.request_id = info.get("request_id")
    elif kind == "io":
        exc = _new(SessionError, message)
        exc.errno = info.get("errno")
    elif kind == "output_validation":
        exc = _new(OutputValidationError, message)
        exc.errors = list(info.get("errors") or [])
        exc.output = info.get("output")
        exc.text = info.get("text", "")
        exc.attempts = int(info.get("attempts") or 0)
    elif kind == "busy":
        exc = _new(BusyError, message)
    elif kind in ("config", "invalid_option", "duplicate_tool"):
        exc = _new(ConfigError, message)
    else:
        exc = _new(Error, message)
    return exc  # type: ignore[no-any-return]
