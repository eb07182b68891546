"""Python tools for the agent loop: the ``Tool`` class, the ``@tool`` decorator and ``as_tool``.

This module is pure Python and imports nothing from the compiled ``tooloop._tooloop``: the binding asks a
``Tool`` for its spec (``to_spec()``) and, when the model calls it, for its result (``invoke(input)``). The
schema from type hints is built by ``_schema`` (its choices are documented there), the description from the
docstring by ``_docstring``; both load on the first tool built from a function, so ``import tooloop`` stays
cheap: this module imports nothing at import time (not even ``typing``), and ``inspect``, ``json``,
``logging`` and ``copy`` where a tool is made, run or fails.

What it must never do: let an ``Exception`` raised by a tool escape ``invoke`` (the model gets an ``is_error``
result instead, DESIGN invariant 3), or swallow a ``BaseException`` that is not an ``Exception``
(``KeyboardInterrupt``, ``SystemExit``): those abort the run and propagate unchanged.

Tool exceptions are logged through ``logging.getLogger("tooloop")`` at ERROR with their traceback: the model
reads the message, the developer needs the stack.
"""

from __future__ import annotations

# `typing` is for the type checker only: importing it costs more than the rest of `import tooloop`.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import inspect
    from typing import Any, Callable, Dict, List, Optional, Tuple

__all__ = ["Tool", "tool", "as_tool", "function_schema", "TOOL_KINDS"]

#: What a tool may say it does (``Tool(kind=...)``): reads, writes the file its ``path_field`` names, runs a
#: shell command, reaches the network.
TOOL_KINDS = ("read", "write", "shell", "network")


def _check_kind(name: str, kind: Optional[str], path_field: Optional[str], schema: Dict[str, Any],
                read_only: bool) -> Optional[str]:
    """The ``path_field`` a tool of ``kind`` writes (None for other kinds); ValueError for what does not fit."""
    if kind is not None and kind not in TOOL_KINDS:
        raise ValueError(f"tool {name!r}: unknown kind {kind!r}: the kinds are "
                         + ", ".join(repr(k) for k in TOOL_KINDS))
    if kind != "write":
        if path_field is not None:
            raise ValueError(f"tool {name!r}: path_field is for kind='write' only (it names the input field "
                             f"holding the path the tool writes), not for kind={kind!r}")
        return None
    if read_only:
        raise ValueError(f"tool {name!r}: a tool of kind 'write' cannot be read_only")
    raw = schema.get("properties")
    props: Dict[str, Any] = raw if isinstance(raw, dict) else {}
    if path_field is None:
        if isinstance(props.get("path"), dict) and props["path"].get("type") == "string":
            return "path"   # the usual name: `def save(path: str, ...)`
        raise ValueError(f"tool {name!r}: kind='write' needs path_field=, the input field holding the path the "
                         f"tool writes (its properties: {', '.join(props) or 'none'})")
    if not isinstance(path_field, str) or path_field not in props:
        raise ValueError(f"tool {name!r}: path_field {path_field!r} is not a property of the input schema "
                         f"(its properties: {', '.join(props) or 'none'})")
    if not isinstance(props[path_field], dict) or props[path_field].get("type") != "string":
        raise ValueError(f"tool {name!r}: path_field {path_field!r} must be a string property of the schema")
    return path_field

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def _valid_name(name: str) -> bool:
    """``^[a-zA-Z0-9_-]{1,64}$`` without loading ``re``."""
    return 0 < len(name) <= 64 and all(c in _NAME_CHARS for c in name)


def _log_tool_error(message: str, *args: Any) -> None:
    import logging

    logging.getLogger("tooloop").error(message, *args, exc_info=True)


# ---------------------------------------------------------------------------------------------------------------
# The Tool class
# ---------------------------------------------------------------------------------------------------------------


