"""What a run reports: the typed events of ``Agent.stream()`` and the values they carry (``Usage``,
``RunResult``, ``ToolCallRecord``), plus ``ToolCall``, what a permission callable is asked about.

Immutable records built from the dicts the compiled module produces; every event has a ``type`` string
(``text``, ``thinking``, ``tool_use``, ``tool_result``, ``turn``, ``usage``, ``todo``, ``subagent``,
``repetition``, ``compaction``, ``approval_request``, ``file_change``, ``model_fallback``, ``done``) so code may switch on
``event.type`` or on the class. They compare by value, print like dataclasses and pickle.

They are plain classes with ``__slots__`` rather than dataclasses on purpose: ``dataclasses`` pulls in
``inspect`` and generates each class's methods through ``exec`` at import, which made up about a third of
``import tooloop`` (see bench/import_time.py). Must never: import anything heavier than ``typing``.
"""

from __future__ import annotations

# `typing` is for the type checker only: importing it costs more than the rest of `import tooloop`.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Literal, Optional, Tuple, Union

    from .types import CheckResult, CommandRun, Todo

__all__ = [
    "Usage",
    "ToolCall",
    "ToolCallRecord",
    "RunResult",
    "TextEvent",
    "ThinkingEvent",
    "ToolUseEvent",
    "ToolResultEvent",
    "TurnEvent",
    "UsageEvent",
    "TodoEvent",
    "CompactionEvent",
    "SubagentEvent",
    "RepetitionEvent",
    "ApprovalRequestEvent",
    "FileChangeEvent",
    "ModelFallbackEvent",
    "DoneEvent",
    "Event",
]


class _Record:
    """Frozen value semantics for the classes below: fields set once in ``__init__`` (through ``_init``),
    equality and hash by field values, a dataclass-like repr, pickling through the constructor."""

    __slots__ = ()
    _fields: Tuple[str, ...] = ()

    def _init(self, **values: Any) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: cannot delete field {name!r}")

    def _values(self) -> Tuple[Any, ...]:
        return tuple(getattr(self, f) for f in self._fields)

    def __repr__(self) -> str:
        inner = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
        return f"{type(self).__name__}({inner})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, _Record)
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash((type(self).__name__,) + self._values())

    def __reduce__(self) -> Tuple[Any, Tuple[Any, ...]]:
        return (type(self), self._values())


class Usage(_Record):
    """Token counts (of a turn, a run or the whole conversation) and, where the model's price is known,
    an estimated cost in USD."""

    __slots__ = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
                 "cost_usd")
    _fields = __slots__

    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    cost_usd: Optional[float]

    def __init__(self, input_tokens: int = 0, output_tokens: int = 0, cache_creation_input_tokens: int = 0,
                 cache_read_input_tokens: int = 0, cost_usd: Optional[float] = None) -> None:
        self._init(input_tokens=input_tokens, output_tokens=output_tokens,
                   cache_creation_input_tokens=cache_creation_input_tokens,
                   cache_read_input_tokens=cache_read_input_tokens, cost_usd=cost_usd)

    @property
    def total_tokens(self) -> int:
        """Every input token (uncached, cache writes, cache reads) plus the output tokens."""
        return (self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens
                + self.output_tokens)

    @classmethod
    def _from(cls, d: Optional[Dict[str, Any]], cost_usd: Optional[float] = None) -> Usage:
        d = d or {}
        return cls(
            input_tokens=int(d.get("input_tokens") or 0),
            output_tokens=int(d.get("output_tokens") or 0),
            cache_creation_input_tokens=int(d.get("cache_creation_input_tokens") or 0),
            cache_read_input_tokens=int(d.get("cache_read_input_tokens") or 0),
            cost_usd=d.get("cost_usd", cost_usd),
        )


class ToolCall(_Record):
    """A tool call the model asked for (what a permission callable decides about)."""

    __slots__ = ("id", "name", "input")
    _fields = __slots__

    id: str
    name: str
    input: Any

    def __init__(self, id: str, name: str, input: Any) -> None:
        self._init(id=id, name=name, input=input)


