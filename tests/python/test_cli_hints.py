"""The command's hints on a Python error whose cause the workspace names (`cli/hints.py`, issue 41): unit tests
on real tracebacks (each made by running the broken file), and the command against the mock server, where the
draft's test fails to import what it tests and the model reads the hint in the same run."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional, Tuple

import pytest

from _support import small_window_run, text_reply
from _support import tool_reply
from tooloop.cli.hints import after_check_hook, after_tool_hook, hint

SLUG = "def slugify(text):\n    return '-'.join(text.lower().split())\n"
PAL = "def is_palindrome(s):\n    return s == s[::-1]\n"


def _traceback(ws: Path, name: str, source: str) -> str:
    (ws / name).write_text(source)
    proc = subprocess.run([sys.executable, name], cwd=ws, capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0 and "Traceback" in proc.stderr, proc.stderr
    return proc.stdout + proc.stderr


@pytest.fixture
def ws(ws: Path) -> Path:
    (ws / "slug.py").write_text(SLUG)
    (ws / "pal.py").write_text(PAL)
    return ws


def _edit_of(said: str) -> Tuple[str, str, str]:
    """The path, old_text and new_text of the edit_file call a hint says to make."""
    m = re.search(r"[Mm]ake this edit: edit_file with path (\S+), old_text (\".*?(?<!\\)\") and "
                  r"new_text (\".*\")\.$", said)
    assert m, said
    return m.group(1), json.loads(m.group(2)), json.loads(m.group(3))


def _made(ws: Path, said: str) -> "subprocess.CompletedProcess[str]":
    """The edit the hint names, made as edit_file makes it (old_text must occur once), and the file run again."""
    path, old, new = _edit_of(said)
    text = (ws / path).read_text()
    assert text.count(old) == 1, (old, text)
    (ws / path).write_text(text.replace(old, new))
    return subprocess.run([sys.executable, path], cwd=ws, capture_output=True, text=True, timeout=30)


def test_a_name_another_workspace_module_defines_is_to_be_imported(ws: Path) -> None:
    out = _traceback(ws, "test_slug.py", "assert slugify('A b') == 'a-b'\n")
    said = hint(out, ws)
    # Said as the exact edit_file call, which a small model makes (words alone: 0 to 3 of 6 times).
    assert said == ("hint: test_slug.py does not import slugify, which slug.py defines. Make this edit: edit_file "
                    "with path test_slug.py, old_text \"assert slugify('A b') == 'a-b'\" and new_text "
                    "\"from slug import slugify\\n\\nassert slugify('A b') == 'a-b'\".")
    assert _made(ws, said).returncode == 0


def test_a_standard_module_used_without_import(ws: Path) -> None:
    out = _traceback(ws, "test_pal.py", "from pal import is_palindrome\n\nclass T(unittest.TestCase):\n    pass\n")
    said = hint(out, ws)
    assert said == ("hint: test_pal.py uses the standard module unittest without importing it. Make this edit: "
                    "edit_file with path test_pal.py, old_text \"from pal import is_palindrome\" and new_text "
                    "\"from pal import is_palindrome\\nimport unittest\".")
    assert _made(ws, said).returncode == 0


@pytest.mark.parametrize("source", [
    # after the first import that is a line of its own, once in the file
    'import os  # "quoted"\nimport sys\n\nassert slugify("A b") == "a-b", os.sep\n',
    # a module docstring stays first; the import goes before the first statement
    '"""Tests of slug.py."""\n\ndef test():\n    assert slugify("A b") == "a-b"\n\ntest()\n',
    # a decorated first function: before its decorator
    'import functools as f\nimport os; import sys\n',
    "@staticmethod\ndef helper():\n    pass\n\nassert slugify('A b') == 'a-b'\n",
])
def test_the_edit_a_hint_names_matches_once_and_fixes_the_name_error(ws: Path, source: str) -> None:
    if "slugify" not in source:
        source += "assert slugify('A b') == 'a-b'\n"
    out = _traceback(ws, "test_slug.py", source)
    said = hint(out, ws)
    assert said and "Make this edit" in said, said
    ran = _made(ws, said)
    assert ran.returncode == 0, ran.stderr


def test_where_no_line_of_the_file_can_anchor_the_edit_the_hint_says_it_in_words(ws: Path) -> None:
    # Its only import line occurs twice: an old_text there would not match once.
    out = _traceback(ws, "test_slug.py", "import os\nimport os\nassert slugify('A b') == 'a-b'\n")
    assert hint(out, ws) == ("hint: `slugify` is defined in slug.py, and test_slug.py does not import it: add "
                             "`from slug import slugify` at the top of test_slug.py.")


def test_a_module_called_as_a_function_names_the_functions_in_it(ws: Path) -> None:
    out = _traceback(ws, "test_pal.py", "import pal\n\nassert pal('aba')\n")
    said = hint(out, ws)
    assert said is not None and "`pal` is the module pal.py, not a function" in said
    assert "`pal.is_palindrome(...)`, or `from pal import is_palindrome`" in said


def test_a_missing_attribute_or_import_lists_what_the_module_defines(ws: Path) -> None:
    out = _traceback(ws, "t.py", "import pal\npal.palindrome('x')\n")
    assert hint(out, ws) == ("hint: pal.py has no `palindrome`: pal.py defines `is_palindrome`; did you mean "
                             "`is_palindrome`?")
    out = _traceback(ws, "t.py", "from slug import slug\n")
    said = hint(out, ws)
    assert said is not None and said.startswith("hint: slug.py has no `slug`: slug.py defines `slugify`"), said


def test_a_module_name_close_to_a_workspace_file(ws: Path) -> None:
    out = _traceback(ws, "t.py", "import slugs\n")
    assert hint(out, ws) == "hint: there is no slugs.py in the workspace; did you mean slug.py?"


def test_a_missing_key_names_the_keys_of_the_json_file_the_failing_file_reads(ws: Path) -> None:
    (ws / "scores.json").write_text('[{"name": "alice", "score": 3}, {"name": "bob", "score": 5, "rank": 1}]\n')
    out = _traceback(ws, "report.py", "import json\n\nfor row in json.load(open('scores.json')):\n"
                                      "    print(row['user'])\n")
    assert hint(out, ws) == ("hint: the objects in scores.json, which report.py reads, have the keys `name`, "
                             "`score`, `rank`; none is `user`.")


def test_the_one_key_the_failing_file_does_not_read_is_named_with_the_edit_that_reads_it(ws: Path) -> None:
    # The table's traceback task: report.py reads `user` and `score`; the objects have `name` and `score`.
    (ws / "scores.json").write_text('[{"name": "alice", "score": 3}, {"name": "bob", "score": 5}]\n')
    source = "import json\n\ndata = json.load(open('scores.json'))\nfor row in data:\n" \
             "    print(f\"{row['user']}: {row['score']}\")\n"
    said = hint(_traceback(ws, "report.py", source), ws)
    assert said == ("hint: the objects in scores.json, which report.py reads, have the keys `name`, `score`; none "
                    "is `user`. report.py reads `score` as well; the one key it does not read is `name`. If that is "
                    "the key meant, make this edit: edit_file with path report.py, old_text \"row['user']\" and "
                    "new_text \"row['name']\".")
    done = _made(ws, said)
    assert done.returncode == 0 and done.stdout == "alice: 3\nbob: 5\n", done.stderr
    # Double quotes are kept; a subscript that occurs twice gets the key named, not an edit.
    said = hint(_traceback(ws, "report.py", 'import json\nfor r in json.load(open("scores.json")):\n'
                                           '    print(r["user"], r["score"])\n'), ws)
    assert said is not None and said.endswith("""new_text "r[\\"name\\"]".""") and _made(ws, said).returncode == 0
    said = hint(_traceback(ws, "report.py", "import json\nfor r in json.load(open('scores.json')):\n"
                                           "    print(r['score'] or r['user'], r['user'])\n"), ws)
    assert said is not None and said.endswith("the one key it does not read is `name`."), said
    # Two keys it does not read: which one is meant, the workspace does not say.
    (ws / "scores.json").write_text('[{"name": "alice", "score": 3, "rank": 1}]\n')
    said = hint(_traceback(ws, "report.py", source), ws)
    assert said is not None and said.endswith("none is `user`."), said


def test_a_call_that_does_not_fit_shows_how_the_workspace_defines_it(ws: Path) -> None:
    (ws / "shop.py").write_text("class Item:\n    def __init__(self, name, price):\n        self.name = name\n")
    out = _traceback(ws, "main.py", "from shop import Item\nItem('tea', 4.5, currency='USD')\n")
    assert hint(out, ws) == ("hint: `Item.__init__` is defined in shop.py (line 2) as `def __init__(self, name, "
                             "price)`: change it there, or call it as it is defined.")
    out = _traceback(ws, "main.py", "from slug import slugify\nslugify('a', 'b')\n")
    assert hint(out, ws) == ("hint: `slugify` is defined in slug.py (line 1) as `def slugify(text)`: change it "
                             "there, or call it as it is defined.")


def test_pip_asked_for_a_standard_module_is_told_there_is_nothing_to_install(ws: Path) -> None:
    # What pip prints (a real run answered a KeyError with `pip install json`, five times).
    out = ("Defaulting to user installation because normal site-packages is not writeable\n"
           "ERROR: Could not find a version that satisfies the requirement json (from versions: none)\n"
           "ERROR: No matching distribution found for json\nexit code: 1\n")
    assert hint(out, ws) == ("hint: `json` is part of Python's standard library: there is nothing to install; "
                             "import it.")
    assert hint(out.replace("json", "jsonnn"), ws) is None


def test_a_link_out_of_the_workspace_is_never_read(ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "secret.json").write_text('{"api_token": "x"}\n')
    (outside / "keys.py").write_text("def private_name():\n    pass\n")
    (ws / "data.json").symlink_to(outside / "secret.json")
    (ws / "keys.py").symlink_to(outside / "keys.py")
    out = _traceback(ws, "r.py", "import json\nprint(json.load(open('data.json'))['user'])\n")
    assert hint(out, ws) is None
    out = _traceback(ws, "r.py", "import keys\nkeys.public_name()\n")
    assert hint(out, ws) is None
    (ws / "data.json").unlink()
    (ws / "data.json").write_text('{"api_token": "x"}\n')
    out = _traceback(ws, "r.py", "import json\nprint(json.load(open('data.json'))['user'])\n")
    assert hint(out, ws) == ("hint: the objects in data.json, which r.py reads, have the keys `api_token`; none is "
                             "`user`. r.py does not read `api_token`.")


def test_a_fifo_the_traceback_names_is_never_opened(ws: Path) -> None:
    # The model's bash can make one and print a traceback naming it: reading it would hang the command.
    import os
    import threading

    for name in ("t.py", "data.json"):
        os.mkfifo(ws / name)
    fake = (f'Traceback (most recent call last):\n  File "{ws}/t.py", line 1, in <module>\n'
            "NameError: name 'unittest' is not defined\n")
    keyed = fake.replace("NameError: name 'unittest' is not defined", "KeyError: 'user'")
    called = fake.replace("NameError: name 'unittest' is not defined", "TypeError: 'module' object is not callable")
    said: list = []
    worker = threading.Thread(target=lambda: said.extend(hint(o, ws) for o in (fake, keyed, called)), daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive() and said == [None, None, None], said


def test_only_the_last_traceback_of_the_output_is_read(ws: Path) -> None:
    first = _traceback(ws, "a.py", "assert slugify('x') == 'x'\n")
    last = _traceback(ws, "b.py", "assert 1 == 2\n")
    assert hint(first, ws) is not None and hint(first + last, ws) is None


@pytest.mark.parametrize("source", [
    "assert 1 == 2\n",                       # a failing assert: the workspace does not say which side is wrong
    "print(nowhere_defined)\n",              # a name nothing in the workspace defines
    "print(string)\n",                       # a standard module's name, not used as a module
    "import numpy_not_installed_here\n",     # a module like no workspace file
    "from slug import slugify\nslugify(None)\n",   # an error inside the code, not in how it is reached
    "print({'a': 1}['b'])\n",                # a missing key, and no JSON file read
    "print(len(1, 2))\n",                    # a call that does not fit, of no workspace function
])
def test_no_hint_where_the_workspace_does_not_name_the_cause(ws: Path, source: str) -> None:
    assert hint(_traceback(ws, "t.py", source), ws) is None


def _failed(ws: Path, name: str, source: str) -> str:
    """The output of running `source` as `name`, which fails (a SyntaxError has no "Traceback" line)."""
    (ws / name).write_text(source)
    proc = subprocess.run([sys.executable, name], cwd=ws, capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0, proc.stdout
    return proc.stdout + proc.stderr


TEST_PAL = "from pal import is_palindrome\n\nassert is_palindrome('aba')\nprint('ok')\n"


@pytest.mark.parametrize("source, line", [
    # the command that runs the test, left at the end of it (a real run's test_pal.py)
    (TEST_PAL + "\n# Run the test\npython3 test_pal.py\n", "python3 test_pal.py"),
    # the answer's code fences written into the file: the first fence first, then (once it is deleted) the last
    ("```python\n" + TEST_PAL + "```\n", "```python"),
    ("```\n" + TEST_PAL + "```\n", "```"),   # the line occurs twice: old_text takes its neighbour
    (TEST_PAL + "$ pip install pal\n", "$ pip install pal"),
])
def test_a_line_that_is_not_python_is_named_with_the_edit_that_deletes_it(ws: Path, source: str, line: str) -> None:
    out = _failed(ws, "test_pal.py", source)
    said = hint(out, ws)
    assert said is not None and said.startswith("hint: line "), out
    assert f"of test_pal.py is a {'Markdown code fence' if line.startswith('`') else 'shell command'}, not " \
        f"Python: {json.dumps(line)}. Make this edit: edit_file with path test_pal.py" in said, said
    # As the check's failure, the same hint; not for a file the check named as the run started.
    check = {"command": "python3 test_pal.py", "output_tail": out}
    assert after_check_hook(ws, "python3 x.py")(check, "failed") == f"failed\n\n{said}"
    assert after_check_hook(ws, "python3 test_pal.py")(check, "failed") is None
    done = _made(ws, said)
    while done.returncode != 0:   # the closing fence, named the same way
        said = hint(done.stdout + done.stderr, ws)
        assert said is not None, done.stderr
        done = _made(ws, said)
    assert done.stdout == "ok\n"


@pytest.mark.parametrize("source", [
    "def f(:\n    pass\n",            # Python that does not parse: no line to delete
    "x = 1\npython = 3 4\n",           # a name like a command, in Python
])
def test_no_hint_for_a_syntax_error_in_python_itself(ws: Path, source: str) -> None:
    assert hint(_failed(ws, "t.py", source), ws) is None


def test_the_hook_reads_only_failed_bash_results_and_keeps_the_users_hook_first(ws: Path) -> None:
    out = _traceback(ws, "test_slug.py", "assert slugify('A b') == 'a-b'\n")

    class Call:
        def __init__(self, name: str) -> None:
            self.name = name

    class Result(str):
        denied = False
        is_error = False

        @property
        def text(self) -> str:
            return str(self)

    seen = []

    def users(call: Any, result: Any) -> Optional[str]:
        seen.append(call.name)
        return f"{result.text}\n[PostToolUse hook] looked"

    hook = after_tool_hook(ws, users)
    said = hook(Call("bash"), Result(out))
    assert said is not None and said.startswith(out + "\n[PostToolUse hook] looked\n\nhint: test_slug.py does not import slugify")
    assert hook(Call("read_file"), Result(out)) == f"{out}\n[PostToolUse hook] looked", "only bash results"
    assert seen == ["bash", "read_file"]
    plain = after_tool_hook(ws)
    assert plain(Call("bash"), Result("exit code 1\nAssertionError")) is None
    assert plain(Call("bash"), Result(said)) is None, "a hint the result already has is not given twice"


DRAFT = ("test_slug.py\n```python\nassert slugify('Hello World') == 'hello-world'\nprint('ok')\n```\n\n"
         "```bash\npython3 test_slug.py\n```\n")


def _cli(tooloop_exe: str, ws: Path, tmp_path: Path, *extra: str) -> Any:
    # The draft writes a test that does not import slugify and runs it (its shell block): the command's result
    # carries the NameError, and with it the hint, into the next request of the same run.
    return small_window_run(tooloop_exe, ws, tmp_path, [text_reply(DRAFT), text_reply("The test fails.")],
                            "Add test_slug.py for slug.py's slugify and run it.", *extra)


def test_cli_small_window_hint_reaches_the_model_with_the_failed_command(tooloop_exe: str, ws: Path,
                                                                       tmp_path: Path) -> None:
    proc, bodies = _cli(tooloop_exe, ws, tmp_path)
    assert len(bodies) == 2, proc.stderr
    last = json.dumps(bodies[1]["messages"][-1])
    assert "NameError: name 'slugify' is not defined" in last, last
    assert "test_slug.py does not import slugify, which slug.py defines. Make this edit: edit_file with path " \
        "test_slug.py" in last, last


def test_cli_no_hints_leaves_the_error_as_it_is(tooloop_exe: str, ws: Path, tmp_path: Path) -> None:
    proc, bodies = _cli(tooloop_exe, ws, tmp_path, "--no-hints")
    assert len(bodies) == 2, proc.stderr
    last = json.dumps(bodies[1]["messages"][-1])
    assert "NameError: name 'slugify' is not defined" in last and "hint:" not in last, last


def test_cli_small_window_attempts_get_hints_from_their_own_copy(tooloop_exe: str, ws: Path, tmp_path: Path) -> None:
    # The attempt's test is in its copy only: the hint reads that copy (slug.py there), not the workspace.
    proc, bodies = _cli(tooloop_exe, ws, tmp_path, "--attempts", "1")
    assert len(bodies) == 2, proc.stderr
    last = json.dumps(bodies[1]["messages"][-1])
    assert "test_slug.py does not import slugify, which slug.py defines" in last, last
    assert not (ws / "test_slug.py").exists(), "the attempt was not verified: nothing is applied"


def test_after_check_hook_appends_the_hint_to_the_checks_message_but_never_for_a_file_the_check_names(
        ws: Path) -> None:
    # The test did not exist as the run started (the model wrote it): it is the model's to fix.
    hook = after_check_hook(ws, "python3 test_slug.py")
    out = _traceback(ws, "test_slug.py", "assert slugify('A b') == 'a-b'\n")
    check = {"command": "python3 test_slug.py", "passed": False, "exit_code": 1, "output_tail": out, "runs": 1}
    message = f"The check `python3 test_slug.py` failed (exit 1):\n{out}"
    said = hook(check, message)
    expected = ("\n\nhint: test_slug.py does not import slugify, which slug.py defines. Make this edit: edit_file "
                "with path test_slug.py")
    assert said is not None and said.startswith(message + expected), said
    assert hook(check, said) is None, "not twice"
    # The test was there as the run started: the check's file is read-only, an edit of it would be refused.
    assert after_check_hook(ws, "python3 test_slug.py")(check, message) is None
    assert after_check_hook(ws, "sh -c 'python3 test_slug.py'")(check, message) is None, \
        "the command inside `sh -c` too, as the library reads it"
    assert after_check_hook(ws, "python3 test_slug.pyc")(check, message) is not None, \
        "a word of the command, not a part of one"
    passed = {**check, "output_tail": "ok"}
    assert after_check_hook(ws, "python3 test_slug.py")(passed, "x") is None


def test_after_check_hook_reads_the_checks_files_as_the_library_does(ws: Path) -> None:
    # A test in a folder the check names, or named by a pytest node id: the library keeps it read-only (bash's
    # grammar, `tooloop.rules.check_files`), so no edit is proposed in it.
    (ws / "tests").mkdir()
    out = _traceback(ws, "tests/test_slug.py", "import sys\nsys.path.insert(0, '.')\nassert slugify('A b') == 'a-b'\n")
    check = {"command": "c", "passed": False, "exit_code": 1, "output_tail": out, "runs": 1}
    assert "path tests/test_slug.py" in (after_check_hook(ws, "python3 x.py")(check, "failed") or ""), out
    for command in ("pytest -q tests", "pytest -q tests/", "pytest 'tests/test_slug.py::test_a'",
                    "cd . && python3 tests/test_slug.py"):
        assert after_check_hook(ws, command)(check, "failed") is None, command


def test_cli_small_window_check_failure_carries_the_hint(tooloop_exe: str, ws: Path, tmp_path: Path) -> None:
    # The draft writes a test without the import and no command: the answer is held to the check, whose
    # NameError goes back to the model with the hint (an after_check hook); the edit it names passes the check.
    draft = "test_slug.py\n```python\nassert slugify('Hello World') == 'hello-world'\nprint('ok')\n```\n"
    edit = {"path": "test_slug.py", "old_text": "assert slugify('Hello World') == 'hello-world'",
            "new_text": "from slug import slugify\n\nassert slugify('Hello World') == 'hello-world'"}
    replies = [text_reply(draft), text_reply("Done."), tool_reply(("e1", "edit_file", edit)), text_reply("Fixed.")]
    proc, bodies = small_window_run(tooloop_exe, ws, tmp_path, replies, "Add test_slug.py for slug.py's slugify.",
                                    "--check", "python3 test_slug.py")
    told = [json.dumps(b["messages"][-1]) for b in bodies]
    failed = [t for t in told if "The check `python3 test_slug.py` failed" in t]
    assert len(failed) == 1, (proc.stderr, told)
    assert "hint: test_slug.py does not import slugify, which slug.py defines. Make this edit: edit_file with " \
        "path test_slug.py" in failed[0], failed[0]
    assert proc.returncode == 0, proc.stderr
    assert "tooloop: check passed" in proc.stderr
