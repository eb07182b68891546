"""``tooloop.attempts``: several independent attempts at one task, each in its own copy of the workspace; the
first attempt that is verified wins and its changes are applied to the real workspace as one change, the
others are discarded (codex cloud's best-of-N, locally).

    import tooloop.attempts

    result = tooloop.attempts.run("fix the failing test", attempts=3, workspace=".", check="pytest -q",
                                  concurrency=3, model="claude-sonnet-4-6", builtin_tools=True)
    result.winner        # the 1-based number of the winning attempt, or None ("no attempt verified")
    result.attempts      # one AttemptRecord each: turns, tokens, seconds, verdict
    result.applied       # [{"path": "x.py", "action": "changed"}, ...] written to the real workspace

The copies: every top-level entry of the workspace but ``.git`` is copied with ``cp -a --reflink=auto``
(copy-on-write clones where the filesystem has them, btrfs or XFS; a plain copy elsewhere), or
``shutil.copytree`` where GNU ``cp`` is missing. ``.git`` is never copied and never linked: each copy gets a
fresh ``.git`` made by ``git clone --shared --no-checkout``, which borrows the real repository's objects
read-only through git's alternates, with HEAD and the index as the real HEAD and no remote; git works in an
attempt (status, diff, even commit) and nothing it does can reach the real ``.git``. The copies live beside
the workspace (the same filesystem, so reflinks work) when the workspace is the top of its repository,
else in the system's temporary folder (a copy inside an enclosing repository would find that repository's
``.git``); all are removed at the end.

Must never: write the real workspace before a winner is chosen (a cancelled or failed set of attempts leaves
it as it was), write a file the workspace changed since the copies were made, or import the CLI.
"""

from __future__ import annotations

import os
import re
import shutil
import stat as _stat
import subprocess
import sys
import tempfile
import threading
import time

from ._agent import Agent
from ._tooloop import DEFAULT_PROTECTED_PATHS
from .errors import Cancelled, ConfigError, MaxTurnsExceeded
from .events import RunResult, Usage, _Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

    from .types import CommandRun

    _Stat = Tuple[int, int, int]   # size, mtime_ns, permission bits

__all__ = ["Attempts", "AttemptRecord", "AttemptsResult", "run", "looks_like_a_test", "VERDICTS",
           "TEMPERATURE_STEP"]

#: Every verdict an attempt can have. ``"check_passed"``: the ``check`` command passed; ``"tests_passed"``:
#: without a check, the attempt's own tests passed (see ``tests_passed``); ``"unverified"``: the run ended but
#: nothing verified it (its check failed, or without a check no test of its own passed); ``"error"``: the run
#: raised; ``"cancelled"``: stopped by ``cancel()`` or because another attempt won first; ``"not_run"``: never
#: started (an earlier attempt won).
VERDICTS = ("check_passed", "tests_passed", "unverified", "error", "cancelled", "not_run")

#: Attempt n runs at ``min(1.0, base + TEMPERATURE_STEP * (n - 1))``, base being the ``temperature`` given
#: (or the one in ``extra``), else 0.2.
TEMPERATURE_STEP = 0.3
BASE_TEMPERATURE = 0.2

#: Folders never compared nor applied: the repository, and byte-code caches a test run leaves behind.
SKIPPED_DIRS = frozenset({".git", "__pycache__"})

# A command "looks like a test" when a word of it is a test runner (pytest, cargo test, go test, npm test, ...)
# or it runs a file named like a test (test_x.py, x_test.go, x.test.js, tests.py) with an interpreter
# (python3 test_x.py, node x.test.js) or directly (./test.sh); `cat test_x.py` only names one.
_RUNNERS = re.compile(
    r"(?:^|[\s;&|(/])(?:pytest|py\.test|unittest|tox|nox|ctest|jest|vitest|mocha|rspec|phpunit|"
    r"(?:cargo|go|npm|yarn|pnpm|bun|deno|mvn|gradle|dotnet|mix|swift|zig|make)\s+(?:run\s+)?(?:test|check)\b)")
