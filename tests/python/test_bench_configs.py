"""bench/local_tasks.py for issue 41: tooloop in several configurations in one run (`--configs`: plain, check,
attempts=N), aider as a peer (`--aider`: its flags, its offline home, its token lines) and the summary the
issue's targets are read from (finish rate, wall seconds per finished task against a reference agent)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

from _support import ROOT, cli_env, text_reply, tool_reply
from mockctl import MockServer

sys.path.insert(0, str(ROOT / "bench"))
import local_tasks  # noqa: E402

BENCH = str(ROOT / "bench" / "local_tasks.py")

AIDER_OUTPUT = """Aider v0.86.2
Model: openai/qwen2.5-coder-q15 with whole edit format
Git repo: none
Repo-map: disabled
Added hello.py to the chat.

hello.py
```
print("Hello, world!")
```
Tokens: 1.2k sent, 45 received.
Applied edit to hello.py
Tokens: 12k sent, 1.1k cache hit, 210 received.
"""


def test_bench_reads_aiders_token_lines_with_their_k_suffixes() -> None:
    # A line per request: requests are the turns, the first line is the first request, "cache hit" the cached.
    assert local_tasks.aider_tokens(AIDER_OUTPUT) == (2, 1200, 13200, 1100)
    assert local_tasks.aider_tokens("Tokens: 667 sent, 30 received.\n") == (1, 667, 667, None)
    assert local_tasks.aider_tokens("Tokens: 2.5k sent, 1.0k cache write, 300 cache hit, 9 received.") == \
        (1, 2500, 2500, 300)
    assert local_tasks.aider_tokens("litellm.APIConnectionError: connection refused\n") == (None, None, None, None)


def test_bench_aider_base_url_is_the_openai_wire_of_the_same_server() -> None:
    assert local_tasks.aider_base_url("openai", "http://127.0.0.1:8091/v1") == "http://127.0.0.1:8091/v1"
    assert local_tasks.aider_base_url("anthropic", "http://127.0.0.1:8091/") == "http://127.0.0.1:8091/v1"


def test_bench_configs_name_their_rows_and_give_tooloop_the_check_the_task_implies(tmp_path: Path) -> None:
    agents = local_tasks.tooloop_agents(["tooloop", "--yes"], "plain, check,attempts=3")
    assert [a.name for a in agents] == ["tooloop", "tooloop+check", "tooloop+att3"]
    tasks = {t.name: t for t in local_tasks.TASKS}
    assert all(t.peer_files and set(t.files) <= set(t.peer_files) for t in tasks.values())
    ws, home = tmp_path / "ws", tmp_path / "home"
    plain, check, att = (a.argv(tasks["failing_test"], ws, home) for a in agents)
    assert plain == ["tooloop", "--yes", "--workspace", str(ws), tasks["failing_test"].prompt]
    assert check[2:4] == ["--check", "python3 test_stats.py"]
    assert att[2:8] == ["--check", "python3 test_stats.py", "--attempts", "3", "--output-format", "json"]
    # A check that names the file the task writes (read_first's limit.txt) is a script outside the workspace,
    # so that file stays writable.
    assert agents[1].argv(tasks["read_first"], ws, home)[2:4] == ["--check", f"sh {home / 'check.sh'}"]
    assert "limit.txt" in (home / "check.sh").read_text()
    assert agents[2].argv(tasks["errors_count"], ws, home)[2:6] == ["--check", f"sh {home / 'check.sh'}",
                                                                    "--attempts", "3"]
    [ab] = local_tasks.tooloop_agents(["tooloop"], "nodraft:--no-draft --temperature 0.3")
    assert ab.name == "tooloop-nodraft"
    assert ab.argv(tasks["hello"], ws, home)[:4] == ["tooloop", "--no-draft", "--temperature", "0.3"]
    for bad in ("attempts=0", "attempts=x", "best", "plain,plain", "x:", "a b:--no-draft"):
        try:
            local_tasks.tooloop_agents(["tooloop"], bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad!r} was taken")


def test_bench_summary_finishes_need_the_check_and_a_stop_and_time_is_held_against_the_reference() -> None:
    R = local_tasks.Run
    runs = [R("simple", "hello", True, True, "", 3, 10.0, True, sent_tokens=300, cached_tokens=100),
            R("simple", "hello", True, True, "", 3, 20.0, True, sent_tokens=300, cached_tokens=100),
            R("simple", "bugfix", True, True, "", 2, 5.0, True),
            R("simple", "function", False, True, "x", 2, 5.0, True),
            R("tooloop", "hello", True, True, "", 2, 30.0, True, sent_tokens=900, cached_tokens=600),
            R("tooloop", "hello", True, False, "limit", 9, 99.0, True, sent_tokens=900, cached_tokens=600),
            R("tooloop", "bugfix", True, True, "", 2, 5.0, True, sent_tokens=600, cached_tokens=0),
            R("tooloop", "function", True, True, "", 4, 40.0, True, sent_tokens=600, cached_tokens=0)]
    rows = {r.agent: r for r in local_tasks.summary(runs, "simple")}
    ours = rows["tooloop"]
    # The run that passed but did not stop by itself is not finished.
    assert (ours.finished, ours.runs, ours.rate) == (3, 4, 0.75)
    assert ours.median_seconds == 30.0 and ours.mean_sent == 750 and ours.mean_cached == 300
    # hello: 30 s against the mean of 10 and 20; bugfix: 5 against 5; function: the reference never finished.
    assert ours.ratios == [("hello", 2.0), ("bugfix", 1.0)] and ours.median_ratio == 1.5
    assert rows["simple"].ratios == [] and rows["simple"].rate == 0.75
    md = local_tasks.markdown(local_tasks.summary(runs, "simple"))
    assert md[0].startswith("| agent | finished | rate | median s per finished task | mean tokens sent | mean cached |")
    assert "| tooloop | 3/4 | 75% | 30.0 | 750 | 300 | 1.50x (hello 2.00, bugfix 1.00) |" in md
    assert "| simple | 3/4 | 75% | 10.0 | 300 | 100 | 1 (reference) |" in md
    assert all(r.median_ratio is None for r in local_tasks.summary(runs, None))


def _bench(mock: MockServer, tmp_path: Path, *args: str, timeout: int = 300) -> Any:
    proc = subprocess.run([sys.executable, BENCH, "--provider", "anthropic", "--base-url", mock.base_url, "--model",
                           "claude-sonnet-4-6", "-n", "1", "--json", *args],
                          env=cli_env(tmp_path), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    print(proc.stdout, proc.stderr)
    return proc


def _runs(proc: Any) -> Dict[str, Dict[str, Any]]:
    return {r["agent"]: r for r in (json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{"))}


def _usage(reply: Dict[str, Any], prompt: int, cached: int) -> Dict[str, Any]:
    reply["anthropic"]["usage"] = {"input_tokens": prompt - cached, "cache_read_input_tokens": cached,
                                   "output_tokens": 5}
    return reply


def test_bench_counts_every_attempt_of_an_attempts_run(tooloop_exe: str, tmp_path: Path) -> None:
    # Attempt 1 claims a fix twice and changes nothing (the check fails, then it gives up); attempt 2 claims,
    # hears the check fail, fixes calc.py and passes. Only the winner's session reaches TOOLOOP_HOME: the
    # turns and tokens are every attempt's, read from the run's JSON result.
    fix = tool_reply(("w", "write_file", {"path": "calc.py", "content": "def add(a, b):\n    return a + b\n"}))
    steps = [_usage(text_reply("Fixed."), 100, 0), _usage(text_reply("Fixed."), 200, 90),
             _usage(text_reply("Fixed."), 300, 180), _usage(fix, 400, 0), _usage(text_reply("Fixed."), 500, 380)]
    with MockServer({"responses": steps}) as mock:
        proc = _bench(mock, tmp_path, "--tasks", "bugfix", "--tooloop", tooloop_exe, "--configs", "attempts=2",
                      "--max-turns", "3", "--", "--sandbox", "off", "--context-window", "4096", "--no-draft")
        n = len([r for r in mock.requests() if r["path"].endswith("/messages")])
    run = _runs(proc)["tooloop+att2"]
    assert run["ok"] and run["stopped"], run
    assert n == len(steps)
    assert run["turns"] == n
    assert (run["sent_tokens"], run["cached_tokens"]) == (1500, 650)
    assert run["first_tokens"] == 300   # the winner's first request (each attempt's first is the same prompt)
    row = next(ln for ln in proc.stdout.splitlines() if ln.startswith("tooloop+att2 ") and "bugfix" in ln)
    assert row.split()[5:9] == ["5.0", row.split()[6], "300", "1500"]


def test_bench_check_config_gives_the_tasks_check_and_its_failure_reaches_the_model(
        tooloop_exe: str, tmp_path: Path) -> None:
    fix = tool_reply(("w", "write_file", {"path": "stats.py",
                                          "content": "def mean(xs):\n    return sum(xs) / len(xs)\n"}))
    with MockServer({"responses": [text_reply("Fixed."), fix, text_reply("Fixed.")]}) as mock:
        proc = _bench(mock, tmp_path, "--tasks", "failing_test", "--tooloop", tooloop_exe, "--configs", "check",
                      "--", "--sandbox", "off", "--context-window", "4096", "--no-draft")
        bodies = [r["body"] for r in mock.requests() if r["path"].endswith("/messages")]
    run = _runs(proc)["tooloop+check"]
    assert run["ok"] and run["stopped"] and run["turns"] == 3, run
    # The answer without a change met the check: its failing line went back to the model.
    assert "AssertionError" in json.dumps(bodies[1]["messages"][-1]) and "test_stats.py" in json.dumps(bodies[1])


FAKE_AIDER = """import json, os, sys
json.dump({"argv": sys.argv[1:], "cwd": os.getcwd(), "home": os.environ["HOME"],
           "key": os.environ.get("OPENAI_API_KEY"), "cost_map": os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP"),
           "cache": os.listdir(os.path.join(os.environ["HOME"], ".aider", "caches"))}, open(SEEN, "w"))
