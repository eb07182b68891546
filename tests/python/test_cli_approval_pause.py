"""Approval as a pause in the `tooloop` REPL (issue 39 item 1): the run pauses at each call that needs a
decision, a subagent's included, and the question is asked where the events are drawn, then answered with
the stream's ``approve``. Driven through a pseudo-terminal against the shared mock server."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "tests" / "scenarios"
sys.path.insert(0, str(ROOT / "tests" / "mock"))
from mockctl import MockServer  # noqa: E402
from _support import tool_results  # noqa: E402

pexpect = pytest.importorskip("pexpect")
from _terminal import PROMPT, Term, term_env  # noqa: E402

CHILD_QUESTION = r"waiting for you · the general agent asks: allow bash\?"


def test_the_parents_and_a_subagents_questions_come_in_order_the_childs_marked_and_the_run_completes(
        tooloop_exe, ws, tmp_path):
    with MockServer(SCENARIOS / "cli_subagent_pause.json") as mock:
        with Term(tooloop_exe, [], ws, term_env(tmp_path, mock, NO_COLOR="1")) as term:
            term.expect(PROMPT)
            term.type("write both files")
            term.expect(r"waiting for you allow bash\?")
            term.child.send("y")
            term.expect(r"task\(general: write the child file\)")
            term.expect(r"    ● bash\(echo child > child.txt\)")
            term.expect(CHILD_QUESTION)
            assert not (ws / "child.txt").exists(), "the child's call waits for its answer"
            term.child.send("y")
            term.expect("Both files are written.")
            term.expect(PROMPT)
            term.child.sendcontrol("d")
            assert term.finish() == 0
        reqs = mock.requests()
    out = term.text
    # One question at a time, each after what it is about: the parent's text and call, then the child's call.
    order = [out.index("First a command of mine."), out.index("bash(echo parent > parent.txt)"),
             out.index("allow bash?"), out.index("Now the helper."), out.index("task(general: write the child file)"),
             out.index("    ● bash(echo child > child.txt)"), out.index("the general agent asks: allow bash?"),
             out.index("Both files are written.")]
    assert order == sorted(order), out
    assert out.count("allow bash?") == 2 and out.count("bash(echo child > child.txt)") == 1, out
    assert (ws / "parent.txt").read_text() == "parent\n" and (ws / "child.txt").read_text() == "child\n"
    assert tool_results(reqs[3])["toolu_01PauseChildBash"][1] is False   # the child's model read its result
    assert len(reqs) == 5


def test_ctrl_c_at_a_subagents_question_answers_its_call_as_interrupted_not_as_refused(tooloop_exe, ws, tmp_path):
    with MockServer(SCENARIOS / "cli_subagent_pause.json") as mock:
        with Term(tooloop_exe, [], ws, term_env(tmp_path, mock, NO_COLOR="1")) as term:
            term.expect(PROMPT)
            term.type("write both files")
            term.expect(r"allow bash\?")
            term.child.send("y")
            term.expect(CHILD_QUESTION)
            term.child.sendintr()
            term.expect("cancelled", timeout=10)
            term.expect(PROMPT)
            term.type("/quit")
            assert term.finish() == 0
        assert len(mock.requests()) == 3, "nothing was sent after the question"
    assert not (ws / "child.txt").exists()
    # The session keeps the child's transcript: its waiting call was answered as interrupted (a Ctrl+C is
    # not the user's refusal), and the task call too.
    sessions = list(tmp_path.rglob("*.jsonl"))
    text = "\n".join(p.read_text() for p in sessions)
    assert "interrupted: the run was cancelled before this tool call ran" in text, sessions
    assert "interrupted: the run was cancelled while the agent worked on this task" in text
    assert "The run was interrupted before the user answered" not in text
    assert "Permission denied" not in text