_TEST_FILE = r"(?:[\w.-]*/)*(?:test_[\w.-]*|[\w.-]*_test\.\w+|[\w.-]*\.test\.\w+|tests?\.\w+)(?=\s|$|[;&|)])"
_TEST_FILES = re.compile(
    r"(?:(?:^|[\s;&|(])(?:python[\d.]*|node|bash|sh|ruby|perl|php|bun|deno\s+run|go\s+run)\s+(?:-\S+\s+)*"
    + _TEST_FILE + r"|(?:^|[;&|(]\s*)\./" + _TEST_FILE + ")")


def looks_like_a_test(command: str) -> bool:
    """Whether a shell command runs tests: a test runner (``pytest``, ``python -m unittest``, ``cargo test``,
    ``go test``, ``npm test``, ``make test``/``check``, ``tox``, ``jest``, ...), or a file named like a test
    (``test_*``, ``*_test.*``, ``*.test.*``, ``test.*``/``tests.*``) run by an interpreter (``python3``,
    ``node``, ``bash``, ``sh``, ``ruby``, ``perl``, ``php``, ``bun``, ``deno run``, ``go run``) or as
    ``./file``."""
    return bool(_RUNNERS.search(command) or _TEST_FILES.search(command))


def tests_passed(result: RunResult) -> Optional[str]:
    """Without a check, what verifies an attempt: the run ended by itself (``stop_reason`` ``"end_turn"``,
    nothing ``unverified``) and the LAST command it ran that looks like a test (``looks_like_a_test``) exited
    0. Returns that command, or None."""
    if result.stop_reason != "end_turn" or result.unverified or result.max_turns_reached:
        return None
    tests = [c for c in result.commands_run if looks_like_a_test(str(c.get("command", "")))]
    if tests and tests[-1].get("exit_code") == 0:
        return str(tests[-1].get("command"))
    return None


class AttemptRecord(_Record):
    """One attempt: ``n`` (1-based), the ``temperature`` it ran at, its ``verdict`` (see ``VERDICTS``),
    ``turns``, ``usage`` (tokens, ``usage.cost_usd``), ``seconds`` of wall time, the run's ``stop_reason``,
    ``text`` (its final answer), ``check`` (the check's result, None without one), ``verified_by`` (the check
    command, or without one the test command that passed), ``files_changed`` and ``commands_run`` (its
    record), ``error`` (what it raised)."""

    __slots__ = ("n", "temperature", "verdict", "turns", "usage", "seconds", "stop_reason", "text", "check",
                 "verified_by", "files_changed", "commands_run", "error")
    _fields = __slots__

    n: int
    temperature: Optional[float]
    verdict: str
    turns: int
    usage: Usage
    seconds: float
    stop_reason: Optional[str]
    text: str
    check: Any
    verified_by: Optional[str]
    files_changed: List[str]
    commands_run: List[CommandRun]
    error: Optional[str]

    def __init__(self, n: int, temperature: Optional[float], verdict: str, turns: int = 0,
                 usage: Optional[Usage] = None, seconds: float = 0.0, stop_reason: Optional[str] = None,
                 text: str = "", check: Any = None, verified_by: Optional[str] = None,
                 files_changed: Optional[List[str]] = None, commands_run: Optional[List[CommandRun]] = None,
                 error: Optional[str] = None) -> None:
        self._init(n=n, temperature=temperature, verdict=verdict, turns=turns,
                   usage=usage if usage is not None else Usage(), seconds=round(float(seconds), 3),
                   stop_reason=stop_reason, text=text, check=check, verified_by=verified_by,
                   files_changed=list(files_changed or []), commands_run=list(commands_run or []), error=error)

    @property
    def verified(self) -> bool:
        return self.verdict in ("check_passed", "tests_passed")

    def to_dict(self) -> Dict[str, Any]:
        u = self.usage
        return {"n": self.n, "temperature": self.temperature, "verdict": self.verdict, "turns": self.turns,
                "usage": {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
                          "cache_creation_input_tokens": u.cache_creation_input_tokens,
                          "cache_read_input_tokens": u.cache_read_input_tokens},
                "cost_usd": u.cost_usd, "seconds": self.seconds, "stop_reason": self.stop_reason,
                "check": self.check, "verified_by": self.verified_by, "files_changed": self.files_changed,
                "commands_run": self.commands_run, "error": self.error}


