"""tooloop.batch on threads: many agents against the mock server at once — the concurrency limit, a failing
task, results.jsonl, resume after SIGKILL without a tool run twice, the batch budget, shared rate limits and a
429's retry-after, cancel and Ctrl+C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

import tooloop
from _support import ROOT, MockServer

MODEL = "claude-sonnet-4-6"


def tool_use(name: str, call_id: str, usage: Any = None, **extra: Any) -> Dict[str, Any]:
    return {"anthropic": {"id": "msg_" + call_id, "type": "message", "role": "assistant", "model": MODEL,
                          "content": [{"type": "tool_use", "id": call_id, "name": name, "input": {}}],
                          "stop_reason": "tool_use", "stop_sequence": None,
                          "usage": usage or {"input_tokens": 10, "output_tokens": 5}}, **extra}


def final(text: str = "all done", usage: Any = None, **extra: Any) -> Dict[str, Any]:
    return {"anthropic": {"id": "msg_final", "type": "message", "role": "assistant", "model": MODEL,
                          "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                          "stop_sequence": None, "usage": usage or {"input_tokens": 10, "output_tokens": 5}},
            **extra}


def flow(*tools: str, usage: Any = None, delay_ms: int = 0, first: Any = ()) -> Dict[str, Any]:
    """A scenario every agent of a batch can follow at its own pace: it calls `tools` in order (call ids
    toolu_<name>), then answers. Chosen by what each request holds, not by arrival order."""
    routes: List[Dict[str, Any]] = list(first)
    steps = list(tools)
    routes.append({"match": {"body_contains": f"toolu_{steps[-1]}"} if steps else {},
                   "response": final(usage=usage, delay_ms=delay_ms)})
    for prev, nxt in reversed(list(zip(steps, steps[1:]))):
        routes.append({"match": {"body_contains": f"toolu_{prev}"},
                       "response": tool_use(nxt, f"toolu_{nxt}", usage, delay_ms=delay_ms)})
    if steps:
        routes.append({"match": {}, "response": tool_use(steps[0], f"toolu_{steps[0]}", usage, delay_ms=delay_ms)})
    return {"responses": [], "routes": routes}


def opts(mock: MockServer, **kw: Any) -> Dict[str, Any]:
    return {"model": MODEL, "base_url": mock.base_url, "api_key": "sk-ant-mock", "max_retries": 0, **kw}


def lines(path: Path) -> List[Dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_twenty_tasks_run_with_observed_concurrency_equal_to_the_limit(mock, tmp_path):
    server = mock(flow("probe"))
    lock = threading.Lock()
    active = [0]
    peak = [0]

    def probe() -> str:
        """Note how many agents are inside this tool at once."""
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        try:
            end = time.monotonic() + 2.0
            while time.monotonic() < end:  # wait (bounded) for the pool to fill up
                with lock:
                    if active[0] >= 5:
                        break
                time.sleep(0.01)
            time.sleep(0.05)
        finally:
            with lock:
                active[0] -= 1
        return "probed"

    tasks = [{"id": f"t{i:02d}", "input": f"task {i}", "workspace": str(tmp_path / "ws" / f"t{i:02d}")}
             for i in range(20)]
    out = tmp_path / "runs"
    results = tooloop.batch.run(tasks, opts(server, tools=[probe]), out=str(out), concurrency=5, progress=False)

    assert peak[0] == 5
    assert [r.id for r in results] == [t["id"] for t in tasks]
    assert all(isinstance(r, tooloop.batch.BatchResult) for r in results)
    assert {r.status for r in results} == {"ok"}, results
    r0 = results[0]
    assert r0.text == "all done" and r0.turns == 2 and r0.stop_reason == "end_turn"
    assert r0.session == str(out / "t00.jsonl") and Path(r0.session).exists()
    assert r0.usage.input_tokens == 20 and r0.cost_usd is not None and r0.cost_usd > 0
    assert r0.seconds > 0 and r0.error is None and r0.check is None
    recorded = lines(out / "results.jsonl")
    assert sorted(d["id"] for d in recorded) == [t["id"] for t in tasks]
    assert all(d["status"] == "ok" for d in recorded)
    # Each task had its own workspace (created for it).
    assert all((tmp_path / "ws" / t["id"]).is_dir() for t in tasks)
    assert len(server.requests()) == 40


def test_a_failing_task_does_not_stop_the_others_and_a_rerun_skips_the_finished(mock, tmp_path):
    bad = {"match": {"body_contains": "BROKEN"}, "times": 1,
           "response": {"status": 400, "json": {"type": "error", "error": {"type": "invalid_request_error",
                                                                            "message": "no such thing"}}}}
    server = mock(flow(first=[bad]))
    tasks = [{"id": f"t{i}", "input": "BROKEN task" if i == 3 else f"task {i}"} for i in range(6)]
    out = tmp_path / "runs"
    results = tooloop.batch.run(tasks, opts(server), out=out, concurrency=3, progress=False)
    by_id = {r.id: r for r in results}
    assert by_id["t3"].status == "error" and "no such thing" in (by_id["t3"].error or "")
    assert all(by_id[f"t{i}"].status == "ok" for i in range(6) if i != 3)
    assert len(server.requests()) == 6

    # Again: the five finished tasks are skipped (no request), the failed one resumes from its session
    # (its input is not sent twice) and now finishes.
    again = tooloop.batch.run(tasks, opts(server), out=out, concurrency=3, progress=False)
    assert [r.status for r in again] == ["ok"] * 6
    reqs = server.requests()
    assert len(reqs) == 7
    resent = reqs[-1]["body"]["messages"]
    assert [m["role"] for m in resent] == ["user"] and "BROKEN" in json.dumps(resent)
    statuses = [(d["id"], d["status"]) for d in lines(out / "results.jsonl")]
    assert statuses.count(("t3", "error")) == 1 and statuses.count(("t3", "ok")) == 1
    assert again[0] == results[0]  # a skipped task's result is the recorded one


def test_bad_tasks_and_options_are_refused_before_anything_runs(tmp_path):
    with pytest.raises(tooloop.ConfigError, match="appears twice"):
        tooloop.batch.run([{"id": "a", "input": "x"}, {"id": "a", "input": "y"}], {}, out=tmp_path)
    with pytest.raises(tooloop.ConfigError, match="session file"):
        tooloop.batch.run([{"id": "../a", "input": "x"}], {}, out=tmp_path)
    with pytest.raises(tooloop.ConfigError, match="session"):
        tooloop.batch.run([{"id": "a", "input": "x"}], {"session": "x.jsonl"}, out=tmp_path)
    with pytest.raises(tooloop.ConfigError, match="module:function"):
        tooloop.batch.run([{"id": "a", "input": "x"}], {"tools": ["nope"]}, out=tmp_path)
    with pytest.raises(tooloop.ConfigError, match="concurrency"):
        tooloop.batch.run([{"id": "a", "input": "x"}], {}, out=tmp_path, concurrency=0)
    assert not (tmp_path / "results.jsonl").exists()


def test_tools_given_as_module_function_strings_and_the_check(mock, tmp_path, monkeypatch):
    (tmp_path / "batch_tools_mod.py").write_text(
        "def stamp() -> str:\n    \"\"\"Stamp it.\"\"\"\n    return 'stamped'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    server = mock(flow("stamp"))
    seen = []

    def check(task: Dict[str, Any], result: tooloop.batch.BatchResult) -> Dict[str, Any]:
        seen.append(task["expect"])
        return {"passed": result.text == task["expect"]}

    results = tooloop.batch.run([{"id": "a", "input": "go", "expect": "all done"}],
                                opts(server, tools=["batch_tools_mod:stamp"]), out=tmp_path / "runs",
                                check=check, progress=False)
    assert results[0].status == "ok" and results[0].check == {"passed": True} and seen == ["all done"]
    tool_results = [b for m in server.requests()[1]["body"]["messages"] for b in m["content"]
                    if isinstance(b, dict) and b.get("type") == "tool_result"]
    assert "stamped" in json.dumps(tool_results)
    assert lines(tmp_path / "runs" / "results.jsonl")[0]["check"] == {"passed": True}


KILL_SCRIPT = r"""
import os, sys, time, json
sys.path.insert(0, sys.argv[3])
import tooloop

