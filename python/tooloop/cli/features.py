"""What the CLI sets up around the agent: the bash sandbox mode (as the library can enforce it), planning,
the subagent types, the skill folders and MCP servers (with the once-per-workspace approval of a project's
``.mcp.json``).

Standard library only. Must never: start a server from a project's ``.mcp.json`` that the user did not
approve with exactly that configuration and exactly the workspace files it runs (the model can
rewrite ``server.py``), or ask for an approval without showing every env value and header the server gets.
Values the file spells out are shown as written; a value taken from one of the user's secret variables is
named and shown shortened, never whole.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from . import paths
from .config import ConfigProblem

SANDBOX_MODES = ("workspace-write", "read-only", "off")


def landlock_abi() -> Optional[int]:
    """The kernel's Landlock ABI version, or None where bash cannot be confined (not Linux, Landlock off):
    the library's answer (``tooloop.sandbox_support``), the one its sandbox acts on."""
    import tooloop

    return tooloop.sandbox_support()


def sandbox_mode(requested: Optional[str], read_only: bool,
                 probe: Callable[[], Optional[int]] = landlock_abi) -> Tuple[str, str]:
    """(mode for the agent, note for the header line). Where the kernel cannot confine bash, a mode asked
    for with --sandbox (workspace-write, read-only, required) refuses to start (ConfigProblem), and the
    default becomes "off" with a one-line note, so the model is never told it is confined when it is not
    (the library refuses a mode it cannot enforce). --read-only defaults to the read-only sandbox."""
    mode = requested or ("read-only" if read_only else "workspace-write")
    if mode == "off":
        return "off", ""
    available = probe() is not None
    if requested is not None and not available:
        raise ConfigProblem(f"--sandbox {requested}: this kernel cannot confine bash (Landlock is not "
                            "available); run with --sandbox off to accept unconfined commands")
    if mode == "required":
        mode = "read-only" if read_only else "workspace-write"
    if not available:
        return "off", f"{mode} unavailable: no Landlock on this kernel, bash runs unconfined"
    return mode, ""


# -- subagents and skills -------------------------------------------------------------------------------

EXPLORE_DESCRIPTION = (
    "Explores the codebase read-only: finds files, reads code, runs read-only commands (grep, ls, git log, "
    "tests that write nothing) and reports what it found. It never writes or edits files. Use it for "
    "searches and investigations whose details the main conversation does not need.")
EXPLORE_SYSTEM = (
    "You are an exploration agent working for a coding agent. Investigate what you are asked using read_file, "
    "grep and glob (to search), and bash (read-only commands only: never create, change or delete files, never "
    "install anything). "
    "Look before you answer; never guess. When you are done, report concisely: the facts found, with file "
    "paths and line numbers, and nothing else.")
GENERAL_DESCRIPTION = (
    "A general-purpose agent with all the tools (it can edit files and run commands). Use it for a "
    "self-contained piece of work whose steps the main conversation does not need to see.")


def subagents() -> Dict[str, Any]:
    import tooloop

    return {
        "explore": tooloop.SubAgent(EXPLORE_DESCRIPTION, system=EXPLORE_SYSTEM, tools=["read_file", "grep", "glob", "bash"],
                                    sandbox="read-only"),
        "general": tooloop.SubAgent(GENERAL_DESCRIPTION),
    }


def user_config_dir(env: Optional[Mapping[str, str]] = None) -> Path:
    env = os.environ if env is None else env
    if env.get("XDG_CONFIG_HOME"):
        return Path(env["XDG_CONFIG_HOME"]).expanduser() / "tooloop"
    return Path.home() / ".config" / "tooloop"


def skill_dirs(workspace: Path, env: Optional[Mapping[str, str]] = None) -> List[str]:
    return [str(Path(workspace) / ".tooloop" / "skills"), str(user_config_dir(env) / "skills")]


# -- MCP ------------------------------------------------------------------------------------------------

def read_mcp_file(path: Path) -> Dict[str, Dict[str, Any]]:
    """The servers of a Claude Code style file ``{"mcpServers": {name: config}}``. Raises ConfigProblem."""
    from .config import read_config_text

    text = read_config_text(Path(path), "MCP config")
    if text is None:
        raise ConfigProblem(f"cannot read MCP config {path}: No such file or directory")
    try:
        data = json.loads(text)
    except (ValueError, UnicodeDecodeError) as e:
        raise ConfigProblem(f"MCP config {path} is not valid JSON: {e}") from None
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict) or not all(isinstance(v, dict) for v in servers.values()):
        raise ConfigProblem(f"MCP config {path} must be {{\"mcpServers\": {{\"name\": {{\"command\": ...}}}}}}")
    return {str(k): dict(v) for k, v in servers.items()}


