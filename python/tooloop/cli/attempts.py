"""`tooloop --attempts N "task"`: N independent attempts through ``tooloop.attempts``, each in its own copy of
the workspace; the first verified one (``--check`` passed, else its own tests passed) is applied to the real
workspace as one change that ``/undo`` takes back (one checkpoint), the others are discarded.

What is shown: a line per attempt as it ends and a table at the end on stderr, the winner's answer on stdout;
in the JSON modes the result object carries ``attempts`` (turns, tokens, seconds, verdict and conversation of
each), ``winner`` and ``applied``. Every attempt's conversation is kept beside the start's session, in
``<session>.attempts/attempt-N.jsonl`` (read one with ``--resume PATH``): "no attempt verified" is a verdict a
person wants to read the reasons of. The folder is not a session of the workspace (``--continue`` and
``--list`` see the start's own session: the winner's conversation). Exit codes: 0 an attempt was verified and
applied, 1 none was ("no attempt verified"), 2 usage, 130 interrupted (every attempt stopped, the workspace
untouched).

Must never: ask a question (attempts run at once, with no one to answer: --yes is required), draw an
attempt's events on the terminal (they interleave), or write the real workspace other than through
``tooloop.attempts``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional

if TYPE_CHECKING:
    from tooloop.attempts import AttemptRecord, AttemptsResult

    from .checkpoints import Checkpoints
    from .config import Settings
    from .media import Prompt
    from .settings import LoadedSettings

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

NO_WINNER = "no attempt verified"

VERDICT_WORDS = {"check_passed": "check passed", "tests_passed": "tests passed", "unverified": "unverified",
                 "error": "error", "cancelled": "cancelled", "not_run": "not run"}


def usage_problem(args: argparse.Namespace, task: Optional[str]) -> Optional[str]:
    """Why --attempts cannot run with these flags (None: it can)."""
    if args.attempts is None:
        if args.concurrency != 1:
            return "--concurrency goes with --attempts N"
        return None
    if task is None:
        return "--attempts goes with a task: tooloop --attempts 3 --yes --check 'pytest -q' \"fix the test\""
    if not args.yes:
        return ("--attempts runs attempts with no one to ask: add --yes (each attempt works in its own copy "
                "of the workspace; bash stays in the sandbox)")
    if args.plan or args.read_only:
        return "--attempts makes changes: it does not go with --plan or --read-only"
    if args.continue_ or args.resume:
        return "--attempts starts fresh conversations: it does not go with --continue or --resume"
    if args.json_schema:
        return "--attempts does not go with --json-schema"
    return None


def _say(message: str) -> None:
    print(f"tooloop: {message}", file=sys.stderr, flush=True)


def _tokens(n: int) -> str:
    return f"{n / 1e3:.1f}k" if n >= 1000 else str(n)


def table(result: AttemptsResult) -> List[str]:
    """The attempts as a short table: one row each, the winner marked."""
    rows = [("#", "temp", "verdict", "turns", "tokens", "seconds")]
    for a in result.attempts:
        mark = " *" if a.n == result.winner else ""
        rows.append((f"{a.n}{mark}", "-" if a.temperature is None else f"{a.temperature:g}",
                     VERDICT_WORDS.get(a.verdict, a.verdict), str(a.turns),
                     _tokens(a.usage.input_tokens + a.usage.output_tokens), f"{a.seconds:.1f}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def _line(a: AttemptRecord) -> str:
    why = f" ({a.error})" if a.error and a.verdict == "error" else ""
    return (f"attempt {a.n}: {VERDICT_WORDS.get(a.verdict, a.verdict)}{why} · {a.turns} turns · "
            f"{_tokens(a.usage.input_tokens + a.usage.output_tokens)} tokens · {a.seconds:.1f}s")


def attempts_folder(session: Path) -> Path:
    """A new folder, private to the user, for this start's attempts' conversations, beside its session: for
    ``s.jsonl`` it is ``s.attempts``, for a session in a database (``db#id``) beside its checkpoints
    (``<db>.d/id.attempts``). Where that name is taken, a fresh ``s.attempts-XXXX``: an attempt's session
    must begin empty, never resume another start's attempt."""
    from .session_db import checkpoint_anchor

    anchor = checkpoint_anchor(session)
    anchor.parent.mkdir(parents=True, exist_ok=True)
    folder = anchor.with_name(anchor.stem + ".attempts")
    try:
        folder.mkdir(mode=0o700)
        return folder
    except FileExistsError:
        return Path(tempfile.mkdtemp(prefix=anchor.stem + ".attempts-", dir=anchor.parent))


def _kept(folder: Path) -> None:
    """Say where the attempts' conversations are; a folder no attempt wrote to is removed."""
    try:
        if not any(folder.iterdir()):
            folder.rmdir()
            return
    except OSError:
        return
    _say(f"each attempt's conversation is kept in {folder}")


def run_attempts(args: argparse.Namespace, settings: Settings, task: str, task_input: Prompt,
                 kwargs: Dict[str, Any], session: Path, checkpoints: Checkpoints, loaded: LoadedSettings) -> int:
    """Run the attempts with the agent options of this start (`kwargs`, as ``app.agent_kwargs`` made them)."""
    import tooloop
    import tooloop.attempts

    from .batch import ProtectedWrites
    from .hints import after_check_hook, after_tool_hook

    json_mode = args.output_format != "text"
    started = time.monotonic()
    options = dict(kwargs)
    # Every call is allowed (--yes); the settings' deny and ask rules still refuse theirs (no one to ask).
    options.pop("permission", None)
    options.pop("session", None)
    options.pop("workspace", None)
    options.pop("check", None)   # given to the attempts as check= below
    deny = list(getattr(loaded, "deny", []) or []) + list(getattr(loaded, "ask", []) or [])
    if deny:
        options["permission_rules"] = {"deny": deny}
    sessions = attempts_folder(session)

    def configure(n: int, copy: str) -> Dict[str, Any]:
        own: Dict[str, Any] = {"session": str(sessions / f"attempt-{n}.jsonl")}
        hooks: Dict[str, Any] = {}
        if not args.allow_config_edits:
            hooks["before_tool"] = ProtectedWrites(copy)
        if settings.prompt_style == "compact" and not getattr(args, "no_hints", False):
            hooks["after_tool"] = after_tool_hook(Path(copy))   # the hints read the attempt's own copy
            if args.check:
                hooks["after_check"] = after_check_hook(Path(copy), args.check)
        if hooks:
            own["hooks"] = hooks
        return own

    def on_attempt(a: AttemptRecord) -> None:
        if args.output_format == "stream-json":
            print(json.dumps({"type": "attempt", **a.to_dict()}, separators=(",", ":")), flush=True)
        elif not json_mode:
            _say(_line(a))

    def before_apply(changes: List[Dict[str, str]]) -> None:
        # One checkpoint for the whole change: /undo puts every file back at once.
        checkpoints.begin_task(task)
        for c in changes:
            checkpoints.before_call("write_file", {"path": c["path"]})

    if not json_mode:
        _say(f"{args.attempts} attempt{'s' if args.attempts != 1 else ''}, {args.concurrency} at a time, each in "
             "its own copy of the workspace")
    try:
        result = tooloop.attempts.run(
            task_input, args.attempts, workspace=str(settings.workspace), check=args.check or None,
            concurrency=args.concurrency, configure=configure, before_apply=before_apply, on_attempt=on_attempt,
            **options)
    except KeyboardInterrupt:
        _say("interrupted: every attempt stopped; the workspace is as it was")
        _kept(sessions)
        return EXIT_INTERRUPTED
    except tooloop.Error as e:
        _say(" ".join(str(e).split()))
        _kept(sessions)
        return EXIT_USAGE
    try:
        if result.winner is not None:
            winner_session = sessions / f"attempt-{result.winner}.jsonl"
            if winner_session.is_file() and not str(session).count("#") and not session.exists():
                # The winner's conversation becomes this start's session: --continue goes on from it.
                shutil.copyfile(winner_session, session)
                os.chmod(session, 0o600)
    except OSError:
        pass
    conversations = {n: sessions / f"attempt-{n}.jsonl" for n in range(1, args.attempts + 1)}
    if json_mode:
        u = result.usage
        out = {"type": "result", "subtype": "success" if result.ok else "error", "is_error": not result.ok,
               "result": result.text, "stop_reason": None if result.ok else NO_WINNER,
               "num_turns": sum(a.turns for a in result.attempts),
               "usage": {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
                         "cache_creation_input_tokens": u.cache_creation_input_tokens,
                         "cache_read_input_tokens": u.cache_read_input_tokens},
               "total_cost_usd": u.cost_usd, "session_id": session.stem,
               "duration_ms": int((time.monotonic() - started) * 1000),
               "files_changed": [c["path"] for c in result.applied], **result.to_dict()}
        for a in out["attempts"]:
            kept = conversations.get(a.get("n"))
            a["session"] = str(kept) if kept is not None and kept.is_file() else None
        print(json.dumps(out, separators=(",", ":"), ensure_ascii=False), flush=True)
    else:
        for row in table(result):
            print(row, file=sys.stderr)
        if result.ok:
            text = result.text
            sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")
            sys.stdout.flush()
    for s in result.skipped:
        _say(f"not applied: {s['path']}: {s['reason']}")
    _kept(sessions)
    if not result.ok:
        _say(f"{NO_WINNER}: the workspace is unchanged")
        return EXIT_FAILED
    n = len(result.applied)
    _say(f"attempt {result.winner} applied: {n} file{'s' if n != 1 else ''} changed "
         "(tooloop --continue, then /undo, takes it back)")
    return EXIT_OK
