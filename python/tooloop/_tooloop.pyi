"""Stubs of the compiled module ``tooloop._tooloop`` (private: use the ``tooloop`` package).

Blocking calls run the core with the GIL released, on the calling thread (``_Agent.run``, ``_Agent.compact``,
``_Client.create``, a ``_Driven`` or ``_Stream`` as it is iterated) or on a worker thread (a ``_Run``);
Python callables passed here (tools, a model, a permission check) are called on that thread.
"""

import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union, final

from .types import (BackgroundCommand, DbSession, HistoryEntry, Instructions, McpStatus, SessionReport, Skills,
                    Todo)

__all__ = ["_Agent", "_Client", "_Run", "_Stream", "_Driven", "_Ledger", "estimate_cost_usd", "load_session", "list_db_sessions", "migrate_session", "sandbox_support", "context_window", "prefers_responses", "restore_file", "__version__", "match_rules", "read_only_command", "split_command", "check_files", "check_aws_credentials", "_set_span_source", "OPTION_KEYS", "PROVIDERS", "DEFAULT_PROTECTED_PATHS", "ALLOW_READ_ONLY", "_AllowReadOnly"]

__version__: str
#: The core's option keys (``AgentOptions::KEYS``), the same as the C config's.
OPTION_KEYS: List[str]
PROVIDERS: List[Dict[str, Any]]
#: The workspace-relative paths bash's sandbox shows read-only unless ``protected_paths=`` says otherwise.
DEFAULT_PROTECTED_PATHS: List[str]

@final
class _AllowReadOnly:
    def __repr__(self) -> str: ...

ALLOW_READ_ONLY: _AllowReadOnly

#: A Python model: request dict -> message dict (checked by the core).
_ModelFn = Callable[[Dict[str, Any]], Dict[str, Any]]

@final
class _Run:
    """A running operation: its events, then its outcome."""

    @property
    def done(self) -> bool: ...
    def next_event(self) -> Optional[Dict[str, Any]]:
        """The next event dict, or None once the operation has ended."""
    def next_text(self) -> Optional[str]:
        """The text that arrived since the last call, coalesced; None once the operation has ended."""
    def result(self) -> Dict[str, Any]:
        """Wait for the end; the outcome dict, or the operation's exception."""
    def cancel(self) -> None: ...
    def close(self) -> None: ...

@final
class _Stream:
    """A raw stream read on the calling thread: the same methods as _Run, and it iterates its events."""

    @property
    def done(self) -> bool: ...
    def next_event(self) -> Optional[Dict[str, Any]]: ...
    def next_text(self) -> Optional[str]: ...
    def result(self) -> Dict[str, Any]: ...
    def cancel(self) -> None: ...
    def close(self) -> None: ...
    def __iter__(self) -> _Stream: ...
    def __next__(self) -> Dict[str, Any]: ...

@final
class _Driven:
    """An agent's run streamed on the calling thread, a step per call: the same methods as _Run."""

    @property
    def done(self) -> bool: ...
    def next_event(self) -> Optional[Dict[str, Any]]: ...
    def next_events(self) -> Optional[List[Dict[str, Any]]]: ...
    def next_text(self) -> Optional[str]: ...
    def result(self) -> Dict[str, Any]: ...
    def cancel(self) -> None: ...
    def close(self) -> None: ...
    def approve(self, call_id: str, deny: Optional[str] = None, read_only: bool = False) -> None: ...
    def pending_approvals(self) -> List[Dict[str, Any]]: ...

@final
class _Agent:
    def __new__(cls, provider: Union[str, _ModelFn, None], options: Dict[str, Any]) -> _Agent: ...
    def session_report(self) -> Optional[SessionReport]: ...
    def add_subagent_tool(
        self,
        agent_type: str,
        name: str,
        description: str,
        input_schema: Dict[str, Any],
        invoke: Callable[[Dict[str, Any]], Tuple[Any, bool]],
        parallel_safe: bool = False,
        read_only: bool = False,
        timeout: Optional[float] = None,
        idempotent: bool = True,
        kind: Optional[str] = None,
        path_field: Optional[str] = None,
    ) -> None: ...
    def close(self) -> None: ...
    def background_commands(self) -> List[BackgroundCommand]: ...
    def todos(self) -> List[Todo]: ...
    def mcp_status(self) -> McpStatus: ...
    def skills(self) -> Skills: ...
    def register_tool(
        self,
        name: str,
        description: str,
        input_schema: Dict[str, Any],
        invoke: Callable[[Dict[str, Any]], Tuple[Any, bool]],
        parallel_safe: bool = False,
        read_only: bool = False,
        timeout: Optional[float] = None,
        idempotent: bool = True,
        kind: Optional[str] = None,
        path_field: Optional[str] = None,
    ) -> None: ...
    def tool_info(self, name: str) -> Optional[Dict[str, Any]]: ...
    def cost_usd(self) -> Optional[float]: ...
    def unregister_tool(self, name: str) -> bool: ...
    def tool_names(self) -> List[str]: ...
    def tool_specs(self) -> List[Dict[str, Any]]: ...
    def set_permission(self, check: Optional[Callable[[str, str, Any], Union[None, str, _AllowReadOnly]]] = None) -> None: ...
    def set_hooks(
        self,
        before_tool: Optional[Callable[[str, str, Any], Optional[Tuple[str, Any]]]] = None,
        after_tool: Optional[Callable[[str, str, Any, Any, bool, bool], Optional[str]]] = None,
        before_request: Optional[Callable[[Dict[str, Any]], None]] = None,
        on_stop: Optional[Callable[[Dict[str, Any]], Optional[str]]] = None,
        after_check: Optional[Callable[[Dict[str, Any], str], Optional[str]]] = None,
    ) -> None: ...
    def instructions(self) -> Optional[Instructions]: ...
    def spent_usd(self) -> float: ...
    def start(
        self, input: Union[str, List[Dict[str, Any]], None], stream: bool = False, pause_for_approval: bool = False
    ) -> _Driven: ...
    def run(self, input: Union[str, List[Dict[str, Any]], None]) -> Dict[str, Any]: ...
    def compact(self, instructions: Optional[str] = None) -> Optional[Dict[str, Any]]: ...
    def count_tokens(self, input: Optional[str] = None, estimate: bool = False) -> int: ...
    @property
    def context_window(self) -> Optional[int]: ...
    def set_gate(self, gate: Optional[Callable[[str, int, Optional[float]], Optional[float]]] = None) -> None: ...
    def set_ledger(self, ledger: Optional[_Ledger] = None) -> None: ...
    def cancel(self) -> None: ...
    def reset(self) -> None: ...
    def messages(self) -> List[Dict[str, Any]]: ...
    def history(self) -> List[HistoryEntry]: ...
    def usage(self) -> Dict[str, Any]: ...
    @property
    def model(self) -> str: ...
    @property
    def provider_name(self) -> str: ...
    def set_model(self, model: str, provider: Union[str, _ModelFn, None], options: Dict[str, Any]) -> None: ...

