"""What the `tooloop` command trusts of a workspace's settings files (issue 37, items 1, 2 and 6).

Nothing in the workspace counts before the user approves it: the allow rules and hooks of
`.tooloop/settings.local.json` wait like those of `.tooloop/settings.json`, whatever git says (tracked,
untracked, a checkout owned by another user, no git at all). An approval pins the JSON and the workspace
files its hooks run, checked again right before each hook runs. A hook's output is capped, and a hook that
times out ends with every process it started. The real console script runs against the mock server.
"""

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from _support import MockServer, clean_env, run_cli as run, scenario, text_reply, tool_reply, tool_results


def write_json(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def hook(command, matcher="", timeout=None):
    h = {"type": "command", "command": command}
    if timeout is not None:
        h["timeout"] = timeout
    return {"matcher": matcher, "hooks": [h]}


def checkout(ws, kind, tracked=()):
    """Make `ws` a git checkout of `kind`: "tracked" (`tracked` committed), "untracked" (nothing committed),
    "foreign" (`tracked` committed, then everything owned by another uid: git answers "dubious ownership"),
    or "none" (no .git)."""
    if kind == "none":
        return
    if shutil.which("git") is None:
        pytest.skip("needs git")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(ws)]
    subprocess.run(git + ["init", "-q"], check=True)
    if kind in ("tracked", "foreign") and tracked:
        subprocess.run(git + ["add", "-f", *tracked], check=True)
        subprocess.run(git + ["commit", "-qm", "x"], check=True)
    if kind == "foreign":
        if os.geteuid() != 0:
            pytest.skip("chown to another uid needs root")
        for root, dirs, files in os.walk(ws):
            for name in dirs + files:
                os.lchown(os.path.join(root, name), 12345, 12345)
        os.lchown(ws, 12345, 12345)
        probe = subprocess.run(["git", "-C", str(ws), "ls-files"], capture_output=True, text=True)
        assert "dubious ownership" in probe.stderr, probe.stderr