class Tool:
    """An explicit tool: ``tooloop.Tool(name, description, input_schema, fn, *, parallel_safe=False,
    read_only=False, timeout=None, idempotent=True, kind=None, path_field=None)``.

    ``fn`` is called with the model's input as keyword arguments (``fn(**input)``). Calling the ``Tool`` itself
    calls ``fn`` directly, so a function decorated with ``@tool`` stays usable as a function. ``read_only``
    says the tool changes nothing (no file, state or anything outside): the core records it, and hosts use it
    for policies such as "ask before anything that writes" (``Agent.tool_info(name).read_only``).

    ``idempotent=False`` says the same call with the same input may rightly bring something new each time
    (``roll_dice()``, ``next_page()``, a poll): no repetition guard (``Agent(progress_guard=True)``, which the
    ``tooloop`` command turns on) ever refuses, counts or comments on its calls.

    ``kind`` says what the tool does, so the agent treats it like the built-in of that kind: ``"read"`` (like
    read_file: changes nothing, implies ``read_only``; progress detection counts a call as looking, not as a
    check run), ``"write"`` (like write_file: each call that succeeds sends a ``file_change`` event with what
    the file named by its ``path_field`` input held before, so it can be undone with ``tooloop.restore_file``;
    an ``Edit`` permission rule covers it), ``"shell"`` (like bash) or ``"network"`` (like web_fetch). A
    ``"write"`` tool's ``path_field`` defaults to ``"path"`` when the schema has a string ``path``.

    ``timeout`` (seconds) bounds each call: a call that overruns is answered with an error result at once (the
    run never hangs on a stuck tool), and ``TimeoutError`` is raised inside the still-running function so it
    stops at its next Python instruction (a call blocked in C code, such as a long ``time.sleep``, stops when
    that returns).
    """

    name: str
    description: str
    input_schema: Dict[str, Any]
    fn: Callable[..., Any]
    parallel_safe: bool
    read_only: bool
    timeout: Optional[float]
    idempotent: bool
    kind: Optional[str]
    path_field: Optional[str]

    def __init__(
        self,
        name: str,
        description: Optional[str],
        input_schema: Dict[str, Any],
        fn: Callable[..., Any],
        *,
        parallel_safe: bool = False,
        read_only: bool = False,
        timeout: Optional[float] = None,
        idempotent: bool = True,
        kind: Optional[str] = None,
        path_field: Optional[str] = None,
    ) -> None:
        if not isinstance(name, str):
            raise TypeError(f"tool name must be a str, got {type(name).__name__}: {name!r}")
        if not _valid_name(name):
            raise ValueError(
                f"invalid tool name {name!r}: names must match ^[a-zA-Z0-9_-]{{1,64}}$ "
                "(letters, digits, '_' and '-', at most 64 characters)"
            )
        if description is None:
            description = ""
        if not isinstance(description, str):
            raise TypeError(f"tool {name!r}: description must be a str, got {type(description).__name__}")
        if not isinstance(input_schema, dict):
            raise TypeError(
                f"tool {name!r}: input_schema must be a dict (a JSON schema), got {type(input_schema).__name__}"
            )
        schema_type = input_schema.get("type", "object")
        if schema_type != "object":
            raise ValueError(f"tool {name!r}: input_schema must have \"type\": \"object\", got {schema_type!r}")
        import json

        try:
            # A schema the binding cannot send is better reported now, with the tool's name, than at run time.
            input_schema = json.loads(json.dumps(input_schema, allow_nan=False))
        except (TypeError, ValueError) as e:
            raise ValueError(f"tool {name!r}: input_schema is not JSON-serializable: {e}") from None
        input_schema.setdefault("type", "object")
        if not callable(fn):
            raise TypeError(f"tool {name!r}: fn must be callable, got {type(fn).__name__}: {fn!r}")

        self.name = name
        self.description = description
        self.input_schema = input_schema
        self.fn = fn
        self.parallel_safe = bool(parallel_safe)
        self.path_field = _check_kind(name, kind, path_field, input_schema, bool(read_only))
        self.kind = kind
        self.read_only = bool(read_only) or kind == "read"
        self.idempotent = bool(idempotent)
        if timeout is not None:
            if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < 1e9:
                raise ValueError(f"tool {name!r}: timeout must be a positive number of seconds, got {timeout!r}")
            timeout = float(timeout)
        self.timeout = timeout
        # Set by tool()/as_tool(): turns JSON values back into the annotated types (Enum, dataclass, ...).
        self._converters: Dict[str, Callable[[Any], Any]] = {}
        self._signature = _signature_or_none(fn)
        # Lets inspect.signature(), help() and functools see the wrapped function.
        self.__wrapped__ = fn
        self.__doc__ = getattr(fn, "__doc__", None) or description or None
        for attr in ("__module__", "__name__", "__qualname__"):
            value = getattr(fn, attr, None)
            if isinstance(value, str):
                setattr(self, attr, value)

    def __repr__(self) -> str:
        kind = f", kind={self.kind!r}" if self.kind is not None else ""
        return f"Tool(name={self.name!r}, parallel_safe={self.parallel_safe!r}, read_only={self.read_only!r}{kind})"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __get__(self, obj: Any, objtype: Any = None) -> Tool:
        # `@tool` on a method: accessed through an instance, the tool binds like the function would.
        if obj is None or not hasattr(self.fn, "__get__"):
            return self
        import copy

        bound = copy.copy(self)
        bound.fn = self.fn.__get__(obj, objtype)
        bound.__wrapped__ = bound.fn
        bound._signature = _signature_or_none(bound.fn)
        return bound

    def to_spec(self) -> Dict[str, Any]:
        """The tool as the API describes it: ``{"name", "description", "input_schema"}`` (a copy)."""
        import copy

        return {"name": self.name, "description": self.description, "input_schema": copy.deepcopy(self.input_schema)}

    def invoke(self, input: Optional[Dict[str, Any]], *,
               awaiter: Optional[Callable[[Any, Optional[float]], Any]] = None) -> Tuple[Any, bool]:
        """Run ``fn(**input)`` for the agent loop and return ``(content, is_error)``.

        An awaitable result (an ``async def`` tool) is awaited by ``awaiter(awaitable, timeout)`` when given (an
        async run's: on the caller's loop), else on a fresh event loop.

        ``content`` is a ``str``, or a list of content-block dicts when the tool returned one (each a dict with a
        ``"type"`` key). str results are returned as is, ``None`` as ``""``, anything else as JSON text. An
        ``Exception`` becomes ``("TypeName: message", True)`` and is logged with its traceback; any other
        ``BaseException`` propagates.
        """
        if input is None:
            input = {}
        if not isinstance(input, dict):
            return (f"tool {self.name!r} expects a JSON object as input, got {type(input).__name__}", True)

        problem = self._check_arguments(input)
        if problem is not None:
            return (problem, True)

        converted: Dict[str, Any] = {}
        for key, value in input.items():
            convert = self._converters.get(key)
            if convert is not None:
                try:
                    value = convert(value)
                except Exception as e:
                    problem = f"invalid value for parameter {key!r} of tool {self.name!r}: {_describe_exception(e)}"
                    return (problem, True)
            converted[key] = value
        # fn(**input) cannot pass positional-only parameters; they go first, in signature order.
        args: List[Any] = []
        for pname in self._positional_only():
            if pname not in converted:
                break
            args.append(converted.pop(pname))
        kwargs = converted

        alarm = _Alarm(self.timeout) if self.timeout is not None else None
        timed_out = False
        try:
            try:
                result = self.fn(*args, **kwargs)
                if _isawaitable(result):
                    if awaiter is not None:
                        # Awaited on an async run's loop: that wait keeps the time limit, not the thread alarm.
                        if alarm is not None:
                            alarm.disarm()
                            alarm = None
                        try:
                            result = awaiter(result, self.timeout)
                        except TimeoutError:
                            timed_out = self.timeout is not None
                            raise
                    else:
                        result = _run_awaitable(result)
            finally:
                if alarm is not None:
                    alarm.disarm()
        except Exception as e:
            if (timed_out or (alarm is not None and alarm.fired)) and isinstance(e, TimeoutError):
                # The agent has (or is about to have) answered the call with the same words.
                limit = f"{self.timeout:.0f} s" if float(self.timeout or 0).is_integer() else f"{self.timeout:.1f} s"
                return (f"Tool '{self.name}' did not finish within its time limit of {limit} and was told to stop; "
                        "its result is lost. Try smaller input or another approach.", True)
            _log_tool_error("tool %r raised %s", self.name, type(e).__name__)
            return (_describe_exception(e), True)

        try:
            return (_to_content(result), False)
        except Exception as e:
            _log_tool_error("tool %r returned a value that cannot be sent to the model", self.name)
            return (
                f"tool {self.name!r} returned a {type(result).__name__} that cannot be converted to JSON: "
                f"{_describe_exception(e)}",
                True,
            )

    def _positional_only(self) -> List[str]:
        sig = self._signature
        if sig is None:
            return []
        return [p.name for p in sig.parameters.values() if p.kind is p.POSITIONAL_ONLY]

    def _check_arguments(self, input: Dict[str, Any]) -> Optional[str]:
        """A message for the model when ``input`` cannot be bound to ``fn``'s parameters, else None."""
        sig = self._signature
        if sig is None:
            return None
        params = [p for p in sig.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        accepts_any_key = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
        names = [p.name for p in params]
        if not accepts_any_key:
            unknown = [k for k in input if k not in names]
            if unknown:
                known = ", ".join(names) if names else "none"
                return (
                    f"unknown parameter(s) for tool {self.name!r}: {', '.join(repr(k) for k in unknown)} "
                    f"(accepted parameters: {known})"
                )
        missing = [p.name for p in params if p.default is p.empty and p.name not in input]
        if missing:
            return f"missing required parameter(s) for tool {self.name!r}: {', '.join(repr(k) for k in missing)}"
        return None


class _Alarm:
    """Raises ``TimeoutError`` in the calling thread once ``seconds`` have passed, unless disarmed first: how a
    tool that overran its ``timeout`` is told to stop (the agent has answered the call with an error already)."""

    def __init__(self, seconds: float) -> None:
        import threading

        self._ident = threading.get_ident()
        self._lock = threading.Lock()
        self._armed = True
        self.fired = False
        # A little after the agent's own deadline, so the agent answers first and this only tells the
        # function to stop.
        self._timer = threading.Timer(seconds + 0.05, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        import ctypes

        with self._lock:
            if self._armed:
                self._armed = False
                self.fired = True
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._ident), ctypes.py_object(TimeoutError))

    def disarm(self) -> None:
        with self._lock:
            self._armed = False
        self._timer.cancel()


