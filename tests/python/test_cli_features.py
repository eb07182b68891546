"""The `tooloop` command with its coding-agent features: sandbox mode, planning, subagents, skills, MCP servers
(with the project approval), bedrock settings, the runaway guard. The installed console script runs against
the shared mock server; the REPL parts through a pseudo-terminal (pexpect).
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "tests" / "scenarios"
sys.path.insert(0, str(ROOT / "tests" / "mock"))
from mockctl import MockServer  # noqa: E402
from _support import clean_env, cli_env, mcp_python, run_cli as run, tool_results  # noqa: E402

FASTMCP = ROOT / "tests" / "mcp" / "fastmcp_server.py"


def system_text(req):
    system = req["body"].get("system")
    if isinstance(system, list):
        return "\n".join(b.get("text", "") for b in system)
    return system or ""


def tool_names(req):
    return sorted(t["name"] for t in req["body"].get("tools", []))




def in_order(out, pieces):
    pos = 0
    for piece in pieces:
        found = out.find(piece, pos)
        assert found >= 0, f"{piece!r} missing (or out of order) after offset {pos}"
        pos = found + len(piece)


# -- planning, subagents, skills -----------------------------------------------------------------

def test_plans_delegates_to_an_explore_subagent_and_uses_a_skill(tooloop_exe, ws, tmp_path):
    (ws / "main.py").write_text("def main():\n    print('hi')\n")
    skill = ws / ".tooloop" / "skills" / "greeting"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: greeting\ndescription: How to greet the user.\n---\n"
                                    "Always greet with 'Ahoy!'.\n")
    with MockServer(SCENARIOS / "cli_plan_subagent_skill.json") as mock:
        proc = run(tooloop_exe, ws, clean_env(tmp_path, mock), "--yes", "find the entry point and greet me")
        reqs = mock.requests()
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    in_order(out, [
        "I'll plan this first.",
        "● todo_write(2 items)", "  ⎿ todos (0/2 done)", "    ▸ Exploring the code", "    ○ Apply the greeting skill",
        "● task(explore: find the entry point)",
        "    ● read_file(main.py)", "      ⎿ ", "def main():",   # the child's call, indented under the task
        "  ⎿ The entry point is main() in main.py.", "explore agent: 2 turns",
        "● skill(greeting)", "Always greet with 'Ahoy!'.",
        "● todo_write(2 items)", "  ⎿ todos (2/2 done)", "    ✔ Explore the code", "    ✔ Apply the greeting skill",
        "Done: the entry point is main() in main.py",
    ])
    assert out.count("Todo list updated") == 0   # the list is drawn once, from the todo event
    assert len(reqs) == 7
    parent, child = reqs[0], reqs[2]
    # The parent has the planning, task and skill tools; the skill is announced in its system prompt.
    assert {"todo_write", "task", "skill", "bash", "read_file"} <= set(tool_names(parent))
    assert "greeting" in system_text(parent) and "How to greet the user." in system_text(parent)
    task_tool = next(t for t in parent["body"]["tools"] if t["name"] == "task")
    assert "explore" in json.dumps(task_tool) and "general" in json.dumps(task_tool)
    # The child: its own system prompt, only read_file and bash, the task's prompt as its message.
    assert tool_names(child) == ["bash", "glob", "grep", "read_file"]
    assert "exploration agent" in system_text(child) and "Never invent paths" not in system_text(child)
    assert "Find where the program starts" in json.dumps(child["body"]["messages"])
    # What came back to the parent: the child's final answer; the skill's body.
    results = tool_results(reqs[4])
    assert "The entry point is main() in main.py." in results["toolu_01PlanTask"][0]
    assert "Ahoy!" in tool_results(reqs[5])["toolu_01PlanSkill"][0]


def test_no_planning_and_no_subagents_leave_the_tools_out(tooloop_exe, ws, tmp_path):
    with MockServer(SCENARIOS / "cli_continue.json") as mock:
        proc = run(tooloop_exe, ws, clean_env(tmp_path, mock), "-p", "--no-planning", "--no-subagents", "hi")
        reqs = mock.requests()
    assert proc.returncode == 0, proc.stderr
    names = tool_names(reqs[0])
    assert "todo_write" not in names and "task" not in names and "bash" in names


# -- sandbox -------------------------------------------------------------------------------------

def landlock():
    from tooloop.cli.features import landlock_abi
    return landlock_abi()


def test_sandbox_default_is_workspace_write_and_off_passes_off(tooloop_exe, ws, tmp_path):
    with MockServer(SCENARIOS / "cli_continue.json") as mock:
        assert run(tooloop_exe, ws, clean_env(tmp_path, mock), "-p", "hi").returncode == 0
        default_system = system_text(mock.requests()[0])
    with MockServer(SCENARIOS / "cli_continue.json") as mock:
        assert run(tooloop_exe, ws, clean_env(tmp_path, mock), "-p", "--sandbox", "off", "hi").returncode == 0
        off_system = system_text(mock.requests()[0])
    with MockServer(SCENARIOS / "cli_continue.json") as mock:
        assert run(tooloop_exe, ws, clean_env(tmp_path, mock), "-p", "--read-only", "hi").returncode == 0
        ro_system = system_text(mock.requests()[0])
    # The core tells the model about the sandbox it was given.
    assert "write only inside the workspace" in default_system
    assert "sandboxed" not in off_system
    assert "sandboxed read-only" in ro_system


def test_sandbox_required(tooloop_exe, ws, tmp_path):
    if landlock() is None:
        proc = run(tooloop_exe, ws, clean_env(tmp_path), "-p", "--sandbox", "required", "hi")
        assert proc.returncode == 2 and "Landlock" in proc.stderr
        return
    with MockServer(SCENARIOS / "cli_continue.json") as mock:
        proc = run(tooloop_exe, ws, clean_env(tmp_path, mock), "-p", "--sandbox", "required", "hi")
        assert proc.returncode == 0, proc.stderr
        assert "write only inside the workspace" in system_text(mock.requests()[0])


def test_sandbox_mode_refuses_required_without_landlock():
    from tooloop.cli.config import ConfigProblem
    from tooloop.cli.features import sandbox_mode

    assert sandbox_mode(None, False, probe=lambda: 4) == ("workspace-write", "")
    assert sandbox_mode(None, True, probe=lambda: 4) == ("read-only", "")
    assert sandbox_mode("off", False, probe=lambda: None) == ("off", "")
    # Not asked for: the default falls back to off, said in one line (never claimed to the model).
    mode, note = sandbox_mode(None, False, probe=lambda: None)
    assert mode == "off" and "unconfined" in note
    # Asked for explicitly: refused, whichever mode.
    for asked in ("required", "workspace-write", "read-only"):
        with pytest.raises(ConfigProblem, match="Landlock"):
            sandbox_mode(asked, False, probe=lambda: None)
    assert sandbox_mode("required", False, probe=lambda: 1) == ("workspace-write", "")


# -- bedrock -------------------------------------------------------------------------------------

def test_bedrock_needs_a_region_and_names_the_aws_variables(tooloop_exe, ws, tmp_path):
    proc = run(tooloop_exe, ws, clean_env(tmp_path), "-p", "--provider", "bedrock", "hi")
    assert proc.returncode == 2 and "--region" in proc.stderr
    proc = run(tooloop_exe, ws, clean_env(tmp_path), "-p", "--provider", "bedrock", "--region", "us-west-2", "hi")
    assert proc.returncode == 2
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        assert var in proc.stderr


def test_bedrock_credentials_the_core_never_reads_are_refused_when_settings_resolve(tmp_path, monkeypatch):
    """AWS_PROFILE naming no profile in any credentials file, AWS_CONFIG_FILE, container or web-identity
    variables: the Bedrock provider reads none of these, so resolving the settings refuses them (the CLI
    used to accept them and fail only when the agent was built)."""
    from tooloop.cli.args import parse_args
    from tooloop.cli.config import ConfigProblem, resolve

    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SHARED_CREDENTIALS_FILE",
                "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "config").write_text("[profile work]\nregion = us-west-2\n")
    args = parse_args(["--provider", "bedrock", "--region", "us-west-2", "-w", str(tmp_path), "x"])
    for extra in ({"AWS_PROFILE": "work"}, {"AWS_CONFIG_FILE": str(tmp_path / "config")},
                  {"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/creds"},
                  {"AWS_WEB_IDENTITY_TOKEN_FILE": str(tmp_path / "token")}):
        for k, v in extra.items():
            monkeypatch.setenv(k, v)
        with pytest.raises(ConfigProblem, match="no AWS credentials"):
            resolve(args, dict(extra, HOME=str(tmp_path)))
        for k in extra:
            monkeypatch.delenv(k)
    # What the provider does read passes: a profile in ~/.aws/credentials.
    (tmp_path / ".aws").mkdir()
    (tmp_path / ".aws" / "credentials").write_text("[work]\naws_access_key_id = AKIA\naws_secret_access_key = s\n")
    monkeypatch.setenv("AWS_PROFILE", "work")
    assert resolve(args, {"AWS_PROFILE": "work", "HOME": str(tmp_path)}).provider == "bedrock"


def test_bedrock_settings_default_model_and_region_from_env(tmp_path, monkeypatch):
    from tooloop.cli.args import parse_args
    from tooloop.cli.config import DEFAULT_BEDROCK_MODEL, resolve

    # The credentials check is the library's, which reads the process environment as the provider will.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIA")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    env = {"AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": "s", "AWS_DEFAULT_REGION": "eu-west-1",
           "HOME": str(tmp_path)}
    s = resolve(parse_args(["--provider", "bedrock", "-w", str(tmp_path), "x"]), env)
    assert (s.provider, s.model, s.region, s.api_key) == ("bedrock", DEFAULT_BEDROCK_MODEL, "eu-west-1", None)
    s = resolve(parse_args(["--provider", "bedrock", "--region", "us-east-1", "--model", "m", "-w", str(tmp_path),
                            "x"]), dict(env, AWS_REGION="ap-south-1"))
    assert (s.model, s.region) == ("m", "us-east-1")


# -- MCP -----------------------------------------------------------------------------------------

def write_mcp_json(ws, py):
    (ws / ".mcp.json").write_text(json.dumps({"mcpServers": {"demo": {"command": py, "args": [str(FASTMCP)]}}}))


def approvals(tmp_path):
    files = list((tmp_path / "home" / "sessions").glob("*/mcp-approved.json"))
    return json.loads(files[0].read_text()) if files else {}


def test_print_mode_skips_an_unapproved_project_server_with_a_notice(tooloop_exe, ws, tmp_path):
    write_mcp_json(ws, "/nonexistent/python")   # never started: not approved
    with MockServer(SCENARIOS / "cli_continue.json") as mock:
        proc = run(tooloop_exe, ws, clean_env(tmp_path, mock), "-p", "hi")
        reqs = mock.requests()
    assert proc.returncode == 0
    assert proc.stderr.count("\n") == 1 and "MCP server 'demo' from .mcp.json skipped (not approved" in proc.stderr
    assert not any(n.startswith("mcp__") for n in tool_names(reqs[0]))


def test_mcp_config_flag_is_trusted_and_its_tools_obey_the_policy(tooloop_exe, ws, tmp_path):
    py = mcp_python()
    cfg = tmp_path / "mcp.json"
    cfg.write_text(json.dumps({"mcpServers": {"demo": {"command": [py, str(FASTMCP)]}}}))
    with MockServer(SCENARIOS / "cli_mcp_echo.json") as mock:
        # No terminal: the read-only policy refuses the (not read-only) MCP tool.
        proc = run(tooloop_exe, ws, clean_env(tmp_path, mock), "--mcp-config", str(cfg), "call echo")
        reqs = mock.requests()
    assert proc.returncode == 0, proc.stderr
    assert "mcp__demo__echo" in tool_names(reqs[0])
    content, is_error = tool_results(reqs[1])["toolu_01McpEcho"]
    assert is_error and "mcp__demo__echo is disabled" in content
    with MockServer(SCENARIOS / "cli_mcp_echo.json") as mock:
        proc = run(tooloop_exe, ws, clean_env(tmp_path, mock), "--yes", "--mcp-config", str(cfg), "call echo")
        reqs = mock.requests()
    assert proc.returncode == 0, proc.stderr
    assert tool_results(reqs[1])["toolu_01McpEcho"] == ("echo: ahoy", False)
    assert "mcp__demo__echo" in proc.stdout and "echo: ahoy" in proc.stdout


def test_repl_asks_to_approve_a_project_server_then_calls_it_and_mcp_lists_and_revokes(tooloop_exe, ws, tmp_path):
    pytest.importorskip("pexpect")
    from _terminal import Term, term_env, PROMPT

    py = mcp_python()
    write_mcp_json(ws, py)
    with MockServer(SCENARIOS / "cli_mcp_echo.json") as mock:
        with Term(tooloop_exe, [], ws, term_env(tmp_path, mock, NO_COLOR="1")) as term:
            term.expect(r"wants to start MCP server 'demo'")
            term.expect(r"Allow it in this workspace\? \[y/n\]")
            term.child.send("y")                    # one key, no Enter
            term.expect("sandbox: workspace-write")   # the header line says the mode
            term.expect(PROMPT)
            term.type("call the echo tool")
            term.expect(r"allow mcp__demo__echo\?")
            term.child.send("y")
            term.expect("echo: ahoy")
            term.expect("The server said: echo: ahoy")
            term.expect(PROMPT)
            term.type("/mcp")
            term.expect(r"demo: \w+ · \d+ tools")
            term.expect("echo")
            term.expect(PROMPT)
            term.type("/mcp revoke demo")
            term.expect("approval of MCP server 'demo' revoked")
            term.expect(PROMPT)
            term.child.sendcontrol("d")
            assert term.finish() == 0
        reqs = mock.requests()
    print(term.text)
    assert "mcp__demo__echo" in tool_names(reqs[0])
    assert tool_results(reqs[1])["toolu_01McpEcho"] == ("echo: ahoy", False)
    assert approvals(tmp_path) == {}   # revoked

    # Approved again (stored), a -p run starts it without asking; a changed config is not approved.
    from tooloop.cli import features
    from tooloop.cli.paths import sessions_dir
    config = json.loads((ws / ".mcp.json").read_text())["mcpServers"]["demo"]
    folder = sessions_dir(ws.resolve(), {"TOOLOOP_HOME": str(tmp_path / "home")})
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "mcp-approved.json").write_text(json.dumps({"demo": features.config_hash(config)}))
    with MockServer(SCENARIOS / "cli_mcp_echo.json") as mock:
        proc = run(tooloop_exe, ws, clean_env(tmp_path, mock), "-p", "--yes", "call echo")
        reqs = mock.requests()
    assert proc.returncode == 0 and "skipped" not in proc.stderr, proc.stderr
    assert tool_results(reqs[1])["toolu_01McpEcho"] == ("echo: ahoy", False)
    write_mcp_json(ws, py + "3" if not py.endswith("3") else py[:-1])   # another command: asks again
    with MockServer(SCENARIOS / "cli_continue.json") as mock:
        proc = run(tooloop_exe, ws, clean_env(tmp_path, mock), "-p", "hi")
    assert "MCP server 'demo' from .mcp.json skipped" in proc.stderr


# -- the runaway guard --------------------------------------------------------------------------------------

def test_a_run_stopped_by_the_runaway_guard_says_so_in_one_line(tooloop_exe, ws, tmp_path):
    (ws / "notes.txt").write_text("notes\n")
    with MockServer(SCENARIOS / "cli_repetition.json") as mock:
        proc = run(tooloop_exe, ws, clean_env(tmp_path, mock), "summarize notes.txt")
        n = len(mock.requests())
    assert n < 8
    assert proc.returncode == 1
    assert proc.stderr.strip().count("\n") == 0
    assert "stopped: the model repeated the same tool call with the same input (runaway guard)" in proc.stderr
    assert "the model repeated read_file with the same input" in proc.stdout


def test_bedrock_run_signs_for_the_region_and_uses_the_default_model(tooloop_exe, ws, tmp_path):
    with MockServer(SCENARIOS / "bedrock_text.json") as mock:
        env = clean_env(tmp_path, AWS_ACCESS_KEY_ID="AKIDEXAMPLE", AWS_SECRET_ACCESS_KEY="secret",
                        AWS_REGION="eu-central-1")
        proc = run(tooloop_exe, ws, env, "-p", "--provider", "bedrock", "--base-url", mock.base_url, "hi")
        reqs = mock.requests()
    assert proc.returncode == 0, proc.stderr
    assert "happy to help" in proc.stdout
    assert reqs[0]["path"].startswith("/model/us.anthropic.claude-sonnet-4-5-20250929-v1")
    assert "/eu-central-1/bedrock/aws4_request" in reqs[0]["headers"]["authorization"]


def test_bedrock_signature_refused_names_the_aws_variables(tooloop_exe, ws, tmp_path):
    scenario = json.loads((SCENARIOS / "bedrock_text.json").read_text())
    scenario["responses"][0]["bedrock"] = {"secret_access_key": "the-right-one"}
    with MockServer(scenario) as mock:
        env = clean_env(tmp_path, AWS_ACCESS_KEY_ID="AKIDEXAMPLE", AWS_SECRET_ACCESS_KEY="wrong")
        proc = run(tooloop_exe, ws, env, "-p", "--provider", "bedrock", "--region", "us-west-2",
                   "--base-url", mock.base_url, "hi")
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1
    assert "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY or AWS_PROFILE" in proc.stderr


def test_repl_todos_and_skills_commands(tooloop_exe, ws, tmp_path):
    pytest.importorskip("pexpect")
    from _terminal import Term, term_env, PROMPT

    (ws / "main.py").write_text("def main():\n    print('hi')\n")
    skill = ws / ".tooloop" / "skills" / "greeting"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: greeting\ndescription: How to greet the user.\n---\nSay 'Ahoy!'.\n")
    broken = ws / ".tooloop" / "skills" / "broken"
    broken.mkdir()
    (broken / "SKILL.md").write_text("no front matter here\n")
    with MockServer(SCENARIOS / "cli_plan_subagent_skill.json") as mock:
        with Term(tooloop_exe, ["--yes"], ws, term_env(tmp_path, mock, NO_COLOR="1",
                                                       XDG_CONFIG_HOME=str(tmp_path / "config"))) as term:
            term.expect(PROMPT)
            term.type("/todos")
            term.expect(r"todos \(0/0 done\)")
            term.expect(r"\(empty\)")
            term.expect(PROMPT)
            term.type("/skills")
            term.expect(r"greeting: How to greet the user\.")
            term.expect(r"skipped .*broken")
            term.expect(PROMPT)
            term.type("find the entry point and greet me")
            term.expect("Done: the entry point is main")
            term.expect(PROMPT)
            term.type("/todos")
            term.expect(r"todos \(2/2 done\)")
            term.expect("✔ Apply the greeting skill")
            term.expect(PROMPT)
            term.type("/help")
            term.expect("/mcp revoke NAME")
            term.expect(PROMPT)
            term.child.sendcontrol("d")
            assert term.finish() == 0
    print(term.text)


def test_a_subagents_bash_call_is_asked_about_under_its_task(tooloop_exe, ws, tmp_path):
    pytest.importorskip("pexpect")
    from _terminal import Term, term_env, PROMPT

    (ws / "a.txt").write_text("a\n")
    (ws / "b.txt").write_text("b\n")
    with MockServer(SCENARIOS / "cli_subagent_ask.json") as mock:
        with Term(tooloop_exe, [], ws, term_env(tmp_path, mock, NO_COLOR="1")) as term:
            term.expect(PROMPT)
            term.type("how many files?")
            term.expect(r"task\(explore: count files\)")
            term.expect(r"    ● bash\(ls \| wc -l\)")
            term.expect(r"allow bash\?")
            term.child.send("y")
            term.expect(r"      ⎿ 2")
            term.expect("The explorer counted 2 files.")
            term.expect(PROMPT)
            term.child.sendcontrol("d")
            assert term.finish() == 0
        reqs = mock.requests()
    print(term.text)
    assert term.text.count("bash(ls | wc -l)") == 1   # the call's line is drawn once, indented
    assert tool_results(reqs[2])["toolu_01SubAskBash"] == ("2", False)


def test_read_only_policy_still_plans_and_delegates(tooloop_exe, ws, tmp_path):
    # No terminal, no --yes: read-only. todo_write and task are never asked about (the child's own calls
    # go through the same policy); read_file and skill are read-only.
    (ws / "main.py").write_text("def main():\n    print('hi')\n")
    skill = ws / ".tooloop" / "skills" / "greeting"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: greeting\ndescription: How to greet the user.\n---\nAhoy!\n")
    with MockServer(SCENARIOS / "cli_plan_subagent_skill.json") as mock:
        proc = run(tooloop_exe, ws, clean_env(tmp_path, mock), "find the entry point and greet me")
        reqs = mock.requests()
    assert proc.returncode == 0, proc.stderr
    results = {}
    for r in reqs:
        results.update(tool_results(r))
    for call in ("toolu_01PlanTodo1", "toolu_01PlanTask", "toolu_01ChildRead", "toolu_01PlanSkill", "toolu_01PlanTodo2"):
        assert results[call][1] is False, (call, results[call])
    assert "denied" not in proc.stdout


def test_an_mcp_server_that_cannot_start_is_one_line_and_the_run_goes_on(tooloop_exe, ws, tmp_path):
    cfg = tmp_path / "mcp.json"
    cfg.write_text(json.dumps({"mcpServers": {"ghost": {"command": str(tmp_path / "no-such-server")}}}))
    with MockServer(SCENARIOS / "cli_continue.json") as mock:
        proc = run(tooloop_exe, ws, clean_env(tmp_path, mock), "-p", "--mcp-config", str(cfg), "hi")
    assert proc.returncode == 0
    assert proc.stderr.count("\n") == 1 and "'ghost'" in proc.stderr and "no-such-server" in proc.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    proc = run(tooloop_exe, ws, clean_env(tmp_path, ANTHROPIC_API_KEY="k"), "-p", "--mcp-config", str(bad), "hi")
    assert proc.returncode == 2 and "is not valid JSON" in proc.stderr


def test_declining_a_project_server_skips_it_and_ctrl_c_at_the_question_exits_130(tooloop_exe, ws, tmp_path):
    pytest.importorskip("pexpect")
    from _terminal import Term, term_env, PROMPT

    write_mcp_json(ws, "/nonexistent/python")
    with MockServer(SCENARIOS / "cli_continue.json") as mock:
        with Term(tooloop_exe, [], ws, term_env(tmp_path, mock, NO_COLOR="1")) as term:
            term.expect(r"MCP server 'demo'.*\[y/n\]")
            term.child.send("n")
            term.expect(r"MCP server 'demo' from .mcp.json skipped \(declined\)")
            term.expect(PROMPT)
            term.type("/mcp")
            term.expect(r"demo: not started \(.mcp.json, not approved\)")
            term.expect(PROMPT)
            term.child.sendcontrol("d")
            assert term.finish() == 0
        assert approvals(tmp_path) == {}
        with Term(tooloop_exe, [], ws, term_env(tmp_path, mock, NO_COLOR="1")) as term:
            term.expect(r"MCP server 'demo'.*\[y/n\]")   # asked again: a no is not remembered
            term.child.sendcontrol("c")
            assert term.finish() == 130
    assert "Traceback" not in term.text


def test_header_line_says_when_landlock_is_missing(tmp_path, monkeypatch):
    import io
    import threading
    from types import SimpleNamespace

    from tooloop.cli import features
    from tooloop.cli.render import Renderer
    from tooloop.cli.repl import Repl

    monkeypatch.setattr(features, "landlock_abi", lambda: None)
    mode, note = features.sandbox_mode(None, False, probe=features.landlock_abi)
    settings = SimpleNamespace(model="m", provider="anthropic", workspace=tmp_path, sandbox=mode, sandbox_note=note)
    out = io.StringIO()
    repl = Repl(SimpleNamespace(messages=[]), settings, Renderer(out, color=False), SimpleNamespace(mode="ask"),
                tmp_path / "s.jsonl", threading.Event())
    repl.banner()
    assert ("sandbox: off (workspace-write unavailable: no Landlock on this kernel, bash runs unconfined)"
            in out.getvalue())


# -- a sandbox the kernel cannot provide -------------------------------------------------

NO_LANDLOCK = ("import sys\n"
               "from tooloop.cli import app, features\n"
               "features.sandbox_mode.__defaults__ = (lambda: None,)   # this 'kernel' has no Landlock\n"
               "sys.exit(app.main(sys.argv[1:]))\n")


def run_without_landlock(ws, env, *args):
    return subprocess.run([sys.executable, "-c", NO_LANDLOCK, "--workspace", str(ws), *args], env=env,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def test_an_explicit_sandbox_the_kernel_cannot_provide_is_refused_and_the_default_is_said(ws, tmp_path):
    for mode in ("workspace-write", "read-only", "required"):
        proc = run_without_landlock(ws, cli_env(tmp_path, ANTHROPIC_API_KEY="sk-test"), "-p", "--sandbox", mode, "hi")
        assert proc.returncode == 2, (mode, proc.stdout, proc.stderr)
        assert f"--sandbox {mode}" in proc.stderr and "Landlock" in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    with MockServer(SCENARIOS / "cli_continue.json") as mock:
        proc = run_without_landlock(ws, cli_env(tmp_path, mock), "hi")
        assert proc.returncode == 0, proc.stderr
        # Said in one line, and the model is not told it is confined.
        assert proc.stderr.count("bash runs unconfined") == 1, proc.stderr
        assert "sandboxed" not in system_text(mock.requests()[0])


def test_the_default_bedrock_model_has_a_window_and_a_price() -> None:
    # The status bar showed no cost on Bedrock: the model table knew the window of a Bedrock id, not its price.
    from tooloop import _tooloop
    from tooloop.cli.config import DEFAULT_BEDROCK_MODEL
    assert _tooloop.context_window(DEFAULT_BEDROCK_MODEL) == 200_000
    usage = {"input_tokens": 1_000_000, "output_tokens": 1_000_000}
    assert _tooloop.estimate_cost_usd(DEFAULT_BEDROCK_MODEL, usage) == 18.0
