"""Runs one task on the agent and shows it: streams events to a Renderer, turns Ctrl+C into a cancel
that leaves the conversation valid, and turns library errors into one line for the user.

Must never: let a KeyboardInterrupt escape a run (the REPL returns to its prompt), or leave a permission
question waiting after the run ended.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any, Dict, Iterator, Optional

from .render import Renderer, field, usage_numbers


@dataclass
class Outcome:
    status: str                      # "ok" | "error" | "cancelled"
    result: Any = None               # the run's result (RunResult) when status is "ok"
    error: Optional[BaseException] = None
    message: str = ""                # one line for the user when status is "error"
    turns: int = 0
    usage: Any = None                # this task's usage (a tooloop.Usage, or a dict of counts)
    last_turn: Any = None            # the usage of the task's last model turn (its context size)


def _sub(after: Dict[str, int], before: Dict[str, int]) -> Dict[str, int]:
    return {k: max(after.get(k, 0) - before.get(k, 0), 0) for k in after}


def one_line(exc: BaseException, settings: Any = None, limit: int = 400) -> str:
    """A library error as one line that says what happened and, where we know it, what to do."""
    import tooloop  # the binding; only reached once a run was attempted

    msg = " ".join(str(exc).split()) or type(exc).__name__
    if len(msg) > limit:
        msg = msg[: limit - 1] + "…"
    provider = getattr(settings, "provider", "anthropic")
    key_var = "OPENAI_API_KEY" if provider == "openai" else "ANTHROPIC_API_KEY"
    if isinstance(exc, getattr(tooloop, "AuthenticationError", ())):
        return f"authentication failed: {msg} (check {key_var})"
    if isinstance(exc, getattr(tooloop, "MaxTurnsExceeded", ())):
        limit_turns = getattr(settings, "max_turns", None)
        return (f"stopped at the turn limit ({limit_turns} model requests): continue with "
                f"`tooloop --continue`, or raise --max-turns")
    if isinstance(exc, getattr(tooloop, "NotFoundError", ())):
        return f"not found: {msg} (is the model name right? --model {getattr(settings, 'model', '')})"
    if isinstance(exc, getattr(tooloop, "APITimeoutError", ())):
        return f"the API did not answer in time: {msg}"
    if isinstance(exc, getattr(tooloop, "APIConnectionError", ())):
        where = getattr(settings, "base_url", None) or f"the {provider} API"
        return f"cannot reach {where}: {msg}"
    if isinstance(exc, getattr(tooloop, "APIError", ())):
        return msg if msg.lower().startswith("api error") else f"API error: {msg}"
    return f"{type(exc).__name__}: {msg}"


def start_stream(agent: Any, text: Optional[str]) -> Any:
    """The run's event stream; `text` None continues the conversation without new input (after an error:
    unanswered calls are answered as interrupted, then the request goes again)."""
    if text is not None:
        return agent.stream(text)
    # The library's resume() blocks without events; its streaming form is start(None) underneath, which
    # stream(None) reaches. Replace with agent.resume_stream() (or stream(None) documented) when it exists.
    resume_stream = getattr(agent, "resume_stream", None)
    return resume_stream() if resume_stream is not None else agent.stream(None)


def run_task(agent: Any, text: Optional[str], renderer: Optional[Renderer], abort: threading.Event,
             settings: Any = None) -> Outcome:
    """Run `text` on `agent` (None: retry the last request), rendering as it goes (renderer None: show
    nothing)."""
    import tooloop

    abort.clear()
    before = usage_numbers(getattr(agent, "usage", None))
    result = None
    turns = 0
    stream = None
    last_turn: Any = None
    try:
        with _sigint_sets(abort):
            if renderer is not None:
                renderer.waiting()
            stream = start_stream(agent, text)
            for event in stream:
                kind = field(event, "type")
                if renderer is not None:
                    if kind in ("text", "thinking", "tool_use", "done"):
                        renderer.arrived()
                if kind == "turn":
                    last_turn = field(event, "usage", None)
                if kind == "done":
                    result = field(event, "result", None)
                    if result is None:
                        result = event
                    continue
                if kind == "turn":
                    turns = max(turns, int(field(event, "turn", 0) or 0))
                if renderer is not None:
                    show(renderer, kind, event)
                    if kind == "tool_result":
                        renderer.waiting()
    except BaseException as exc:  # KeyboardInterrupt included: Ctrl+C cancels the run, not the program
        abort.set()  # frees a permission question that may still wait for an answer
        if isinstance(exc, KeyboardInterrupt) or isinstance(exc, getattr(tooloop, "Cancelled", ())):
            _cancel(agent, stream)
            if renderer is not None:
                renderer.notice("cancelled")
            return Outcome("cancelled", error=exc, usage=_sub(usage_numbers(agent.usage), before))
        if not isinstance(exc, getattr(tooloop, "Error", ())):
            raise
        return Outcome("error", error=exc, message=one_line(exc, settings), turns=turns,
                       usage=_sub(usage_numbers(agent.usage), before))
    finally:
        abort.set()
        if renderer is not None:
            renderer.arrived()
    if renderer is not None:
        renderer.end_turn()
    turns = int(field(result, "turns", 0) or 0) or turns
    usage = field(result, "usage", None)
    return Outcome("ok", result=result, turns=turns,
                   usage=usage if usage is not None else _sub(usage_numbers(agent.usage), before),
                   last_turn=last_turn)


@contextmanager
def _sigint_sets(abort: threading.Event) -> Iterator[None]:
    """While a run goes, Ctrl+C first sets `abort`, then raises KeyboardInterrupt as usual.

    The binding answers KeyboardInterrupt by cancelling the run and waiting for its worker thread; a
    worker inside a permission question waits for the user, so the question must learn of the Ctrl+C
    before that wait starts, or both would wait for each other."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_sigint(signum: int, frame: Optional[FrameType]) -> None:
        abort.set()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _cancel(agent: Any, stream: Any) -> None:
    try:
        agent.cancel()
    except Exception:
        pass
    close = getattr(stream, "close", None)
    if close is not None:
        try:
            close()
        except BaseException:
            pass


