"""How the `tooloop` command shows a run: tool lines, result previews, thinking, status lines, and plain
output without escape codes."""

import io
import re

import pytest

import tooloop
from tooloop.cli.render import (
    Renderer,
    preview_lines,
    status_line,
    summarize_call,
)

ANSI = re.compile(r"\x1b\[")


@pytest.mark.parametrize("name,inp,expected", [
    ("bash", {"command": "python3 hello.py"}, "bash(python3 hello.py)"),
    ("bash", {"command": "cd src\nmake"}, "bash(cd src …)"),
    ("read_file", {"path": "a.py", "offset": 10, "limit": 5}, "read_file(a.py:10-14)"),
    ("write_file", {"path": "hello.py", "content": "a\nb\n"}, "write_file(hello.py, 2 lines)"),
    ("edit_file", {"path": "x.rs", "old_text": "a", "new_text": "b", "replace_all": True}, "edit_file(x.rs, all)"),
    ("get_weather", {"city": "Paris"}, 'get_weather("city":"Paris")'),
])
def test_summarize_call_is_one_line_with_the_argument_that_matters(name, inp, expected):
    assert summarize_call(name, inp) == expected


def test_summarize_call_is_clipped_to_the_width():
    line = summarize_call("bash", {"command": "echo " + "x" * 500}, width=60)
    assert len(line) == 60 and line.endswith("…")


def test_preview_shows_first_lines_and_counts_the_rest():
    # Both bash result forms: the plain one, and the older one that led with "exit code: 0".
    assert preview_lines("Hello, world!") == ["Hello, world!"]
    assert preview_lines("exit code: 0\nHello, world!") == ["Hello, world!"]
    assert preview_lines("oops\nexit code: 2") == ["oops", "exit code: 2"]
    assert preview_lines("") == ["(no output)"]
    lines = preview_lines("\n".join(f"line {i}" for i in range(10)))
    assert lines == ["line 0", "line 1", "line 2", "… +7 lines"]
    assert preview_lines("") == ["(no output)"]
    assert preview_lines([{"type": "text", "text": "a"}, {"type": "image"}]) == ["a", "[image]"]


def test_status_line_has_model_turns_tokens_cache_and_the_librarys_cost():
    usage = tooloop.Usage(input_tokens=2483, output_tokens=301, cache_read_input_tokens=5600,
                          cache_creation_input_tokens=1400, cost_usd=0.0171)
    line = status_line("claude-sonnet-4-6", 5, usage)
    assert line == "claude-sonnet-4-6 · 5 turns · 2,483 in / 301 out · 5,600 cache read · $0.0171"
    unpriced = tooloop.Usage(input_tokens=1, cost_usd=None)
    assert status_line("my-llama", 1, unpriced).endswith("cost n/a")
    assert "1 turn ·" in status_line("my-llama", 1, unpriced)


def events(r):
    r.thinking("line one\nline two\nline three\nline four\nline five")
    r.text("Answer ")
    r.text("streamed.")
    r.tool_use("bash", {"command": "ls"})
    r.tool_result("bash", "a\nb\nc\nd\ne", False, 1500)
    r.tool_result("write_file", "cannot write 'x': denied", True)
    r.text("Done.")
    r.status("model · 1 turn")


def test_plain_renderer_writes_no_escape_codes_and_cuts_thinking():
    out = io.StringIO()
    events(Renderer(out, color=False))
    text = out.getvalue()
    assert not ANSI.search(text)
    assert text == (
        "thinking: line one\n  line two\n  line three …\n"
        "Answer streamed.\n"
        "● bash(ls)\n"
        "  ⎿ a  (1.5s)\n    b\n    c\n    … +2 lines\n"
        "  ⎿ error: cannot write 'x': denied\n"
        "Done.\n"
        "─ model · 1 turn\n")


def test_ascii_renderer_for_terminals_without_utf8():
    out = io.StringIO()
    events(Renderer(out, color=False, unicode=False))
    assert "* bash(ls)" in out.getvalue() and "  -> a  (1.5s)" in out.getvalue()
    out.getvalue().encode("ascii")


def test_color_renderer_styles_lines_but_keeps_the_text():
    out = io.StringIO()
    events(Renderer(out, color=True))
    text = out.getvalue()
    assert ANSI.search(text)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", text)
    assert "Answer streamed." in plain and "● bash(ls)" in plain and "line three …" in plain


def test_streamed_text_is_written_at_once():
    class Spy(io.StringIO):
        flushes = 0

        def flush(self):
            Spy.flushes += 1

    out = Spy()
    r = Renderer(out, color=False)
    r.text("par")
    assert out.getvalue() == "par" and Spy.flushes >= 1


def test_permission_request_shows_the_change():
    out = io.StringIO()
    Renderer(out, color=False).permission_request(
        "edit_file", {"path": "a.py", "old_text": "x = 1", "new_text": "x = 2"})
    text = out.getvalue()
    assert "edit_file(a.py)" in text and "    - x = 1\n" in text and "    + x = 2\n" in text
    assert text.rstrip().endswith("(or type a reason to refuse):")


def test_refused_call_is_shown_with_what_was_refused():
    """A refused call's line comes from its tool_use event (the core announces every call), its result
    line from the policy's reason."""
    out = io.StringIO()
    r = Renderer(out, color=False)
    r.tool_use("bash", {"command": "rm -rf build"}, "t1")
    r.note_denial("t1", "the user said no")
    r.tool_result("bash", "Permission denied: the user said no", True, 0, "t1", denied=True)
    assert out.getvalue() == "● bash(rm -rf build)\n  ⎿ denied: the user said no\n"


def test_an_error_that_reads_like_a_denial_is_shown_as_an_error():
    """Only the event's denied flag makes a denial: a tool's own text never does."""
    out = io.StringIO()
    r = Renderer(out, color=False)
    r.tool_use("bash", {"command": "cat /etc/shadow"}, "t1")
    r.tool_result("bash", "Permission denied: /etc/shadow", True, 0, "t1")
    assert "error: Permission denied: /etc/shadow" in out.getvalue()
    assert "denied: /etc" not in out.getvalue().replace("error: Permission denied", "")


def test_call_asked_about_is_not_repeated_when_it_runs():
    out = io.StringIO()
    r = Renderer(out, color=False)
    r.question_wait = 0   # the event never comes before: don't wait for it
    r.permission_request("bash", {"command": "ls"}, "t1")
    r.tool_use("bash", {"command": "ls"}, "t1")
    r.tool_result("bash", "(no output)", False, 5, "t1")
    assert out.getvalue().count("bash(ls)") == 1


def test_call_shown_by_its_event_is_not_repeated_in_the_question():
    """In ask mode the tool_use event usually arrives before the question."""
    out = io.StringIO()
    r = Renderer(out, color=False)
    r.text("Let me run it.")
    r.tool_use("bash", {"command": "python3 hello.py"}, "t1")
    r.permission_request("bash", {"command": "python3 hello.py"}, "t1")
    assert out.getvalue().count("bash(python3 hello.py)") == 1
    assert "waiting for you allow bash? [y]es / [n]o / [a]lways" in out.getvalue()