log = sys.argv[2]

def count() -> str:
    "Count this call."
    with open(log, "a") as f:
        f.write("count\n")
    return "counted"

def slow() -> str:
    "Take a long time, the first time round."
    with open(log, "a") as f:
        f.write("slow\n")
    if os.environ.get("BATCH_SLOW") == "1":
        time.sleep(60)
    return "slow done"

tasks = [{"id": f"k{i}", "input": f"task {i}"} for i in range(4)]
opts = {"model": "claude-sonnet-4-6", "base_url": sys.argv[1], "api_key": "sk-ant-mock", "max_retries": 0,
        "tools": [count, slow]}
res = tooloop.batch.run(tasks, opts, out=sys.argv[4], concurrency=4, progress=False, session_db=sys.argv[5] or None)
print(json.dumps([[r.id, r.status] for r in res]))
"""


@pytest.mark.parametrize("store", ["jsonl", "sqlite"])
def test_resume_after_sigkill_runs_no_tool_twice(mock, tmp_path, store):
    server = mock(flow("count", "slow"))
    log = tmp_path / "calls.log"
    out = tmp_path / "runs"
    script = tmp_path / "kill_batch.py"
    script.write_text(KILL_SCRIPT)
    db = str(tmp_path / "sessions.db") if store == "sqlite" else ""
    args = [sys.executable, str(script), server.base_url, str(log), str(ROOT / "tests" / "python"), str(out), db]
    proc = subprocess.Popen(args, env={**os.environ, "BATCH_SLOW": "1"}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            calls = log.read_text().split() if log.exists() else []
            if calls.count("slow") == 4:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the four agents never reached the slow tool")
        # Each slow call is under way, so its tool_use is already in the session: kill now.
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not (out / "results.jsonl").exists()

    # The same batch again, without the slowness: every task resumes and finishes, and no tool ran twice
    # (the slow calls that the kill interrupted are answered as interrupted, not run again).
    done = subprocess.run(args, env={k: v for k, v in os.environ.items() if k != "BATCH_SLOW"},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [[f"k{i}", "ok"] for i in range(4)]
    calls = log.read_text().split()
    assert calls.count("count") == 4 and calls.count("slow") == 4, calls
    # Each task's first request was sent once: the resumed ones carry the interrupted slow call's result.
    first = [r for r in server.requests() if len(r["body"]["messages"]) == 1]
    assert len(first) == 4
    if db:
        assert not list(out.glob("*.jsonl.*")) and sorted(p.name for p in out.iterdir()) == ["results.jsonl"]
        assert sorted(s["id"] for s in tooloop.list_sessions(db)) == [f"k{i}" for i in range(4)]


def test_every_session_of_a_batch_in_one_database_keeps_its_order_and_resumes(mock, tmp_path):
    # 64 agents at once write their sessions into one SQLite database: nothing lost, each session in order.
    server = mock(flow("note"))
    noted: List[str] = []

    def note() -> str:
        """Note this call."""
        noted.append("x")
        return "noted"

    tasks = [{"id": f"t{i:02d}", "input": f"task number {i}"} for i in range(64)]
    out = tmp_path / "runs"
    results = tooloop.batch.run(tasks, opts(server, tools=[note]), out=out, concurrency=64, progress=False,
                                session_db=True)
    db = out / "sessions.db"
    assert [r.status for r in results] == ["ok"] * 64
    assert [r.session for r in results] == [f"{db}#{t['id']}" for t in tasks]
    assert sorted(p.name for p in out.iterdir() if p.suffix == ".jsonl") == ["results.jsonl"]
    assert sorted(s["id"] for s in tooloop.list_sessions(db)) == [t["id"] for t in tasks]
    for t in tasks:
        info = tooloop.load_session(f"{db}#{t['id']}")
        assert [(e["role"], e["status"]) for e in info.entries] == [
            ("user", "complete"), ("assistant", "complete"), ("tool", "complete"), ("assistant", "complete")]
        assert info.first_user_line == t["input"]
    assert len(noted) == 64 and len(server.requests()) == 128
    if hasattr(os, "stat"):
        assert os.stat(db).st_mode & 0o777 == 0o600

    # The same batch with the database named through options["session"]: every task is skipped.
    again = tooloop.batch.run(tasks, opts(server, tools=[note], session=str(db)), out=out, progress=False)
    assert [r.status for r in again] == ["ok"] * 64 and len(server.requests()) == 128
    # A task that is not finished resumes from its database session: its input is not sent again.
    with open(out / "results.jsonl", "a") as f:
        f.write(json.dumps({"id": "t07", "status": "error"}) + "\n")
    third = tooloop.batch.run(tasks, opts(server, tools=[note]), out=out, progress=False, session_db=db)
    assert third[7].status == "ok" and len(noted) == 64
    assert len(server.requests()) == 128, "a session holding its final answer sends nothing"
    with pytest.raises(tooloop.ConfigError, match="session_db"):
        tooloop.batch.run(tasks, {}, out=out, session_db=tmp_path / "x.jsonl")
    with pytest.raises(tooloop.ConfigError, match="not both"):
        tooloop.batch.run(tasks, {"session": str(db)}, out=out, session_db=db)


def test_budget_stops_the_batch_before_its_spend_would_pass_it(mock, tmp_path):
    # Every request costs $0.30 (100k input tokens at $3/M): two requests per task.
    usage = {"input_tokens": 100_000, "output_tokens": 0}
    server = mock(flow("step", usage=usage))

    def step() -> str:
        """One step."""
        return "stepped"

    out = tmp_path / "runs"
    results = tooloop.batch.run([{"id": f"b{i}", "input": f"task {i}"} for i in range(8)],
                                opts(server, tools=[step]), out=out, concurrency=2, budget_usd=1.0,
                                progress=False)
    statuses = [r.status for r in results]
    assert "budget" in statuses and "ok" in statuses, statuses
    assert set(statuses) <= {"ok", "budget"}
    sent = len(server.requests())
    assert sent * 0.30 <= 1.0 + 1e-9, f"{sent} requests sent: more than the budget allows"
    assert sum(r.cost_usd or 0.0 for r in results) <= 1.0 + 1e-9
    # Running tasks stopped between requests keep a valid session, and are resumed by a rerun.
    stopped = [r for r in results if r.status == "budget" and r.session]
    for r in stopped:
        info = tooloop.load_session(r.session)
        assert not info.entries or info.entries[0]["role"] == "user"
    recorded = {d["id"]: d["status"] for d in lines(out / "results.jsonl")}
    assert set(recorded.values()) <= {"ok", "budget"} and len(recorded) == 8


def test_a_batch_of_agents_on_a_python_model_stops_at_budget_usd(tmp_path):
    # The model is a Python callable (a host model: no HTTP, so no send gate) and reports no usage: each
    # request counts as its measured input plus max_tokens (20k out at $15/M: $0.30), held in the batch's
    # ledger before it is sent. Before, such a batch never stopped: every task ran to max_turns.
    lock = threading.Lock()
    sent = [0]

    def model(request: Dict[str, Any]) -> Dict[str, Any]:
        with lock:
            sent[0] += 1
        n = len(request["messages"])
        return {"content": [{"type": "tool_use", "id": f"t{n}", "name": "step", "input": {}}],
                "stop_reason": "tool_use"}

    def step() -> str:
        """One step."""
        return "stepped"

    options = {"model": MODEL, "provider": model, "tools": [step], "max_tokens": 20_000, "max_turns": 40}
    b = tooloop.batch.Batch([{"id": f"h{i}", "input": f"task {i}"} for i in range(6)], options,
                            out=tmp_path / "runs", concurrency=2, budget_usd=1.0, progress=False)
    results = b.run()
    assert {r.status for r in results} == {"budget"}, [(r.id, r.status, r.error) for r in results]
    assert sent[0] == 3, f"{sent[0]} requests: three of ~$0.30 fit under $1, a fourth does not"
    assert 0.9 < b.spent_usd <= 1.0, b.spent_usd
    assert 0.9 < sum(r.cost_usd or 0.0 for r in results) <= 1.0 + 1e-9
    # A budget with a model the price table does not know would refuse every request: said at once.
    with pytest.raises(tooloop.ConfigError, match="budget_usd"):
        tooloop.batch.run([{"id": "x", "input": "x"}], {"model": "my-local-model", "provider": model},
                          out=tmp_path / "other", budget_usd=1.0, progress=False)


def test_requests_per_minute_is_shared_by_all_agents(mock, tmp_path):
    server = mock(flow())
    tasks = [{"id": f"r{i}", "input": f"task {i}"} for i in range(6)]
    t0 = time.monotonic()
    tooloop.batch.run(tasks, opts(server), out=tmp_path / "fast", concurrency=6, progress=False)
    fast = time.monotonic() - t0
    t0 = time.monotonic()
    # 120 a minute = 2 a second, at most one second's worth at once: 2 now, then one every 0.5 s.
    results = tooloop.batch.run(tasks, opts(server), out=tmp_path / "slow", concurrency=6, progress=False,
                                requests_per_minute=120)
    slow = time.monotonic() - t0
    assert [r.status for r in results] == ["ok"] * 6
    assert slow >= 1.8 and slow > fast + 1.0, (fast, slow)


def test_a_429_retry_after_pauses_every_agent_of_the_batch(mock, tmp_path):
    limited = {"match": {}, "times": 1,
               "response": {"status": 429, "headers": {"retry-after": "1"},
                            "json": {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}}}
    server = mock(flow("one", "two", delay_ms=300, first=[limited]))
    stamps: Dict[str, List[float]] = {"one": [], "two": []}

    def one() -> str:
        """First."""
        stamps["one"].append(time.monotonic())
        return "1"

    def two() -> str:
        """Second."""
        stamps["two"].append(time.monotonic())
        return "2"

    t0 = time.monotonic()
    results = tooloop.batch.run([{"id": f"p{i}", "input": f"task {i}"} for i in range(4)],
                                opts(server, tools=[one, two], max_retries=2), out=tmp_path / "runs",
                                concurrency=4, progress=False)
    assert [r.status for r in results] == ["ok"] * 4
    # Each answer takes 0.3 s, so on its own each agent would run `two` at ~0.6 s. The first request's 429
    # (retry-after 1 s) pauses every agent of the batch, so no agent gets there before 1 + 0.3 s.
    assert len(stamps["two"]) == 4
    assert min(stamps["two"]) - t0 >= 1.25, [s - t0 for s in stamps["two"]]


def test_cancel_stops_every_agent_within_200ms_and_leaves_no_thread(mock, tmp_path):
    server = mock(flow(delay_ms=20_000))
    batch = tooloop.batch.Batch([{"id": f"c{i}", "input": f"task {i}"} for i in range(6)], opts(server),
                                out=tmp_path / "runs", concurrency=4, progress=False)
    got: List[Any] = []
    th = threading.Thread(target=lambda: got.append(batch.run()))
    th.start()
    deadline = time.monotonic() + 20
    while len(server.requests()) < 4 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(server.requests()) == 4
    t0 = time.monotonic()
    batch.cancel()
    th.join(timeout=5)
    took = time.monotonic() - t0
    assert not th.is_alive()
    assert took < 0.4, took  # 200 ms promise, plus the thread's own return
    results = got[0]
    assert [r.status for r in results] == ["cancelled"] * 6
    assert not [t for t in threading.enumerate() if t.name.startswith("tooloop-batch")]
    recorded = lines(tmp_path / "runs" / "results.jsonl")
    assert sorted(d["id"] for d in recorded) == ["c0", "c1", "c2", "c3"]  # the four that had started
    assert {d["status"] for d in recorded} == {"cancelled"}
    assert len(server.requests()) == 4


CTRL_C_SCRIPT = r"""
import sys, json
import tooloop
tasks = [{"id": f"i{i}", "input": "go"} for i in range(3)]
opts = {"model": "claude-sonnet-4-6", "base_url": sys.argv[1], "api_key": "sk-ant-mock", "max_retries": 0}
print("started", flush=True)
try:
    tooloop.batch.run(tasks, opts, out=sys.argv[2], concurrency=3, progress=False)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