class AttemptsResult(_Record):
    """What a set of attempts came to: ``winner`` (the winning attempt's ``n``, None when no attempt was
    verified), ``attempts`` (an ``AttemptRecord`` each, in order), ``applied`` (``{"path", "action":
    "added" | "changed" | "deleted"}`` of each file written to the real workspace), ``skipped`` (``{"path",
    "reason"}`` of changes not applied: a symbolic link, or a file the workspace changed meanwhile),
    ``text`` (the winner's answer), ``cancelled`` (``cancel()`` or Ctrl+C ended them: nothing applied),
    ``copy_method`` (how the copies were made) and ``usage`` (every attempt's tokens together)."""

    __slots__ = ("winner", "attempts", "applied", "skipped", "text", "cancelled", "copy_method", "usage")
    _fields = __slots__

    winner: Optional[int]
    attempts: List[AttemptRecord]
    applied: List[Dict[str, str]]
    skipped: List[Dict[str, str]]
    text: str
    cancelled: bool
    copy_method: str
    usage: Usage

    def __init__(self, winner: Optional[int], attempts: List[AttemptRecord],
                 applied: Optional[List[Dict[str, str]]] = None, skipped: Optional[List[Dict[str, str]]] = None,
                 text: str = "", cancelled: bool = False, copy_method: str = "") -> None:
        total = Usage()
        for a in attempts:
            total = _add(total, a.usage)
        self._init(winner=winner, attempts=list(attempts), applied=list(applied or []),
                   skipped=list(skipped or []), text=text, cancelled=cancelled, copy_method=copy_method,
                   usage=total)

    @property
    def ok(self) -> bool:
        """Whether an attempt was verified (and its changes applied)."""
        return self.winner is not None

    def to_dict(self) -> Dict[str, Any]:
        return {"winner": self.winner, "attempts": [a.to_dict() for a in self.attempts], "applied": self.applied,
                "skipped": self.skipped, "cancelled": self.cancelled, "copy_method": self.copy_method}


def _add(a: Usage, b: Usage) -> Usage:
    cost = a.cost_usd + b.cost_usd if a.cost_usd is not None and b.cost_usd is not None else \
        (a.cost_usd if b.cost_usd is None and a.input_tokens + a.output_tokens else b.cost_usd)
    return Usage(a.input_tokens + b.input_tokens, a.output_tokens + b.output_tokens,
                 a.cache_creation_input_tokens + b.cache_creation_input_tokens,
                 a.cache_read_input_tokens + b.cache_read_input_tokens, cost)


# -- copies ------------------------------------------------------------------------------------------------------

def _copy_tree(src: str, dst: str) -> str:
    """Copy the workspace `src` (all but ``.git``) into the empty folder `dst`; how it was copied."""
    entries = sorted(e for e in os.listdir(src) if e != ".git")
    if not entries:
        return "empty"
    cp = shutil.which("cp") if sys.platform.startswith("linux") else None
    if cp is not None:
        proc = subprocess.run([cp, "-a", "--reflink=auto", "-t", dst, "--", *[os.path.join(src, e) for e in entries]],
                              stdin=subprocess.DEVNULL, capture_output=True)
        if proc.returncode == 0:
            return "cp --reflink=auto"
        for e in os.listdir(dst):  # start again with the portable copy
            _remove(os.path.join(dst, e))
    for e in entries:
        s, d = os.path.join(src, e), os.path.join(dst, e)
        if os.path.isdir(s) and not os.path.islink(s):
            shutil.copytree(s, d, symlinks=True)
        else:
            shutil.copy2(s, d, follow_symlinks=False)
    return "shutil.copytree"