open("hello.py", "w").write("print('Hello, world!')\\n")
print("Tokens: 1.2k sent, 45 received.")
print("Tokens: 1.3k sent, 1.1k cache hit, 20 received.")
"""


def test_bench_runs_aider_offline_in_the_workspace_with_the_task_and_its_files(tmp_path: Path) -> None:
    seen = tmp_path / "seen.json"
    fake = tmp_path / "aider.py"
    fake.write_text(f"SEEN = {str(seen)!r}\n" + FAKE_AIDER)
    env = cli_env(tmp_path)
    env.pop("OPENAI_API_KEY", None)
    proc = subprocess.run([sys.executable, BENCH, "--provider", "anthropic", "--base-url", "http://127.0.0.1:9",
                           "--model", "qwen", "--no-tooloop", "--aider", f"{sys.executable} {fake}", "--tasks",
                           "hello", "-n", "1", "--json"],
                          env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    print(proc.stdout, proc.stderr)
    assert proc.returncode == 0
    run = _runs(proc)["aider"]
    assert (run["turns"], run["first_tokens"], run["sent_tokens"], run["cached_tokens"]) == (2, 1200, 2500, 1100)
    s = json.loads(seen.read_text())
    argv = s["argv"]
    assert argv[:4] == ["--model", "openai/qwen", "--openai-api-base", "http://127.0.0.1:9/v1"]
    for flag in ("--yes-always", "--no-git", "--no-check-update", "--no-analytics", "--no-show-model-warnings",
                 "--no-pretty", "--no-detect-urls"):
        assert flag in argv
    assert argv[argv.index("--edit-format") + 1] == "whole"
    assert argv[-3:] == ["--message", local_tasks.TASKS[0].prompt, "hello.py"]
    # aider runs in the workspace; what it writes of its own goes to the run's folder beside it, removed after
    # the run; it needs no key of the user's, and fetches no model list (a fresh cache, litellm's local map).
    home = Path(s["home"])
    assert Path(s["cwd"]).parent == home.parent and home != Path.home() and not home.parent.exists()
    assert all(argv[argv.index(f) + 1].startswith(str(home)) for f in ("--input-history-file", "--chat-history-file"))
    assert s["key"] and s["cost_map"] == "True" and s["cache"] == ["model_prices_and_context_window.json"]


FAKE_TOOLOOP = """import json, sys
with open(SEEN, "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
"""


def test_bench_both_wires_give_each_config_a_row_per_wire_of_one_server(tmp_path: Path) -> None:
    assert local_tasks.wire_base_url("openai", "http://127.0.0.1:8091") == "http://127.0.0.1:8091/v1"
    assert local_tasks.wire_base_url("anthropic", "http://127.0.0.1:8091/v1/") == "http://127.0.0.1:8091"
    seen = tmp_path / "seen.jsonl"
    fake = tmp_path / "tooloop.py"
    fake.write_text(f"SEEN = {str(seen)!r}\n" + FAKE_TOOLOOP)
    proc = subprocess.run([sys.executable, BENCH, "--provider", "both", "--base-url", "http://127.0.0.1:9/v1",
                           "--model", "qwen", "--tooloop", f"{sys.executable} {fake}", "--configs", "plain,attempts=2",
                           "--tasks", "hello", "-n", "1", "--json"],
                          env=cli_env(tmp_path), capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    print(proc.stdout, proc.stderr)
    assert list(_runs(proc)) == ["tooloop@openai", "tooloop+att2@openai", "tooloop@anthropic",
                                 "tooloop+att2@anthropic"]
    argvs = [json.loads(ln) for ln in seen.read_text().splitlines()]
    wires = [(a[a.index("--provider") + 1], a[a.index("--base-url") + 1], "--attempts" in a) for a in argvs]
    assert wires == [("openai", "http://127.0.0.1:9/v1", False), ("openai", "http://127.0.0.1:9/v1", True),
                     ("anthropic", "http://127.0.0.1:9", False), ("anthropic", "http://127.0.0.1:9", True)]


FAKE_HELLO = """import sys
with open(SEEN, "a") as f:
    f.write(sys.argv[-1][:6] + "\\n")
open("hello.py", "w").write("print('Hello, world!')\\n")
"""


def test_a_results_file_keeps_each_run_as_it_ends_and_a_second_start_runs_only_what_it_lacks(tmp_path: Path) -> None:
    seen = tmp_path / "seen.txt"
    fake = tmp_path / "agent.py"
    fake.write_text(f"SEEN = {str(seen)!r}\n" + FAKE_HELLO)
    results = tmp_path / "results.jsonl"
    earlier = local_tasks.Run("fake", "hello", False, True, "from an earlier session", 7, 123.0, True)
    # What a run cut short leaves: one run written, the start's line, and a line the machine stopped inside.
    results.write_text(json.dumps({"started": "2026-12-05T04:20:00", "argv": []}) + "\n"
                       + json.dumps(earlier.__dict__) + "\n" + '{"agent": "fake", "task": "hel')

    def bench() -> Any:
        proc = subprocess.run([sys.executable, BENCH, "--provider", "openai", "--model", "m", "--no-tooloop",
                               "--agent", f"fake={sys.executable} {fake}", "--tasks", "hello", "-n", "3",
                               "--results", str(results)],
                              env=cli_env(tmp_path), capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)
        print(proc.stdout, proc.stderr)
        return proc

    proc = bench()
    # The earlier run is not run again: the agent ran twice, for the second and third runs.
    assert seen.read_text().splitlines() == ["Create", "Create"]
    runs = local_tasks.load_results(results)
    assert [(r.agent, r.task, r.ok, r.turns) for r in runs] == [("fake", "hello", False, 7), ("fake", "hello", True, None),
                                                              ("fake", "hello", True, None)]
    # The table holds all three: the earlier failure among them.
    row = next(ln for ln in proc.stdout.splitlines() if ln.startswith("fake ") and "hello" in ln)
    assert row.split()[2] == "2/3" and "from an earlier session" in row
    assert "fake: 2/3 passed" in proc.stdout and proc.returncode == 1
    # A third start finds nothing to run, and reports the same.
    proc = bench()
    assert len(seen.read_text().splitlines()) == 2 and len(local_tasks.load_results(results)) == 3
    assert "fake: 2/3 passed" in proc.stdout
    starts = [json.loads(ln) for ln in results.read_text().splitlines() if ln.startswith('{"started"')]
    assert [s["already"] for s in starts[1:]] == [1, 3]


def test_every_implied_check_fails_on_the_task_as_given(tmp_path: Path) -> None:
    """A check that passes before the agent did anything vouches for nothing: each task's check command fails
    on its starting files (cli_flag's once passed there: `a; b && c; d` exits as `d` alone)."""
    import local_tasks

    for task in local_tasks.TASKS:
        if task.check_cmd is None:
            continue
        ws = tmp_path / task.name
        ws.mkdir()
        for rel, text in task.files.items():
            (ws / rel).write_text(text)
        proc = subprocess.run(["sh", "-c", task.check_cmd], cwd=ws, capture_output=True, text=True, timeout=60)
        assert proc.returncode != 0, f"{task.name}: `{task.check_cmd}` passes before any change: {proc.stdout}"


def test_the_checks_of_a_written_answer_hold_it_against_the_source_and_never_print_it(tmp_path: Path) -> None:
    """read_first and errors_count write an answer into a file: their implied check compares it with the source
    (settings.py, app.log), passes on the right one, and shows what the file holds, never what it should."""
    import local_tasks

    tasks = {t.name: t for t in local_tasks.TASKS}
    for name, out, right, wrong in [("read_first", "limit.txt", "4711\n", "1000\n"),
                                    ("errors_count", "errors.txt", "37", "36\n")]:
        task = tasks[name]
        assert task.check_cmd and task.check_outside
        for content, passes in [(right, True), (wrong, False)]:
            ws = tmp_path / f"{name}-{passes}"
            ws.mkdir()
            for rel, text in task.files.items():
                (ws / rel).write_text(text)
            (ws / out).write_text(content)
            proc = subprocess.run(["sh", "-c", task.check_cmd], cwd=ws, capture_output=True, text=True, timeout=60)
            assert (proc.returncode == 0) is passes, (name, content, proc.stdout, proc.stderr)
            assert (task.check(ws) is None) is passes, (name, content)
            if not passes:
                assert right.strip() not in proc.stdout + proc.stderr, proc.stdout


def test_a_check_of_printed_output_says_what_it_wanted(tmp_path: Path) -> None:
    """A check kept outside the workspace is `sh HOME/check.sh` to the agent: on a mismatch its output says
    what was printed and what was wanted, as an inline check's command would have shown."""
    import local_tasks

    task = {t.name: t for t in local_tasks.TASKS}["cli_flag"]
    (tmp_path / "greet.py").write_text("import sys\nprint(f'HELLO, {sys.argv[1]}!' if '--shout' in sys.argv "
                                       "else f'Hello, {sys.argv[1]}!')\n")
    proc = subprocess.run(["sh", "-c", task.check_cmd], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and proc.stdout == "HELLO, Ann!\nwanted: HELLO, ANN!\n", proc.stdout
    (tmp_path / "greet.py").write_text("import sys\nprint(f'HELLO, {sys.argv[1].upper()}!' if '--shout' in "
                                       "sys.argv else f'Hello, {sys.argv[1]}!')\n")
    proc = subprocess.run(["sh", "-c", task.check_cmd], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "wanted" not in proc.stdout, proc.stdout


def test_three_files_check_asks_for_all_three_changes_the_task_names(tmp_path: Path) -> None:
    """An attempt that only makes main.py print the right total (Item left without a currency) once passed the
    check and won; the check holds it to every change the task names, as the judge does."""
    import local_tasks

    task = {t.name: t for t in local_tasks.TASKS}["three_files"]
    for rel, text in task.files.items():
        (tmp_path / rel).write_text(text)
    (tmp_path / "fmt.py").write_text("def price(amount, currency='EUR'):\n    return f'{amount:.2f} {currency}'\n")
    (tmp_path / "main.py").write_text(task.files["main.py"].replace("i in items))", "i in items), 'EUR')"))
    proc = subprocess.run(["sh", "-c", task.check_cmd], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert "Total: 12.50 EUR" in proc.stdout and proc.returncode != 0, proc.stdout
    assert "unexpected keyword argument 'currency'" in proc.stderr
    assert task.check(tmp_path) is not None
