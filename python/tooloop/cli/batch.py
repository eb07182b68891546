"""`tooloop batch TASKS.jsonl`: many coding-agent tasks at once through ``tooloop.batch`` (threads or Ray).

Each line of the tasks file is a JSON object ``{"id": ..., "input": ... (or "prompt"), "workspace": ...,
"options": {...}, "metadata": ...}``. A line may narrow what the command line allowed, never widen it: its
``options`` may set only LINE_OPTIONS (numeric limits no higher than the command line's), and anything else
(permission, sandbox, network, base_url, keys, hooks, MCP servers, env pass-through, tools to import) is
refused with an error naming the key and the line.
Tasks run with bash in the sandbox and nobody to ask, so how tool calls are allowed must be said up front:
``--yes`` (every call allowed; bash confined to the task's workspace), ``--read-only`` (only tools that
change nothing), or permission rules in the settings files (``{"permissions": {"allow": [...]}}``: calls
the rules allow run, tools that change nothing run, the rest are refused). The settings' ``deny`` rules (and
``ask`` rules: no one can be asked) refuse their calls in every mode. Progress is one redrawn line on a
terminal, a line per finished task otherwise.

Exit codes: 0 every task ok, 1 some task did not finish ok, 2 usage or configuration error, 130 interrupted.
Must never: ask a question (there is no one to answer it), import the terminal libraries, or let a task line
widen what the command line allowed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Union

from .args import _positive_int, add_model_flags

if TYPE_CHECKING:
    import tooloop

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

#: The tools a --read-only batch may use: those that change nothing.
READ_ONLY_TOOLS = frozenset({"read_file", "grep", "glob", "todo_write", "bash_output", "skill", "task"})

DESCRIPTION = """\
Run many agent tasks at once. TASKS is a JSONL file: one {"id": "...", "input": "...", "workspace": "..."}
per line (workspace optional; relative paths are taken from the current folder; "options" may narrow a task
with model, system, max_turns, max_cost_usd, builtin_tools, temperature, output_schema, never widen it;
"attempts": N runs N isolated attempts, at most --attempts). Each task's session goes to
OUT/<id>.jsonl and its outcome to OUT/results.jsonl; running the same command again skips the tasks that
finished and resumes the others where they stopped (no tool call that completed runs again)."""


def read_only_permission(call: tooloop.ToolCall) -> Union[bool, str]:
    """The permission of a --read-only batch (a module-level function, so Ray workers can import it)."""
    name = call.name
    if name in READ_ONLY_TOOLS:
        return True
    return f"{name} is not allowed: this batch is read-only (allowed: {', '.join(sorted(READ_ONLY_TOOLS))})"


def rules_permission(call: tooloop.ToolCall) -> Union[bool, str]:
    """The permission of a batch run by the settings' rules: a call no rule allowed runs only when its tool
    changes nothing (a module-level function, so Ray workers can import it)."""
    name = call.name
    if name in READ_ONLY_TOOLS:
        return True
    return (f"{name} is not allowed: this batch runs by the settings' permission rules and none allows this call "
            "(no one can be asked)")


class ProtectedWrites:
    """The ``before_tool`` hook of a batch task: a file tool's write to a protected path of the task's
    workspace (``permissions.Protected``: .tooloop/, .claude/, .mcp.json, .git/hooks/, .git/config, the user's
    config folder) is refused, since no one can approve it. A hook, not the permission callable: the
    settings' allow rules go to the library, which runs what they allow without asking the callable. A
    module-level class, so Ray workers can import it."""

    def __init__(self, workspace: str) -> None:
        self.workspace = workspace

    def __call__(self, call: tooloop.ToolCall) -> Optional[str]:
        from .permissions import PROTECTED_REASON, Protected, call_parts

        name, inp, _ = call_parts(call)
        what = Protected(self.workspace).what(name, inp)
        return None if what is None else PROTECTED_REASON.format(what=what, name=name)


def settings_rules(workspace: Path) -> Dict[str, List[str]]:
    """The permission rules of the settings files for ``workspace`` (the user's, the project's approved ones,
    the project-local ones), ``ask`` rules folded into ``deny``: nobody is there to answer. Raises
    ConfigProblem for a broken file."""
    from . import settings

    loaded = settings.load(workspace)
    for problem in loaded.problems:
        _say(problem)
    return {"allow": list(loaded.allow), "deny": list(loaded.deny) + list(loaded.ask)}


def _positive_float(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not x > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return x


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tooloop batch", description=DESCRIPTION,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("tasks", help="the tasks file (JSONL); - reads it from stdin")
    p.add_argument("--out", default="runs", help="folder of the sessions and results.jsonl (default: runs)")
    p.add_argument("--concurrency", "-j", type=_positive_int, default=8, metavar="N",
                   help="agents running at once (default: 8)")
    p.add_argument("--engine", choices=["threads", "ray"], default="threads",
                   help="threads in this process (default), or Ray (pip install \"tooloop[ray]\")")
    p.add_argument("--address", help="the Ray cluster to use (\"auto\", \"ray://host:10001\"; default: a local "
                   "Ray started for the batch)")
    p.add_argument("--max-budget-usd", type=_positive_float, metavar="X",
                   help="stop sending requests once the batch's spend would pass X dollars")
    p.add_argument("--requests-per-minute", type=_positive_float, metavar="N",
                   help="at most N model requests a minute, shared by every agent")
    p.add_argument("--tokens-per-minute", type=_positive_float, metavar="N",
                   help="at most about N prompt tokens a minute, shared by every agent")
    p.add_argument("--attempts", type=_positive_int, default=1, metavar="N",
                   help="N attempts at each task, each in its own copy of its workspace; the first verified one "
                   "(--check passes, else its own tests passed) is applied, the others discarded; a line's "
                   "\"attempts\" may lower it (default: 1, a plain run)")
    p.add_argument("--check", metavar="CMD",
                   help="every task's check to finish against (the agent option check=), e.g. 'pytest -q'")
    add_model_flags(p)
    p.add_argument("--base-url", help="API endpoint")
    p.add_argument("--max-turns", type=_positive_int, metavar="N", help="most model requests per task (default: 50)")
    p.add_argument("--session-db", metavar="PATH",
                   help="keep every task's session in this SQLite database as PATH#<id> instead of OUT/<id>.jsonl "
                   "(also $TOOLOOP_SESSION_DB, or \"sessionDb\" in the user's settings.json)")
    p.add_argument("--sandbox", choices=["workspace-write", "read-only"], type=str.lower,
                   help="bash confinement (default: workspace-write; read-only with --read-only)")
    p.add_argument("--allow-config-edits", action="store_true",
                   help="let write_file and edit_file change .tooloop/, .claude/, .mcp.json, .git/hooks/ and "
                   ".git/config in the task workspaces (refused by default: no one can approve such a write)")
    perm = p.add_mutually_exclusive_group()
    perm.add_argument("--yes", "-y", action="store_true", help="allow every tool call (bash stays sandboxed)")
    perm.add_argument("--read-only", action="store_true", help="allow only tools that change nothing")
    return p


def _say(message: str) -> None:
    print(f"tooloop batch: {message}", file=sys.stderr, flush=True)


#: The fields of a task line. ``metadata`` is the line's own (for a harness reading results.jsonl); nothing
#: reads it.
LINE_FIELDS = ("id", "input", "prompt", "workspace", "options", "metadata", "attempts")

#: The built-in tools a line's ``builtin_tools`` may pick from (the command line enables them all).
BUILTIN_TOOLS = ("bash", "read_file", "write_file", "edit_file", "grep", "glob", "web_fetch", "bash_output",
                 "bash_kill")

#: The options a task line may set: each can only narrow what the command line allowed (an allow-list, so
#: an option the library adds later is refused until it is judged here). Everything else a line might set
#: (permission, sandbox, network, base_url, keys, headers, hooks, MCP servers, env pass-through, tools to
#: import, session) is the command line's alone.
LINE_OPTIONS = ("model", "system", "max_turns", "max_cost_usd", "builtin_tools", "temperature", "output_schema")


class Limits:
    """What the command line set that a task line may only lower."""

    def __init__(self, max_turns: int = 50, max_cost_usd: Optional[float] = None, attempts: int = 1) -> None:
        self.max_turns = max_turns
        self.max_cost_usd = max_cost_usd
        #: --attempts: the most (and the default) attempts of a task; a line's "attempts" may lower it.
        self.attempts = attempts


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and v not in (float("inf"),)


def check_line_options(options: Any, where: str, limits: Limits) -> Dict[str, Any]:
    """A task line's ``options`` when every key narrows what the command line allowed; otherwise a ValueError
    that names the key and `where` (``FILE:LINE``)."""
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise ValueError(f"{where}: \"options\" must be a JSON object")
    for key, v in options.items():
        if key not in LINE_OPTIONS:
            raise ValueError(
                f"{where}: a task line may not set options.{key}: a line may only narrow what the command line "
                f"allowed, and {key} is the command line's (a line may set: {', '.join(LINE_OPTIONS)})")
        bad = None
        if key in ("model", "system") and not isinstance(v, str):
            bad = "a string"
        elif key == "max_turns" and not (isinstance(v, int) and not isinstance(v, bool)
                                         and 1 <= v <= limits.max_turns):
            bad = f"a whole number from 1 to the command line's --max-turns ({limits.max_turns})"
        elif key == "max_cost_usd" and not (_number(v) and v >= 0 and (limits.max_cost_usd is None
                                                                     or v <= limits.max_cost_usd)):
            bad = ("a number of dollars >= 0" + (f" and at most the command line's --max-budget-usd "
                                                 f"({limits.max_cost_usd:g})" if limits.max_cost_usd is not None
                                                 else ""))
        elif key == "builtin_tools" and not (v is False or (isinstance(v, list)
                                                            and all(t in BUILTIN_TOOLS for t in v))):
            bad = f"false or a list of built-in tools ({', '.join(BUILTIN_TOOLS)})"
        elif key == "temperature" and not (_number(v) and 0 <= v <= 2):
            bad = "a number from 0 to 2"
        elif key == "output_schema" and not isinstance(v, dict):
            bad = "a JSON Schema object"
        if bad is not None:
            raise ValueError(f"{where}: options.{key} must be {bad}, got {json.dumps(v)[:80]}")
    return dict(options)


def _too_wide_workspace(ws: Path) -> bool:
    """Whether `ws` is the filesystem root, the home folder or a folder above it: with bash writing inside
    its workspace, such a line would give the agent the user's whole home."""
    try:
        home = Path.home().resolve()
        real = ws.expanduser().resolve()
    except (OSError, RuntimeError):
        return True
    return real == Path(real.anchor) or real == home or real in home.parents


