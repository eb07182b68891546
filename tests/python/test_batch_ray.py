"""tooloop.batch on a real local Ray cluster (one for this module): chunks of tasks on Ray workers, each driving
its agents on threads; a worker SIGKILLed mid-task is retried by Ray and the task resumes from its session
without running a completed tool again.

CI installs ray (scripts/test.sh: `pip install ".[ray]"`, TOOLOOP_TEST_RAY=1), so there the module never
skips; elsewhere it skips when ray is not installed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

import tooloop
from test_batch import flow, lines, opts

if os.environ.get("TOOLOOP_TEST_RAY") == "1":
    import ray
else:
    ray = pytest.importorskip("ray")

TOOLS = '''
import os, signal

LOG = os.environ["RAY_BATCH_LOG"]
MARK = os.environ["RAY_BATCH_MARK"]

def _note(what: str) -> None:
    with open(LOG, "a") as f:
        f.write(what + "\\n")

def count() -> str:
    """Count this call."""
    _note("count")
    return "counted"

def die() -> str:
    """The first call anywhere kills the worker process it runs in."""
    _note("die")
    try:
        fd = os.open(MARK, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return "survived"
    os.close(fd)
    os.kill(os.getpid(), signal.SIGKILL)
    return "unreachable"
'''


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    d = tmp_path_factory.mktemp("ray")
    (d / "ray_batch_tools.py").write_text(TOOLS)
    env = {"PYTHONPATH": os.pathsep.join([str(d)] + [p for p in [os.environ.get("PYTHONPATH")] if p]),
           "RAY_BATCH_LOG": str(d / "calls.log"), "RAY_BATCH_MARK": str(d / "killed")}
    # A loaded CI machine (or a shared one) can take minutes to bring the node's agents up: wait for them.
    env.setdefault("RAY_raylet_start_wait_time_s", os.environ.get("RAY_raylet_start_wait_time_s", "300"))
    env.setdefault("RAY_agent_register_timeout_ms", os.environ.get("RAY_agent_register_timeout_ms", "300000"))
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env})
    try:
        yield d
    finally:
        ray.shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_a_batch_runs_on_ray_in_chunks_and_a_rerun_skips_it(cluster: Path, mock: Any, tmp_path: Path) -> None:
    server = mock(flow("count"))
    (cluster / "calls.log").unlink(missing_ok=True)
    tasks = [{"id": f"r{i}", "input": f"task {i}", "workspace": str(tmp_path / "ws" / f"r{i}")} for i in range(6)]
    out = tmp_path / "runs"
    options: Dict[str, Any] = opts(server, tools=["ray_batch_tools:count"])
    results = tooloop.batch.run(tasks, options, out=out, concurrency=4, engine="ray", agents_per_worker=2,
                                progress=False)
    assert [(r.id, r.status) for r in results] == [(t["id"], "ok") for t in tasks]
    assert all(Path(r.session or "").exists() for r in results)
    assert results[0].text == "all done" and results[0].turns == 2
    assert sorted(d["id"] for d in lines(out / "results.jsonl")) == [t["id"] for t in tasks]
    assert (cluster / "calls.log").read_text().split() == ["count"] * 6
    assert all((tmp_path / "ws" / t["id"]).is_dir() for t in tasks)
    sent = len(server.requests())
    again = tooloop.batch.run(tasks, options, out=out, concurrency=4, engine="ray", progress=False)
    assert [r.status for r in again] == ["ok"] * 6 and len(server.requests()) == sent


@pytest.mark.parametrize("store", ["jsonl", "sqlite"])
def test_a_killed_worker_is_retried_and_its_tasks_resume_without_running_a_tool_twice(
        cluster: Path, mock: Any, tmp_path: Path, store: str) -> None:
    server = mock(flow("count", "die"))
    (cluster / "calls.log").unlink(missing_ok=True)
    (cluster / "killed").unlink(missing_ok=True)
    tasks = [{"id": f"k{i}", "input": f"task {i}"} for i in range(4)]
    out = tmp_path / "runs"
    # sqlite: every session in one database; the killed worker's claims on its sessions must not block the retry.
    db = str(out / "sessions.db") if store == "sqlite" else None
    results = tooloop.batch.run(tasks, opts(server, tools=["ray_batch_tools:count", "ray_batch_tools:die"]),
                                out=out, concurrency=4, engine="ray", agents_per_worker=2, progress=False,
                                session_db=db)
    assert (cluster / "killed").exists(), "no worker was killed"
    assert [r.status for r in results] == ["ok"] * 4, results
    if db is not None:
        assert [r.session for r in results] == [f"{db}#k{i}" for i in range(4)]
    calls = (cluster / "calls.log").read_text().split()
    # No tool ran twice: at most once per task (the killed call, and any call the kill caught before it began,
    # is answered as interrupted on resume, not run again); the kill itself was a `die` call.
    assert 1 <= calls.count("die") <= 4 and calls.count("count") <= 4, calls
    assert len(lines(out / "results.jsonl")) == 4
    # The killed task's resumed conversation carries the interrupted call's answer.
    for r in results:
        info = tooloop.load_session(r.session or "")
        results_of_die = [b for e in info.entries if e["role"] == "tool" for b in e["content"]
                          if isinstance(b, dict) and b.get("tool_use_id") == "toolu_die"]
        assert len(results_of_die) == 1, json.dumps(info.entries)[:2000]


def test_the_budget_holds_across_ray_workers(cluster: Path, mock: Any, tmp_path: Path) -> None:
    # Every request costs $0.30 (100k input tokens at $3/M); two requests per task.
    server = mock(flow("count", usage={"input_tokens": 100_000, "output_tokens": 0}))
    tasks = [{"id": f"b{i}", "input": f"task {i}"} for i in range(8)]
    results = tooloop.batch.run(tasks, opts(server, tools=["ray_batch_tools:count"]), out=tmp_path / "runs",
                                concurrency=4, engine="ray", agents_per_worker=2, budget_usd=3.0, progress=False)
    statuses = [r.status for r in results]
    assert "budget" in statuses and "ok" in statuses, statuses
    assert len(server.requests()) * 0.30 <= 3.0 + 1e-9
    assert {d["id"] for d in lines(tmp_path / "runs" / "results.jsonl")} == {t["id"] for t in tasks}
