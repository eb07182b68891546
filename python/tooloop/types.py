"""The shapes of the plain data ``tooloop`` hands back: conversation entries, todos, MCP and skill reports,
session reports, background commands. Each is a ``TypedDict``: at run time an ordinary ``dict`` (as the core
produces it), to a type checker a documented shape.

    from tooloop.types import HistoryEntry

    def last_answer(history: list[HistoryEntry]) -> str: ...

Loaded only by type checkers and by code that names these types: ``import tooloop`` does not import it (it
would load ``typing``). Must never: hold behaviour, or describe a shape the core does not produce.
"""

from __future__ import annotations

from typing import Any, Dict, List, Literal, Optional, TypedDict

__all__ = [
    "ContentBlock",
    "UsageDict",
    "HistoryEntry",
    "Todo",
    "McpServerStatus",
    "McpFailure",
    "McpStatus",
    "Skill",
    "SkillProblem",
    "Skills",
    "TornTail",
    "SkippedLine",
    "SessionReport",
    "InstructionFile",
    "InstructionSkip",
    "Instructions",
    "BackgroundCommand",
    "DbSession",
    "CompactionRecord",
    "CheckResult",
    "CommandRun",
]

#: A content block as the Messages API spells it (``{"type": "text", "text": ...}``, ``tool_use``,
#: ``tool_result``, ``image``, ``thinking`` ...): its keys depend on its type.
ContentBlock = Dict[str, Any]


class UsageDict(TypedDict, total=False):
    """Token counts as the API reports them (the keys it did not send are absent)."""

    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int


class _EntryRequired(TypedDict):
    id: str
    role: Literal["user", "assistant", "tool", "system"]
    content: List[ContentBlock]
    status: Literal["streaming", "complete", "error"]
    created_at: int


class HistoryEntry(_EntryRequired, total=False):
    """One entry of ``Agent.history`` (and of ``SessionInfo.entries``): ``id`` (stable), ``role``,
    ``content`` blocks, ``status``, ``created_at`` (Unix milliseconds); model turns add ``duration_ms``,
    ``model``, ``provider`` (which made it: what another provider may be sent of it), ``usage`` and
    ``stop_reason``, failed ones ``error``; ``meta`` holds notes such as a compaction's record or a model
    switch or fallback."""

    duration_ms: int
    model: str
    provider: str
    usage: UsageDict
    stop_reason: str
    error: str
    meta: Dict[str, Any]


class _TodoRequired(TypedDict):
    content: str
    status: Literal["pending", "in_progress", "completed"]


class Todo(_TodoRequired, total=False):
    """One item of ``Agent.todos``: what to do, its status, and the present-tense form a UI shows while it is
    in progress (``active_form``, when the model gave one)."""

    active_form: str


class McpServerStatus(TypedDict):
    """An MCP server: ``state`` (``"connected"``, ``"disconnected"``, ``"failed"``, ``"starting"``,
    ``"closed"``), the tools it gave (as the model sees them), restarts, the last error and its stderr's
    tail."""

    name: str
    state: Literal["connected", "disconnected", "failed", "starting", "closed"]
    tools: List[str]
    protocol_version: Optional[str]
    restarts: int
    error: Optional[str]
    log_tail: str


class McpFailure(TypedDict):
    """A server that did not start, and why."""

    server: str
    reason: str


class McpStatus(TypedDict):
    """``Agent.mcp_status()``."""

    servers: List[McpServerStatus]
    failures: List[McpFailure]


class Skill(TypedDict):
    """A skill found in a skill folder: its front matter's name and description, its folder, the rest of
    its front matter."""

    name: str
    description: str
    dir: str
    meta: Dict[str, Any]


class SkillProblem(TypedDict):
    """A ``SKILL.md`` that was skipped, and why."""

    path: str
    reason: str


class Skills(TypedDict):
    """``Agent.skills``."""

    skills: List[Skill]
    problems: List[SkillProblem]


class TornTail(TypedDict):
    """An unfinished last line of a session file (a crash mid-write), which the loader cut off."""

    line: int
    bytes: int


class SkippedLine(TypedDict):
    """A session file line the loader could not read and left out."""

    line: int
    reason: str


class SessionReport(TypedDict):
    """``Agent.session_report``: what opening the session found."""

    entries: int
    torn_tail: Optional[TornTail]
    skipped: List[SkippedLine]
    created: bool


class InstructionFile(TypedDict):
    """A project instruction file in the system prompt."""

    path: str
    truncated: bool
    bytes: int


class InstructionSkip(TypedDict):
    """An instruction file that was left out, and why."""

    path: str
    reason: str


class Instructions(TypedDict):
    """``Agent.instructions``."""

    files: List[InstructionFile]
    skipped: List[InstructionSkip]


class BackgroundCommand(TypedDict):
    """A command the built-in bash runs in the background (``Agent.background_commands``); ``started`` is
    Unix time in seconds."""

    id: str
    command: str
    status: Literal["running", "exited", "killed", "failed"]
    exit_code: Optional[int]
    started: float
    unread_bytes: int


class DbSession(TypedDict):
    """A session of a tooloop SQLite database (``tooloop.list_sessions``); times are Unix milliseconds."""

    id: str
    created_at: int
    workspace: Optional[str]
    records: int
    updated_at: int



class CompactionRecord(TypedDict, total=False):
    """What one compaction did (kept in a history entry's ``meta["compaction"]``, returned by compacting):
    why (``"threshold"``, ``"overflow"``, ``"manual"``), how (``"clear_tool_results"``, ``"summary"``,
    ``"drop"``), the token estimates before and after, how many entries it removed or cleared, the summary
    and, when it fell back to dropping turns, why."""

    reason: str
    method: str
    tokens_before: int
    tokens_after: int
    removed: int
    cleared: int
    summary: Optional[str]
    fallback_reason: Optional[str]


class CheckResult(TypedDict):
    """``RunResult.check``: what the ``check`` command said. ``passed`` only when its last run exited 0
    (``False`` when it never ran); ``exit_code`` None when it never ran, timed out or could not start;
    ``output_tail`` the last lines of its last run (at most 60 lines, 4 kB); ``runs`` how often it ran."""

    command: str
    passed: bool
    exit_code: Optional[int]
    output_tail: str
    runs: int


class CommandRun(TypedDict):
    """One entry of ``RunResult.commands_run``: a shell-kind call (the built-in ``bash``) and its exit code
    (None: it did not finish)."""

    command: str
    exit_code: Optional[int]
