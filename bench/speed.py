#!/usr/bin/env python3
"""Every speed figure in one run, quiet and loaded: tooloop against the official `anthropic` SDK
and bare `http.client`, all against the same local mock server.

    python3 bench/speed.py [--rounds 3] [--requests 300] [--runs 300] [--busy 2] [--no-rust] [--json OUT]
                           [--only small,agent,big,turns] [--one-write] [--slices 10]

1. Small streamed requests per second (`--requests` one after another on one keep-alive connection, median
   of `--rounds`): tooloop `Client.stream` (every event, then `final_message()`), tooloop `Client.create`,
   the SDK's `messages.create(stream=True)` (every raw event), bare `http.client` (stream read to the end).
   Targets: stream ≥ 2× the SDK with the machine loaded, and within 1.5× of `create`. The mock writes a
   streamed answer an SSE event per write (pre-rendered: the same bytes for every request); with the machine
   loaded the server is often preempted between two writes and the client wakes more than once per answer, so
   `--one-write` (each streamed answer written in one piece, for every contender) shows the client's own cost.
   And small agent runs per second (`--runs` per round, section `agent`): `Agent.run` and `Agent.stream`
   against the mock (one streamed request each), and `Agent.run` with a Python model callable and a Python
   tool (two turns, no network).
2. A 1 MB stream of ~70k text deltas (bench/make_stream_scenario.py): the raw bytes with `http.client`,
   tooloop with every event as a dict, tooloop `text_stream`, the SDK's raw events. Targets: every event as
   a dict within 3× of the bytes, `text_stream` within 2×. Section `wires`: the same text streamed as Chat
   Completions chunks and as Responses events, an agent run on each; nanoseconds per stream byte. Target:
   Responses no slower per byte than Chat Completions.
4. With `--callgrind`: instructions per event on the 1 MB stream (valgrind's callgrind, independent of the
   machine's load): the whole client process streaming, minus the same process without the stream, divided
   by the stream's events; for every event as a dict and for `text_stream`. With `--callgrind-small`:
   instructions per small request (streamed, every event then `final_message()`; and `create`): the client
   process making 20 warm-up requests then `--cg-requests` more, minus the same process stopping after the
   warm-up, divided by `--cg-requests` (the imports' objects frozen out of the GC, PYTHONHASHSEED=0). The
   counts still move with the machine's load, by up to ~15 %: the waits' 20 ms slices and the 50 ms poll
   hook go by the clock, and under valgrind the client runs ~50x slower. Compare builds back to back
   (`PYTHONPATH=<unpacked wheel of the other build>`), better twice.
3. The agent loop's own cost per turn at turns 1-10 and 190-200: Rust with the scripted model
   (`cargo bench --bench agent_loop`, skipped with `--no-rust`), and Python with a Python model callable and
   a Python tool (the time between two calls of the model). Target: 190-200 within 1.5× of 1-10.

"Loaded" = `--busy` processes running `while 1: pass`, started here and killed by pid at the end of each
loaded section. Needs tooloop installed in the running interpreter (a release build:
`maturin develop --release`); the SDK is optional (its columns say n/a without it).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Optional
from urllib.parse import urlparse

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "mock"))
sys.path.insert(0, HERE)

import tooloop  # noqa: E402
from make_stream_scenario import make_scenario  # noqa: E402
from mockctl import MockServer  # noqa: E402

MODEL = "claude-sonnet-4-6"
KEY = "sk-ant-bench"
HEADERS = {"content-type": "application/json", "x-api-key": KEY, "anthropic-version": "2023-06-01"}
SMALL_MESSAGE = {
    "id": "msg_bench", "type": "message", "role": "assistant", "model": MODEL,
    "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "stop_sequence": None,
    "usage": {"input_tokens": 5, "output_tokens": 1},
}
SMALL = {"responses": [], "routes": [{"match": {}, "response": {"anthropic": SMALL_MESSAGE}}]}
# `--one-write`: the same answers, each streamed body written in one piece (the mock's `chunk_size`) instead
# of an SSE event per write, for every contender alike.
SMALL_ONE_WRITE = {"responses": [], "routes": [{"match": {}, "response": {"anthropic": SMALL_MESSAGE,
                                                                          "chunk_size": 1 << 20}}]}
REQUEST = {"model": MODEL, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
BIG_MESSAGES = [{"role": "user", "content": "Write a very long text."}]


@contextmanager
def busy(n: int) -> Iterator[None]:
    """`n` busy-looping processes for the duration (killed by pid)."""
    procs = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(n)]
    try:
        time.sleep(0.3)
        yield
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def sdk_client(base_url: str) -> Any:
    try:
        import anthropic
    except ImportError:
        return None
    return anthropic.Anthropic(base_url=base_url, api_key=KEY, max_retries=0)


# ---------------------------------------------------------------------------------------------------------
# 1. small streamed requests
# ---------------------------------------------------------------------------------------------------------

def small_clients(base_url: str) -> Dict[str, Callable[[], None]]:
    client = tooloop.Client(base_url=base_url, api_key=KEY, max_retries=0)
    streamed = dict(REQUEST, stream=True)

    def tl_stream() -> None:
        with client.stream(streamed) as s:
            for _ in s:
                pass
            assert s.final_message()["content"][0]["text"] == "ok"

    def tl_create() -> None:
        assert client.create(REQUEST)["content"][0]["text"] == "ok"

    u = urlparse(base_url)
    conn = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port)
    body = json.dumps(streamed).encode()

    def raw() -> None:
        conn.request("POST", "/v1/messages", body=body, headers=HEADERS)
        resp = conn.getresponse()
        data = resp.read()
        assert resp.status == 200 and b"message_stop" in data

    out = {"tooloop stream": tl_stream, "tooloop create": tl_create, "http.client stream": raw}
    sdk = sdk_client(base_url)
    if sdk is not None:
        def sdk_stream() -> None:
            text = ""
            for ev in sdk.messages.create(**REQUEST, stream=True):
                if ev.type == "content_block_delta":
                    text += ev.delta.text
            assert text == "ok"
        out["SDK stream"] = sdk_stream
    return out


def cpu_seconds(pid: Optional[int] = None) -> float:
    """CPU time of this process, or of process `pid` (all its threads, from /proc/PID/task/*/schedstat: ns,
    not clock ticks; 0 where there is none). A thread that ended in between takes its time with it."""
    if pid is None:
        return time.process_time()
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total / 1e9


def small(mock: MockServer, rounds: int, requests: int, scenario: Dict[str, Any] = SMALL,
          slices: int = 1) -> Dict[str, float]:
    """Requests per second per client (median of `rounds`), and under "cpu <name>" the CPU µs per request of
    the client process and of the mock server (medians): what the client costs, and the floor the server's
    own work sets (a streamed answer costs the mock more than a JSON one). With `slices` > 1 each round runs
    every client's requests in that many slices, the clients taking turns, so a load that comes and goes
    (another process's bursts) falls on all of them alike instead of on whichever ran at the time."""
    clients = small_clients(mock.base_url)
    server = mock.proc.pid if mock.proc is not None else None
    rates: Dict[str, List[float]] = {k: [] for k in clients}
    cpu: Dict[str, List[tuple]] = {k: [] for k in clients}
    mock.load(scenario)
    for _ in range(rounds):
        spent = {k: [0.0, 0.0, 0.0] for k in clients}  # wall, client CPU, server CPU
        for name, one in clients.items():
            for _ in range(10):
                one()
        for part in range(slices):
            n = requests // slices + (1 if part < requests % slices else 0)
            for name, one in clients.items():
                mock.load(scenario)  # clears the recording
                c0, s0 = cpu_seconds(), cpu_seconds(server)
                t = time.perf_counter()
                for _ in range(n):
                    one()
                took = spent[name]
                took[0] += time.perf_counter() - t
                took[1] += cpu_seconds() - c0
                took[2] += cpu_seconds(server) - s0
        for name, (wall, client_cpu, server_cpu) in spent.items():
            rates[name].append(requests / wall)
            cpu[name].append((client_cpu / requests * 1e6, server_cpu / requests * 1e6))
    out: Dict[str, Any] = {k: statistics.median(v) for k, v in rates.items()}
    for k, v in cpu.items():
        out[f"cpu {k}"] = (statistics.median(c for c, _ in v), statistics.median(s for _, s in v))
    return out


# ---------------------------------------------------------------------------------------------------------
# 1b. small agent runs
# ---------------------------------------------------------------------------------------------------------

def agent_runners(base_url: str) -> Dict[str, Callable[[], None]]:
    """One small agent run each (the conversation reset before it, so every run sends the same request):
    against the mock (one streamed request), and with a Python model callable and a Python tool (two
    turns, no network: the loop's own cost and its thread hops)."""
    net = tooloop.Agent(MODEL, base_url=base_url, api_key=KEY, max_retries=0)

    def count(n: int) -> str:
        """Count.

        Args:
            n: a number
        """
        return f"ok {n}"

    def model(request: Dict[str, Any]) -> Dict[str, Any]:
        if len(request["messages"]) > 1:
            return {"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn"}
        return {"content": [{"type": "tool_use", "id": "toolu_1", "name": "count", "input": {"n": 1}}],
                "stop_reason": "tool_use"}

    local = tooloop.Agent(MODEL, provider=model, tools=[count])

    def run_net() -> None:
        net.reset()
        assert net.run("hi").text == "ok"

    def stream_net() -> None:
        net.reset()
        s = net.stream("hi")
        for _ in s:
            pass
        assert s.result is not None and s.result.text == "ok"

    def run_local() -> None:
        local.reset()
        assert local.run("count").text == "ok"

    return {"agent.run (mock)": run_net, "agent.stream (mock)": stream_net, "agent.run (py model+tool)": run_local}


def agent_runs(mock: MockServer, rounds: int, runs: int, scenario: Dict[str, Any] = SMALL) -> Dict[str, float]:
    """Runs per second per kind (median of `rounds`), and under "cpu <name>" the client's and the mock
    server's CPU µs per run (medians), as `small` measures requests."""
    runners = agent_runners(mock.base_url)
    server = mock.proc.pid if mock.proc is not None else None
    rates: Dict[str, List[float]] = {k: [] for k in runners}
    cpu: Dict[str, List[tuple]] = {k: [] for k in runners}
    for _ in range(rounds):
        for name, one in runners.items():
            mock.load(scenario)
            for _ in range(10):
                one()
            c0, s0 = cpu_seconds(), cpu_seconds(server)
            t = time.perf_counter()
            for _ in range(runs):
                one()
            rates[name].append(runs / (time.perf_counter() - t))
            cpu[name].append(((cpu_seconds() - c0) / runs * 1e6, (cpu_seconds(server) - s0) / runs * 1e6))
    out: Dict[str, Any] = {k: statistics.median(v) for k, v in rates.items()}
    for k, v in cpu.items():
        out[f"cpu {k}"] = (statistics.median(c for c, _ in v), statistics.median(s for _, s in v))
    return out


# ---------------------------------------------------------------------------------------------------------
# 2. the 1 MB stream
# ---------------------------------------------------------------------------------------------------------

def big_once(kind: str, base_url: str, text_len: int) -> float:
    start = time.perf_counter()
    got = 0
    if kind == "bytes":
        u = urlparse(base_url)
        conn = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port)
        body = json.dumps({"model": MODEL, "max_tokens": 64000, "messages": BIG_MESSAGES, "stream": True})
        conn.request("POST", "/v1/messages", body, HEADERS)
        resp = conn.getresponse()
        while resp.read1(65536):
            pass
        conn.close()
        got = text_len
    elif kind in ("tooloop events", "tooloop text_stream"):
        client = tooloop.Client(base_url=base_url, api_key=KEY, max_retries=0)
        with client.stream({"model": MODEL, "max_tokens": 64000, "messages": BIG_MESSAGES}) as s:
            if kind == "tooloop events":
                for ev in s:
                    if ev["type"] == "content_block_delta" and ev["delta"]["type"] == "text_delta":
                        got += len(ev["delta"]["text"])
            else:
                for text in s.text_stream:
                    got += len(text)
            assert len(s.final_message()["content"][0]["text"]) == text_len
    else:
        sdk = sdk_client(base_url)
        for ev in sdk.messages.create(model=MODEL, max_tokens=64000, messages=BIG_MESSAGES, stream=True):
            if ev.type == "content_block_delta" and ev.delta.type == "text_delta":
                got += len(ev.delta.text)
    elapsed = time.perf_counter() - start
    assert got == text_len, (kind, got, text_len)
    return elapsed


def big(mock: MockServer, scenario: Dict[str, Any], text_len: int, rounds: int) -> Dict[str, float]:
    kinds = ["bytes", "tooloop events", "tooloop text_stream"]
    if sdk_client(mock.base_url) is not None:
        kinds.append("SDK events")
    times: Dict[str, List[float]] = {k: [] for k in kinds}
    for _ in range(rounds):
        for k in kinds:
            mock.load(scenario)
            times[k].append(big_once(k, mock.base_url, text_len))
    return {k: statistics.median(v) for k, v in times.items()}


# ---------------------------------------------------------------------------------------------------------
# 2b. the same text on the two OpenAI wires: Chat Completions chunks and Responses events
# ---------------------------------------------------------------------------------------------------------

def wire_scenarios(text: str, delta_chars: int = 16) -> Dict[str, Dict[str, Any]]:
    """One pre-rendered stream of `text` per OpenAI wire, through the mock server's own encoders (the bytes the
    suites' mock sends), as `raw` SSE items so the server does no encoding per request."""
    import mockserver

    completion = {"id": "chatcmpl-bench", "object": "chat.completion", "created": 1, "model": "gpt-5",
                  "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                               "finish_reason": "stop"}],
                  "usage": {"prompt_tokens": 12, "completion_tokens": len(text) // 4, "total_tokens": 0}}
    response = {"id": "resp_bench", "object": "response", "created_at": 1, "status": "completed", "model": "gpt-5",
                "output": [{"type": "message", "id": "msg_bench", "status": "completed", "role": "assistant",
                            "content": [{"type": "output_text", "text": text, "annotations": []}]}],
                "usage": {"input_tokens": 12, "output_tokens": len(text) // 4, "total_tokens": 0}}
    chat = [{"data": d} for d in mockserver.openai_chunks(completion, delta_chars, True, False)]
    resp = [{"event": e["type"], "data": e} for e in mockserver.responses_events(response, delta_chars)]
    out = {}
    for name, items in (("chat completions", chat), ("responses", resp)):
        raw = [{"raw": mockserver.encode_sse(i, "\n").decode()} for i in items]
        out[name] = {"responses": [{"sse": raw, "chunk_size": 16384}]}
    return out


def wires(scenarios: Dict[str, Dict[str, Any]], text_len: int, rounds: int) -> Dict[str, float]:
    """Nanoseconds per stream byte for an agent run (streamed) on each OpenAI wire: the core's decoder and
    fold, the same text in the same deltas."""
    sizes = {k: sum(len(i["raw"].encode()) for i in sc["responses"][0]["sse"]) for k, sc in scenarios.items()}
    times: Dict[str, List[float]] = {k: [] for k in scenarios}
    with MockServer({"responses": []}) as mock:
        for _ in range(rounds):
            for name, sc in scenarios.items():
                mock.load(sc)
                provider = "openai" if name == "chat completions" else "openai-responses"
                agent = tooloop.Agent("gpt-5", provider=provider, base_url=mock.base_url + "/v1", api_key=KEY,
                                      stream=True, max_retries=0, max_tokens=64000)
                start = time.perf_counter()
                result = agent.run("hi")
                times[name].append(time.perf_counter() - start)
                assert len(result.text) == text_len, (name, len(result.text), text_len)
    return {k: statistics.median(v) * 1e9 / sizes[k] for k, v in times.items()} | {
        f"bytes {k}": float(v) for k, v in sizes.items()}


# ---------------------------------------------------------------------------------------------------------
# 3. per-turn cost
# ---------------------------------------------------------------------------------------------------------

def python_turns(turns: int, rounds: int) -> Dict[str, float]:
    """Mean µs between two model calls at turns 1-10 and 190-200 (median over rounds): everything the loop
    does per turn (record the turn, run the Python tool, render and convert the next request)."""
    def count(n: int) -> str:
        """Count.

        Args:
            n: a number
        """
        return f"ok {n}"

    firsts: List[float] = []
    lasts: List[float] = []
    for _ in range(rounds):
        stamps: List[float] = []

        def model(request: Dict[str, Any]) -> Dict[str, Any]:
            stamps.append(time.perf_counter())
            k = len(stamps)
            if k > turns:
                return {"content": [{"type": "text", "text": "Done."}], "stop_reason": "end_turn"}
            return {"content": [{"type": "text", "text": f"Step {k}."},
                                {"type": "tool_use", "id": f"toolu_{k:04d}", "name": "count", "input": {"n": k}}],
                    "stop_reason": "tool_use"}

        agent = tooloop.Agent(MODEL, provider=model, tools=[count], max_turns=None)
        agent.run("Count until done.")
        gaps = [(b - a) * 1e6 for a, b in zip(stamps, stamps[1:])]
        firsts.append(statistics.mean(gaps[0:10]))
        lasts.append(statistics.mean(gaps[189:200]) if len(gaps) >= 200 else float("nan"))
    return {"1-10": statistics.median(firsts), "190-200": statistics.median(lasts)}


def rust_turns() -> Optional[Dict[str, float]]:
    env = dict(os.environ, AGENT_BENCH_RUNS="5", AGENT_BENCH_TURNS="200")
    p = subprocess.run(["cargo", "bench", "-q", "-p", "tooloop", "--bench", "agent_loop"], cwd=ROOT, env=env,
                       capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stderr[-2000:], file=sys.stderr)
        return None
    out: Dict[str, float] = {}
    for line in p.stdout.splitlines():  # the first table: no session
        m = re.match(r"\|\s*(\d+-\d+)\s*\|\s*([\d.]+) µs", line)
        if m and m.group(1) not in out:
            out[m.group(1)] = float(m.group(2))
    return out


def callgrind(scenario: Dict[str, Any], text_len: int, keep: Optional[str] = None) -> Dict[str, float]:
    """Instructions per SSE event of the 1 MB stream, per client kind (see the module docs); `keep`: a folder
    to copy each kind's callgrind output to (for `callgrind_annotate`)."""
    import shutil
    import tempfile

    events = len(scenario["responses"][0]["sse"])
    totals: Dict[str, int] = {}
    with MockServer(SMALL) as mock, tempfile.TemporaryDirectory() as tmp:
        for kind in ("none", "tooloop events", "tooloop text_stream"):
            mock.load(scenario)
            out = os.path.join(tmp, "cg.out")
            p = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
                                __file__, "--cg-worker", kind, "--base-url", mock.base_url, "--text-len", str(text_len)],
                               capture_output=True, text=True)
            if p.returncode != 0:
                print(p.stderr[-2000:], file=sys.stderr)
                raise SystemExit(1)
            with open(out) as f:
                totals[kind] = next(int(line.split()[1]) for line in f if line.startswith(("summary:", "totals:")))
            if keep:
                os.makedirs(keep, exist_ok=True)
                shutil.copy(out, os.path.join(keep, kind.replace(" ", "_") + ".callgrind"))
    return {k: (v - totals["none"]) / events for k, v in totals.items() if k != "none"} | {"events": events}


def callgrind_small(requests: int) -> Dict[str, float]:
    """Instructions per small request, streamed and not (see the module docs)."""
    import tempfile

    out_per: Dict[str, float] = {}
    env = dict(os.environ, PYTHONHASHSEED="0")
    with MockServer(SMALL) as mock, tempfile.TemporaryDirectory() as tmp:
        for kind in ("tooloop stream", "tooloop create"):
            totals = []
            for n in (0, requests):
                mock.load(SMALL)
                out = os.path.join(tmp, "cg.out")
                p = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
                                    __file__, "--cg-small-worker", kind, "--base-url", mock.base_url,
                                    "--cg-requests", str(n)], capture_output=True, text=True, env=env)
                if p.returncode != 0:
                    print(p.stderr[-2000:], file=sys.stderr)
                    raise SystemExit(1)
                with open(out) as f:
                    totals.append(next(int(line.split()[1]) for line in f if line.startswith(("summary:", "totals:"))))
            out_per[kind] = (totals[1] - totals[0]) / requests
    return out_per


def cg_small_worker(kind: str, base_url: str, requests: int) -> None:
    import gc

    one = small_clients(base_url)[kind]
    for _ in range(20):
        one()
    gc.collect()
    gc.freeze()  # a full collection over the imports' objects would swamp a request
    for _ in range(requests):
        one()


# ---------------------------------------------------------------------------------------------------------

def fmt_ratio(a: Optional[float], b: Optional[float]) -> str:
    return f"{a / b:.2f}x" if a and b else "n/a"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--busy", type=int, default=2)
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--no-rust", action="store_true", help="skip the Rust agent-loop bench (it compiles)")
    ap.add_argument("--runs", type=int, default=300, help="small agent runs per round (section 'agent')")
    ap.add_argument("--only", default="small,agent,big,wires,turns")
    ap.add_argument("--slices", type=int, default=1,
                    help="section small: each round's requests in this many slices, the clients taking turns")
    ap.add_argument("--one-write", action="store_true",
                    help="sections small and agent: the mock writes each streamed answer in one piece (for all)")
    ap.add_argument("--json")
    ap.add_argument("--callgrind", action="store_true", help="only the instruction counts per event")
    ap.add_argument("--callgrind-small", action="store_true",
                    help="only the instruction counts per small request (stream and create)")
    ap.add_argument("--cg-requests", type=int, default=100)
    ap.add_argument("--cg-keep", help="with --callgrind: keep each kind's callgrind output in this folder")
    ap.add_argument("--cg-small-worker", help=argparse.SUPPRESS)
    ap.add_argument("--cg-worker", help=argparse.SUPPRESS)
    ap.add_argument("--base-url", help=argparse.SUPPRESS)
    ap.add_argument("--text-len", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.cg_small_worker:
        cg_small_worker(a.cg_small_worker, a.base_url, a.cg_requests)
        return 0
    if a.callgrind_small:
        cg = callgrind_small(a.cg_requests)
        print(f"callgrind, instructions per small request ({a.cg_requests} after 20 warm-up ones, whole process)")
        for k, v in cg.items():
            print(f"  {k:<20} {v:9,.0f}")
        print(f"  stream/create {cg['tooloop stream'] / cg['tooloop create']:.2f}x")
        return 0
    if a.cg_worker:
        tooloop.Client(base_url=a.base_url, api_key=KEY, max_retries=0)
        if a.cg_worker != "none":
            big_once(a.cg_worker, a.base_url, a.text_len)
        return 0
    if a.callgrind:
        sc = make_scenario(1_200_000, 16, 16384, False)
        text = sc.pop("text")
        cg = callgrind(sc, len(text), a.cg_keep)
        print(f"callgrind, 1 MB stream of {cg['events']:,} SSE events: instructions per event "
              f"(whole process, minus the same process without the stream)")
        for k, v in cg.items():
            if k != "events":
                print(f"  {k:<20} {v:8.0f}")
        return 0
    only = set(a.only.split(","))
    load1 = os.getloadavg()[0]
    print(f"{os.cpu_count()} CPUs, load average {load1:.2f} at start; python {sys.version.split()[0]}; "
          f"{a.rounds} rounds{f' of {a.slices} slices' if a.slices > 1 else ''}, medians; small answers streamed "
          + ("in one write" if a.one_write else "an SSE event per write"))
    res: Dict[str, Any] = {"load_at_start": load1}
    scenario = make_scenario(1_200_000, 16, 16384, False)
    text = scenario.pop("text")
    with MockServer(SMALL) as mock:
        for cond in ("quiet", "loaded"):
            n = 0 if cond == "quiet" else a.busy
            with busy(n):
                small_sc = SMALL_ONE_WRITE if a.one_write else SMALL
                if "small" in only:
                    res[f"small {cond}"] = small(mock, a.rounds, a.requests, small_sc, a.slices)
                if "agent" in only:
                    res[f"agent {cond}"] = agent_runs(mock, a.rounds, a.runs, small_sc)
                if "big" in only:
                    res[f"big {cond}"] = big(mock, scenario, len(text), a.rounds)
    if "wires" in only:
        res["wires"] = wires(wire_scenarios(text), len(text), a.rounds)
    if "turns" in only:
        res["python turns"] = python_turns(a.turns, a.rounds)
        if not a.no_rust:
            res["rust turns"] = rust_turns()

    for cond in ("quiet", "loaded"):
        s = res.get(f"small {cond}")
        if s:
            print(f"\n{a.requests} small streamed requests, {cond}" + (f" ({a.busy} busy loops)" if cond == "loaded" else ""))
            for k, v in s.items():
                if not k.startswith("cpu "):
                    client_us, server_us = s[f"cpu {k}"]
                    print(f"  {k:<20} {v:7.0f} req/s   CPU per request: client {client_us:4.0f} µs, "
                          f"mock server {server_us:4.0f} µs")
            print(f"  tooloop stream: {fmt_ratio(s['tooloop stream'], s.get('SDK stream'))} the SDK (target >= 2), "
                  f"create/stream {fmt_ratio(s['tooloop create'], s['tooloop stream'])} (target <= 1.5; "
                  f"bare http.client's stream: {fmt_ratio(s['tooloop create'], s['http.client stream'])})")
    for cond in ("quiet", "loaded"):
        s = res.get(f"agent {cond}")
        if s:
            print(f"\n{a.runs} small agent runs, {cond}" + (f" ({a.busy} busy loops)" if cond == "loaded" else ""))
            for k, v in s.items():
                if not k.startswith("cpu "):
                    client_us, server_us = s[f"cpu {k}"]
                    print(f"  {k:<26} {v:7.0f} runs/s  CPU per run: client {client_us:5.0f} µs, "
                          f"mock server {server_us:4.0f} µs")
    for cond in ("quiet", "loaded"):
        b = res.get(f"big {cond}")
        if b:
            print(f"\n1 MB stream ({len(text.encode()):,} bytes of text, 16-char deltas), {cond}")
            for k, v in b.items():
                print(f"  {k:<20} {v:7.3f} s  {fmt_ratio(v, b['bytes'])} the bytes")
            print("  targets: events <= 3x the bytes, text_stream <= 2x")
    w = res.get("wires")
    if w:
        print(f"\nthe same {len(text.encode()):,} bytes of text as an OpenAI stream (16-char deltas), an agent run each")
        for k in ("chat completions", "responses"):
            print(f"  {k:<20} {w[k]:6.1f} ns per stream byte ({w['bytes ' + k]:,.0f} bytes)")
        print(f"  responses/chat completions {fmt_ratio(w['responses'], w['chat completions'])} per byte "
              "(target <= 1)")
    for name in ("rust turns", "python turns"):
        t = res.get(name)
        if t:
            print(f"\n{name} (µs per turn): 1-10 {t['1-10']:.1f}, 190-200 {t.get('190-200', float('nan')):.1f}, "
                  f"ratio {fmt_ratio(t.get('190-200'), t['1-10'])} (target <= 1.5)")
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
