"""Hooks: Python callables the core calls around each tool call, each request and the end of a run.

``Agent(hooks={"before_tool": f, "after_tool": g, "before_request": h, "on_stop": k})``. Order around one call,
on the agent's thread: the permission rules, ``before_tool``, the ``permission`` callable, the tool,
``after_tool``. Each returns None to carry on:

- ``before_tool(call: ToolCall) -> None | str | {"input": {...}}``: a str denies the call with that reason
  (the model reads it); ``{"input": ...}`` runs it with that input instead (checked against the rules again).
- ``after_tool(call: ToolCall, result: ToolResult) -> None | str``: a str replaces the result the model sees.
- ``before_request(request: dict) -> None``: sees each request as it will be sent.
- ``on_stop(result: RunResult) -> None | str``: a str is sent as a new user message and the run goes on
  (within ``max_turns``).

A hook that raises ends the run: the exception propagates from ``run()`` unchanged, and the conversation is
valid (every call of the turn has its result), so ``resume()`` goes on. Must never: hold agent logic.
"""

from __future__ import annotations

from .events import RunResult, ToolCall, _Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, Optional, Tuple, Union

    _BeforeToolFn = Callable[[ToolCall], Union[None, str, Dict[str, Any]]]
    _AfterToolFn = Callable[[ToolCall, "ToolResult"], Optional[str]]
    _BeforeRequestFn = Callable[[Dict[str, Any]], None]
    _OnStopFn = Callable[[RunResult], Optional[str]]

__all__ = ["ToolResult", "HOOK_KINDS"]

HOOK_KINDS = ("before_tool", "after_tool", "before_request", "on_stop")


class ToolResult(_Record):
    """What a tool call produced, as ``after_tool`` sees it: ``content`` (a str or a list of content blocks),
    ``is_error``, and ``denied`` (refused by a rule, a hook or the permission callable). ``text`` is the
    content as one string."""

    __slots__ = ("content", "is_error", "denied")
    _fields = __slots__

    content: Any
    is_error: bool
    denied: bool

    def __init__(self, content: Any, is_error: bool = False, denied: bool = False) -> None:
        self._init(content=content, is_error=is_error, denied=denied)

    @property
    def text(self) -> str:
        c = self.content
        if isinstance(c, str):
            return c
        if isinstance(c, list):
            return "\n".join(str(b.get("text", "")) for b in c if isinstance(b, dict) and "text" in b)
        return str(c)

    def __str__(self) -> str:
        return self.text


def _bad(kind: str, expected: str, got: object) -> TypeError:
    return TypeError(f"the {kind} hook must return {expected}, got {type(got).__name__}: {got!r:.100}")


def _before_tool(f: _BeforeToolFn) -> Callable[[str, str, Any], Optional[Tuple[str, Any]]]:
    def call(id: str, name: str, input: Any) -> Optional[Tuple[str, Any]]:
        answer = f(ToolCall(id=id, name=name, input=input))
        if answer is None:
            return None
        if isinstance(answer, str):
            return ("deny", answer or "The before_tool hook refused this call.")
        if isinstance(answer, dict) and set(answer) == {"input"} and isinstance(answer["input"], dict):
            return ("input", answer["input"])
        raise _bad("before_tool", 'None, a reason string or {"input": {...}}', answer)

    return call


def _after_tool(f: _AfterToolFn) -> Callable[[str, str, Any, Any, bool, bool], Optional[str]]:
    def call(id: str, name: str, input: Any, content: Any, is_error: bool, denied: bool) -> Optional[str]:
        answer = f(ToolCall(id=id, name=name, input=input), ToolResult(content, is_error, denied))
        if answer is None or isinstance(answer, str):
            return answer
        raise _bad("after_tool", "None or a string", answer)

    return call


def _before_request(f: _BeforeRequestFn) -> Callable[[Dict[str, Any]], None]:
    def call(request: Dict[str, Any]) -> None:
        f(request)

    return call


def _on_stop(f: _OnStopFn) -> Callable[[Dict[str, Any]], Optional[str]]:
    def call(result: Dict[str, Any]) -> Optional[str]:
        answer = f(RunResult._from(result))
        if answer is None or isinstance(answer, str):
            return answer or None
        raise _bad("on_stop", "None or a string", answer)

    return call


def adapters(hooks: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """The core's adapters for a ``hooks=`` dict (an unknown key or a value that is not callable is a
    ConfigError)."""
    from .errors import ConfigError

    if hooks is None:
        return {}
    if not isinstance(hooks, dict):
        raise ConfigError(f"hooks must be a dict of {', '.join(HOOK_KINDS)} to callables, got {type(hooks).__name__}")
    made: Dict[str, Any] = {}
    for kind, f in hooks.items():
        if kind not in HOOK_KINDS:
            raise ConfigError(f"unknown hook {kind!r}; the hooks are {', '.join(HOOK_KINDS)}")
        if f is None:
            continue
        if not callable(f):
            raise ConfigError(f"hook {kind!r} must be callable, got {type(f).__name__}")
        if kind == "before_tool":
            made[kind] = _before_tool(f)
        elif kind == "after_tool":
            made[kind] = _after_tool(f)
        elif kind == "before_request":
            made[kind] = _before_request(f)
        else:
            made[kind] = _on_stop(f)
    return made