def show(renderer: Renderer, kind: Any, event: Any) -> None:
    if kind == "text":
        renderer.text(str(field(event, "text", "") or ""))
    elif kind == "thinking":
        renderer.thinking(str(field(event, "thinking", None) or field(event, "text", "") or ""))
    elif kind == "tool_use":
        inp = field(event, "input", {})
        renderer.tool_use(str(field(event, "name", "?")), inp if isinstance(inp, dict) else {"input": inp},
                          str(field(event, "id", "") or ""))
    elif kind == "tool_result":
        renderer.tool_result(str(field(event, "name", "?")), field(event, "content", ""),
                             bool(field(event, "is_error", False)), field(event, "duration_ms", None),
                             str(field(event, "id", "") or ""))
    elif kind == "turn":
        renderer.end_turn()


#: How many times a tool call written as text is answered with a correction before the answer stands.
MAX_CORRECTIONS = 2


def run_with_corrections(agent: Any, text: Optional[str], renderer: Optional[Renderer], abort: threading.Event,
                         settings: Any = None) -> Outcome:
    """`run_task`, then, for a local or small model whose final answer is a tool call written as text
    (JSON in a fence, <tool_call> tags, an echoed <tools> block): send a one-line correction as the next
    user message and continue, at most MAX_CORRECTIONS times."""
    from .local import correction, is_custom_endpoint, text_tool_call

    outcome = run_task(agent, text, renderer, abort, settings)
    watch = getattr(settings, "prompt_style", "full") == "compact" or is_custom_endpoint(
        getattr(settings, "base_url", None))
    tries = 0
    while watch and outcome.status == "ok" and tries < MAX_CORRECTIONS:
        try:
            names = [str(n) for n in getattr(agent, "tools", [])]
        except Exception:
            names = []
        name = text_tool_call(str(field(outcome.result, "text", "") or ""), names)
        if name is None:
            break
        tries += 1
        if renderer is not None:
            renderer.notice(f"the model wrote a tool call as text; asking it to use the tool ({tries}/"
                            f"{MAX_CORRECTIONS})")
        nxt = run_task(agent, correction(name), renderer, abort, settings)
        total = {k: usage_numbers(outcome.usage)[k] + usage_numbers(nxt.usage)[k]
                 for k in usage_numbers(nxt.usage)}
        nxt.turns += outcome.turns
        nxt.usage = total
        outcome = nxt
    return outcome
