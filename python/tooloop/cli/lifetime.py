"""The command's lifetime: every process it started ends with it.

SIGTERM and SIGHUP (the terminal closed) end the command the way Ctrl+C ends a run, then the command: the
handler raises :class:`Terminated` on the main thread, the binding cancels the run it is waiting on (the
foreground command is killed), and the CLI's ``finally`` closes the agent (background commands, MCP servers).
On Linux the command is also a child subreaper, so a process that escaped with ``setsid`` or a double fork
(from a hook, say) is adopted by the command instead of init, and :func:`end_descendants` kills every one
left at exit.

Must never: kill a process the command did not start (only its descendants are signalled), or let a second
signal interrupt the cleanup the first one started.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType
from typing import Dict, List, Optional

#: prctl(2) option: orphaned descendants are reparented to this process.
_PR_SET_CHILD_SUBREAPER = 36


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
    """Handle SIGTERM and SIGHUP (main thread only), and become a child subreaper where the kernel allows."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    for signum in (signal.SIGTERM, signal.SIGHUP):
        try:
            if signal.getsignal(signum) is signal.SIG_IGN:
                continue  # nohup: the user asked for the command to outlive the terminal
            signal.signal(signum, _on_signal)
        except (ValueError, OSError):
            pass   # not the main thread, or no such signal here


def _parents() -> Dict[int, int]:
    """pid → parent pid of every process visible in /proc."""
    out: Dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name (field 2) may hold spaces and parentheses: fields after the last ')'.
        rest = stat[stat.rfind(b")") + 2:].split()
        if len(rest) >= 2:
            out[int(name)] = int(rest[1])
    return out


def descendants(pid: Optional[int] = None) -> List[int]:
    """The pids of every descendant of `pid` (default: this process), children first."""
    root = os.getpid() if pid is None else pid
    children: Dict[int, List[int]] = {}
    for p, parent in _parents().items():
        children.setdefault(parent, []).append(p)
    found: List[int] = []
    todo = list(children.get(root, []))
    while todo:
        p = todo.pop(0)
        found.append(p)
        todo.extend(children.get(p, []))
    return found


def end_descendants() -> None:
    """Kill every process this command started that is still alive (adopted orphans included), and reap them."""
    for _ in range(3):   # a process may fork while we kill its parent: look again
        pids = descendants()
        if not pids:
            break
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        while True:
            try:
                reaped, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if reaped == 0:
                break
