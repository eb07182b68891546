"""Settings files of the `tooloop` command, in Claude Code's format, and the command hooks they declare.

Three files, merged (lists joined):

- the user's ``$XDG_CONFIG_HOME/tooloop/settings.json`` (else ``~/.config/tooloop/settings.json``): the
  only one trusted as written;
- the project's ``<workspace>/.tooloop/settings.json`` and the project-local
  ``<workspace>/.tooloop/settings.local.json``: both lie in the workspace, where a repository brings files
  and the model's sandboxed bash writes them, so neither is trusted. Their ``deny`` and ``ask`` rules apply
  at once (they only take power away); their ``allow`` rules and hooks only once the user has approved
  that file (asked at the start of an interactive session, like ``.mcp.json``; ``-p`` and ``tooloop
  "task"`` skip them with one line on stderr). No git heuristics: checked in or not, it waits.

An approval (kept in the sessions folder, outside the workspace) pins the file's allow rules and hooks and
the content of every workspace file a hook command runs or names (``./scripts/check.sh``, ``python
hooks/x.py``): a change to either asks again. The pins are checked again right before each hook runs, as
the model can rewrite a script mid-session: a changed one does not run (the REPL asks; ``-p`` says so in
one line). The user's own "always" answer saves an allow rule into the local file and records the
approval of the new content (when what was there was approved), so the user is not asked about it.

Each holds ``{"permissions": {"allow": [...], "ask": [...], "deny": [...]}, "hooks": {"PreToolUse": [...],
"PostToolUse": [...], "Stop": [...], "UserPromptSubmit": [...], "SessionStart": [...]}}``; a hook entry is
``{"matcher": "bash|Edit", "hooks": [{"type": "command", "command": "...", "timeout": 60}]}``.

A command hook gets the event as JSON on stdin and runs in the workspace under a small supervisor process
(see ``hookrun``) that is the subreaper of everything the hook starts: when the hook exits or times out,
every process it started ends, ``setsid`` children included. Its stdout and stderr are each capped at
HOOK_OUTPUT_CAP characters. Exit 0 carries on (the stdout of ``UserPromptSubmit`` and ``SessionStart``
hooks becomes context for the model); exit 2 blocks, with stderr as the reason the model sees; any other
failure is shown and carries on. A JSON answer ``{"decision": "block", "reason": ...}`` on stdout blocks
too.

Must never: run a workspace hook (or count a workspace allow rule) the user did not approve with exactly
that content and exactly those files, or leave a hook's processes running.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shlex
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Tuple

if TYPE_CHECKING:
    import tooloop

    from .permissions import CallLike, Decision, Policy

from . import paths
from .config import ConfigProblem
from .permissions import prefix_rule  # noqa: F401 (re-exported: the rule an "always" saves)

EVENTS = ("PreToolUse", "PostToolUse", "Stop", "UserPromptSubmit", "SessionStart")
#: Claude Code's other hook events: a settings file written for Claude Code may hold them; they are
#: accepted and ignored (with a note), so the rest of the file still counts.
OTHER_CLAUDE_EVENTS = ("Notification", "SubagentStop", "PreCompact", "SessionEnd", "PermissionRequest")
RULE_KINDS = ("allow", "ask", "deny")
DEFAULT_TIMEOUT = 60.0
#: Characters kept of a hook's stdout and of its stderr (the bash tool's cap): the rest is read and dropped,
#: so a hook printing 20 MB neither fills memory nor becomes a 20 MB request.
HOOK_OUTPUT_CAP = 30_000
PIN_MAX_FILES = 200                 # workspace files pinned per hook command
WORKSPACE_SOURCES = ("local", "project")

#: tooloop's tool names → Claude Code's, so a matcher written for Claude Code ("Bash", "Edit|Write") works.
CLAUDE_NAMES = {"bash": "Bash", "read_file": "Read", "write_file": "Write", "edit_file": "Edit", "grep": "Grep",
                "glob": "Glob", "web_fetch": "WebFetch", "task": "Task", "todo_write": "TodoWrite"}


def user_settings_file(env: Optional[Mapping[str, str]] = None) -> Path:
    from .features import user_config_dir

    return user_config_dir(env) / "settings.json"


def project_settings_file(workspace: Path) -> Path:
    return Path(workspace) / ".tooloop" / "settings.json"


def local_settings_file(workspace: Path) -> Path:
    return Path(workspace) / ".tooloop" / "settings.local.json"


def read_settings(path: Path) -> Dict[str, Any]:
    """One settings file as a dict (``{}`` when absent). Raises ConfigProblem for a file that is not valid."""
    from .config import read_config_text

    text = read_config_text(Path(path), "settings")
    if text is None:
        return {}
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ConfigProblem(f"settings {path} is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise ConfigProblem(f"settings {path} must be a JSON object")
    perms = data.get("permissions", {})
    if not isinstance(perms, dict):
        raise ConfigProblem(f"settings {path}: \"permissions\" must be an object of allow/ask/deny lists")
    for kind in RULE_KINDS:
        rules = perms.get(kind, [])
        if not isinstance(rules, list) or not all(isinstance(r, str) for r in rules):
            raise ConfigProblem(f"settings {path}: permissions.{kind} must be a list of rule strings")
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise ConfigProblem(f"settings {path}: \"hooks\" must be an object keyed by event")
    for event, entries in hooks.items():
        if event not in EVENTS and event not in OTHER_CLAUDE_EVENTS:
            raise ConfigProblem(f"settings {path}: unknown hook event {event!r} (known: {', '.join(EVENTS)})")
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise ConfigProblem(f"settings {path}: hooks.{event} must be a list of {{\"matcher\", \"hooks\"}} objects")
        for entry in entries:
            for h in entry.get("hooks", []):
                if not isinstance(h, dict) or h.get("type", "command") != "command" or not isinstance(
                        h.get("command"), str):
                    raise ConfigProblem(f"settings {path}: each hook in hooks.{event} must be "
                                        "{\"type\": \"command\", \"command\": \"...\"}")
    return data


@dataclass
class CommandHook:
    event: str
    matcher: str
    command: str
    timeout: float
    source: str
    #: For a workspace file's hook: the workspace files its command runs or names (path relative to the
    #: workspace → SHA-256), as approved; checked again before each run. None: the user's own, not pinned.
    pins: Optional[Dict[str, str]] = None


@dataclass
class WorkspaceFile:
    """What one workspace settings file wants that needs approval: its allow rules and hooks, and the files
    those hooks run (as they are now)."""

    source: str          # "project" or "local"
    path: Path
    part: Dict[str, Any]
    pins: Dict[str, str]
    hooks: List[CommandHook] = field(default_factory=list)   # pinned as `pins` says

    @property
    def digest(self) -> str:
        return approval_digest(self.part, self.pins)


@dataclass
class LoadedSettings:
    """The merged settings of one start."""

    allow: List[str] = field(default_factory=list)
    ask: List[str] = field(default_factory=list)
    deny: List[str] = field(default_factory=list)
    hooks: List[CommandHook] = field(default_factory=list)
    #: Workspace files whose allow rules and hooks wait for the user's approval (empty once approved).
    waiting: List[WorkspaceFile] = field(default_factory=list)
    #: Every workspace file with allow rules or hooks, approved or not (a hook whose pins changed mid-session
    #: is approved again against these).
    files: Dict[str, WorkspaceFile] = field(default_factory=dict)
    project_file: Optional[Path] = None
    problems: List[str] = field(default_factory=list)

    def rules(self) -> Dict[str, List[str]]:
        return {"allow": list(self.allow), "ask": list(self.ask), "deny": list(self.deny)}

    def has_rules(self) -> bool:
        return bool(self.allow or self.ask or self.deny)

    @property
    def pending(self) -> Dict[str, Any]:
        """The project file's part waiting for approval ({} when none)."""
        return next((w.part for w in self.waiting if w.source == "project"), {})

    @property
    def pending_local(self) -> Dict[str, Any]:
        """The local file's part waiting for approval ({} when none)."""
        return next((w.part for w in self.waiting if w.source == "local"), {})


