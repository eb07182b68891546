"""tooloop: a model calling tools in a loop, done properly — a Rust core with a Python API.

    import tooloop

    agent = tooloop.Agent(model="claude-sonnet-4-6", system="You are helpful.")

    @agent.tool
    def get_time(timezone: str = "local") -> str:
        "Get the current time."
        ...

    result = agent.run("What time is it?")
    for event in agent.stream("And the date?"):
        ...

The wire layer alone is ``tooloop.Client``. Plain data comes back as ``dict``s whose shapes are the TypedDicts
of ``tooloop.types``; ``tooloop.rules`` is the core's permission-rule matcher. Errors form one tree under ``tooloop.Error``. The compiled half
is the private ``tooloop._tooloop``; the ``tooloop`` command lives in ``tooloop.cli`` and is never imported
from here.

``import tooloop`` must stay cheap (bench/import_time.py; tests/python/test_import_cost.py pins it): nothing
here imports ``typing``, ``inspect``, ``dataclasses`` or ``logging`` at import time; they load when a tool
is built or first needs them.
"""

from ._tooloop import (DEFAULT_PROTECTED_PATHS, PROVIDERS, __version__, check_aws_credentials, estimate_cost_usd,
                       restore_file, sandbox_support)
from ._tooloop import context_window as model_context_window
from ._tooloop import prefers_responses as model_prefers_responses
from ._tooloop import _set_span_source
from ._otel import span_sink as _span_sink
from ._tools import Tool, as_tool, tool
from ._agent import ALLOW_READ_ONLY, Agent, AllowReadOnly, AgentStream, SubAgent, ToolInfo
from ._hooks import ToolResult
from ._session import SessionInfo, list_sessions, load_session, migrate_session
from .errors import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    BusyError,
    Cancelled,
    ConfigError,
    Error,
    InternalServerError,
    InvalidResponseError,
    MaxTurnsExceeded,
    NotFoundError,
    OverloadedError,
    PermissionDeniedError,
    RateLimitError,
    RequestTooLargeError,
    OutputValidationError,
    SessionError,
    StreamInterruptedError,
    ToolAbortedError,
)
from .events import (
    DoneEvent,
    RunResult,
    TextEvent,
    ThinkingEvent,
    ToolCall,
    ToolCallRecord,
    ToolResultEvent,
    ToolUseEvent,
    TurnEvent,
    Usage,
    UsageEvent,
    TodoEvent,
    SubagentEvent,
    RepetitionEvent,
    CompactionEvent,
    ApprovalRequestEvent,
    FileChangeEvent,
    ModelFallbackEvent,
)

__all__ = [
    "ALLOW_READ_ONLY",
    "DEFAULT_PROTECTED_PATHS",
    "PROVIDERS",
    "AllowReadOnly",
    "__version__",
    "Agent",
    "AgentStream",
    "AsyncAgentStream",
    "AsyncMessageStream",
    "SubAgent",
    "Client",
    "MessageStream",
    "Tool",
    "tool",
    "as_tool",
    "ToolInfo",
    "SessionInfo",
    "load_session",
    "migrate_session",
    "list_sessions",
    "sandbox_support",
    "model_context_window",
    "model_prefers_responses",
    "estimate_cost_usd",
    "check_aws_credentials",
    "restore_file",
    "RunResult",
    "Usage",
    "ToolCall",
    "ToolCallRecord",
    "ToolResult",
    "Event",
    "TextEvent",
    "ThinkingEvent",
    "ToolUseEvent",
    "ToolResultEvent",
    "TurnEvent",
    "UsageEvent",
    "TodoEvent",
    "SubagentEvent",
    "RepetitionEvent",
    "CompactionEvent",
    "ApprovalRequestEvent",
    "FileChangeEvent",
    "ModelFallbackEvent",
    "DoneEvent",
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

# `Client` (the wire layer) and `Event` (a typing.Union) load on first use: `import tooloop` stays free of
# `typing` (bench/import_time.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import attempts, batch
    from ._aio import AsyncAgentStream, AsyncMessageStream
    from ._client import Client, MessageStream
    from .events import Event


def __getattr__(name: str) -> object:
    if name in ("AsyncAgentStream", "AsyncMessageStream"):
        from . import _aio

        value: object = getattr(_aio, name)
    elif name in ("Client", "MessageStream"):
        from . import _client

        value = getattr(_client, name)
    elif name in ("batch", "attempts"):
        import importlib

        value = importlib.import_module("." + name, __name__)
    elif name == "Event":
        from . import events

        value = events.Event
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


# OpenTelemetry (tooloop._otel): each run asks `_span_sink` whether to report its spans; it imports nothing
# unless the program has imported opentelemetry itself.
_set_span_source(_span_sink)
