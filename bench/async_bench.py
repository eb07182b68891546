#!/usr/bin/env python3
"""Benchmark of the asyncio API (issue 40), in one run, as ratios.

    python3 bench/async_bench.py [--agents 64] [--runs 3] [--text-chars 4000] [--latency-ms 50]

Part 1 — many agents: N agents (default 64) each stream one run against the mock server (tests/mock), all at
once, two ways in the same process kind:
  async    one event loop, ``async for event in agent.astream(...)`` for every agent (asyncio.gather)
  threads  N threads, ``for event in agent.stream(...)`` each (the sync API), the main thread running a loop
Both run a ticker coroutine on the loop (it sleeps 5 ms and records how late it woke): the loop's lag, max and
p99; the same ticker on the same loop with nothing else running, just before, gives the machine's own noise
(``idle``: a loaded machine keeps the loop thread waiting for a core with no tooloop around); ``own`` is each
tick's lag less the time the loop thread waited for a CPU during it (from /proc's schedstat): what the process
itself (the GIL, tooloop's work on the loop) cost the loop. Reported: wall time, events/s and the throughput ratio async/threads, the lag, and memory per agent
((peak RSS - RSS after a warm-up run) / N), and the process's CPU time per event (all threads: steadier than
the wall time on a busy machine). The load average before and after is printed with the numbers. Each response waits ``--latency-ms`` before its first byte and
streams its text in small writes (``delay_ms_between``), standing in for a model.

Part 2 — one agent: one run streaming a large text with no delays (every event as fast as the mock sends
it), ``astream`` against ``stream``: time per event, and the ratio.

Run it against a release build of the extension (``maturin develop --release``, or the wheel): it prints
which tooloop it imported. Each measurement runs in a fresh interpreter (its memory is its own) against one mock server whose
scenario is reloaded before each; kinds alternate run by run and the median is reported. Not a test: the
numbers go in the issue's closing note.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "mock"))

MODEL = "claude-sonnet-4-6"


def reply(text: str, **extra: Any) -> Dict[str, Any]:
    return {"anthropic": {"id": "msg_bench", "type": "message", "role": "assistant", "model": MODEL,
                          "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                          "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": len(text) // 4}},
            **extra}


def words(chars: int) -> str:
    return ("agent loop tool stream delta token " * (chars // 36 + 1))[:chars]


def rss_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def peak_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


# -- the workers (one per measurement, in a fresh interpreter) -------------------------------------------------

def cpu_wait_ns() -> int:
    """How long (ns) the calling thread has waited for a CPU while runnable (Linux schedstat; 0 elsewhere)."""
    import threading

    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/schedstat", encoding="ascii") as f:
            return int(f.read().split()[1])
    except (OSError, IndexError, ValueError, AttributeError):
        return 0


async def ticker(lags: List[float], stop: Any, own: Optional[List[float]] = None) -> None:
    """Sleeps 5 ms at a time and records how late each wake-up was; in ``own``, the same less the time the loop
    thread spent waiting for a CPU meanwhile (the lag that is the process's own, not the machine's)."""
    import asyncio

    while not stop.is_set():
        before, waited = time.perf_counter(), cpu_wait_ns()
        await asyncio.sleep(0.005)
        lag = time.perf_counter() - before - 0.005
        lags.append(lag)
        if own is not None:
            own.append(max(0.0, lag - (cpu_wait_ns() - waited) / 1e9))


def lag_stats(lags: List[float]) -> Dict[str, float]:
    ordered = sorted(lags) or [0.0]
    return {"lag_max_ms": ordered[-1] * 1000, "lag_p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
            "ticks": len(lags)}


def work_many(kind: str, url: str, n: int) -> Dict[str, Any]:
    import asyncio
    import threading

    import tooloop

    agents = [tooloop.Agent(model=MODEL, base_url=url, api_key="sk-ant-mock", max_retries=0) for _ in range(n)]
    warm = tooloop.Agent(model=MODEL, base_url=url, api_key="sk-ant-mock", max_retries=0)
    list(warm.stream("warm up"))  # the first request of the process (imports, TLS-free connect) out of the count
    asyncio.run(warm.arun("warm up"))  # and the async machinery's first start
    base = rss_bytes()

    async def consume(agent: Any) -> int:
        count = 0
        async for _ in agent.astream("go"):
            count += 1
        return count

    def consume_sync(agent: Any, out: List[int]) -> None:
        count = 0
        for _ in agent.stream("go"):
            count += 1
        out.append(count)

    async def main() -> Dict[str, Any]:
        # The machine's own noise first: the same ticker on this loop with nothing else going on (on a loaded
        # machine the loop thread waits for a core with no tooloop around).
        idle: List[float] = []
        stop = asyncio.Event()
        tick = asyncio.ensure_future(ticker(idle, stop))
        await asyncio.sleep(1.5)  # about as long as the agents' part, so its worst case is comparable
        stop.set()
        await tick
        lags: List[float] = []
        own: List[float] = []
        stop = asyncio.Event()
        tick = asyncio.ensure_future(ticker(lags, stop, own))
        await asyncio.sleep(0.05)
        t0, c0 = time.perf_counter(), time.process_time()
        if kind == "async":
            counts = list(await asyncio.gather(*(consume(a) for a in agents)))
        else:
            counts = []
            threads = [threading.Thread(target=consume_sync, args=(a, counts)) for a in agents]
            for t in threads:
                t.start()
            while any(t.is_alive() for t in threads):
                await asyncio.sleep(0.01)
        secs, cpu = time.perf_counter() - t0, time.process_time() - c0
        stop.set()
        await tick
        noise = {f"idle_{k}": v for k, v in lag_stats(idle).items()}
        mine = {f"own_{k}": v for k, v in lag_stats(own).items()}
        return {"seconds": secs, "cpu": cpu, "events": sum(counts), "ok": len(counts), **lag_stats(lags), **noise,
                **mine}

    out = asyncio.run(main())
    out.update(base=base, peak=peak_bytes())
    return out


def work_one(kind: str, url: str) -> Dict[str, Any]:
    import asyncio

    import tooloop

    agent = tooloop.Agent(model=MODEL, base_url=url, api_key="sk-ant-mock", max_retries=0)
    if kind == "astream":
        async def consume() -> Dict[str, Any]:
            [_ async for _ in agent.astream("warm up")]  # imports and the first worker thread, not counted
            t0 = time.perf_counter()
            events = sum([1 async for _ in agent.astream("go")])
            return {"seconds": time.perf_counter() - t0, "events": events}

        return asyncio.run(consume())
    list(agent.stream("warm up"))
    t0 = time.perf_counter()
    events = sum(1 for _ in agent.stream("go"))
    return {"seconds": time.perf_counter() - t0, "events": events}


# -- the driver ------------------------------------------------------------------------------------------------

def measure(args: List[str], env: Dict[str, str]) -> Dict[str, Any]:
    proc = subprocess.run([sys.executable, __file__, "--worker", *args], capture_output=True, text=True, env=env,
                          timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"worker {args} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--agents", type=int, default=64)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--text-chars", type=int, default=4000, help="text per run in part 1")
    p.add_argument("--latency-ms", type=int, default=50)
    p.add_argument("--one-chars", type=int, default=200_000, help="text of part 2's one run")
    p.add_argument("--worker", nargs="+")
    a = p.parse_args()
    if a.worker:
        part, kind, url, *rest = a.worker
        out = work_many(kind, url, int(rest[0])) if part == "many" else work_one(kind, url)
        print(json.dumps(out))
        return 0

    from mockctl import MockServer

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH")]))}
    n = a.agents
    load_before = " ".join(f"{x:.1f}" for x in os.getloadavg())
    # Writes of chunk_size bytes of the encoded stream (not of the text), 15 ms apart: 4,000 chars in 8-char
    # deltas are about 55 KB of SSE, so about 80 writes of 6 events each, a streamed answer of about 1.3 s.
    streamed = {**reply(words(a.text_chars)), "delay_ms": a.latency_ms, "chunk_size": max(64, a.text_chars // 6),
                "delay_ms_between": 15}
    many: Dict[str, List[Dict[str, Any]]] = {"async": [], "threads": []}
    one: Dict[str, List[Dict[str, Any]]] = {"astream": [], "stream": []}
    with MockServer() as server:
        for _ in range(a.runs):
            for kind in ("async", "threads"):
                server.load({"responses": [reply("warm")] * 2 + [streamed] * n})
                many[kind].append(measure(["many", kind, server.base_url, str(n)], env))
        for _ in range(a.runs):
            for kind in ("astream", "stream"):
                server.load({"responses": [reply("warm"), {**reply(words(a.one_chars)), "delta_chars": 8}]})
                one[kind].append(measure(["one", kind, server.base_url], env))

    def med(rows: List[Dict[str, Any]], key: str) -> float:
        return float(statistics.median(r[key] for r in rows))

    import tooloop

    print(f"tooloop from {os.path.dirname(tooloop.__file__)}; load average before: {load_before}, after: "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    print(f"Part 1: {n} agents streaming at once ({a.text_chars} chars each, {a.latency_ms} ms to first byte), "
          f"median of {a.runs} runs")
    print(f"{'kind':8} {'wall s':>7} {'events/s':>9} {'cpu us/ev':>9} {'lag max ms':>10} {'lag p99 ms':>10} "
          f"{'idle max':>8} {'idle p99':>8} {'own max':>7} {'own p99':>7} {'RSS/agent KiB':>13}")
    rate = {}
    for kind, rows in many.items():
        assert all(r["ok"] == n for r in rows), rows
        rate[kind] = statistics.median(r["events"] / r["seconds"] for r in rows)
        per_agent = statistics.median((r["peak"] - r["base"]) / n / 1024 for r in rows)
        cpu = statistics.median(r["cpu"] / r["events"] * 1e6 for r in rows)
        print(f"{kind:8} {med(rows, 'seconds'):7.3f} {rate[kind]:9.0f} {cpu:9.1f} {med(rows, 'lag_max_ms'):10.1f} "
              f"{med(rows, 'lag_p99_ms'):10.1f} {med(rows, 'idle_lag_max_ms'):8.1f} {med(rows, 'idle_lag_p99_ms'):8.1f} "
              f"{med(rows, 'own_lag_max_ms'):7.1f} {med(rows, 'own_lag_p99_ms'):7.1f} {per_agent:13.0f}")
    print(f"throughput async/threads: {rate['async'] / rate['threads']:.2f}  "
          f"(worst lag max over runs, async: {max(r['lag_max_ms'] for r in many['async']):.1f} ms; "
          f"idle max and p99: the same ticker on the loop just before, nothing else running: the machine's noise)")
    print("  own: the lag less the time the loop thread waited for a CPU meanwhile (Linux schedstat)")
    for kind in many:
        print(f"  per run, {kind} lag max/p99 ms (own max): " + ", ".join(
            f"{r['lag_max_ms']:.1f}/{r['lag_p99_ms']:.1f} ({r['own_lag_max_ms']:.1f})" for r in many[kind]))
    print()
    print(f"Part 2: one agent, one run of {a.one_chars} chars in 8-char deltas, no delays, median of {a.runs}")
    per = {}
    for kind, rows in one.items():
        per[kind] = statistics.median(r["seconds"] / r["events"] * 1e6 for r in rows)
        print(f"{kind:8} {med(rows, 'events'):8.0f} events  {med(rows, 'seconds'):.3f} s  {per[kind]:.2f} us/event")
    print(f"astream/stream per event: {per['astream'] / per['stream']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
