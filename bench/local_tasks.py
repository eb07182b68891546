#!/usr/bin/env python3
"""Small coding tasks for the `tooloop` CLI against any OpenAI- or Anthropic-compatible endpoint (a local
llama.cpp, Ollama or vLLM server, or a hosted API), side by side with other agents: how often does each finish
them, in how many model turns, how fast, sending how many prompt tokens?

Twelve tasks, easiest first: create and run, fix a one-line bug, a function with its test, fizzbuzz, fix a bug
from a failing test's output, add a test (that must fail when the code is broken), read before writing, add a
CLI flag, fix the cause of a traceback, rename a function across files, a change spanning three files, and a
log whose output alone outgrows a 4k-token context (compaction). Each run of a task starts in a fresh
temporary workspace; the bench then checks the result itself by running code in it (the task's `check`, the
judge of every row). For each task and run, every agent takes its turn, one after another (so a busy server
slows them alike):

- `tooloop`, once per configuration of `--configs` (default `plain`), each its own row: `plain` is
  `tooloop --yes -p TASK` (the CLI's settings for local models apply: the server's context window, low
  temperature, max_tokens fitted to the context, the compact prompt and tool set); `check` (row
  `tooloop+check`) adds `--check CMD`, the check the task implies (`Task.check_cmd`: `python3 test_stats.py`,
  `python3 main.py`, ...; for read_first and errors_count a comparison with the source, as a user would
  write it, that prints what the file holds and never the answer); `attempts=N` (row `tooloop+attN`) adds
  `--attempts N` and, where the task has one, `--check CMD`. Its turns and tokens are every attempt's together
  (the run's JSON result; each attempt's session is kept in a folder beside the start's), its first request
  the winner's. `--check` makes the workspace files its command runs or names read-only to the agent, so
  where the implied check runs or names the very file the task changes (cli_flag's `python3 greet.py ...`,
  traceback's `python3 report.py`, rename's and three_files' `python3 main.py`, read_first's limit.txt,
  errors_count's errors.txt: `Task.check_outside`) tooloop gets it as a script outside the workspace (`sh
  HOME/check.sh`), as a user keeps a test that must not be edited.
  `--provider both` runs each configuration on both wires of one server (llama.cpp serves them on one port;
  --base-url its root or its /v1): rows `tooloop@openai`, `tooloop+att3@anthropic`, ...
- `aider` with `--aider CMD` (e.g. /tmp/venv-aider/bin/aider, from `pip install aider-chat`): `CMD --model
  openai/MODEL --openai-api-base URL --yes-always --no-git --edit-format whole --message TASK FILES...` in the
  workspace, FILES the task's files and the ones it says to create (`Task.peer_files`), URL --base-url for
  `--provider openai`, else --base-url + /v1. Kept offline and from asking (no update check, analytics,
  release notes, model warnings or URL fetching; plain output; a fresh model-info cache and litellm's local
  model map), OPENAI_API_KEY a dummy unless set, HOME and its histories in the run's folder. Its turns are its
  requests, its tokens the server's usage from its `Tokens: N sent, ...` lines (cached: unknown against
  llama.cpp, whose OpenAI wire says them in a field aider does not read).
- any other command with `--agent NAME=COMMAND`: the task as its last argument, the workspace as its folder;
  exit code 0 means it stopped by itself; stderr lines `turns: N` and `tokens: first N, sent N, cached N` give
  its turns and tokens. bench/simple_loop.py is the yardstick: the simplest loop on the official `anthropic`
  package (two tools, a three-sentence prompt). It speaks the Anthropic wire: give it the server's root,
  whatever --provider is.

The table: per agent and task, how often the check held, how often the agent stopped by itself (exit code 0),
both, turns, seconds, the prompt tokens sent (first request, whole task) and how many of them the server took
from its prompt cache (the server's own counts: tooloop's from its sessions' usage), and whether the workspace
survived (canary files inside and beside it intact, no process left behind). Then the summary issue 41's
targets are read from, per agent: finished (the check held AND the agent stopped by itself) over all its runs,
the finish rate, the median seconds of its finished runs, mean tokens sent and cached, and the ratio of wall
seconds per finished task against a reference agent (`--reference NAME`, default `simple` when there is one):
on each task both finished at least once, the mean seconds of this agent's finished runs over the mean of
the reference's; the median of those ratios and the list. `--markdown` prints the summary as a Markdown table
too (for the README and the closing note). bench/prompt_tokens.py splits the requests into system prompt,
tools and conversation.

    python3 bench/local_tasks.py --provider openai --base-url http://localhost:8080/v1 --model qwen2.5-coder -n 5
    python3 bench/local_tasks.py --model claude-haiku-4-5 -n 3 --tasks hello,bugfix
    python3 bench/local_tasks.py ... -- --prompt compact --context-window 8192   # extra tooloop flags

The whole comparison of issue 41 (the local server of /work/shared/local-llm: both wires on port 8091), in
one run:

    python3 bench/local_tasks.py --provider both --base-url http://127.0.0.1:8091 --model qwen2.5-coder-q15 \
        --tasks all -n 3 --configs plain,check,attempts=3 --aider /tmp/venv-aider/bin/aider \
        --agent "simple=/tmp/venv-simple/bin/python bench/simple_loop.py --base-url http://127.0.0.1:8091 \
        --model qwen2.5-coder-q15" --markdown --keep /tmp/keep-41

(one wire: `--provider openai --base-url http://127.0.0.1:8091/v1`; the venvs: `python3 -m venv
/tmp/venv-simple && /tmp/venv-simple/bin/pip install anthropic`, the same with aider-chat.)

Keys come from the environment as for the CLI (OPENAI_API_KEY / ANTHROPIC_API_KEY); a local server needs
none. Exit code 0 when every run of every task passed with its workspace intact, 1 otherwise. Standard
library only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union


def _py(ws: Path, *args: str) -> Tuple[int, str]:
    proc = subprocess.run([sys.executable, *args], cwd=ws, capture_output=True, text=True, timeout=30,
                          stdin=subprocess.DEVNULL)
    return proc.returncode, proc.stdout + proc.stderr


def _run_ok(ws: Path, *args: str, want: str = "") -> Optional[str]:
    """None when `python3 ARGS` exits 0 (and prints `want`), else what went wrong."""
    code, out = _py(ws, *args)
    if code == 0 and want in out:
        return None
    return f"`python3 {' '.join(args)}` gave {code}: {out.strip()[-120:]!r}"


def check_hello(ws: Path) -> Optional[str]:
    if not (ws / "hello.py").is_file():
        return "hello.py was not created"
    code, out = _py(ws, "hello.py")
    return None if code == 0 and "Hello, world!" in out else f"hello.py printed {out.strip()[:80]!r}"


def check_bugfix(ws: Path) -> Optional[str]:
    code, out = _py(ws, "-c", "import calc; assert calc.add(2, 3) == 5 and calc.add(-1, 1) == 0")
    return None if code == 0 else f"calc.add is still wrong: {out.strip()[-120:]}"


def check_function(ws: Path) -> Optional[str]:
    code, out = _py(ws, "-c", "from pal import is_palindrome as p\n"
                    "assert p('racecar') and p('') and not p('ab') and p('abba')")
    if code != 0:
        return f"is_palindrome is missing or wrong: {out.strip()[-120:]}"
    if not (ws / "test_pal.py").is_file():
        return "test_pal.py was not written"
    code, out = _py(ws, "test_pal.py")
    return None if code == 0 else f"test_pal.py fails: {out.strip()[-120:]}"


def check_fizzbuzz(ws: Path) -> Optional[str]:
    code, out = _py(ws, "fizzbuzz.py")
    want = ["1", "2", "Fizz", "4", "Buzz", "Fizz", "7", "8", "Fizz", "Buzz", "11", "Fizz", "13", "14", "FizzBuzz"]
    got = out.split()
    return None if code == 0 and got == want else f"fizzbuzz.py printed {' '.join(got)[:80]!r}"


def check_failing_test(ws: Path) -> Optional[str]:
    return _run_ok(ws, "test_stats.py") or _run_ok(ws, "-c", "import stats; assert stats.mean([1, 2, 3, 6]) == 3")


def check_add_test(ws: Path) -> Optional[str]:
    if not (ws / "test_slug.py").is_file():
        return "test_slug.py was not written"
    why = _run_ok(ws, "test_slug.py")
    if why:
        return why
    # A test worth having fails when the function is broken.
    real = (ws / "slug.py").read_text()
    try:
        (ws / "slug.py").write_text("def slugify(text):\n    return text\n")
        code, _ = _py(ws, "test_slug.py")
    finally:
        (ws / "slug.py").write_text(real)
    return None if code != 0 else "test_slug.py still passes when slugify is broken: it tests nothing"


def check_rename(ws: Path) -> Optional[str]:
    left = [p.name for p in ws.glob("*.py") if "get_data" in p.read_text()]
    if left:
        return f"get_data is still used in {', '.join(sorted(left))}"
    return _run_ok(ws, "main.py", want="total 6") or _run_ok(ws, "-c", "from util import load_data; load_data()")


def check_traceback(ws: Path) -> Optional[str]:
    return _run_ok(ws, "report.py", want="alice: 3")


def check_three_files(ws: Path) -> Optional[str]:
    return (_run_ok(ws, "main.py", want="Total: 12.50 EUR")
            or _run_ok(ws, "-c", "from shop import Item; Item('x', 1.0, currency='USD')")
            or _run_ok(ws, "-c", "from fmt import price; assert price(2, 'USD') == '2.00 USD'"))


def check_read_first(ws: Path) -> Optional[str]:
    path = ws / "limit.txt"
    if not path.is_file():
        return "limit.txt was not written"
    return None if path.read_text().strip() == "4711" else f"limit.txt holds {path.read_text().strip()[:40]!r}"


def check_cli_flag(ws: Path) -> Optional[str]:
    return (_run_ok(ws, "greet.py", "Ann", "--shout", want="HELLO, ANN!")
            or _run_ok(ws, "greet.py", "Ann", want="Hello, Ann!"))


def check_errors_count(ws: Path) -> Optional[str]:
    path = ws / "errors.txt"
    if not path.is_file():
        return "errors.txt was not written"
    return None if path.read_text().strip() == "37" else f"errors.txt holds {path.read_text().strip()[:40]!r}"


def _log_lines() -> str:
    """A log of 1500 lines, 37 of them errors: its output alone is more than a 4k-token context."""
    lines = []
    for i in range(1500):
        level = "ERROR" if i % 40 == 7 and len([x for x in lines if "ERROR" in x]) < 37 else "INFO"
        lines.append(f"2026-01-01 12:{i // 60 % 60:02d}:{i % 60:02d} {level} worker-{i % 7} handled request {i}")
    return "\n".join(lines) + "\n"


def _file_is(path: str, compare: str) -> str:
    """A check command: the file `path` (blanks aside) is what `compare` says of `$got`, its content. It prints
    what the file holds, never what it should hold: the answer stays the agent's to find."""
    return f"(got=$(tr -d '[:space:]' < {path}); echo \"{path} holds: $got\"; {compare})"


