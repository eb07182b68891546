"""The batch runner behind ``tooloop.batch``: tasks, results, limits, progress, and the threads engine.

Must never: import an engine that runs elsewhere (``_batch_ray`` builds on this module, not the reverse),
hold agent logic the core has (resume, pricing, the loop), or import the CLI.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

from ._agent import Agent
from .errors import Cancelled, ConfigError, MaxTurnsExceeded
from .events import Usage, _Record

# `typing` is for the type checker only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, Iterable, List, Optional, TextIO, Tuple

    from .types import HistoryEntry

__all__ = ["BatchResult", "Batch", "load_results", "STATUSES"]

#: Every status a task can end with.
STATUSES = ("ok", "error", "max_turns", "budget", "cancelled")

RESULTS_FILE = "results.jsonl"


class BatchResult(_Record):
    """The outcome of one task of a batch.

    ``status`` is ``"ok"`` (the agent finished), ``"error"`` (it raised: ``error`` says what), ``"max_turns"``,
    ``"budget"`` (the batch's ``budget_usd`` stopped it, or stopped it from starting) or ``"cancelled"``.
    ``text`` is the final answer, ``output`` the structured output when the agent had an ``output_schema``,
    ``stop_reason`` the model's last stop reason, ``turns`` the completed model turns of the task's whole
    conversation (resumed runs included), ``usage`` and ``cost_usd`` its tokens and estimated cost, ``session``
    the path of its session file, ``seconds`` the wall time of this attempt, ``check`` what the batch's
    ``check(task, result)`` returned (None without one). A task with ``"attempts": N`` (see
    ``tooloop.attempts``) has ``attempts``: ``AttemptsResult.to_dict()`` (winner, every attempt's turns,
    tokens, seconds and verdict, the files applied); it is ``"ok"`` only when an attempt was verified, else
    ``"error"`` with ``error`` ``"no attempt verified"``, and keeps no session.
    """

    __slots__ = ("id", "status", "text", "output", "stop_reason", "turns", "usage", "cost_usd", "session", "error",
                 "seconds", "check", "attempts")
    _fields = __slots__

    id: str
    status: str
    text: str
    output: Any
    stop_reason: Optional[str]
    turns: int
    usage: Usage
    cost_usd: Optional[float]
    session: Optional[str]
    error: Optional[str]
    seconds: float
    check: Any
    attempts: Optional[Dict[str, Any]]

    def __init__(self, id: str, status: str, text: str = "", output: Any = None, stop_reason: Optional[str] = None,
                 turns: int = 0, usage: Optional[Usage] = None, cost_usd: Optional[float] = None,
                 session: Optional[str] = None, error: Optional[str] = None, seconds: float = 0.0,
                 check: Any = None, attempts: Optional[Dict[str, Any]] = None) -> None:
        self._init(id=id, status=status, text=text, output=output, stop_reason=stop_reason, turns=turns,
                   usage=usage if usage is not None else Usage(), cost_usd=cost_usd, session=session, error=error,
                   seconds=round(float(seconds), 3), check=check, attempts=attempts)

    @property
    def ok(self) -> bool:
        """Whether the task finished (status ``"ok"``)."""
        return self.status == "ok"

    def to_dict(self) -> Dict[str, Any]:
        """The JSON object of a ``results.jsonl`` line."""
        u = self.usage
        return {
            "id": self.id, "status": self.status, "text": self.text, "output": _jsonable(self.output),
            "stop_reason": self.stop_reason, "turns": self.turns,
            "usage": {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
                      "cache_creation_input_tokens": u.cache_creation_input_tokens,
                      "cache_read_input_tokens": u.cache_read_input_tokens},
            "cost_usd": self.cost_usd, "session": self.session, "error": self.error,
            "seconds": round(self.seconds, 3), "check": _jsonable(self.check),
            **({"attempts": self.attempts} if self.attempts is not None else {}),
        }

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> BatchResult:
        """A ``results.jsonl`` line back as a ``BatchResult``."""
        cost = d.get("cost_usd")
        return cls(id=str(d["id"]), status=str(d.get("status") or "error"), text=str(d.get("text") or ""),
                   output=d.get("output"), stop_reason=d.get("stop_reason"), turns=int(d.get("turns") or 0),
                   usage=Usage._from(d.get("usage"), cost), cost_usd=float(cost) if cost is not None else None,
                   session=d.get("session"), error=d.get("error"), seconds=float(d.get("seconds") or 0.0),
                   check=d.get("check"), attempts=d.get("attempts"))


def _jsonable(value: Any) -> Any:
    """A structured output (a pydantic model, a dataclass, ...) as plain JSON data."""
    if value is None or isinstance(value, (str, int, float, bool, list, dict)):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    try:
        import dataclasses

        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return dataclasses.asdict(value)
    except Exception:
        pass
    return repr(value)


def load_results(out: str | os.PathLike[str]) -> Dict[str, BatchResult]:
    """The last recorded outcome of each task in ``out/results.jsonl`` (a torn or foreign line is skipped)."""
    path = os.path.join(os.fspath(out), RESULTS_FILE)
    found: Dict[str, BatchResult] = {}
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    d = json.loads(line)
                    if isinstance(d, dict) and isinstance(d.get("id"), str):
                        found[d["id"]] = BatchResult.from_dict(d)
                except (ValueError, TypeError, KeyError):
                    continue
    except FileNotFoundError:
        pass
    return found


# -- tasks and options -------------------------------------------------------------------------------------------

def _check_tasks(tasks: Iterable[Dict[str, Any]]) -> List[Dict[str, Any]]:
    checked: List[Dict[str, Any]] = []
    seen = set()
    for n, task in enumerate(tasks):
        if not isinstance(task, dict):
            raise ConfigError(f"task {n}: a task is a dict with 'id' and 'input', got {type(task).__name__}")
        tid = task.get("id")
        if not isinstance(tid, str) or not tid:
            raise ConfigError(f"task {n}: 'id' must be a non-empty string, got {tid!r}")
        if "/" in tid or "\\" in tid or tid in (".", "..") or tid.startswith(".") or "\0" in tid:
            raise ConfigError(f"task {n}: id {tid!r} cannot name a session file (no '/', '\\' or leading '.')")
        if tid == RESULTS_FILE[: -len(".jsonl")]:
            raise ConfigError(f"task {n}: id {tid!r} is reserved (out/results.jsonl)")
        if tid in seen:
            raise ConfigError(f"task {n}: id {tid!r} appears twice")
        seen.add(tid)
        inp = task.get("input")
        if not isinstance(inp, (str, list)):
            raise ConfigError(f"task {tid!r}: 'input' must be a string or a list of content blocks")
        ws = task.get("workspace")
        if ws is not None and not isinstance(ws, (str, os.PathLike)):
            raise ConfigError(f"task {tid!r}: 'workspace' must be a path")
        tries = task.get("attempts")
        if tries is not None and (not isinstance(tries, int) or isinstance(tries, bool) or tries < 1):
            raise ConfigError(f"task {tid!r}: 'attempts' must be an integer >= 1, got {tries!r}")
        checked.append(task)
    return checked


def _resolve_tool(spec: Any) -> Any:
    """A tool given as ``"module:function"`` imported; anything else as it is."""
    if not isinstance(spec, str):
        return spec
    module, sep, attr = spec.partition(":")
    if not sep or not module or not attr:
        raise ConfigError(f"a tool given as a string must be 'module:function', got {spec!r}")
    import importlib

    try:
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"cannot load the tool {spec!r}: {e}") from e
    if not callable(obj):
        raise ConfigError(f"the tool {spec!r} is not callable")
    return obj


#: The file suffixes that make a ``session`` a SQLite database (as the core reads them).
DB_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def _check_session_db(session_db: Any, options: Optional[Dict[str, Any]], out: str) -> Optional[str]:
    """The database every task's session goes to (``<db>#<task id>``), or None for ``out/<id>.jsonl`` files:
    ``session_db=`` (a path ending in .db, .sqlite or .sqlite3; True: ``out/sessions.db``), or such a path
    given as the options' ``session``."""
    in_options = options.get("session") if isinstance(options, dict) else None
    if in_options is not None:
        if session_db is not None:
            raise ConfigError("give the sessions' database once: session_db= or options['session'], not both")
        if not isinstance(in_options, (str, os.PathLike)) or "#" in os.fspath(in_options) \
                or not os.fspath(in_options).endswith(DB_SUFFIXES):
            raise ConfigError("options may set 'session' only to a database path (ending in .db, .sqlite or "
                              f".sqlite3) that holds every task's session as <db>#<id>, got {in_options!r}; "
                              "without it each task's session is out/<id>.jsonl")
        session_db = in_options
    if session_db is None or session_db is False:
        return None
    if session_db is True:
        return os.path.join(out, "sessions.db")
    if not isinstance(session_db, (str, os.PathLike)) or not os.fspath(session_db).endswith(DB_SUFFIXES) \
            or "#" in os.fspath(session_db):
        raise ConfigError("session_db must be a path ending in .db, .sqlite or .sqlite3 (no '#'), or True for "
                          f"out/sessions.db, got {session_db!r}")
    return os.fspath(session_db)


def _session_of(out: str, tid: str, db: Optional[str]) -> str:
    """The ``session`` of task ``tid``: ``out/<id>.jsonl``, or ``<db>#<id>`` in the batch's database."""
    return f"{db}#{tid}" if db is not None else os.path.join(out, tid + ".jsonl")


def _existing(session: str, db: Optional[str]) -> Optional[str]:
    """``session`` when it holds something already (a file, or an id of the database), else None."""
    if db is None:
        return session if os.path.exists(session) else None
    if not os.path.exists(db):
        return None
    from ._session import list_sessions

    tid = session[len(db) + 1:]
    try:
        return session if any(row.get("id") == tid for row in list_sessions(db)) else None
    except Exception:
        return None


def _check_options(options: Optional[Dict[str, Any]], resolve: bool = True) -> Dict[str, Any]:
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise ConfigError(f"options must be a dict of Agent keyword arguments, got {type(options).__name__}")
    opts = dict(options)
    opts.pop("session", None)  # a database for every task's session: _check_session_db took it
    tools = list(opts.get("tools") or ())
    for t in tools:
        if isinstance(t, str) and (t.count(":") != 1 or t.startswith(":") or t.endswith(":")):
            raise ConfigError(f"a tool given as a string must be 'module:function', got {t!r}")
    # On Ray the workers import the tools: they may be importable only there.
    opts["tools"] = [_resolve_tool(t) for t in tools] if resolve else tools
    return opts


# -- one task --------------------------------------------------------------------------------------------------

def _finished_from_history(history: List[HistoryEntry]) -> Optional[HistoryEntry]:
    """The last assistant entry when the session already holds a finished conversation (the process ended
    between the final answer and its results line), else None."""
    for entry in history[::-1]:
        role = entry["role"]
        if role == "system":
            continue
        if role != "assistant" or entry["status"] != "complete":
            return None
        if entry.get("stop_reason") in ("end_turn", "stop_sequence", "refusal"):
            return entry
        return None
    return None


def _text_of(entry: HistoryEntry) -> str:
    content = entry.get("content")
    if isinstance(content, str):
        return content
    return "".join(str(b.get("text", "")) for b in content or [] if isinstance(b, dict) and b.get("type") == "text")


class _Control:
    """What the agents of one batch share: the cancel flag, the running agents, the spend ledger and the limits.
    Each agent counts its spending in ``ledger`` (the core's spend ledger, see ``tooloop::ledger``): its loop
    holds every request's estimate there before sending it and refuses one that would take the batch past
    ``budget_usd`` — for every kind of model, its child agents and compaction summaries included. Each agent's
    HTTP attempts pass through ``gate_for`` (the core's send gate, see ``tooloop::gate``) for the rate limits."""

    def __init__(self, budget_usd: Optional[float], rpm: Optional[float], tpm: Optional[float]) -> None:
        from ._tooloop import _Ledger

        self.lock = threading.Lock()
        self.cancelled = threading.Event()
        self.budget_usd = budget_usd
        self.ledger = _Ledger(budget_usd)
        #: Kept for the ray engine, which hands each chunk the most a request has cost so far.
        self.max_request_cost = 0.0
        self.agents: Dict[str, Agent] = {}
        self.limiter = _Limiter(rpm, tpm)

    @property
    def spent(self) -> float:
        return float(self.ledger.spent_usd)

    @property
    def over_budget(self) -> bool:
        """Whether a request was refused because it would have taken the batch past ``budget_usd``."""
        return bool(self.ledger.exhausted)

    def gate_for(self, tid: str) -> Callable[[str, int, Optional[float]], Optional[float]]:
        """The send gate of task ``tid``'s agent. Before each HTTP attempt: refuse once the batch is cancelled,
        then wait for the shared rate limits. After each response: a 429's ``retry-after`` pauses every agent
        of the batch. (The budget is not the gate's: the agent's loop keeps it through the ledger.)"""

        def gate(kind: str, n: int, retry_after: Optional[float]) -> Optional[float]:
            if kind != "send":
                if n == 429 and retry_after:
                    self.limiter.pause(retry_after)
                return None
            if self.cancelled.is_set():
                return -1.0
            wait = self.limiter.wait_time(n / 4.0)
            return wait if wait > 0 else None

        return gate

    def stopping(self) -> Optional[str]:
        if self.cancelled.is_set():
            return "cancelled"
        if self.over_budget:
            return "budget"
        return None

    def cancel(self) -> None:
        self.cancelled.set()
        with self.lock:
            agents = list(self.agents.values())
        for a in agents:
            a.cancel()


class _Limiter:
    """Requests- and tokens-per-minute shared by the agents of a batch: token buckets that hold one second's
    worth (so a batch never bursts a minute's quota at once) and refill continuously."""

    def __init__(self, rpm: Optional[float], tpm: Optional[float]) -> None:
        self.lock = threading.Lock()
        self.rpm, self.tpm = rpm, tpm
        now = time.monotonic()
        self.req = max(1.0, (rpm or 0) / 60.0)
        self.tok = max(1.0, (tpm or 0) / 60.0)
        self.at = now
        self.paused_until = 0.0

    def wait_time(self, tokens: float) -> float:
        """Take one request of ``tokens`` if the buckets allow it now (0.0), else how long to wait."""
        with self.lock:
            now = time.monotonic()
            if now < self.paused_until:
                return self.paused_until - now
            dt, self.at = now - self.at, now
            if self.rpm:
                self.req = min(max(1.0, self.rpm / 60.0), self.req + dt * self.rpm / 60.0)
            if self.tpm:
                cap = max(1.0, self.tpm / 60.0)
                self.tok = min(cap, self.tok + dt * self.tpm / 60.0)
                tokens = min(tokens, cap)
            waits = [0.0]
            if self.rpm and self.req < 1.0:
                waits.append((1.0 - self.req) * 60.0 / self.rpm)
            if self.tpm and self.tok < tokens:
                waits.append((tokens - self.tok) * 60.0 / self.tpm)
            wait = max(waits)
            if wait == 0.0:
                if self.rpm:
                    self.req -= 1.0
                if self.tpm:
                    self.tok -= tokens
            return wait

    def pause(self, seconds: float) -> None:
        """A 429 said ``retry-after: seconds``: every agent of the batch waits that long."""
        with self.lock:
            self.paused_until = max(self.paused_until, time.monotonic() + seconds)


def _task_options(opts: Dict[str, Any], task: Dict[str, Any], session: str) -> Dict[str, Any]:
    kwargs = dict(opts)
    extra = task.get("options")
    if isinstance(extra, dict):
        kwargs.update({k: v for k, v in extra.items() if k != "session"})
        if "tools" in extra:
            kwargs["tools"] = [_resolve_tool(t) for t in extra.get("tools") or ()]
    ws = task.get("workspace")
    if ws is not None:
        os.makedirs(os.fspath(ws), exist_ok=True)
        kwargs["workspace"] = os.fspath(ws)
    kwargs["session"] = session
    return kwargs


def _check_budget_model(budget_usd: Optional[float], options: Optional[Dict[str, Any]]) -> None:
    """A budget needs prices: with a model the price table does not know, every request of the batch would be
    refused (the ledger never counts an unpriced request as free under a cap), so say so before anything runs.
    A task's own ``model`` is checked when its agent asks (its tasks then end ``"budget"``)."""
    from ._tooloop import estimate_cost_usd

    model = (options or {}).get("model")
    if budget_usd is None or not isinstance(model, str):
        return
    if estimate_cost_usd(model, {"input_tokens": 1}) is None:
        raise ConfigError(f"budget_usd needs a model with a known price; {model!r} has none "
                          "(use a model in the price table, or no budget_usd)")


def _run_attempts(task: Dict[str, Any], opts: Dict[str, Any], out: str, ctl: _Control) -> BatchResult:
    """A task with ``"attempts": N``: ``tooloop.attempts`` in its workspace (default: the current folder), each
    attempt's agent counting in the batch's ledger and passing its gate; ``batch.cancel()`` stops them all."""
    from .attempts import Attempts

    tid: str = task["id"]
    started = time.monotonic()
    stop = ctl.stopping()
    if stop is not None:
        return BatchResult(tid, stop)
    kwargs = _task_options(opts, task, os.path.join(out, tid + ".jsonl"))
    kwargs.pop("session", None)   # each attempt is a fresh conversation in its own copy
    workspace = kwargs.pop("workspace", None) or os.getcwd()
    try:
        att = Attempts(task["input"], task["attempts"], workspace=workspace, **kwargs)
    except Exception as e:
        return BatchResult(tid, "error", error=f"{type(e).__name__}: {e}", seconds=time.monotonic() - started)

    def prepare(agent: Agent) -> None:
        agent._core.set_ledger(ctl.ledger)
        agent._core.set_gate(ctl.gate_for(tid))

    att._prepare = prepare
    att._release = lambda agent: agent._core.set_gate(None)
    with ctl.lock:
        ctl.agents[tid] = att  # type: ignore[assignment]  # cancel() is all the batch asks of it
    try:
        if ctl.stopping() is not None:
            att.cancel()
        res = att.run()
    except Exception as e:
        return BatchResult(tid, "error", error=f"{type(e).__name__}: {e}", seconds=time.monotonic() - started)
    finally:
        with ctl.lock:
            ctl.agents.pop(tid, None)
    if res.ok:
        status, error = "ok", None
    else:
        status = ctl.stopping() or ("cancelled" if res.cancelled else "error")
        error = None if status == "budget" else "no attempt verified"
    winner = res.attempts[res.winner - 1] if res.winner is not None else None
    return BatchResult(tid, status, text=res.text, stop_reason=winner.stop_reason if winner else None,
                       turns=sum(a.turns for a in res.attempts), usage=res.usage, cost_usd=res.usage.cost_usd,
                       error=error, seconds=time.monotonic() - started, attempts=res.to_dict())


def _run_task(task: Dict[str, Any], opts: Dict[str, Any], out: str, ctl: _Control,
              check: Optional[Callable[[Dict[str, Any], BatchResult], Any]], db: Optional[str] = None) -> BatchResult:
    if task.get("attempts") is not None:
        res = _run_attempts(task, opts, out, ctl)
        if check is not None and res.ok:
            try:
                res = BatchResult(**{**{k: getattr(res, k) for k in BatchResult._fields}, "check": check(task, res)})
            except Exception as e:
                res = BatchResult(**{**{k: getattr(res, k) for k in BatchResult._fields}, "status": "error",
                                     "error": f"check failed: {type(e).__name__}: {e}"})
        return res
    tid: str = task["id"]
    session = _session_of(out, tid, db)
    started = time.monotonic()
    stop = ctl.stopping()
    if stop is not None:
        return BatchResult(tid, stop, session=_existing(session, db))
    try:
        agent = Agent(**_task_options(opts, task, session))
    except Exception as e:
        return BatchResult(tid, "error", session=_existing(session, db),
                           error=f"{type(e).__name__}: {e}", seconds=time.monotonic() - started)
    agent._core.set_ledger(ctl.ledger)
    agent._core.set_gate(ctl.gate_for(tid))
    with ctl.lock:
        ctl.agents[tid] = agent
    status, error, text, stop_reason, output = "ok", None, "", None, None
    try:
        stop = ctl.stopping()
        if stop is not None:
            # Stopped between building the agent and registering it: its cancel would have been missed.
            raise Cancelled("the batch stopped before this task began")
        history = agent.history
        done = _finished_from_history(history) if history else None
        if done is not None:
            text, stop_reason = _text_of(done), done.get("stop_reason")
        else:
            started_before = any(e.get("role") == "user" for e in history)
            from .events import RunResult

            result = RunResult._from(agent._core.run(None if started_before else task["input"]))
            text, stop_reason = result.text, result.stop_reason
            output = getattr(result, "output", None)
            if result.max_turns_reached:
                status = "max_turns"
            elif stop_reason == "budget":
                status = "budget"
    except Cancelled as e:
        status = ctl.stopping() or "cancelled"
        error = None if status == "budget" else str(e)
    except MaxTurnsExceeded as e:
        status, error = "max_turns", str(e)
    except Exception as e:
        status, error = "error", f"{type(e).__name__}: {e}"
    finally:
        with ctl.lock:
            ctl.agents.pop(tid, None)
    try:
        usage = agent.usage
        cost = agent.cost_usd
        turns = sum(1 for e in agent.history if e.get("role") == "assistant" and e.get("status") == "complete")
    finally:
        agent._core.set_gate(None)  # the gate holds the agent's core: no cycle left behind
        agent.close()
    res = BatchResult(tid, status, text=text, output=output, stop_reason=stop_reason, turns=turns, usage=usage,
                      cost_usd=cost, session=session, error=error, seconds=time.monotonic() - started)
    if check is not None and status == "ok":
        try:
            verdict = check(task, res)
        except Exception as e:
            verdict = None
            status, error = "error", f"check failed: {type(e).__name__}: {e}"
        res = BatchResult(tid, status, text=text, output=output, stop_reason=stop_reason, turns=turns, usage=usage,
                          cost_usd=cost, session=session, error=error, seconds=res.seconds, check=verdict)
    return res


# -- progress ----------------------------------------------------------------------------------------------------

class _Progress:
    """Done / failed / running, tokens, cost, elapsed and remaining time: one redrawn line on a terminal, a
    plain line per finished task otherwise."""

    def __init__(self, total: int, skipped: int, stream: Optional[TextIO]) -> None:
        self.total, self.skipped = total, skipped
        self.stream = stream
        self.tty = bool(stream is not None and getattr(stream, "isatty", lambda: False)())
        self.started = time.monotonic()
        self.done = self.failed = self.tokens = 0
        self.cost = 0.0
        self.last_draw = 0.0

    def line(self, running: int) -> str:
        elapsed = time.monotonic() - self.started
        finished = self.done + self.failed
        left = self.total - self.skipped - finished
        eta = f" · ~{_clock(elapsed / finished * left)} left" if finished and left > 0 else ""
        return (f"{self.skipped + finished}/{self.total} done · {self.failed} failed · {running} running · "
                f"{_tokens(self.tokens)} tokens · ${self.cost:.4f} · {_clock(elapsed)}{eta}")

    def task(self, r: BatchResult, running: int) -> None:
        if r.ok:
            self.done += 1
        else:
            self.failed += 1
        self.tokens += r.usage.total_tokens
        self.cost += r.cost_usd or 0.0
        if self.stream is None:
            return
        if self.tty:
            self.draw(running, force=True)
        else:
            why = f" ({r.error})" if r.error else ""
            self.stream.write(f"[{self.skipped + self.done + self.failed}/{self.total}] {r.id} {r.status} "
                              f"{r.turns} turns {r.seconds:.1f}s{why}\n")
            self.stream.flush()

    def draw(self, running: int, force: bool = False) -> None:
        if self.stream is None or not self.tty:
            return
        now = time.monotonic()
        if not force and now - self.last_draw < 0.2:
            return
        self.last_draw = now
        self.stream.write("\r\x1b[K" + self.line(running))
        self.stream.flush()

    def end(self) -> None:
        if self.stream is None:
            return
        if self.tty:
            self.stream.write("\r\x1b[K" + self.line(0) + "\n")
        else:
            self.stream.write(self.line(0) + "\n")
        self.stream.flush()


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def _tokens(n: int) -> str:
    return f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.1f}k" if n >= 1e3 else str(n)


