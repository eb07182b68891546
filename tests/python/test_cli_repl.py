"""The `tooloop` REPL and terminal output, driven through a pseudo-terminal (pexpect) against the shared
mock server: typing tasks, Ctrl+C during a stalled stream, permission questions, slash commands, Ctrl+D,
and colors on a terminal (none with NO_COLOR)."""

import io
import json
import os
import re
import sys
import time
from pathlib import Path

import pytest

import pexpect  # a test dependency: pip install pexpect

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "tests" / "scenarios"
sys.path.insert(0, str(ROOT / "tests" / "mock"))
from mockctl import MockServer, mock_env  # noqa: E402

PROMPT = "›"  # prompt_toolkit may draw the space after it as a cursor move
SGR = re.compile(r"\x1b\[[0-9;]*m")


def term_env(tmp_path, mock, **extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ANTHROPIC_", "OPENAI_", "TOOLOOP_")) and k != "NO_COLOR"}
    env.update(mock_env(mock.base_url))
    env.update({
        "TOOLOOP_HOME": str(tmp_path / "home"),
        "TERM": "xterm-256color",
        "LANG": "C.UTF-8",
        "PYTHONIOENCODING": "utf-8",
        # pexpect never answers prompt_toolkit's cursor-position query; don't wait for it.
        "PROMPT_TOOLKIT_NO_CPR": "1",
    })
    env.update(extra)
    return env


class Term:
    """A tooloop process on a pseudo-terminal, with everything it printed kept for failure reports."""

    def __init__(self, exe, args, ws, env):
        self.log = io.StringIO()
        self.child = pexpect.spawn(exe, args, cwd=str(ws), env=env, encoding="utf-8",
                                   timeout=20, dimensions=(50, 140))
        self.child.logfile_read = self.log

    def expect(self, pattern, timeout=20):
        try:
            return self.child.expect(pattern, timeout=timeout)
        except (pexpect.TIMEOUT, pexpect.EOF):
            print("---- terminal output so far ----\n" + self.log.getvalue())
            raise

    def type(self, line):
        self.child.send(line + "\r")

    def finish(self, timeout=20):
        self.expect(pexpect.EOF, timeout)
        self.child.close()
        return self.child.exitstatus

    def kill(self):
        if self.child.isalive():
            self.child.kill(9)
            self.child.close(force=True)

    @property
    def text(self):
        return SGR.sub("", self.log.getvalue())


@pytest.fixture
def ws(tmp_path):
    d = tmp_path / "ws"
    d.mkdir()
    return d


def test_ctrl_c_cancels_a_stalled_stream_and_the_prompt_comes_back(tooloop_exe, ws, tmp_path):
    with MockServer(SCENARIOS / "cli_repl_stall.json") as mock:
        term = Term(tooloop_exe, [], ws, term_env(tmp_path, mock))
        try:
            term.expect("/help for commands")
            term.expect(PROMPT)
            term.type("tell me something")
            term.expect("This tex")         # the first delta arrived; the server now stalls for 30 s
            start = time.monotonic()
            term.child.sendintr()
            term.expect("cancelled")
            elapsed = time.monotonic() - start
            print(f"Ctrl+C to 'cancelled': {elapsed * 1000:.0f} ms")
            assert elapsed < 5, "the cancel must not wait for the stalled server"
            term.expect(PROMPT)
            # The conversation is still usable: the next task gets an answer.
            term.type("and now?")
            term.expect("Second answer: the conversation survived the cancel.")
            term.expect("cache read")   # the status line
            term.expect(PROMPT)
            term.type("/q")
            assert term.finish() == 0
        finally:
            term.kill()
        reqs = mock.requests()
    assert len(reqs) == 2
    messages = reqs[1]["body"]["messages"]
    roles = [m["role"] for m in messages]
    assert roles[0] == "user" and roles[-1] == "user"
    assert all(a != b for a, b in zip(roles, roles[1:])), roles
    dump = json.dumps(messages)
    assert "tell me something" in dump and dump.count("and now?") == 1
    assert "session " in term.text and "saved" in term.text


def test_ask_policy_questions_answers_and_slash_commands(tooloop_exe, ws, tmp_path):
    with MockServer(SCENARIOS / "cli_repl_ask.json") as mock:
        term = Term(tooloop_exe, [], ws, term_env(tmp_path, mock, NO_COLOR="1"))
        try:
            term.expect("permissions: ask")
            term.expect(PROMPT)
            term.type("create the files")
            term.expect("echo hi > made_by_bash.txt")       # the question shows the command
            term.expect(r"allow bash\? \[y\]es / \[n\]o / \[a\]lways")
            term.type("n")
            term.expect(r"\+ first")                       # the question shows the content to write
            term.expect(r"allow write_file\?")
            term.type("a")
            term.expect("Wrote a.txt and b.txt; the bash call was refused.")
            term.expect("cache read")
            term.expect(PROMPT)
            term.type("/usage")
            term.expect("estimated cost")
            term.expect(PROMPT)
            term.type("/help")
            term.expect("/clear")
            term.expect(PROMPT)
            term.type("/nonsense")
            term.expect("unknown command /nonsense")
            term.expect(PROMPT)
            term.type("/clear")
            term.expect("conversation cleared")
            term.expect(PROMPT)
            term.type("again")
            term.expect("Fresh start.")
            term.expect(PROMPT)
            term.child.sendcontrol("d")   # Ctrl+D leaves
            assert term.finish() == 0
        finally:
            term.kill()
        reqs = mock.requests()

    out = term.text
    assert out.count("allow write_file?") == 1, "'always' must stop the second question"
    assert "allow bash?" in out
    assert not (ws / "made_by_bash.txt").exists()
    assert (ws / "a.txt").read_text() == "first\n" and (ws / "b.txt").read_text() == "second\n"
    # What the model read: the refusal of bash, in the user's words of the policy.
    bash_result = [b for m in reqs[1]["body"]["messages"] if isinstance(m["content"], list)
                   for b in m["content"] if b.get("type") == "tool_result"][0]
    assert bash_result["is_error"] is True
    assert "declined" in json.dumps(bash_result["content"])
    # After /clear the request carries only the new message.
    assert [m["role"] for m in reqs[4]["body"]["messages"]] == ["user"]
    assert "again" in json.dumps(reqs[4]["body"]["messages"])
    # NO_COLOR: no color codes (prompt_toolkit may still move the cursor).
    assert not SGR.search(term.log.getvalue().replace("\x1b[0m", "")), "NO_COLOR output has colors"
    # Line editing history is kept across runs.
    assert "create the files" in (tmp_path / "home" / "history").read_text()


def test_ctrl_c_while_a_question_waits_cancels_the_task(tooloop_exe, ws, tmp_path):
    """The question runs on the agent's worker thread: Ctrl+C must free it, not leave both waiting."""
    with MockServer(SCENARIOS / "cli_repl_ask.json") as mock:
        term = Term(tooloop_exe, [], ws, term_env(tmp_path, mock))
        try:
            term.expect(PROMPT)
            term.type("create the files")
            term.expect(r"allow bash\?")
            start = time.monotonic()
            term.child.sendintr()
            term.expect("cancelled", timeout=10)
            print(f"Ctrl+C at the question to 'cancelled': {(time.monotonic() - start) * 1000:.0f} ms")
            term.expect(PROMPT)
            term.type("/quit")
            assert term.finish() == 0
        finally:
            term.kill()
        assert len(mock.requests()) == 1
    assert not (ws / "made_by_bash.txt").exists()


def test_questions_reach_the_terminal_when_stdout_is_redirected(tooloop_exe, ws, tmp_path):
    (ws / "notes.txt").write_text("remember the milk\n")
    with MockServer(SCENARIOS / "cli_read_only.json") as mock:
        env = term_env(tmp_path, mock, TOOLOOP_EXE=tooloop_exe)
        term = Term("/bin/sh", ["-c", '"$TOOLOOP_EXE" "summarize notes.txt" > transcript.txt'], ws, env)
        try:
            term.expect(r"allow write_file\?")
            term.type("y")
            assert term.finish() == 0
        finally:
            term.kill()
    assert (ws / "summary.txt").read_text() == "summary\n"
    transcript = (ws / "transcript.txt").read_text()
    assert "allow write_file?" not in transcript
    assert "read_file(notes.txt)" in transcript and "write_file(summary.txt, 1 line)" in transcript
    assert "I could read notes.txt" in transcript


def test_repl_continue_shows_the_resumed_session_and_sends_its_messages(tooloop_exe, ws, tmp_path):
    import subprocess

    with MockServer(SCENARIOS / "cli_hello_py.json") as mock:
        env = term_env(tmp_path, mock)
        done = subprocess.run([tooloop_exe, "--yes", "-p", "Create hello.py"], cwd=ws, env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    [session] = (tmp_path / "home").glob("sessions/*/*.jsonl")
    with MockServer(SCENARIOS / "cli_continue.json") as mock:
        term = Term(tooloop_exe, ["--continue"], ws, term_env(tmp_path, mock))
        try:
            term.expect(f"resumed session {session.stem}")
            term.expect(PROMPT)
            term.type("what did you change?")
            term.expect("I created hello.py and changed its greeting")
            term.expect(PROMPT)
            term.type("/q")
            assert term.finish() == 0
        finally:
            term.kill()
        [req] = mock.requests()
    dump = json.dumps(req["body"]["messages"])
    assert "Create hello.py" in dump and "toolu_01CliRun2" in dump and "what did you change?" in dump


def test_an_api_error_is_one_line_and_the_prompt_comes_back(tooloop_exe, ws, tmp_path):
    with MockServer(SCENARIOS / "anthropic_stream_error_midstream.json") as mock:
        term = Term(tooloop_exe, [], ws, term_env(tmp_path, mock))
        try:
            term.expect(PROMPT)
            term.type("hello")
            term.expect(r"error: [^\r\n]*[Oo]verloaded[^\r\n]*\r\n")
            term.expect(PROMPT)
            term.type("/q")
            assert term.finish() == 0
        finally:
            term.kill()
    assert "Traceback" not in term.text


def test_ctrl_d_at_the_prompt_exits_0(tooloop_exe, ws, tmp_path):
    with MockServer({"responses": []}) as mock:
        term = Term(tooloop_exe, [], ws, term_env(tmp_path, mock))
        try:
            term.expect(PROMPT)
            term.child.send("half-typed")
            term.child.sendintr()           # Ctrl+C at the prompt drops the line, not the program
            term.expect(PROMPT)
            # The prompt is drawn before prompt_toolkit reads keys again, and it discards keys typed in
            # between; a person is never that fast, so wait like one before pressing Ctrl+D.
            time.sleep(0.5)
            term.child.sendcontrol("d")
            assert term.finish() == 0
        finally:
            term.kill()
        assert mock.requests() == []
    # An empty session is not kept (so --continue never picks an empty one).
    assert list((tmp_path / "home").glob("sessions/*/*.jsonl")) == []


def test_one_shot_on_a_terminal_is_colored_and_no_color_turns_it_off(tooloop_exe, ws, tmp_path):
    task = "Create hello.py and run it."
    with MockServer(SCENARIOS / "cli_hello_py.json") as mock:
        term = Term(tooloop_exe, ["--yes", task], ws, term_env(tmp_path, mock))
        try:
            assert term.finish() == 0
        finally:
            term.kill()
    colored = term.log.getvalue()
    assert SGR.search(colored), "a terminal gets colors"
    assert "● bash(python3 hello.py)" in term.text and "Hello, tooloop!" in term.text

    (ws / "hello.py").unlink()
    for extra_args, extra_env in (([], {"NO_COLOR": "1"}), (["--no-color"], {})):
        with MockServer(SCENARIOS / "cli_hello_py.json") as mock:
            term = Term(tooloop_exe, extra_args + ["--yes", task], ws, term_env(tmp_path, mock, **extra_env))
            try:
                assert term.finish() == 0
            finally:
                term.kill()
        assert not re.search(r"\x1b\[", term.log.getvalue()), extra_args or extra_env
        assert "bash(python3 hello.py)" in term.text
        (ws / "hello.py").unlink()


def test_ctrl_c_in_a_one_shot_run_exits_130(tooloop_exe, ws, tmp_path):
    with MockServer(SCENARIOS / "cli_repl_stall.json") as mock:
        term = Term(tooloop_exe, ["--yes", "tell me something"], ws, term_env(tmp_path, mock))
        try:
            term.expect("This tex")
            term.child.sendintr()
            assert term.finish(timeout=10) == 130
        finally:
            term.kill()