class ToolCallRecord(_Record):
    """One tool call of a run and its result. ``denied``: the permission callable refused the call (its
    ``output`` is then the reason the model was given, and ``is_error`` is true)."""

    __slots__ = ("id", "name", "input", "output", "is_error", "duration_ms", "denied")
    _fields = __slots__

    id: str
    name: str
    input: Any
    output: Any
    is_error: bool
    duration_ms: int
    denied: bool

    def __init__(self, id: str, name: str, input: Any, output: Any, is_error: bool, duration_ms: int,
                 denied: bool = False) -> None:
        self._init(id=id, name=name, input=input, output=output, is_error=is_error, duration_ms=duration_ms,
                   denied=denied)

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> ToolCallRecord:
        return cls(id=d["id"], name=d["name"], input=d.get("input"), output=d.get("output"),
                   is_error=bool(d.get("is_error")), duration_ms=int(d.get("duration_ms") or 0),
                   denied=bool(d.get("denied")))


class RunResult(_Record):
    """The outcome of a run that ended normally.

    ``text`` is the text of the last assistant turn; ``stop_reason`` why it stopped (None when max_turns
    stopped the run first); ``turns`` the model requests made; ``usage`` this run's tokens; ``tool_calls``
    the calls made, in order; ``message`` the last assistant message as a dict; ``cost_usd`` this run's
    estimated cost in USD from the core's price table (None for a model without a known price; also in
    ``usage.cost_usd``); ``output`` the structured answer, valid against ``output_schema`` (an instance of
    its class when a class was given; None without a schema).

    The run's record: ``files_changed`` (workspace paths written by write-kind tools or changed by commands)
    and ``commands_run`` (``{"command", "exit_code"}`` of each shell call); ``check`` what the ``check``
    command said (None without one: see ``tooloop.types.CheckResult``); ``unverified`` what the final answer
    claims that the record does not show, after the model was told once (None: nothing, or not checked).
    """

    __slots__ = ("text", "stop_reason", "turns", "usage", "tool_calls", "max_turns_reached", "message",
                 "cost_usd", "output", "check", "files_changed", "commands_run", "unverified")
    _fields = __slots__

    text: str
    stop_reason: Optional[str]
    turns: int
    usage: Usage
    tool_calls: List[ToolCallRecord]
    max_turns_reached: bool
    message: Optional[Dict[str, Any]]
    cost_usd: Optional[float]
    output: Any
    check: Optional[CheckResult]
    files_changed: List[str]
    commands_run: List[CommandRun]
    unverified: Optional[str]

    def __init__(self, text: str, stop_reason: Optional[str], turns: int, usage: Usage,
                 tool_calls: List[ToolCallRecord], max_turns_reached: bool = False,
                 message: Optional[Dict[str, Any]] = None, cost_usd: Optional[float] = None,
                 output: Any = None, check: Optional[CheckResult] = None,
                 files_changed: Optional[List[str]] = None, commands_run: Optional[List[CommandRun]] = None,
                 unverified: Optional[str] = None) -> None:
        self._init(text=text, stop_reason=stop_reason, turns=turns, usage=usage, tool_calls=tool_calls,
                   max_turns_reached=max_turns_reached, message=message, cost_usd=cost_usd, output=output,
                   check=check, files_changed=list(files_changed or []), commands_run=list(commands_run or []),
                   unverified=unverified)

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> RunResult:
        cost = d.get("cost_usd")
        cost_usd = float(cost) if cost is not None else None
        return cls(
            text=d.get("text", ""),
            stop_reason=d.get("stop_reason"),
            turns=int(d.get("turns") or 0),
            usage=Usage._from(d.get("usage"), cost_usd),
            tool_calls=[ToolCallRecord._from(c) for c in d.get("tool_calls") or []],
            max_turns_reached=bool(d.get("max_turns_reached")),
            message=d.get("message"),
            cost_usd=cost_usd,
            output=d.get("output"),
            check=d.get("check"),
            files_changed=d.get("files_changed") or [],
            commands_run=d.get("commands_run") or [],
            unverified=d.get("unverified"),
        )


