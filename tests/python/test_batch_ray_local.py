"""tooloop.batch with engine="ray" and no address: a local Ray is started for the batch and stopped after it,
leaving no Ray process behind (its own module: it starts its own cluster, in a child interpreter)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Set

import pytest

from test_batch import flow

if os.environ.get("TOOLOOP_TEST_RAY") != "1":
    pytest.importorskip("ray")

SCRIPT = r"""
import json, sys
import ray
import tooloop, tooloop.batch
opts = {"model": "claude-sonnet-4-6", "base_url": sys.argv[1], "api_key": "sk-ant-mock", "max_retries": 0}
res = tooloop.batch.run([{"id": f"l{i}", "input": "go"} for i in range(3)], opts, out=sys.argv[2],
                        concurrency=3, engine="ray", progress=False)
print(json.dumps({"statuses": [r.status for r in res], "initialized": ray.is_initialized()}))
"""


def ray_pids() -> Set[int]:
    pids = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes()
            except OSError:
                continue
            if b"raylet" in cmd or b"gcs_server" in cmd:
                pids.add(int(d.name))
    return pids


def test_without_an_address_a_local_ray_is_started_and_stopped_for_the_batch(mock: Any, tmp_path: Path) -> None:
    server = mock(flow())
    before = ray_pids()
    env = {**os.environ, "RAY_raylet_start_wait_time_s": "300", "RAY_agent_register_timeout_ms": "300000"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, server.base_url, str(tmp_path / "runs")], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got == {"statuses": ["ok"] * 3, "initialized": False}
    assert len(server.requests()) == 3
    assert ray_pids() - before == set(), "a Ray process outlived the batch"
