"""The `tooloop` command's control features end to end, against the mock server: settings files (rules,
the project file's approval), command hooks run as real child processes (blocking with exit 2, JSON
decisions, timeouts that end the hook's whole process tree), --max-budget-usd, AGENTS.md on by default,
and in a pseudo-terminal: approving a project's settings, /plan, and saving a bash prefix rule."""

import json
import os
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "mock"))
from mockctl import MockServer  # noqa: E402
from _support import cli_env, run_cli as run, text_reply, tool_reply, tool_results  # noqa: E402


def env_for(tmp_path, mock, **extra):
    env = cli_env(tmp_path, mock, XDG_CONFIG_HOME=str(tmp_path / "config"), **extra)
    return env


def write_json(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def user_settings(tmp_path, data):
    write_json(tmp_path / "config" / "tooloop" / "settings.json", data)


def hook(command, matcher="", timeout=None):
    h = {"type": "command", "command": command}
    if timeout is not None:
        h["timeout"] = timeout
    return {"matcher": matcher, "hooks": [h]}


def procs_with(marker):
    found = []
    for e in Path("/proc").iterdir():
        if not e.name.isdigit():
            continue
        try:
            cmd = (e / "cmdline").read_bytes().decode("utf-8", "replace")
            state = (e / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmd and state != "Z":
            found.append(int(e.name))
    return found


def test_pre_tool_use_hook_blocks_with_exit_2_and_post_tool_use_sees_the_result(tooloop_exe, ws, tmp_path):
    log = tmp_path / "hook.log"
    pre = (f"python3 -c \"import json,sys; e=json.load(sys.stdin); open('{log}','a').write('pre '+e['tool_name']+' '"
           f"+json.dumps(e['tool_input'])+'\\n'); c=e['tool_input'].get('command',''); "
           f"(sys.stderr.write('no rm here, use trash'), sys.exit(2)) if 'rm ' in c else None\"")
    post = (f"python3 -c \"import json,sys; e=json.load(sys.stdin); open('{log}','a').write('post '+e['hook_event_name']"
            f"+' '+json.dumps(e['tool_response']['content'])+'\\n')\"")
    user_settings(tmp_path, {"hooks": {"PreToolUse": [hook(pre, "Bash")], "PostToolUse": [hook(post, "bash")]}})
    scenario = {"responses": [
        tool_reply(("t1", "bash", {"command": "rm -rf build"}), ("t2", "bash", {"command": "echo hi"})),
        text_reply("done"),
    ]}
    with MockServer(scenario) as mock:
        proc = run(tooloop_exe, ws, env_for(tmp_path, mock), "-p", "--yes", "clean up")
        reqs = mock.requests()
    assert proc.returncode == 0
    results = tool_results(reqs[1])
    assert results["t1"][1] and "no rm here, use trash" in results["t1"][0]
    assert results["t2"] == ("hi\n", False) or results["t2"][0].startswith("hi")
    lines = log.read_text().splitlines()
    assert lines[0] == 'pre Bash {"command": "rm -rf build"}'
    assert lines[1] == 'pre Bash {"command": "echo hi"}'
    assert lines[2].startswith("post PostToolUse") and "hi" in lines[2]
    assert len(lines) == 3, "PostToolUse runs only for the call that ran"


def test_json_block_decision_user_prompt_context_and_a_timed_out_hook_ends_its_process_tree(tooloop_exe, ws, tmp_path):
    marker = f"tooloop-hook-marker-{os.getpid()}"
    slow = f"sleep 300 {marker} & sleep 300"   # a child of its own, and the hook itself never finishes
    slow = f"sh -c 'exec -a {marker} sleep 300' & sleep 30"
    block = "echo '{\"decision\": \"block\", \"reason\": \"write_file is frozen\"}'"
    # Claude Code's newer PreToolUse answer.
    deny = ("echo '{\"hookSpecificOutput\": {\"hookEventName\": \"PreToolUse\", \"permissionDecision\": \"deny\", "
            "\"permissionDecisionReason\": \"b.txt is generated\"}}'")
    user_settings(tmp_path, {"hooks": {
        "UserPromptSubmit": [hook("echo 'The build command is make fast.'")],
        "PreToolUse": [hook(slow, "bash", timeout=1), hook(block, "Write"), hook(deny, "Edit")],
    }})
    scenario = {"responses": [
        tool_reply(("t1", "write_file", {"path": "a.txt", "content": "x"}), ("t2", "bash", {"command": "echo ok"}),
                   ("t3", "edit_file", {"path": "b.txt", "old_string": "b", "new_string": "c"})),
        text_reply("done"),
    ]}
    (ws / "b.txt").write_text("b")
    with MockServer(scenario) as mock:
        started = time.monotonic()
        proc = run(tooloop_exe, ws, env_for(tmp_path, mock), "-p", "--yes", "go")
        took = time.monotonic() - started
        reqs = mock.requests()
    assert proc.returncode == 0
    first = json.dumps(reqs[0]["body"]["messages"][0])
    assert "The build command is make fast." in first
    results = tool_results(reqs[1])
    assert results["t1"][1] and "write_file is frozen" in results["t1"][0]
    assert not (ws / "a.txt").exists()
    assert results["t3"][1] and "b.txt is generated" in results["t3"][0]
    assert (ws / "b.txt").read_text() == "b"
    assert results["t2"][0].startswith("ok"), "a hook that times out is shown and the call carries on"
    assert "timed out" in proc.stderr + proc.stdout or "exited" in proc.stderr + proc.stdout
    assert took < 25
    deadline = time.monotonic() + 3
    while procs_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert procs_with(marker) == [], "the hook's processes were left running"


def test_session_start_adds_context_and_a_stop_hook_exiting_2_keeps_the_run_going_once(tooloop_exe, ws, tmp_path):
    log, mark = tmp_path / "stop.log", tmp_path / "stopped-once"
    stop = (f"python3 -c \"import json,os,sys; e=json.load(sys.stdin); open('{log}','a').write(json.dumps(e)+'\\n'); "
            f"(open('{mark}','w').close(), sys.stderr.write('run the tests first'), sys.exit(2)) "
            f"if not os.path.exists('{mark}') else None\"")
    user_settings(tmp_path, {"hooks": {"SessionStart": [hook("echo 'Today: fix bug 7.'")], "Stop": [hook(stop)]}})
    # (An answer saying the tests pass with none run would be challenged first: see test_check.py.)
    scenario = {"responses": [text_reply("Done, I think."), text_reply("Bug 7 is explained now.")]}
    with MockServer(scenario) as mock:
        proc = run(tooloop_exe, ws, env_for(tmp_path, mock), "-p", "--yes", "look into it")
        reqs = mock.requests()
    assert proc.returncode == 0 and "Bug 7 is explained now." in proc.stdout
    assert len(reqs) == 2
    assert "Today: fix bug 7." in json.dumps(reqs[0]["body"]["messages"][0])
    assert "run the tests first" in json.dumps(reqs[1]["body"]["messages"][-1])
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["hook_event_name"] for e in events] == ["Stop", "Stop"]
    assert [e["stop_hook_active"] for e in events] == [False, True]
    assert all(e["cwd"] == str(ws.resolve()) and e["session_id"] for e in events)


def test_a_claude_code_settings_file_with_events_tooloop_lacks_still_works(tooloop_exe, ws, tmp_path):
    ran = tmp_path / "notified"
    user_settings(tmp_path, {"permissions": {"deny": ["Bash(rm:*)"], "defaultMode": "default"}, "hooks": {
        "Notification": [hook(f"touch {ran}")],
        "PreCompact": [hook(f"touch {ran}")],
        "PreToolUse": [hook("echo 'no writes today' >&2; exit 2", "Write")],
    }})
    scenario = {"responses": [
        tool_reply(("t1", "write_file", {"path": "a.txt", "content": "x"}), ("t2", "bash", {"command": "rm -rf x"})),
        text_reply("done"),
    ]}
    with MockServer(scenario) as mock:
        proc = run(tooloop_exe, ws, env_for(tmp_path, mock), "-p", "--yes", "go")
        reqs = mock.requests()
    assert proc.returncode == 0
    assert "Notification, PreCompact are ignored" in proc.stderr
    results = tool_results(reqs[1])
    assert results["t1"][1] and "no writes today" in results["t1"][0], "the file's hooks that tooloop has still run"
    assert results["t2"][1] and "Bash(rm:*)" in results["t2"][0], "and its rules still apply"
    assert not ran.exists()


def test_a_user_prompt_submit_hook_that_exits_2_blocks_the_task_before_any_request(tooloop_exe, ws, tmp_path):
    user_settings(tmp_path, {"hooks": {"UserPromptSubmit": [hook("echo 'no secrets in prompts' >&2; exit 2")]}})
    with MockServer({"responses": [text_reply("never")]}) as mock:
        plain = run(tooloop_exe, ws, env_for(tmp_path, mock), "-p", "go")
        as_json = run(tooloop_exe, ws, env_for(tmp_path, mock), "--output-format", "json", "go")
        assert mock.requests() == []
    assert plain.returncode == 1 and plain.stdout == ""
    assert plain.stderr.strip() == "tooloop: the task was blocked by a UserPromptSubmit hook: no secrets in prompts"
    assert as_json.returncode == 1 and len(as_json.stderr.strip().splitlines()) == 1
    [result] = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert result["type"] == "result" and result["subtype"] == "error" and result["is_error"] is True
    assert "no secrets in prompts" in result["error"] and result["session_id"]
    # A broken settings file: one stderr line, and in the JSON modes an error result object.
    user_settings(tmp_path, {"permissions": {"allow": "bash"}})
    broken = run(tooloop_exe, ws, env_for(tmp_path, None, ANTHROPIC_API_KEY="k"), "--output-format", "json", "go")
    assert broken.returncode == 2 and len(broken.stderr.strip().splitlines()) == 1
    [result] = [json.loads(line) for line in broken.stdout.splitlines()]
    assert result["subtype"] == "error" and "permissions.allow" in result["error"]


def test_project_settings_deny_at_once_but_allow_and_hooks_wait_for_approval(tooloop_exe, ws, tmp_path):
    ran = tmp_path / "project-hook-ran"
    write_json(ws / ".tooloop" / "settings.json", {
        "permissions": {"allow": ["bash"], "deny": ["Bash(curl:*)"]},
        "hooks": {"PreToolUse": [hook(f"touch {ran}")]},
    })
    scenario = {"responses": [
        tool_reply(("t1", "bash", {"command": "curl http://x"}), ("t2", "bash", {"command": "echo hi"})),
        text_reply("done"),
    ]}
    with MockServer(scenario) as mock:
        # No --yes and no terminal: read-only mode. The unapproved allow rule must not let bash run.
        proc = run(tooloop_exe, ws, env_for(tmp_path, mock), "-p", "go")
        reqs = mock.requests()
    assert proc.returncode == 0
    assert "not approved yet" in proc.stderr
    results = tool_results(reqs[1])
    assert results["t1"][1] and "Bash(curl:*)" in results["t1"][0], "a project deny rule applies at once"
    assert results["t2"][1] and "read-only" in results["t2"][0], "the project's allow rule waits for approval"
    assert not ran.exists(), "an unapproved project hook never runs"


def test_approved_local_settings_allow_rules_let_bash_run_without_a_terminal(tooloop_exe, ws, tmp_path, monkeypatch):
    from tooloop.cli import settings

    write_json(ws / ".tooloop" / "settings.local.json", {"permissions": {"allow": ["bash(echo:*)"]}})
    # A workspace file's allow rules count once the user approved them (the REPL's startup question).
    monkeypatch.setenv("TOOLOOP_HOME", str(tmp_path / "home"))
    assert settings.approve_pending(settings.load(ws.resolve()), ws.resolve(), lambda q: True)
    scenario = {"responses": [
        tool_reply(("t1", "bash", {"command": "echo allowed"}), ("t2", "bash", {"command": "echo x && touch y"})),
        text_reply("done"),
    ]}
    with MockServer(scenario) as mock:
        proc = run(tooloop_exe, ws, env_for(tmp_path, mock), "-p", "go")
        reqs = mock.requests()
    assert proc.returncode == 0
    results = tool_results(reqs[1])
    assert results["t1"] == ("allowed\n", False) or results["t1"][0].startswith("allowed")
    assert results["t2"][1], "a compound command is allowed only when every part is"
    assert not (ws / "y").exists()


def test_max_budget_usd_stops_with_one_line_and_exit_1(tooloop_exe, ws, tmp_path):
    big = {"input_tokens": 100_000, "output_tokens": 1000}
    replies = [tool_reply((f"t{i}", "bash", {"command": "echo hi"})) for i in range(6)]
    for r in replies:
        r["anthropic"]["usage"] = big
    with MockServer({"responses": replies}) as mock:
        proc = run(tooloop_exe, ws, env_for(tmp_path, mock), "-p", "--yes", "--max-budget-usd", "0.7", "loop")
        reqs = mock.requests()
    assert proc.returncode == 1
    assert len(reqs) == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines == ["tooloop: stopped: the next request would take the spend past $0.7 (--max-budget-usd)"]
    bad = run(tooloop_exe, ws, env_for(tmp_path, None, ANTHROPIC_API_KEY="k"), "-p", "--max-budget-usd", "-1", "x")
    assert bad.returncode == 2


def test_max_budget_usd_holds_when_the_server_answers_as_an_unpriced_model(tooloop_exe, ws, tmp_path):
    # The server claims every answer came from `claude-mock-1`, a name without a price. Each request is
    # charged at the price of the model asked for: two of $0.315 fit under $0.7, a third does not (before,
    # each cost $0 and all six went out).
    big = {"input_tokens": 100_000, "output_tokens": 1000}
    replies = [tool_reply((f"t{i}", "bash", {"command": "echo hi"})) for i in range(6)]
    for r in replies:
        r["anthropic"]["usage"] = big
        r["anthropic"]["model"] = "claude-mock-1"
    with MockServer({"responses": replies}) as mock:
        proc = run(tooloop_exe, ws, env_for(tmp_path, mock), "-p", "--yes", "--max-budget-usd", "0.7", "loop")
        reqs = mock.requests()
    assert len(reqs) == 2, proc.stderr
    assert proc.returncode == 1
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines == ["tooloop: stopped: the next request would take the spend past $0.7 (--max-budget-usd)"]


def test_agents_md_is_loaded_by_default(tooloop_exe, ws, tmp_path):
    (ws / "AGENTS.md").write_text("Always answer in French.")
    with MockServer({"responses": [text_reply("ok"), text_reply("ok")]}) as mock:
        assert run(tooloop_exe, ws, env_for(tmp_path, mock), "-p", "hi").returncode == 0
        assert run(tooloop_exe, ws, env_for(tmp_path, mock), "-p", "--no-instructions", "hi").returncode == 0
        reqs = mock.requests()
    assert "Always answer in French." in json.dumps(reqs[0]["body"]["system"])
    assert "Always answer in French." not in json.dumps(reqs[1]["body"]["system"])


# -- in a pseudo-terminal ----------------------------------------------------------------------------------

pexpect = pytest.importorskip("pexpect")
from _terminal import PROMPT, Term, term_env  # noqa: E402


def pty_env(tmp_path, mock):
    return term_env(tmp_path, mock, NO_COLOR="1", XDG_CONFIG_HOME=str(tmp_path / "config"))


def test_project_settings_are_approved_once_and_asked_again_when_changed(tooloop_exe, ws, tmp_path):
    ran = tmp_path / "ran.log"
    settings = ws / ".tooloop" / "settings.json"
    write_json(settings, {"hooks": {"UserPromptSubmit": [hook(f"echo prompt >> {ran}")]}})
    with MockServer({"responses": [text_reply("one"), text_reply("two"), text_reply("three")]}) as mock:
        with Term(tooloop_exe, [], ws, pty_env(tmp_path, mock)) as term:
            term.expect(r"Allow them in this workspace\? \[y/n\]")
            term.child.send("y")
            term.expect(PROMPT)
            term.type("hello")
            term.expect("one")
            term.quit()
        assert ran.read_text().count("prompt") == 1
        # Approved: no question the next time, the hook runs.
        with Term(tooloop_exe, [], ws, pty_env(tmp_path, mock)) as term:
            term.expect(PROMPT)
            term.type("again")
            term.expect("two")
            term.quit()
        assert "Allow them" not in term.text
        assert ran.read_text().count("prompt") == 2
        # Changed: asked again; declined: the hook does not run.
        write_json(settings, {"hooks": {"UserPromptSubmit": [hook(f"echo changed >> {ran}")]}})
        with Term(tooloop_exe, [], ws, pty_env(tmp_path, mock)) as term:
            term.expect(r"Allow them in this workspace\? \[y/n\]")
            term.child.send("n")
            term.expect(PROMPT)
            term.type("third")
            term.expect("three")
            term.quit()
    assert "changed" not in ran.read_text()


def test_plan_mode_investigates_read_only_then_carries_out_the_approved_plan(tooloop_exe, ws, tmp_path):
    (ws / "notes.txt").write_text("fix the typo\n")
    scenario = {"responses": [
        # planning: a read, a read-only command, and a write that must be refused
        tool_reply(("p1", "read_file", {"path": "notes.txt"}), ("p2", "bash", {"command": "ls -la"}),
                   ("p3", "write_file", {"path": "out.txt", "content": "too early"})),
        text_reply("## Plan\n\n1. Write out.txt with the fix."),
        # approved: carry it out
        tool_reply(("e1", "write_file", {"path": "out.txt", "content": "fixed"})),
        text_reply("Done: out.txt written."),
    ]}
    with MockServer(scenario) as mock:
        with Term(tooloop_exe, ["--yes"], ws, pty_env(tmp_path, mock)) as term:
            term.expect(PROMPT)
            term.type("/plan fix the notes")
            term.expect(r"Approve this plan")
            assert not (ws / "out.txt").exists()
            term.child.send("y")
            term.expect("Done: out.txt written.")
            term.quit()
        reqs = mock.requests()
    planning = tool_results(reqs[1])
    assert planning["p1"] == ("fix the typo\n", False) or not planning["p1"][1]
    assert not planning["p2"][1], "read-only bash runs while planning"
    assert planning["p3"][1] and "Plan mode" in planning["p3"][0]
    assert "[Plan mode]" in json.dumps(reqs[0]["body"]["messages"])
    assert (ws / "out.txt").read_text() == "fixed"


def test_init_has_the_agent_write_a_starter_agents_md(tooloop_exe, ws, tmp_path):
    (ws / "Makefile").write_text("test:\n\tpytest -q\n")
    scenario = {"responses": [
        tool_reply(("i1", "write_file", {"path": "AGENTS.md", "content": "# AGENTS.md\n\nTest with `make test`.\n"})),
        text_reply("Wrote AGENTS.md."),
    ]}
    with MockServer(scenario) as mock:
        with Term(tooloop_exe, ["--yes"], ws, pty_env(tmp_path, mock)) as term:
            term.expect(PROMPT)
            term.type("/init")
            term.expect("Wrote AGENTS.md.")
            term.quit()
        reqs = mock.requests()
    asked = json.dumps(reqs[0]["body"]["messages"])
    assert "AGENTS.md" in asked and "starter" in asked
    assert (ws / "AGENTS.md").read_text().startswith("# AGENTS.md")


def test_a_refined_plan_is_planned_again_read_only_then_carried_out(tooloop_exe, ws, tmp_path):
    scenario = {"responses": [
        text_reply("## Plan\n\n1. Write out.txt."),
        # refining: still plan mode, a write is refused
        tool_reply(("r1", "write_file", {"path": "out.txt", "content": "too early"})),
        text_reply("## Plan\n\n1. Write out.txt.\n2. Add a test."),
        tool_reply(("e1", "write_file", {"path": "out.txt", "content": "done"})),
        text_reply("Carried out."),
    ]}
    with MockServer(scenario) as mock:
        with Term(tooloop_exe, ["--yes"], ws, pty_env(tmp_path, mock)) as term:
            term.expect(PROMPT)
            term.type("/plan write out.txt")
            term.expect(r"Approve this plan")
            for ch in "also add a test":   # key by key, as a person types: "a" must not approve
                term.child.send(ch)
                time.sleep(0.02)
            term.child.send("\r")
            term.expect(r"2\. Add a test")
            term.expect(r"Approve this plan")
            assert not (ws / "out.txt").exists()
            term.child.send("y")
            term.expect("Carried out.")
            term.quit()
        reqs = mock.requests()
    assert "Revise the plan: also add a test" in json.dumps(reqs[1]["body"]["messages"])
    refused = tool_results(reqs[2])["r1"]
    assert refused[1] and "Plan mode" in refused[0], "a refinement is planned read-only too"
    assert (ws / "out.txt").read_text() == "done"


def test_always_on_a_bash_question_offers_to_save_a_prefix_rule(tooloop_exe, ws, tmp_path):
    scenario = {"responses": [
        tool_reply(("t1", "bash", {"command": "echo one"})),
        tool_reply(("t2", "bash", {"command": "echo two"})),
        tool_reply(("t3", "bash", {"command": "touch nope"})),
        text_reply("done"),
    ]}
    with MockServer(scenario) as mock:
        with Term(tooloop_exe, [], ws, pty_env(tmp_path, mock)) as term:
            term.expect(PROMPT)
            term.type("go")
            term.expect(r"allow bash\?")
            term.child.send("a")
            term.expect(r"Save it to .*settings.local.json")
            term.child.send("y")
            # echo two: covered by the rule, no question; touch: asked
            term.expect(r"allow bash\?")
            term.child.send("n")
            term.expect("done")
            term.quit()
    saved = json.loads((ws / ".tooloop" / "settings.local.json").read_text())
    assert saved == {"permissions": {"allow": ["bash(echo:*)"]}}
    assert term.text.count("allow bash?") == 2


def test_prefix_rules_and_hook_matchers():
    from tooloop.cli.settings import matches, prefix_rule

    assert prefix_rule("npm test -- -x") == "bash(npm test:*)"
    assert prefix_rule("git status") == "bash(git status:*)"
    assert prefix_rule("echo hi") == "bash(echo:*)"
    assert prefix_rule("timeout 5 pytest -q") == "bash(pytest:*)"
    assert prefix_rule("make && rm -rf /") is None
    assert matches("Bash", "bash") and matches("Edit|Write", "write_file") and matches("", "anything")
    assert matches("mcp__github__.*", "mcp__github__create_issue") and not matches("Bash", "read_file")


def test_plan_flag_without_a_terminal_prints_the_plan_and_changes_nothing(tooloop_exe, ws, tmp_path):
    scenario = {"responses": [
        tool_reply(("p1", "bash", {"command": "git status && ls"}), ("p2", "bash", {"command": "touch made"}),
                   ("p3", "edit_file", {"path": "x", "old_text": "a", "new_text": "b"})),
        text_reply("## Plan\n\n1. Touch made."),
    ]}
    with MockServer(scenario) as mock:
        proc = run(tooloop_exe, ws, env_for(tmp_path, mock), "-p", "--yes", "--plan", "make a file")
        reqs = mock.requests()
    assert proc.returncode == 0
    assert proc.stdout.strip() == "## Plan\n\n1. Touch made."
    results = tool_results(reqs[1])
    assert not results["p1"][1]
    assert results["p2"][1] and "Plan mode" in results["p2"][0], "even with --yes, planning never writes"
    assert results["p3"][1] and "Plan mode" in results["p3"][0]
    assert not (ws / "made").exists()
    assert len(reqs) == 2


def test_plan_flag_in_the_json_modes_reports_the_plan_as_the_result_and_changes_nothing(tooloop_exe, ws, tmp_path):
    for fmt in ("json", "stream-json"):
        scenario = {"responses": [
            tool_reply(("p1", "write_file", {"path": "out.txt", "content": "too early"})),
            text_reply("## Plan\n\n1. Write out.txt."),
        ]}
        with MockServer(scenario) as mock:
            proc = run(tooloop_exe, ws, env_for(tmp_path, mock), "--yes", "--output-format", fmt, "--plan", "fix it")
            reqs = mock.requests()
        assert proc.returncode == 0
        objs = [json.loads(line) for line in proc.stdout.splitlines()]
        result = objs[-1]
        assert result["type"] == "result" and result["subtype"] == "success"
        assert result["result"].startswith("## Plan")
        if fmt == "stream-json":
            assert objs[0]["subtype"] == "init" and objs[0]["permission_mode"] == "plan"
        else:
            assert len(objs) == 1
        refused = tool_results(reqs[1])["p1"]
        assert refused[1] and "Plan mode" in refused[0]
        assert "[Plan mode]" in json.dumps(reqs[0]["body"]["messages"])
        assert not (ws / "out.txt").exists()
