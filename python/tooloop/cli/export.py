"""`tooloop export SESSION [--format atif|json] [-o FILE]`: a session as a trajectory file for evaluation
harnesses.

``atif`` (the default) is the Agent Trajectory Interchange Format v1.4 of the Harbor project (RFC 0001):
``{"schema_version": "ATIF-v1.4", "session_id", "agent": {"name": "tooloop", "version", "model_name"},
"steps": [...], "final_metrics": {...}}``. Each user message is a ``user`` step; each model turn an ``agent``
step with ``message`` (its text), ``reasoning_content`` (its thinking), ``tool_calls`` (``tool_call_id``,
``function_name``, ``arguments``), ``observation.results`` (each call's result: ``source_call_id``,
``content``; a subagent's turns and model in ``extra``) and ``metrics`` (``prompt_tokens`` counting cached
ones, ``completion_tokens``, ``cached_tokens``, ``cost_usd`` from tooloop's price table, cache writes in
``extra``); notes such as compactions and max_turns stops are ``system`` steps. ``json`` is tooloop's own
entries as the session holds them (``{"session_id", "entries": [...]}``).

The file ``-o`` names is written owner-only (0600) and atomically; a symlink found there is replaced, never
written through.

Must never: write to the session file, or lose a tool call's result (an unanswered call gets none, as in
the session).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional

if TYPE_CHECKING:
    from tooloop.types import HistoryEntry, UsageDict

#: A JSON object of the trajectory file being written.
JsonObject = Dict[str, Any]

SCHEMA_VERSION = "ATIF-v1.4"


def _text(content: Any, kind: str = "text", key: str = "text") -> str:
    if isinstance(content, str):
        return content if kind == "text" else ""
    if not isinstance(content, list):
        return ""
    return "".join(str(b.get(key, "")) for b in content if isinstance(b, dict) and b.get("type") == kind)


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for b in content:
            if isinstance(b, dict) and b.get("type") == "text":
                parts.append(str(b.get("text", "")))
            elif isinstance(b, dict):
                parts.append(f"[{b.get('type', 'block')}]")
        return "\n".join(parts)
    return json.dumps(content)


def _timestamp(ms: Any) -> Optional[str]:
    if not isinstance(ms, int):
        return None
    t = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _priced(usage: UsageDict, model: object) -> HistoryEntry:
    """A stand-in entry carrying a subagent's usage and model, for `_metrics`."""
    entry: HistoryEntry = {"id": "", "role": "tool", "content": [], "status": "complete", "created_at": 0,
                           "usage": usage}
    if isinstance(model, str):
        entry["model"] = model
    return entry


def _metrics(entry: HistoryEntry) -> Optional[JsonObject]:
    usage = entry.get("usage")
    if not isinstance(usage, dict):
        return None
    import tooloop

    read = int(usage.get("cache_read_input_tokens") or 0)
    write = int(usage.get("cache_creation_input_tokens") or 0)
    m: JsonObject = {"prompt_tokens": int(usage.get("input_tokens") or 0) + read + write,
                         "completion_tokens": int(usage.get("output_tokens") or 0), "cached_tokens": read}
    model = entry.get("model")
    cost = tooloop.estimate_cost_usd(str(model), usage) if model else None
    if cost is not None:
        m["cost_usd"] = cost
    if write:
        m["extra"] = {"cache_creation_input_tokens": write}
    return m


