"""Small-request round trips per second: tooloop.Client.create vs raw http.client vs the anthropic SDK.

Every client sends the same small non-streamed Messages request to the mock server (one route answers
every request with the same small message, so no queue runs out), one request at a time on one keep-alive
connection, for a fixed time per measurement. Rounds interleave the clients; the median of the rounds is
reported, first on a quiet machine, then with busy-looping processes competing for the CPUs (they are
started here and killed by pid at the end).

    python3 bench/roundtrip.py [--seconds 1.5] [--rounds 5] [--busy 2] [--stream]

Needs tooloop installed in the running interpreter; the `anthropic` SDK is optional (skipped if missing).
Install both into a private venv: `python3 -m venv /tmp/benchvenv && /tmp/benchvenv/bin/pip install . anthropic`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional
from urllib.parse import urlparse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "mock"))

from mockctl import MockServer  # noqa: E402

MESSAGE = {
    "id": "msg_bench",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-6",
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 5, "output_tokens": 1},
}
SCENARIO = {"responses": [], "routes": [{"match": {}, "response": {"anthropic": MESSAGE}}]}
REQUEST = {"model": "claude-sonnet-4-6", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
KEY = "sk-ant-bench"


def tooloop_create(base_url: str) -> Callable[[], None]:
    import tooloop

    client = tooloop.Client(provider="anthropic", base_url=base_url, api_key=KEY, max_retries=0)

    def one() -> None:
        r = client.create(REQUEST)
        assert r["content"][0]["text"] == "ok", r

    return one


def tooloop_stream(base_url: str) -> Callable[[], None]:
    import tooloop

    client = tooloop.Client(provider="anthropic", base_url=base_url, api_key=KEY, max_retries=0)
    request = dict(REQUEST, stream=True)

    def one() -> None:
        with client.stream(request) as s:
            for _ in s:
                pass
            assert s.final_message()["content"][0]["text"] == "ok"

    return one


def raw_http(base_url: str) -> Callable[[], None]:
    u = urlparse(base_url)
    conn = http.client.HTTPConnection(u.hostname, u.port)
    body = json.dumps(REQUEST).encode()
    headers = {
        "content-type": "application/json",
        "x-api-key": KEY,
        "anthropic-version": "2023-06-01",
    }

    def one() -> None:
        conn.request("POST", "/v1/messages", body=body, headers=headers)
        resp = conn.getresponse()
        data = json.loads(resp.read())
        assert resp.status == 200 and data["content"][0]["text"] == "ok", data

    return one


def sdk(base_url: str) -> Optional[Callable[[], None]]:
    try:
        import anthropic
    except ImportError:
        return None
    client = anthropic.Anthropic(base_url=base_url, api_key=KEY, max_retries=0)

    def one() -> None:
        r = client.messages.create(**REQUEST)
        assert r.content[0].text == "ok"

    return one


def rate(one: Callable[[], None], seconds: float) -> float:
    for _ in range(20):  # warm up: connection, imports, caches
        one()
    n = 0
    start = time.perf_counter()
    end = start + seconds
    while True:
        one()
        n += 1
        now = time.perf_counter()
        if now >= end:
            return n / (now - start)


def measure(clients: Dict[str, Callable[[], None]], mock: MockServer, seconds: float, rounds: int) -> Dict[str, float]:
    results: Dict[str, List[float]] = {name: [] for name in clients}
    for _ in range(rounds):
        for name, one in clients.items():
            mock.load(SCENARIO)  # clears the recording, which would otherwise grow without bound
            results[name].append(rate(one, seconds))
    return {name: statistics.median(v) for name, v in results.items()}


def report(title: str, med: Dict[str, float]) -> None:
    print(f"\n{title}")
    for name, r in med.items():
        print(f"  {name:<16} {r:8.0f} req/s")
    raw = med.get("http.client")
    sdk_rate = med.get("anthropic SDK")
    for name in ("tooloop create", "tooloop stream"):
        if name not in med:
            continue
        parts = []
        if raw:
            parts.append(f"{med[name] / raw:.2f}x http.client")
        if sdk_rate:
            parts.append(f"{med[name] / sdk_rate:.2f}x SDK")
        print(f"  {name}: " + ", ".join(parts))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=1.5, help="time per measurement")
    ap.add_argument("--rounds", type=int, default=5, help="rounds per condition (median reported)")
    ap.add_argument("--busy", type=int, default=2, help="busy-looping processes in the loaded condition")
    ap.add_argument("--stream", action="store_true", help="also measure tooloop Client.stream")
    ap.add_argument("--json", help="write the medians to this file")
    args = ap.parse_args()

    out: Dict[str, Dict[str, float]] = {}
    with MockServer(SCENARIO) as mock:
        clients: Dict[str, Callable[[], None]] = {
            "tooloop create": tooloop_create(mock.base_url),
            "http.client": raw_http(mock.base_url),
        }
        if args.stream:
            clients["tooloop stream"] = tooloop_stream(mock.base_url)
        s = sdk(mock.base_url)
        if s is not None:
            clients["anthropic SDK"] = s
        else:
            print("(the anthropic SDK is not installed: skipped)")
        print(f"{os.cpu_count()} CPUs; {args.rounds} rounds of {args.seconds} s per client and condition")
        out["quiet"] = measure(clients, mock, args.seconds, args.rounds)
        report("quiet", out["quiet"])
        busy: List[subprocess.Popen] = []
        try:
            for _ in range(args.busy):
                busy.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
            time.sleep(0.5)
            out["loaded"] = measure(clients, mock, args.seconds, args.rounds)
        finally:
            for p in busy:
                p.kill()
                p.wait()
        report(f"loaded ({args.busy} busy-looping processes)", out["loaded"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
