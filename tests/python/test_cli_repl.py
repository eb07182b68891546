"""The `tooloop` REPL and terminal output, driven through a pseudo-terminal (pexpect) against the shared
mock server: typing tasks, Ctrl+C during a stalled stream, permission questions, slash commands, Ctrl+D,
and colors on a terminal (none with NO_COLOR)."""

import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "tests" / "scenarios"
sys.path.insert(0, str(ROOT / "tests" / "mock"))
from mockctl import MockServer  # noqa: E402
from _support import run_cli  # noqa: E402
from _terminal import PROMPT, SGR, Term, expect_answering_cpr, term_env  # noqa: E402


def test_ctrl_c_cancels_a_stalled_stream_and_the_prompt_comes_back(tooloop_exe, ws, tmp_path):
    with MockServer(SCENARIOS / "cli_repl_stall.json") as mock:
        with Term(tooloop_exe, [], ws, term_env(tmp_path, mock)) as term:
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
            term.quit()
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
        with Term(tooloop_exe, [], ws, term_env(tmp_path, mock, NO_COLOR="1")) as term:
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
        with Term(tooloop_exe, [], ws, term_env(tmp_path, mock)) as term:
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
        assert len(mock.requests()) == 1
    assert not (ws / "made_by_bash.txt").exists()


def test_questions_reach_the_terminal_when_stdout_is_redirected(tooloop_exe, ws, tmp_path):
    (ws / "notes.txt").write_text("remember the milk\n")
    with MockServer(SCENARIOS / "cli_read_only.json") as mock:
        env = term_env(tmp_path, mock, TOOLOOP_EXE=tooloop_exe)
        with Term("/bin/sh", ["-c", '"$TOOLOOP_EXE" "summarize notes.txt" > transcript.txt'], ws, env) as term:
            term.expect(r"allow write_file\?")
            term.type("y")
            assert term.finish() == 0
    assert (ws / "summary.txt").read_text() == "summary\n"
    transcript = (ws / "transcript.txt").read_text()
    assert "allow write_file?" not in transcript
    assert "read_file(notes.txt)" in transcript and "write_file(summary.txt, 1 line)" in transcript
    assert "I could read notes.txt" in transcript


def test_repl_continue_shows_the_resumed_session_and_sends_its_messages(tooloop_exe, ws, tmp_path):
    with MockServer(SCENARIOS / "cli_hello_py.json") as mock:
        assert run_cli(tooloop_exe, ws, term_env(tmp_path, mock), "--yes", "-p", "Create hello.py").returncode == 0
    [session] = (tmp_path / "home").glob("sessions/*/*.jsonl")
    with MockServer(SCENARIOS / "cli_continue.json") as mock:
        with Term(tooloop_exe, ["--continue"], ws, term_env(tmp_path, mock)) as term:
            term.expect(f"resumed session {session.stem}")
            term.expect(PROMPT)
            term.type("what did you change?")
            term.expect("I created hello.py and changed its greeting")
            term.quit()
        [req] = mock.requests()
    dump = json.dumps(req["body"]["messages"])
    assert "Create hello.py" in dump and "toolu_01CliRun2" in dump and "what did you change?" in dump


def test_an_api_error_is_one_line_and_the_prompt_comes_back(tooloop_exe, ws, tmp_path):
    with MockServer(SCENARIOS / "anthropic_stream_error_midstream.json") as mock:
        with Term(tooloop_exe, [], ws, term_env(tmp_path, mock)) as term:
            term.expect(PROMPT)
            term.type("hello")
            term.expect(r"error: [^\r\n]*[Oo]verloaded[^\r\n]*\r\n")
            term.quit()
    assert "Traceback" not in term.text


def test_ctrl_d_at_the_prompt_exits_0(tooloop_exe, ws, tmp_path):
    with MockServer({"responses": []}) as mock:
        with Term(tooloop_exe, [], ws, term_env(tmp_path, mock)) as term:
            term.expect(PROMPT)
            term.child.send("half-typed")
            term.child.sendintr()           # Ctrl+C at the prompt drops the line, not the program
            term.expect(PROMPT)
            # The prompt is drawn before prompt_toolkit reads keys again, and it discards keys typed in
            # between; a person is never that fast, so wait like one before pressing Ctrl+D.
            time.sleep(0.5)
            term.child.sendcontrol("d")
            assert term.finish() == 0
        assert mock.requests() == []
    # An empty session is not kept (so --continue never picks an empty one).
    assert list((tmp_path / "home").glob("sessions/*/*.jsonl")) == []