class TextEvent(_Record):
    """Text arrived (a delta: concatenate them)."""

    __slots__ = ("text",)
    _fields = __slots__
    type: Literal["text"] = "text"

    text: str

    def __init__(self, text: str) -> None:
        self._init(text=text)


class ThinkingEvent(_Record):
    """Thinking arrived (a delta)."""

    __slots__ = ("thinking",)
    _fields = __slots__
    type: Literal["thinking"] = "thinking"

    thinking: str

    def __init__(self, thinking: str) -> None:
        self._init(thinking=thinking)


class ToolUseEvent(_Record):
    """The model called a tool; its ToolResultEvent follows (also when the call is denied or not run)."""

    __slots__ = ("id", "name", "input")
    _fields = __slots__
    type: Literal["tool_use"] = "tool_use"

    id: str
    name: str
    input: Any

    def __init__(self, id: str, name: str, input: Any) -> None:
        self._init(id=id, name=name, input=input)


class ToolResultEvent(_Record):
    """A tool call has its result (also a denied, interrupted or not-run call). ``denied``: the permission
    callable refused the call, and ``content`` is the reason the model was given."""

    __slots__ = ("id", "name", "content", "is_error", "duration_ms", "denied")
    _fields = __slots__
    type: Literal["tool_result"] = "tool_result"

    id: str
    name: str
    content: Any
    is_error: bool
    duration_ms: int
    denied: bool

    def __init__(self, id: str, name: str, content: Any, is_error: bool, duration_ms: int,
                 denied: bool = False) -> None:
        self._init(id=id, name=name, content=content, is_error=is_error, duration_ms=duration_ms, denied=denied)


class TurnEvent(_Record):
    """A model turn ended: its number in the run, why it stopped and its usage. Its ``type`` is ``"turn"``
    (the Python API's documented name); the core and the C API call the same event ``turn_end``. The Python
    API reports no turn-start event, so ``"turn"`` has this one meaning here."""

    __slots__ = ("turn", "stop_reason", "usage")
    _fields = __slots__
    type: Literal["turn"] = "turn"

    turn: int
    stop_reason: Optional[str]
    usage: Usage

    def __init__(self, turn: int, stop_reason: Optional[str], usage: Usage) -> None:
        self._init(turn=turn, stop_reason=stop_reason, usage=usage)


class UsageEvent(_Record):
    """Usage so far: of the current turn, and of the run including it."""

    __slots__ = ("turn", "run")
    _fields = __slots__
    type: Literal["usage"] = "usage"

    turn: Usage
    run: Usage

    def __init__(self, turn: Usage, run: Usage) -> None:
        self._init(turn=turn, run=run)


class TodoEvent(_Record):
    """The todo list changed (``planning=True``): the whole new list, each item a dict with ``content``,
    ``status`` (pending, in_progress, completed) and optionally ``active_form``."""

    __slots__ = ("todos",)
    _fields = __slots__
    type: Literal["todo"] = "todo"

    todos: List[Todo]

    def __init__(self, todos: List[Todo]) -> None:
        self._init(todos=todos)


class SubagentEvent(_Record):
    """An event of a child agent started by a ``task`` call (``subagents=``): ``parent_id`` is the parent's
    call id, ``event`` the child's own event (typed like the parent's)."""

    __slots__ = ("parent_id", "agent_type", "event")
    _fields = __slots__
    type: Literal["subagent"] = "subagent"

    parent_id: str
    agent_type: str
    event: "Event"

    def __init__(self, parent_id: str, agent_type: str, event: "Event") -> None:
        self._init(parent_id=parent_id, agent_type=agent_type, event=event)


