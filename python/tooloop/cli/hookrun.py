"""The supervisor of one hook command: ``python -I -S hookrun.py TIMEOUT PARENT_PID REPORT_FD COMMAND``.

It makes itself the child subreaper of its subtree (``PR_SET_CHILD_SUBREAPER``), runs ``/bin/sh -c
COMMAND`` with its own stdin, stdout and stderr, and waits for it at most TIMEOUT seconds. Then, exited or
not, it kills every process below it and reaps them: as a subreaper it adopts whatever the hook's
processes orphaned (``setsid cmd &``, double forks), so that set is exactly everything the hook started.
It reports on REPORT_FD (``exit N`` or ``timeout``) and exits. SIGTERM (sent by the CLI on Ctrl+C, or by the
kernel when the CLI dies: ``PR_SET_PDEATHSIG``) ends it the same way.

Why this and not the library's PID namespace (``unshare --pid``): a hook is the user's own command and runs
outside the sandbox; a namespace would need root or a user namespace (which breaks setuid programs such as
sudo and shows other users' files as nobody) and hides the real pids from the hook. The subreaper works
for any user, changes nothing the hook sees, and needs only Linux ≥ 3.4. Where prctl is unavailable the
hook's process group is still killed.

Standard library only, run isolated (``-I``: the workspace is not on sys.path, so a planted module cannot
replace one of these imports). Must never: leave a process of the hook running after it returns.
"""

import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
_stop = False


def prctl(option: int, value: int) -> bool:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(option, value, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def descendants(root: int) -> "list[int]":
    """Every process below `root`, from /proc (zombies included: they are reaped, not killed)."""
    children: "dict[int, list[int]]" = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(name))
    out: "list[int]" = []
    todo = [root]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_tree(group: "int | None") -> None:
    """SIGKILL the process group `group` (None: none) and every process below this one until none is left (a
    process forking while we kill is caught on the next pass), reaping what becomes ours."""
    me = os.getpid()
    if group is not None:
        try:
            os.killpg(group, signal.SIGKILL)
        except OSError:
            pass
    for _ in range(200):
        left = descendants(me)
        if not left:
            return
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        _reap()
        time.sleep(0.005)


def _on_term(signum: int, frame: object) -> None:
    global _stop
    _stop = True


def main(argv: "list[str]") -> int:
    timeout, parent, report_fd, command = float(argv[1]), int(argv[2]), int(argv[3]), argv[4]
    signal.signal(signal.SIGTERM, _on_term)
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    try:
        report = os.fdopen(report_fd, "w")
    except OSError:
        report = open(os.devnull, "w")
    if os.getppid() != parent:   # the CLI died before PR_SET_PDEATHSIG took hold
        report.write("stopped\n")
        return 1
    os.set_inheritable(report.fileno(), False)
    # fork, not subprocess: this process has one thread, and importing subprocess costs more than the rest.
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            for sig in ("SIGPIPE", "SIGXFSZ"):   # Python ignores these; the hook gets the defaults
                if hasattr(signal, sig):
                    signal.signal(getattr(signal, sig), signal.SIG_DFL)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.execv("/bin/sh", ["/bin/sh", "-c", command])
        finally:
            os._exit(127)
    deadline = time.monotonic() + timeout
    status = "timeout"
    pause = 0.001
    try:
        while not _stop:
            try:
                done, wstatus = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done, wstatus = pid, 0
            if done == pid:
                code = os.waitstatus_to_exitcode(wstatus)
                status = f"exit {code if code >= 0 else 128 - code}"
                break
            if time.monotonic() >= deadline:
                break
            time.sleep(pause)
            pause = min(pause * 2, 0.02)
        else:
            status = "stopped"
    finally:
        kill_tree(pid)
        _reap()
    report.write(status + "\n")
    report.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
