"""Helpers shared by the Python tests: scenario files, mock servers, agents pointed at them, and the check
that a conversation's API view is valid (DESIGN invariant 1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "tests" / "scenarios"
if str(ROOT / "tests" / "mock") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests" / "mock"))

from mockctl import MockServer, mock_env  # noqa: E402


def scenario(name: str) -> Dict[str, Any]:
    """tests/scenarios/<name>.json as a dict."""
    with open(SCENARIOS / f"{name}.json", encoding="utf-8") as f:
        return json.load(f)  # type: ignore[no-any-return]


def agent_for(server: MockServer, **kwargs: Any) -> Any:
    import tooloop

    kwargs.setdefault("api_key", "sk-ant-mock")
    provider = kwargs.get("provider", "anthropic")
    base = server.base_url + ("/v1" if str(provider).startswith("openai") else "")
    return tooloop.Agent(base_url=base, **kwargs)


def assert_valid_view(messages: List[Dict[str, Any]]) -> None:
    """DESIGN invariant 1: starts with a user turn, roles alternate, every tool_use is answered by exactly
    one tool_result at the front of the very next user message."""
    assert messages, "the API view is empty"
    assert messages[0]["role"] == "user", messages[0]
    for a, b in zip(messages, messages[1:]):
        assert a["role"] != b["role"], f"roles do not alternate: {a['role']} then {b['role']}"
    for i, m in enumerate(messages):
        uses = [b["id"] for b in m["content"] if b.get("type") == "tool_use"]
        if not uses:
            continue
        assert m["role"] == "assistant"
        assert i + 1 < len(messages), "a tool_use has no answer (the view ends on it)"
        nxt = messages[i + 1]["content"]
        results = [b["tool_use_id"] for b in nxt if b.get("type") == "tool_result"]
        assert sorted(results) == sorted(uses), (uses, results)
        kinds = [b["type"] for b in nxt]
        assert kinds[: len(results)] == ["tool_result"] * len(results), "tool_result blocks must come first"


def cli_env(tmp_path: Path, mock: Optional[MockServer] = None, **extra: str) -> Dict[str, str]:
    """The environment of a `tooloop` command under test: the caller's, without any key, endpoint, AWS
    setting or tooloop default (so nothing leaks in), its home in `tmp_path`, pointed at `mock` if given, then
    `extra`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ANTHROPIC_", "OPENAI_", "TOOLOOP_", "AWS_")) and k != "NO_COLOR"}
    env["TOOLOOP_HOME"] = str(tmp_path / "home")
    env["PYTHONIOENCODING"] = "utf-8"
    if mock is not None:
        env.update(mock_env(mock.base_url))
    env.update(extra)
    return env


def in_ci() -> bool:
    """Whether this run is CI's (`CI=true`, as CI services set it)."""
    return os.environ.get("CI") == "true"


def require(available: bool, what: str) -> None:
    """Go on when `available`; otherwise fail under `CI=true` (CI is meant to run the whole suite, and a
    skipped sandbox test would hide a broken sandbox behind a green run) and skip elsewhere, naming `what`
    the test needs."""
    if available:
        return
    import pytest

    if in_ci():
        pytest.fail(f"this test needs {what}, which this machine lacks (CI=true: a missing capability fails)")
    pytest.skip(f"needs {what}")


def require_landlock() -> None:
    """Landlock: the sandboxed modes of the built-in bash need it."""
    from tooloop import _tooloop

    require(_tooloop.sandbox_support() is not None, "Landlock (tooloop._tooloop.sandbox_support() is None)")


def mcp_python() -> str:
    """A Python with the official MCP SDK: $TOOLOOP_TEST_PYTHON (scripts/test.sh prepares one), else this
    interpreter. Without the SDK the test fails under CI=true and skips elsewhere."""
    py = os.environ.get("TOOLOOP_TEST_PYTHON", sys.executable)
    ok = subprocess.run([py, "-c", "import mcp.server.mcpserver"], capture_output=True).returncode == 0
    require(ok, f"a Python with the `mcp` package ({py} has none: pip install 'mcp>=2.3,<3', "
                "or set TOOLOOP_TEST_PYTHON)")
    return py


def clean_env(tmp_path: Path, mock: Optional[MockServer] = None, **extra: str) -> Dict[str, str]:
    """`cli_env` with the config and home folders in `tmp_path` too."""
    return cli_env(tmp_path, mock, XDG_CONFIG_HOME=str(tmp_path / "config"), HOME=str(tmp_path / "homedir"),
                   **extra)


def run_cli(exe: str, ws: Path, env: Dict[str, str], *args: str,
            timeout: float = 60) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    """Run the `tooloop` command in `ws` without a terminal (stdin empty) and wait for it; what it printed is
    printed too, for failure reports."""
    proc = subprocess.run([exe, *args], cwd=ws, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=timeout)
    print("exit", proc.returncode, "\n--- stdout\n" + proc.stdout + "--- stderr\n" + proc.stderr)
    return proc


#: The command on a small window (the compact prompt and the draft, as with a 4k local model).
SMALL_WINDOW = ("-p", "--yes", "--no-color", "--model", "qwen2.5-coder-q15", "--context-window", "4096")