class RepetitionEvent(_Record):
    """The runaway guard answered a call instead of running it: the model made the same call with the same
    input ``count`` turns in a row; or progress detection found ``count`` turns in a row that changed nothing
    (identical rewrites, the same output again, a cycle of calls). ``stopped``: and the run ends (stop_reason
    ``"repetition"``). ``note``: what the model was told it repeats."""

    __slots__ = ("id", "name", "count", "stopped", "note")
    _fields = __slots__
    type: Literal["repetition"] = "repetition"

    id: str
    name: str
    count: int
    stopped: bool
    note: str

    def __init__(self, id: str, name: str, count: int, stopped: bool, note: str = "") -> None:
        self._init(id=id, name=name, count=count, stopped=stopped, note=note)


class CompactionEvent(_Record):
    """The conversation was compacted to fit the context window: ``reason`` (threshold, overflow, manual),
    ``method`` (clear_tool_results, summary, drop), estimated tokens before and after, how many entries left
    the view and how many tool results were cleared, the ``summary`` (method summary) and, when the summary
    failed and older turns were dropped instead, ``fallback_reason``."""

    __slots__ = ("reason", "method", "tokens_before", "tokens_after", "removed", "cleared", "summary",
                 "fallback_reason")
    _fields = __slots__
    type: Literal["compaction"] = "compaction"

    reason: str
    method: str
    tokens_before: int
    tokens_after: int
    removed: int
    cleared: int
    summary: Optional[str]
    fallback_reason: Optional[str]

    def __init__(self, reason: str, method: str, tokens_before: int, tokens_after: int, removed: int = 0,
                 cleared: int = 0, summary: Optional[str] = None, fallback_reason: Optional[str] = None) -> None:
        self._init(reason=reason, method=method, tokens_before=tokens_before, tokens_after=tokens_after,
                   removed=removed, cleared=cleared, summary=summary, fallback_reason=fallback_reason)


class ApprovalRequestEvent(_Record):
    """The ``permission`` callable is about to be asked about this call (the rules and ``before_tool`` let it
    through to the question). It comes after the call's ToolUseEvent and before its ToolResultEvent, so a
    UI draws the question from the event stream, in order; ``input`` is the input the call runs with."""

    __slots__ = ("id", "name", "input")
    _fields = __slots__
    type: Literal["approval_request"] = "approval_request"

    id: str
    name: str
    input: Any

    def __init__(self, id: str, name: str, input: Any) -> None:
        self._init(id=id, name=name, input=input)


class FileChangeEvent(_Record):
    """A tool of kind "write" (``write_file``, ``edit_file``, or a host's own) changed a file; comes before the
    call's ToolResultEvent. ``path`` is relative to the workspace (what ``tooloop.restore_file`` takes), ``kind``
    ``"created"``, ``"modified"`` or ``"deleted"``. What the file was before: ``before`` (its text, when it
    was UTF-8; see ``before_bytes`` for any content) and ``before_mode`` (permission bits), both None when the
    file did not exist; ``before_too_large`` when it was too large (over 8 MiB) to carry."""

    __slots__ = ("id", "name", "path", "kind", "before", "before_base64", "before_mode", "before_too_large")
    _fields = __slots__
    type: Literal["file_change"] = "file_change"

    id: str
    name: str
    path: str
    kind: str
    before: Optional[str]
    before_base64: Optional[str]
    before_mode: Optional[int]
    before_too_large: bool

    def __init__(self, id: str, name: str, path: str, kind: str, before: Optional[str] = None,
                 before_base64: Optional[str] = None, before_mode: Optional[int] = None,
                 before_too_large: bool = False) -> None:
        self._init(id=id, name=name, path=path, kind=kind, before=before, before_base64=before_base64,
                   before_mode=before_mode, before_too_large=before_too_large)

    @property
    def before_bytes(self) -> Optional[bytes]:
        """The file's exact content before the change; None when it did not exist or was too large."""
        if self.before is not None:
            return self.before.encode("utf-8")
        if self.before_base64 is not None:
            import base64

            return base64.b64decode(self.before_base64)
        return None


