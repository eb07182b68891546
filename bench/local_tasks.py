#!/usr/bin/env python3
"""Small coding tasks for the `tooloop` CLI against any OpenAI- or Anthropic-compatible endpoint (a local
llama.cpp, Ollama or vLLM server, or a hosted API): how often does the agent finish them, in how many
model turns, and how fast?

Each task starts in a fresh temporary workspace, runs `tooloop --yes -p TASK` (so the CLI's settings for
local models apply: low temperature, max_tokens fitted to the context, the compact prompt, corrections
of tool calls written as text), then checks the result itself by running code in the workspace.

    python3 bench/local_tasks.py --provider openai --base-url http://localhost:8080/v1 --model qwen2.5-coder -n 5
    python3 bench/local_tasks.py --model claude-haiku-4-5 -n 3 --tasks hello,bugfix
    python3 bench/local_tasks.py ... -- --prompt compact --context-window 8192   # extra tooloop flags

Keys come from the environment as for the CLI (OPENAI_API_KEY / ANTHROPIC_API_KEY); a local server needs
none. Exit code 0 when every run of every task passed, 1 otherwise. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple


def _py(ws: Path, *args: str) -> Tuple[int, str]:
    proc = subprocess.run([sys.executable, *args], cwd=ws, capture_output=True, text=True, timeout=30,
                          stdin=subprocess.DEVNULL)
    return proc.returncode, proc.stdout + proc.stderr


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


@dataclass
class Task:
    name: str
    prompt: str
    files: Dict[str, str]
    check: Callable[[Path], Optional[str]]


TASKS = [
    Task("hello", "Create hello.py that prints exactly Hello, world! and run it to check.", {}, check_hello),
    Task("bugfix", "calc.py has a bug: add(2, 3) returns -1 instead of 5. Fix it.",
         {"calc.py": "def add(a, b):\n    return a - b\n"}, check_bugfix),
    Task("function", "Write a function is_palindrome(s) in pal.py, and a test for it in test_pal.py that "
         "runs with `python3 test_pal.py` (plain asserts). Run the test.", {}, check_function),
]


@dataclass
class Run:
    task: str
    ok: bool
    why: str
    turns: int
    seconds: float


def count_turns(home: Path) -> int:
    turns = 0
    for path in home.glob("sessions/*/*.jsonl"):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            entry = rec.get("entry") if isinstance(rec, dict) else None
            if isinstance(entry, dict) and entry.get("role") == "assistant":
                turns += 1
    return turns


def run_once(task: Task, tooloop: List[str], flags: List[str], env: Dict[str, str], timeout: float) -> Run:
    root = Path(tempfile.mkdtemp(prefix=f"tooloop-bench-{task.name}-"))
    try:
        ws, home = root / "ws", root / "home"
        ws.mkdir()
        for rel, text in task.files.items():
            (ws / rel).write_text(text)
        start = time.monotonic()
        try:
            proc = subprocess.run(tooloop + ["--yes", "-p", "--workspace", str(ws), *flags, task.prompt],
                                  env=dict(env, TOOLOOP_HOME=str(home)), capture_output=True, text=True,
                                  timeout=timeout, stdin=subprocess.DEVNULL)
            failed = None if proc.returncode == 0 else (proc.stderr.strip().splitlines() or ["?"])[-1]
        except subprocess.TimeoutExpired:
            failed = f"timed out after {timeout:.0f}s"
        seconds = time.monotonic() - start
        why = task.check(ws)   # the workspace decides; how the run ended is only a hint
        if why is not None and failed:
            why = f"{why} (tooloop: {failed})"
        return Run(task.name, why is None, why or "", count_turns(home), seconds)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def report(runs: List[Run]) -> List[str]:
    lines = [f"{'task':<10} {'passed':>8} {'turns':>7} {'seconds':>9}  first failure"]
    for name in dict.fromkeys(r.task for r in runs):
        mine = [r for r in runs if r.task == name]
        ok = sum(r.ok for r in mine)
        fail = next((r.why for r in mine if not r.ok), "")
        lines.append(f"{name:<10} {ok:>3}/{len(mine):<4} {statistics.mean(r.turns for r in mine):>7.1f} "
                     f"{statistics.mean(r.seconds for r in mine):>9.1f}  {fail}")
    total = sum(r.ok for r in runs)
    lines.append(f"overall: {total}/{len(runs)} passed ({100.0 * total / max(len(runs), 1):.0f}%)")
    return lines


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: List[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--provider", choices=["anthropic", "openai"], default="openai")
    p.add_argument("--base-url", help="the endpoint (OpenAI-compatible ones end in /v1)")
    p.add_argument("--model", required=True)
    p.add_argument("-n", "--runs", type=int, default=3, help="runs per task (default 3)")
    p.add_argument("--tasks", default=",".join(t.name for t in TASKS),
                   help="comma-separated subset of: " + ", ".join(t.name for t in TASKS))
    p.add_argument("--max-turns", type=int, default=15)
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    p.add_argument("--tooloop", default=None,
                   help="the tooloop command (default: this Python's `-m tooloop.cli`)")
    p.add_argument("--json", action="store_true", help="print the runs as JSON lines too")
    args = p.parse_args(argv)

    wanted = [t.strip() for t in args.tasks.split(",") if t.strip()]
    unknown = [w for w in wanted if w not in {t.name for t in TASKS}]
    if unknown:
        p.error(f"unknown task(s): {', '.join(unknown)}")
    tooloop = args.tooloop.split() if args.tooloop else [sys.executable, "-m", "tooloop.cli"]
    flags = ["--provider", args.provider, "--model", args.model, "--max-turns", str(args.max_turns),
             "--no-color"] + (["--base-url", args.base_url] if args.base_url else []) + extra
    env = dict(os.environ)
    runs: List[Run] = []
    for task in [t for t in TASKS if t.name in wanted]:
        for i in range(args.runs):
            run = run_once(task, tooloop, flags, env, args.timeout)
            runs.append(run)
            print(f"{task.name} #{i + 1}: {'ok' if run.ok else 'FAIL ' + run.why} "
                  f"({run.turns} turns, {run.seconds:.1f}s)", file=sys.stderr, flush=True)
            if args.json:
                print(json.dumps(run.__dict__))
    print("\n".join(report(runs)))
    return 0 if runs and all(r.ok for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