def _git(args: List[str], cwd: Optional[str] = None) -> bool:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1"}
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"):
        env.pop(var, None)
    try:
        return subprocess.run(["git", *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=120).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _own_git(src: str, dst: str) -> bool:
    """Give the copy `dst` a ``.git`` of its own that borrows `src`'s objects read-only (alternates), HEAD and
    index as `src`'s HEAD, no remote. False when `src` has no ``.git`` or git is missing or failed."""
    if not os.path.lexists(os.path.join(src, ".git")) or shutil.which("git") is None:
        return False
    holder = tempfile.mkdtemp(prefix="clone-", dir=os.path.dirname(dst))
    try:
        clone = os.path.join(holder, "repo")
        if not _git(["clone", "--quiet", "--shared", "--no-checkout", "--", src, clone]):
            return False
        os.rename(os.path.join(clone, ".git"), os.path.join(dst, ".git"))
    finally:
        _remove(holder)
    _git(["remote", "remove", "origin"], cwd=dst)   # a push from an attempt must not reach the real repository
    _git(["reset", "--quiet"], cwd=dst)             # the index as HEAD: `git status` shows the uncommitted work
    return True


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            os.unlink(path)
        except OSError:
            pass


def _scratch_root(workspace: str, scratch: Optional[str]) -> str:
    if scratch is not None:
        os.makedirs(scratch, exist_ok=True)
        return tempfile.mkdtemp(prefix="tooloop-attempts-", dir=scratch)
    parent = os.path.dirname(workspace)
    if os.path.lexists(os.path.join(workspace, ".git")) and os.access(parent, os.W_OK):
        try:
            return tempfile.mkdtemp(prefix=f".{os.path.basename(workspace)}.tooloop-attempts-", dir=parent)
        except OSError:
            pass
    return tempfile.mkdtemp(prefix="tooloop-attempts-")


def _files(root: str) -> Dict[str, Union[_Stat, str]]:
    """Every file under `root` but SKIPPED_DIRS: its stat for a regular file, ``"link"`` or ``"other"``."""
    out: Dict[str, Union[_Stat, str]] = {}
    for here, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS or os.path.islink(os.path.join(here, d))]
        for name in names + [d for d in dirs if os.path.islink(os.path.join(here, d))]:
            full = os.path.join(here, name)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            try:
                st = os.lstat(full)
            except OSError:
                continue
            if _stat.S_ISLNK(st.st_mode):
                out[rel] = "link"
            elif _stat.S_ISREG(st.st_mode):
                out[rel] = (st.st_size, st.st_mtime_ns, st.st_mode & 0o7777)
            else:
                out[rel] = "other"
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(here, d))]
    return out


def _same_bytes(a: str, b: str) -> bool:
    try:
        with open(a, "rb") as fa, open(b, "rb") as fb:
            while True:
                x, y = fa.read(1 << 16), fb.read(1 << 16)
                if x != y:
                    return False
                if not x:
                    return True
    except OSError:
        return False


def _changes(workspace: str, copy: str, baseline: Dict[str, Union[_Stat, str]], protected: Sequence[str] = ()
             ) -> Tuple[List[Dict[str, str]], List[Dict[str, str]]]:
    """What the attempt in `copy` changed against `baseline` (the workspace when the copies were made): files
    added, changed (bytes or mode) and deleted; and what cannot be applied (a symbolic link, something that
    is not a file, a file the workspace itself changed since, or a protected path: the copy was the attempt's
    own workspace, where its bash could write `.tooloop/settings.json`, so nothing protected comes from it)."""
    now = _files(copy)
    real = _files(workspace)
    # Protected paths relative to the workspace (an absolute one, such as a config folder inside it, too).
    fences = [os.path.relpath(p, workspace) if os.path.isabs(p) else os.path.normpath(p) for p in protected]
    changes: List[Dict[str, str]] = []
    skipped: List[Dict[str, str]] = []
    for rel in sorted(set(now) | set(baseline)):
        before, after = baseline.get(rel), now.get(rel)
        if before == after and before is not None:
            continue
        if isinstance(before, tuple) and isinstance(after, tuple):
            if before[0] == after[0] and before[2] == after[2] and _same_bytes(os.path.join(workspace, rel),
                                                                                  os.path.join(copy, rel)):
                continue   # touched, not changed
            action = "changed"
        elif after is None:
            action = "deleted"
        elif before is None:
            action = "added"
        else:
            action = "changed"
        if any(rel == p or rel.startswith(p + "/") for p in fences):
            skipped.append({"path": rel, "reason": "a protected path (settings, hooks, MCP servers): never "
                                                   "applied from an attempt"})
            continue
        if "link" in (before, after) or "other" in (before, after):
            skipped.append({"path": rel, "reason": "not a regular file (links and special files are not applied)"})
            continue
        if real.get(rel) != before:
            skipped.append({"path": rel, "reason": "changed in the workspace while the attempts ran"})
            continue
        changes.append({"path": rel, "action": action})
    return changes, skipped


