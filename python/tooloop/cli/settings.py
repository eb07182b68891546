"""Settings files of the `tooloop` command, in Claude Code's format, and the command hooks they declare.

Three files, merged (lists joined):

- the user's ``$XDG_CONFIG_HOME/tooloop/settings.json`` (else ``~/.config/tooloop/settings.json``): trusted;
- the project's ``<workspace>/.tooloop/settings.json``, checked in, so NOT trusted: its ``deny`` and ``ask``
  rules apply at once (they only take power away), its ``allow`` rules and hooks only once the user has
  approved them (asked at the start of an interactive session, like ``.mcp.json``; a changed file is asked
  again; ``-p`` and ``tooloop "task"`` never run an unapproved project hook);
- the project-local ``<workspace>/.tooloop/settings.local.json``: the user's own (not checked in), trusted,
  except its hooks (commands that run outside the sandbox) when the file is checked into the repository or
  its hooks changed since tooloop last ran in this workspace (a sandboxed command can write the file): then
  they wait for approval like the project file's.

Each holds ``{"permissions": {"allow": [...], "ask": [...], "deny": [...]}, "hooks": {"PreToolUse": [...],
"PostToolUse": [...], "Stop": [...], "UserPromptSubmit": [...], "SessionStart": [...]}}``; a hook entry is
``{"matcher": "bash|Edit", "hooks": [{"type": "command", "command": "...", "timeout": 60}]}``.

A command hook gets the event as JSON on stdin and runs in the workspace in its own process group, which is
ended (SIGKILL) when it exits or times out, so nothing it started lives on. Exit 0 carries on (the stdout of
``UserPromptSubmit`` and ``SessionStart`` hooks becomes context for the model); exit 2 blocks, with stderr as
the reason the model sees; any other failure is shown and carries on. A JSON answer ``{"decision":
"block", "reason": ...}`` on stdout blocks too.

Must never: run a project hook the user did not approve with exactly that content, or leave a hook's
processes running.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
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


@dataclass
class LoadedSettings:
    """The merged settings of one start."""

    allow: List[str] = field(default_factory=list)
    ask: List[str] = field(default_factory=list)
    deny: List[str] = field(default_factory=list)
    hooks: List[CommandHook] = field(default_factory=list)
    #: The project file's allow rules and hooks, waiting for the user's approval (empty when approved).
    pending: Dict[str, Any] = field(default_factory=dict)
    #: The local file's hooks, waiting for approval (checked in, or changed since tooloop last ran here).
    pending_local: Dict[str, Any] = field(default_factory=dict)
    project_file: Optional[Path] = None
    problems: List[str] = field(default_factory=list)

    def rules(self) -> Dict[str, List[str]]:
        return {"allow": list(self.allow), "ask": list(self.ask), "deny": list(self.deny)}

    def has_rules(self) -> bool:
        return bool(self.allow or self.ask or self.deny)


def _hooks_of(data: Mapping[str, Any], source: str) -> List[CommandHook]:
    out: List[CommandHook] = []
    for event, entries in (data.get("hooks") or {}).items():
        if event not in EVENTS:
            continue   # one of Claude Code's events tooloop does not have (noted by `load`)
        for e in entries:
            matcher = str(e.get("matcher") or "")
            for h in e.get("hooks") or []:
                t = h.get("timeout", DEFAULT_TIMEOUT)
                timeout = float(t) if isinstance(t, (int, float)) and t > 0 else DEFAULT_TIMEOUT
                out.append(CommandHook(event, matcher, str(h["command"]), timeout, source))
    return out


def trusted_part(data: Mapping[str, Any]) -> Dict[str, Any]:
    """What of a project file needs approval: its allow rules and hooks."""
    return {"allow": list((data.get("permissions") or {}).get("allow") or []), "hooks": data.get("hooks") or {}}


def approvals_file(workspace: Path) -> Path:
    return paths.sessions_dir(workspace) / "settings-approved.json"


def content_hash(part: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(part, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _approvals(workspace: Path) -> Dict[str, Any]:
    try:
        data = json.loads(approvals_file(workspace).read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def approved_hash(workspace: Path, which: str = "project") -> Optional[str]:
    value = _approvals(workspace).get(which)
    return str(value) if value else None


def save_approval(workspace: Path, digest: str, which: str = "project") -> None:
    path = approvals_file(workspace)
    data = _approvals(workspace)
    data[which] = digest
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def _tracked_by_git(workspace: Path, path: Path) -> bool:
    """Whether git tracks `path` (it came with the repository). False where there is no git."""
    try:
        # No fsmonitor: a workspace's .git/config (which a sandboxed command can write) could name a program.
        proc = subprocess.run(["git", "-c", "core.fsmonitor=false", "-C", str(workspace), "ls-files",
                               "--error-unmatch", "--", str(path)],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return proc.returncode == 0


def _local_hooks_trusted(workspace: Path, hooks: Mapping[str, Any]) -> bool:
    """The local file's hooks run unconfined, and a sandboxed command may write that file: they count at
    once only when they are what tooloop saw here last time (recorded outside the workspace), or, the
    first time, when the file is the user's own (not checked into the repository). Trusted hooks are
    recorded, so a change made from inside the sandbox is asked about at the next start."""
    digest = content_hash({"hooks": dict(hooks)})
    known = approved_hash(workspace, "local_hooks")
    if known == digest:
        return True
    if known is None and not _tracked_by_git(workspace, local_settings_file(workspace)):
        try:
            save_approval(workspace, digest, "local_hooks")
        except OSError:
            pass
        return True
    return False


def load(workspace: Path, env: Optional[Mapping[str, str]] = None) -> LoadedSettings:
    """Read and merge the three files. The project file's allow rules and hooks count only when approved
    (otherwise they wait in ``pending``). Raises ConfigProblem for a broken user or local file; a broken
    project file is reported in ``problems`` and ignored."""
    s = LoadedSettings()

    def note_other_events(path: Path, data: Mapping[str, Any]) -> None:
        other = [e for e in (data.get("hooks") or {}) if e not in EVENTS]
        if other:
            s.problems.append(f"settings {path}: hooks for {', '.join(other)} are ignored (tooloop has the events "
                              f"{', '.join(EVENTS)})")

    for path, source in ((user_settings_file(env), "user"), (local_settings_file(workspace), "local")):
        data = read_settings(path)
        note_other_events(path, data)
        perms = data.get("permissions") or {}
        s.allow += perms.get("allow") or []
        s.ask += perms.get("ask") or []
        s.deny += perms.get("deny") or []
        if source == "local" and data.get("hooks") and not _local_hooks_trusted(workspace, data["hooks"]):
            s.pending_local = {"hooks": data["hooks"]}
            continue
        s.hooks += _hooks_of(data, source)
    project = project_settings_file(workspace)
    try:
        data = read_settings(project)
    except ConfigProblem as e:
        s.problems.append(f"{e} (the project's settings are ignored)")
        data = {}
    if data:
        note_other_events(project, data)
        s.project_file = project
        perms = data.get("permissions") or {}
        # Rules that only take power away apply at once.
        s.ask += perms.get("ask") or []
        s.deny += perms.get("deny") or []
        part = trusted_part(data)
        if part["allow"] or part["hooks"]:
            if approved_hash(workspace) == content_hash(part):
                s.allow += part["allow"]
                s.hooks += _hooks_of(data, "project")
            else:
                s.pending = part
    return s


def approve_pending(s: LoadedSettings, workspace: Path, question: Callable[[str], Optional[bool]]) -> bool:
    """Ask once about the project's pending allow rules and hooks (and the local file's pending hooks); a yes
    applies and remembers them."""
    if s.pending_local:
        hooks = _hooks_of(s.pending_local, "local")
        shown = "; ".join(f"{h.event}{'(' + h.matcher + ')' if h.matcher else ''} hook: {h.command}" for h in hooks)
        if len(shown) > 600:
            shown = shown[:600] + " ..."
        answer = question(f"{local_settings_file(workspace)} has hooks you have not approved here (checked into "
                          f"the repository, or changed since tooloop last ran): {shown}. Run them? [y/n] ")
        if answer:
            try:
                save_approval(workspace, content_hash(s.pending_local), "local_hooks")
            except OSError:
                pass
            s.hooks += hooks
            s.pending_local = {}
    if not s.pending or s.project_file is None:
        return False
    part = s.pending
    lines = [f"allow {r}" for r in part["allow"]]
    for h in _hooks_of({"hooks": part["hooks"]}, "project"):
        lines.append(f"{h.event}{'(' + h.matcher + ')' if h.matcher else ''} hook: {h.command}")
    shown = "; ".join(lines)
    if len(shown) > 600:
        shown = shown[:600] + " ..."
    answer = question(f"The project's .tooloop/settings.json wants: {shown}. Allow them in this workspace? [y/n] ")
    if not answer:
        return False
    try:
        save_approval(workspace, content_hash(part))
    except OSError:
        pass
    s.allow += part["allow"]
    s.hooks += _hooks_of({"hooks": part["hooks"]}, "project")
    s.pending = {}
    return True


# -- bash prefix rules ------------------------------------------------------------------------------------

def save_local_rule(workspace: Path, rule: str) -> Path:
    """Add an allow rule to the project-local settings file (created when missing)."""
    path = local_settings_file(workspace)
    data = read_settings(path) if path.exists() else {}
    perms = data.setdefault("permissions", {})
    allow = perms.setdefault("allow", [])
    if rule not in allow:
        allow.append(rule)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


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
    """Run one hook command with the event on stdin; (exit code, stdout, stderr). Its whole process group
    ends with it: after it exits, and at its timeout (then the code is -9)."""
    proc = subprocess.Popen(["/bin/sh", "-c", hook.command], cwd=str(cwd), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(json.dumps(payload).encode(), timeout=hook.timeout)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        out, err = proc.communicate()
        code = -9
        err += f"\n(timed out after {hook.timeout:g} s)".encode()
    finally:
        _kill_group(proc.pid)
    return code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass


class Hooks:
    """The command hooks of one session, as the library's hooks and the CLI's prompt filter."""

    def __init__(self, hooks: List[CommandHook], workspace: Path, session_id: str = "",
                 transcript: str = "", show: Optional[Callable[[str], None]] = None):
        self.hooks = hooks
        self.workspace = workspace
        self.session_id = session_id
        self.transcript = transcript
        self.show = show or (lambda _m: None)
        self.stop_active = False

    def of(self, event: str, tool: Optional[str] = None) -> List[CommandHook]:
        return [h for h in self.hooks if h.event == event and (tool is None or matches(h.matcher, tool))]

    def fire(self, event: str, payload: Dict[str, Any], tool: Optional[str] = None) -> HookOutcome:
        out = HookOutcome()
        base = {"session_id": self.session_id, "transcript_path": self.transcript, "cwd": str(self.workspace),
                "hook_event_name": event}
        for hook in self.of(event, tool):
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
