#!/usr/bin/env python3
"""Start and drive tests/mock/mockserver.py from Python tests and from the shell.

As a library (pytest, driver scripts):

    from mockctl import MockServer
    with MockServer({"responses": [...]}) as mock:       # or MockServer("tests/scenarios/x.json")
        client(base_url=mock.base_url) ...
        assert mock.requests()[0]["body"]["stream"] is True

As a CLI (the C tests use this):

    python3 tests/mock/mockctl.py run [--requests-out FILE] SCENARIO.json -- CMD ARGS...

starts the server, runs CMD with TOOLOOP_MOCK_URL, ANTHROPIC_BASE_URL, OPENAI_BASE_URL (<url>/v1),
ANTHROPIC_API_KEY=sk-ant-mock and OPENAI_API_KEY=sk-mock set, stops the server and exits with CMD's code.
Standard library only.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

SERVER = Path(__file__).resolve().with_name("mockserver.py")
STARTUP_TIMEOUT = 10.0
# No proxy: an http_proxy in the environment must never carry requests meant for 127.0.0.1.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))

Scenario = Union[Dict[str, Any], List[Any], str, "os.PathLike[str]"]


def _scenario_json(scenario: Scenario) -> Any:
    if isinstance(scenario, (dict, list)):
        return scenario
    with open(scenario, encoding="utf-8") as f:
        return json.load(f)


class MockServer:
    """One mockserver.py subprocess, owned by this object and stopped by its pid."""

    def __init__(self, scenario: Optional[Scenario] = None, verbose: bool = False):
        self._scenario = _scenario_json(scenario) if scenario is not None else {"responses": []}
        self._verbose = verbose
        self.proc: Optional[subprocess.Popen] = None
        self.port: Optional[int] = None

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("MockServer is not started")
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "MockServer":
        cmd = [sys.executable, str(SERVER)] + (["--verbose"] if self._verbose else []) + ["-"]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.write(json.dumps(self._scenario).encode())
            self.proc.stdin.close()
            # select, so a server that dies or hangs before listening fails the test instead of blocking it.
            ready, _, _ = select.select([self.proc.stdout], [], [], STARTUP_TIMEOUT)
            line = self.proc.stdout.readline().decode() if ready else ""
            if not line.startswith("PORT "):
                raise RuntimeError(f"mockserver did not start (exit code {self.proc.poll()}, said {line!r})")
            self.port = int(line.split()[1])
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None and not pipe.closed:
                pipe.close()

    def __enter__(self) -> "MockServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def _control(self, method: str, name: str, payload: Any = None) -> Any:
        data = None if payload is None else json.dumps(payload).encode()
        req = urllib.request.Request(f"{self.base_url}/_mock/{name}", data=data, method=method,
                                     headers={"content-type": "application/json"})
        try:
            with _OPENER.open(req, timeout=10) as resp:
                return json.load(resp)
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"mockserver {method} /_mock/{name}: {e.code} {e.read().decode()}") from None

    def requests(self) -> List[Dict[str, Any]]:
        """Every non-control request so far, in arrival order (see README.md for the fields)."""
        return self._control("GET", "requests")

    def load(self, scenario: Scenario) -> None:
        """Replace the response queue and clear the recorded requests."""
        self._control("POST", "scenario", _scenario_json(scenario))


def mock_env(base_url: str) -> Dict[str, str]:
    """The environment a program under test needs to reach the mock instead of the real APIs."""
    return {
        "TOOLOOP_MOCK_URL": base_url,
        "ANTHROPIC_BASE_URL": base_url,
        "OPENAI_BASE_URL": f"{base_url}/v1",
        "ANTHROPIC_API_KEY": "sk-ant-mock",
        "OPENAI_API_KEY": "sk-mock",
    }


USAGE = "usage: mockctl.py run [--verbose] [--requests-out FILE] SCENARIO.json -- CMD [ARGS...]"


def main(argv: List[str]) -> int:
    if len(argv) < 2 or argv[0] != "run" or "--" not in argv:
        print(USAGE, file=sys.stderr)
        return 2
    sep = argv.index("--")
    opts, cmd = argv[1:sep], argv[sep + 1:]
    verbose = "--verbose" in opts
    opts = [o for o in opts if o != "--verbose"]
    requests_out = None
    if len(opts) == 3 and opts[0] == "--requests-out":
        requests_out, opts = opts[1], opts[2:]
    if len(opts) != 1 or not cmd:
        print(USAGE, file=sys.stderr)
        return 2
    with MockServer(opts[0], verbose=verbose) as mock:
        try:
            rc = subprocess.call(cmd, env={**os.environ, **mock_env(mock.base_url)})
        except OSError as e:
            print(f"mockctl: cannot run {cmd[0]}: {e}", file=sys.stderr)
            return 127
        if requests_out:
            with open(requests_out, "w", encoding="utf-8") as f:
                json.dump(mock.requests(), f, indent=2)
    # Like a shell: a command killed by signal N exits 128 + N.
    return 128 - rc if rc < 0 else rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