# -- the batch ---------------------------------------------------------------------------------------------------

class Batch:
    """A batch of tasks, run by ``run()`` and cancellable from any thread with ``cancel()`` (see
    ``tooloop.batch.run`` for the arguments)."""

    def __init__(self, tasks: Iterable[Dict[str, Any]], options: Optional[Dict[str, Any]] = None, *,
                 out: str | os.PathLike[str] = "runs/", concurrency: int = 8, engine: str = "threads",
                 address: Optional[str] = None, budget_usd: Optional[float] = None,
                 check: Optional[Callable[[Dict[str, Any], BatchResult], Any]] = None,
                 progress: Any = True, requests_per_minute: Optional[float] = None,
                 tokens_per_minute: Optional[float] = None, agents_per_worker: int = 8,
                 session_db: Any = None) -> None:
        self.tasks = _check_tasks(tasks)
        self.session_db = _check_session_db(session_db, options, os.fspath(out))
        self._raw_options = options
        self.options = _check_options(options, resolve=engine != "ray")
        self._limits: Dict[str, Optional[float]] = {"requests_per_minute": requests_per_minute,
                                                    "tokens_per_minute": tokens_per_minute}
        self._record_results = True
        self._skip_recorded = True
        if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
            raise ConfigError(f"concurrency must be an integer >= 1, got {concurrency!r}")
        if engine not in ("threads", "ray"):
            raise ConfigError(f"engine must be 'threads' or 'ray', got {engine!r}")
        if budget_usd is not None and (not isinstance(budget_usd, (int, float)) or budget_usd < 0):
            raise ConfigError(f"budget_usd must be a number >= 0, got {budget_usd!r}")
        _check_budget_model(budget_usd, options)
        for name, v in (("requests_per_minute", requests_per_minute), ("tokens_per_minute", tokens_per_minute)):
            if v is not None and (not isinstance(v, (int, float)) or v <= 0):
                raise ConfigError(f"{name} must be a number > 0, got {v!r}")
        if not isinstance(agents_per_worker, int) or agents_per_worker < 1:
            raise ConfigError(f"agents_per_worker must be an integer >= 1, got {agents_per_worker!r}")
        self.out = os.fspath(out)
        self.concurrency = concurrency
        self.engine = engine
        self.address = address
        self.budget_usd = float(budget_usd) if budget_usd is not None else None
        self.check = check
        self.progress = progress
        self.agents_per_worker = agents_per_worker
        self._ctl = _Control(self.budget_usd, requests_per_minute, tokens_per_minute)
        self._write_lock = threading.Lock()

    def cancel(self) -> None:
        """Stop the batch (any thread): every running agent is cancelled (within the library's 200 ms), no
        task starts, and ``run()`` returns with those tasks ``"cancelled"``."""
        self._ctl.cancel()

    @property
    def spent_usd(self) -> float:
        """What this batch's requests cost so far (its agents', their child agents' and compaction summaries'),
        as the spend ledger counted them."""
        return self._ctl.spent

    def _record(self, r: BatchResult) -> None:
        if not self._record_results:
            return
        line = (json.dumps(r.to_dict(), ensure_ascii=False) + "\n").encode("utf-8")
        with self._write_lock:
            # Never through a link: run() refused one at the start; O_NOFOLLOW holds if one appears later.
            fd = os.open(os.path.join(self.out, RESULTS_FILE),
                         os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)

    def _progress_stream(self) -> Optional[TextIO]:
        if self.progress is True:
            return sys.stderr
        if not self.progress:
            return None
        return self.progress  # type: ignore[no-any-return]

    def run(self) -> List[BatchResult]:
        """Run the batch; the results in the order of the tasks. Ctrl+C cancels every agent, records what
        finished, and raises KeyboardInterrupt."""
        os.makedirs(self.out, mode=0o700, exist_ok=True)
        results_path = os.path.join(self.out, RESULTS_FILE)
        if self._record_results and os.path.islink(results_path):
            raise ConfigError(f"{results_path} is a symbolic link: results are never written through one "
                              "(remove it, or choose another out folder)")
        previous = load_results(self.out) if self._skip_recorded else {}
        results: Dict[str, BatchResult] = {}
        pending: List[Dict[str, Any]] = []
        for t in self.tasks:
            prev = previous.get(t["id"])
            if prev is not None and prev.ok:
                results[t["id"]] = prev
            else:
                pending.append(t)
        prog = _Progress(len(self.tasks), len(results), self._progress_stream())
        try:
            if self.engine == "threads":
                self._run_threads(pending, results, prog)
            else:
                self._run_elsewhere(pending, results, prog)
        finally:
            prog.end()
        return [results.get(t["id"]) or BatchResult(t["id"], self._ctl.stopping() or "cancelled")
                for t in self.tasks]

    def _run_elsewhere(self, pending: List[Dict[str, Any]], results: Dict[str, BatchResult],
                       prog: _Progress) -> None:
        """An engine other than threads: ``tooloop.batch.Batch`` provides them."""
        raise ConfigError(f"engine {self.engine!r} is not available here; use tooloop.batch")

    def _run_threads(self, pending: List[Dict[str, Any]], results: Dict[str, BatchResult], prog: _Progress) -> None:
        import queue

        todo: "queue.Queue[Dict[str, Any]]" = queue.Queue()
        for t in pending:
            todo.put(t)
        finished: "queue.Queue[Tuple[Dict[str, Any], BatchResult]]" = queue.Queue()
        ctl = self._ctl

        def worker() -> None:
            while True:
                try:
                    task = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    r = _run_task(task, self.options, self.out, ctl, self.check, self.session_db)
                except BaseException as e:  # never lose a task's outcome to a worker's death
                    r = BatchResult(task["id"], "error", error=f"{type(e).__name__}: {e}")
                finished.put((task, r))

        threads = [threading.Thread(target=worker, name=f"tooloop-batch-{i}", daemon=True)
                   for i in range(min(self.concurrency, len(pending)))]
        for th in threads:
            th.start()
        left = len(pending)
        try:
            while left:
                try:
                    task, r = finished.get(timeout=0.05)
                except queue.Empty:
                    prog.draw(len(ctl.agents))
                    continue
                left -= 1
                results[task["id"]] = r
                if r.status != "cancelled" or r.seconds > 0 or r.session:
                    self._record(r)
                prog.task(r, len(ctl.agents))
        except BaseException:
            # Ctrl+C (or any exception here): stop every agent, keep what finished, then let it propagate.
            ctl.cancel()
            while any(th.is_alive() for th in threads) or not finished.empty():
                try:
                    task, r = finished.get(timeout=0.05)
                except queue.Empty:
                    continue
                results[task["id"]] = r
                if r.seconds > 0 or r.session:
                    self._record(r)
            raise
        for th in threads:
            th.join()
