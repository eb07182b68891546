"""A command run by bash cannot reach the user's terminal, on a real pseudo-terminal.

A host program runs with a pty as its controlling terminal and stdin, like `tooloop` in a user's shell.
Its fake model asks bash to push "echo INJECTED" into that terminal with the TIOCSTI ioctl, through
/dev/tty and through the pty's own path. Afterwards the host reads what its terminal has as input:
nothing may be there, in any sandbox mode (off included). Before the fix the shell inherited the
terminal, and the keystrokes arrived (the user's shell would have run them after tooloop exited).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pexpect  # a test dependency: pip install pexpect
import pytest

from _support import require_landlock

INJECT = r'''
import fcntl, os, sys, termios
for path in ["/dev/tty"] + sys.argv[1:]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOCTTY)
    except OSError as e:
        print(path, "open-failed", e.errno)
        continue
    try:
        for ch in "echo INJ" + "ECTED\n":
            fcntl.ioctl(fd, termios.TIOCSTI, ch.encode())
        print(path, "pushed")
    except OSError as e:
        print(path, "ioctl-failed", e.errno)
'''

HOST = r'''
import os, select, sys, tooloop
ws, mode = sys.argv[1], sys.argv[2]
tty = os.ttyname(0)
replies = [
    {"content": [{"type": "tool_use", "id": "t1", "name": "bash",
                  "input": {"command": f"{sys.executable} inject.py {tty}"}}], "stop_reason": "tool_use"},
    {"content": "done", "stop_reason": "end_turn"},
]
agent = tooloop.Agent(provider=lambda request: replies.pop(0), builtin_tools=["bash"], workspace=ws, sandbox=mode)
result = agent.run("go")
print("RESULT:", repr(result.tool_calls[0].output))
got = b""
while select.select([0], [], [], 0.5)[0]:
    chunk = os.read(0, 1024)
    if not chunk:
        break
    got += chunk
print("GOT:" + repr(got) + ":END")
'''


@pytest.mark.parametrize("mode", ["off", "workspace-write", "read-only"])
def test_a_command_cannot_push_keystrokes_into_the_users_terminal(tmp_path: Path, mode: str) -> None:
    if mode != "off":  # the seccomp filter holds in every mode; the sandboxed modes also need Landlock
        require_landlock()
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "inject.py").write_text(INJECT)
    host = tmp_path / "host.py"
    host.write_text(HOST)
    child = pexpect.spawn(sys.executable, [str(host), str(ws), mode], env=dict(os.environ), encoding="utf-8",
                          timeout=60, dimensions=(24, 200))
    try:
        child.expect(r"GOT:(.*):END")
        got = child.match.group(1)
        transcript = child.before + child.after
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert "RESULT:" in transcript, transcript
    # The attempt was made and failed both ways: no controlling terminal, and the ioctl refused.
    assert "/dev/tty open-failed" in transcript, transcript
    assert "ioctl-failed 1" in transcript or "open-failed" in transcript.split("/dev/tty", 2)[-1], transcript
    assert "pushed" not in transcript, transcript
    assert got == "b''", f"the terminal received input: {got}"
    assert "INJECTED" not in transcript, transcript