def _prints(command: str, want: str) -> str:
    """A check command: `command` prints exactly `want`. Its output, which the agent is shown when it fails,
    has what the command printed, its errors and, on a mismatch, what was wanted, as a test's assertion
    message says it; a check kept outside the workspace (`Task.check_outside`) would say it nowhere else."""
    return f"(out=$({command}); echo \"$out\"; test \"$out\" = '{want}' || {{ echo 'wanted: {want}'; false; }})"


@dataclass
class Task:
    name: str
    prompt: str
    files: Dict[str, str]
    check: Callable[[Path], Optional[str]]   # the judge: None when the task is done, else what is wrong
    level: str = "easy"
    #: The check the task implies, as a user would give it (`tooloop --check`): a shell command run in the
    #: workspace, exit 0 = done. It never prints the answer (the agent sees its output). Never the judge.
    check_cmd: Optional[str] = None
    #: The check runs or names the file the task changes: tooloop gets it as a script outside the workspace
    #: (Agent.argv).
    check_outside: bool = False
    #: The files a peer that is told its files (aider) gets: the task's files and the ones it says to create.
    peer_files: List[str] = field(default_factory=list)


STATS = "def mean(xs):\n    return sum(xs) / (len(xs) + 1)\n"
TEST_STATS = "from stats import mean\n\nassert mean([2, 4]) == 3, mean([2, 4])\nprint('ok')\n"
UTIL = "def get_data():\n    return [1, 2, 3]\n"
MAIN_RENAME = "from util import get_data\nfrom report import total\n\nprint('total', total(get_data()))\n"
REPORT_RENAME = "from util import get_data\n\n\ndef total(xs=None):\n    return sum(xs if xs is not None else get_data())\n"
REPORT_TB = ("import json\n\ndata = json.load(open('scores.json'))\nfor row in data:\n"
             "    print(f\"{row['user']}: {row['score']}\")\n")
