"""What a run reports: the typed events of ``Agent.stream()`` and the values they carry (``Usage``,
``RunResult``, ``ToolCallRecord``), plus ``ToolCall``, what a permission callable is asked about.

Plain frozen dataclasses built from the dicts the compiled module produces; every event has a ``type``
string (``text``, ``thinking``, ``tool_use``, ``tool_result``, ``turn``, ``usage``, ``done``) so code may
switch on ``event.type`` or on the class.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Literal, Optional, Union

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
    "DoneEvent",
    "Event",
]


@dataclass(frozen=True)
class Usage:
    """Token counts (of a turn, a run or the whole conversation) and, where the model's price is known,
    an estimated cost in USD."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cost_usd: Optional[float] = None

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


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model asked for (what a permission callable decides about)."""

    id: str
    name: str
    input: Any


@dataclass(frozen=True)
class ToolCallRecord:
    """One tool call of a run and its result."""

    id: str
    name: str
    input: Any
    output: Any
    is_error: bool
    duration_ms: int

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> ToolCallRecord:
        return cls(id=d["id"], name=d["name"], input=d.get("input"), output=d.get("output"),
                   is_error=bool(d.get("is_error")), duration_ms=int(d.get("duration_ms") or 0))


@dataclass(frozen=True)
class RunResult:
    """The outcome of a run that ended normally.

    ``text`` is the text of the last assistant turn; ``stop_reason`` why it stopped (None when max_turns
    stopped the run first); ``turns`` the model requests made; ``usage`` this run's tokens; ``tool_calls``
    the calls made, in order; ``message`` the last assistant message as a dict.
    """

    text: str
    stop_reason: Optional[str]
    turns: int
    usage: Usage
    tool_calls: List[ToolCallRecord]
    max_turns_reached: bool = False
    message: Optional[Dict[str, Any]] = None

    @classmethod
    def _from(cls, d: Dict[str, Any], model: str = "") -> RunResult:
        from ._tooloop import estimate_cost_usd

        usage = d.get("usage") or {}
        return cls(
            text=d.get("text", ""),
            stop_reason=d.get("stop_reason"),
            turns=int(d.get("turns") or 0),
            usage=Usage._from(usage, estimate_cost_usd(model, usage) if model else None),
            tool_calls=[ToolCallRecord._from(c) for c in d.get("tool_calls") or []],
            max_turns_reached=bool(d.get("max_turns_reached")),
            message=d.get("message"),
        )


@dataclass(frozen=True)
class TextEvent:
    """Text arrived (a delta: concatenate them)."""

    text: str
    type: Literal["text"] = field(default="text", init=False)


@dataclass(frozen=True)
class ThinkingEvent:
    """Thinking arrived (a delta)."""

    thinking: str
    type: Literal["thinking"] = field(default="thinking", init=False)


@dataclass(frozen=True)
class ToolUseEvent:
    """The model called a tool; its ToolResultEvent follows (also when the call is denied or not run)."""

    id: str
    name: str
    input: Any
    type: Literal["tool_use"] = field(default="tool_use", init=False)


@dataclass(frozen=True)
class ToolResultEvent:
    """A tool call has its result (also a denied, interrupted or not-run call)."""

    id: str
    name: str
    content: Any
    is_error: bool
    duration_ms: int
    type: Literal["tool_result"] = field(default="tool_result", init=False)


@dataclass(frozen=True)
class TurnEvent:
    """A model turn ended: its number in the run, why it stopped and its usage."""

    turn: int
    stop_reason: Optional[str]
    usage: Usage
    type: Literal["turn"] = field(default="turn", init=False)


@dataclass(frozen=True)
class UsageEvent:
    """Usage so far: of the current turn, and of the run including it."""

    turn: Usage
    run: Usage
    type: Literal["usage"] = field(default="usage", init=False)


@dataclass(frozen=True)
class DoneEvent:
    """The run ended normally; always the last event."""

    result: RunResult
    type: Literal["done"] = field(default="done", init=False)


Event = Union[TextEvent, ThinkingEvent, ToolUseEvent, ToolResultEvent, TurnEvent, UsageEvent, DoneEvent]


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
                               int(d.get("duration_ms") or 0))
    if kind == "turn_end":
        return TurnEvent(int(d["turn"]), d.get("stop_reason"), Usage._from(d.get("usage")))
    if kind == "usage":
        return UsageEvent(Usage._from(d.get("turn")), Usage._from(d.get("run")))
    return None
