"""Many agents at once: `tooloop.batch` (threads) beside the official `anthropic` SDK's tool runner driven by a
thread pool and beside another Python agent library (pydantic-ai's Agent, `run_sync` on a thread pool, when
installed), N agents at a time (N = 1, 16, 64, 256), in one run, as ratios; then the same 64-task batch on
tooloop's threads engine and on a local Ray.

Every task is the same small agent run against the mock server (tests/mock): the model calls one tool
(`lookup`), the tool answers, the model gives its final answer — two requests per task. Each response waits
`--latency-ms` (default 50 ms) before its first byte, standing in for the model. Each (library, N) runs in a
fresh interpreter, so its memory is its own: "RSS/agent" is (peak RSS - RSS after a warm-up task) / N.
tooloop's numbers include what the SDK's runner does not do: each task's session file, written before every
request, and results.jsonl.

    python3 bench/batch_bench.py [--sizes 1,16,64,256] [--latency-ms 50] [--no-ray]

Needs tooloop and anthropic installed in the running interpreter; Ray for the second part
(`pip install "tooloop[ray]" anthropic "pydantic-ai-slim[anthropic]"`).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "mock"))

MODEL = "claude-sonnet-4-6"


def lookup() -> str:
    """Look the answer up."""
    return "42"


def scenario(latency_ms: int) -> Dict[str, Any]:
    def msg(content: List[Dict[str, Any]], stop: str) -> Dict[str, Any]:
        return {"delay_ms": latency_ms,
                "anthropic": {"id": "msg_bench", "type": "message", "role": "assistant", "model": MODEL,
                              "content": content, "stop_reason": stop, "stop_sequence": None,
                              "usage": {"input_tokens": 200, "output_tokens": 20}}}

    return {"responses": [], "routes": [
        {"match": {"body_contains": "toolu_lookup"}, "response": msg([{"type": "text", "text": "It is 42."}], "end_turn")},
        {"match": {}, "response": msg([{"type": "tool_use", "id": "toolu_lookup", "name": "lookup", "input": {}}],
                                      "tool_use")},
    ]}


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# -- the workers (one per measurement, in a fresh interpreter) -------------------------------------------------

def work_tooloop(url: str, n: int, tasks: int) -> Dict[str, Any]:
    import tooloop
    import tooloop.batch

    opts = {"model": MODEL, "base_url": url, "api_key": "sk-ant-mock", "max_retries": 0, "tools": [lookup],
            "max_tokens": 1024}
    with tempfile.TemporaryDirectory() as d:
        tooloop.batch.run([{"id": "warm", "input": "warm up"}], opts, out=os.path.join(d, "warm"), progress=False)
        base = rss_bytes()
        t0 = time.perf_counter()
        res = tooloop.batch.run([{"id": f"t{i}", "input": f"question {i}"} for i in range(tasks)], opts,
                                out=os.path.join(d, "runs"), concurrency=n, progress=False)
        secs = time.perf_counter() - t0
    ok = sum(r.ok for r in res)
    return {"seconds": secs, "ok": ok, "base": base, "peak": peak_bytes()}


def timed_pool(one: Callable[[int], bool], n: int, tasks: int) -> Dict[str, Any]:
    """One warm-up call, then `tasks` calls of `one` on a thread pool of `n`: seconds, successes, memory."""
    from concurrent.futures import ThreadPoolExecutor

    one(-1)
    base = rss_bytes()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=n) as pool:
        ok = sum(pool.map(one, range(tasks)))
    secs = time.perf_counter() - t0
    return {"seconds": secs, "ok": ok, "base": base, "peak": peak_bytes()}


def work_sdk(url: str, n: int, tasks: int) -> Dict[str, Any]:

    import anthropic
    from anthropic import beta_tool

    tool = beta_tool(lookup)
    client = anthropic.Anthropic(base_url=url, api_key="sk-ant-mock", max_retries=0,
                                 http_client=None)

    def one(i: int) -> bool:
        runner = client.beta.messages.tool_runner(
            model=MODEL, max_tokens=1024, tools=[tool], messages=[{"role": "user", "content": f"question {i}"}])
        last = None
        for message in runner:
            last = message
        return last is not None and last.stop_reason == "end_turn"

    return timed_pool(one, n, tasks)


def work_pydantic_ai(url: str, n: int, tasks: int) -> Dict[str, Any]:
    """The same workload through another Python agent library: pydantic-ai's Agent (its Anthropic model on
    the official SDK), `run_sync` on a thread pool of N, one agent per thread, reused for that thread's tasks
    (one agent shared by every thread fails: its async client is bound to the first thread's event loop)."""
    import threading

    from pydantic_ai import Agent
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    local = threading.local()

    def one(i: int) -> bool:
        agent = getattr(local, "agent", None)
        if agent is None:
            model = AnthropicModel(MODEL, provider=AnthropicProvider(base_url=url, api_key="sk-ant-mock"))
            agent = local.agent = Agent(model, tools=[lookup], retries=0)
        return bool(agent.run_sync(f"question {i}").output == "It is 42.")

    return timed_pool(one, n, tasks)


def work_ray(url: str, n: int, tasks: int) -> Dict[str, Any]:
    import ray

    import tooloop
    import tooloop.batch

    os.environ["PYTHONPATH"] = os.pathsep.join([HERE] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    opts = {"model": MODEL, "base_url": url, "api_key": "sk-ant-mock", "max_retries": 0,
            "tools": ["batch_bench:lookup"], "max_tokens": 1024}
    out: Dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as d:
        job = [{"id": f"t{i}", "input": f"question {i}"} for i in range(tasks)]
        t0 = time.perf_counter()
        res = tooloop.batch.run(job, opts, out=os.path.join(d, "threads"), concurrency=n, progress=False)
        out["threads"] = time.perf_counter() - t0
        out["threads_ok"] = sum(r.ok for r in res)
        t0 = time.perf_counter()
        ray.init(include_dashboard=False, log_to_driver=False)
        out["ray_start"] = time.perf_counter() - t0
        try:
            t0 = time.perf_counter()
            res = tooloop.batch.run(job, opts, out=os.path.join(d, "ray"), concurrency=n, engine="ray",
                                    progress=False)
            out["ray"] = time.perf_counter() - t0
            out["ray_ok"] = sum(r.ok for r in res)
        finally:
            t0 = time.perf_counter()
            ray.shutdown()
            out["ray_stop"] = time.perf_counter() - t0
    return out


WORKERS = {"tooloop": work_tooloop, "sdk": work_sdk, "pydantic_ai": work_pydantic_ai, "ray": work_ray}


def measure(kind: str, url: str, n: int, tasks: int) -> Dict[str, Any]:
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", kind, url, str(n), str(tasks)],
                          capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"{kind} N={n} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1,16,64,256")
    ap.add_argument("--latency-ms", type=int, default=50)
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument("--worker", nargs=4, metavar=("KIND", "URL", "N", "TASKS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        kind, url, n, tasks = args.worker
        print(json.dumps(WORKERS[kind](url, int(n), int(tasks))))
        return

    from mockctl import MockServer

    sizes = [int(s) for s in args.sizes.split(",")]
    with MockServer(scenario(args.latency_ms)) as mock:
        print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; each response after {args.latency_ms} ms; "
              "a task = 2 requests + 1 tool call")
        import importlib.util

        pai = importlib.util.find_spec("pydantic_ai") is not None
        print(f"{'N':>4} {'tasks':>6} | {'tooloop runs/s':>14} {'RSS/agent':>10} | {'SDK runs/s':>10} "
              f"{'RSS/agent':>10} | {'runs/s ratio':>12} {'RSS ratio':>9} | {'pydantic-ai runs/s':>18} "
              f"{'RSS/agent':>10} {'runs/s ratio':>12}")
        for n in sizes:
            tasks = max(20, 2 * n)
            t = measure("tooloop", mock.base_url, n, tasks)
            s = measure("sdk", mock.base_url, n, tasks)
            assert t["ok"] == tasks and s["ok"] == tasks, (t, s)
            t_rate, s_rate = tasks / t["seconds"], tasks / s["seconds"]
            t_mem = max(0, t["peak"] - t["base"]) / n / 1e6
            s_mem = max(0, s["peak"] - s["base"]) / n / 1e6
            ratio_mem = f"{s_mem / t_mem:.1f}x" if t_mem > 0 else "-"
            line = (f"{n:>4} {tasks:>6} | {t_rate:>14.1f} {t_mem:>8.2f}MB | {s_rate:>10.1f} {s_mem:>8.2f}MB | "
                    f"{t_rate / s_rate:>11.2f}x {ratio_mem:>9} | ")
            if pai:
                p = measure("pydantic_ai", mock.base_url, n, tasks)
                assert p["ok"] == tasks, p
                p_rate = tasks / p["seconds"]
                p_mem = max(0, p["peak"] - p["base"]) / n / 1e6
                line += f"{p_rate:>18.1f} {p_mem:>8.2f}MB {t_rate / p_rate:>11.2f}x"
            else:
                line += f"{'not installed (pip install pydantic-ai-slim[anthropic])':>18}"
            print(line, flush=True)
        if not args.no_ray:
            r = measure("ray", mock.base_url, 16, 64)
            assert r["threads_ok"] == 64 and r["ray_ok"] == 64, r
            print(f"\n64 tasks, 16 at a time: threads {r['threads']:.2f} s; local Ray {r['ray']:.2f} s "
                  f"(+ {r['ray_start']:.1f} s to start the cluster, {r['ray_stop']:.1f} s to stop it)")


if __name__ == "__main__":
    main()
