"""The files that decide what the agent may run are protected from the file tools inside a writable
workspace (issue 37, item 3): `.tooloop/`, `.claude/`, `.mcp.json`, `.git/hooks/`, `.git/config` and the user's
config folder. write_file and edit_file are refused with `--yes` and `-p` (the model reads why), whatever
path spelling reaches them (`..`, a symlink in the workspace); no allow rule lets them through; on a terminal
they are asked about every time (an "always" answer is not kept); `--allow-config-edits` lifts it.

The installed `tooloop` runs against the mock server; the policy objects are tested directly where a
terminal would be needed.
"""

import json
import os
from types import SimpleNamespace

import pytest

from _support import MockServer, clean_env, run_cli, text_reply, tool_reply, tool_results

SETTINGS = json.dumps({"permissions": {"allow": ["bash(*)"]}})


def writes(*paths):
    """A scenario: one turn writing each of `paths` with write_file, then an answer."""
    calls = [(f"w{i}", "write_file", {"path": p, "content": SETTINGS}) for i, p in enumerate(paths)]
    return {"responses": [tool_reply(*calls), text_reply("done")]}


def results_of(mock):
    reqs = mock.requests()
    assert len(reqs) == 2, reqs
    return tool_results(reqs[1])


@pytest.fixture
def workspace(tmp_path):
    ws = tmp_path / "ws"
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / "sub").mkdir()
    os.symlink(".tooloop", ws / "cfg")          # a workspace symlink to a protected folder
    os.symlink(".git/config", ws / "gitcfg")    # and to a protected file
    return ws


SPELLINGS = [".tooloop/settings.json", "./.tooloop/../.tooloop/settings.local.json", ".claude/settings.json",
             ".mcp.json", ".git/hooks/pre-commit", "sub/../.git/config", "cfg/settings.json", "gitcfg",
             "sub/.git/hooks/post-checkout"]


def test_yes_refuses_file_tool_writes_to_protected_paths_however_spelled(tooloop_exe, workspace, tmp_path):
    with MockServer(writes(*SPELLINGS, "notes.txt")) as mock:
        proc = run_cli(tooloop_exe, workspace, clean_env(tmp_path, mock), "-p", "--yes", "go")
        got = results_of(mock)
    assert proc.returncode == 0, proc.stderr
    for i, path in enumerate(SPELLINGS):
        text, is_error = got[f"w{i}"]
        assert is_error and "protected" in text and "--allow-config-edits" in text, (path, text)
    assert not (workspace / ".tooloop").exists() and not (workspace / ".claude").exists()
    assert not (workspace / ".mcp.json").exists() and not (workspace / ".git" / "hooks" / "pre-commit").exists()
    assert (workspace / ".git" / "config").read_text() == "[core]\n"
    assert not (workspace / "sub" / ".git").exists()
    # An ordinary file is written as before.
    assert got[f"w{len(SPELLINGS)}"][1] is False and (workspace / "notes.txt").read_text() == SETTINGS


def test_yes_refuses_edit_file_on_git_config(tooloop_exe, workspace, tmp_path):
    scenario = {"responses": [tool_reply(("e1", "edit_file", {"path": ".git/config", "old_text": "[core]",
                                                              "new_text": "[core]\n\thooksPath = x"})),
                              text_reply("done")]}
    with MockServer(scenario) as mock:
        proc = run_cli(tooloop_exe, workspace, clean_env(tmp_path, mock), "--yes", "go")
        text, is_error = results_of(mock)["e1"]
    assert proc.returncode == 0, proc.stderr
    assert is_error and ".git/config is protected" in text
    assert (workspace / ".git" / "config").read_text() == "[core]\n"


def test_an_allow_rule_in_the_users_settings_does_not_open_protected_paths_in_print_mode(
        tooloop_exe, workspace, tmp_path):
    config = tmp_path / "config" / "tooloop"
    config.mkdir(parents=True)
    (config / "settings.json").write_text(json.dumps({"permissions": {"allow": ["write_file", "edit_file"]}}))
    with MockServer(writes(".tooloop/settings.json", "ok.txt")) as mock:
        proc = run_cli(tooloop_exe, workspace, clean_env(tmp_path, mock), "-p", "go")
        got = results_of(mock)
    assert proc.returncode == 0, proc.stderr
    assert got["w0"][1] and "protected" in got["w0"][0]
    assert not (workspace / ".tooloop").exists()
    assert got["w1"][1] is False and (workspace / "ok.txt").exists()   # the rule itself still works


