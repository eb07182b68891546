"""Permission policies: the callable handed to ``tooloop.Agent(permission=...)``.

The agent calls the policy before each tool call with the call (``.name``, ``.input``, ``.id``); the
policy answers True (run it), or a string: the reason the call was refused, which the model reads as the
tool's error result. Three policies:

- ``auto``: everything runs (``--yes``).
- ``read-only``: read_file runs; bash, write_file, edit_file and unknown tools are refused with a reason
  that tells the model what to do instead (``--read-only``; the default when stdin is not a terminal).
- ``ask``: read_file runs; anything else is shown to the user, who answers y (once), n (or a reason), or
  a (always allow this tool for the rest of the process).

Must never: let a mutating call run in read-only mode, or block forever once the run is cancelled.
Standard library only.
"""

from __future__ import annotations

import json
import os
import select
import threading
from typing import Any, Callable, Dict, Optional, Set, Tuple, Union

#: Tools that change nothing: they never need asking.
SAFE_TOOLS = frozenset({"read_file"})
#: The built-in tools that change files or run commands.
MUTATING_TOOLS = ("bash", "write_file", "edit_file")

Decision = Union[bool, str]

READ_ONLY_REASON = (
    "tooloop is in read-only mode, so {name} is disabled (bash, write_file and edit_file are denied; "
    "read_file works). Do not retry it: investigate with read_file, then answer, describing any change "
    "or command you would make instead of making it. The user can allow changes by running tooloop "
    "with --yes or on a terminal.")


def call_parts(call: Any) -> Tuple[str, Dict[str, Any], str]:
    """(name, input, id) of a tool call given as an object with attributes or as a dict."""
    if isinstance(call, dict):
        name, inp, ident = call.get("name"), call.get("input"), call.get("id")
    else:
        name, inp, ident = (getattr(call, "name", None), getattr(call, "input", None),
                            getattr(call, "id", None))
    if isinstance(inp, str):
        try:
            inp = json.loads(inp)
        except ValueError:
            inp = {"input": inp}
    return str(name or "?"), inp if isinstance(inp, dict) else {"input": inp}, str(ident or "")


class AutoPolicy:
    """Allow every call (``--yes``)."""

    mode = "auto"

    def __call__(self, call: Any) -> Decision:
        return True


class ReadOnlyPolicy:
    """Allow only the tools that change nothing."""

    mode = "read-only"

    def __call__(self, call: Any) -> Decision:
        name, _, _ = call_parts(call)
        if name in SAFE_TOOLS:
            return True
        return READ_ONLY_REASON.format(name=name)


def parse_answer(text: Optional[str]) -> Tuple[str, str]:
    """The user's answer to a permission question: ("allow" | "always" | "deny", reason).

    y/yes/Enter-less "y" allow once; a/always allow the tool from now on; n/no or an empty answer deny;
    any other text denies the call with that text as the reason the model reads."""
    if text is None:
        return "deny", ""
    answer = text.strip()
    low = answer.lower()
    if low in ("y", "yes"):
        return "allow", ""
    if low in ("a", "always"):
        return "always", ""
    if low in ("", "n", "no"):
        return "deny", ""
    return "deny", answer


class Interrupted(Exception):
    """The question was abandoned because the run was cancelled."""


class AskPolicy:
    """Ask the user before each call that can change something.

    `show(name, input, id)` presents the call; `read_answer()` returns the typed line, None when input is
    closed, or raises Interrupted when the run was cancelled while waiting."""

    mode = "ask"

    def __init__(self, show: Callable[..., None], read_answer: Callable[[], Optional[str]]):
        self._show = show
        self._read = read_answer
        self._lock = threading.Lock()  # one question on the screen at a time, even with parallel tools
        self.always: Set[str] = set()

    def __call__(self, call: Any) -> Decision:
        name, inp, ident = call_parts(call)
        if name in SAFE_TOOLS or name in self.always:
            return True
        with self._lock:
            if name in self.always:  # answered "always" while this call waited for the lock
                return True
            self._show(name, inp, ident)
            try:
                line = self._read()
            except Interrupted:
                return "The run was interrupted before the user answered; the call was not run."
        if line is None:
            return f"No answer from the user (input closed), so the {name} call was not run."
        verdict, reason = parse_answer(line)
        if verdict == "always":
            self.always.add(name)
            return True
        if verdict == "allow":
            return True
        if reason:
            return f"The user declined this {name} call: {reason}"
        return (f"The user declined this {name} call. Do not retry it as is: ask the user what they "
                f"want, or take another approach.")


class TerminalReader:
    """Reads one answer line from a terminal file descriptor, giving up when `abort` is set.

    Polls with select so that a Ctrl+C handled on another thread (which sets `abort`) frees a question
    that is waiting for Enter, instead of leaving a thread blocked in read() forever."""

    def __init__(self, fd: int = 0, abort: Optional[threading.Event] = None, poll: float = 0.05):
        self.fd = fd
        self.abort = abort or threading.Event()
        self.poll = poll

    def __call__(self) -> Optional[str]:
        buf = b""
        while True:
            if self.abort.is_set():
                raise Interrupted()
            try:
                ready, _, _ = select.select([self.fd], [], [], self.poll)
            except InterruptedError:
                continue
            if not ready:
                continue
            chunk = os.read(self.fd, 1024)
            if not chunk:
                return buf.decode("utf-8", "replace") if buf else None
            buf += chunk
            if b"\n" in buf or b"\r" in buf:
                return buf.splitlines()[0].decode("utf-8", "replace")


def choose(mode: Optional[str], stdin_is_tty: bool) -> str:
    """The policy name: an explicit mode wins; otherwise ask on a terminal, read-only without one."""
    if mode:
        return mode
    return "ask" if stdin_is_tty else "read-only"


class Observed:
    """Wraps a policy so every call it sees is also reported to `note(id, name, input)` (the renderer
    uses it to show refused calls, which get no tool_use event). Keeps the policy's `mode`."""

    def __init__(self, policy: Callable[[Any], Decision], note: Callable[[str, str, Dict[str, Any]], None]):
        self.policy = policy
        self.note = note
        self.mode = getattr(policy, "mode", "custom")

    def __call__(self, call: Any) -> Decision:
        name, inp, ident = call_parts(call)
        try:
            self.note(ident, name, inp)
        except Exception:
            pass
        return self.policy(call)
