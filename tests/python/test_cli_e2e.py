"""The `tooloop` command end to end: the installed console script, run as a subprocess against the
shared mock server (tests/mock), in a temporary workspace and a temporary TOOLOOP_HOME.

The built-in tools really run: the file the scripted model writes exists, bash really prints it.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "tests" / "scenarios"
sys.path.insert(0, str(ROOT / "tests" / "mock"))
from mockctl import MockServer  # noqa: E402
from _support import cli_env, tool_results, unmarked  # noqa: E402

TASK = ("Create hello.py that prints a greeting, run it, then change the greeting to "
        "'Hello, tooloop!' and run it again.")
FINAL = 'Done. hello.py now prints "Hello, tooloop!".'
ANSI = re.compile(r"\x1b\[")


@pytest.fixture(scope="module")
def tooloop_cmd(tooloop_exe):
    return [tooloop_exe]


clean_env = cli_env


def run(cmd, ws, env, *args, timeout=60):
    proc = subprocess.run(cmd + list(args), cwd=ws, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout)
    print("exit", proc.returncode, "\n--- stdout\n" + proc.stdout + "--- stderr\n" + proc.stderr)
    return proc


def session_files(tmp_path):
    return sorted((tmp_path / "home" / "sessions").glob("*/*.jsonl"))


def session_records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]




def test_scripted_session_writes_runs_edits_and_answers(tooloop_cmd, ws, tmp_path):
    with MockServer(SCENARIOS / "cli_hello_py.json") as mock:
        proc = run(tooloop_cmd, ws, clean_env(tmp_path, mock), "--yes", TASK)
        reqs = mock.requests()

    assert proc.returncode == 0
    assert proc.stderr == ""
    # The tools really ran, in the workspace.
    assert (ws / "hello.py").read_text() == 'print("Hello, tooloop!")\n'

    out = proc.stdout
    assert not ANSI.search(out), "output to a pipe must be plain text"
    expected_in_order = [
        "thinking: The user wants a hello.py that prints a greeting.",
        "I'll create hello.py.",
        "write_file(hello.py, 1 line)", "created hello.py",
        "bash(python3 hello.py)", "Hello, world!",
        "edit_file(hello.py)", "edited hello.py",
        "bash(python3 hello.py)", "Hello, tooloop!",
        FINAL,
        "claude-sonnet-4-6 · 5 turns · 2,483 in / 301 out · 5,600 cache read · $",
    ]
    pos = 0
    for piece in expected_in_order:
        found = out.find(piece, pos)
        assert found >= 0, f"{piece!r} missing (or out of order) after offset {pos}"
        pos = found + len(piece)
    assert "Keep the script to one line." not in out  # thinking: first lines only

    # What the model read back: the real tool output.
    assert len(reqs) == 5
    results = tool_results(reqs[4])
    assert results["toolu_01CliRun1"] == ("Hello, world!", False)
    assert results["toolu_01CliRun2"] == ("Hello, tooloop!", False)
    assert results["toolu_01CliWrite"][1] is False and results["toolu_01CliEdit"][1] is False

    # The request: default model, the coding system prompt, the built-in tools, streaming.
    body = reqs[0]["body"]
    assert body["model"] == "claude-sonnet-4-6" and body["stream"] is True
    system = body["system"] if isinstance(body["system"], str) else body["system"][0]["text"]
    assert str(ws.resolve()) in system and "Never invent paths" in system
    # The built-ins, the todo list (planning) and the task tool (subagents); no skill tool without skills.
    assert {t["name"] for t in body["tools"]} == {"bash", "read_file", "write_file", "edit_file", "todo_write",
                                                  "task", "grep", "glob", "web_fetch", "bash_output", "bash_kill"}
    assert unmarked(body["messages"][0]["content"]) in (TASK, [{"type": "text", "text": TASK}])

    # The session file: one per run, under TOOLOOP_HOME, keyed by workspace, holding the whole task.
    files = session_files(tmp_path)
    assert len(files) == 1
    records = session_records(files[0])
    assert records[0]["type"] == "session"
    entries = [r["entry"] for r in records if r["type"] == "entry"]
    text = json.dumps(entries)
    assert TASK in text and "Hello, world!" in text and "Hello, tooloop!" in text and "Done. hello.py" in text
    assert "sk-ant-mock" not in files[0].read_text()


def test_print_mode_writes_only_the_final_answer(tooloop_cmd, ws, tmp_path):
    with MockServer(SCENARIOS / "cli_hello_py.json") as mock:
        proc = run(tooloop_cmd, ws, clean_env(tmp_path, mock), "-p", "--yes", TASK)
    assert proc.returncode == 0
    assert proc.stdout.startswith(FINAL) and proc.stdout.endswith("prints Hello, tooloop!\n")
    assert "write_file" not in proc.stdout and proc.stderr == ""
    assert (ws / "hello.py").read_text() == 'print("Hello, tooloop!")\n'


def test_task_read_from_stdin_when_not_given(tooloop_cmd, ws, tmp_path):
    with MockServer(SCENARIOS / "cli_continue.json") as mock:
        proc = subprocess.run(tooloop_cmd + ["-p"], cwd=ws, env=clean_env(tmp_path, mock),
                              input="what is in this folder?\n", capture_output=True, text=True, timeout=60)
        reqs = mock.requests()
    assert proc.returncode == 0, proc.stderr
    assert unmarked(reqs[0]["body"]["messages"][0]["content"]) in (
        "what is in this folder?", [{"type": "text", "text": "what is in this folder?"}])


def test_piped_stdin_is_added_to_the_task(tooloop_cmd, ws, tmp_path):
    with MockServer(SCENARIOS / "cli_continue.json") as mock:
        proc = subprocess.run(tooloop_cmd + ["-p", "review this diff"], cwd=ws, env=clean_env(tmp_path, mock),
                              input="-old line\n+new line\n", capture_output=True, text=True, timeout=60)
        reqs = mock.requests()
    assert proc.returncode == 0, proc.stderr
    sent = json.dumps(reqs[0]["body"]["messages"][0]["content"])
    assert "review this diff" in sent and "+new line" in sent


def _assert_resumed_request(req):
    messages = req["body"]["messages"]
    first = messages[0]["content"]
    assert first in (TASK, [{"type": "text", "text": TASK}]), "the earlier task must come first"
    dump = json.dumps(messages)
    for earlier in ("toolu_01CliWrite", "toolu_01CliRun2", "Hello, tooloop!", "Done. hello.py"):
        assert earlier in dump, earlier
    last = messages[-1]
    assert last["role"] == "user"
    assert json.dumps(last["content"]).count("what did you change?") == 1
    roles = [m["role"] for m in messages]
    assert all(a != b for a, b in zip(roles, roles[1:])), roles


def test_continue_resumes_the_latest_session_with_its_messages(tooloop_cmd, ws, tmp_path):
    with MockServer(SCENARIOS / "cli_hello_py.json") as mock:
        assert run(tooloop_cmd, ws, clean_env(tmp_path, mock), "--yes", TASK).returncode == 0
    [session] = session_files(tmp_path)
    lines_before = len(session.read_text().splitlines())

    with MockServer(SCENARIOS / "cli_continue.json") as mock:
        proc = run(tooloop_cmd, ws, clean_env(tmp_path, mock), "--continue", "-p", "what did you change?")
        reqs = mock.requests()
    assert proc.returncode == 0
    assert proc.stdout == 'I created hello.py and changed its greeting to "Hello, tooloop!".\n'
    assert len(reqs) == 1
    _assert_resumed_request(reqs[0])
    # Appended to the same session, no new file.
    assert session_files(tmp_path) == [session]
    assert len(session.read_text().splitlines()) > lines_before


def test_resume_by_id_and_unknown_id(tooloop_cmd, ws, tmp_path):
    with MockServer(SCENARIOS / "cli_hello_py.json") as mock:
        assert run(tooloop_cmd, ws, clean_env(tmp_path, mock), "--yes", TASK).returncode == 0
    [session] = session_files(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    with MockServer(SCENARIOS / "cli_continue.json") as mock:
        # From another folder: the id alone finds it.
        proc = run(tooloop_cmd, other, clean_env(tmp_path, mock), "--resume", session.stem, "-p",
                   "what did you change?")
        reqs = mock.requests()
    assert proc.returncode == 0
    _assert_resumed_request(reqs[0])

    proc = run(tooloop_cmd, ws, clean_env(tmp_path, None, ANTHROPIC_API_KEY="k"), "--resume", "nope", "hi")
    assert proc.returncode == 2 and "no session 'nope'" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_continue_without_a_session_exits_2(tooloop_cmd, ws, tmp_path):
    proc = run(tooloop_cmd, ws, clean_env(tmp_path, None, ANTHROPIC_API_KEY="k"), "--continue", "hi")
    assert proc.returncode == 2
    assert proc.stderr.startswith("tooloop: no earlier session to continue")


def test_no_key_exits_2_with_one_line_and_no_traceback(tooloop_cmd, ws, tmp_path):
    proc = run(tooloop_cmd, ws, clean_env(tmp_path), "say hi")
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "ANTHROPIC_API_KEY" in lines[0] and "--base-url" in lines[0]
    assert session_files(tmp_path) == []  # nothing ran, nothing saved

    proc = run(tooloop_cmd, ws, clean_env(tmp_path), "--provider", "openai", "--model", "gpt-4.1", "hi")
    assert proc.returncode == 2 and "OPENAI_API_KEY" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_key_from_the_workspace_dotenv_is_used(tooloop_cmd, ws, tmp_path):
    with MockServer(SCENARIOS / "cli_continue.json") as mock:
        (ws / ".env").write_text(f"ANTHROPIC_API_KEY=sk-from-dotenv\nANTHROPIC_BASE_URL={mock.base_url}\n"
                                 "TOOLOOP_MODEL=claude-dotenv-model\n")
        proc = run(tooloop_cmd, ws, clean_env(tmp_path), "-p", "hi")
        reqs = mock.requests()
    assert proc.returncode == 0, proc.stderr
    assert reqs[0]["headers"]["x-api-key"] == "sk-from-dotenv"
    assert reqs[0]["body"]["model"] == "claude-dotenv-model"


def test_a_dotenv_base_url_without_its_own_key_is_refused_and_nothing_is_sent(tooloop_cmd, ws, tmp_path):
    """A cloned repository's .env must not redirect the user's own key to its server."""
    with MockServer(SCENARIOS / "cli_continue.json") as mock:
        (ws / ".env").write_text(f"OPENAI_BASE_URL={mock.base_url}/v1\nANTHROPIC_BASE_URL={mock.base_url}\n")
        env = clean_env(tmp_path, ANTHROPIC_API_KEY="sk-users-own-key")
        proc = run(tooloop_cmd, ws, env, "-p", "hi")
        reqs = mock.requests()
        assert reqs == [], "the user's key must not reach the URL from .env"
        assert proc.returncode == 2
        [line] = proc.stderr.strip().splitlines()
        assert str(ws / ".env") in line and "ANTHROPIC_BASE_URL" in line and "sk-users-own-key" not in line
        # The user's own environment and flags stay trusted.
        proc = run(tooloop_cmd, ws, dict(env, ANTHROPIC_BASE_URL=mock.base_url), "-p", "hi")
        assert proc.returncode == 0, proc.stderr
        assert mock.requests()[0]["headers"]["x-api-key"] == "sk-users-own-key"


def test_read_only_by_default_without_a_terminal(tooloop_cmd, ws, tmp_path):
    (ws / "notes.txt").write_text("remember the milk\n")
    with MockServer(SCENARIOS / "cli_read_only.json") as mock:
        proc = run(tooloop_cmd, ws, clean_env(tmp_path, mock), "summarize notes.txt into summary.txt")
        reqs = mock.requests()
    assert proc.returncode == 0
    assert not (ws / "summary.txt").exists()
    results = tool_results(reqs[1])
    content, is_error = results["toolu_01CliRoWrite"]
    assert is_error and "read-only" in content and "write_file" in content
    content, is_error = results["toolu_01CliRoRead"]
    assert not is_error and "remember the milk" in content
    system = reqs[0]["body"]["system"]
    assert "read-only" in json.dumps(system)


def test_read_only_flag_wins_even_with_a_scripted_yes(tooloop_cmd, ws, tmp_path):
    with MockServer(SCENARIOS / "cli_hello_py.json") as mock:
        proc = run(tooloop_cmd, ws, clean_env(tmp_path, mock), "--read-only", TASK)
        reqs = mock.requests()
    assert proc.returncode == 0
    assert not (ws / "hello.py").exists()
    for tool_id, (content, is_error) in tool_results(reqs[4]).items():
        assert is_error and "read-only" in content, tool_id


def test_api_error_exits_1_with_one_line(tooloop_cmd, ws, tmp_path):
    with MockServer(SCENARIOS / "anthropic_errors_401.json") as mock:
        proc = run(tooloop_cmd, ws, clean_env(tmp_path, mock), "-p", "hi")
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert lines[0].startswith("tooloop: authentication failed") and "ANTHROPIC_API_KEY" in lines[0]
    assert "sk-ant-mock" not in proc.stderr


def test_turn_limit_exits_1_and_says_how_to_continue(tooloop_cmd, ws, tmp_path):
    with MockServer(SCENARIOS / "cli_hello_py.json") as mock:
        proc = run(tooloop_cmd, ws, clean_env(tmp_path, mock), "--yes", "--max-turns", "2", TASK)
        reqs = mock.requests()
    assert proc.returncode == 1
    assert len(reqs) == 2
    last = proc.stderr.strip().splitlines()
    assert len(last) == 1 and "turn limit" in last[0] and "--continue" in last[0]


def test_model_provider_and_thinking_flags_reach_the_request(tooloop_cmd, ws, tmp_path):
    with MockServer(SCENARIOS / "openai_text.json") as mock:
        env = clean_env(tmp_path, mock)
        base = env.pop("OPENAI_BASE_URL")
        proc = run(tooloop_cmd, ws, env, "-p", "--provider", "openai", "--model", "gpt-4.1",
                   "--base-url", base, "hi")
        reqs = mock.requests()
    assert proc.returncode == 0, proc.stderr
    assert reqs[0]["path"] == "/v1/chat/completions" and reqs[0]["body"]["model"] == "gpt-4.1"

    with MockServer(SCENARIOS / "cli_continue.json") as mock:
        proc = run(tooloop_cmd, ws, clean_env(tmp_path, mock), "-p", "--thinking", "2048", "hi")
        reqs = mock.requests()
    assert proc.returncode == 0, proc.stderr
    body = reqs[0]["body"]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] > 2048


def test_help_and_version(tooloop_cmd, ws, tmp_path):
    proc = run(tooloop_cmd, ws, clean_env(tmp_path), "--help")
    assert proc.returncode == 0
    for flag in ("--model", "--provider", "--base-url", "--max-turns", "--thinking", "--workspace",
                 "--continue", "--resume", "--yes", "--read-only", "--no-color", "--print"):
        assert flag in proc.stdout, flag
    proc = run(tooloop_cmd, ws, clean_env(tmp_path), "--version")
    assert proc.returncode == 0 and proc.stdout.startswith("tooloop ")


def test_importing_tooloop_does_not_load_the_cli_or_its_dependencies(tooloop_cmd):
    code = ("import sys, tooloop; bad = [m for m in ('tooloop.cli', 'rich', 'prompt_toolkit') "
            "if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_print_mode_start_does_not_load_the_terminal_libraries(tooloop_cmd, ws, tmp_path):
    """A piped run pays for neither prompt_toolkit nor rich."""
    code = ("import sys; from tooloop.cli import main; rc = main(sys.argv[1:]); "
            "print([m for m in ('rich', 'prompt_toolkit') if m in sys.modules], file=sys.stderr)")
    with MockServer(SCENARIOS / "cli_continue.json") as mock:
        proc = subprocess.run([sys.executable, "-c", code, "-p", "hi"], cwd=ws, env=clean_env(tmp_path, mock),
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "[]"


def test_small_local_model_settings_and_corrections_of_text_tool_calls(tooloop_cmd, ws, tmp_path):
    with MockServer(SCENARIOS / "cli_local_model.json") as mock:
        env = clean_env(tmp_path)
        proc = run(tooloop_cmd, ws, env, "--yes", "-p", "--provider", "openai", "--model", "tiny-local",
                   "--base-url", mock.base_url + "/v1", "--no-draft", "say hi with bash")
        reqs = mock.requests()
    assert proc.returncode == 0, proc.stderr
    assert [r["method"] + " " + r["path"] for r in reqs] == ["GET /props"] + ["POST /v1/chat/completions"] * 4
    posts = [r["body"] for r in reqs[1:]]
    first = posts[0]
    assert first["temperature"] == 0.2                      # a local endpoint: low temperature
    limit = first.get("max_tokens") or first.get("max_completion_tokens")
    assert limit is not None and limit <= 512               # fitted to n_ctx 4096
    system = first["messages"][0]["content"]
    assert first["messages"][0]["role"] == "system" and len(system) < 900   # with the sandbox paragraph
    assert "without calling a tool" in system
    # The fenced JSON call was answered with a correction, as the next user message.
    last_user = [m for m in posts[1]["messages"] if m["role"] == "user"][-1]
    assert "as text" in json.dumps(last_user) and "bash" in json.dumps(last_user)
    # ... the model then called bash properly, and the tag answer got the second correction.
    assert any(m["role"] == "tool" for m in posts[2]["messages"])
    assert "read_file call as text" in json.dumps(posts[3]["messages"][-1])
    # Two corrections at most: the third text call stands as the answer.
    assert proc.stdout.startswith("<tool_call>")


def test_bench_local_tasks_runs_against_the_mock(tooloop_cmd, ws, tmp_path):
    with MockServer(SCENARIOS / "cli_bench_local.json") as mock:
        env = clean_env(tmp_path, mock)
        proc = subprocess.run([sys.executable, str(ROOT / "bench" / "local_tasks.py"), "--provider", "openai",
                               "--base-url", mock.base_url + "/v1", "--model", "qwen2.5-coder", "-n", "1",
                               "--tooloop", tooloop_cmd[0], "--json"],
                              env=env, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
        reqs = mock.requests()
    print(proc.stdout, proc.stderr)
    assert proc.returncode == 0
    runs = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert [(r["task"], r["ok"], r["turns"]) for r in runs] == [("hello", True, 3), ("bugfix", True, 2),
                                                                ("function", True, 4)]
    assert "overall: 3/3 passed (100%)" in proc.stdout
    # Each run asks the local server its context first: its own figure wins over the table's 32k.
    assert [r["path"] for r in reqs].count("/props") == 3
    assert len(reqs) == 12


def test_bench_counts_a_failed_check(tooloop_cmd, ws, tmp_path):
    # The model "fixes" nothing: the check in the workspace decides, not the model's claim.
    scenario = {"responses": [{"json": {"default_generation_settings": {"n_ctx": 4096}}}, {"openai": {"id": "c1", "object": "chat.completion", "created": 1,
                                          "model": "m", "choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": "Fixed it!"}}]}}]}
    with MockServer(scenario) as mock:
        proc = subprocess.run([sys.executable, str(ROOT / "bench" / "local_tasks.py"), "--base-url",
                               mock.base_url + "/v1", "--model", "qwen2.5-coder", "-n", "1", "--tasks",
                               "bugfix", "--tooloop", tooloop_cmd[0]],
                              env=clean_env(tmp_path, mock), capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "overall: 0/1 passed" in proc.stdout and "calc.add is still wrong" in proc.stdout


def test_a_killed_bench_ends_the_agent_it_was_running(tmp_path):
    # The agent runs in a session of its own (so the bench can end all it started): a kill of the bench must
    # end it too, or it would run on with nobody waiting for it.
    pidfile = tmp_path / "agent.pid"
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text(f"import os, time\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\ntime.sleep(120)\n")
    bench = subprocess.Popen([sys.executable, str(ROOT / "bench" / "local_tasks.py"), "--no-tooloop", "--model", "m", "--agent",
                              f"sleepy={sys.executable} {sleeper}", "--tasks", "hello", "-n", "1"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        agent = int(pidfile.read_text())
        bench.terminate()
        assert bench.wait(timeout=15) != 0
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                os.kill(agent, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            os.kill(agent, signal.SIGKILL)
            raise AssertionError("the agent outlived the bench")
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()


def test_sandbox_flag_reaches_the_agent_and_an_unenforceable_mode_is_refused(tooloop_cmd, ws, tmp_path,
                                                                               monkeypatch):
    """The CLI asks the library (not the kernel, not the Agent's signature) whether bash can be confined."""
    import tooloop
    from tooloop.cli import app
    from tooloop.cli.config import Settings

    with MockServer(SCENARIOS / "cli_continue.json") as mock:
        proc = run(tooloop_cmd, ws, clean_env(tmp_path, mock), "-p", "--sandbox", "read-only", "hi")
    if tooloop.sandbox_support() is None:
        # Confinement that was asked for but cannot be given is refused, not silently dropped.
        assert proc.returncode == 2 and "--sandbox read-only" in proc.stderr and "unconfined" in proc.stderr
        with MockServer(SCENARIOS / "cli_continue.json") as mock:
            assert run(tooloop_cmd, ws, clean_env(tmp_path, mock), "-p", "--sandbox", "off", "hi").returncode == 0
    else:
        assert proc.returncode == 0, proc.stderr

    seen = {}

    class RecordingAgent:
        def __init__(self, model, system=None, **kwargs):
            seen.update(kwargs)

    monkeypatch.setattr(tooloop, "Agent", RecordingAgent)
    settings = Settings(provider="anthropic", model="m", api_key="k", base_url=None, max_turns=3,
                        thinking=None, max_tokens=1024, workspace=ws, sandbox="workspace-write")

    class Policy:
        mode = "auto"

    app.build_agent(settings, Policy(), tmp_path / "s.jsonl")
    assert seen["sandbox"] == "workspace-write"


def test_cli_has_no_private_doors_into_the_library():
    """The CLI is a user of the public package like any other: no compiled module, no `_core`, no
    signature introspection of its own library, no kernel probe of its own, and repl never reaches up to
    app."""
    import re
    from pathlib import Path

    import tooloop.cli

    folder = Path(tooloop.cli.__file__).parent
    for path in sorted(folder.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        for forbidden in ("_tooloop", "._core", "agent_accepts", "inspect.signature", "syscall(444"):
            assert forbidden not in text, f"{path.name} uses {forbidden}"
    repl = (folder / "repl.py").read_text(encoding="utf-8")
    assert not re.search(r"from \.app import|from \. import app", repl)


def test_bash_env_is_scrubbed_unless_passed_through_and_no_network_reaches_the_prompt(tooloop_cmd, ws, tmp_path):
    secret = "tok-cli-0123456789abcdef"
    seen = {}
    for flags in ([], ["--env-passthrough", "MY_DEPLOY_TOKEN", "--no-network"]):
        with MockServer(SCENARIOS / "cli_env_passthrough.json") as mock:
            env = clean_env(tmp_path, mock, MY_DEPLOY_TOKEN=secret)
            proc = run(tooloop_cmd, ws, env, "--yes", "-p", *flags, "print the token")
            reqs = mock.requests()
        assert proc.returncode == 0, proc.stderr
        results = tool_results(reqs[1])
        seen[bool(flags)] = (results["toolu_cli_env_1"][0], json.dumps(reqs[0]["body"]["system"]))
    assert seen[False][0].strip() == "value=[]", "dropped from bash's environment by default"
    assert seen[True][0].strip() == f"value=[{secret}]", "kept with --env-passthrough"
    assert "network" in seen[True][1].lower() and "network" not in seen[False][1].lower()