def _signature_or_none(fn: Any) -> Optional[inspect.Signature]:
    import inspect

    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        # Some builtins have no introspectable signature: then fn(**input) itself reports what is wrong.
        return None


def _isawaitable(obj: Any) -> bool:
    import inspect  # already loaded by the Tool's signature: a dictionary lookup

    return inspect.isawaitable(obj)


def _describe_exception(e: BaseException) -> str:
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _run_awaitable(awaitable: Any) -> Any:
    """Run an async tool's result to completion on a fresh event loop (tools run on the thread that runs the
    agent: the caller's for ``run``)."""
    import asyncio  # only async tools pay for it: it is most of `import tooloop`'s time otherwise

    async def wait() -> Any:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wait())
    # This thread runs an event loop (a blocking ``agent.run`` called from async code, or in a notebook): the
    # tool gets a fresh loop on a thread of its own, with this thread's context variables.
    import contextvars
    import threading

    context = contextvars.copy_context()
    box: Dict[str, Any] = {}

    def on_its_own_loop() -> None:
        try:
            box["value"] = context.run(asyncio.run, wait())
        except BaseException as e:  # handed to the caller as it is, KeyboardInterrupt included
            box["error"] = e

    t = threading.Thread(target=on_its_own_loop, name="tooloop-async-tool", daemon=True)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


