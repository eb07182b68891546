"""The typed surface and the examples: mypy.stubtest agrees with the runtime, the examples pass
`mypy --strict`, and each example runs (against the mock server, or offline for the Python-written model)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from typing import Any, List

from _support import ROOT, mock_env, require, scenario

EXAMPLES = ROOT / "examples" / "python"


def needs_mypy() -> None:
    require(importlib.util.find_spec("mypy") is not None, "mypy (pip install mypy; scripts/test.sh installs it)")


def run(args: List[str], env: Any = None, timeout: float = 300) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def test_stubtest_passes() -> None:
    needs_mypy()
    proc = run([sys.executable, "-m", "mypy.stubtest", "tooloop", "--mypy-config-file", "pyproject.toml"])
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_examples_and_the_whole_package_pass_mypy_strict() -> None:
    """The whole package, CLI and tool helpers included: no module list to forget a new one,
    no ignore_errors override for any part of it."""
    needs_mypy()
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert "ignore_errors" not in pyproject and "\"tooloop.cli.*\"" not in pyproject
    proc = run([sys.executable, "-m", "mypy", "--strict", "examples/python", "python/tooloop"], timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "python/tooloop/cli" not in proc.stdout


def test_import_tooloop_does_not_import_the_cli_dependencies() -> None:
    code = "import sys, tooloop; print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('rich', 'prompt_toolkit', 'tooloop'))))"
    proc = run([sys.executable, "-c", "import json; " + code])
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout)
    assert not [m for m in loaded if not m.startswith("tooloop")], loaded
    assert "tooloop.cli" not in loaded


def test_example_tool_agent(mock: Any) -> None:
    server = mock("anthropic_tool_then_text")
    proc = run([sys.executable, str(EXAMPLES / "tool_agent.py"), "Weather in Paris?"], mock_env(server.base_url))
    assert proc.returncode == 0, proc.stderr
    assert "[tool] get_weather({'city': 'Paris'})" in proc.stdout
    assert "It is currently 18 °C" in proc.stdout


def test_example_streaming(mock: Any) -> None:
    server = mock("anthropic_text")
    proc = run([sys.executable, str(EXAMPLES / "streaming.py"), "hi"], mock_env(server.base_url))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(scenario("anthropic_text")["responses"][0]["anthropic"]["content"][0]["text"])
    assert "[end_turn;" in proc.stdout


def test_example_fake_model() -> None:
    proc = run([sys.executable, str(EXAMPLES / "fake_model.py"), "add 2 and 40"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "The sum is 42."


def test_example_resume_session(mock: Any, tmp_path: Any) -> None:
    server = mock("py_session_resume")
    env = mock_env(server.base_url)
    path = str(tmp_path / "chat.jsonl")
    first = run([sys.executable, str(EXAMPLES / "resume_session.py"), path, "Weather in Lyon?"], env)
    assert first.returncode == 1 and "InternalServerError" in first.stderr, first.stderr
    second = run([sys.executable, str(EXAMPLES / "resume_session.py"), path], env)
    assert second.returncode == 0, second.stderr
    assert "It is 21 C in Lyon." in second.stdout
    assert "[loaded" in second.stdout


def test_example_plan_and_delegate() -> None:
    proc = run([sys.executable, str(EXAMPLES / "plan_and_delegate.py")])
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "todo: ▸ Read the release skill · ○ Find the port"
    assert "  [notes] search_notes({'topic': 'port'})" in lines
    assert "Release check done: the service listens on port 8080." in lines
    assert lines[-1] == "todos at the end: ['completed', 'completed']"


def test_example_structured_output() -> None:
    proc = run([sys.executable, str(EXAMPLES / "structured_output.py")])
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "[model] asked for ['breaking', 'changes', 'version'], answering ['changes', 'version']"
    assert lines[-1] == "2.1.0: breaking=False, 2 changes (2 turns)"
