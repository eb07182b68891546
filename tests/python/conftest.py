"""Fixtures for the Python suite. Every test talks to tests/mock/mockserver.py over 127.0.0.1 (or to a model
written in Python); every server or subprocess a test starts is stopped by its own pid."""

from __future__ import annotations

import shutil
import signal
import sys
from pathlib import Path
from typing import Any, Iterator, List

import pytest

from _support import MockServer, scenario

# A test run started in the background of a non-interactive shell (`nohup bash .ci/run &`) inherits SIGINT
# ignored, and an ignored signal stays ignored across exec: every child these tests send Ctrl+C to would ignore
# it and the test would time out. With Python's own handler here, the children start with the default again.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _no_real_endpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    # A developer's real key or base URL must never leak into a test (nor a test reach the network).
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)


class Mocks:
    """Starts mock servers on demand; all of them are stopped when the test ends."""

    def __init__(self) -> None:
        self._servers: List[MockServer] = []

    def __call__(self, sc: Any) -> MockServer:
        if isinstance(sc, str) and not sc.endswith(".json"):
            sc = scenario(sc)
        server = MockServer(sc).start()
        self._servers.append(server)
        return server

    def stop(self) -> None:
        for s in self._servers:
            s.stop()


@pytest.fixture
def mock() -> Iterator[Mocks]:
    """``mock("anthropic_text")`` / ``mock({...})`` / ``mock([...])``: a started MockServer."""
    mocks = Mocks()
    try:
        yield mocks
    finally:
        mocks.stop()


@pytest.fixture(scope="session")
def tooloop_exe() -> str:
    """The installed `tooloop` console script (the CLI tests run the real command)."""
    try:
        import tooloop._tooloop  # noqa: F401
    except ImportError as e:
        pytest.fail(f"the tooloop package is not installed with its compiled module (pip install .): {e}")
    exe = Path(sys.executable).parent / "tooloop"
    found = str(exe) if exe.exists() else shutil.which("tooloop")
    assert found, "the `tooloop` console script is not installed (pip install . declares it)"
    return found


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """An empty workspace folder for a CLI run."""
    d = tmp_path / "ws"
    d.mkdir()
    return d
