"""Every process the `tooloop` command started ends with it: on SIGTERM and on SIGHUP (the terminal closed)
a running foreground command and a background command are both gone once the command has exited (128 + the
signal). (A hook's own `setsid` children end with the hook: tests/python/test_cli_settings_trust.py.) Through the real command against the mock server."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import List

import pytest

from _support import clean_env, require_landlock, text_reply, tool_reply
from _terminal import sighup_default


def pids_with(marker: str) -> List[int]:
    """Processes whose command line (arguments joined by spaces) holds `marker`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if marker.encode() in f.read().replace(b"\0", b" "):
                    found.append(int(name))
        except OSError:
            pass
    return found


def wait_for(pred, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return bool(pred())


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_ends_every_process_the_command_started(tooloop_exe, mock, ws: Path, tmp_path: Path,
                                                         signum: int) -> None:
    require_landlock()
    tag = f"{os.getpid()}{int(signum)}"
    background, foreground = f"9{tag}1", f"9{tag}2"
    server = mock({"responses": [
        tool_reply(("t1", "bash", {"command": f"sleep {background}", "run_in_background": True})),
        tool_reply(("t2", "bash", {"command": f"sleep {foreground}", "timeout": 600})),
        text_reply("never reached"),
    ]})
    # preexec_fn: the signal's default action, as a user's shell gives it (a suite run under `nohup` ignores
    # SIGHUP, and the command rightly leaves an ignored SIGHUP ignored).
    proc = subprocess.Popen([tooloop_exe, "--yes", "-p", "wait"], cwd=ws, env=clean_env(tmp_path, server),
                            preexec_fn=sighup_default,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert wait_for(lambda: pids_with(f"sleep {foreground}"), 30), "the foreground command never started"
        assert pids_with(f"sleep {background}")
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 128 + int(signum), (proc.returncode, err)
        for marker in (foreground, background):
            assert wait_for(lambda: not pids_with(f"sleep {marker}"), 5), f"sleep {marker} outlived the command"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for marker in (foreground, background):
            for pid in pids_with(f"sleep {marker}"):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass


def test_closing_the_terminal_of_the_repl_ends_its_running_command(tooloop_exe, mock, ws: Path,
                                                                   tmp_path: Path) -> None:
    import pexpect
    from _terminal import PROMPT, Term, term_env

    require_landlock()
    marker = f"8{os.getpid()}7"
    server = mock({"responses": [
        tool_reply(("t1", "bash", {"command": f"sleep {marker}", "timeout": 600})),
        text_reply("never reached"),
    ]})
    env = term_env(tmp_path, server, XDG_CONFIG_HOME=str(tmp_path / "config"))
    try:
        with Term(tooloop_exe, ["--yes"], ws, env) as term:
            term.expect(PROMPT)
            term.type("wait a while")
            assert wait_for(lambda: pids_with(f"sleep {marker}"), 30), "the command never started"
            term.child.kill(signal.SIGHUP)   # what the terminal's closing sends its session leader
            term.expect(pexpect.EOF, timeout=30)
            term.child.close()
            assert term.child.exitstatus == 128 + int(signal.SIGHUP), (term.child.exitstatus,
                                                                       term.child.signalstatus)
        assert wait_for(lambda: not pids_with(f"sleep {marker}"), 5), "the command outlived the REPL"
    finally:
        for pid in pids_with(f"sleep {marker}"):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
