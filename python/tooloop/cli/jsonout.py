"""`--output-format json|stream-json`: the run as data for programs (CI jobs, evaluation harnesses,
editors), with the field names of Claude Code's print mode so existing harnesses parse it.

- ``json``: one object at the end, ``{"type": "result", "subtype": "success" | "error_max_turns" |
  "error_budget" | "error", "is_error", "result" (the answer's text), "output" (the structured answer with
  --json-schema, else null), "stop_reason", "num_turns", "usage", "total_cost_usd", "session_id",
  "duration_ms"}`` (``"error"``: the message, on failures).
- ``stream-json``: one JSON object per line, flushed as it happens: first ``{"type": "system", "subtype":
  "init", "model", "tools", "workspace", "session_id", ...}``, then each library event (``{"type": "text",
  ...}``, ``tool_use``, ``tool_result``, ``turn``, ``usage``, ``subagent``, ...), then the result object.

Must never: write anything else to stdout (questions, notices and the one-line error go to stderr).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Dict, Optional, TextIO

from .runner import _cancel, _sigint_sets, one_line

if TYPE_CHECKING:
    from tooloop import Agent, AgentStream, Event, RunResult, Usage

    from .checkpoints import Checkpoints
    from .config import Settings
    from .media import Prompt

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130


def to_json(value: object) -> Any:
    """A library value (events, usage, results: records with ``_fields``) as plain JSON data."""
    fields = getattr(value, "_fields", None)
    if fields is not None and not isinstance(value, tuple):
        d: Dict[str, Any] = {}
        kind = getattr(value, "type", None)
        if isinstance(kind, str):
            d["type"] = kind
        for f in fields:
            d[f] = to_json(getattr(value, f))
        return d
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    dump = getattr(value, "model_dump", None)   # a pydantic model
    if callable(dump):
        return to_json(dump(mode="json"))
    import dataclasses
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_json(dataclasses.asdict(value))
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def usage_json(usage: Optional[Usage]) -> Dict[str, int]:
    names = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return {n: int(getattr(usage, n, 0) or 0) for n in names}


class JsonOutput:
    """Writes the lines of one run to ``out`` (stdout), each flushed."""

    def __init__(self, out: TextIO, stream: bool, session_id: str) -> None:
        self.out = out
        self.stream = stream
        self.session_id = session_id

    def line(self, obj: Dict[str, Any]) -> None:
        self.out.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")
        self.out.flush()

    def init(self, agent: Agent, settings: Settings, permission_mode: str) -> None:
        if self.stream:
            self.line({"type": "system", "subtype": "init", "session_id": self.session_id,
                       "model": settings.model, "provider": settings.provider, "tools": list(agent.tools),
                       "workspace": str(settings.workspace), "cwd": str(settings.workspace),
                       "permission_mode": permission_mode})

    def event(self, event: Event) -> None:
        if self.stream:
            d = to_json(event)
            if d.get("type") == "file_change":
                # The file's whole content before: for undo, not for a line of the stream.
                d.pop("before", None)
                d.pop("before_base64", None)
            d["session_id"] = self.session_id
            self.line(d)


def run_json(agent: Agent, task: Prompt, settings: Settings, abort: threading.Event,
             out: JsonOutput, checkpoints: Optional[Checkpoints] = None, budget: Optional[float] = None) -> int:
    """Run `task`, printing the events (stream-json) and the result object; the exit code."""
    import tooloop

    started = time.monotonic()
    before = agent.usage
    result: Optional[RunResult] = None
    error: Optional[BaseException] = None
    turns = 0
    stream: Optional[AgentStream] = None
    abort.clear()
    try:
        with _sigint_sets(abort):
            stream = agent.stream(task)
            for event in stream:
                if event.type == "done":
                    result = event.result
                    continue
                if event.type == "turn":
                    turns = max(turns, event.turn)
                if checkpoints is not None:
                    change = event.event if event.type == "subagent" else event
                    if change.type == "file_change":
                        checkpoints.record_change(change)
                out.event(event)
    except BaseException as exc:  # Ctrl+C included: it cancels the run, and the result object says so
        abort.set()
        if isinstance(exc, (KeyboardInterrupt, tooloop.Cancelled)):
            _cancel(agent, stream)
        elif not isinstance(exc, tooloop.Error):
            raise
        error = exc
    finally:
        abort.set()
    duration_ms = int((time.monotonic() - started) * 1000)
    if error is not None:
        from .runner import _sub
        usage = _sub(agent.usage, before)
        cancelled = isinstance(error, (KeyboardInterrupt, tooloop.Cancelled))
        message = "cancelled" if cancelled else one_line(error, settings)
        subtype = "error_max_turns" if isinstance(error, tooloop.MaxTurnsExceeded) else "error"
        output = getattr(error, "output", None) if isinstance(error, tooloop.OutputValidationError) else None
        print(f"tooloop: {message}", file=sys.stderr, flush=True)
        out.line({"type": "result", "subtype": subtype, "is_error": True, "result": "", "output": to_json(output),
                  "stop_reason": "cancelled" if cancelled else None, "num_turns": turns,
                  "usage": usage_json(usage), "total_cost_usd": usage.cost_usd, "session_id": out.session_id,
                  "duration_ms": duration_ms, "error": message})
        return EXIT_INTERRUPTED if cancelled else EXIT_FAILED
    if result is None:   # the stream ended without its done event: only when the library is broken
        out.line(error_result("the run ended without a result", out.session_id))
        return EXIT_FAILED
    stop = result.stop_reason or ("max_turns" if result.max_turns_reached else None)
    subtype = {"budget": "error_budget", "max_turns": "error_max_turns"}.get(stop or "", "success")
    from .evidence import guard_stop_failed, verdict_lines
    verdicts, unproven = verdict_lines(result)
    failed = (subtype != "success" or unproven or stop in ("max_tokens", "refusal", "check_failed")
              or (stop == "repetition" and guard_stop_failed(result)))
    if failed and subtype == "success":
        subtype = "error"
    for line in verdicts:
        print(f"tooloop: {line}", file=sys.stderr, flush=True)
    if failed and not unproven:
        from .runner import budget_line
        line = budget_line(budget) if stop == "budget" else f"the run stopped: {stop}"
        print(f"tooloop: {line}", file=sys.stderr, flush=True)
    out.line({"type": "result", "subtype": subtype, "is_error": failed, "result": result.text,
              "output": to_json(getattr(result, "output", None)), "stop_reason": stop,
              "num_turns": result.turns or turns, "usage": usage_json(result.usage),
              "total_cost_usd": result.cost_usd, "session_id": out.session_id, "duration_ms": duration_ms,
              "check": getattr(result, "check", None), "files_changed": list(getattr(result, "files_changed", [])),
              "commands_run": list(getattr(result, "commands_run", [])),
              "unverified": getattr(result, "unverified", None)})
    return EXIT_FAILED if failed else EXIT_OK


def error_result(message: str, session_id: str = "") -> Dict[str, Any]:
    """The result object of a run that could not start (a configuration problem)."""
    return {"type": "result", "subtype": "error", "is_error": True, "result": "", "output": None,
            "stop_reason": None, "num_turns": 0, "usage": usage_json(None), "total_cost_usd": None,
            "session_id": session_id, "duration_ms": 0, "error": message}


def load_schema(text: str) -> Dict[str, Any]:
    """`--json-schema`: inline JSON, or the path of a file holding it."""
    from pathlib import Path

    from .config import ConfigProblem

    source = text.strip()
    if not source.startswith("{"):
        path = Path(source).expanduser()
        try:
            source = path.read_text(encoding="utf-8")
        except OSError as e:
            raise ConfigProblem(f"--json-schema {text}: not inline JSON, and the file cannot be read "
                                f"({e.strerror or e})") from None
    try:
        schema = json.loads(source)
    except ValueError as e:
        raise ConfigProblem(f"--json-schema: not valid JSON ({e})") from None
    if not isinstance(schema, dict):
        raise ConfigProblem("--json-schema: must be a JSON Schema object such as {\"type\": \"object\", ...}")
    return schema
