"""The `tooloop` command knows when a model stops making progress: three scripted models against the
mock server — one that re-writes identical content and re-runs its check, one that cycles, one that finishes —
and bench/local_tasks.py over its twelve tasks, side by side with another agent command.
"""

import json
import os
import subprocess
import sys

from _support import ROOT, cli_env, text_reply, tool_reply
from mockctl import MockServer


def run(exe, ws, env, *args, timeout=60):
    proc = subprocess.run([exe, "--yes", "--sandbox", "off", "--no-color"] + list(args), cwd=ws, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    print("exit", proc.returncode, "\n--- stdout\n" + proc.stdout + "--- stderr\n" + proc.stderr)
    return proc


def rewrites(n):
    steps = []
    for i in range(n):
        steps.append(tool_reply((f"w{i}", "write_file", {"path": "hello.txt", "content": "hi\n"})))
        steps.append(tool_reply((f"b{i}", "bash", {"command": "cat hello.txt"})))
    return steps


def test_a_model_that_rewrites_identical_content_gets_the_tools_off_turn_and_a_call_then_stops_it(
        tooloop_exe, ws, tmp_path):
    # write, check, write the same: done. The next request goes out with tools off; this mock (like some local
    # servers) ignores that and calls a tool anyway: not run, and the command stops with one line.
    with MockServer({"responses": rewrites(5)}) as mock:
        proc = run(tooloop_exe, ws, cli_env(tmp_path, mock), "make hello.txt say hi")
        reqs = mock.requests()
    assert proc.returncode == 1
    assert len(reqs) == 5, "told at turn 3, the wrap-up turns 4 and 5 call a tool: stopped there"
    assert reqs[3]["body"].get("tool_choice") == {"type": "none"} and reqs[3]["body"]["tools"]
    # Ignored once: the second wrap-up goes without the tools, so the server's prompt no longer lists them.
    assert "tool_choice" not in reqs[4]["body"] and "tools" not in reqs[4]["body"]
    told = json.dumps(reqs[3]["body"]["messages"][-1])
    assert "wrote exactly the content the file already had" in told and "tools are off for this answer" in told
    assert "Do not call a tool: answer in plain words." in json.dumps(reqs[4]["body"]["messages"][-1])
    line = proc.stderr.strip()
    assert line.count("\n") == 0
    assert line.startswith("tooloop: stopped: no progress (asked twice for its final answer with tools off, the "
                           "model called a tool again."), line
    assert "write_file(hello.txt) wrote exactly the content" in line.lower()
    assert "no progress (1 turn): the model was told it repeats itself" in proc.stdout
    assert (ws / "hello.txt").read_text() == "hi\n"


def test_a_model_that_cycles_is_stopped_and_the_line_names_the_cycle(tooloop_exe, ws, tmp_path):
    # Reads only (no passing check run again, so no tools-off turn): the guard's own stop after a cycle.
    names = ["notes.txt", "other.txt", "third.txt"]
    for name in names:
        (ws / name).write_text(f"{name}\n")
    steps = []
    for i in range(4):
        steps += [tool_reply((f"r{i}{k}", "read_file", {"path": name})) for k, name in enumerate(names)]
    steps[6] = text_reply("The notes say notes, other and third.")
    with MockServer({"responses": steps}) as mock:
        proc = run(tooloop_exe, ws, cli_env(tmp_path, mock), "summarize the notes")
        reqs = mock.requests()
    # The stop, then one request with tools off for the answer (a guard's stop still answers).
    assert proc.returncode == 1 and len(reqs) == 7
    assert all(r["body"].get("tool_choice") is None for r in reqs[:6])
    assert reqs[6]["body"]["tool_choice"] == {"type": "none"}
    assert "The notes say notes, other and third." in proc.stdout
    assert "a cycle: read_file(notes.txt), then read_file(other.txt), then read_file(third.txt)" in proc.stderr
    assert proc.stderr.strip().count("\n") == 0


def test_a_model_that_finishes_is_untouched_and_the_guard_can_be_turned_off(tooloop_exe, ws, tmp_path):
    steps = rewrites(1) + [text_reply("hello.txt says hi.")]
    with MockServer({"responses": steps}) as mock:
        proc = run(tooloop_exe, ws, cli_env(tmp_path, mock), "make hello.txt say hi")
        reqs = mock.requests()
    assert proc.returncode == 0, proc.stderr
    assert "no progress" not in proc.stdout + proc.stderr
    assert "tooloop:" not in json.dumps(reqs[-1]["body"]["messages"][-1])
    # --no-progress-guard: the same identical rewrites run on to the turn limit.
    with MockServer({"responses": rewrites(3)}) as mock:
        proc = run(tooloop_exe, ws, cli_env(tmp_path, mock), "--no-progress-guard", "--max-turns", "6",
                   "make hello.txt say hi")
        n = len(mock.requests())
    assert n == 6 and proc.returncode == 1
    assert "turn limit" in proc.stderr and "no progress" not in proc.stderr


def test_a_model_that_reruns_a_passing_check_gets_a_tools_off_turn_and_the_command_ends_by_itself(
        tooloop_exe, ws, tmp_path):
    # What a small local model does when it is done: write, run (passes), run again. The next request goes out
    # once with tools disabled, asking for the answer; the model answers in text and the command exits 0.
    steps = [tool_reply(("w", "write_file", {"path": "hello.py", "content": "print('hi')\n"})),
             tool_reply(("b1", "bash", {"command": "python3 hello.py"})),
             tool_reply(("b2", "bash", {"command": "python3 hello.py"})),
             text_reply("hello.py prints hi.")]
    with MockServer({"responses": steps}) as mock:
        proc = run(tooloop_exe, ws, cli_env(tmp_path, mock), "make hello.py print hi and run it")
        reqs = mock.requests()
    assert proc.returncode == 0, proc.stderr
    assert len(reqs) == 4
    assert [r["body"].get("tool_choice") for r in reqs] == [None, None, None, {"type": "none"}]
    assert reqs[3]["body"]["tools"], "the tools stay defined: the history holds calls of them"
    assert "tools are off for this answer" in json.dumps(reqs[3]["body"]["messages"][-1])
    assert "hello.py prints hi." in proc.stdout


def test_an_answer_that_writes_an_already_made_call_as_text_stands_and_a_new_one_is_corrected(
        tooloop_exe, ws, tmp_path):
    # The wrap-up turn's answer of a small model on llama.cpp: the call it already made, as fenced JSON. Asking
    # it to make that call properly would restart its loop: the answer stands and the command exits 0.
    run_hello = {"command": "python3 hello.py", "timeout": 120}
    fenced = "```json\n" + json.dumps({"name": "bash", "arguments": run_hello}) + "\n```"
    steps = [tool_reply(("w", "write_file", {"path": "hello.py", "content": "print('hi')\n"})),
             tool_reply(("b1", "bash", run_hello)), tool_reply(("b2", "bash", run_hello)), text_reply(fenced)]
    with MockServer({"responses": steps}) as mock:
        proc = run(tooloop_exe, ws, cli_env(tmp_path, mock), "make hello.py print hi and run it")
        n = len(mock.requests())
    assert proc.returncode == 0 and n == 4, proc.stderr
    assert "wrote a tool call as text" not in proc.stdout + proc.stderr
    # A call it never made, written as text, still gets the one-line correction.
    fenced = "```json\n" + json.dumps({"name": "bash", "arguments": {"command": "ls"}}) + "\n```"
    with MockServer({"responses": steps[:3] + [text_reply(fenced), text_reply("done")]}) as mock:
        proc = run(tooloop_exe, ws, cli_env(tmp_path, mock), "make hello.py print hi and run it")
        reqs = mock.requests()
    assert proc.returncode == 0 and len(reqs) == 5, proc.stderr
    assert "Call the tool through the tool-calling interface" in json.dumps(reqs[4]["body"]["messages"][-1])


def _cut(*calls):
    """A reply that hit max_tokens inside its (last) tool call."""
    reply = tool_reply(*calls)
    reply["anthropic"]["stop_reason"] = "max_tokens"
    return reply


def test_an_answer_cut_off_at_max_tokens_is_asked_to_write_less_and_the_command_finishes(tooloop_exe, ws, tmp_path):
    # A small model writing a test file degenerates into repeating lines until max_tokens: the cut call never
    # runs, the model is told so and asked to write less at a time, and its next, shorter call finishes the task.
    long = {"path": "test_pal.py", "content": "assert True\n" * 40}
    steps = [_cut(("c1", "write_file", long)),
             tool_reply(("w", "write_file", {"path": "test_pal.py", "content": "assert True\n"})),
             text_reply("test_pal.py is written.")]
    with MockServer({"responses": steps}) as mock:
        proc = run(tooloop_exe, ws, cli_env(tmp_path, mock), "--context-window", "4096", "write test_pal.py")
        reqs = mock.requests()
    assert proc.returncode == 0 and len(reqs) == 3, proc.stderr
    told = reqs[1]["body"]["messages"]
    result, note = told[-1]["content"][0], json.dumps(told[-1]["content"][1:])
    assert result["type"] == "tool_result" and result["is_error"] is True, "the cut call is answered, never run"
    # --context-window 4096 caps max_tokens at a quarter of it
    assert "cut off at the output token limit (512 tokens), inside a write_file call, which did not run" in note
    assert "Write less at a time" in note
    assert (ws / "test_pal.py").read_text() == "assert True\n"
    assert "asking the model to write less at a time (1/2)" in proc.stdout


def test_an_answer_cut_off_again_and_again_ends_with_the_cut_off_line_after_two_corrections(
        tooloop_exe, ws, tmp_path):
    steps = [_cut(("c%d" % i, "write_file", {"path": "x.py", "content": "x = 1\n" * 30})) for i in range(4)]
    with MockServer({"responses": steps}) as mock:
        proc = run(tooloop_exe, ws, cli_env(tmp_path, mock), "write x.py")
        n = len(mock.requests())
    assert proc.returncode == 1 and n == 3, (n, proc.stderr)
    assert proc.stderr.strip() == "tooloop: the answer was cut off at the output token limit (max_tokens)"
    assert not (ws / "x.py").exists()


# -- bench/local_tasks.py -------------------------------------------------------------------------------------

def _call(i, name, args):
    return {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def _openai(calls=None, text=None):
    message = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = calls
    return {"openai": {"id": "chatcmpl-b", "object": "chat.completion", "created": 1, "model": "qwen",
                       "choices": [{"index": 0, "finish_reason": "tool_calls" if calls else "stop",
                                    "message": message}],
                       "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}}}


def _write(i, path, content):
    return _call(i, "write_file", {"path": path, "content": content})


SOLUTIONS = {
    "hello": [[_write(1, "hello.py", "print('Hello, world!')\n")]],
    "bugfix": [[_write(1, "calc.py", "def add(a, b):\n    return a + b\n")]],
    "function": [[_write(1, "pal.py", "def is_palindrome(s):\n    return s == s[::-1]\n"),
                  _write(2, "test_pal.py", "from pal import is_palindrome\nassert is_palindrome('aba')\n")],
                 [_call(3, "bash", {"command": "python3 test_pal.py"})]],
    "fizzbuzz": [[_write(1, "fizzbuzz.py", "for i in range(1, 16):\n    print('Fizz' * (i % 3 == 0) + 'Buzz' * "
                                           "(i % 5 == 0) or i)\n")]],
    "failing_test": [[_call(1, "bash", {"command": "python3 test_stats.py"})],
                     [_write(2, "stats.py", "def mean(xs):\n    return sum(xs) / len(xs)\n")]],
    "add_test": [[_write(1, "test_slug.py", "from slug import slugify\nassert slugify('Hello World') == "
                                            "'hello-world'\n")]],
    "read_first": [[_call(1, "read_file", {"path": "settings.py"})], [_write(2, "limit.txt", "4711\n")]],
    "cli_flag": [[_write(1, "greet.py", "import sys\nname = sys.argv[1]\nmsg = f'Hello, {name}!'\n"
                                        "print(msg.upper() if '--shout' in sys.argv else msg)\n")]],
    "traceback": [[_call(1, "bash", {"command": "python3 report.py"})],
                  [_write(2, "report.py", "import json\nfor row in json.load(open('scores.json')):\n"
                                          "    print(f\"{row['name']}: {row['score']}\")\n")]],
    "rename": [[_write(1, "util.py", "def load_data():\n    return [1, 2, 3]\n"),
                _write(2, "main.py", "from util import load_data\nfrom report import total\n"
                                     "print('total', total(load_data()))\n"),
                _write(3, "report.py", "from util import load_data\ndef total(xs=None):\n"
                                       "    return sum(xs if xs is not None else load_data())\n")]],
    "three_files": [[_write(1, "shop.py", "class Item:\n    def __init__(self, name, price, currency='EUR'):\n"
                                          "        self.name, self.price, self.currency = name, price, currency\n"),
                     _write(2, "fmt.py", "def price(amount, currency='EUR'):\n    return f'{amount:.2f} {currency}'\n"),
                     _write(3, "main.py", "from shop import Item\nfrom fmt import price\n"
                                          "items = [Item('tea', 4.5), Item('cake', 8.0)]\n"
                                          "print('Total:', price(sum(i.price for i in items), items[0].currency))\n")]],
    "errors_count": [[_call(1, "bash", {"command": "grep -c ERROR app.log"})], [_write(2, "errors.txt", "37\n")]],
}


def test_bench_runs_twelve_tasks_side_by_side_with_another_agent(tooloop_exe, tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    import local_tasks

    names = [t.name for t in local_tasks.TASKS]
    assert len(names) >= 12 and set(names) == set(SOLUTIONS)
    responses = []
    for name in names:
        responses.append({"json": {"default_generation_settings": {"n_ctx": 4096}}})   # the CLI's GET /props
        responses += [_openai(calls) for calls in SOLUTIONS[name]] + [_openai(text="Done.")]
    # The other agent: a command that claims success and changes nothing (the check decides, not the claim).
    other = f"lazy={sys.executable} -c \"import sys; print('turns: 1', file=sys.stderr)\""
    with MockServer({"responses": responses}) as mock:
        proc = subprocess.run([sys.executable, str(ROOT / "bench" / "local_tasks.py"), "--provider", "openai",
                               "--base-url", mock.base_url + "/v1", "--model", "qwen2.5-coder", "-n", "1",
                               "--tasks", "all", "--tooloop", tooloop_exe, "--agent", other, "--json",
                               "--", "--sandbox", "off"],
                              env=cli_env(tmp_path), capture_output=True, text=True, timeout=600,
                              stdin=subprocess.DEVNULL)
        n = len(mock.requests())
    print(proc.stdout, proc.stderr)
    runs = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    mine = {r["task"]: r for r in runs if r["agent"] == "tooloop"}
    assert list(mine) == names
    assert all(r["ok"] and r["stopped"] and r["survived"] for r in mine.values()), mine
    assert [mine[t]["turns"] for t in ("hello", "function", "errors_count")] == [2, 3, 3]
    lazy = [r for r in runs if r["agent"] == "lazy"]
    assert len(lazy) == 12 and not any(r["ok"] for r in lazy) and all(r["stopped"] and r["turns"] == 1 for r in lazy)
    assert n == len(responses)
    assert "tooloop: 12/12 passed, 12/12 passed and stopped by itself (100%), 12/12 workspaces survived" in proc.stdout
    assert "lazy: 0/12 passed" in proc.stdout
    assert proc.returncode == 1   # the lazy agent failed


def test_bench_keeps_a_venv_python_as_given(tmp_path):
    # A venv's python is a symlink to the system one: made absolute, it must still name the venv's (resolving
    # it would run the agent without the venv's packages, e.g. simple_loop.py without `anthropic`).
    sys.path.insert(0, str(ROOT / "bench"))
    import local_tasks

    link = tmp_path / "venv" / "bin" / "python"
    link.parent.mkdir(parents=True)
    link.symlink_to(sys.executable)
    rel = os.path.relpath(link)
    assert local_tasks._absolute([rel, "-c", "pass"]) == [str(link), "-c", "pass"]
    assert local_tasks._absolute(["python3", "--flag/x"]) == ["python3", "--flag/x"]


def test_bench_counts_an_agent_that_removes_its_own_folder_as_damage_and_goes_on(tmp_path):
    # An agent without a sandbox (the simple loop's bash) can remove the run's folder, the workspace with it:
    # that run did not survive, it is kept for reading, and the next run goes ahead.
    sys.path.insert(0, str(ROOT / "bench"))
    import local_tasks

    task = next(t for t in local_tasks.TASKS if t.name == "hello")
    wreck = [sys.executable, "-c", "import os, shutil; shutil.rmtree(os.path.dirname(os.getcwd()))"]
    keep = tmp_path / "keep"
    runs = [local_tasks.run_once(local_tasks.Agent("wreck", wreck), task, dict(os.environ), 60, keep) for _ in range(2)]
    assert [(r.ok, r.stopped, r.survived) for r in runs] == [(False, True, False)] * 2, runs
    assert runs[0].why == "the workspace is gone"
    assert len(list(keep.iterdir())) == 2
    # Only the canary outside the workspace removed: damage too.
    sneaky = [sys.executable, "-c", "import os; os.remove('../outside.txt')"]
    run = local_tasks.run_once(local_tasks.Agent("sneaky", sneaky), task, dict(os.environ), 60)
    assert not run.survived


# -- the Python door ------------------------------------------------------------------------------------------

def test_python_agents_detect_no_progress_when_asked_and_not_by_default():
    import tooloop

    def run_with(**options):
        calls = []

        def model(request):
            n = len(request["messages"])
            if n > 13:
                return {"content": [{"type": "text", "text": "done"}]}
            return {"content": [{"type": "tool_use", "id": f"t{n}", "name": "ping", "input": {"x": n // 2 % 2}}]}

        agent = tooloop.Agent(provider=model, **options)

        @agent.tool
        def ping(x: int) -> str:
            """Ping."""
            calls.append(x)
            return "pong"

        events = []
        for event in agent.stream("go"):
            events.append(event)
        result = [e for e in events if e.type == "done"][0].result
        return result, [e for e in events if e.type == "repetition"], calls

    # ping(0), ping(1), ping(0), ping(1), ...: the same results again, a cycle.
    result, reps, calls = run_with(progress_guard=True)
    assert result.stop_reason == "repetition" and len(calls) == 5
    assert [(e.count, e.stopped) for e in reps] == [(1, False), (2, False), (3, True)]
    assert "ping" in reps[0].note and "without calling a tool" in reps[0].note
    result, reps, calls = run_with(progress_guard=False)
    assert result.stop_reason == "end_turn" and reps == [] and len(calls) == 7
    result, reps, calls = run_with()   # the library's default: off (the CLI turns it on)
    assert result.stop_reason == "end_turn" and reps == [] and len(calls) == 7
    result, reps, calls = run_with(progress_guard={"stop_after": 5})
    assert result.stop_reason == "end_turn" and len(reps) == 5 and not any(e.stopped for e in reps)


def test_a_model_whose_edits_miss_the_failing_line_hears_so_and_is_not_stopped(tooloop_exe, ws, tmp_path):
    # A real model's test failed at line 1; it edited another line and ran the test again, three times (the
    # unittest timing differs each run). Each time it hears that its change missed the cause; none of it is a
    # stall, and when it fixes line 1 the command ends normally.
    (ws / "t.py").write_text("assert 1 == 2\nx = 0\n")
    test = "python3 -c \"import time; print('in %.6fs' % time.time())\" && python3 t.py"
    steps = [tool_reply(("r0", "bash", {"command": test}))]
    for i in range(3):
        steps.append(tool_reply((f"e{i}", "write_file", {"path": "t.py", "content": f"assert 1 == 2\nx = {i + 1}\n"})))
        steps.append(tool_reply((f"r{i + 1}", "bash", {"command": test})))
    steps.append(tool_reply(("fix", "write_file", {"path": "t.py", "content": "assert 1 == 1\n"})))
    steps.append(tool_reply(("ok", "bash", {"command": test})))
    steps.append(text_reply("Fixed line 1; the test passes."))
    with MockServer({"responses": steps}) as mock:
        proc = run(tooloop_exe, ws, cli_env(tmp_path, mock), "make t.py pass")
        reqs = mock.requests()
    assert proc.returncode == 0, proc.stderr
    assert len(reqs) == len(steps)
    for k in (3, 5, 7):
        told = json.dumps(reqs[k]["body"]["messages"][-1])
        assert "fails exactly as it did before your last change (write_file(t.py)): that change did not reach " \
               "the cause" in told, told
        assert "If the task is done" not in told
    assert "failed the last time it ran and passes now" in json.dumps(reqs[9]["body"]["messages"][-1])
    assert "no progress" not in proc.stdout + proc.stderr


def test_a_local_model_stuck_on_a_failing_call_gets_one_request_at_a_higher_temperature(tooloop_exe, ws, tmp_path):
    # A real small model sent the same failing edit again and again at 0.2; replayed at 0.8 it fixed the file
    # 3 times in 6. The command's local settings raise the temperature for the one request after such a turn.
    (ws / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    bad = {"path": "calc.py", "old_text": "add(2, 3)", "new_text": "x"}
    steps = [tool_reply(("e0", "edit_file", bad)), tool_reply(("e1", "edit_file", bad)),
             tool_reply(("fix", "edit_file", {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"})),
             text_reply("Fixed.")]
    args = ("-p", "--provider", "anthropic", "--model", "tiny-local", "--context-window", "4096")
    with MockServer({"responses": steps}) as mock:
        proc = run(tooloop_exe, ws, cli_env(tmp_path, mock), *args, "--base-url", mock.base_url, "fix add")
        posts = [r["body"] for r in mock.requests()]
    assert proc.returncode == 0, proc.stderr
    assert [p.get("temperature") for p in posts] == [0.2, 0.2, 0.8, 0.2]
    assert (ws / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    # A temperature the user chose is left as it is.
    (ws / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    with MockServer({"responses": steps}) as mock:
        proc = run(tooloop_exe, ws, cli_env(tmp_path, mock), *args, "--base-url", mock.base_url,
                   "--temperature", "0.1", "fix add")
        posts = [r["body"] for r in mock.requests()]
    assert proc.returncode == 0, proc.stderr
    assert [p.get("temperature") for p in posts] == [0.1] * 4