SCORES = '[{"name": "alice", "score": 3}, {"name": "bob", "score": 5}]\n'
SHOP = ("class Item:\n    def __init__(self, name, price):\n        self.name = name\n        self.price = price\n")
FMT = "def price(amount):\n    return f'{amount:.2f}'\n"
MAIN_SHOP = ("from shop import Item\nfrom fmt import price\n\nitems = [Item('tea', 4.5), Item('cake', 8.0)]\n"
             "print('Total:', price(sum(i.price for i in items)))\n")
GREET = ("import sys\n\nname = sys.argv[1]\nprint(f'Hello, {name}!')\n")

TASKS = [
    Task("hello", "Create hello.py that prints exactly Hello, world! and run it to check.", {}, check_hello,
         check_cmd=_prints("python3 hello.py", "Hello, world!"), peer_files=["hello.py"]),
    Task("bugfix", "calc.py has a bug: add(2, 3) returns -1 instead of 5. Fix it.",
         {"calc.py": "def add(a, b):\n    return a - b\n"}, check_bugfix,
         check_cmd='python3 -c "import calc; assert calc.add(2, 3) == 5"', peer_files=["calc.py"]),
    Task("function", "Write a function is_palindrome(s) in pal.py, and a test for it in test_pal.py that "
         "runs with `python3 test_pal.py` (plain asserts). Run the test.", {}, check_function,
         check_cmd="python3 test_pal.py", peer_files=["pal.py", "test_pal.py"]),
    Task("fizzbuzz", "Write fizzbuzz.py that prints the numbers 1 to 15, one per line, with Fizz for multiples of "
         "3, Buzz for multiples of 5 and FizzBuzz for both. Run it.", {}, check_fizzbuzz, "easy+",
         check_cmd=_prints("python3 fizzbuzz.py | tr '\\n' ' '", "1 2 Fizz 4 Buzz Fizz 7 8 Fizz Buzz 11 Fizz 13 14 FizzBuzz "), peer_files=["fizzbuzz.py"]),
    Task("failing_test", "`python3 test_stats.py` fails. Run it, find the bug in stats.py and fix it.",
         {"stats.py": STATS, "test_stats.py": TEST_STATS}, check_failing_test, "medium",
         check_cmd="python3 test_stats.py", peer_files=["stats.py", "test_stats.py"]),
    Task("add_test", "slug.py has a function slugify. Add a test file test_slug.py (plain asserts, runs with "
         "`python3 test_slug.py`) that checks what slugify does, and run it.",
         {"slug.py": "def slugify(text):\n    return '-'.join(text.lower().split())\n"}, check_add_test, "medium",
         check_cmd="python3 test_slug.py", peer_files=["slug.py", "test_slug.py"]),
    Task("read_first", "settings.py defines a constant LIMIT. Write its value (just the number) into limit.txt.",
         {"settings.py": "# limits\nNAME = 'svc'\nLIMIT = 4711\nTIMEOUT = 30\n"}, check_read_first, "medium",
         check_cmd=_file_is("limit.txt", 'test -n "$got" && grep -qxF "LIMIT = $got" settings.py'), check_outside=True,
         peer_files=["settings.py", "limit.txt"]),
    Task("cli_flag", "Add a --shout flag to greet.py: `python3 greet.py Ann --shout` prints HELLO, ANN! and "
         "without the flag it still prints Hello, Ann!.", {"greet.py": GREET}, check_cli_flag, "medium",
         check_cmd=_prints("python3 greet.py Ann --shout", "HELLO, ANN!") + " && " + _prints("python3 greet.py Ann", "Hello, Ann!"), check_outside=True, peer_files=["greet.py"]),
    Task("traceback", "`python3 report.py` crashes. Run it, read the traceback and fix the cause in report.py "
         "(scores.json is right).", {"report.py": REPORT_TB, "scores.json": SCORES}, check_traceback, "medium+",
         check_cmd=_prints("python3 report.py | head -1", "alice: 3"), check_outside=True, peer_files=["report.py", "scores.json"]),
    Task("rename", "Rename the function get_data to load_data everywhere (util.py, main.py, report.py), then "
         "run main.py to check.", {"util.py": UTIL, "main.py": MAIN_RENAME, "report.py": REPORT_RENAME},
         check_rename, "hard", check_cmd=_prints("python3 main.py", "total 6") + " && ! grep -n get_data *.py", check_outside=True, peer_files=["util.py", "main.py", "report.py"]),
    Task("three_files", "Add a currency to prices: Item in shop.py gets a currency argument (default 'EUR'), "
         "price(amount, currency) in fmt.py returns e.g. '12.50 EUR', and main.py passes the currency so it "
         "prints Total: 12.50 EUR. Run main.py.", {"shop.py": SHOP, "fmt.py": FMT, "main.py": MAIN_SHOP},
         check_three_files, "hard", check_cmd=_prints("python3 main.py", "Total: 12.50 EUR") + " && python3 -c \"from shop "
         "import Item; from fmt import price; Item('x', 1.0, currency='USD'); assert price(2, 'USD') == '2.00 USD'\"",
         check_outside=True, peer_files=["shop.py", "fmt.py", "main.py"]),
    Task("errors_count", "app.log is a long log. Count the lines that contain ERROR and write just that number "
         "into errors.txt.", {"app.log": _log_lines()}, check_errors_count, "hard",
         check_cmd=_file_is("errors.txt", 'test "$got" = "$(grep -c ERROR app.log)"'), check_outside=True,
         peer_files=["app.log", "errors.txt"]),
]