def _hooks_of(data: Mapping[str, Any], source: str, workspace: Optional[Path] = None) -> List[CommandHook]:
    """The command hooks of a settings file; with `workspace`, each pinned to the workspace files it runs
    as they are now."""
    out: List[CommandHook] = []
    for event, entries in (data.get("hooks") or {}).items():
        if event not in EVENTS:
            continue   # one of Claude Code's events tooloop does not have (noted by `load`)
        for e in entries:
            matcher = str(e.get("matcher") or "")
            for h in e.get("hooks") or []:
                t = h.get("timeout", DEFAULT_TIMEOUT)
                timeout = float(t) if isinstance(t, (int, float)) and t > 0 else DEFAULT_TIMEOUT
                command = str(h["command"])
                pins = hook_pins(command, workspace) if workspace is not None else None
                out.append(CommandHook(event, matcher, command, timeout, source, pins))
    return out


def trusted_part(data: Mapping[str, Any]) -> Dict[str, Any]:
    """What of a workspace settings file needs approval: its allow rules and hooks."""
    return {"allow": list((data.get("permissions") or {}).get("allow") or []), "hooks": data.get("hooks") or {}}


# -- approvals: outside the workspace -------------------------------------------------------------------

def approvals_file(workspace: Path) -> Path:
    return paths.sessions_dir(workspace) / "settings-approved.json"