def atif(session_id: str, entries: List[HistoryEntry], version: str) -> JsonObject:
    """The ATIF trajectory of a session's entries."""
    steps: List[JsonObject] = []
    by_call: Dict[str, JsonObject] = {}
    models: List[str] = []
    totals = {"prompt": 0, "completion": 0, "cached": 0}
    cost: Optional[float] = None

    def add(step: JsonObject, entry: HistoryEntry) -> JsonObject:
        step = {"step_id": len(steps) + 1, **({"timestamp": ts} if (ts := _timestamp(entry.get("created_at")))
                                             else {}), **step}
        steps.append(step)
        return step

    for e in entries:
        role = e.get("role")
        content = e.get("content")
        if role == "user":
            kinds = [b.get("type") for b in content if isinstance(b, dict)
                     and b.get("type") not in ("text", "tool_result")] if isinstance(content, list) else []
            step: JsonObject = {"source": "user", "message": _text(content)}
            if kinds:
                step["extra"] = {"attachments": kinds}
            add(step, e)
        elif role == "assistant":
            if e.get("status") == "streaming":
                continue
            step = {"source": "agent", "message": _text(content)}
            if e.get("model"):
                step["model_name"] = e["model"]
                if e["model"] not in models:
                    models.append(e["model"])
            thinking = _text(content, "thinking", "thinking")
            if thinking:
                step["reasoning_content"] = thinking
            calls = [b for b in content or [] if isinstance(b, dict) and b.get("type") == "tool_use"]
            if calls:
                step["tool_calls"] = [{"tool_call_id": c.get("id", ""), "function_name": c.get("name", ""),
                                       "arguments": c.get("input") if isinstance(c.get("input"), dict) else {}}
                                      for c in calls]
            metrics = _metrics(e)
            if metrics is not None:
                step["metrics"] = metrics
                totals["prompt"] += metrics["prompt_tokens"]
                totals["completion"] += metrics["completion_tokens"]
                totals["cached"] += metrics["cached_tokens"]
                if "cost_usd" in metrics:
                    cost = (cost or 0.0) + metrics["cost_usd"]
            extra: JsonObject = {}
            for k in ("stop_reason", "duration_ms", "error"):
                if e.get(k) is not None:
                    extra[k] = e[k]
            if extra:
                step["extra"] = extra
            added = add(step, e)
            for c in calls:
                by_call[str(c.get("id", ""))] = added
        elif role == "tool":
            for b in content or []:
                if not isinstance(b, dict) or b.get("type") != "tool_result":
                    continue
                target = by_call.get(str(b.get("tool_use_id", "")))
                if target is None:
                    continue
                result: JsonObject = {"source_call_id": b.get("tool_use_id"),
                                          "content": _result_text(b.get("content"))}
                rextra: JsonObject = {}
                if b.get("is_error"):
                    rextra["is_error"] = True
                sub = (e.get("meta") or {}).get("subagent")
                if isinstance(sub, dict):
                    rextra["subagent"] = {k: sub.get(k) for k in ("agent_type", "model", "turns")}
                    usage = e.get("usage")
                    m = _metrics(_priced(usage, sub.get("model"))) if isinstance(usage, dict) else None
                    if m is not None:
                        rextra["subagent"]["metrics"] = m
                        totals["prompt"] += m["prompt_tokens"]
                        totals["completion"] += m["completion_tokens"]
                        totals["cached"] += m["cached_tokens"]
                        if "cost_usd" in m:
                            cost = (cost or 0.0) + m["cost_usd"]
                if rextra:
                    result["extra"] = rextra
                target.setdefault("observation", {"results": []})["results"].append(result)
        elif role == "system":
            add({"source": "system", "message": _result_text(content)}, e)
    final: JsonObject = {"total_prompt_tokens": totals["prompt"], "total_completion_tokens": totals["completion"],
                             "total_cached_tokens": totals["cached"], "total_steps": len(steps)}
    if cost is not None:
        final["total_cost_usd"] = cost
    agent: JsonObject = {"name": "tooloop", "version": version}
    if models:
        agent["model_name"] = models[0]
    return {"schema_version": SCHEMA_VERSION, "session_id": session_id, "agent": agent, "steps": steps,
            "final_metrics": final}


def main(argv: List[str]) -> int:
    from . import paths
    from .args import version

    p = argparse.ArgumentParser(prog="tooloop export", description="Write a session as a trajectory file.")
    p.add_argument("session", help="a session id (a unique prefix is enough) or a session file")
    p.add_argument("--format", choices=["atif", "json"], default="atif",
                   help="atif: the Agent Trajectory Interchange Format v1.4 (default); json: tooloop's entries")
    p.add_argument("--output", "-o", metavar="FILE", help="write here instead of stdout")
    p.add_argument("--workspace", "-w", metavar="DIR", help="the workspace whose sessions to look in")
    args = p.parse_args(argv)
    import tooloop

    workspace = Path(args.workspace or os.getcwd()).expanduser().resolve()
    try:
        path = paths.find_session(args.session, workspace)
    except paths.SessionNotFound as e:
        print(f"tooloop: {e}", file=sys.stderr)
        return 2
    try:
        info = tooloop.load_session(path)
    except tooloop.Error as e:
        print(f"tooloop: {e}", file=sys.stderr)
        return 1
    doc = (atif(info.id, info.entries, version()) if args.format == "atif"
           else {"session_id": info.id, "entries": info.entries})
    text = json.dumps(doc, ensure_ascii=False, indent=2) + "\n"
    if args.output:
        from .private_files import write_private

        try:
            write_private(args.output, text)   # 0600, replacing (never following) a link planted there
        except OSError as e:
            print(f"tooloop: cannot write {args.output}: {e.strerror or e}", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(text)
    return 0
