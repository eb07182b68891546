"""How full the context is, and what compaction did, in words for the terminal.

Everything here is cheap and local: the token count is the core's estimate (never a request to the API's
counting endpoint), the compaction records are read from ``agent.history``. Must never raise: a status bar
or a notice line must not break a session because the library is older or the agent is a stand-in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional, Tuple, Union

if TYPE_CHECKING:
    from tooloop import Agent, CompactionEvent, Usage
    from tooloop.types import CompactionRecord

    from .config import Settings

#: A compaction as the history records it, or as its event reports it during a run.
Compaction = Union["CompactionRecord", "CompactionEvent"]

#: How each compaction method is named in the lines the user sees.
METHOD_WORDS = {"summary": "summary", "drop": "older turns dropped",
                "clear_tool_results": "old tool results cleared"}


def short(n: int) -> str:
    """Token counts for status lines: 950, 12.3k, 200k, 1.2M."""
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}k".replace(".0k", "k") if n < 100_000 else f"{n // 1000}k"
    return f"{n / 1_000_000:.1f}M".replace(".0M", "M")


def estimate_tokens(agent: Agent) -> Optional[int]:
    """Tokens the next request would carry, estimated by the core (no network request); None when this
    library cannot say."""
    try:
        return int(agent.count_tokens(estimate=True))
    except Exception:
        return None


def turn_tokens(usage: Optional[Usage]) -> Optional[int]:
    """The context a model turn filled: its input tokens, cached ones included (None without a usage)."""
    if usage is None:
        return None
    try:
        return int(usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens)
    except (AttributeError, TypeError, ValueError):
        return None


def window_of(agent: Agent, settings: Optional[Settings] = None) -> Optional[int]:
    """The context window in tokens: the CLI's (flag, table, local server), else the library's; None when
    unknown."""
    window = getattr(settings, "context_window", None)
    if window:
        return int(window)
    try:
        w = getattr(agent, "context_window", None)
        return int(w) if w else None
    except Exception:
        return None


def ctx_label(tokens: Optional[int], window: Optional[int], with_window: bool = False) -> str:
    """``ctx 34%`` (``ctx 34% of 200k`` with `with_window`) when the window is known, else ``ctx ~12.3k``;
    ``ctx ?`` when neither is known."""
    if window:
        pct = min(100.0, 100.0 * (tokens or 0) / window)
        return f"ctx {pct:.0f}%" + (f" of {short(window)}" if with_window else "")
    if tokens is None:
        return "ctx ?"
    return f"ctx ~{short(tokens)}"


def records(agent: Agent) -> List[CompactionRecord]:
    """The compaction records of the conversation (system entries with ``meta.compaction``), oldest first."""
    try:
        history = agent.history
    except Exception:
        return []
    out: List[CompactionRecord] = []
    for entry in history or []:
        rec = entry.get("meta", {}).get("compaction")
        if isinstance(rec, dict):
            out.append(rec)  # type: ignore[arg-type]  # the core writes it in this shape
    return out


def method_words(method: object) -> str:
    return METHOD_WORDS.get(str(method), str(method))


def compacted_line(rec: Compaction) -> str:
    """The /compact answer: ``compacted: ~48.2k → ~9.1k tokens (summary)``."""
    before, after, method = _fields(rec)
    return f"compacted: ~{short(before)} → ~{short(after)} tokens ({method_words(method)})"


def auto_line(rec: Compaction) -> str:
    """What the REPL prints when compaction happened during a run:
    ``context compacted (summary): ~160k → ~41k tokens``."""
    before, after, method = _fields(rec)
    return f"context compacted ({method_words(method)}): ~{short(before)} → ~{short(after)} tokens"


def _fields(rec: Compaction) -> Tuple[int, int, str]:
    if isinstance(rec, dict):
        return int(rec.get("tokens_before") or 0), int(rec.get("tokens_after") or 0), str(rec.get("method") or "")
    return int(rec.tokens_before or 0), int(rec.tokens_after or 0), str(rec.method or "")


def fallback_reason(rec: Compaction) -> Optional[str]:
    reason = rec.get("fallback_reason") if isinstance(rec, dict) else rec.fallback_reason
    return " ".join(str(reason).split()) if reason else None