def test_one_shot_on_a_terminal_is_colored_and_no_color_turns_it_off(tooloop_exe, ws, tmp_path):
    task = "Create hello.py and run it."
    with MockServer(SCENARIOS / "cli_hello_py.json") as mock:
        with Term(tooloop_exe, ["--yes", task], ws, term_env(tmp_path, mock)) as term:
            assert term.finish() == 0
    colored = term.log.getvalue()
    assert SGR.search(colored), "a terminal gets colors"
    assert "● bash(python3 hello.py)" in term.text and "Hello, tooloop!" in term.text

    (ws / "hello.py").unlink()
    for extra_args, extra_env in (([], {"NO_COLOR": "1"}), (["--no-color"], {})):
        with MockServer(SCENARIOS / "cli_hello_py.json") as mock:
            with Term(tooloop_exe, extra_args + ["--yes", task], ws, term_env(tmp_path, mock, **extra_env)) as term:
                assert term.finish() == 0
        assert not re.search(r"\x1b\[", term.log.getvalue()), extra_args or extra_env
        assert "bash(python3 hello.py)" in term.text
        (ws / "hello.py").unlink()


def test_ctrl_c_in_a_one_shot_run_exits_130(tooloop_exe, ws, tmp_path):
    with MockServer(SCENARIOS / "cli_repl_stall.json") as mock:
        with Term(tooloop_exe, ["--yes", "tell me something"], ws, term_env(tmp_path, mock)) as term:
            term.expect("This tex")
            term.child.sendintr()
            assert term.finish(timeout=10) == 130


def test_single_key_answers_and_the_call_line_is_shown_once(tooloop_exe, ws, tmp_path):
    """y / n / a answer without Enter; the question says it waits; the call's line is printed once."""
    with MockServer(SCENARIOS / "cli_repl_ask.json") as mock:
        with Term(tooloop_exe, [], ws, term_env(tmp_path, mock, NO_COLOR="1")) as term:
            term.expect(PROMPT)
            term.type("create the files")
            term.expect(r"waiting for you allow bash\?")
            term.child.send("n")                            # no Enter
            term.expect(r"waiting for you allow write_file\?")
            term.child.send("a")
            term.expect("Wrote a.txt and b.txt; the bash call was refused.")
            term.quit()
        reqs = mock.requests()
    out = term.text
    assert out.count("bash(echo hi > made_by_bash.txt)") == 1, out
    # The question comes after the turn's text and the call's line, never in the middle of them.
    assert out.index("Let me create the file with bash.") < out.index("bash(echo hi") < out.index("allow bash?")
    assert out.index("Then I'll use write_file.") < out.index("allow write_file?")
    assert out.count("write_file(a.txt, 1 line)") == 1, out
    assert (ws / "a.txt").read_text() == "first\n" and (ws / "b.txt").read_text() == "second\n"
    assert not (ws / "made_by_bash.txt").exists()
    assert len(reqs) == 4


def test_any_other_text_is_the_reason_for_a_refusal(tooloop_exe, ws, tmp_path):
    with MockServer(SCENARIOS / "cli_repl_ask.json") as mock:
        with Term(tooloop_exe, [], ws, term_env(tmp_path, mock, NO_COLOR="1")) as term:
            term.expect(PROMPT)
            term.type("create the files")
            term.expect(r"allow bash\?")
            term.child.send("use write_fx")
            term.child.send("\x7f")                         # Backspace works inside the reason
            term.type("ile instead")
            term.expect(r"allow write_file\?")
            term.child.send("y")
            term.expect(r"allow write_file\?")              # "y" was once: the second call asks again
            term.child.send("Y")
            term.expect("Wrote a.txt and b.txt")
            term.quit()
        reqs = mock.requests()
    bash_result = [b for m in reqs[1]["body"]["messages"] if isinstance(m["content"], list)
                   for b in m["content"] if b.get("type") == "tool_result"][0]
    assert bash_result["is_error"] is True
    assert "use write_file instead" in json.dumps(bash_result["content"])
    assert "use write_file instead" in term.text          # the typed reason was echoed


