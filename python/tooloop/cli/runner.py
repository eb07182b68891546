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
from typing import TYPE_CHECKING, Any, Dict, Iterator, Optional, Union

from .render import Renderer

if TYPE_CHECKING:
    from tooloop import Agent, AgentStream, ApprovalRequestEvent, Event, RunResult, Usage

    from .checkpoints import Checkpoints
    from .config import Settings
    from .media import Prompt


@dataclass
class Outcome:
    status: str                      # "ok" | "error" | "cancelled"
    result: Optional[RunResult] = None   # the run's result when status is "ok"
    error: Optional[BaseException] = None
    message: str = ""                # one line for the user when status is "error"
    turns: int = 0
    usage: Optional[Usage] = None    # this task's usage, with its estimated cost
    last_turn: Optional[Usage] = None   # the usage of the task's last model turn (its context size)
    compactions: int = 0             # times the conversation was compacted during the task
    repetition: str = ""             # what the model was told when a repetition guard stopped the run


def _sub(after: Usage, before: Usage) -> Usage:
    """What a task used: the conversation's usage after it minus before (a failed or cancelled run has no
    RunResult to say it)."""
    import tooloop

    cost = None
    if after.cost_usd is not None:
        cost = max(after.cost_usd - (before.cost_usd or 0.0), 0.0)
    return tooloop.Usage(
        input_tokens=max(after.input_tokens - before.input_tokens, 0),
        output_tokens=max(after.output_tokens - before.output_tokens, 0),
        cache_creation_input_tokens=max(after.cache_creation_input_tokens - before.cache_creation_input_tokens, 0),
        cache_read_input_tokens=max(after.cache_read_input_tokens - before.cache_read_input_tokens, 0),
        cost_usd=cost)


def add_usage(a: Usage, b: Usage) -> Usage:
    """Two tasks' usage together (costs add when both are known)."""
    import tooloop

    cost = a.cost_usd + b.cost_usd if a.cost_usd is not None and b.cost_usd is not None else None
    return tooloop.Usage(a.input_tokens + b.input_tokens, a.output_tokens + b.output_tokens,
                         a.cache_creation_input_tokens + b.cache_creation_input_tokens,
                         a.cache_read_input_tokens + b.cache_read_input_tokens, cost)


def one_line(exc: BaseException, settings: Optional[Settings] = None, limit: int = 400) -> str:
    """A library error as one line that says what happened and, where we know it, what to do."""
    import tooloop  # the binding; only reached once a run was attempted

    msg = " ".join(str(exc).split()) or type(exc).__name__
    if len(msg) > limit:
        msg = msg[: limit - 1] + "…"
    provider = getattr(settings, "provider", "anthropic")
    row = next((p for p in tooloop.PROVIDERS if p["name"] == provider), None) or {}
    key_var = row.get("key_var") or ("AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY or AWS_PROFILE"
                                     if provider == "bedrock" else "ANTHROPIC_API_KEY")
    if isinstance(exc, tooloop.AuthenticationError):
        return f"authentication failed: {msg} (check {key_var})"
    if isinstance(exc, tooloop.MaxTurnsExceeded):
        limit_turns = getattr(settings, "max_turns", None)
        return (f"stopped at the turn limit ({limit_turns} model requests): continue with "
                f"`tooloop --continue`, or raise --max-turns")
    if isinstance(exc, tooloop.NotFoundError):
        return f"not found: {msg} (is the model name right? --model {getattr(settings, 'model', '')})"
    if isinstance(exc, tooloop.APITimeoutError):
        return f"the API did not answer in time: {msg}"
    if isinstance(exc, tooloop.APIConnectionError):
        where = getattr(settings, "base_url", None) or f"the {provider} API"
        return f"cannot reach {where}: {msg}"
    if isinstance(exc, tooloop.APIError):
        return msg if msg.lower().startswith("api error") else f"API error: {msg}"
    return f"{type(exc).__name__}: {msg}"


REPETITION_LINE = ("stopped: the model repeated the same tool call with the same input (runaway guard); "
                   "rephrase the task or give it more to go on")


def repetition_line(note: str) -> str:
    """The one line that says why a repetition guard stopped the task (the core's note, else the generic
    one)."""
    prefix = "[tooloop: the run is stopped: "
    if not note.startswith(prefix):
        return REPETITION_LINE
    why = " ".join(note[len(prefix):].rstrip("]").split())
    return f"stopped: no progress ({why}); the work so far is kept: check it, or rephrase the task"