def approvals_usable(workspace: Path) -> bool:
    """Whether approvals can be kept apart from the workspace (see ``paths.approvals_kept_apart``)."""
    return paths.approvals_kept_apart(workspace)


def content_hash(part: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(part, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def approval_digest(part: Mapping[str, Any], pins: Mapping[str, str]) -> str:
    """What an approval records: the file's allow rules and hooks and, when its hooks run workspace files,
    their content (a hook without such files: the JSON alone, as approvals stored before pinning were)."""
    if not pins:
        return content_hash(part)
    h = hashlib.sha256(content_hash(part).encode())
    for name in sorted(pins):
        h.update(b"\0" + name.encode("utf-8", "surrogateescape") + b"\0" + pins[name].encode())
    return "files:" + h.hexdigest()


def _approvals(workspace: Path) -> Dict[str, Any]:
    if not approvals_usable(workspace):
        return {}
    try:
        data = json.loads(approvals_file(workspace).read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def approved_hash(workspace: Path, which: str = "project") -> Optional[str]:
    value = _approvals(workspace).get(which)
    return str(value) if value else None


def save_approval(workspace: Path, digest: str, which: str = "project") -> None:
    if not approvals_usable(workspace):
        return
    path = approvals_file(workspace)
    data = _approvals(workspace)
    data[which] = digest
    data.pop("local_hooks", None)   # the record of the git-heuristic days: never an approval
    path.parent.mkdir(parents=True, exist_ok=True)
    from .private_files import write_private

    write_private(path, json.dumps(data))


# -- pins: the workspace files a hook command runs or names ---------------------------------------------

def _words(command: str, depth: int = 0) -> List[str]:
    """The shell words of `command` (shlex, with `;`, `&&`, `|` apart); a word that is itself a script
    (`sh -c "python x.py"`) adds its own words, two levels deep."""
    try:
        lex = shlex.shlex(command, posix=True, punctuation_chars=True)
        lex.whitespace_split = True
        words = list(lex)
    except ValueError:
        words = command.split()
    out: List[str] = []
    for w in words[:1000]:
        out.append(w)
        if depth < 2 and any(c.isspace() for c in w):
            out += _words(w, depth + 1)
    return out


def pinned_paths(command: str, workspace: Path) -> List[Path]:
    """The regular files inside the workspace that a hook command's words name (relative to the workspace;
    `--flag=path` and `-m module` too; `$CLAUDE_PROJECT_DIR` is the workspace). A path that escapes the
    workspace, through `..` or a symlink, is not pinned (nor trusted: the approval covers the command)."""
    root = Path(workspace).resolve()
    found: List[Path] = []
    words = _words(command)
    for i, word in enumerate(words):
        for var in ("${CLAUDE_PROJECT_DIR}", "$CLAUDE_PROJECT_DIR"):
            word = word.replace(var, str(root))
        candidates = [word]
        if word.startswith("-") and "=" in word:
            candidates.append(word.split("=", 1)[1])
        if i > 0 and words[i - 1] == "-m":
            candidates += [word.replace(".", "/") + ".py", word.replace(".", "/") + "/__main__.py"]
        for c in candidates:
            if not c or c.startswith("-") or "\0" in c:
                continue
            p = Path(c) if os.path.isabs(c) else root / c
            try:
                real = p.resolve()
                real.relative_to(root)
                if not real.is_file() or real in found:
                    continue
            except (ValueError, OSError, RuntimeError):
                continue
            found.append(real)
            if len(found) >= PIN_MAX_FILES:
                return found
    return found


def hook_pins(command: str, workspace: Path) -> Dict[str, str]:
    """The workspace files a hook command runs or names, relative path → SHA-256, as they are now."""
    root = Path(workspace).resolve()
    from .features import file_digest

    return {str(p.relative_to(root)): file_digest(p) for p in pinned_paths(command, workspace)}


def _file_pins(part: Mapping[str, Any], workspace: Path) -> Dict[str, str]:
    pins: Dict[str, str] = {}
    for h in _hooks_of({"hooks": part.get("hooks") or {}}, "", workspace):
        pins.update(h.pins or {})
    return pins


def _describe(w: WorkspaceFile) -> str:
    lines = [f"allow {r}" for r in w.part["allow"]]
    for h in _hooks_of({"hooks": w.part["hooks"]}, w.source):
        lines.append(f"{h.event}{'(' + h.matcher + ')' if h.matcher else ''} hook: {h.command}")
    shown = "; ".join(lines)
    if len(shown) > 600:
        shown = shown[:600] + " ..."
    if w.pins:
        files = ", ".join(sorted(w.pins))
        shown += f" (running the workspace files {files[:300]}{' ...' if len(files) > 300 else ''}, pinned as they are now)"
    return shown


# -- loading ----------------------------------------------------------------------------------------------

def load(workspace: Path, env: Optional[Mapping[str, str]] = None) -> LoadedSettings:
    """Read and merge the three files. The allow rules and hooks of the two workspace files count only when
    approved with this content and these hook files (otherwise they wait in ``waiting``). Raises
    ConfigProblem for a broken user or local file; a broken project file is reported in ``problems`` and
    ignored."""
    s = LoadedSettings()

    def note_other_events(path: Path, data: Mapping[str, Any]) -> None:
        other = [e for e in (data.get("hooks") or {}) if e not in EVENTS]
        if other:
            s.problems.append(f"settings {path}: hooks for {', '.join(other)} are ignored (tooloop has the events "
                              f"{', '.join(EVENTS)})")

    user = user_settings_file(env)
    data = read_settings(user)
    note_other_events(user, data)
    perms = data.get("permissions") or {}
    s.allow += perms.get("allow") or []
    s.ask += perms.get("ask") or []
    s.deny += perms.get("deny") or []
    s.hooks += _hooks_of(data, "user")

    approvals = _approvals(workspace)
    for source, path in (("local", local_settings_file(workspace)), ("project", project_settings_file(workspace))):
        if source == "local":
            data = read_settings(path)
        else:
            try:
                data = read_settings(path)
            except ConfigProblem as e:
                s.problems.append(f"{e} (the project's settings are ignored)")
                data = {}
            if data:
                s.project_file = path
        if not data:
            continue
        note_other_events(path, data)
        perms = data.get("permissions") or {}
        # Rules that only take power away apply at once.
        s.ask += perms.get("ask") or []
        s.deny += perms.get("deny") or []
        part = trusted_part(data)
        if not (part["allow"] or part["hooks"]):
            continue
        hooks = _hooks_of(data, source, workspace)
        pins: Dict[str, str] = {}
        for h in hooks:
            pins.update(h.pins or {})
        w = WorkspaceFile(source, path, part, pins, hooks)
        s.files[source] = w
        if approvals.get(source) == w.digest:
            s.allow += part["allow"]
            s.hooks += hooks
        else:
            s.waiting.append(w)
    if s.waiting and not approvals_usable(workspace):
        s.problems.append(f"approvals are kept in {approvals_file(workspace).parent}, inside the workspace, where a "
                          "sandboxed command can write: none is read or kept there, so workspace settings are "
                          "asked about at every start")
    return s


def approve_pending(s: LoadedSettings, workspace: Path, question: Callable[[str], Optional[bool]]) -> bool:
    """Ask once per workspace file about its waiting allow rules and hooks; a yes applies and remembers them
    (pinned as shown). True when anything was approved."""
    approved = False
    for w in list(s.waiting):
        changed = " (changed since you approved it)" if approved_hash(workspace, w.source) else ""
        which = "The project's .tooloop/settings.json" if w.source == "project" else str(w.path)
        answer = question(f"{which}{changed} wants: {_describe(w)}. Allow them in this workspace? [y/n] ")
        if not answer:
            continue
        try:
            save_approval(workspace, w.digest, w.source)
        except OSError:
            pass
        s.allow += w.part["allow"]
        s.hooks += w.hooks   # pinned as read at the start: a file changed since does not run (Hooks.fire)
        s.waiting.remove(w)
        approved = True
    return approved


# -- bash prefix rules ------------------------------------------------------------------------------------

def save_local_rule(workspace: Path, rule: str) -> Path:
    """Add an allow rule to the project-local settings file (created when missing): written atomically, owner
    only, never through a symlink. When the file held nothing waiting for approval (or what it held was
    approved), the new content is recorded as approved: the user's own rule is not asked about next time."""
    path = local_settings_file(workspace)
    data = read_settings(path)
    before = trusted_part(data)
    had_approval = (not (before["allow"] or before["hooks"])
                    or approved_hash(workspace, "local") == approval_digest(before, _file_pins(before, workspace)))
    perms = data.setdefault("permissions", {})
    allow = perms.setdefault("allow", [])
    if rule not in allow:
        allow.append(rule)
    _write_local(Path(workspace), json.dumps(data, indent=2) + "\n")
    if had_approval:
        after = trusted_part(data)
        try:
            save_approval(workspace, approval_digest(after, _file_pins(after, workspace)), "local")
        except OSError:
            pass
    return path


def _write_local(workspace: Path, text: str) -> None:
    """Write .tooloop/settings.local.json by file descriptors: `.tooloop` must be a real folder (a symlink
    there is refused), the new file is made 0600 under a fresh name and renamed over the old one."""
    ws = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            os.mkdir(".tooloop", 0o700, dir_fd=ws)
        except FileExistsError:
            pass
        try:
            folder = os.open(".tooloop", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=ws)
        except OSError as e:
            raise OSError(e.errno, f"{workspace / '.tooloop'} is not a folder of its own ({e.strerror})") from None
    finally:
        os.close(ws)
    try:
        tmp = f".settings.local.json.{secrets.token_hex(4)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, "settings.local.json", src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=folder)
            except OSError:
                pass
            raise
    finally:
        os.close(folder)

# -- the rules as part of the CLI's permission policy -------------------------------------------------------

class RulesPolicy:
    """Puts the settings' rules in front of a permission policy: deny refuses, allow runs without asking,
    ask makes the inner policy ask even for a read-only tool (in read-only mode: refused). Keeps the inner
    policy's ``mode`` and ``bind``."""

    def __init__(self, inner: Policy, settings: LoadedSettings, workspace: Path):
        self.inner = inner
        self.settings = settings
        self.workspace = workspace
        self.mode = getattr(inner, "mode", "custom")

    def bind(self, agent: tooloop.Agent) -> None:
        bind = getattr(self.inner, "bind", None)
        if bind is not None:
            bind(agent)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __call__(self, call: CallLike) -> Decision:
        from tooloop.rules import match_rules

        from .permissions import call_parts

        name, inp, _ = call_parts(call)
        rules = self.settings.rules()
        decision = match_rules(rules, name, inp, self.workspace) if any(rules.values()) else None
        if decision is None:
            return self.inner(call)
        kind, rule = decision
        if kind == "deny":
            return f"The settings deny this call (rule {rule}). Do not retry it; take another approach."
        if kind == "allow":
            return True
        ask: Optional[Callable[..., Decision]] = getattr(self.inner, "ask", None)
        if ask is not None:
            return ask(call, force=True)
        if self.mode == "auto":
            return True
        return f"The settings say {name} calls like this need the user's approval (rule {rule}), and no one can be asked here."


# -- command hooks --------------------------------------------------------------------------------------

def matches(matcher: str, tool: str) -> bool:
    if matcher in ("", "*"):
        return True
    names = {tool, CLAUDE_NAMES.get(tool, tool)}
    try:
        return any(re.fullmatch(matcher, n) for n in names)
    except re.error:
        return matcher in names


@dataclass
class HookOutcome:
    blocked: bool = False
    reason: str = ""
    context: str = ""
    problems: List[str] = field(default_factory=list)


def run_command(hook: CommandHook, payload: Mapping[str, Any], cwd: Path) -> Tuple[int, str, str]:
    """Run one hook command with the event on stdin; (exit code, stdout, stderr), each output capped at
    HOOK_OUTPUT_CAP characters (the rest is read and dropped). Everything it started ends with it, after it
    exits and at its timeout (then the code is -9): it runs under the hookrun supervisor, the subreaper of
    its subtree."""
    from . import hookrun

    report_r, report_w = os.pipe()
    env = dict(os.environ, CLAUDE_PROJECT_DIR=str(cwd))
    try:
        proc = subprocess.Popen([sys.executable, "-I", "-S", hookrun.__file__, repr(float(hook.timeout)),
                                 str(os.getpid()), str(report_w), hook.command],
                                cwd=str(cwd), env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, pass_fds=(report_w,), start_new_session=True)
    except BaseException:
        os.close(report_r)
        raise
    finally:
        os.close(report_w)
    kept: Dict[str, Tuple[bytes, int]] = {}

    def drain(name: str, fd: int) -> None:
        buf, dropped = bytearray(), 0
        limit = HOOK_OUTPUT_CAP * 4   # bytes enough for the cap in characters, whatever the encoding
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            room = max(0, limit - len(buf))
            buf += chunk[:room]
            dropped += len(chunk) - min(room, len(chunk))
        kept[name] = (bytes(buf), dropped)

    def feed() -> None:
        assert proc.stdin is not None
        try:
            proc.stdin.write(json.dumps(payload).encode())
        except (OSError, ValueError):
            pass   # the hook did not read its input: fine
        finally:
            try:
                proc.stdin.close()
            except OSError:
                pass

    assert proc.stdout is not None and proc.stderr is not None
    threads = [threading.Thread(target=drain, args=("out", proc.stdout.fileno()), daemon=True),
               threading.Thread(target=drain, args=("err", proc.stderr.fileno()), daemon=True),
               threading.Thread(target=feed, daemon=True)]
    for t in threads:
        t.start()
    status = ""
    try:
        with os.fdopen(report_r, "rb") as report:
            report_r = -1
            status = report.read(64).decode("ascii", "replace").strip()
        proc.wait(timeout=10)
        for t in threads:
            t.join(timeout=5)   # the supervisor killed every holder of the pipes: EOF comes at once
    finally:
        if report_r != -1:
            os.close(report_r)
        if proc.poll() is None:   # Ctrl+C, or a supervisor that hangs: it ends the hook's processes on SIGTERM
            try:
                proc.terminate()
                proc.wait(timeout=3)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
    if status.startswith("exit "):
        code = int(status[5:])
    else:
        code = -9
    texts = []
    for name in ("out", "err"):
        data, dropped = kept.get(name, (b"", 0))
        text = data.decode("utf-8", "replace")
        if dropped or len(text) > HOOK_OUTPUT_CAP:
            more = dropped + len(text[HOOK_OUTPUT_CAP:].encode("utf-8", "replace"))
            text = text[:HOOK_OUTPUT_CAP] + f"\n[hook output cut at {HOOK_OUTPUT_CAP} characters: {more} bytes more]"
        texts.append(text)
    if status == "timeout":
        texts[1] += f"\n(timed out after {hook.timeout:g} s)"
    elif not status.startswith("exit "):
        texts[1] += "\n(the hook was stopped)"
    return code, texts[0], texts[1]


class Hooks:
    """The command hooks of one session, as the library's hooks and the CLI's prompt filter."""

    def __init__(self, hooks: List[CommandHook], workspace: Path, session_id: str = "",
                 transcript: str = "", show: Optional[Callable[[str], None]] = None,
                 ask: Optional[Callable[[str], Optional[bool]]] = None,
                 skipped: Optional[Callable[[str], None]] = None,
                 files: Optional[Mapping[str, WorkspaceFile]] = None):
        """`ask`: the y/n question for a hook whose pinned files changed (None: nobody to ask, the hook is
        skipped and `skipped` says so once); `files`: the workspace files the hooks came from (an approval
        given again is stored against them)."""
        self.hooks = hooks
        self.workspace = workspace
        self.session_id = session_id
        self.transcript = transcript
        self.show = show or (lambda _m: None)
        self.ask = ask
        self.skipped = skipped or self.show
        self.files = dict(files or {})
        self.stop_active = False
        self._said: "set[int]" = set()

    def pinned_ok(self, hook: CommandHook) -> bool:
        """Whether a workspace hook's files are still what was approved (checked right before each run: the
        model can rewrite a script mid-session). A change is asked about (a yes pins the new content and is
        remembered) or, with nobody to ask, skips the hook with one line."""
        if hook.pins is None:
            return True
        now = hook_pins(hook.command, self.workspace)
        if now == hook.pins:
            return True
        changed = sorted(k for k in set(now) | set(hook.pins) if now.get(k) != hook.pins.get(k))
        where = self.files[hook.source].path if hook.source in self.files else hook.source
        what = f"the {hook.event} hook `{hook.command}` of {where}: {', '.join(changed)[:300]} changed since you approved it"
        if self.ask is None:
            if id(hook) not in self._said:
                self._said.add(id(hook))
                self.skipped(f"{what}; the hook is skipped (run `tooloop` in this workspace to approve it again)")
            return False
        if not self.ask(f"{what}. Run it as it is now? [y/n] "):
            self.show(f"{hook.event} hook skipped: {hook.command}")
            return False
        hook.pins = now
        w = self.files.get(hook.source)
        if w is not None:
            # Remembered only when the file's other hooks are still as approved: a yes covers what was shown.
            pins: Dict[str, str] = {}
            same = True
            for h in self.hooks:
                if h.source == hook.source and h.pins is not None:
                    pins.update(h.pins)
                    if h is not hook and hook_pins(h.command, self.workspace) != h.pins:
                        same = False
            if same:
                try:
                    save_approval(self.workspace, approval_digest(w.part, pins), w.source)
                except OSError:
                    pass
        return True

    def of(self, event: str, tool: Optional[str] = None) -> List[CommandHook]:
        return [h for h in self.hooks if h.event == event and (tool is None or matches(h.matcher, tool))]

    def fire(self, event: str, payload: Dict[str, Any], tool: Optional[str] = None) -> HookOutcome:
        out = HookOutcome()
        base = {"session_id": self.session_id, "transcript_path": self.transcript, "cwd": str(self.workspace),
                "hook_event_name": event}
        for hook in self.of(event, tool):
            if not self.pinned_ok(hook):
                continue
            started = time.monotonic()
            try:
                code, stdout, stderr = run_command(hook, {**base, **payload}, self.workspace)
            except OSError as e:
                self.show(f"{event} hook failed to start: {hook.command}: {e}")
                continue
            answer: Any = None
            if stdout.strip().startswith("{"):
                try:
                    answer = json.loads(stdout)
                except ValueError:
                    answer = None
            if code == 2:
                out.blocked = True
                out.reason = stderr.strip() or f"blocked by the {event} hook {hook.command}"
                return out
            if isinstance(answer, dict) and answer.get("decision") == "block":
                out.blocked = True
                out.reason = str(answer.get("reason") or f"blocked by the {event} hook {hook.command}")
                return out
            specific = answer.get("hookSpecificOutput") if isinstance(answer, dict) else None
            if isinstance(specific, dict) and specific.get("permissionDecision") == "deny":
                # Claude Code's newer PreToolUse answer.
                out.blocked = True
                out.reason = str(specific.get("permissionDecisionReason")
                                 or f"blocked by the {event} hook {hook.command}")
                return out
            if code != 0:
                took = time.monotonic() - started
                self.show(f"{event} hook exited {code} after {took:.1f}s: {hook.command}: "
                          f"{' '.join(stderr.split())[:300]}")
                continue
            if isinstance(answer, dict):
                extra = answer.get("additionalContext") or (answer.get("hookSpecificOutput") or {}).get(
                    "additionalContext")
                if extra:
                    out.context += str(extra).strip() + "\n"
            elif stdout.strip():
                out.context += stdout.strip() + "\n"
        return out

    def library_hooks(self) -> Dict[str, Callable[..., Optional[str]]]:
        """The ``hooks=`` dict for ``tooloop.Agent``."""
        made: Dict[str, Callable[..., Optional[str]]] = {}
        if self.of("PreToolUse"):
            def before_tool(call: tooloop.ToolCall) -> Optional[str]:
                if not self.of("PreToolUse", call.name):
                    return None
                o = self.fire("PreToolUse", {"tool_name": CLAUDE_NAMES.get(call.name, call.name),
                                             "tool_input": call.input}, call.name)
                return o.reason if o.blocked else None
            made["before_tool"] = before_tool
        if self.of("PostToolUse"):
            def after_tool(call: tooloop.ToolCall, result: tooloop.ToolResult) -> Optional[str]:
                if not self.of("PostToolUse", call.name):
                    return None
                o = self.fire("PostToolUse", {"tool_name": CLAUDE_NAMES.get(call.name, call.name),
                                              "tool_input": call.input,
                                              "tool_response": {"content": result.content,
                                                                "is_error": result.is_error}}, call.name)
                if o.blocked:
                    return f"{result.text}\n\n[PostToolUse hook] {o.reason}"
                return None
            made["after_tool"] = after_tool
        if self.of("Stop"):
            def on_stop(result: tooloop.RunResult) -> Optional[str]:
                o = self.fire("Stop", {"stop_hook_active": self.stop_active})
                self.stop_active = o.blocked
                return o.reason if o.blocked else None
            made["on_stop"] = on_stop
        return made

    def prompt(self, text: str) -> Tuple[Optional[str], str]:
        """Run UserPromptSubmit hooks: (the text to send, with any context added, or None when blocked;
        the reason when blocked)."""
        self.stop_active = False
        if not self.of("UserPromptSubmit"):
            return text, ""
        o = self.fire("UserPromptSubmit", {"prompt": text})
        if o.blocked:
            return None, o.reason
        if o.context:
            return f"{text}\n\n<hook-context>\n{o.context.strip()}\n</hook-context>", ""
        return text, ""

    def session_start(self, source: str) -> str:
        """Run SessionStart hooks; the context they add (stdout), or ''."""
        if not self.of("SessionStart"):
            return ""
        return self.fire("SessionStart", {"source": source}).context.strip()
