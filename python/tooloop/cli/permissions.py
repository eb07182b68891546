"""Permission policies: the callable handed to ``tooloop.Agent(permission=...)``.

The agent calls the policy before each tool call with the call (``.name``, ``.input``, ``.id``); the
policy answers True (run it), or a string: the reason the call was refused, which the model reads as the
tool's error result. Three policies:

- ``auto``: everything runs (``--yes``).
- ``read-only``: the tools the agent says are read-only (``Agent.tool_info(name).read_only``: read_file
  among the built-ins) run; every other tool is refused with a reason that tells the model what to do
  instead (``--read-only``; the default when stdin is not a terminal).
- ``ask``: read-only tools run; anything else is shown to the user, who answers y (once), n (or a reason),
  or a (always allow this tool for the rest of the process) with a single key, or types a reason.

Which tools are read-only is the library's knowledge, not the CLI's: a policy asks the agent it was bound to
(``bind(agent)``, done by ``app.build_agent``); before that, or for a tool the agent does not know, nothing
counts as read-only.

Whatever the policy, a file tool's write to a path that grants the agent power (``Protected``: ``.tooloop/``,
``.claude/``, ``.mcp.json``, ``.git/hooks/``, ``.git/config``, the user's config folder) is asked every time
(no "always", rule or mode lets it through) and refused where no one can be asked (``-p``, ``--yes``,
read-only), unless the user ran with ``--allow-config-edits``.

Must never: let a mutating call run in read-only mode, let a protected path be written without the user's
answer to that very call, or block forever once the run is cancelled.
The standard library and the tooloop package only.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import select
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Protocol, Set, Tuple, Union

from tooloop import DEFAULT_PROTECTED_PATHS

if TYPE_CHECKING:
    from tooloop import Agent, AllowReadOnly, ToolCall

#: True allows, a string refuses with that reason, ``tooloop.ALLOW_READ_ONLY`` allows with no power to write.
Decision = Union[bool, str, "AllowReadOnly"]
#: A tool call as the library passes it (``tooloop.ToolCall``), or as a dict with the same keys (hooks).
CallLike = Union["ToolCall", Mapping[str, Any]]


class Policy(Protocol):
    """A permission callable with a name for the status bar (``auto``, ``read-only``, ``ask``, ``plan``)."""

    mode: str

    def __call__(self, call: CallLike) -> Decision: ...

READ_ONLY_REASON = (
    "tooloop is in read-only mode, so {name} is disabled (only tools that change nothing run: {allowed}). "
    "Do not retry it: investigate with those, then answer, describing any change or command you would "
    "make instead of making it. The user can allow changes by running tooloop with --yes or on a terminal.")


#: Tools the CLI's policies allow without asking, though the core does not mark them read-only: todo_write
#: changes only the agent's own list, every call a `task` child makes goes through this same policy, and
#: bash_kill only stops a background command the agent itself started (with an approved bash call).
NEVER_ASKED = frozenset({"todo_write", "task", "bash_kill"})


class Classified:
    """What a policy knows of the tools: which are read-only, asked of the agent it is bound to."""

    def __init__(self) -> None:
        self._agent: Optional[Agent] = None

    def bind(self, agent: Agent) -> None:
        """Ask `agent` (a tooloop.Agent) from now on which tools are read-only."""
        self._agent = agent

    def is_read_only(self, name: str) -> bool:
        if name in NEVER_ASKED:
            return True
        if self._agent is None:
            return False
        info = self._agent.tool_info(name)
        return info is not None and bool(info.read_only)

    def read_only_tools(self) -> List[str]:
        if self._agent is None:
            return []
        return [n for n in self._agent.tools if self.is_read_only(n)]


def call_parts(call: CallLike) -> Tuple[str, Dict[str, Any], str]:
    """(name, input, id) of a tool call given as an object with attributes or as a dict."""
    if isinstance(call, dict):
        name, inp, ident = call.get("name"), call.get("input"), call.get("id")
    else:
        name, inp, ident = (getattr(call, "name", None), getattr(call, "input", None),
                            getattr(call, "id", None))
    if isinstance(inp, str):
        try:
            inp = json.loads(inp)
        except ValueError:
            inp = {"input": inp}
    return str(name or "?"), inp if isinstance(inp, dict) else {"input": inp}, str(ident or "")


class AutoPolicy(Classified):
    """Allow every call (``--yes``)."""

    mode = "auto"

    def __call__(self, call: CallLike) -> Decision:
        return True


class ReadOnlyPolicy(Classified):
    """Allow only the tools that change nothing."""

    mode = "read-only"

    def __call__(self, call: CallLike) -> Decision:
        name, _, _ = call_parts(call)
        if self.is_read_only(name):
            return True
        return READ_ONLY_REASON.format(name=name, allowed=", ".join(self.read_only_tools()) or "none")


def parse_answer(text: Optional[str]) -> Tuple[str, str]:
    """The user's answer to a permission question: ("allow" | "always" | "deny", reason).

    y/yes/Enter-less "y" allow once; a/always allow the tool from now on; n/no or an empty answer deny;
    any other text denies the call with that text as the reason the model reads."""
    if text is None:
        return "deny", ""
    answer = text.strip()
    low = answer.lower()
    if low in ("y", "yes"):
        return "allow", ""
    if low in ("a", "always"):
        return "always", ""
    if low in ("", "n", "no"):
        return "deny", ""
    return "deny", answer


class Interrupted(Exception):
    """The question was abandoned because the run was cancelled."""


class AskPolicy(Classified):
    """Ask the user before each call that can change something.

    `show(name, input, id)` presents the call; `read_answer()` returns the typed line, None when input is
    closed, or raises Interrupted when the run was cancelled while waiting."""

    mode = "ask"

    def __init__(self, show: Callable[..., None], read_answer: Callable[[], Optional[str]]):
        super().__init__()
        self._show = show
        self._read = read_answer
        self._lock = threading.Lock()  # one question on the screen at a time, even with parallel tools
        self.always: Set[str] = set()
        #: bash prefix rules answered "always" in this process (``bash(npm test:*)``).
        self.bash_rules: List[str] = []
        #: Offered each new bash prefix rule (the CLI asks whether to save it to settings.local.json).
        self.offer_rule: Optional[Callable[[str], None]] = None

    def __call__(self, call: CallLike) -> Decision:
        return self.ask(call)

    def _bash_allowed(self, inp: Dict[str, Any]) -> bool:
        if not self.bash_rules:
            return False
        from tooloop.rules import match_rules

        d = match_rules({"allow": self.bash_rules}, "bash", inp, ".")
        return d is not None and d[0] == "allow"

    def ask(self, call: CallLike, force: bool = False, once: bool = False) -> Decision:
        """Ask about `call`; with `force` (a settings rule says ask) even for a read-only or an "always"
        tool; with `once` (a protected path) an "always" answer allows this call only and is not kept."""
        force = force or once
        name, inp, ident = call_parts(call)
        if not force and (name in self.always or self.is_read_only(name)
                          or (name == "bash" and self._bash_allowed(inp))):
            return True
        with self._lock:
            if not force and (name in self.always or (name == "bash" and self._bash_allowed(inp))):
                return True  # answered "always" while this call waited for the lock
            begin = getattr(self._read, "begin", None)
            if begin is not None:
                begin()
            self._show(name, inp, ident)
            try:
                line = self._read()
            except Interrupted:
                return "The run was interrupted before the user answered; the call was not run."
        if line is None:
            return f"No answer from the user (input closed), so the {name} call was not run."
        verdict, reason = parse_answer(line)
        if verdict == "always" and once:
            verdict = "allow"
        if verdict == "always":
            if name == "bash":
                # For bash, "always" means commands with this prefix, never every command.
                rule = prefix_rule(str(inp.get("command") or ""))
                if rule is not None and rule not in self.bash_rules:
                    self.bash_rules.append(rule)
                    if self.offer_rule is not None:
                        try:
                            self.offer_rule(rule)
                        except Exception:
                            pass
                return True
            self.always.add(name)
            return True
        if verdict == "allow":
            return True
        if reason:
            return f"The user declined this {name} call: {reason}"
        return (f"The user declined this {name} call. Do not retry it as is: ask the user what they "
                f"want, or take another approach.")


class TerminalReader:
    """Reads one answer from a terminal file descriptor, giving up when `abort` is set.

    On a terminal the answer is a single key: y, n or a answer at once, without Enter; any other key starts
    a line of text (the reason for a refusal), ended by Enter, with Backspace working. Keys typed before
    the question appeared are discarded (`begin`), so typeahead never approves a call. Without termios (not
    a terminal) it reads a line. Polls with select so that a Ctrl+C handled on another thread (which sets
    `abort`) frees a question that is waiting, instead of leaving a thread blocked in read() forever."""

    def __init__(self, fd: int = 0, abort: Optional[threading.Event] = None, poll: float = 0.05,
                 echo: Optional[Callable[[str], None]] = None, keys: str = "yna"):
        self.fd = fd
        #: The keys that answer at once (any other key starts a line of text).
        self.keys = keys
        self.abort = abort or threading.Event()
        self.poll = poll
        self.echo = echo or self._echo_to_fd
        self._saved: Optional[List[Any]] = None

    def _echo_to_fd(self, text: str) -> None:
        try:
            os.write(self.fd, text.encode("utf-8", "replace"))
        except OSError:
            pass

    def begin(self) -> None:
        """Before the question is shown: keys on, echo off, line buffering off; pending input dropped."""
        try:
            import termios

            saved = termios.tcgetattr(self.fd)
            keys = termios.tcgetattr(self.fd)
            keys[3] &= ~(termios.ICANON | termios.ECHO)   # ISIG stays: Ctrl+C still interrupts
            keys[6][termios.VMIN] = 1
            keys[6][termios.VTIME] = 0
            termios.tcflush(self.fd, termios.TCIFLUSH)
            termios.tcsetattr(self.fd, termios.TCSANOW, keys)
            self._saved = saved
        except Exception:  # ImportError, termios.error (not a terminal), OSError: read a line instead
            self._saved = None

    def _restore(self) -> None:
        if self._saved is None:
            return
        try:
            import termios

            termios.tcsetattr(self.fd, termios.TCSANOW, self._saved)
        except Exception:
            pass
        self._saved = None

    def __call__(self) -> Optional[str]:
        try:
            if self._saved is not None:
                return self._read_keys()
            return self._read_line()
        finally:
            self._restore()

    def _wait(self) -> bool:
        if self.abort.is_set():
            raise Interrupted()
        try:
            ready, _, _ = select.select([self.fd], [], [], self.poll)
        except InterruptedError:
            return False
        return bool(ready)

    def _read_keys(self) -> Optional[str]:
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        typed = ""
        while True:
            if not self._wait():
                continue
            chunk = os.read(self.fd, 1024)
            if not chunk:
                return typed or None
            text = decoder.decode(chunk)
            i = 0
            while i < len(text):
                ch = text[i]
                i += 1
                # A key answers alone; pasted or fast-typed text ("yes, but ...") is a line.
                if not typed and ch.lower() in self.keys and (i == len(text) or text[i] in "\r\n"):
                    self.echo(ch + "\n")
                    return ch
                if ch in ("\r", "\n"):
                    self.echo("\n")
                    return typed
                if ch in ("\x7f", "\b"):
                    if typed:
                        typed = typed[:-1]
                        self.echo("\b \b")
                elif ch == "\x04":  # Ctrl+D
                    if not typed:
                        self.echo("\n")
                        return None
                elif ch == "\x1b":  # an arrow or function key: ignore its whole sequence
                    break
                elif ch.isprintable():
                    typed += ch
                    self.echo(ch)

    def _read_line(self) -> Optional[str]:
        buf = b""
        while True:
            if not self._wait():
                continue
            chunk = os.read(self.fd, 1024)
            if not chunk:
                return buf.decode("utf-8", "replace") if buf else None
            buf += chunk
            if b"\n" in buf or b"\r" in buf:
                return buf.splitlines()[0].decode("utf-8", "replace")


def choose(mode: Optional[str], stdin_is_tty: bool) -> str:
    """The policy name: an explicit mode wins; otherwise ask on a terminal, read-only without one."""
    if mode:
        return mode
    return "ask" if stdin_is_tty else "read-only"


# -- protected paths ------------------------------------------------------------------------------------

#: Inside the workspace, what decides what the agent may run: tooloop's and Claude Code's settings, hooks
#: and skills, the project's MCP servers, git's hooks and configuration (``core.hooksPath``, aliases,
#: ``core.fsmonitor`` run programs). ``.git/hooks`` and ``.git/config`` count in nested repositories too.
#: The library's own list (``tooloop.DEFAULT_PROTECTED_PATHS``, what bash's sandbox shows read-only).
PROTECTED_IN_WORKSPACE = tuple(DEFAULT_PROTECTED_PATHS)

#: The built-in tools that write a file, and the input fields that name it (the core's ``builtin/files.rs``): what
#: counts before a policy is bound to its agent, which then says it by each tool's kind.
WRITE_TOOLS: Dict[str, Tuple[str, ...]] = {"write_file": ("path",), "edit_file": ("path",)}

PROTECTED_REASON = (
    "{what} is protected: it decides what the agent may run (settings, hooks, MCP servers, git hooks and "
    "configuration), so {name} may not change it without the user's approval of this very call, and no one "
    "can approve it here. Do not retry it or work around it (bash cannot write it either): finish the rest "
    "of the task and tell the user the exact change you would make. The user can allow such edits by "
    "running tooloop with --allow-config-edits.")


def protected_paths(workspace: Union[str, "os.PathLike[str]"],
                    env: Optional[Mapping[str, str]] = None) -> List[str]:
    """The protected paths of `workspace` as absolute paths, the user's config folder last: what the file
    tools may not write (bash's sandbox gets them through ``protection_options``)."""
    from .features import user_config_dir

    ws = Path(workspace)
    return [str(ws / p) for p in PROTECTED_IN_WORKSPACE] + [str(user_config_dir(env))]


def protection_options(allow_config_edits: bool, workspace: Union[str, "os.PathLike[str]"],
                       env: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """``protected_paths`` for ``tooloop.Agent`` (the paths bash's sandbox shows read-only): ``[]`` under
    --allow-config-edits; otherwise the library's default list, plus the user's config folder and tooloop's
    data folder (approvals, sessions) when they lie inside the workspace (tooloop run in $HOME); nothing to
    say when neither does (the library's default holds)."""
    if allow_config_edits:
        return {"protected_paths": []}
    from . import paths
    from .features import user_config_dir

    root = Path(workspace).resolve()
    extra: List[str] = []
    for folder in (user_config_dir(env), paths.data_dir(env)):
        try:
            rel = Path(folder).resolve().relative_to(root)
        except (ValueError, OSError, RuntimeError):
            continue
        if rel.parts:
            extra.append(str(rel))
    return {"protected_paths": list(PROTECTED_IN_WORKSPACE) + extra} if extra else {}


def _fold(name: str) -> str:
    """A name as the filesystem compares it: case-insensitive on macOS and Windows (by default)."""
    return name.lower() if sys.platform in ("darwin", "win32") else name


def _inside(path: str, folder: str) -> Optional[List[str]]:
    """The parts of `path` below `folder` (both resolved), or None when it is not inside."""
    if path == folder:
        return []
    prefix = folder.rstrip(os.sep) + os.sep
    if not path.startswith(prefix):
        return None
    return path[len(prefix):].split(os.sep)


class Protected:
    """Which tool calls write a protected path (see PROTECTED_IN_WORKSPACE and the user's config folder).

    The path is judged as the file tools will open it: taken from the workspace when relative, with every
    symlink and ``..`` resolved (``cfg/x`` where ``cfg -> .tooloop``, ``sub/../.git/config``). A tool writes
    a path when the agent says the tool is of kind "write" (the built-in write_file and edit_file, or a host's
    own): its ``path_field`` names it. Before ``bind``, the built-in file tools (WRITE_TOOLS) count."""

    def __init__(self, workspace: Union[str, "os.PathLike[str]"], config_dir: Optional[Path] = None):
        from .features import user_config_dir

        self.workspace = os.path.realpath(os.fspath(workspace))
        self.config_dir = os.path.realpath(os.fspath(config_dir or user_config_dir()))
        self._agent: Optional[Agent] = None

    def bind(self, agent: Agent) -> None:
        self._agent = agent

    def _fields(self, name: str) -> Tuple[str, ...]:
        if self._agent is None:
            # Not bound yet (no agent to ask): the built-in file tools, so no protected path slips through.
            return WRITE_TOOLS.get(name, ())
        info = self._agent.tool_info(name)
        if info is not None and info.kind == "write" and info.path_field:
            return (str(info.path_field),)
        return ()

    def what(self, name: str, inp: Mapping[str, Any]) -> Optional[str]:
        """The protected path the call `name(inp)` would write, as the user knows it (``.tooloop/``, the
        config folder), or None."""
        for field in self._fields(name):
            raw = inp.get(field)
            if isinstance(raw, str) and raw:
                hit = self.judge(raw)
                if hit is not None:
                    return hit
        return None

    def judge(self, raw: str) -> Optional[str]:
        """What protected path `raw` (a path a file tool was given) lands in, or None."""
        fold = _fold
        try:
            real = os.path.realpath(os.path.join(self.workspace, raw))
        except (OSError, ValueError):
            return "this path"  # cannot be resolved: treat as protected rather than guess
        if _inside(fold(real), fold(self.config_dir)) is not None:
            return f"the user's config folder {self.config_dir}"
        parts = _inside(real, self.workspace)
        if parts is None:
            return None
        low = [fold(p) for p in parts]
        if low and low[0] in (".tooloop", ".claude"):
            return f"{parts[0]}/"
        if low == [".mcp.json"]:
            return ".mcp.json"
        for i in range(len(low) - 1):
            if low[i] == ".git" and low[i + 1] == "hooks":
                return "/".join(parts[: i + 2]) + "/"
            if low[i] == ".git" and low[i + 1] == "config" and i + 2 == len(low):
                return "/".join(parts[: i + 2])
        return None


class Observed:
    """Wraps a policy so every call it sees is also reported to `note(id, name, input)` (when given), and
    each refusal to `denied(id, reason)` (the renderer shows that reason). Keeps the policy's `mode`.

    With `protected` (a Protected), a call that writes a protected path never reaches the policy's own
    answer: the settings' deny rules still refuse it, then the user is asked about this call alone (when
    `can_ask` and the policy asks: no "always", no allow rule), and otherwise it is refused with
    PROTECTED_REASON."""

    def __init__(self, policy: Policy, note: Optional[Callable[[str, str, Dict[str, Any]], None]] = None,
                 denied: Optional[Callable[[str, str], None]] = None, protected: Optional[Protected] = None,
                 can_ask: bool = True):
        self.policy = policy
        self.note = note
        #: Called with (id, reason) when the policy refuses a call (the renderer shows that reason).
        self.denied = denied
        self.mode = getattr(policy, "mode", "custom")
        self.protected = protected
        self.can_ask = can_ask

    def bind(self, agent: Agent) -> None:
        """Pass the agent on to the wrapped policy (see ``Classified.bind``)."""
        bind = getattr(self.policy, "bind", None)
        if bind is not None:
            bind(agent)
        if self.protected is not None:
            self.protected.bind(agent)

    def _guarded(self, call: CallLike, name: str, inp: Dict[str, Any], what: str) -> Decision:
        settings = getattr(self.policy, "settings", None)
        workspace = getattr(self.policy, "workspace", None)
        deny = list(getattr(settings, "deny", None) or [])
        if deny and workspace is not None:
            from tooloop.rules import match_rules

            d = match_rules({"deny": deny}, name, inp, workspace)
            if d is not None:
                return f"The settings deny this call (rule {d[1]}). Do not retry it; take another approach."
        ask = getattr(self.policy, "ask", None) if self.can_ask and self.mode == "ask" else None
        if ask is not None:
            return ask(call, once=True)  # type: ignore[no-any-return]
        return PROTECTED_REASON.format(what=what, name=name)

    def __call__(self, call: CallLike) -> Decision:
        name, inp, ident = call_parts(call)
        if self.note is not None:
            try:
                self.note(ident, name, inp)
            except Exception:
                pass
        what = self.protected.what(name, inp) if self.protected is not None else None
        decision = self._guarded(call, name, inp, what) if what is not None else self.policy(call)
        if isinstance(decision, str) and self.denied is not None:
            try:
                self.denied(ident, decision)
            except Exception:
                pass
        return decision


#: Commands whose second word is a subcommand: an "always" for `npm test` allows `npm test ...`, not `npm`.
SUBCOMMAND_TOOLS = frozenset({
    "git", "npm", "pnpm", "yarn", "bun", "deno", "npx", "cargo", "go", "make", "docker", "podman", "kubectl",
    "pip", "pip3", "uv", "poetry", "pipenv", "bundle", "rake", "gradle", "mvn", "dotnet", "brew", "apt",
    "apt-get", "systemctl", "gh", "terraform", "helm", "conda", "rustup", "just", "nix", "swift", "mix", "composer",
})


def prefix_rule(command: str) -> Optional[str]:
    """The rule an "always" answer saves for a bash command: its first word, plus the second when the first
    is a tool with subcommands (``npm test -x`` → ``bash(npm test:*)``, ``echo hi`` → ``bash(echo:*)``);
    None for a compound command."""
    from tooloop.rules import split_command

    parts = split_command(command)
    if len(parts) != 1:
        return None
    words = parts[0].split()
    if not words:
        return None
    sub = words[0].rsplit("/", 1)[-1] in SUBCOMMAND_TOOLS and len(words) > 1 and re.fullmatch(
        r"[A-Za-z][\w.:-]*", words[1])
    prefix = words[:2] if sub else words[:1]
    return f"bash({' '.join(prefix)}:*)"
