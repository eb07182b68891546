"""Answers to a run paused for approval (``stream(..., pause_for_approval=True)``), shared by the sync stream
(``_agent``) and the async one (``_aio``): a decision in the permission callable's words, as the core takes it.

Must never: import ``_agent`` or ``_aio`` (both import this).
"""

from __future__ import annotations

from . import _tooloop
from .events import ApprovalRequestEvent

# `typing` is for the type checker only (see _agent): `import tooloop` does not pay for it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Tuple

#: The reason a call gets when it is refused without one (False, or an empty string).
DEFAULT_DENIAL = "The user did not allow this tool call."


def decision(answer: Any) -> Tuple[Optional[str], bool]:
    """An answer to a paused call, in the permission callable's words (True, False, a reason,
    ``ALLOW_READ_ONLY``), as the core's: (the reason of a denial or None, read-only)."""
    if answer is True:
        return None, False
    if answer is _tooloop.ALLOW_READ_ONLY:
        return None, True
    if answer is False:
        return DEFAULT_DENIAL, False
    if isinstance(answer, str):
        return answer or DEFAULT_DENIAL, False
    raise TypeError(f"a decision is True, False, a reason string or tooloop.ALLOW_READ_ONLY, got "
                    f"{type(answer).__name__}: {answer!r:.100}")


def waiting(calls: List[Dict[str, Any]]) -> List[ApprovalRequestEvent]:
    """The calls a run waits for (the core's ``pending_approvals``), as the events that asked."""
    return [ApprovalRequestEvent(c["call_id"], c["tool"], c.get("input")) for c in calls or []]
