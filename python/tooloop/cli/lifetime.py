"""The command's lifetime: every process it started ends with it.

SIGTERM and SIGHUP (the terminal closed) end the command the way Ctrl+C ends a run, then the command: the
handler raises :class:`Terminated` on the main thread, the binding cancels the run it is waiting on (the
foreground command is killed), and the CLI's ``finally`` closes the agent (background commands, MCP servers).
On Linux the command is also a child subreaper, so a process that escaped with ``setsid`` or a double fork
(from a hook, say) is adopted by the command instead of init, and :func:`end_descendants` kills every one
left at exit, after the exit handlers registered later (the same sweep as a hook's supervisor,
``hookrun.kill_tree``).

Must never: kill a process the command did not start (only its descendants are signalled), or let a second
signal interrupt the cleanup the first one started.
"""

from __future__ import annotations

import atexit
import signal
import sys
from types import FrameType
from typing import List, Optional


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived: the command ends (exit status 128 + the signal number)."""

    def __init__(self, signum: int):
        super().__init__(f"terminated by signal {signum}")
        self.signum = signum


_received: List[int] = []


def _on_signal(signum: int, frame: Optional[FrameType]) -> None:
    _received.append(signum)
    if len(_received) == 1:
        raise Terminated(signum)
    # A second signal during the cleanup the first started: noted, never allowed to cut it short.


def install() -> None:
    """Handle SIGTERM and SIGHUP (main thread only), become a child subreaper where the kernel allows, and end
    every descendant at exit (after the exit handlers registered later, such as a Ray cluster's shutdown)."""
    if sys.platform.startswith("linux"):
        from .hookrun import PR_SET_CHILD_SUBREAPER, prctl

        prctl(PR_SET_CHILD_SUBREAPER, 1)
    atexit.register(end_descendants)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        try:
            if signal.getsignal(signum) is signal.SIG_IGN:
                continue  # nohup: the user asked for the command to outlive the terminal
            signal.signal(signum, _on_signal)
        except (ValueError, OSError):
            pass   # not the main thread, or no such signal here


def end_descendants() -> None:
    """Kill every process this command started that is still alive (adopted orphans included), and reap them."""
    from .hookrun import kill_tree

    kill_tree(None)