# ---------------------------------------------------------------------------------------------------------------
# Result conversion
# ---------------------------------------------------------------------------------------------------------------


def _json_default(o: Any) -> Any:
    """json.dumps fallback: the values tools commonly return that JSON does not know."""
    import dataclasses
    import datetime
    import enum

    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        return dataclasses.asdict(o)
    model_dump = getattr(o, "model_dump", None)
    if callable(model_dump) and not isinstance(o, type):
        try:
            return model_dump(mode="json")  # pydantic v2: JSON-compatible values
        except TypeError:
            return model_dump()
    if isinstance(o, enum.Enum):
        return o.value
    if isinstance(o, (datetime.datetime, datetime.date, datetime.time)):
        return o.isoformat()
    if isinstance(o, (set, frozenset)):
        return list(o)
    if isinstance(o, (bytes, bytearray)):
        return bytes(o).decode("utf-8", errors="replace")
    return str(o)


def _is_block_list(result: Any) -> bool:
    return (
        isinstance(result, list)
        and len(result) > 0
        and all(isinstance(b, dict) and isinstance(b.get("type"), str) for b in result)
    )


def _to_content(result: Any) -> Any:
    if isinstance(result, str):
        # An exact str: a str subclass (a str-valued Enum, say) would otherwise carry its own __str__.
        return str.__str__(result)
    if result is None:
        return ""
    if _is_block_list(result):
        import json

        # Round-trip so every value inside the blocks is plain JSON by the time the binding converts them.
        return json.loads(json.dumps(result, default=_json_default))
    import json

    return json.dumps(result, default=_json_default, ensure_ascii=False)