def config_hash(config: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def approvals_file(workspace: Path) -> Path:
    return paths.sessions_dir(workspace) / "mcp-approved.json"


def load_approvals(workspace: Path) -> Dict[str, str]:
    if not paths.approvals_kept_apart(workspace):
        return {}   # the model could have written them
    try:
        data = json.loads(approvals_file(workspace).read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def save_approvals(workspace: Path, approvals: Mapping[str, str]) -> None:
    from .private_files import write_private

    if not paths.approvals_kept_apart(workspace):
        return

    path = approvals_file(workspace)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_private(path, json.dumps(dict(approvals), indent=1, sort_keys=True))


# What executes: a project server's approval covers the workspace files it runs -------------------------

PIN_MAX_FILES = 200            # files hashed per server (a folder argument, a script's sibling modules)
PIN_MAX_BYTES = 64 * 1024 * 1024   # bytes hashed per file (the size counts beyond that)
_VAR = re.compile(r"\$\{([^}:]*)(?::-([^}]*))?\}")
_SECRET_PARTS = ("KEY", "SECRET", "TOKEN", "PASSWORD", "CREDENTIAL", "AUTH", "COOKIE")


def expand_vars(text: str, env: Optional[Mapping[str, str]] = None) -> str:
    """`${VAR}` and `${VAR:-default}` as the library expands them when the server starts (unset: empty)."""
    env = os.environ if env is None else env
    return _VAR.sub(lambda m: env.get(m.group(1)) or (m.group(2) or ""), text)


_PATH_WORD = re.compile(r"[^\s'\"=;,()\[\]{}<>|&`$]+")


def _inside(path: Path, workspace: Path) -> bool:
    try:
        path.resolve().relative_to(workspace.resolve())
        return True
    except (ValueError, OSError, RuntimeError):
        return False


def pinned_files(config: Mapping[str, Any], workspace: Path,
                 env: Optional[Mapping[str, str]] = None) -> List[Path]:
    """The workspace files a stdio server executes: its program when it lies in the workspace, every file its
    arguments name there (``--flag=path`` too; a folder: the files in it), ``-m module``'s source, and the
    sibling files of each script with the same suffix (the modules it most likely imports). Sorted, bounded
    by PIN_MAX_FILES."""
    if config.get("url") or not config.get("command"):
        return []
    workspace = Path(workspace)
    cmd = config.get("command")
    argv = [expand_vars(str(a), env) for a in ([cmd] if isinstance(cmd, str) else list(cmd or []))]
    argv += [expand_vars(str(a), env) for a in (config.get("args") or [])]
    if not argv:
        return []
    cwd = config.get("cwd")
    base = workspace / expand_vars(str(cwd), env) if cwd else workspace
    found: "set[Path]" = set()
    # What the command names itself is always pinned; siblings and folder contents fill the rest.
    named: "set[Path]" = set()

    def add_file(p: Path, siblings: bool) -> None:
        if not p.is_file() or not _inside(p, workspace):
            return
        named.add(p.resolve())
        if siblings and p.suffix:
            for q in sorted(p.resolve().parent.glob("*" + p.suffix))[:PIN_MAX_FILES]:
                if q.is_file():
                    found.add(q.resolve())

    def add_path(p: Path) -> None:
        if p.is_dir() and _inside(p, workspace):
            for n, q in enumerate(sorted(p.rglob("*"))):
                if n >= PIN_MAX_FILES * 10 or len(found) >= PIN_MAX_FILES:
                    break
                if q.is_file() and ".git" not in q.parts:
                    found.add(q.resolve())
        else:
            add_file(p, siblings=True)

    program = argv[0]
    if "/" in program:
        add_file(base / program, siblings=False)
    else:
        path_var = (env or os.environ).get("PATH", os.defpath)
        which = shutil.which(program, path=path_var)
        if which:
            add_file(Path(which), siblings=False)
    after_m = False
    for arg in argv[1:]:
        if after_m:
            mod = arg.replace(".", "/")
            add_path(base / (mod + ".py"))
            add_path(base / mod)
            after_m = False
            continue
        if arg == "-m":
            after_m = True
            continue
        candidates = [arg]
        if arg.startswith("-") and "=" in arg:
            candidates.append(arg.split("=", 1)[1])
        for c in candidates:
            if c and not c.startswith("-"):
                try:
                    add_path(base / c)
                except OSError:
                    pass
        # A script inside an argument (`sh -c "python3 server.py"`, `node -e "require('./srv.js')"`): each
        # path-like word that names a workspace file is pinned too.
        if len(arg) <= 4096 and any(ch in arg for ch in " ;'\"()"):
            for word in _PATH_WORD.findall(arg)[:PIN_MAX_FILES]:
                if word not in (".", "..") and not word.startswith("-"):
                    try:
                        add_file(base / word, siblings=True)
                    except OSError:
                        pass
    rest = sorted(found - named)[:max(0, PIN_MAX_FILES - len(named))]
    return sorted(named | set(rest))


def file_digest(path: Path) -> str:
    """The SHA-256 of a pinned file's first PIN_MAX_BYTES and its size, or a word saying why there is none:
    only a regular file, opened without following a final symlink and without blocking (a FIFO named by a
    server or hook must not hang the start)."""
    h = hashlib.sha256()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if st.st_mode & 0o170000 != 0o100000:
                return "not a regular file"
            left = PIN_MAX_BYTES
            while left > 0:
                chunk = f.read(min(1 << 20, left))
                if not chunk:
                    break
                h.update(chunk)
                left -= len(chunk)
            h.update(b"\0" + str(st.st_size).encode())
    except OSError as e:
        return f"unreadable: {e.errno}"
    return h.hexdigest()


def approval_hash(config: Mapping[str, Any], workspace: Path, env: Optional[Mapping[str, str]] = None) -> str:
    """What an approval pins: the configuration, and the content of every workspace file the server runs
    (pinned_files). A server that runs nothing from the workspace is pinned by its configuration alone
    (config_hash, as approvals stored before this were)."""
    files = pinned_files(config, workspace, env)
    if not files:
        return config_hash(config)
    h = hashlib.sha256(config_hash(config).encode())
    for f in files:
        h.update(b"\0" + str(f).encode() + b"\0" + file_digest(f).encode())
    return "files:" + h.hexdigest()


def _is_secret_name(name: str) -> bool:
    upper = name.upper()
    return any(p in upper for p in _SECRET_PARTS) or upper.startswith("AWS_") and upper != "AWS_REGION"


def _shorten(value: str) -> str:
    if len(value) <= 8:
        return "*" * len(value)
    return f"{value[:4]}…{value[-2:]} ({len(value)} characters)"


def _spell_out(name: str, value: str, env: Mapping[str, str], sep: str) -> str:
    """`value` as written (the file shows it anyway), then each `${VAR}` it takes from the user's environment,
    spelled out: shortened when the variable, or the entry it goes into, is secret."""
    return f"{name}{sep}{value}" + _var_notes(value, env, _is_secret_name(name))


def _var_notes(value: str, env: Mapping[str, str], secret_entry: bool = False) -> str:
    """`   ← ${VAR} = …; …` for each `${VAR}` in `value` (empty when there is none)."""
    notes = []
    for m in _VAR.finditer(value):
        var, default = m.group(1), m.group(2)
        got = env.get(var)
        if got is None or got == "":
            notes.append(f"${{{var}}} is not set" + (f" (default {default!r})" if default is not None else ""))
        elif secret_entry or _is_secret_name(var):
            notes.append(f"${{{var}}} = YOUR {var}, a secret: {_shorten(got)}")
        else:
            notes.append(f"${{{var}}} = {got!r}")
    return "   ← " + "; ".join(notes) if notes else ""


def describe_for_approval(config: Mapping[str, Any], workspace: Path,
                          env: Optional[Mapping[str, str]] = None) -> str:
    """The lines of the approval question: what runs (or where it connects), the workspace files pinned, and
    every env value and header the server gets, with `${VAR}` references spelled out."""
    env = os.environ if env is None else env
    # The command line and the URL carry `${VAR}`s too (a secret in a query string or an argument leaves the
    # machine as surely as a header): spelled out the same way, secrets shortened.
    lines = [f"  runs: {describe(config)}" if not config.get("url") else f"  connects to: {config['url']}"]
    cmd = config.get("command")
    words = [cmd] if isinstance(cmd, str) else list(cmd or [])
    lines[0] += _var_notes(" ".join(str(w) for w in words + list(config.get("args") or []) + [config.get("url") or ""]),
                           env)
    files = pinned_files(config, workspace, env)
    if files:
        shown = ", ".join(str(f.relative_to(Path(workspace).resolve())) for f in files[:8])
        more = f" and {len(files) - 8} more" if len(files) > 8 else ""
        lines.append(f"  workspace files it runs (a change asks again): {shown}{more}")
    if config.get("cwd"):
        lines.append(f"  in folder: {config['cwd']}")
    for k, v in sorted((config.get("env") or {}).items()):
        lines.append("  env " + _spell_out(str(k), str(v), env, "="))
    for k, v in sorted((config.get("headers") or {}).items()):
        lines.append("  header " + _spell_out(str(k), str(v), env, ": "))
    return "\n".join(lines)


def describe(config: Mapping[str, Any]) -> str:
    """What a server runs, without its env or header values."""
    if config.get("url"):
        return str(config["url"])
    cmd = config.get("command")
    argv = ([cmd] if isinstance(cmd, str) else list(cmd or [])) + list(config.get("args") or [])
    return " ".join(str(a) for a in argv)


class McpSetup:
    """Which MCP servers this start runs: trusted ones (--mcp-config) and approved project ones."""

    def __init__(self, workspace: Path, trusted_files: List[str]):
        self.workspace = workspace
        self.trusted: Dict[str, Dict[str, Any]] = {}
        for f in trusted_files:
            self.trusted.update(read_mcp_file(Path(f).expanduser()))
        project_file = workspace / ".mcp.json"
        self.project: Dict[str, Dict[str, Any]] = {}
        self.project_problem = ""
        if project_file.is_file():
            try:
                self.project = read_mcp_file(project_file)
            except ConfigProblem as e:
                self.project_problem = str(e)
        self.approvals = load_approvals(workspace)
        self.skipped: List[str] = []   # project servers not started (not approved, or declined)
        self._hashes: Dict[str, str] = {}

    def approved(self, name: str) -> bool:
        config = self.project.get(name)
        return config is not None and self.approvals.get(name) == self._hash(name)

    def _hash(self, name: str) -> str:
        if name not in self._hashes:
            self._hashes[name] = approval_hash(self.project[name], self.workspace)
        return self._hashes[name]

    def pending(self) -> List[str]:
        return [n for n in self.project if n not in self.trusted and not self.approved(n)]

    def ask(self, question: Callable[[str], Optional[bool]]) -> None:
        """Ask about each project server not yet approved; `question(text)` returns True (yes), False (no)
        or None (no answer: skipped, asked again next time). A yes is stored."""
        changed = False
        for name in self.pending():
            config = self.project[name]
            changed_since = " (changed since you approved it)" if name in self.approvals else ""
            answer = question(f"The project's .mcp.json wants to start MCP server '{name}'{changed_since}:\n"
                              f"{describe_for_approval(config, self.workspace)}\n"
                              "Allow it in this workspace? [y/n] ")
            if answer:
                self.approvals[name] = self._hash(name)
                changed = True
        if changed:
            try:
                save_approvals(self.workspace, self.approvals)
            except OSError:
                pass

    def servers(self) -> Dict[str, Dict[str, Any]]:
        chosen = {n: self._pinned(c) for n, c in self.project.items() if self.approved(n)}
        chosen.update(self.trusted)
        self.skipped = [n for n in self.project if n not in chosen]
        return chosen

    def _pinned(self, config: Dict[str, Any]) -> Dict[str, Any]:
        """The configuration with the workspace files it runs pinned by content, so that the library refuses
        a start (a restart later in the session too) once the model has rewritten them."""
        files = pinned_files(config, self.workspace)
        if not files:
            return config
        pins: Dict[str, str] = {}
        for f in files:
            h = hashlib.sha256()
            try:
                with open(f, "rb") as fh:
                    for chunk in iter(lambda: fh.read(1 << 20), b""):
                        h.update(chunk)
            except OSError:
                continue
            pins[str(f)] = h.hexdigest()
        return dict(config, pinned_files=pins)

    def revoke(self, name: str) -> bool:
        if name not in self.approvals:
            return False
        del self.approvals[name]
        save_approvals(self.workspace, self.approvals)
        return True

    def source(self, name: str) -> str:
        if name in self.trusted:
            return "--mcp-config"
        if self.approved(name):
            return ".mcp.json, approved"
        return ".mcp.json, not approved"