def test_resume_after_a_500_sends_the_conversation_again_and_retry_still_works_with_a_warning(
        tooloop_exe, ws, tmp_path):
    """/resume is the library's Agent.resume(); /retry, its old name, still works and says it is deprecated."""
    with MockServer(SCENARIOS / "cli_repl_retry.json") as mock:
        with Term(tooloop_exe, [], ws, term_env(tmp_path, mock)) as term:
            term.expect(PROMPT)
            term.type("/resume")
            term.expect("nothing to resume")
            term.expect(PROMPT)
            term.type("hello there")
            term.expect(r"error: [^\r\n]*Internal server error")
            term.expect("/resume goes on")
            term.expect(PROMPT)
            term.type("/retry")
            term.expect("/retry is deprecated")
            term.expect("Answer after the retry.")
            term.expect("cache read")
            term.quit()
        reqs = mock.requests()
    assert len(reqs) == 2
    messages = reqs[1]["body"]["messages"]
    assert [m["role"] for m in messages] == ["user"]
    assert json.dumps(messages).count("hello there") == 1   # re-sent, not sent twice


def test_sessions_are_listed_and_resumed_by_a_unique_prefix(tooloop_exe, ws, tmp_path):
    with MockServer(SCENARIOS / "cli_hello_py.json") as mock:
        env = term_env(tmp_path, mock)
        assert run_cli(tooloop_exe, ws, env, "--yes", "-p", "Create hello.py\nand run it").returncode == 0
    [session] = (tmp_path / "home").glob("sessions/*/*.jsonl")
    listed = run_cli(tooloop_exe, ws, env, "--list")
    assert listed.returncode == 0, listed.stderr
    [row] = [ln for ln in listed.stdout.splitlines() if ln.startswith(session.stem)]
    assert "Create hello.py" in row and "and run it" not in row and "5 turns" in row and "$" in row
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d", row)
    # Another workspace has none.
    other = tmp_path / "other"
    other.mkdir()
    empty = run_cli(tooloop_exe, other, env, "--list")
    assert empty.returncode == 0 and "no sessions" in empty.stdout

    prefix = session.stem[:17]   # date, time and the first random digit
    with MockServer(SCENARIOS / "cli_continue.json") as mock:
        with Term(tooloop_exe, ["--resume", prefix], ws, term_env(tmp_path, mock)) as term:
            term.expect(f"resumed session {session.stem}")
            term.expect(PROMPT)
            term.type("/sessions")
            term.expect(f"{session.stem}[^\r\n]*Create hello.py[^\r\n]*\\(this one\\)")
            term.expect(PROMPT)
            term.type("what did you change?")
            term.expect("I created hello.py and changed its greeting")
            term.quit()
        [req] = mock.requests()
    assert "Create hello.py" in json.dumps(req["body"]["messages"])