def test_allow_config_edits_lets_the_file_tools_write_protected_paths(tooloop_exe, workspace, tmp_path):
    with MockServer(writes(".tooloop/settings.json", "cfg/other.json")) as mock:
        proc = run_cli(tooloop_exe, workspace, clean_env(tmp_path, mock), "-p", "--yes", "--allow-config-edits",
                       "go")
        got = results_of(mock)
    assert proc.returncode == 0, proc.stderr
    assert got["w0"][1] is False and got["w1"][1] is False
    assert (workspace / ".tooloop" / "settings.json").read_text() == SETTINGS
    assert (workspace / ".tooloop" / "other.json").read_text() == SETTINGS


# -- the question on a terminal: asked every time, "always" not kept -----------------------------------------

def test_on_a_terminal_a_protected_write_is_asked_every_time_and_always_is_not_kept(tmp_path):
    import tooloop
    from tooloop.cli.permissions import AskPolicy, Observed, Protected

    answers = ["a", "a", "a", "n"]
    shown = []
    ask = AskPolicy(lambda name, inp, ident="": shown.append(inp["path"]), lambda: answers.pop(0))
    ws = tmp_path / "ws"
    ws.mkdir()
    policy = Observed(ask, lambda *a: None, protected=Protected(ws, config_dir=tmp_path / "cfg"))
    agent = tooloop.Agent(provider=lambda r: {"content": "x"}, builtin_tools=True, workspace=str(ws))
    policy.bind(agent)

    def call(path):
        return SimpleNamespace(name="write_file", input={"path": path, "content": ""}, id="t")

    assert policy(call(".tooloop/settings.json")) is True       # "a" allows this call...
    assert policy(call(".tooloop/settings.json")) is True       # ...and the next is asked again
    assert shown == [".tooloop/settings.json", ".tooloop/settings.json"]
    assert policy(call("notes.txt")) is True                     # an ordinary write: asked, "always" kept
    assert policy(call("other.txt")) is True
    assert shown == [".tooloop/settings.json", ".tooloop/settings.json", "notes.txt"]
    assert isinstance(policy(call(".mcp.json")), str)           # "always" for write_file did not cover it
    assert shown[-1] == ".mcp.json" and answers == []


# -- tooloop batch: no one can approve, so refused (also when an allow rule would run the call) --------------

def batch_writes(path):
    """Every batch task writes `path` with write_file once, then answers."""
    call = tool_reply(("toolu_w1", "write_file", {"path": path, "content": SETTINGS}))
    return {"responses": [], "routes": [{"match": {"body_contains": "toolu_w1\","}, "response": text_reply("done")},
                                        {"match": {}, "response": call}]}


@pytest.mark.parametrize("flags,rules", [(["--yes"], None), ([], {"allow": ["write_file", "edit_file"]})],
                         ids=["yes", "allow-rules"])
def test_batch_refuses_protected_writes_in_the_task_workspaces(tooloop_exe, tmp_path, flags, rules):
    (tmp_path / "tasks.jsonl").write_text(json.dumps({"id": "t0", "input": "go", "workspace": "ws/t0"}) + "\n")
    if rules is not None:
        (tmp_path / "config" / "tooloop").mkdir(parents=True)
        (tmp_path / "config" / "tooloop" / "settings.json").write_text(json.dumps({"permissions": rules}))
    for path, allow in ((".git/hooks/pre-commit", []), (".tooloop/settings.json", ["--allow-config-edits"])):
        with MockServer(batch_writes(path)) as mock:
            proc = run_cli(tooloop_exe, tmp_path, clean_env(tmp_path, mock), "batch", "tasks.jsonl", *flags,
                           *allow, "--out", f"runs-{len(allow)}")
            got = tool_results(mock.requests()[-1])
        assert proc.returncode == 0, proc.stderr
        written = (tmp_path / "ws" / "t0" / path).exists()
        if allow:
            assert got["toolu_w1"][1] is False and written
        else:
            assert got["toolu_w1"][1] and "protected" in got["toolu_w1"][0] and not written, got


def test_bash_is_told_the_protected_paths_with_the_users_folders_when_they_lie_in_the_workspace(tmp_path):
    from tooloop.cli.permissions import protected_paths, protection_options

    home = tmp_path / "home"
    env = {"XDG_CONFIG_HOME": str(home / ".config"), "TOOLOOP_HOME": str(home / ".local" / "share" / "tooloop")}
    assert protection_options(True, home, env) == {"protected_paths": []}
    assert protection_options(False, tmp_path / "ws", env) == {}   # the library's default list holds
    assert protection_options(False, home, env) == {"protected_paths": [
        ".tooloop", ".claude", ".mcp.json", ".git/hooks", ".git/config", ".config/tooloop",
        ".local/share/tooloop"]}
    listed = protected_paths("/w", {"XDG_CONFIG_HOME": "/c"})
    assert listed == ["/w/.tooloop", "/w/.claude", "/w/.mcp.json", "/w/.git/hooks", "/w/.git/config", "/c/tooloop"]