def _apply(workspace: str, copy: str, changes: List[Dict[str, str]]) -> List[Dict[str, str]]:
    """Write the changes into the real workspace through the library's race-free handles (never through a
    link out of it); the changes that were written."""
    from ._tooloop import restore_file

    done: List[Dict[str, str]] = []
    for c in changes:
        rel = c["path"]
        if c["action"] == "deleted":
            restore_file(workspace, rel, None)
        else:
            src = os.path.join(copy, rel)
            with open(src, "rb") as f:
                data = f.read()
            restore_file(workspace, rel, data, os.lstat(src).st_mode & 0o7777)
        done.append(c)
    return done


# -- the attempts ------------------------------------------------------------------------------------------------

def _temperatures(n: int, options: Dict[str, Any], given: Optional[Sequence[float]]) -> List[Optional[float]]:
    if given is not None:
        temps = [float(t) for t in given]
        if len(temps) != n:
            raise ConfigError(f"temperatures must give one temperature per attempt ({n}), got {len(temps)}")
        return list(temps)
    if options.get("thinking"):
        return [None] * n   # extended thinking takes the API's temperature only
    extra = options.get("extra") if isinstance(options.get("extra"), dict) else {}
    base = options.get("temperature", extra.get("temperature") if extra else None)
    base = BASE_TEMPERATURE if base is None else float(base)
    return [round(min(1.0, base + TEMPERATURE_STEP * i), 2) if i else base for i in range(n)]


def _turns(agent: Agent) -> int:
    """The model turns an agent completed (for a run that raised: no RunResult says it)."""
    try:
        return sum(1 for e in agent.history if e.get("role") == "assistant" and e.get("status") == "complete")
    except Exception:
        return 0


