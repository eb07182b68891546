"""Hooks: Python callables the core calls around each tool call, each request and the end of a run.

``Agent(hooks={"before_tool": f, "after_tool": g, "before_request": h, "on_stop": k, "after_check": c})``.
Order around one call, on the agent's thread: the permission rules, ``before_tool``, the ``permission``
callable, the tool, ``after_tool``. Each returns None to carry on:

- ``before_tool(call: ToolCall) -> None | str | {"input": {...}}``: a str denies the call with that reason
  (the model reads it; False denies with a default one, True is like None); ``{"input": ...}`` runs it with
  that input instead (checked against the rules again).
- ``after_tool(call: ToolCall, result: ToolResult) -> None | str``: a str replaces the result the model sees.
- ``before_request(request: dict) -> None``: sees each request as it will be sent.
- ``on_stop(result: RunResult) -> None | str``: a str is sent as a new user message and the run goes on
  (within ``max_turns``).
- ``after_check(check: dict, message: str) -> None | str``: the ``check`` failed (``check`` as
  ``RunResult.check``: command, passed, exit_code, output_tail, runs) and ``message`` is about to go back to
  the model; a str replaces it (a hint on the failing lines, say).

A hook that raises ends the run: the exception propagates from ``run()`` unchanged, and the conversation is
valid (every call of the turn has its result), so ``resume()`` goes on. Must never: hold agent logic.
"""

from __future__ import annotations

from .events import RunResult, ToolCall

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, Optional, Tuple, Union

    _BeforeToolFn = Callable[[ToolCall], Union[None, bool, str, Dict[str, Any]]]
    _AfterToolFn = Callable[[ToolCall, "ToolResult"], Optional[str]]
    _BeforeRequestFn = Callable[[Dict[str, Any]], None]
    _OnStopFn = Callable[[RunResult], Optional[str]]
    _AfterCheckFn = Callable[[Dict[str, Any], str], Optional[str]]

__all__ = ["ToolResult", "HOOK_KINDS"]

HOOK_KINDS = ("before_tool", "after_tool", "before_request", "on_stop", "after_check")


class ToolResult(str):
    """What a tool call produced, as ``after_tool`` sees it. It is the result's text (a ``str``: blocks'
    text joined), and carries ``content`` (also ``output``: a str or a list of content blocks as the model
    would see them), ``is_error``, and ``denied`` (refused by a rule, a hook or the permission callable);
    ``result["content"]`` works too."""

    content: Any
    is_error: bool
    denied: bool

    def __new__(cls, content: Any, is_error: bool = False, denied: bool = False) -> "ToolResult":
        if isinstance(content, str):
            text = content
        elif isinstance(content, list):
            text = "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and "text" in b)
        else:
            text = str(content)
        obj = str.__new__(cls, text)
        obj.content = content
        obj.is_error = is_error
        obj.denied = denied
        return obj

    @property
    def text(self) -> str:
        return str.__str__(self)

    @property
    def output(self) -> Any:
        return self.content

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            if key in ("content", "output", "is_error", "denied", "text"):
                return getattr(self, key)
            raise KeyError(key)
        return str.__getitem__(self, key)

    def __repr__(self) -> str:
        return f"ToolResult(content={self.content!r}, is_error={self.is_error!r}, denied={self.denied!r})"


def _bad(kind: str, expected: str, got: object) -> TypeError:
    return TypeError(f"the {kind} hook must return {expected}, got {type(got).__name__}: {got!r:.100}")


def _before_tool(f: _BeforeToolFn) -> Callable[[str, str, Any], Optional[Tuple[str, Any]]]:
    def call(id: str, name: str, input: Any) -> Optional[Tuple[str, Any]]:
        answer = f(ToolCall(id=id, name=name, input=input))
        if answer is None or answer is True:
            return None
        if answer is False:
            return ("deny", "The before_tool hook refused this call.")
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


def _after_check(f: _AfterCheckFn) -> Callable[[Dict[str, Any], str], Optional[str]]:
    def call(check: Dict[str, Any], message: str) -> Optional[str]:
        answer = f(check, message)
        if answer is None or isinstance(answer, str):
            return answer or None
        raise _bad("after_check", "None or a string", answer)

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
        elif kind == "after_check":
            made[kind] = _after_check(f)
        else:
            made[kind] = _on_stop(f)
    return made