@final
class _Ledger:
    def __new__(cls, cap_usd: Optional[float] = None) -> _Ledger: ...
    @property
    def cap_usd(self) -> Optional[float]: ...
    @property
    def spent_usd(self) -> float: ...
    @property
    def reserved_usd(self) -> float: ...
    @property
    def exhausted(self) -> bool: ...
    def note_request_cost(self, usd: float) -> None: ...

@final
class _Client:
    def __new__(
        cls,
        provider: Union[str, _ModelFn],
        *,
        api_key: Optional[str] = None,
        base_url: Optional[str] = None,
        timeout: float = 600.0,
        max_retries: int = 2,
        headers: Optional[Dict[str, str]] = None,
        region: Optional[str] = None,
    ) -> _Client: ...
    def create(self, request: Dict[str, Any]) -> Dict[str, Any]: ...
    def start_create(self, request: Dict[str, Any]) -> _Run: ...
    def start_stream(self, request: Dict[str, Any]) -> Union[_Run, _Stream]: ...
    @property
    def provider_name(self) -> str: ...

def estimate_cost_usd(model: str, usage: Mapping[str, Any]) -> Optional[float]:
    """Estimated cost in USD of ``usage`` on ``model``; None when the model's price is unknown."""

def load_session(path: Union[str, os.PathLike[str]]) -> Dict[str, Any]:
    """Read a session file without opening it for writing: ``{"path", "entries", "torn_tail", "skipped",
    "cost_usd"}``."""

def list_db_sessions(db: Union[str, os.PathLike[str]]) -> List[DbSession]:
    """The sessions of a tooloop SQLite database, oldest first: ``[{"id", "created_at", "workspace", "records",
    "updated_at"}]``."""

def migrate_session(source: Union[str, os.PathLike[str]], dest: Union[str, os.PathLike[str]]) -> int:
    """Copy a session (a JSONL file or ``path.db#id``) into a new one, record for record; returns the count."""

def sandbox_support() -> Optional[int]:
    """The Landlock ABI version the kernel offers for the bash sandbox, or None."""

def restore_file(workspace: Union[str, "os.PathLike[str]"], path: str, content: Optional[bytes],
                 mode: int = 0o644) -> str:
    """Put a workspace file back (None: remove it) through race-free handles: "written", "removed" or
    "absent". Raises OSError when the path leads outside the workspace."""

def check_aws_credentials() -> None:
    """Raise ConfigError (with the core's message) when Bedrock would find no AWS credentials."""

def _set_span_source(source: Optional[Callable[[], Any]]) -> None:
    """Set the callable each run asks for its OpenTelemetry span sink (tooloop._otel.span_sink), or clear it."""

def context_window(model: str) -> Optional[int]:
    """The context window of a known model in tokens (the core's table), or None."""

def prefers_responses(model: str) -> bool:
    """Whether ``model`` is one of OpenAI's reasoning models, which take tools with reasoning only on the
    Responses API."""

def match_rules(
    rules: Dict[str, Any], name: str, input: Any, workspace: Union[str, os.PathLike[str]]
) -> Optional[Tuple[str, str]]:
    """What permission rules say about ``name(input)``: ``("allow" | "ask" | "deny", rule)`` or None."""

def read_only_command(command: str) -> bool:
    """Whether a bash command only reads (every part a known read-only command, no output redirection)."""

def split_command(command: str) -> List[str]:
    """The simple commands of a shell command, wrappers looked through."""

def check_files(command: str, workspace: str) -> List[str]:
    """The workspace files and folders a check command runs or names, relative to ``workspace``."""
