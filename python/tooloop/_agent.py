"""``tooloop.Agent``: the Python face of the core agent loop.

Argument handling and result objects live here; the loop itself runs in the core (through the compiled
``_tooloop._Agent``) with the GIL released while it waits: ``run`` and ``compact`` on the calling thread,
``stream`` on the iterating thread too where it can (else on a worker thread, see ``_Agent.start``). Must
never: hold agent logic that the core has, or import the CLI's dependencies.
"""

from __future__ import annotations

import os

from . import _tooloop
from ._tools import Tool, as_tool, tool as _make_tool
from .errors import ConfigError
from .events import ApprovalRequestEvent, DoneEvent, RunResult, ToolCall, Usage, _event_from, _Record

__all__ = ["ALLOW_READ_ONLY", "AllowReadOnly", "Agent", "AgentStream", "ModelFn", "PermissionFn", "ToolInfo", "DEFAULT_MODEL"]

DEFAULT_MODEL = "claude-sonnet-4-6"

# `typing` is for the type checker only: importing it costs more than the rest of `import tooloop`.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import (Any, Awaitable, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, TypeVar,
                        Union, overload)

    from ._aio import AsyncAgentStream, _Bridge
    from .events import Event
    from .types import (BackgroundCommand, HistoryEntry, Instructions, McpStatus, SessionReport, Skills, Todo)

    #: A model written in Python: takes the request (a Messages API request dict; read-only: the dicts of
    #: unchanged messages are the same objects from one request to the next), returns a message dict.
    ModelFn = Callable[[Dict[str, Any]], Dict[str, Any]]
    #: A permission check: True allows the call, False denies it, a string denies it with that reason,
    #: ``tooloop.ALLOW_READ_ONLY`` allows it only with no power to write (see ``ALLOW_READ_ONLY``).
    PermissionFn = Callable[[ToolCall], Union[bool, str, _tooloop._AllowReadOnly,
                                              Awaitable[Union[bool, str, _tooloop._AllowReadOnly]]]]
    #: User input: text, or a list of content blocks (text, image, ...).
    Input = Union[str, List[Dict[str, Any]]]
    _H = TypeVar("_H", bound="_RunHandle")
else:
    def overload(fn: object) -> object:  # typing.overload without typing: the last definition is the one
        return fn