#: The three tasks the issue's targets are about.
EASY = ("hello", "bugfix", "function")


@dataclass
class Run:
    agent: str
    task: str
    ok: bool            # the check in the workspace holds
    stopped: bool       # the agent ended by itself (exit code 0), not by a limit, a guard or an error
    why: str
    turns: Optional[int]
    seconds: float
    survived: bool      # the workspace and the files around it are intact, no process was left behind
    first_tokens: Optional[int] = None   # prompt tokens of the first request, as the server counted them
    sent_tokens: Optional[int] = None    # prompt tokens of all the task's requests
    cached_tokens: Optional[int] = None  # of those, how many the server took from its prompt cache


def load_results(path: Path) -> List[Run]:
    """The runs a `--results` file holds, in the order they ran (its other lines, one per start, are skipped;
    so is a line cut short when the machine stopped mid-write)."""
    if not path.exists():
        return []
    fields = set(Run.__dataclass_fields__)
    runs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and {"agent", "task", "ok"} <= rec.keys():
            runs.append(Run(**{k: v for k, v in rec.items() if k in fields}))
    return runs


def assistant_entries(home: Path) -> List[Dict[str, Any]]:
    """The model turns the sessions recorded, in order, each once: a later line with an entry's id is that
    entry changed (a turn the core left out as an error entry after it was written), and replaces it."""
    turns: List[Dict[str, Any]] = []
    for path in sorted(home.glob("sessions/*/*.jsonl")):
        by_id: Dict[str, Dict[str, Any]] = {}
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            entry = rec.get("entry") if isinstance(rec, dict) else None
            if isinstance(entry, dict) and entry.get("role") == "assistant":
                by_id[str(entry.get("id", len(by_id)))] = entry
        turns += by_id.values()
    return turns


def count_turns(home: Path) -> int:
    return len(assistant_entries(home))


def count_tokens(home: Path) -> Tuple[Optional[int], Optional[int], Optional[int]]:
    """(first request, all requests, cached) prompt tokens from the usage the sessions recorded: the server's
    own counts (llama.cpp: `prompt_tokens` and `prompt_tokens_details.cached_tokens` on the OpenAI wire,
    `input_tokens` and `cache_read_input_tokens` on the Anthropic wire, both read into the same usage)."""
    prompts: List[int] = []
    cached = 0
    for entry in assistant_entries(home):
        usage = entry.get("usage")
        if isinstance(usage, dict):
            read = int(usage.get("cache_read_input_tokens") or 0)
            prompts.append(int(usage.get("input_tokens") or 0) + int(usage.get("cache_creation_input_tokens") or 0)
                           + read)
            cached += read
    if not prompts:
        return None, None, None
    return prompts[0], sum(prompts), cached


def attempts_tokens(stdout: str) -> Optional[Tuple[int, int, int]]:
    """(turns, prompt tokens sent, cached) of every attempt together, from the JSON result `tooloop
    --attempts N --output-format json` prints; None when there is none. An attempts run keeps each attempt's
    session in a folder beside the start's (`<session>.attempts/`), and the winner's is also the start's own, so
    the start's sessions alone would count the winner and miss the losers (and count nothing when none won)."""
    for line in reversed(stdout.splitlines()):
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if not isinstance(rec, dict) or rec.get("type") != "result" or not isinstance(rec.get("attempts"), list):
            continue
        turns = sent = cached = 0
        for a in rec["attempts"]:
            u = a.get("usage") or {}
            read = int(u.get("cache_read_input_tokens") or 0)
            turns += int(a.get("turns") or 0)
            sent += int(u.get("input_tokens") or 0) + int(u.get("cache_creation_input_tokens") or 0) + read
            cached += read
        return turns, sent, cached
    return None


#: aider's line after each request (`--no-pretty`): "Tokens: 2.3k sent, 1.1k cache hit, 210 received." The
#: figures are the server's usage of that request (aider adds nothing up across requests); 1000 and more are
#: written with a k (one decimal under 10k, none above): each is good to 50 tokens (500 above 10k).
_AIDER_TOKENS = re.compile(r"^Tokens: ([\d.]+k?) sent(?:, ([\d.]+k?) cache write)?(?:, ([\d.]+k?) cache hit)?, "
                           r"([\d.]+k?) received", re.M)


def _kilo(text: Optional[str]) -> int:
    if not text:
        return 0
    return int(round(float(text[:-1]) * 1000)) if text.endswith("k") else int(float(text))


def aider_tokens(output: str) -> Tuple[Optional[int], Optional[int], Optional[int], Optional[int]]:
    """(requests, first request's prompt tokens, all sent, cached) from aider's output: a `Tokens:` line per
    request. All None when there is no such line (aider sent nothing, or failed before it could say); cached
    None when no line says "cache hit": aider reads a cache hit only from `prompt_cache_hit_tokens` or
    `cache_read_input_tokens`, and llama.cpp's OpenAI wire says `prompt_tokens_details.cached_tokens`, so
    against llama.cpp aider's cached tokens are unknown, not 0."""
    lines = _AIDER_TOKENS.findall(output)
    if not lines:
        return None, None, None, None
    sent = [_kilo(s) for s, _, _, _ in lines]
    hits = [_kilo(hit) for _, _, hit, _ in lines if hit]
    return len(lines), sent[0], sum(sent), sum(hits) if hits else None


