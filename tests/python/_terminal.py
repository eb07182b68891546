"""The `tooloop` command on a pseudo-terminal (pexpect), for the tests that drive the REPL and its
questions as a person would: the terminal's environment, a `Term` that keeps everything the program printed
for failure reports and is killed (by its pid) when its `with` block ends, and an answer to prompt_toolkit's
cursor-position query."""

from __future__ import annotations

import io
import re
import signal
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

import pexpect  # a test dependency: pip install pexpect

from _support import cli_env

PROMPT = "›"  # prompt_toolkit may draw the space after it as a cursor move
SGR = re.compile(r"\x1b\[[0-9;]*m")


def term_env(tmp_path: Path, mock: Any, **extra: str) -> Dict[str, str]:
    """`cli_env` for a terminal: xterm colors, UTF-8, and no cursor-position query to wait for."""
    env = cli_env(tmp_path, mock)
    env.update({
        "TERM": "xterm-256color",
        "LANG": "C.UTF-8",
        "PYTHONIOENCODING": "utf-8",
        # pexpect never answers prompt_toolkit's cursor-position query; don't wait for it.
        "PROMPT_TOOLKIT_NO_CPR": "1",
    })
    env.update(extra)
    return env


def sighup_default() -> None:
    """In a child before exec: SIGHUP back to its default action."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


class Term:
    """A tooloop process on a pseudo-terminal, with everything it printed kept for failure reports.

    ``with Term(...) as term:`` kills the process when the block ends, however it ends."""

    def __init__(self, exe: str, args: Sequence[str], ws: Path, env: Dict[str, str]) -> None:
        self.log = io.StringIO()
        # SIGHUP as a terminal's process has it, whatever the suite inherited (`nohup` ignores it, and an
        # ignored signal stays ignored across exec).
        self.child = pexpect.spawn(exe, list(args), cwd=str(ws), env=env, encoding="utf-8",
                                   timeout=20, dimensions=(50, 140), preexec_fn=sighup_default)
        self.child.logfile_read = self.log

    def __enter__(self) -> "Term":
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()

    def expect(self, pattern: Union[str, List[Any], Any], timeout: float = 20) -> int:
        try:
            return int(self.child.expect(pattern, timeout=timeout))
        except (pexpect.TIMEOUT, pexpect.EOF):
            print("---- terminal output so far ----\n" + self.log.getvalue())
            raise

    def type(self, line: str) -> None:
        self.child.send(line + "\r")

    def finish(self, timeout: float = 20) -> Optional[int]:
        """Waits for the program to end; its exit status."""
        self.expect(pexpect.EOF, timeout)
        self.child.close()
        return self.child.exitstatus  # type: ignore[no-any-return]

    def quit(self) -> None:
        """At the next prompt, `/q`; the program must exit 0."""
        self.expect(PROMPT)
        self.type("/q")
        assert self.finish() == 0

    def kill(self) -> None:
        if self.child.isalive():
            self.child.kill(9)
            self.child.close(force=True)

    @property
    def text(self) -> str:
        """Everything printed so far, without color codes."""
        return SGR.sub("", self.log.getvalue())


def expect_answering_cpr(term: Term, pattern: str, timeout: float = 20) -> None:
    """prompt_toolkit draws its bottom toolbar only once it knows where the cursor is: answer its cursor
    position requests (ESC [ 6 n) as a terminal would, until `pattern` shows."""
    deadline = time.monotonic() + timeout
    while True:
        if term.expect(["\x1b\\[6n", pattern], timeout=max(deadline - time.monotonic(), 0.1)) == 1:
            return
        term.child.send("\x1b[20;1R")