def load_tasks(path: str, limits: Optional[Limits] = None) -> List[Dict[str, Any]]:
    """The tasks of a JSONL file (blank lines and lines starting with # skipped); ``prompt`` is accepted for
    ``input``. A bad line is a ValueError naming its number, also a line that sets a field or option it may
    not (LINE_FIELDS, LINE_OPTIONS: a line narrows what the command line allowed, never widens it)."""
    limits = limits or Limits()
    text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    tasks: List[Dict[str, Any]] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            task = json.loads(line)
        except ValueError as e:
            raise ValueError(f"{path}:{n}: not JSON ({e})") from None
        if not isinstance(task, dict):
            raise ValueError(f"{path}:{n}: a task is a JSON object")
        for key in task:
            if key not in LINE_FIELDS:
                raise ValueError(f"{path}:{n}: unknown field {key!r} in a task line (fields: "
                                 f"{', '.join(LINE_FIELDS)}; agent options go in \"options\")")
        task["options"] = check_line_options(task.get("options"), f"{path}:{n}", limits)
        ws = task.get("workspace")
        if ws is not None and (not isinstance(ws, str) or not ws or _too_wide_workspace(Path(ws))):
            raise ValueError(f"{path}:{n}: \"workspace\" must name a project folder, not /, your home folder "
                             f"or a folder above it (bash may write anywhere in it), got {json.dumps(ws)[:80]}")
        n_attempts = task.get("attempts")
        if n_attempts is not None and not (isinstance(n_attempts, int) and not isinstance(n_attempts, bool)
                                           and 1 <= n_attempts <= limits.attempts):
            raise ValueError(f"{path}:{n}: \"attempts\" must be a whole number from 1 to the command line's "
                             f"--attempts ({limits.attempts}), got {json.dumps(n_attempts)[:80]}")
        if limits.attempts > 1 and n_attempts is None:
            task["attempts"] = limits.attempts
        if "input" not in task and "prompt" in task:
            task["input"] = task.pop("prompt")
        if "id" not in task:
            task["id"] = f"task-{n}"
        tasks.append(task)
    return tasks


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    from .config import ConfigProblem

    try:
        rules = settings_rules(Path.cwd())
    except ConfigProblem as e:
        _say(str(e))
        return EXIT_USAGE
    if not (args.yes or args.read_only or rules["allow"]):
        _say("tasks run with no one to ask: say how tool calls are allowed with --yes (all allowed, bash in "
             "the sandbox), --read-only (only tools that change nothing), or allow rules in the settings "
             "(.tooloop/settings.json: {\"permissions\": {\"allow\": [...]}})")
        return EXIT_USAGE
    if args.address and args.engine != "ray":
        _say("--address is for --engine ray")
        return EXIT_USAGE
    try:
        tasks = load_tasks(args.tasks, Limits(args.max_turns or 50, args.max_budget_usd, args.attempts))
    except (OSError, ValueError, UnicodeDecodeError) as e:
        _say(str(e))
        return EXIT_USAGE
    if not tasks:
        _say(f"no tasks in {args.tasks}")
        return EXIT_USAGE

    import tooloop
    import tooloop.batch

    from .prompt import system_prompt

    mode = "read-only" if args.read_only else "auto"
    options: Dict[str, Any] = {
        "model": args.model or os.environ.get("TOOLOOP_MODEL") or "claude-sonnet-4-6",
        "provider": args.provider or os.environ.get("TOOLOOP_PROVIDER") or "anthropic",
        "max_turns": args.max_turns or 50,
        "builtin_tools": True,
        "progress_guard": True,  # the coding agent's guards, off in the library by default
    }
    if args.base_url:
        options["base_url"] = args.base_url
    if args.check:
        options["check"] = args.check
    from .permissions import protection_options
    options.update(protection_options(args.allow_config_edits, Path.cwd()))
    if args.read_only:
        options["permission"] = read_only_permission
        if rules["deny"]:
            options["permission_rules"] = {"deny": rules["deny"]}
    elif args.yes:
        if rules["deny"]:
            options["permission_rules"] = {"deny": rules["deny"]}
    else:
        options["permission"] = rules_permission
        options["permission_rules"] = rules
    from .session_db import configured_db

    db = configured_db(args)
    session_db = str(db) if db is not None else None
    sandbox = args.sandbox or ("read-only" if args.read_only else "workspace-write")
    if tooloop.sandbox_support() is not None:
        options["sandbox"] = sandbox
    else:
        _say("this kernel cannot confine bash (no Landlock): bash runs unconfined in each task's workspace")
    try:  # the key, endpoint and model are checked once, not by every task
        tooloop.Agent(**{k: v for k, v in options.items() if k != "permission"}).close()
        if session_db:
            tooloop.batch.Batch([], options, out=args.out, session_db=session_db)
    except tooloop.Error as e:
        _say(" ".join(str(e).split()))
        return EXIT_USAGE
    cwd = Path.cwd()
    for t in tasks:
        ws = Path(os.path.expanduser(str(t.get("workspace") or cwd)))
        ws = ws if ws.is_absolute() else cwd / ws
        t["workspace"] = str(ws)
        own = dict(t.get("options") or {})
        own.setdefault("system", system_prompt(ws, mode))
        if not args.allow_config_edits:
            own["hooks"] = {"before_tool": ProtectedWrites(str(ws))}
        t["options"] = own
    try:
        results = tooloop.batch.run(
            tasks, options, out=args.out, concurrency=args.concurrency, engine=args.engine,
            address=args.address, budget_usd=args.max_budget_usd, progress=sys.stderr,
            requests_per_minute=args.requests_per_minute, tokens_per_minute=args.tokens_per_minute,
            session_db=session_db)
    except KeyboardInterrupt:
        _say(f"interrupted: what finished is in {os.path.join(args.out, 'results.jsonl')}; run the same command "
             "again to resume")
        return EXIT_INTERRUPTED
    except tooloop.Error as e:
        _say(" ".join(str(e).split()))
        return EXIT_USAGE
    failed = [r for r in results if not r.ok]
    if failed:
        counts: Dict[str, int] = {}
        for r in failed:
            counts[r.status] = counts.get(r.status, 0) + 1
        _say(f"{len(failed)} of {len(results)} tasks did not finish ("
             + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
             + "); run the same command again to resume them")
        return EXIT_FAILED
    return EXIT_OK