"""


def test_ctrl_c_cancels_every_agent_and_records_them(mock, tmp_path):
    server = mock(flow(delay_ms=20_000))
    out = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-c", CTRL_C_SCRIPT, server.base_url, str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while len(server.requests()) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out_text, err = proc.communicate(timeout=10)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "interrupted" in out_text
    assert took < 2.0
    assert {d["status"] for d in lines(out / "results.jsonl")} == {"cancelled"}


def test_tokens_per_minute_is_shared_by_all_agents(mock, tmp_path):
    server = mock(flow())
    t0 = time.monotonic()
    # 600 tokens a minute = 10 a second, at most a second's worth at once: every request here is larger than
    # that, so after the first, one request a second.
    results = tooloop.batch.run([{"id": f"k{i}", "input": f"task {i}"} for i in range(3)], opts(server),
                                out=tmp_path / "runs", concurrency=3, progress=False, tokens_per_minute=600)
    took = time.monotonic() - t0
    assert [r.status for r in results] == ["ok"] * 3
    assert took >= 1.8, took
    assert len(server.requests()) == 3


def test_a_task_past_max_turns_or_its_own_spend_cap_ends_with_that_status(mock, tmp_path):
    server = mock(flow("noop", "noop"))

    def noop() -> str:
        """Do nothing."""
        return "x"

    tasks = [{"id": "turns", "input": "go"},
             {"id": "cap", "input": "go", "options": {"max_cost_usd": 0.00001, "max_turns": 10}}]
    results = tooloop.batch.run(tasks, opts(server, tools=[noop], max_turns=1), out=tmp_path / "runs",
                                progress=False)
    by_id = {r.id: r for r in results}
    assert by_id["turns"].status == "max_turns" and by_id["turns"].turns == 1
    assert "max_turns" in (by_id["turns"].error or "")
    assert by_id["cap"].status == "budget" and by_id["cap"].stop_reason == "budget"
    recorded = {d["id"]: d["status"] for d in lines(tmp_path / "runs" / "results.jsonl")}
    assert recorded == {"turns": "max_turns", "cap": "budget"}
    assert set(tooloop.batch.STATUSES) == {"ok", "error", "max_turns", "budget", "cancelled"}
