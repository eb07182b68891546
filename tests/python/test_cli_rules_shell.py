"""The `tooloop` command's permission rules read bash with bash's grammar (issue 38), end to end against the
mock server: an allow rule in the user's own settings (trusted) never lets a second command through a
comment, and a deny rule sees a command inside `bash -c`."""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "mock"))
from mockctl import MockServer  # noqa: E402
from _support import cli_env, run_cli as run, text_reply, tool_reply, tool_results  # noqa: E402


def user_settings(tmp_path, data):
    path = tmp_path / "config" / "tooloop" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def env_for(tmp_path, mock):
    return cli_env(tmp_path, mock, XDG_CONFIG_HOME=str(tmp_path / "config"))


def test_an_echo_allow_rule_does_not_run_a_second_line_hidden_behind_a_quote_in_a_comment(tooloop_exe, ws, tmp_path):
    user_settings(tmp_path, {"permissions": {"allow": ["Bash(echo:*)"]}})
    scenario = {"responses": [
        tool_reply(("t1", "bash", {"command": "echo hi #'\ntouch pwned"}), ("t2", "bash", {"command": "echo plain"})),
        text_reply("done"),
    ]}
    with MockServer(scenario) as mock:
        proc = run(tooloop_exe, ws, env_for(tmp_path, mock), "-p", "go")
        reqs = mock.requests()
    assert proc.returncode == 0, proc.stderr
    results = tool_results(reqs[1])
    assert not (ws / "pwned").exists(), "the line after the comment ran"
    assert results["t1"][1], f"refused in -p, not run: {results['t1']}"
    assert results["t2"] == ("plain\n", False) or results["t2"][0].startswith("plain"), results["t2"]


def test_a_deny_rule_sees_the_command_inside_bash_c(tooloop_exe, ws, tmp_path):
    user_settings(tmp_path, {"permissions": {"allow": ["Bash"], "deny": ["Bash(rm:*)"]}})
    (ws / "victim").write_text("x")
    scenario = {"responses": [
        tool_reply(("t1", "bash", {"command": "bash -c 'rm -f victim'"}), ("t2", "bash", {"command": "\\rm victim"})),
        text_reply("done"),
    ]}
    with MockServer(scenario) as mock:
        proc = run(tooloop_exe, ws, env_for(tmp_path, mock), "-p", "go")
        reqs = mock.requests()
    assert proc.returncode == 0, proc.stderr
    results = tool_results(reqs[1])
    assert (ws / "victim").exists()
    assert results["t1"][1] and "Bash(rm:*)" in results["t1"][0], results["t1"]
    assert results["t2"][1] and "Bash(rm:*)" in results["t2"][0], results["t2"]