class Attempts:
    """``attempts`` independent runs of ``task`` (see ``run`` for the arguments); ``run()`` runs them,
    ``cancel()`` (any thread) stops every one and leaves the workspace untouched."""

    def __init__(self, task: Any, attempts: int = 3, *, workspace: Union[str, os.PathLike[str], None] = None,
                 check: Optional[str] = None, concurrency: int = 1, temperatures: Optional[Sequence[float]] = None,
                 scratch: Union[str, os.PathLike[str], None] = None,
                 configure: Optional[Callable[[int, str], Dict[str, Any]]] = None,
                 before_apply: Optional[Callable[[List[Dict[str, str]]], None]] = None,
                 on_attempt: Optional[Callable[[AttemptRecord], None]] = None, **agent_options: Any) -> None:
        if not isinstance(attempts, int) or isinstance(attempts, bool) or attempts < 1:
            raise ConfigError(f"attempts must be an integer >= 1, got {attempts!r}")
        if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
            raise ConfigError(f"concurrency must be an integer >= 1, got {concurrency!r}")
        if "session" in agent_options:
            raise ConfigError("attempts keep no session: each runs a fresh conversation in its own copy")
        ws = os.path.realpath(os.fspath(workspace if workspace is not None
                                        else agent_options.pop("workspace", None) or os.getcwd()))
        agent_options.pop("workspace", None)
        if not os.path.isdir(ws):
            raise ConfigError(f"workspace {ws!r} is not a folder")
        self.task = task
        self.n = attempts
        self.workspace = ws
        self.check = check if check is not None else agent_options.pop("check", None)
        agent_options.pop("check", None)
        self.concurrency = min(concurrency, attempts)
        self.options = agent_options
        # max_cost_usd bounds the attempts together: one spend ledger every attempt's agent counts in.
        cap = agent_options.pop("max_cost_usd", None)
        self._ledger: Any = None
        if cap is not None:
            from ._tooloop import _Ledger

            self._ledger = _Ledger(float(cap))
        self.temperatures = _temperatures(attempts, agent_options, temperatures)
        self.scratch = os.fspath(scratch) if scratch is not None else None
        self.configure = configure
        self.before_apply = before_apply
        self.on_attempt = on_attempt
        self._lock = threading.Lock()
        self._cancelled = threading.Event()
        self._won = threading.Event()
        self._agents: Dict[int, Agent] = {}
        self._winner: Optional[int] = None
        # tooloop.batch's: each attempt's agent counts in the batch's ledger and passes its send gate.
        self._prepare: Optional[Callable[[Agent], None]] = None
        self._release: Optional[Callable[[Agent], None]] = None

    def cancel(self) -> None:
        """Stop every attempt (any thread): each running agent is cancelled, none starts, nothing is applied."""
        self._cancelled.set()
        self._stop_all()

    def _stop_all(self) -> None:
        with self._lock:
            agents = list(self._agents.values())
        for a in agents:
            try:
                a.cancel()
            except Exception:
                pass

    def _options_for(self, i: int, copy: str) -> Dict[str, Any]:
        opts = dict(self.options)
        t = self.temperatures[i]
        if t is not None:
            extra = opts.get("extra")
            if isinstance(extra, dict) and "temperature" in extra:
                opts["extra"] = {**extra, "temperature": t}   # where the host put it (the CLI does)
            else:
                opts["temperature"] = t
        if self.check:
            opts["check"] = self.check
        if self.configure is not None:
            opts.update(self.configure(i + 1, copy) or {})
        opts["workspace"] = copy
        # An attempt that runs out of turns is one more unverified attempt, with its record: not an exception.
        opts.setdefault("max_turns_policy", "return")
        return opts

    def _one(self, i: int, copy: str) -> AttemptRecord:
        n, temp = i + 1, self.temperatures[i]
        started = time.monotonic()
        if self._cancelled.is_set() or self._won.is_set():
            return AttemptRecord(n, temp, "not_run" if self._won.is_set() and not self._cancelled.is_set()
                                 else "cancelled")
        try:
            agent = Agent(**self._options_for(i, copy))
        except Exception as e:
            return AttemptRecord(n, temp, "error", error=f"{type(e).__name__}: {e}",
                                 seconds=time.monotonic() - started)
        if self._ledger is not None:
            agent._core.set_ledger(self._ledger)
        if self._prepare is not None:
            self._prepare(agent)
        with self._lock:
            self._agents[n] = agent
        try:
            if self._cancelled.is_set() or self._won.is_set():
                raise Cancelled("stopped before it began")
            result = agent.run(self.task)
        except Cancelled as e:
            return AttemptRecord(n, temp, "cancelled", turns=_turns(agent), usage=agent.usage,
                                 seconds=time.monotonic() - started, error=str(e))
        except MaxTurnsExceeded as e:
            return AttemptRecord(n, temp, "unverified", turns=_turns(agent), usage=agent.usage,
                                 seconds=time.monotonic() - started, stop_reason="max_turns", error=str(e))
        except Exception as e:
            return AttemptRecord(n, temp, "error", turns=_turns(agent), usage=agent.usage,
                                 seconds=time.monotonic() - started, error=f"{type(e).__name__}: {e}")
        finally:
            with self._lock:
                self._agents.pop(n, None)
            try:
                if self._release is not None:
                    self._release(agent)
                agent.close()
            except Exception:
                pass
        check = result.check
        if self.check:
            verified_by = self.check if check and check.get("passed") else None
            verdict = "check_passed" if verified_by else "unverified"
        else:
            verified_by = tests_passed(result)
            verdict = "tests_passed" if verified_by else "unverified"
        return AttemptRecord(n, temp, verdict, turns=result.turns, usage=result.usage,
                             seconds=time.monotonic() - started, stop_reason=result.stop_reason, text=result.text,
                             check=check, verified_by=verified_by, files_changed=result.files_changed,
                             commands_run=result.commands_run)

    def run(self) -> AttemptsResult:
        """Run the attempts (at most ``concurrency`` at once); the first verified one wins and is applied. Ctrl+C
        stops them all, removes the copies and raises KeyboardInterrupt; the workspace is left as it was."""
        import queue

        root = _scratch_root(self.workspace, self.scratch)
        records: Dict[int, AttemptRecord] = {}
        winner: Optional[int] = None
        method = ""
        try:
            baseline = _files(self.workspace)
            copies: List[str] = []
            for i in range(self.n):
                copy = os.path.join(root, f"attempt-{i + 1}")
                os.mkdir(copy, 0o700)
                method = _copy_tree(self.workspace, copy)
                _own_git(self.workspace, copy)
                copies.append(copy)
            todo: "queue.Queue[int]" = queue.Queue()
            for i in range(self.n):
                todo.put(i)
            done: "queue.Queue[AttemptRecord]" = queue.Queue()

            def worker() -> None:
                while True:
                    try:
                        i = todo.get_nowait()
                    except queue.Empty:
                        return
                    try:
                        rec = self._one(i, copies[i])
                    except BaseException as e:   # never lose an attempt's outcome to a worker's death
                        rec = AttemptRecord(i + 1, self.temperatures[i], "error", error=f"{type(e).__name__}: {e}")
                    won = False
                    with self._lock:
                        # Decided here, before this worker takes the next attempt: one after another, no
                        # attempt starts once one has won.
                        if rec.verified and self._winner is None and not self._cancelled.is_set():
                            self._winner, won = rec.n, True
                            self._won.set()
                    if won:
                        self._stop_all()   # the others lose: stop them now
                    done.put(rec)

            threads = [threading.Thread(target=worker, name=f"tooloop-attempt-{k}", daemon=True)
                       for k in range(self.concurrency)]
            for th in threads:
                th.start()
            try:
                while len(records) < self.n:
                    try:
                        rec = done.get(timeout=0.05)
                    except queue.Empty:
                        continue
                    records[rec.n] = rec
                    if self.on_attempt is not None:
                        self.on_attempt(rec)
            except BaseException:
                self.cancel()
                for th in threads:
                    th.join()
                raise
            for th in threads:
                th.join()
            ordered = [records[k] for k in sorted(records)]
            winner = self._winner
            if self._cancelled.is_set():
                return AttemptsResult(None, ordered, cancelled=True, copy_method=method)
            if winner is None:
                return AttemptsResult(None, ordered, copy_method=method)
            protected = self.options.get("protected_paths")
            protected = DEFAULT_PROTECTED_PATHS if protected is None else protected
            changes, skipped = _changes(self.workspace, copies[winner - 1], baseline, protected)
            if self.before_apply is not None:
                self.before_apply(changes)
            applied = _apply(self.workspace, copies[winner - 1], changes)
            return AttemptsResult(winner, ordered, applied=applied, skipped=skipped, text=records[winner].text,
                                  copy_method=method)
        finally:
            _remove(root)