def small_window_run(exe: str, ws: Path, tmp_path: Path, replies: List[Any], task: str,
                     *extra: str) -> Tuple[subprocess.CompletedProcess, List[Dict[str, Any]]]:  # type: ignore[type-arg]
    """The command on a small window, against the mock on the Anthropic wire answering `replies`: what it did,
    and the bodies of the requests it sent."""
    with MockServer({"responses": replies}) as server:
        proc = run_cli(exe, ws, cli_env(tmp_path, server), *SMALL_WINDOW, "--provider", "anthropic",
                       "--base-url", server.base_url, *extra, task)
        return proc, [r["body"] for r in server.requests()]


def run_script(code: str, env: Optional[Dict[str, str]] = None, timeout: float = 60) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    """Run `code` in a fresh interpreter (the one running the tests) and wait for it."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def text_reply(text: str, **extra: Any) -> Dict[str, Any]:
    """A mock response: an Anthropic text message (end_turn)."""
    return {"anthropic": {"id": "msg_py_text", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
                          "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                          "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 5}}, **extra}


def tool_reply(*calls: Any, text: Optional[str] = None, **extra: Any) -> Dict[str, Any]:
    """A mock response: an Anthropic message with tool_use blocks; `calls` are (id, name, input)."""
    content: List[Dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [{"type": "tool_use", "id": i, "name": n, "input": inp} for i, n, inp in calls]
    return {"anthropic": {"id": "msg_py_tools", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
                          "content": content, "stop_reason": "tool_use", "stop_sequence": None,
                          "usage": {"input_tokens": 20, "output_tokens": 8}}, **extra}




def unmarked(v: Any) -> Any:
    """`v` (a request body or part of one) without prompt-caching markers: they are wire-only annotations
    (see tooloop's cache module and tests/python/test_agent_options_more.py), and many tests compare the rest."""
    if isinstance(v, dict):
        return {k: unmarked(x) for k, x in v.items() if k != "cache_control"}
    if isinstance(v, list):
        return [unmarked(x) for x in v]
    return v


def tool_results(request: Dict[str, Any]) -> Dict[str, Any]:
    """tool_use_id -> (content, is_error) of the tool_result blocks in a recorded mock request."""
    out: Dict[str, Any] = {}
    for m in request["body"]["messages"]:
        if isinstance(m["content"], list):
            for b in m["content"]:
                if b.get("type") == "tool_result":
                    content = b.get("content")
                    if isinstance(content, list):
                        content = "".join(x.get("text", "") for x in content)
                    out[b["tool_use_id"]] = (content, bool(b.get("is_error")))
    return out


def caller_bound_tool(seen: Dict[str, int], request_id: Any) -> Tuple[Any, Dict[str, Any]]:
    """A tool `lookup` that reads a sqlite3 database made on this thread (sqlite3 refuses to use it on any other:
    "SQLite objects created in a thread can only be used in that same thread") and quotes the contextvar
    `request_id`, and before_tool/after_tool hooks; each records in `seen` the thread it ran on."""
    import sqlite3
    import threading

    db = sqlite3.connect(":memory:")
    db.execute("create table kv (k text, v text)")
    db.execute("insert into kv values ('a', 'from the caller''s database')")

    def lookup(key: str) -> str:
        """Look a key up."""
        seen["tool"] = threading.get_ident()
        row = db.execute("select v from kv where k = ?", (key,)).fetchone()
        return f"{row[0]} (request {request_id.get()})"

    def before_tool(call: Any) -> None:
        seen["before_tool"] = threading.get_ident()

    def after_tool(call: Any, result: Any) -> None:
        seen["after_tool"] = threading.get_ident()

    return lookup, {"before_tool": before_tool, "after_tool": after_tool}


def seconds_to_end(stream: Any, stop: Callable[[], Any], after: float, raises: Any) -> Tuple[float, Any]:
    """Iterate ``stream`` (stalled) while another thread calls ``stop`` after ``after`` seconds; the iteration
    must raise ``raises``. Returns (seconds from ``stop`` to the raise, pytest's ExceptionInfo)."""
    import threading
    import time

    import pytest

    stopped: List[float] = []

    def fire() -> None:
        stopped.append(time.monotonic())
        stop()

    timer = threading.Timer(after, fire)
    timer.start()
    try:
        with pytest.raises(raises) as info:
            for _ in stream:
                pass
        ended = time.monotonic()
    finally:
        timer.cancel()
    return ended - stopped[0], info


def sigint_into_stall(server: MockServer, script: str, *args: str, after: float = 0.5) -> tuple:  # type: ignore[type-arg]
    """Run ``script`` (``python -c``) against ``server``, wait until it has sent its request and ``after``
    seconds more (well into a stalled stream), send it SIGINT; (returncode, stdout, stderr, the monotonic time
    the signal was sent). The process is always reaped."""
    import signal
    import time

    proc = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, **mock_env(server.base_url)})
    try:
        deadline = time.monotonic() + 20
        while not server.requests() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.requests(), "the script never sent its request"
        time.sleep(after)
        sent = time.monotonic()
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out, err, sent