def approve_all(ws, tmp_path, monkeypatch):
    """Approve the workspace's settings files as they are now, as the REPL's startup question's "y" does."""
    from tooloop.cli import settings

    monkeypatch.setenv("TOOLOOP_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    asked = []
    settings.approve_pending(settings.load(ws.resolve()), ws.resolve(), lambda q: asked.append(q) or True)
    assert asked, "nothing was waiting for approval"


# -- item 1: every workspace settings file waits for approval --------------------------------------------

@pytest.mark.parametrize("kind", ["untracked", "foreign", "none", "tracked"])
def test_local_hooks_wait_for_approval_in_every_kind_of_checkout(tooloop_exe, ws, tmp_path, kind):
    marker = tmp_path / "local-hook-ran"
    write_json(ws / ".tooloop" / "settings.local.json", {"hooks": {"SessionStart": [hook(f"touch {marker}")]}})
    checkout(ws, kind, tracked=[".tooloop/settings.local.json"])
    with MockServer(scenario("cli_continue")) as mock:
        proc = run(tooloop_exe, ws, clean_env(tmp_path, mock), "-p", "hi")
    assert proc.returncode == 0, proc.stderr
    assert not marker.exists(), f"a workspace settings.local.json hook ran unapproved ({kind})"
    lines = [line for line in proc.stderr.splitlines() if "settings.local.json" in line]
    assert len(lines) == 1 and "are not used (not approved yet" in lines[0], proc.stderr


def test_a_settings_local_json_the_models_bash_wrote_does_not_run_its_hook_at_the_next_start(
        tooloop_exe, ws, tmp_path):
    checkout(ws, "untracked")
    planted = tmp_path / "planted-ran"
    path = ws / ".tooloop" / "settings.local.json"
    text = json.dumps({"hooks": {"SessionStart": [hook(f"touch {planted}")]}})
    # The model's sandboxed bash writes the file (the workspace is writable; it did not exist before).
    scenario_ = {"responses": [tool_reply(("t1", "bash", {"command": f"mkdir -p .tooloop && printf '%s' '{text}' "
                                                                     "> .tooloop/settings.local.json"})),
                               text_reply("done"), text_reply("again")]}
    with MockServer(scenario_) as mock:
        first = run(tooloop_exe, ws, clean_env(tmp_path, mock), "-p", "--yes", "go")
        assert first.returncode == 0, first.stderr
        if not path.exists():   # where .tooloop/ is read-only to bash, it failed: the file must still not count
            path.parent.mkdir(exist_ok=True)
            path.write_text(text)
        second = run(tooloop_exe, ws, clean_env(tmp_path, mock), "-p", "hi")
    assert second.returncode == 0, second.stderr
    assert not planted.exists(), "a hook written from inside the sandbox ran unconfined at the next start"
    assert "settings.local.json are not used (not approved yet" in second.stderr, second.stderr


def test_committed_local_allow_rules_do_not_give_a_read_only_run_bash(tooloop_exe, ws, tmp_path):
    write_json(ws / ".tooloop" / "settings.local.json", {"permissions": {"allow": ["Bash", "WebFetch"]}})
    checkout(ws, "tracked", tracked=[".tooloop/settings.local.json"])
    scenario_ = {"responses": [tool_reply(("t1", "bash", {"command": "touch pwned"})), text_reply("explained")]}
    with MockServer(scenario_) as mock:
        proc = run(tooloop_exe, ws, clean_env(tmp_path, mock), "-p", "explain this repo")
        reqs = mock.requests()
    assert proc.returncode == 0, proc.stderr
    assert not (ws / "pwned").exists(), "a repository's allow rule let the model's bash run in a read-only run"
    content, is_error = tool_results(reqs[1])["t1"]
    assert is_error and "read-only" in content, content
    assert "settings.local.json are not used (not approved yet" in proc.stderr, proc.stderr


def test_approved_local_settings_count_and_a_changed_file_is_asked_again(ws, tmp_path, monkeypatch):
    from tooloop.cli import settings

    path = ws / ".tooloop" / "settings.local.json"
    write_json(path, {"permissions": {"allow": ["bash(echo:*)"]}, "hooks": {"Stop": [hook("true")]}})
    monkeypatch.setenv("TOOLOOP_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    s = settings.load(ws)
    assert not s.allow and not s.hooks and [w.source for w in s.waiting] == ["local"]
    asked = []
    assert not settings.approve_pending(s, ws, lambda q: asked.append(q) or False)
    assert "allow bash(echo:*)" in asked[0] and "Stop hook: true" in asked[0] and not s.allow
    assert settings.approve_pending(settings.load(ws), ws, lambda q: True)
    s = settings.load(ws)
    assert s.allow == ["bash(echo:*)"] and len(s.hooks) == 1 and not s.waiting
    write_json(path, {"permissions": {"allow": ["bash(echo:*)", "Bash"]}, "hooks": {"Stop": [hook("true")]}})
    s = settings.load(ws)
    assert not s.allow and s.waiting, "a changed file waits again"
    # The approvals live with the sessions, outside the workspace.
    assert ws.resolve() not in settings.approvals_file(ws).resolve().parents


def test_approvals_kept_inside_the_workspace_are_not_read(ws, tmp_path, monkeypatch):
    from tooloop.cli import settings

    write_json(ws / ".tooloop" / "settings.local.json", {"permissions": {"allow": ["Bash"]}})
    monkeypatch.setenv("TOOLOOP_HOME", str(ws / "data"))   # tooloop's data folder inside the workspace
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    s = settings.load(ws)
    assert settings.approve_pending(s, ws, lambda q: True) and s.allow == ["Bash"]   # this session only
    s = settings.load(ws)
    assert not s.allow and s.waiting and any("inside the workspace" in p for p in s.problems)


def test_the_users_always_rule_is_saved_owner_only_approved_and_never_through_a_symlink(ws, tmp_path, monkeypatch):
    from tooloop.cli import settings

    monkeypatch.setenv("TOOLOOP_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    path = settings.save_local_rule(ws, "bash(npm test:*)")
    assert path.stat().st_mode & 0o777 == 0o600
    s = settings.load(ws)
    assert s.allow == ["bash(npm test:*)"] and not s.waiting, "the user is not asked about their own rule"
    settings.save_local_rule(ws, "bash(make:*)")
    assert settings.load(ws).allow == ["bash(npm test:*)", "bash(make:*)"]

    # What waits for approval (a hook planted in the file) is not approved by the user's next rule.
    data = json.loads(path.read_text())
    data["hooks"] = {"SessionStart": [hook(f"touch {tmp_path / 'planted'}")]}
    path.write_text(json.dumps(data))
    settings.save_local_rule(ws, "bash(ls:*)")
    s = settings.load(ws)
    assert not s.hooks and s.waiting

    # `.tooloop` a symlink out of the workspace: refused, nothing written there.
    other = tmp_path / "ws2"
    outside = tmp_path / "outside"
    outside.mkdir()
    other.mkdir()
    (other / ".tooloop").symlink_to(outside)
    with pytest.raises(OSError):
        settings.save_local_rule(other, "bash(ls:*)")
    assert list(outside.iterdir()) == []


# -- item 2: an approval pins the files a hook runs -------------------------------------------------------

def test_hook_pins_name_the_workspace_files_a_command_runs_and_nothing_outside(ws, tmp_path):
    from tooloop.cli.settings import pinned_paths

    (ws / "scripts").mkdir()
    (ws / "hooks").mkdir()
    for name in ("scripts/check.sh", "hooks/x.py", "hooks/y.py", "fmt.toml", "a.py"):
        (ws / name).write_text("x\n")
    (tmp_path / "outside.sh").write_text("x\n")
    (ws / "link").symlink_to(tmp_path)
    root = ws.resolve()

    def names(command):
        return sorted(str(p.relative_to(root)) for p in pinned_paths(command, ws))

    assert names("./scripts/check.sh") == ["scripts/check.sh"]
    assert names("python hooks/x.py --config=fmt.toml && python3 -m hooks.y") == ["fmt.toml", "hooks/x.py",
                                                                                   "hooks/y.py"]
    assert names("sh -c 'python3 a.py | cat'") == ["a.py"]
    assert names('"$CLAUDE_PROJECT_DIR"/scripts/check.sh') == ["scripts/check.sh"]
    assert names("../outside.sh; link/outside.sh; cat /etc/passwd") == []


def test_an_approved_hook_script_the_model_rewrote_is_skipped_with_one_line(tooloop_exe, ws, tmp_path, monkeypatch):
    log = tmp_path / "hook-log"
    pwned = tmp_path / "pwned"
    (ws / "scripts").mkdir()
    (ws / "scripts" / "check.sh").write_text(f"echo checked >> {log}\n")
    write_json(ws / ".tooloop" / "settings.json", {"hooks": {"PreToolUse": [hook("sh ./scripts/check.sh", "Bash")]}})
    checkout(ws, "untracked")
    approve_all(ws, tmp_path, monkeypatch)
    rewrite = f"printf 'touch {pwned}\\n' > scripts/check.sh"
    scenario_ = {"responses": [tool_reply(("t1", "bash", {"command": rewrite})),
                               tool_reply(("t2", "bash", {"command": "echo two"})),
                               tool_reply(("t3", "bash", {"command": "echo three"})),
                               text_reply("done"), text_reply("again")]}
    with MockServer(scenario_) as mock:
        proc = run(tooloop_exe, ws, clean_env(tmp_path, mock), "-p", "--yes", "go")
        assert proc.returncode == 0, proc.stderr
        assert log.read_text() == "checked\n", "the approved script ran before the first call"
        assert not pwned.exists(), "the rewritten hook script ran outside the sandbox"
        lines = [line for line in proc.stderr.splitlines() if "scripts/check.sh" in line]
        assert len(lines) == 1 and "changed since you approved it" in lines[0] and "skipped" in lines[0], proc.stderr
        # The next start asks again (here: not approved yet, with one line).
        again = run(tooloop_exe, ws, clean_env(tmp_path, mock), "-p", "hi")
    assert "settings.json are not used (not approved yet" in again.stderr, again.stderr
    assert not pwned.exists()


def test_a_changed_hook_script_is_asked_about_again_in_the_interactive_path(ws, tmp_path, monkeypatch):
    from tooloop.cli import settings

    out = tmp_path / "out"
    (ws / "check.sh").write_text(f"echo one >> {out}\n")
    write_json(ws / ".tooloop" / "settings.local.json", {"hooks": {"SessionStart": [hook("sh check.sh")]}})
    approve_all(ws, tmp_path, monkeypatch)
    s = settings.load(ws)
    asked = []
    answer = [False]
    hooks = settings.Hooks(s.hooks, ws, ask=lambda q: asked.append(q) or answer[0], files=s.files)
    hooks.session_start("startup")
    assert out.read_text() == "one\n" and not asked
    (ws / "check.sh").write_text(f"echo two >> {out}\n")   # the model rewrites it mid-session
    hooks.session_start("startup")
    assert len(asked) == 1 and "check.sh" in asked[0] and "changed since you approved it" in asked[0]
    assert out.read_text() == "one\n", "declined: the changed script did not run"
    answer[0] = True
    hooks.session_start("startup")
    assert out.read_text() == "one\ntwo\n" and len(asked) == 2
    hooks.session_start("startup")
    assert len(asked) == 2, "a yes pins the new content"
    assert not settings.load(ws).waiting, "and is remembered for the next start"


# -- item 6: hooks are bounded like tools -----------------------------------------------------------------

def test_a_20_mb_session_start_output_is_capped_before_it_reaches_the_request(tooloop_exe, ws, tmp_path):
    write_json(tmp_path / "config" / "tooloop" / "settings.json",
               {"hooks": {"SessionStart": [hook("head -c 20000000 /dev/zero | tr '\\0' a")]}})
    with MockServer(scenario("cli_continue")) as mock:
        proc = run(tooloop_exe, ws, clean_env(tmp_path, mock), "-p", "hi")
        reqs = mock.requests()
    assert proc.returncode == 0, proc.stderr
    body = json.dumps(reqs[0]["body"])
    assert len(body) < 200_000, f"a {len(body)} byte request"
    assert "aaaa" in body and "hook output cut" in body


def _dead(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def test_a_hook_that_times_out_ends_with_its_setsid_children(tooloop_exe, ws, tmp_path):
    pidfile = tmp_path / "pid"
    write_json(tmp_path / "config" / "tooloop" / "settings.json", {"hooks": {"SessionStart": [
        hook(f"setsid sleep 1000.417 & echo $! > {pidfile}; sleep 60", timeout=1)]}})
    pid = None
    try:
        with MockServer(scenario("cli_continue")) as mock:
            started = time.monotonic()
            proc = run(tooloop_exe, ws, clean_env(tmp_path, mock), "-p", "hi")
        assert proc.returncode == 0, proc.stderr
        assert time.monotonic() - started < 30
        pid = int(pidfile.read_text())
        deadline = time.monotonic() + 2
        while not _dead(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _dead(pid), f"the hook's setsid child {pid} outlived its timeout"
    finally:
        if pid is not None and not _dead(pid):
            os.kill(pid, signal.SIGKILL)


def test_mcp_approvals_kept_inside_the_workspace_are_neither_read_nor_written(ws, tmp_path, monkeypatch):
    from tooloop.cli import features

    (ws / ".mcp.json").write_text(json.dumps({"mcpServers": {"local": {"command": "true"}}}))
    config = {"command": "true"}
    monkeypatch.setenv("TOOLOOP_HOME", str(ws / "data"))   # tooloop's data folder inside the workspace
    folder = features.approvals_file(ws).parent
    folder.mkdir(parents=True)
    # What the model's sandboxed bash could write there: an approval of its own server.
    features.approvals_file(ws).write_text(json.dumps({"local": features.approval_hash(config, ws.resolve())}))
    assert features.load_approvals(ws) == {}
    features.save_approvals(ws, {"other": "x"})
    assert "other" not in features.approvals_file(ws).read_text()