def budget_line(cap: Optional[float]) -> str:
    """The one line that says a run stopped at --max-budget-usd."""
    shown = f"${cap:g}" if cap is not None else "the cap"
    return f"stopped: the next request would take the spend past {shown} (--max-budget-usd)"


def start_stream(agent: Agent, text: Optional[Prompt], pause: bool = False) -> AgentStream:
    """The run's event stream; `text` None continues the conversation without new input (after an error:
    unanswered calls are answered as interrupted, then the request goes again). `pause`: each call that
    needs a decision pauses the run until the stream's ``approve`` answers it."""
    if text is not None:
        return agent.stream(text, pause_for_approval=pause)
    return agent.resume_stream(pause_for_approval=pause)


def asked_call(event: Event) -> Optional[ApprovalRequestEvent]:
    """The call a paused run waits for, when `event` asks about one (the run's own, or a subagent's)."""
    if event.type == "subagent":
        event = event.event
    return event if event.type == "approval_request" else None


def run_task(agent: Agent, text: Optional[Prompt], renderer: Optional[Renderer], abort: threading.Event,
             settings: Optional[Settings] = None, checkpoints: Optional[Checkpoints] = None) -> Outcome:
    """Run `text` on `agent` (None: retry the last request), rendering as it goes (renderer None: show
    nothing). Each ``file_change`` event (also a subagent's) goes to `checkpoints`, for /undo.

    Shown (a renderer), the permission question is the run's pause: each call that needs a decision (a
    subagent's too) waits while the agent's permission policy answers it here, after its events were drawn,
    so a question always follows what it is about and questions come one at a time in the order asked.
    Unshown (``-p``), the policy answers inside the run, as the blocking callable."""
    import tooloop

    abort.clear()
    before: Usage = agent.usage
    result: Optional[RunResult] = None
    turns = 0
    stream: Optional[AgentStream] = None
    last_turn: Optional[Usage] = None
    compactions = 0
    repetition = ""
    answer = getattr(agent, "permission", None) if renderer is not None else None
    try:
        with _sigint_sets(abort):
            if renderer is not None:
                renderer.waiting()
            stream = start_stream(agent, text, pause=answer is not None)
            for event in stream:
                if renderer is not None:
                    if event.type in ("text", "thinking", "tool_use", "done", "subagent", "todo"):
                        renderer.arrived()
                if event.type == "done":
                    result = event.result
                    continue
                if checkpoints is not None:
                    change = event.event if event.type == "subagent" else event
                    if change.type == "file_change":
                        checkpoints.record_change(change)
                if event.type == "turn":
                    last_turn = event.usage
                    turns = max(turns, event.turn)
                elif event.type == "repetition" and event.stopped:
                    repetition = getattr(event, "note", "") or ""
                elif event.type == "compaction":
                    compactions += 1
                    last_turn = None   # the context is smaller now; the next turn says how much
                if renderer is not None:
                    show(renderer, event)
                    if event.type == "tool_result":
                        renderer.waiting()
                asked = asked_call(event) if answer is not None else None
                if asked is not None and answer is not None:
                    call = tooloop.ToolCall(id=asked.id, name=asked.name, input=asked.input)
                    stream.approve(asked.id, answer(call))
    except BaseException as exc:  # KeyboardInterrupt included: Ctrl+C cancels the run, not the program
        abort.set()  # frees a question (the policy's "save this rule?") that may still wait for an answer
        if isinstance(exc, KeyboardInterrupt) or isinstance(exc, tooloop.Cancelled):
            _cancel(agent, stream)
            if renderer is not None:
                renderer.notice("cancelled")
            return Outcome("cancelled", error=exc, usage=_sub(agent.usage, before))
        if not isinstance(exc, tooloop.Error):
            raise
        return Outcome("error", error=exc, message=one_line(exc, settings), turns=turns,
                       usage=_sub(agent.usage, before))
    finally:
        abort.set()
        if renderer is not None:
            renderer.arrived()
    if renderer is not None:
        renderer.end_turn()
    if result is None:  # the stream ended without its done event: only when the library is broken
        return Outcome("error", message="the run ended without a result", turns=turns,
                       usage=_sub(agent.usage, before))
    return Outcome("ok", result=result, turns=result.turns or turns, usage=result.usage, last_turn=last_turn,
                   compactions=compactions, repetition=repetition)


@contextmanager
def _sigint_sets(abort: threading.Event) -> Iterator[None]:
    """While a run goes, Ctrl+C first sets `abort`, then raises KeyboardInterrupt as usual.

    A question asked while the run waits (a permission question at the run's pause, "save this rule?")
    polls `abort`, so a Ctrl+C frees it however it is reading; a run on a worker thread (``-p``) is
    cancelled by the binding, which then waits for that thread."""
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