# ---------------------------------------------------------------------------------------------------------------
# The decorator and as_tool
# ---------------------------------------------------------------------------------------------------------------


def tool(
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
) -> Any:
    """Make a ``Tool`` of a function: ``@tool`` or ``@tool(name=..., description=..., parallel_safe=...,
    read_only=..., timeout=..., idempotent=..., kind=..., path_field=...)``; ``idempotent=False`` and ``kind``
    (``"read"``, ``"write"`` with ``path_field``, ``"shell"``, ``"network"``): see ``Tool``.

    The input schema comes from the type hints (see ``function_schema``), the description from the docstring
    (summary and body, without the ``Args:``/``Returns:``/``Raises:`` sections) unless given.
    """

    def build(f: Callable[..., Any]) -> Tool:
        if isinstance(f, Tool):
            if (name is None and description is None and not parallel_safe and not read_only and timeout is None
                    and idempotent and kind is None and path_field is None):
                return f
            t = Tool(
                name if name is not None else f.name,
                description if description is not None else f.description,
                f.input_schema,
                f.fn,
                parallel_safe=parallel_safe or f.parallel_safe,
                read_only=read_only or f.read_only,
                timeout=timeout if timeout is not None else f.timeout,
                idempotent=idempotent and f.idempotent,
                kind=kind if kind is not None else f.kind,
                path_field=path_field if kind is not None or path_field is not None else f.path_field,
            )
            t._converters = dict(f._converters)
            return t
        if isinstance(f, (staticmethod, classmethod)):
            raise TypeError(
                f"cannot make a tool of the {type(f).__name__} {f.__func__.__qualname__}: put @tool below "
                f"@{type(f).__name__}, or pass the function itself"
            )
        if isinstance(f, type):
            raise TypeError(f"cannot make a tool of the class {f.__qualname__}: pass a function or a callable instance")
        if not callable(f):
            raise TypeError(f"cannot make a tool of {f!r} ({type(f).__name__}): expected a function")
        from ._schema import build_schema

        built = build_schema(f)
        tool_name = name if name is not None else built.name
        if tool_name == "<lambda>":
            raise ValueError("a lambda has no usable tool name: pass one, e.g. tool(lambda x: ..., name='my_tool')")
        t = Tool(
            tool_name,
            description if description is not None else built.description,
            built.schema,
            f,
            parallel_safe=parallel_safe,
            read_only=read_only,
            timeout=timeout,
            idempotent=idempotent,
            kind=kind,
            path_field=path_field,
        )
        t._converters = built.converters
        return t

    if fn is None:
        return build
    if isinstance(fn, str):
        raise TypeError(f"tool() takes the function, not a name: use @tool(name={fn!r})")
    return build(fn)


def as_tool(obj: Any) -> Tool:
    """``obj`` as a ``Tool``: a Tool is returned as is, a function goes through ``tool()``."""
    if isinstance(obj, Tool):
        return obj
    if callable(obj) and not isinstance(obj, type):
        built: Tool = tool(obj)
        return built
    raise TypeError(
        f"cannot use {obj!r} ({type(obj).__name__}) as a tool: expected a function or a tooloop.Tool"
    )


def function_schema(fn: Callable[..., Any]) -> Dict[str, Any]:
    """The input JSON schema of ``fn``, built from its type hints and docstring.

    Raises ``TypeError`` naming the function, the parameter and the hint when a hint has no JSON mapping.
    """
    if isinstance(fn, Tool):
        import copy

        return copy.deepcopy(fn.input_schema)
    from ._schema import build_schema

    return build_schema(fn).schema