def run(task: Any, attempts: int = 3, *, workspace: Union[str, os.PathLike[str], None] = None,
        check: Optional[str] = None, concurrency: int = 1, temperatures: Optional[Sequence[float]] = None,
        scratch: Union[str, os.PathLike[str], None] = None,
        configure: Optional[Callable[[int, str], Dict[str, Any]]] = None,
        before_apply: Optional[Callable[[List[Dict[str, str]]], None]] = None,
        on_attempt: Optional[Callable[[AttemptRecord], None]] = None, **agent_options: Any) -> AttemptsResult:
    """Make ``attempts`` independent attempts at ``task``, each a fresh ``Agent(**agent_options)`` in its own
    copy of ``workspace`` (default: the current folder; see the module's docs for the copies and ``.git``), at
    most ``concurrency`` at once, attempt n at its own temperature (``temperatures``, else a spread:
    ``base + TEMPERATURE_STEP * (n - 1)``, at most 1.0; none with ``thinking``).

    An attempt is verified when ``check`` (a command, as ``Agent(check=)``) passed in its copy; without a
    check, when the run ended by itself and the last command it ran that looks like a test
    (``looks_like_a_test``) exited 0. The first verified attempt wins: the others are stopped (or never
    started), its changes against the workspace as it was (files added, changed, deleted; not ``.git`` nor
    ``__pycache__``) are handed to ``before_apply(changes)`` and then written to the real workspace, and
    every copy is removed. No attempt verified: ``result.winner`` is None and nothing is written.
    ``max_cost_usd`` bounds the attempts together (one spend ledger for all of them).
    ``configure(n, copy)`` returns options of attempt n's own (hooks that need its folder); ``on_attempt``
    is called with each ``AttemptRecord`` as it ends; ``scratch`` is where the copies go. Returns an
    ``AttemptsResult``; Ctrl+C stops every attempt, writes nothing and raises KeyboardInterrupt.
    """
    return Attempts(task, attempts, workspace=workspace, check=check, concurrency=concurrency,
                    temperatures=temperatures, scratch=scratch, configure=configure, before_apply=before_apply,
                    on_attempt=on_attempt, **agent_options).run()