def test_answers_are_rendered_as_markdown_and_the_status_bar_shows_the_turn(tooloop_exe, ws, tmp_path):
    with MockServer(SCENARIOS / "cli_markdown.json") as mock:
        env = term_env(tmp_path, mock)
        del env["PROMPT_TOOLKIT_NO_CPR"]
        with Term(tooloop_exe, [], ws, env) as term:
            expect_answering_cpr(term, "sandbox workspace-write")   # the status bar (the header says "sandbox: ")
            time.sleep(0.5)
            term.type("plan it")
            term.expect("Last line")
            expect_answering_cpr(term, r"ctx 2% of 200k[^\r\n]*" + re.escape("cached"))
            term.type("/q")
            assert term.finish() == 0
    raw = term.log.getvalue()
    [session] = (tmp_path / "home").glob("sessions/*/*.jsonl")
    # The status bar after the turn: model · provider · context used · tokens · cache · cost · sandbox · id.
    bar = SGR.sub("", raw[raw.rindex("ctx 2% of 200k") - 200:])
    assert re.search(r"claude-sonnet-4-6 · anthropic · ctx 2% of 200k · 1k in / 50 out · 3k cached"
                     r" · \$0\.\d{4} · sandbox workspace-write · " + re.escape(session.stem), bar), bar
    first_bar = SGR.sub("", raw[raw.index("ctx 0% of 200k") - 60:])
    assert "0 in / 0 out · 0 cached · $0.0000" in first_bar      # before the turn
    # Streamed as plain text first, then each complete block drawn again, rendered.
    answer = raw[raw.index("# Plan"):]
    assert "**bold**" in answer and "# Plan\r\n\r\n\r\x1b[2A\x1b[J" in answer   # up to the block, erase
    assert "Last line.\r\x1b[JLast line." in answer        # the last block: erased and drawn again
    rendered = answer[answer.index("\x1b[J"):]
    assert "**bold**" not in rendered.split("Last line")[-1]
    assert re.search(r"\x1b\[[0-9;]*1[;m][^\x1b]*bold", rendered)      # **bold** became bold text
    assert re.search(r"•\s*item one", SGR.sub("", rendered))            # a list, with bullets
    assert re.search(r"\x1b\[[0-9;]*38;[25];[0-9;]+m[^\x1b]*print", rendered)   # highlighted code


def test_markdown_stays_plain_with_no_color(tooloop_exe, ws, tmp_path):
    with MockServer(SCENARIOS / "cli_markdown.json") as mock:
        with Term(tooloop_exe, ["--yes", "plan it"], ws, term_env(tmp_path, mock, NO_COLOR="1")) as term:
            assert term.finish() == 0
    raw = term.log.getvalue()
    assert not re.search(r"\x1b\[", raw), "NO_COLOR output has escape codes"
    assert "# Plan" in raw and "**bold**" in raw and "```python" in raw and "- item one" in raw


def test_a_spinner_with_elapsed_time_shows_until_the_first_token(tooloop_exe, ws, tmp_path):
    scenario = {"responses": [{"delay_ms": 1500, "anthropic": {
        "id": "msg_slow", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
        "content": [{"type": "text", "text": "Slow but here."}], "stop_reason": "end_turn",
        "stop_sequence": None, "usage": {"input_tokens": 5, "output_tokens": 3}}}]}
    with MockServer(scenario) as mock:
        with Term(tooloop_exe, ["--yes", "take your time"], ws, term_env(tmp_path, mock)) as term:
            term.expect(r"waiting for the model · \d\.\ds")
            term.expect("Slow but here.")
            assert term.finish() == 0
    raw = term.log.getvalue()
    # Erased before the answer is written: the answer starts on a clean line.
    assert "\r\x1b[K" in raw[raw.rindex("waiting for the model"):raw.index("Slow but here.")]
    with MockServer(scenario) as mock:   # the plain face has no spinner
        with Term(tooloop_exe, ["--yes", "take your time"], ws, term_env(tmp_path, mock, NO_COLOR="1")) as term:
            term.expect("Slow but here.")
            assert term.finish() == 0
    assert "waiting for the model" not in term.text


def test_a_picture_mentioned_in_the_repl_is_sent_as_an_image(tooloop_exe, ws, tmp_path):
    import base64
    png = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
    (ws / "shot.png").write_bytes(png)
    reply = {"anthropic": {"id": "msg_img", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
                           "content": [{"type": "text", "text": "A red pixel."}], "stop_reason": "end_turn",
                           "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 5}}}
    with MockServer({"responses": [reply]}) as mock:
        with Term(tooloop_exe, [], ws, term_env(tmp_path, mock)) as term:
            term.expect("/help for commands")
            term.expect(PROMPT)
            term.type("what is in @shot.png?")
            term.expect("A red pixel")
            term.expect(PROMPT)
            term.child.sendeof()
            term.finish()
            content = mock.requests()[0]["body"]["messages"][0]["content"]
            assert base64.b64decode(content[0]["source"]["data"]) == png
            assert content[-1]["text"] == "what is in @shot.png?"