def __getattr__(name: str) -> object:
    # The type aliases, for code that uses them at run time (tooloop._client does): built on first use.
    if name in ("ModelFn", "PermissionFn", "Input"):
        from typing import Any, Awaitable, Callable, Dict, List, Union

        answer = Union[bool, str, _tooloop._AllowReadOnly]
        aliases = {"ModelFn": Callable[[Dict[str, Any]], Dict[str, Any]],
                   "PermissionFn": Callable[[ToolCall], Union[answer, Awaitable[answer]]],
                   "Input": Union[str, List[Dict[str, Any]]]}
        globals().update(aliases)
        return aliases[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

from ._approval import DEFAULT_DENIAL as _DEFAULT_DENIAL, decision as _decision, waiting as _waiting

#: What a permission callable returns to allow a call only with no power to change anything — for a call it
#: lets through because it *looks* harmless ("this command only reads"): ``bash`` then runs under the kernel's
#: read-only sandbox with the network off (refused where the kernel cannot confine it), a read-only tool runs
#: as it is, and any other tool is refused with a reason the model reads. A wrong guess then costs nothing.
ALLOW_READ_ONLY = _tooloop.ALLOW_READ_ONLY
#: The type of ``ALLOW_READ_ONLY`` (its one instance), for annotations.
AllowReadOnly = _tooloop._AllowReadOnly


class ToolInfo(_Record):
    """A registered tool as the core sees it (``Agent.tool_info``): ``read_only`` tools change nothing, so a
    host may run them without asking; ``parallel_safe`` ones may run concurrently within a turn. ``kind`` says
    what it does (``"read"``, ``"write"``, ``"shell"``, ``"network"``, or None: nothing the library knows of;
    the built-ins set theirs, see ``tooloop.Tool``), ``path_field`` the input field a ``"write"`` tool's path
    is in; ``idempotent=False`` tools are left alone by the repetition guards; ``confinable`` ones (the
    built-in bash) hold themselves to reading when a call is allowed only read-only."""

    __slots__ = ("name", "description", "input_schema", "parallel_safe", "read_only", "kind", "path_field",
                 "idempotent", "confinable")
    _fields = __slots__

    name: str
    description: str
    input_schema: Dict[str, Any]
    parallel_safe: bool
    read_only: bool
    kind: Optional[str]
    path_field: Optional[str]
    idempotent: bool
    confinable: bool

    def __init__(self, name: str, description: str, input_schema: Dict[str, Any], parallel_safe: bool,
                 read_only: bool, kind: Optional[str] = None, path_field: Optional[str] = None,
                 idempotent: bool = True, confinable: bool = False) -> None:
        self._init(name=name, description=description, input_schema=input_schema, parallel_safe=parallel_safe,
                   read_only=read_only, kind=kind, path_field=path_field, idempotent=idempotent,
                   confinable=confinable)


def _model_adapter(model: ModelFn) -> Callable[[Dict[str, Any]], Dict[str, Any]]:
    """The callable the core calls: the model itself (its reply is checked by the core, the same rules as a C
    host model's)."""
    return model


class _AsyncSlot:
    """What the callables an agent registered with the core share with it: the ``_aio._Bridge`` of its async
    runs (None until the first; ``_aio`` loads with ``asyncio``, so sync-only users never pay for it)."""

    __slots__ = ("bridge",)

    def __init__(self) -> None:
        self.bridge: Optional[_Bridge] = None

    def wait(self, awaitable: Any, timeout: Optional[float]) -> Any:
        """The awaitable's value: on the loop of the async run in progress, else on a fresh loop."""
        bridge = self.bridge
        if bridge is not None:
            return bridge.wait(awaitable, timeout)
        from ._tools import _run_awaitable

        return _run_awaitable(awaitable)


def _invoker(tool: Tool, slot: _AsyncSlot) -> Callable[[Optional[Dict[str, Any]]], Tuple[Any, bool]]:
    """The callable the core calls for ``tool``: an ``async def`` tool is awaited on the caller's loop under
    ``arun``/``astream`` (``_aio``), as before under ``run``."""
    def invoke(input: Optional[Dict[str, Any]]) -> Tuple[Any, bool]:
        return tool.invoke(input, awaiter=slot.wait if slot.bridge is not None else None)

    return invoke


def _permission_adapter(
        check: PermissionFn,
        slot: Optional[_AsyncSlot] = None) -> Callable[[str, str, Any], Union[None, str, _tooloop._AllowReadOnly]]:
    def call(id: str, name: str, input: Any) -> Union[None, str, _tooloop._AllowReadOnly]:
        answer: Any = check(ToolCall(id=id, name=name, input=input))
        if hasattr(answer, "__await__"):  # an async def check: awaited on the async run's loop
            answer = (slot or _AsyncSlot()).wait(answer, None)
        if answer is True:
            return None
        if answer is ALLOW_READ_ONLY:
            return answer
        if answer is False:
            return _DEFAULT_DENIAL
        if isinstance(answer, str):
            return answer or _DEFAULT_DENIAL
        raise TypeError(
            f"the permission callable must return True, False or a reason string (or tooloop.ALLOW_READ_ONLY), got "
            f"{type(answer).__name__}: "
            f"{answer!r:.100}"
        )

    return call


class _RunHandle:
    """A run (on a worker thread, or stepped on the calling thread) that the host may stop: shared by
    ``AgentStream`` and ``MessageStream``.

    Dropping it mid-run (a ``break`` out of the loop, then garbage collection) stops the run too, so the
    agent is free for the next one.
    """

    _run: Union[_tooloop._Run, _tooloop._Stream, _tooloop._Driven]

    def cancel(self) -> None:
        """Ask the run to stop (any thread)."""
        self._run.cancel()

    def close(self) -> None:
        """Cancel the run if it is still going, and wait until it has stopped."""
        self._run.close()

    def __enter__(self: _H) -> _H:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        run = getattr(self, "_run", None)
        if run is not None and not run.done:
            try:
                run.close()
            except Exception:
                pass


class AgentStream(_RunHandle):
    """The events of one run, as they happen: ``for event in agent.stream(...)``.

    Leaving the loop early (``break``, an exception), ``close()`` or leaving a ``with`` block cancels the
    run and waits for it to stop (within 200 ms); the conversation stays valid. The last event is a
    ``DoneEvent`` carrying the ``RunResult`` (also kept in ``.result``); a failed run raises its exception
    from the iteration instead.

    Started with ``pause_for_approval=True``, each tool call that needs a decision pauses the run after its
    ``ApprovalRequestEvent``: answer it with ``stream.approve(event.id, decision)`` (``decision`` as a
    ``permission`` callable's answer: True, False, a reason string, ``tooloop.ALLOW_READ_ONLY``), then go on
    iterating. Parallel calls pause together; iterating on before each is answered raises ``ConfigError``.
    """

    result: Optional[RunResult]

    def __init__(self, run: Union[_tooloop._Run, _tooloop._Driven], model: str,
                 finish: Optional[Callable[[Dict[str, Any]], RunResult]] = None) -> None:
        self._run = run
        self._model = model
        self._finish = finish if finish is not None else RunResult._from
        self._finished = False
        self.result = None

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        if self._finished:
            raise StopIteration
        while True:
            d = self._run.next_event()
            if d is None:
                self._finished = True
                self.result = self._finish(self._run.result())
                return DoneEvent(self.result)
            if d.get("type") == "approval_pause":
                ids = ", ".join(e.id for e in _waiting(d.get("calls") or []))
                raise ConfigError(f"the run waits for approval of tool calls {ids}: answer each with approve()")
            event = _event_from(d)
            if event is not None:
                return event

    @property
    def text_stream(self) -> Iterator[str]:
        """The answer's text as it arrives, in coalesced ``str`` chunks (other events are skipped); then
        ``.result`` holds the ``RunResult``. A failed run raises from the iteration."""
        while not self._finished:
            text = self._run.next_text()
            if text is None:
                self._finished = True
                self.result = self._finish(self._run.result())
                return
            yield text

    def cancel(self) -> None:
        """Ask the run to stop (any thread); iteration then ends with ``tooloop.Cancelled``. Calls waiting
        for approval are answered as interrupted; none of them runs."""
        super().cancel()

    def close(self) -> None:
        """Cancel the run if it is still going, and wait until it has stopped."""
        self._finished = True
        super().close()

    def approve(self, call_id: str, decision: Any = True) -> None:
        """Answer a call the run paused for (``pause_for_approval=True``): True runs it, False or a reason
        refuses it (the model reads the reason), ``tooloop.ALLOW_READ_ONLY`` runs it with no power to change
        anything. Nothing runs until the iteration goes on. ValueError when no call with that id waits."""
        deny, read_only = _decision(decision)
        approve = getattr(self._run, "approve", None)
        if approve is None:
            raise ConfigError("this stream was started without pause_for_approval: nothing to approve")
        approve(call_id, deny, read_only)

    def pending_approvals(self) -> List[ApprovalRequestEvent]:
        """The calls waiting for an answer now (empty when none does)."""
        pending = getattr(self._run, "pending_approvals", None)
        return [] if pending is None else _waiting(pending())


def _output_spec(spec: Any) -> Tuple[Any, Optional[Callable[[Any], Any]]]:
    """``output_schema=``: a JSON Schema dict as is; a class (pydantic model, dataclass, TypedDict) or another
    type hint through the same schema builder as tool parameters, with the converter that builds the value."""
    if spec is None:
        return None, None
    if isinstance(spec, (dict, str, int, float, list)):
        return spec, None  # a schema, or a value the core refuses with a message naming output_schema
    from ._schema import output_schema_for

    try:
        return output_schema_for(spec)
    except TypeError as e:
        raise ConfigError(str(e)) from None


class SubAgent:
    """A kind of child agent the ``task`` tool can start (``Agent(subagents={"explore": SubAgent(...)})``).

    The child gets a fresh conversation with ``system`` as its system prompt; ``tools`` lists what it may
    use: names of the parent's tools (e.g. ``"read_file"``) and tools of its own (plain functions or
    ``tooloop.Tool``); ``None`` gives it all of the parent's tools. Only its final answer (and a one-line usage
    summary) returns to the parent. ``model`` defaults to the parent's, ``max_turns`` to 20; ``sandbox`` gives
    its built-in tools a mode of their own (``"read-only"`` for an agent that only explores). Children cannot
    start children.
    """

    __slots__ = ("description", "system", "tools", "model", "max_turns", "sandbox", "output_schema")

    def __init__(
        self,
        description: str,
        system: Optional[str] = None,
        tools: Optional[Sequence[Union[str, Tool, Callable[..., Any]]]] = None,
        model: Optional[str] = None,
        max_turns: Optional[int] = None,
        sandbox: Optional[str] = None,
        output_schema: Any = None,
    ) -> None:
        self.description = description
        #: The child's structured answer (a JSON Schema dict or a class, as ``Agent(output_schema=)``): the
        #: parent's model receives the validated JSON as the task's result.
        self.output_schema = output_schema
        self.sandbox = sandbox
        self.system = system
        self.tools = list(tools) if tools is not None else None
        self.model = model
        self.max_turns = max_turns

    def _options(self) -> Dict[str, Any]:
        names = None if self.tools is None else [t for t in self.tools if isinstance(t, str)]
        return {"description": self.description, "system": self.system, "tools": names, "model": self.model,
                "max_turns": self.max_turns, "sandbox": self.sandbox,
                "output_schema": _output_spec(self.output_schema)[0]}

    def _own_tools(self) -> List[Tool]:
        return [as_tool(t) for t in self.tools or [] if not isinstance(t, str)]


def _unset_repr(self: object) -> str:
    return "<core default>"


# The default of an ``Agent`` option the caller did not give: the option is not passed, so the core's default
# applies (the defaults are listed in the README and the C header, both read from the core). The class is
# made under a name no module defines so that mypy.stubtest, which cannot know a sentinel means "not given",
# does not hold its type against each parameter's annotation.
_UNSET: Any = type("core_default", (), {"__slots__": (), "__repr__": _unset_repr})()

#: The core's option keys (``AgentOptions::KEYS``): the keyword arguments of ``Agent`` that go to the core.
_CORE_KEYS = frozenset(_tooloop.OPTION_KEYS)


def _paths(value: Any) -> Any:
    """One path or several (``skills=``) as the list of strings the core reads."""
    if value is None:
        return None
    if isinstance(value, (str, os.PathLike)):
        return [os.fspath(value)]
    return [os.fspath(p) for p in value]


#: Python values the core cannot read as they are (paths, tuples, SubAgent objects), converted when given.
_CONVERT: Dict[str, Callable[[Any], Any]] = {
    "builtin_tools": lambda v: v if isinstance(v, (bool, str)) or v is None else list(v),
    "workspace": lambda v: os.fspath(v) if v is not None else None,
    "session": lambda v: os.fspath(v) if v is not None else None,
    "env_passthrough": lambda v: list(v) if isinstance(v, (list, tuple)) else v,
    "protected_paths": lambda v: [os.fspath(p) for p in v] if isinstance(v, (list, tuple)) else v,
    "stop_sequences": lambda v: list(v) if isinstance(v, (list, tuple)) else v,
    "subagents": lambda v: {k: s._options() if isinstance(s, SubAgent) else s for k, s in (v or {}).items()},
    "skills": _paths,
    "server_tools": lambda v: list(v) if isinstance(v, tuple) else v,
    "instruction_files": lambda v: v if isinstance(v, bool) or v is None else _paths(v),
    "permission_rules": lambda v: {k: list(r) if isinstance(r, (list, tuple)) else r for k, r in v.items()}
    if isinstance(v, dict) else v,
}


class Agent:
    """A model calling tools in a loop.

    ``provider`` is ``"anthropic"``, ``"openai"`` (any OpenAI-compatible server), ``"openai-responses"``
    (OpenAI's Responses API), ``"bedrock"`` (see ``tooloop.PROVIDERS``) or a callable
    ``model(request: dict) -> dict`` returning an Anthropic-shaped message (a model written in Python).
    ``api_key`` and ``base_url`` default to the environment (``ANTHROPIC_API_KEY``/``ANTHROPIC_BASE_URL``,
    ``OPENAI_API_KEY``/``OPENAI_BASE_URL``). ``timeout`` (seconds) bounds each HTTP exchange and each silence
    within it; ``max_retries`` retries connection errors, 408, 409, 429 and 5xx. ``thinking`` is a token budget
    (``{"type": "enabled", "budget_tokens": N}``) or a dict passed through. ``max_turns=None`` removes the cap.

    ``tools`` are plain functions (schema from type hints and docstring) or ``tooloop.Tool`` objects;
    ``builtin_tools`` is True (bash, read_file, write_file, edit_file) or a list of their names, confined to
    ``workspace`` (default: the current directory). ``session`` is the path of a JSONL file, or a session of a
    SQLite database as ``"runs/sessions.db#task-17"`` (``.db``/``.sqlite``/``.sqlite3``, then ``#`` and the id):
    loaded when it exists, appended to as the conversation goes. ``permission(tool_call)`` returns True, False or a reason.
    ``headers`` are added to every HTTP request (e.g. ``{"anthropic-beta": "..."}``) and ``extra`` request body
    fields are passed through unchanged, so a new API feature never waits for a tooloop release.

    ``protected_paths`` (relative to the workspace; the core's default ``[".tooloop", ".claude", ".mcp.json",
    ".git/hooks", ".git/config"]``, ``[]`` lifts it) are read-only for the built-in ``bash`` in the
    ``"workspace-write"`` sandbox while the rest of the workspace stays writable. This needs root and mount
    namespaces (elsewhere Landlock cannot make a read-only hole in a writable tree, and they are as writable as
    the workspace); a path that does not exist when a command starts cannot be protected.

    ``instruction_files=True`` adds the project's AGENTS.md (else CLAUDE.md) files, from the repository root
    down to the workspace, and ``$XDG_CONFIG_HOME/tooloop/AGENTS.md`` to the system prompt (a list: exactly
    those files). ``permission_rules={"allow": [...], "ask": [...], "deny": [...]}`` decide calls first
    (``"bash(npm test:*)"``, ``"edit_file(src/**)"``, ``"mcp__github"``; deny > ask > allow; an ask rule
    goes to ``permission``). ``hooks`` run around each call and request (see ``tooloop._hooks``).
    ``max_cost_usd`` stops a run with ``stop_reason == "budget"`` before a request that would pass it (each
    request priced at the higher of the requested and the answering model's price; one answered without
    usage, a model callable's too, counted as its measured input plus ``max_tokens``; see the README's "How
    spend is counted").
    ``output_schema`` (a JSON Schema dict, or a pydantic model, dataclass or TypedDict class) makes the final
    answer structured: ``result.output`` holds it, validated (an instance of the class when one was given);
    native structured output where the API has it, else a ``final_answer`` tool (``output_mode``: "auto",
    "native", "tool"); an invalid answer goes back to the model with the errors at most ``output_retries``
    times, then ``OutputValidationError``.

    ``check="python3 test_x.py"`` is a check to finish against: run in the workspace (the built-in bash's
    sandbox, at most ``check_timeout`` seconds, default 120) when the model answers, if it has not run yet or
    something changed since; its failure goes back to the model with the failing lines and the run goes on;
    the run ends with ``result.check["passed"]`` only once it passes (``stop_reason == "check_failed"`` when
    turns run out, or the model answers again with nothing changed). The workspace files the command runs or
    names are read-only to the agent for the run. Every result carries ``files_changed`` and
    ``commands_run``; ``expect_changes=True`` (the task asks for changes) and ``verify_claims=True`` (an answer
    saying a command ran or a test passed) hold the answer to them: told once, then ``result.unverified``.

    ``text_edits=True`` (with the built-in ``write_file``): a model answer with no tool calls that gives whole
    files as fenced code blocks, each named on the line before it ("Here's the fixed `calc.py`:"), gets one
    ``write_file`` call per file, run like any other call (permission, protected paths, the check's files).
    Small models often answer this way instead of calling a tool; shell, output and diff blocks never count.

    ``draft_first=True`` (with the built-in ``write_file``): a run that starts a conversation sends its first
    request without tools, asking for every file to change in full as a fenced block under its path (aider's
    format); those files are written as ``write_file`` calls, its shell blocks then run as ``bash`` calls (with
    the built-in ``bash``; permission and sandbox as for any call), and the run goes on with the tools. A draft
    with no file or command in it is left out of the conversation and the task asked again with the tools; one
    cut off at ``max_tokens`` writes its whole files before the cut (not the one it was cut inside) and, when the
    cut fell inside a block, runs no command. An answer that writes the draft's results back (its note among
    them) is left out once and the request sent again, at ``progress_guard``'s ``unstick_temperature`` if set.
    Off by default; the command turns it on for small windows.

    ``progress_guard=True`` (or ``{"stop_after": N, "wrap_up": bool, "unstick_temperature": T}``) turns on the
    coding agent's guards, off by default in the library (the ``tooloop`` command turns them on): the same call
    with the same input a third time in a row is refused, turns that change nothing get a note and then end the
    run (``stop_reason == "repetition"``), a re-run of a passing check brings one request with tools off.
    ``repeat_guard`` sets the first of these on its own. A tool marked ``idempotent=False`` is never touched.

    Request options: ``temperature``, ``stop_sequences`` (a list of strings), ``tool_choice`` (an object such as
    ``{"type": "any"}``, passed through), ``stream`` (stream responses; the core's default is True for a network
    provider, False for a model callable). ``max_turns_policy="return"`` makes reaching ``max_turns`` end the
    run with a result (``result.max_turns_reached``) instead of ``MaxTurnsExceeded`` (``"error"``, the
    default). ``tool_concurrency`` caps how many parallel-safe tools run at once within a turn.

    ``fallback_models`` (a list of model names, or ``{"provider": ..., "model": ..., "api_key": ...,
    "base_url": ...}`` dicts) are tried in order when the model fails a turn before any of it was shown:
    overloaded (529/503), rate-limited past its retries (429), down (5xx or no connection, after the retries) or
    refusing the context size. The fallback answers for the rest of that run (a ``ModelFallbackEvent`` says so,
    the session records it); the next run starts on ``model`` again. ``set_model()`` switches between runs.

    Every option left out takes the core's default (shown as ``<core default>`` in the signature; listed in the
    README and the C header), the same for Python, C and the CLI. ``model`` is the one exception: Python
    defaults it to ``DEFAULT_MODEL`` where the core requires it.

    Threads: one run at a time (another concurrent run raises ConfigError); ``cancel()``, ``messages``,
    ``history`` and ``usage`` may be used from any thread during a run.
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        system: Union[str, List[Dict[str, Any]], None] = _UNSET,
        *,
        provider: Union[str, ModelFn] = _UNSET,
        api_key: Optional[str] = _UNSET,
        base_url: Optional[str] = _UNSET,
        max_tokens: int = _UNSET,
        max_turns: Optional[int] = _UNSET,
        max_turns_policy: str = _UNSET,
        thinking: Union[int, Dict[str, Any], None] = _UNSET,
        timeout: float = _UNSET,
        max_retries: int = _UNSET,
        stream: Optional[bool] = _UNSET,
        temperature: Optional[float] = _UNSET,
        stop_sequences: Sequence[str] = _UNSET,
        tool_choice: Optional[Dict[str, Any]] = _UNSET,
        tool_concurrency: int = _UNSET,
        tools: Iterable[Union[Tool, Callable[..., Any]]] = (),
        builtin_tools: Union[bool, Sequence[str]] = _UNSET,
        workspace: Union[str, os.PathLike[str], None] = _UNSET,
        session: Union[str, os.PathLike[str], None] = _UNSET,
        permission: Optional[PermissionFn] = None,
        headers: Optional[Dict[str, str]] = _UNSET,
        extra: Optional[Dict[str, Any]] = _UNSET,
        sandbox: Optional[str] = _UNSET,
        network: bool = _UNSET,
        env_passthrough: Sequence[str] = _UNSET,
        protected_paths: Sequence[Union[str, os.PathLike[str]]] = _UNSET,
        cache: bool = _UNSET,
        planning: Union[bool, Dict[str, Any]] = _UNSET,
        subagents: Optional[Dict[str, SubAgent]] = _UNSET,
        skills: Union[str, os.PathLike[str], Sequence[Union[str, os.PathLike[str]]], None] = _UNSET,
        mcp_servers: Optional[Dict[str, Dict[str, Any]]] = _UNSET,
        region: Optional[str] = _UNSET,
        server_tools: Optional[Sequence[Dict[str, Any]]] = _UNSET,
        repeat_guard: Union[bool, Dict[str, int]] = _UNSET,
        progress_guard: Union[bool, Dict[str, Any]] = _UNSET,
        short_tool_descriptions: bool = _UNSET,
        context_window: Optional[int] = _UNSET,
        compaction: Union[str, bool] = _UNSET,
        compact_threshold: float = _UNSET,
        compaction_model: Optional[str] = _UNSET,
        instruction_files: Union[bool, Sequence[Union[str, os.PathLike[str]]]] = _UNSET,
        max_cost_usd: Optional[float] = _UNSET,
        hooks: Optional[Dict[str, Any]] = None,
        permission_rules: Optional[Dict[str, Sequence[str]]] = _UNSET,
        output_schema: Any = _UNSET,
        output_retries: int = _UNSET,
        output_mode: str = _UNSET,
        fallback_models: Optional[Sequence[Union[str, Dict[str, Any]]]] = _UNSET,
        check: Optional[str] = _UNSET,
        check_timeout: float = _UNSET,
        expect_changes: bool = _UNSET,
        verify_claims: bool = _UNSET,
        text_edits: bool = _UNSET,
        draft_first: bool = _UNSET,
    ) -> None:
        if provider is not _UNSET and not isinstance(provider, str) and not callable(provider):
            raise ConfigError(f"provider must be 'anthropic', 'openai' or a callable, got {type(provider).__name__}")
        core_provider: Any = None if provider is _UNSET else provider if isinstance(provider, str) \
            else _model_adapter(provider)
        schema, self._output_build = _output_spec(None if output_schema is _UNSET else output_schema)
        # Only what the caller gave goes to the core, which reads and checks every option (the same keys as
        # the C config) and owns every default: a default changed there reaches Python users unchanged.
        given = {k: v for k, v in locals().items() if k in _CORE_KEYS and k != "provider" and v is not _UNSET}
        given["model"] = model
        if output_schema is not _UNSET:
            given["output_schema"] = schema
        for key, convert in _CONVERT.items():
            if key in given:
                given[key] = convert(given[key])
        self._core = _tooloop._Agent(core_provider, given)
        self._aio = _AsyncSlot()
        self.set_hooks(hooks)
        for agent_type, sub in (subagents if subagents is not _UNSET and subagents else {}).items():
            if isinstance(sub, SubAgent):
                for own in sub._own_tools():
                    self._core.add_subagent_tool(agent_type, own.name, own.description, own.input_schema,
                                                 _invoker(own, self._aio), own.parallel_safe, own.read_only, own.timeout,
                                                 idempotent=own.idempotent, kind=own.kind,
                                                 path_field=own.path_field)
        self._tools: Dict[str, Tool] = {}
        for t in tools:
            self.add_tool(t)
        self.session_path: Optional[str] = os.fspath(session) if session not in (None, _UNSET) else None
        #: What loading the session found: entries, torn_tail, skipped, created (None without a session).
        self.session_report: Optional[SessionReport] = self._core.session_report()
        self._permission: Optional[PermissionFn] = None
        if permission is not None:
            self.set_permission(permission)

    # -- lifetime ------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the agent's MCP servers, end its background commands (``bash`` with ``run_in_background``, with
        every process they started) and detach its session file (its lock is released). The conversation
        stays readable. Idempotent; also done by ``with tooloop.Agent(...) as agent:`` and on garbage
        collection."""
        self._core.close()

    @property
    def background_commands(self) -> List[BackgroundCommand]:
        """The built-in bash's background commands, oldest first: dicts with ``id``, ``command``, ``status``
        (``"running"``, ``"exited"``, ``"killed"`` or ``"failed"``), ``exit_code``, ``started`` (Unix time) and
        ``unread_bytes``."""
        return list(self._core.background_commands())

    def __enter__(self) -> "Agent":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def todos(self) -> List[Todo]:
        """The current todo list (``planning=True``): dicts with ``content``, ``status`` and optionally
        ``active_form``; empty before the model wrote one. Restored with a session."""
        return list(self._core.todos())

    def mcp_status(self) -> McpStatus:
        """The MCP servers: ``{"servers": [{name, state, tools, ...}], "failures": [{server, reason}]}``."""
        return self._core.mcp_status()

    @property
    def skills(self) -> Skills:
        """The skills found (``{"skills": [{name, description, dir, meta}], "problems": [{path, reason}]}``)."""
        return self._core.skills()

    # -- tools ---------------------------------------------------------------------------------------------

    def add_tool(self, tool: Union[Tool, Callable[..., Any]]) -> Tool:
        """Register a tool (a ``Tool`` or a plain function); returns the Tool."""
        t = as_tool(tool)
        self._core.register_tool(t.name, t.description, t.input_schema, _invoker(t, self._aio), t.parallel_safe,
                                 t.read_only,
                                 t.timeout, idempotent=t.idempotent, kind=t.kind, path_field=t.path_field)
        self._tools[t.name] = t
        return t

    def remove_tool(self, name: str) -> bool:
        """Unregister the tool ``name``; whether it existed."""
        self._tools.pop(name, None)
        return self._core.unregister_tool(name)

    @overload
    def tool(
        self,
        fn: Callable[..., Any],
        *,
        name: Optional[str] = None,
        description: Optional[str] = None,
        parallel_safe: bool = False,
        read_only: bool = False,
        timeout: Optional[float] = None,
        idempotent: bool = True,
        kind: Optional[str] = None,
        path_field: Optional[str] = None,
    ) -> Tool: ...

    @overload
    def tool(
        self,
        fn: None = None,
        *,
        name: Optional[str] = None,
        description: Optional[str] = None,
        parallel_safe: bool = False,
        read_only: bool = False,
        timeout: Optional[float] = None,
        idempotent: bool = True,
        kind: Optional[str] = None,
        path_field: Optional[str] = None,
    ) -> Callable[[Callable[..., Any]], Tool]: ...

    def tool(
        self,
        fn: Optional[Callable[..., Any]] = None,
        *,
        name: Optional[str] = None,
        description: Optional[str] = None,
        parallel_safe: bool = False,
        read_only: bool = False,
        timeout: Optional[float] = None,
        idempotent: bool = True,
        kind: Optional[str] = None,
        path_field: Optional[str] = None,
    ) -> Union[Tool, Callable[[Callable[..., Any]], Tool]]:
        """Decorator registering a function as a tool: ``@agent.tool`` or ``@agent.tool(name=...,
        read_only=True)``; ``idempotent=False`` for a tool whose same call may bring something new each time
        (no repetition guard touches it, see ``tooloop.Tool``); ``kind``/``path_field`` say what it does (see
        ``tooloop.Tool``).

        Returns the ``Tool``, which stays callable like the function.
        """

        def register(f: Callable[..., Any]) -> Tool:
            made = _make_tool(f, name=name, description=description, parallel_safe=parallel_safe, read_only=read_only,
                              timeout=timeout, idempotent=idempotent, kind=kind, path_field=path_field)
            return self.add_tool(made)

        if fn is None:
            return register
        return register(fn)

    def tool_info(self, name: str) -> Optional[ToolInfo]:
        """What the core's registry knows of the tool ``name`` (built-ins included), or None when there is no
        such tool: e.g. ``agent.tool_info("read_file").read_only`` is True."""
        d = self._core.tool_info(name)
        if d is None:
            return None
        return ToolInfo(str(d["name"]), str(d.get("description") or ""), dict(d.get("input_schema") or {}),
                        bool(d.get("parallel_safe")), bool(d.get("read_only")), kind=d.get("kind"),
                        path_field=d.get("path_field"), idempotent=bool(d.get("idempotent", True)),
                        confinable=bool(d.get("confinable")))

    @property
    def tools(self) -> List[str]:
        """Names of the registered tools (built-ins included), in registration order."""
        return list(self._core.tool_names())

    def set_hooks(self, hooks: Optional[Dict[str, Any]]) -> None:
        """Replace the hooks (``{"before_tool": f, "after_tool": g, "before_request": h, "on_stop": k,
        "after_check": c}``, each optional; None removes them all). See ``tooloop._hooks`` for what each
        returns."""
        from ._hooks import adapters

        self._core.set_hooks(**adapters(hooks))

    @property
    def instructions(self) -> Optional[Instructions]:
        """The project instruction files in the system prompt (``instruction_files=``): ``{"files": [{path,
        truncated, bytes}], "skipped": [{path, reason}]}``, or None when they are off."""
        return self._core.instructions()

    @property
    def spent_usd(self) -> float:
        """What this agent has spent in USD by the core's price table: every request, its subagents' and
        compaction summaries included. ``max_cost_usd`` is checked against it before each request."""
        return float(self._core.spent_usd())

    def set_permission(self, permission: Optional[PermissionFn]) -> None:
        """Set or clear the permission callable (see the class docs)."""
        self._core.set_permission(None if permission is None else _permission_adapter(permission, self._aio))
        self._permission = permission

    @property
    def permission(self) -> Optional[PermissionFn]:
        """The permission callable (``permission=``, ``set_permission``), None without one. A consumer of
        ``stream(..., pause_for_approval=True)`` may answer each pause with it, on its own thread: the
        blocking callable's answers, asked where the events are drawn."""
        return self._permission

    # -- runs ----------------------------------------------------------------------------------------------

    def run(self, input: Input) -> RunResult:
        """Run until the model stops: send ``input``, run the tools it asks for, repeat. Blocks, on the calling
        thread (the GIL is released while waiting; tools, hooks and a model callable run on this thread too);
        Ctrl+C cancels the run within 200 ms and raises KeyboardInterrupt with the conversation intact."""
        return self._result(self._core.run(input))

    def _result(self, d: Dict[str, Any]) -> RunResult:
        """The RunResult, its ``output`` built into the ``output_schema`` class when one was given."""
        result = RunResult._from(d)
        build = self._output_build
        if build is not None and result.output is not None:
            try:
                object.__setattr__(result, "output", build(result.output))
            except Exception as e:
                from .errors import OutputValidationError

                raise OutputValidationError(
                    f"the final answer is valid JSON for output_schema but building it failed: {e}",
                    errors=[str(e)], output=result.output, text=result.text, attempts=1) from e
        return result

    def stream(self, input: Input, *, pause_for_approval: bool = False) -> AgentStream:
        """Like ``run`` but yields events as they happen (see ``AgentStream``). With ``pause_for_approval``,
        each tool call the ``permission`` callable would be asked about (every call not settled by the rules
        or ``before_tool``) pauses the run instead, until the consumer answers it with ``stream.approve``; the
        ``permission`` callable is then asked only about a subagent's calls (without one, those are refused)."""
        return AgentStream(self._core.start(input, True, pause_for_approval), self.model, self._result)

    # -- asyncio (tooloop._aio: a worker thread per run, results and events handed to the caller's loop) ----

    def _bridge(self) -> _Bridge:
        bridge = self._aio.bridge
        if bridge is None:
            from ._aio import _Bridge

            bridge = self._aio.bridge = _Bridge()
        return bridge

    async def arun(self, input: Input) -> RunResult:
        """``run`` for asyncio: the same ``RunResult`` and exceptions, the loop never blocked (the run goes on a
        worker thread of its own). ``async def`` tools and an ``async def`` permission callable are awaited on
        this loop, in the caller's context; sync tools run on the worker. Cancelling the awaiting task
        (``task.cancel()``, ``asyncio.wait_for``) cancels the run, waits until it has stopped (without
        blocking the loop) and raises ``asyncio.CancelledError``, the conversation valid and resumable."""
        from ._aio import agent_run

        core = self._core
        return await agent_run(lambda: core.start(input, True), self._result, self._bridge())

    def astream(self, input: Input, *, pause_for_approval: bool = False) -> AsyncAgentStream:
        """``stream`` for asyncio: ``async for event in agent.astream(...)`` yields the same events as
        ``stream()``, ending with a ``DoneEvent`` (see ``AsyncAgentStream``; the run starts at once). Call it
        from a coroutine (it needs the running loop). ``pause_for_approval`` as in ``stream``: answer each
        ``ApprovalRequestEvent`` with ``await stream.approve(event.id, decision)``."""
        from ._aio import agent_stream

        core = self._core
        return agent_stream(lambda: core.start(input, True, pause_for_approval), self._result, self._bridge())

    async def aresume(self) -> RunResult:
        """``resume`` for asyncio (see ``arun``)."""
        from ._aio import agent_run

        core = self._core
        return await agent_run(lambda: core.start(None, True), self._result, self._bridge())

    def resume(self) -> RunResult:
        """Continue after a failure, a cancel or max_turns, without new input: unanswered tool calls are
        answered as interrupted (a tool that already ran is never run again), then the conversation is sent
        again. (Opening a saved conversation is ``Agent(session=...)``; this goes on with the one loaded.)"""
        return self._result(self._core.run(None))

    def resume_stream(self, *, pause_for_approval: bool = False) -> AgentStream:
        """Like ``resume`` but yields events as they happen (see ``AgentStream``; ``pause_for_approval`` as in
        ``stream``)."""
        return AgentStream(self._core.start(None, True, pause_for_approval), self.model, self._result)

    def compact(self, instructions: Optional[str] = None) -> Optional[str]:
        """Compact the conversation now: the older turns are summarized by the model (``compaction_model`` if
        set; ``instructions`` say what the summary must keep), the first user message and the newest turns
        stay as they are. ``history`` keeps everything; ``messages`` (what is sent) gets smaller. Returns the
        summary, or None when nothing was summarized (too little to compact, or the summary request failed
        and the older turns were dropped instead). Blocks like ``run``; Ctrl+C cancels it."""
        record = self._core.compact(instructions)
        if not record:
            return None
        summary = record.get("summary")
        return str(summary) if summary is not None else None

    def count_tokens(self, input: Optional[str] = None, *, estimate: bool = False) -> int:
        """Tokens the next request would carry (with ``input`` added as a user message): counted by the API
        where it offers a counting endpoint (Anthropic), else estimated from the size of the request and the
        token counts the API reported so far. ``estimate=True`` never asks the API (cheap, no network)."""
        return int(self._core.count_tokens(input, estimate))

    @property
    def context_window(self) -> Optional[int]:
        """The model's context window in tokens (``context_window=`` if given, else from the model table), or
        None when unknown: then compaction happens only when the API says the prompt is too long."""
        return self._core.context_window

    def cancel(self) -> None:
        """Cancel the current run, if any (from any thread); it raises ``tooloop.Cancelled``."""
        self._core.cancel()

    def reset(self) -> None:
        """Clear the conversation (the session file records the reset)."""
        self._core.reset()

    # -- state ---------------------------------------------------------------------------------------------

    @property
    def model(self) -> str:
        """The model name."""
        return str(self._core.model)

    @property
    def provider(self) -> str:
        """The provider's name: ``"anthropic"``, ``"openai"``, ``"bedrock"``, ``"host"`` for a model callable."""
        return str(self._core.provider_name)

    def set_model(self, model: str, provider: Union[str, ModelFn, None] = None, **options: Any) -> None:
        """Continue this conversation on another model, and provider, from the next run on.

        ``provider`` is a name (``"anthropic"``, ``"openai"``, ``"bedrock"``), a model callable, or None for the
        current one. ``options`` are the new provider's ``api_key``, ``base_url``, ``region`` and ``headers``;
        what is not given comes from this agent's own options when the provider is the one it was built for,
        else from the environment as it was when the agent was built. Every request stays valid: what the new
        provider cannot take (another provider's thinking signatures, server tool blocks) is left out of its
        requests by a documented rule (README "Switching models and fallback"); the history keeps everything,
        and the session notes the switch. Raises ConfigError during a run, or when the provider cannot be built
        (no key).
        """
        core_provider: Any = provider
        if provider is not None and not isinstance(provider, str):
            if not callable(provider):
                raise ConfigError(f"provider must be a name, a callable or None, got {type(provider).__name__}")
            core_provider = _model_adapter(provider)
        self._core.set_model(model, core_provider, options)

    @property
    def messages(self) -> List[Dict[str, Any]]:
        """The conversation as the API sees it (always valid): a list of message dicts."""
        return list(self._core.messages())

    @property
    def history(self) -> List[HistoryEntry]:
        """The internal entries: dicts with id, role (user, assistant, tool, system), content, status
        (streaming, complete, error), created_at, and for model turns duration_ms, model, usage, stop_reason,
        error."""
        return list(self._core.history())

    @property
    def usage(self) -> Usage:
        """Tokens used by the whole conversation, with an estimated cost when the model's price is known."""
        return Usage._from(self._core.usage())

    @property
    def cost_usd(self) -> Optional[float]:
        """Estimated cost in USD of the whole conversation, each turn priced with its own model from the
        core's price table (None when no turn's model has a known price)."""
        return self._core.cost_usd()

    def __repr__(self) -> str:
        return f"Agent(model={self.model!r}, provider={self._core.provider_name!r}, tools={self.tools!r})"