#: What keeps aider off the network and from asking anything: no update check, no analytics, no release
#: notes, no warnings about an unknown model (a question), no fetching of URLs in the task, plain output
#: (the token lines are then plain text) and one answer per request (the server's usage, not aider's own
#: count). Its histories go to the run's folder, not the workspace.
AIDER_QUIET = ["--yes-always", "--no-git", "--edit-format", "whole", "--no-check-update", "--no-analytics",
               "--no-show-release-notes", "--no-show-model-warnings", "--no-detect-urls", "--no-pretty",
               "--no-stream", "--no-fancy-input"]


@dataclass
class Agent:
    """One row of agents in the table: `name`, the command, and how it is run. `kind` "tooloop" gets the
    task with `--workspace` and, as configured, `--check CMD` (`check`, where the task has a check) and
    `--attempts N` (`attempts`, with `--output-format json` so every attempt's turns and tokens are read from
    its result); "aider" gets aider's flags, the task as `--message` and the task's files; "command" gets the
    task as its last argument."""
    name: str
    cmd: List[str]
    kind: str = "command"
    check: bool = False
    attempts: Optional[int] = None

    def argv(self, task: Task, ws: Path, home: Path) -> List[str]:
        if self.kind == "tooloop":
            check = task.check_cmd
            if check and task.check_outside:
                # A check that runs the very file the task changes (`python3 report.py`) would make that file
                # read-only under --check: like a user's own test script, it is kept outside the workspace.
                home.mkdir(parents=True, exist_ok=True)
                (home / "check.sh").write_text(check + "\n")
                check = f"sh {home / 'check.sh'}"
            flags = ["--check", check] if self.check and check else []
            if self.attempts:
                flags += ["--attempts", str(self.attempts), "--output-format", "json"]
            return self.cmd + flags + ["--workspace", str(ws), task.prompt]
        if self.kind == "aider":
            return self.cmd + ["--input-history-file", str(home / "aider.input.history"), "--chat-history-file",
                               str(home / "aider.chat.history.md"), "--message", task.prompt, *task.peer_files]
        return self.cmd + [task.prompt]

    def environ(self, env: Dict[str, str], home: Path) -> Dict[str, str]:
        if self.kind != "aider":
            return dict(env, TOOLOOP_HOME=str(home))
        # aider writes its settings, caches and analytics id under HOME: the run's folder. Its model list
        # would come from GitHub once a day (and litellm's from the network at import): a cache that is
        # fresh, and holds nothing about this model, is what aider has offline, without asking.
        caches = home / ".aider" / "caches"
        caches.mkdir(parents=True, exist_ok=True)
        (caches / "model_prices_and_context_window.json").write_text('{"local-bench": {}}\n')
        return dict(env, HOME=str(home), OPENAI_API_KEY=env.get("OPENAI_API_KEY") or "sk-local",
                    LITELLM_LOCAL_MODEL_COST_MAP="True")


def tooloop_agents(base: List[str], configs: str) -> List[Agent]:
    """The tooloop rows `--configs` asks for: `plain` (tooloop), `check` (tooloop+check), `attempts=N`
    (tooloop+attN: --attempts N, and --check where the task has one), `NAME:FLAGS` (tooloop-NAME: the plain run
    with FLAGS added, e.g. `nodraft:--no-draft`)."""
    agents = []
    for item in [c.strip() for c in configs.split(",") if c.strip()]:
        if item == "plain":
            agents.append(Agent("tooloop", base, "tooloop"))
        elif item == "check":
            agents.append(Agent("tooloop+check", base, "tooloop", check=True))
        elif item.startswith("attempts=") and item[9:].isdigit() and int(item[9:]) > 0:
            n = int(item[9:])
            agents.append(Agent(f"tooloop+att{n}", base, "tooloop", check=True, attempts=n))
        elif ":" in item and item.split(":", 1)[0].isidentifier() and item.split(":", 1)[1].strip():
            # NAME:FLAGS, the plain run with more flags (an A/B of one option in the same run).
            name, flags = item.split(":", 1)
            agents.append(Agent(f"tooloop-{name}", base + flags.split(), "tooloop"))
        else:
            raise ValueError(f"unknown config {item!r}: plain, check, attempts=N or NAME:FLAGS")
    if len({a.name for a in agents}) != len(agents):
        raise ValueError(f"a config is named twice in {configs!r}")
    return agents


