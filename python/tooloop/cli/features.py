"""The round-two features as the CLI sets them up: the bash sandbox mode, planning, the subagent types, the
skill folders and MCP servers (with the once-per-workspace approval of a project's ``.mcp.json``).

Standard library only. Must never: start a server from a project's ``.mcp.json`` that the user did not
approve with exactly that configuration, or print an MCP server's ``env`` or ``headers`` values (tokens).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from . import paths
from .config import ConfigProblem

SANDBOX_MODES = ("workspace-write", "read-only", "off")


def landlock_abi() -> Optional[int]:
    """The kernel's Landlock ABI version, or None where bash cannot be confined (not Linux, Landlock off).

    Asks the kernel the way the core does: ``landlock_create_ruleset(NULL, 0, VERSION)`` (syscall 444 on
    every Linux architecture)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        abi = int(libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1)))
    except (OSError, AttributeError, ValueError):
        return None
    return abi if abi > 0 else None


def sandbox_mode(requested: Optional[str], read_only: bool,
                 probe: Callable[[], Optional[int]] = landlock_abi) -> Tuple[str, str]:
    """(mode for the agent, note for the header line). `required` is workspace-write that refuses to
    start (ConfigProblem) where the kernel cannot confine bash; --read-only defaults to the read-only
    sandbox."""
    mode = requested or ("read-only" if read_only else "workspace-write")
    if mode == "off":
        return "off", ""
    available = probe() is not None
    if mode == "required":
        if not available:
            raise ConfigProblem("--sandbox required: this kernel cannot confine bash (Landlock is not "
                                "available); run with --sandbox off to accept unconfined commands")
        mode = "read-only" if read_only else "workspace-write"
    if not available:
        return mode, "Landlock unavailable on this kernel: bash runs unconfined"
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
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigProblem(f"cannot read MCP config {path}: {e.strerror or e}") from None
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
    try:
        data = json.loads(approvals_file(workspace).read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def save_approvals(workspace: Path, approvals: Mapping[str, str]) -> None:
    path = approvals_file(workspace)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(dict(approvals), f, indent=1, sort_keys=True)
    os.replace(tmp, path)


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

    def approved(self, name: str) -> bool:
        config = self.project.get(name)
        return config is not None and self.approvals.get(name) == config_hash(config)

    def pending(self) -> List[str]:
        return [n for n in self.project if n not in self.trusted and not self.approved(n)]

    def ask(self, question: Callable[[str], Optional[bool]]) -> None:
        """Ask about each project server not yet approved; `question(text)` returns True (yes), False (no)
        or None (no answer: skipped, asked again next time). A yes is stored."""
        changed = False
        for name in self.pending():
            config = self.project[name]
            answer = question(f"The project's .mcp.json wants to start MCP server '{name}': "
                              f"{describe(config)}. Allow it in this workspace? [y/n] ")
            if answer:
                self.approvals[name] = config_hash(config)
                changed = True
        if changed:
            try:
                save_approvals(self.workspace, self.approvals)
            except OSError:
                pass

    def servers(self) -> Dict[str, Dict[str, Any]]:
        chosen = {n: c for n, c in self.project.items() if self.approved(n)}
        chosen.update(self.trusted)
        self.skipped = [n for n in self.project if n not in chosen]
        return chosen

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