def _cancel(agent: Agent, stream: Optional[AgentStream]) -> None:
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


def show(renderer: Renderer, event: Event) -> None:
    if event.type == "text":
        renderer.text(event.text)
    elif event.type == "thinking":
        renderer.thinking(event.thinking)
    elif event.type == "tool_use":
        inp = event.input
        renderer.tool_use(event.name, inp if isinstance(inp, dict) else {"input": inp}, event.id)
    elif event.type == "tool_result":
        renderer.tool_result(event.name, event.content, event.is_error, event.duration_ms, event.id,
                             denied=event.denied)
    elif event.type == "turn":
        renderer.end_turn()
    elif event.type == "todo":
        renderer.todos(list(event.todos))
    elif event.type == "subagent":
        renderer.subagent(event.parent_id, event.agent_type, event.event)
    elif event.type == "compaction":
        from .context import auto_line
        renderer.compaction(auto_line(event))
    elif event.type == "model_fallback":
        renderer.compaction(f"{event.from_model} {event.reason.replace('_', ' ')}: {event.to_model} "
                            f"({event.to_provider}) answers for the rest of this task")
    elif event.type == "repetition":
        note = getattr(event, "note", "") or ""
        if not event.stopped and note.startswith("[tooloop: no progress"):
            renderer.notice(f"no progress ({event.count} turn{'s' if event.count > 1 else ''}): the model was "
                            "told it repeats itself and may answer if done")
        elif not event.stopped:
            renderer.notice(f"the model repeated {event.name} with the same input {event.count} times; "
                            "it was told to change course")


#: How many times a tool call written as text is answered with a correction before the answer stands.
MAX_CORRECTIONS = 2


def _cut_call(message: Optional[Dict[str, Any]]) -> Optional[str]:
    """The name of the tool call a max_tokens stop cut off (the last tool_use of `message`), if any."""
    blocks = (message or {}).get("content")
    names = [b.get("name") for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"] \
        if isinstance(blocks, list) else []
    return str(names[-1]) if names and names[-1] else None


def run_with_corrections(agent: Agent, text: Optional[Prompt], renderer: Optional[Renderer], abort: threading.Event,
                         settings: Optional[Settings] = None, checkpoints: Optional[Checkpoints] = None) -> Outcome:
    """`run_task`, then send a one-line correction as the next user message and continue, at most
    MAX_CORRECTIONS times for each kind: when the answer was cut off at max_tokens (any model: a cut tool
    call never runs, so the model is asked to write less at a time), and, for a local or small model, when
    its final answer is a tool call written as text (JSON in a fence, <tool_call> tags, an echoed <tools>
    block)."""
    from .local import correction, cut_off_correction, is_custom_endpoint, repeats_a_call, text_tool_call

    outcome = run_task(agent, text, renderer, abort, settings, checkpoints)
    watch = getattr(settings, "prompt_style", "full") == "compact" or is_custom_endpoint(
        getattr(settings, "base_url", None))
    tries = cut_tries = 0
    while outcome.status == "ok" and outcome.result is not None:
        if outcome.result.stop_reason == "max_tokens" and cut_tries < MAX_CORRECTIONS:
            cut_tries += 1
            limit = getattr(settings, "max_tokens", None)
            if renderer is not None:
                renderer.notice(f"the answer was cut off at the output token limit; asking the model to write "
                                f"less at a time ({cut_tries}/{MAX_CORRECTIONS})")
            note = cut_off_correction(limit, _cut_call(outcome.result.message))
        elif watch and tries < MAX_CORRECTIONS:
            try:
                names = [str(n) for n in getattr(agent, "tools", [])]
            except Exception:
                names = []
            name = text_tool_call(outcome.result.text, names)
            if name is None or repeats_a_call(outcome.result.text, getattr(outcome.result, "tool_calls", None)):
                break
            tries += 1
            if renderer is not None:
                renderer.notice(f"the model wrote a tool call as text; asking it to use the tool ({tries}/"
                                f"{MAX_CORRECTIONS})")
            note = correction(name)
        else:
            break
        nxt = run_task(agent, note, renderer, abort, settings, checkpoints)
        nxt.turns += outcome.turns
        nxt.compactions += outcome.compactions
        if outcome.usage is not None and nxt.usage is not None:
            nxt.usage = add_usage(outcome.usage, nxt.usage)
        outcome = nxt
    return outcome