class ModelFallbackEvent(_Record):
    """The model failed a turn before any of it was shown (``reason``: ``"overloaded"``, ``"rate_limit"``,
    ``"server_error"``, ``"unavailable"`` or ``"context_overflow"``; ``error`` what it answered) and the next of
    ``fallback_models`` answers it, and the rest of the run."""

    __slots__ = ("from_provider", "from_model", "to_provider", "to_model", "reason", "error")
    _fields = __slots__
    type: Literal["model_fallback"] = "model_fallback"

    from_provider: str
    from_model: str
    to_provider: str
    to_model: str
    reason: str
    error: str

    def __init__(self, from_provider: str, from_model: str, to_provider: str, to_model: str, reason: str,
                 error: str = "") -> None:
        self._init(from_provider=from_provider, from_model=from_model, to_provider=to_provider,
                   to_model=to_model, reason=reason, error=error)


class DoneEvent(_Record):
    """The run ended normally; always the last event."""

    __slots__ = ("result",)
    _fields = __slots__
    type: Literal["done"] = "done"

    result: RunResult

    def __init__(self, result: RunResult) -> None:
        self._init(result=result)


if TYPE_CHECKING:
    Event = Union[TextEvent, ThinkingEvent, ToolUseEvent, ToolResultEvent, TurnEvent, UsageEvent, TodoEvent,
                  SubagentEvent, RepetitionEvent, CompactionEvent, ApprovalRequestEvent, FileChangeEvent,
                  ModelFallbackEvent, DoneEvent]


def __getattr__(name: str) -> object:
    # ``Event`` (the Union of the event classes) is built on first use: it needs ``typing``.
    if name == "Event":
        from typing import Union

        event = Union[TextEvent, ThinkingEvent, ToolUseEvent, ToolResultEvent, TurnEvent, UsageEvent, TodoEvent,
                      SubagentEvent, RepetitionEvent, CompactionEvent, ApprovalRequestEvent, FileChangeEvent,
                      ModelFallbackEvent, DoneEvent]
        globals()["Event"] = event
        return event
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _event_from(d: Dict[str, Any]) -> Optional[Event]:
    """The typed event for a core event dict; None for kinds the Python API does not report."""
    kind = d.get("type")
    if kind == "text":
        return TextEvent(d["text"])
    if kind == "thinking":
        return ThinkingEvent(d["thinking"])
    if kind == "tool_use":
        return ToolUseEvent(d["id"], d["name"], d.get("input"))
    if kind == "tool_result":
        return ToolResultEvent(d["id"], d["name"], d.get("content"), bool(d.get("is_error")),
                               int(d.get("duration_ms") or 0), bool(d.get("denied")))
    if kind == "turn_end":
        return TurnEvent(int(d["turn"]), d.get("stop_reason"), Usage._from(d.get("usage")))
    if kind == "usage":
        return UsageEvent(Usage._from(d.get("turn")), Usage._from(d.get("run")))
    if kind == "todo":
        return TodoEvent(list(d.get("todos") or []))
    if kind == "repetition":
        return RepetitionEvent(d["id"], d["name"], int(d["count"]), bool(d["stopped"]), str(d.get("note") or ""))
    if kind == "compaction":
        return CompactionEvent(str(d["reason"]), str(d["method"]), int(d.get("tokens_before") or 0),
                               int(d.get("tokens_after") or 0), int(d.get("removed") or 0),
                               int(d.get("cleared") or 0), d.get("summary"), d.get("fallback_reason"))
    if kind == "approval_request":
        return ApprovalRequestEvent(d["id"], d["name"], d.get("input"))
    if kind == "file_change":
        mode = d.get("before_mode")
        return FileChangeEvent(d["id"], d["name"], str(d["path"]), str(d["kind"]), d.get("before"),
                               d.get("before_base64"), None if mode is None else int(mode),
                               bool(d.get("before_too_large")))
    if kind == "model_fallback":
        return ModelFallbackEvent(str(d["from_provider"]), str(d["from_model"]), str(d["to_provider"]),
                                  str(d["to_model"]), str(d["reason"]), str(d.get("error") or ""))
    if kind == "subagent":
        inner = _event_from(d.get("event") or {})
        if inner is None:
            return None
        return SubagentEvent(d["parent_id"], d.get("agent_type", ""), inner)
    return None