_TURNS = re.compile(r"^turns: (\d+)", re.M)
#: What another agent may print on stderr about its prompt tokens (bench/simple_loop.py does).
_TOKENS = re.compile(r"^tokens: first (\d+), sent (\d+), cached (\d+)", re.M)
CANARY = "do not touch\n"


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def run_once(spec: Agent, task: Task, env: Dict[str, str], timeout: float, keep: Optional[Path] = None) -> Run:
    """One task in a fresh workspace, the agent's folder. With `keep`, a run that did not finish (its folder:
    workspace, sessions or aider's histories, the agent's stdout and stderr) is copied there for reading."""
    agent = spec.name
    root = Path(tempfile.mkdtemp(prefix=f"tooloop-bench-{task.name}-"))
    try:
        ws, home = root / "ws", root / "home"
        ws.mkdir()
        for rel, text in task.files.items():
            (ws / rel).write_text(text)
        (ws / ".bench-canary").write_text(CANARY)
        (root / "outside.txt").write_text(CANARY)
        home.mkdir()
        argv = spec.argv(task, ws, home)
        child_env = spec.environ(env, home)
        start = time.monotonic()
        proc = subprocess.Popen(argv, cwd=ws, env=child_env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
            failed = None if proc.returncode == 0 else (err.strip().splitlines() or ["?"])[-1]
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            failed = f"timed out after {timeout:.0f}s"
        except BaseException:   # Ctrl+C or a kill of the benchmark: the agent is in a session of its own, so
            # it would run on
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        seconds = time.monotonic() - start
        left = _alive(proc.pid)
        if left:   # what the agent started and left running: end it, and count it against the agent
            os.killpg(proc.pid, signal.SIGKILL)
        why = task.check(ws) if ws.is_dir() else "the workspace is gone"
        if why is not None and failed:
            why = f"{why} ({agent}: {failed})"
        elif why is None and failed:
            why = f"check holds, but {agent} did not stop by itself: {failed}"
        survived = not left and _holds(root / "outside.txt") and _holds(ws / ".bench-canary")
        turns: Optional[int]
        tokens: Tuple[Optional[int], Optional[int], Optional[int]]
        if spec.kind == "tooloop":
            turns = count_turns(home)
            tokens = count_tokens(home)
            every = attempts_tokens(out or "") if spec.attempts else None
            if every is not None:   # the first request: the winner's session (each attempt sends the same)
                turns, tokens = every[0], (tokens[0], every[1], every[2])
        elif spec.kind == "aider":
            turns, first, sent, cached = aider_tokens((out or "") + "\n" + (err or ""))
            tokens = (first, sent, cached)
        else:
            m = _TURNS.search(err or "")
            turns = int(m.group(1)) if m else None
            said = _TOKENS.findall(err or "")   # a line per request: the last one counts the whole task
            tokens = (int(said[-1][0]), int(said[-1][1]), int(said[-1][2])) if said else (None, None, None)
        run = Run(agent, task.name, why is None or why.startswith("check holds"), failed is None, why or "", turns,
                  seconds, survived, *tokens)
        if keep is not None and not (run.ok and run.stopped):
            root.mkdir(parents=True, exist_ok=True)   # an agent may have removed it (then it did not survive)
            keep.mkdir(parents=True, exist_ok=True)
            (root / "stdout.txt").write_text(out or "")
            (root / "stderr.txt").write_text(err or "")
            shutil.copytree(root, Path(tempfile.mkdtemp(prefix=f"{agent}-{task.name}-", dir=keep)), symlinks=True,
                            dirs_exist_ok=True)
        return run
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _holds(canary: Path) -> bool:
    """Whether a canary file is still there, a regular file, with its text (an agent may have removed it, its
    folder, or put something else in its place)."""
    try:
        return canary.is_file() and not canary.is_symlink() and canary.read_text() == CANARY
    except OSError:
        return False


def _mean(xs: List[float]) -> str:
    return f"{statistics.mean(xs):.1f}" if xs else "-"


def _mean_int(xs: List[Optional[int]]) -> str:
    known = [x for x in xs if x is not None]
    return f"{statistics.mean(known):.0f}" if known else "-"


def report(runs: List[Run], reference: Optional[str] = None) -> List[str]:
    """The table: per agent and task, how often it passed and stopped, mean turns and seconds, and the mean
    prompt tokens it sent (`1st tok`: its first request; `sent tok`: all of the task's requests; `cached`: of
    those, the ones the server read from its prompt cache); then a line per agent, and the summary
    (`summary`)."""
    width = max([10] + [len(r.agent) for r in runs])
    lines = [f"{'agent':<{width}} {'task':<13} {'passed':>7} {'stopped':>8} {'both':>6} {'turns':>6} {'seconds':>8} "
             f"{'1st tok':>8} {'sent tok':>9} {'cached':>7} {'survived':>9}  first failure"]
    keys = list(dict.fromkeys((r.agent, r.task) for r in runs))
    for agent, name in keys:
        mine = [r for r in runs if r.agent == agent and r.task == name]
        n = len(mine)
        fail = next((r.why for r in mine if r.why), "")
        lines.append(f"{agent:<{width}} {name:<13} {sum(r.ok for r in mine):>3}/{n:<3} "
                     f"{sum(r.stopped for r in mine):>4}/{n:<3} "
                     f"{sum(r.ok and r.stopped for r in mine):>2}/{n:<3} "
                     f"{_mean([r.turns for r in mine if r.turns is not None]):>6} "
                     f"{_mean([r.seconds for r in mine]):>8} {_mean_int([r.first_tokens for r in mine]):>8} "
                     f"{_mean_int([r.sent_tokens for r in mine]):>9} {_mean_int([r.cached_tokens for r in mine]):>7} "
                     f"{sum(r.survived for r in mine):>5}/{n:<3}  {' '.join(fail.split())[:70]}")
    for agent in dict.fromkeys(r.agent for r in runs):
        mine = [r for r in runs if r.agent == agent]
        both = sum(r.ok and r.stopped for r in mine)
        lines.append(f"{agent}: {sum(r.ok for r in mine)}/{len(mine)} passed, {both}/{len(mine)} passed and stopped "
                     f"by itself ({100.0 * both / max(len(mine), 1):.0f}%), "
                     f"{sum(r.survived for r in mine)}/{len(mine)} workspaces survived")
    total = sum(r.ok for r in runs)
    lines.append(f"overall: {total}/{len(runs)} passed ({100.0 * total / max(len(runs), 1):.0f}%)")
    rows = summary(runs, reference)
    if rows:
        lines.append("")
        ref = rows[0].reference
        lines.append(f"{'agent':<{width}} {'finished':>9} {'rate':>5} {'s/finished':>11} {'sent tok':>9} "
                     f"{'cached':>7}  {'vs ' + ref if ref else 'no reference'}")
        for row in rows:
            lines.append(f"{row.agent:<{width}} {row.finished:>4}/{row.runs:<4} {row.rate:>4.0%} "
                         f"{_num(row.median_seconds, 1):>11} {_num(row.mean_sent, 0):>9} "
                         f"{_num(row.mean_cached, 0):>7}  {row.ratio_text()}")
    return lines


def _num(x: Optional[float], digits: int) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


@dataclass
class Summary:
    """An agent over all its runs. Finished: the check held and the agent stopped by itself. `ratios`: per
    task that both this agent and the reference finished at least once, the mean seconds of this agent's
    finished runs over the mean of the reference's; `median_ratio` their median."""
    agent: str
    runs: int
    finished: int
    rate: float
    median_seconds: Optional[float]   # of the finished runs
    mean_sent: Optional[float]        # prompt tokens per run (all runs the agent reported them for)
    mean_cached: Optional[float]
    reference: Optional[str]
    ratios: List[Tuple[str, float]]
    median_ratio: Optional[float]

    def ratio_text(self) -> str:
        if not self.reference:
            return ""
        if self.agent == self.reference:
            return "(reference)"
        if self.median_ratio is None:
            return "- (no task both finished)"
        return (f"{self.median_ratio:.2f}x median over {len(self.ratios)} task(s): "
                + ", ".join(f"{t} {r:.2f}" for t, r in self.ratios))


def summary(runs: List[Run], reference: Optional[str] = None) -> List[Summary]:
    """Per agent: finished runs (check held and stopped by itself), the finish rate over all its runs, the median
    seconds of its finished runs, mean prompt tokens sent and cached, and against `reference` (an agent's name)
    the ratio of wall seconds per finished task on the tasks both finished."""
    agents = list(dict.fromkeys(r.agent for r in runs))
    if reference not in agents:
        reference = None

    def finished_seconds(agent: str) -> Dict[str, float]:
        by_task: Dict[str, List[float]] = {}
        for r in runs:
            if r.agent == agent and r.ok and r.stopped:
                by_task.setdefault(r.task, []).append(r.seconds)
        return {t: statistics.mean(xs) for t, xs in by_task.items()}

    ref = finished_seconds(reference) if reference else {}
    rows = []
    for agent in agents:
        mine = [r for r in runs if r.agent == agent]
        done = [r for r in mine if r.ok and r.stopped]
        sent = [r.sent_tokens for r in mine if r.sent_tokens is not None]
        cached = [r.cached_tokens for r in mine if r.cached_tokens is not None]
        own = finished_seconds(agent)
        ratios = [(t, own[t] / ref[t]) for t in dict.fromkeys(r.task for r in mine)
                  if t in own and t in ref and ref[t] > 0] if reference and agent != reference else []
        rows.append(Summary(agent, len(mine), len(done), len(done) / max(len(mine), 1),
                            statistics.median([r.seconds for r in done]) if done else None,
                            statistics.mean(sent) if sent else None, statistics.mean(cached) if cached else None,
                            reference, ratios, statistics.median([x for _, x in ratios]) if ratios else None))
    return rows


def markdown(rows: List[Summary]) -> List[str]:
    """The summary as a Markdown table, for the README and the closing note."""
    ref = rows[0].reference if rows else None
    lines = [f"| agent | finished | rate | median s per finished task | mean tokens sent | mean cached | "
             f"{'ratio vs ' + ref if ref else 'ratio'} |", "|---|---|---|---|---|---|---|"]
    for row in rows:
        if row.agent == ref:
            ratio = "1 (reference)"
        elif row.median_ratio is None:
            ratio = "-"
        else:
            ratio = f"{row.median_ratio:.2f}x ({', '.join(f'{t} {r:.2f}' for t, r in row.ratios)})"
        lines.append(f"| {row.agent} | {row.finished}/{row.runs} | {row.rate:.0%} | {_num(row.median_seconds, 1)} | "
                     f"{_num(row.mean_sent, 0)} | {_num(row.mean_cached, 0)} | {ratio} |")
    return lines


def wire_base_url(wire: str, base_url: str) -> str:
    """The base URL of `wire` on a server that serves both on one port (llama.cpp), from either one's: the
    OpenAI wire's ends in /v1, the Anthropic wire's is the root (its SDKs add /v1/messages)."""
    root = base_url.rstrip("/")
    root = root[:-3] if root.endswith("/v1") else root
    return root + "/v1" if wire == "openai" else root


def aider_base_url(provider: str, base_url: str) -> str:
    """aider speaks the OpenAI wire: the base URL as given for `--provider openai`, else the same server's
    /v1 (llama.cpp serves both wires on one port)."""
    if provider == "openai":
        return base_url
    return wire_base_url("openai", base_url)


def _absolute(cmd: List[str]) -> List[str]:
    """Each agent runs in its task's workspace: a relative path in its command (`./target/release/x`,
    `bench/simple_loop.py`) that names a file here is made absolute, so it still names that file there."""
    # abspath, not resolve: a venv's python is a symlink to the system one, and resolving it leaves the venv.
    return [os.path.abspath(a) if not a.startswith("-") and os.sep in a and Path(a).exists() else a
            for a in cmd]


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: List[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--provider", choices=["anthropic", "openai", "both"], default="openai",
                   help="the wire tooloop speaks; `both`: a row per configuration and wire (`tooloop@openai`, "
                   "`tooloop@anthropic`) on one server that serves both, --base-url its root (llama.cpp)")
    p.add_argument("--base-url", help="the endpoint (OpenAI-compatible ones end in /v1)")
    p.add_argument("--model", required=True)
    p.add_argument("-n", "--runs", type=int, default=3, help="runs per task (default 3)")
    p.add_argument("--tasks", default=",".join(EASY),
                   help="comma-separated subset, 'all', or 'easy' (default: the easy three). Tasks, easiest "
                   "first: " + ", ".join(t.name for t in TASKS))
    p.add_argument("--max-turns", type=int, default=15)
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    p.add_argument("--tooloop", default=None,
                   help="the tooloop command (default: this Python's `-m tooloop.cli`)")
    p.add_argument("--agent", action="append", default=[], metavar="NAME=COMMAND",
                   help="another agent to run on the same tasks, side by side: COMMAND gets the task as its last "
                   "argument and runs in the workspace; exit code 0 means it stopped by itself; a line "
                   "`turns: N` on stderr gives its turns (repeatable)")
    p.add_argument("--no-tooloop", action="store_true", help="run only the --agent commands (and --aider)")
    p.add_argument("--configs", default="plain", metavar="LIST",
                   help="the tooloop rows, comma-separated: plain (`tooloop`), check (`tooloop+check`: --check "
                   "with the command the task implies, where it has one), attempts=N (`tooloop+attN`: --attempts "
                   "N, and --check where the task has one), NAME:FLAGS (`tooloop-NAME`: plain with FLAGS added, e.g. "
                   "nodraft:--no-draft); default: plain")
    p.add_argument("--aider", metavar="CMD",
                   help="aider as a peer (e.g. /tmp/venv-aider/bin/aider): told the task and its files, whole-file "
                   "edits, offline, on the same server and model (needs --base-url)")
    p.add_argument("--reference", metavar="NAME",
                   help="the agent whose wall seconds per finished task the others are held against "
                   "(default: `simple` when there is one)")
    p.add_argument("--markdown", action="store_true", help="print the per-agent summary as a Markdown table too")
    p.add_argument("--json", action="store_true", help="print the runs as JSON lines too")
    p.add_argument("--results", type=Path, metavar="FILE",
                   help="append each run to FILE as a JSON line (--json's) when it ends, and run only what FILE "
                   "does not have yet: a long run cut short (a session's end, a reboot) goes on where it stopped "
                   "when given the same FILE, and the table covers every run FILE holds of these agents and tasks")
    p.add_argument("--keep", type=Path, metavar="DIR",
                   help="copy each failed run's folder (workspace, sessions, the agent's output) into DIR")
    args = p.parse_args(argv)
    # A kill of the benchmark unwinds like Ctrl+C, so the agent it is running is ended too (run_once).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    spec = {"all": ",".join(t.name for t in TASKS), "easy": ",".join(EASY)}.get(args.tasks, args.tasks)
    wanted = [t.strip() for t in spec.split(",") if t.strip()]
    unknown = [w for w in wanted if w not in {t.name for t in TASKS}]
    if unknown:
        p.error(f"unknown task(s): {', '.join(unknown)}")
    agents: List[Agent] = []
    if not args.no_tooloop:
        tooloop = _absolute(shlex.split(args.tooloop)) if args.tooloop else [sys.executable, "-m", "tooloop.cli"]
        if args.provider == "both" and not args.base_url:
            p.error("--provider both needs --base-url: the root of a server that serves both wires")
        for wire in ["openai", "anthropic"] if args.provider == "both" else [args.provider]:
            url = wire_base_url(wire, args.base_url) if args.provider == "both" else args.base_url
            base = (tooloop + ["--yes", "-p", "--provider", wire, "--model", args.model, "--max-turns",
                               str(args.max_turns), "--no-color"] + (["--base-url", url] if url else []) + extra)
            try:
                rows = tooloop_agents(base, args.configs)
            except ValueError as e:
                p.error(str(e))
            for row in rows:
                row.name += f"@{wire}" if args.provider == "both" else ""
            agents += rows
    if args.aider:
        if not args.base_url:
            p.error("--aider needs --base-url (the server aider is pointed at)")
        agents.append(Agent("aider", _absolute(shlex.split(args.aider)) + [
            "--model", f"openai/{args.model}", "--openai-api-base", aider_base_url(args.provider, args.base_url),
            *AIDER_QUIET], "aider"))
    for item in args.agent:
        name, sep, command = item.partition("=")
        if not sep or not name or not command.strip():
            p.error(f"--agent wants NAME=COMMAND, got {item!r}")
        agents.append(Agent(name, _absolute(shlex.split(command))))
    names = [a.name for a in agents]
    if len(set(names)) != len(names):
        p.error(f"two agents have the same name: {', '.join(names)}")
    reference = args.reference or ("simple" if "simple" in names else None)
    if reference is not None and reference not in names:
        p.error(f"--reference {reference}: no such agent ({', '.join(names)})")
    env = dict(os.environ)
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    runs: List[Run] = []
    done: Dict[Tuple[str, str], List[Run]] = {}
    if args.results is not None:
        for run in load_results(args.results):
            done.setdefault((run.agent, run.task), []).append(run)
        # A line the last sitting was writing when it stopped: the next one starts on a line of its own.
        cut = args.results.exists() and args.results.stat().st_size > 0 \
            and not args.results.read_bytes().endswith(b"\n")
        start = {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "argv": sys.argv[1:],
                 "already": sum(map(len, done.values()))}
        with args.results.open("a", encoding="utf-8") as f:
            f.write(("\n" if cut else "") + json.dumps(start) + "\n")
    for task in [t for t in TASKS if t.name in wanted]:
        for i in range(args.runs):
            for agent in agents:
                earlier = done.get((agent.name, task.name), [])
                if i < len(earlier):
                    runs.append(earlier[i])
                    continue
                run = run_once(agent, task, env, args.timeout, args.keep)
                runs.append(run)
                if args.results is not None:
                    with args.results.open("a", encoding="utf-8") as f:
                        f.write(json.dumps(run.__dict__) + "\n")
                print(f"{agent.name} {task.name} #{i + 1}: {'ok' if run.ok else 'FAIL'}"
                      f"{'' if run.stopped else ' (did not stop by itself)'} {run.why} "
                      f"({run.turns} turns, {run.seconds:.1f}s, {run.sent_tokens} prompt tokens sent, "
                      f"{run.cached_tokens} cached{'' if run.survived else ', WORKSPACE DAMAGED'})",
                      file=sys.stderr, flush=True)
                if args.json:
                    print(json.dumps(run.__dict__), flush=True)
    print("\n".join(report(runs, reference)))
    if args.markdown:
        print()
        print("\n".join(markdown(summary(runs, reference))))
    return 0 if runs and all(r.ok and r.survived for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
