#!/usr/bin/env python3
"""Benchmark: stream a large response (≥ 1 MB of text deltas) from the mock server through tooloop
(``tooloop.Client.stream``) and through the official ``anthropic`` Python SDK, in the same run.

    python -m venv /tmp/benchvenv && /tmp/benchvenv/bin/pip install . anthropic
    /tmp/benchvenv/bin/python bench/stream_bench.py [--runs 5] [--text-bytes 1200000] [--delta-chars 16]

Not a test, and `anthropic` is not a dependency of tooloop: install it into the bench's venv only. Each
measurement runs in a fresh subprocess (so peak RSS is that client's alone); the clients alternate run by
run against one mock server whose scenario is reloaded before each run. Reported per client: the median wall
time from sending the request to holding the final message, throughput, and the median peak RSS of the
worker process (VmHWM), also after imports only, so the cost of the stream itself is visible.

Clients:
  bytes               http.client reading the response's bytes, no parsing: what the mock needs to send them
  tooloop             Client.stream(): every raw event as a dict, then final_message()
  tooloop-text        Client.stream(): text_stream (coalesced str chunks), then final_message()
  anthropic-stream    client.messages.stream(): text_stream, then get_final_message() (the SDK's helper)
  anthropic-raw       client.messages.create(stream=True): iterate the raw events, no accumulation
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "mock"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

CLIENTS = ["bytes", "tooloop", "tooloop-text", "anthropic-stream", "anthropic-raw"]
MODEL = "claude-sonnet-4-6"
MESSAGES = [{"role": "user", "content": "Write a very long text."}]


def peak_rss_mb() -> float:
    """Peak RSS of this process. VmHWM, not ru_maxrss: Linux carries ru_maxrss across fork and exec, so a
    worker would report its parent's peak (the bench holds the whole scenario)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def worker(kind: str, base_url: str) -> Dict[str, Any]:
    t0 = time.perf_counter()
    text_len = 0
    events = 0
    if kind == "bytes":
        import http.client
        from urllib.parse import urlparse

        u = urlparse(base_url)
        import_s, rss_after_import = time.perf_counter() - t0, peak_rss_mb()
        start = time.perf_counter()
        conn = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port)
        body = json.dumps({"model": MODEL, "max_tokens": 64000, "messages": MESSAGES, "stream": True})
        conn.request("POST", "/v1/messages", body, {"content-type": "application/json", "x-api-key": "k",
                                                     "anthropic-version": "2023-06-01"})
        resp = conn.getresponse()
        while True:
            chunk = resp.read1(65536)
            if not chunk:
                break
            events += 1
            text_len += len(chunk)
        conn.close()
        final_len = text_len
    elif kind == "tooloop-text":
        import tooloop

        client = tooloop.Client(base_url=base_url, api_key="sk-ant-mock", max_retries=0)
        import_s, rss_after_import = time.perf_counter() - t0, peak_rss_mb()
        start = time.perf_counter()
        with client.stream({"model": MODEL, "max_tokens": 64000, "messages": MESSAGES}) as stream:
            for text in stream.text_stream:
                events += 1
                text_len += len(text)
            final = stream.final_message()
        final_len = len(final["content"][0]["text"])
    elif kind == "tooloop":
        import tooloop

        client = tooloop.Client(base_url=base_url, api_key="sk-ant-mock", max_retries=0)
        import_s, rss_after_import = time.perf_counter() - t0, peak_rss_mb()
        start = time.perf_counter()
        with client.stream({"model": MODEL, "max_tokens": 64000, "messages": MESSAGES}) as stream:
            for event in stream:
                events += 1
                if event["type"] == "content_block_delta" and event["delta"]["type"] == "text_delta":
                    text_len += len(event["delta"]["text"])
            final = stream.final_message()
        final_len = len(final["content"][0]["text"])
    else:
        import anthropic

        client = anthropic.Anthropic(base_url=base_url, api_key="sk-ant-mock", max_retries=0)
        import_s, rss_after_import = time.perf_counter() - t0, peak_rss_mb()
        start = time.perf_counter()
        if kind == "anthropic-stream":
            with client.messages.stream(model=MODEL, max_tokens=64000, messages=MESSAGES) as s:
                for text in s.text_stream:
                    events += 1
                    text_len += len(text)
                message = s.get_final_message()
            final_len = len(message.content[0].text)
        else:
            parts: List[str] = []
            for ev in client.messages.create(model=MODEL, max_tokens=64000, messages=MESSAGES, stream=True):
                events += 1
                if ev.type == "content_block_delta" and ev.delta.type == "text_delta":
                    parts.append(ev.delta.text)
                    text_len += len(ev.delta.text)
            final_len = len("".join(parts))
    elapsed = time.perf_counter() - start
    return {"client": kind, "seconds": elapsed, "import_seconds": import_s, "events": events,
            "text_chars": text_len, "final_chars": final_len, "rss_after_import_mb": rss_after_import,
            "peak_rss_mb": peak_rss_mb()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--text-bytes", type=int, default=1_200_000)
    ap.add_argument("--delta-chars", type=int, default=16)
    ap.add_argument("--chunk-size", type=int, default=16384, help="0: one HTTP chunk per SSE event")
    ap.add_argument("--synthesize", action="store_true",
                    help="let the mock build the stream per request (adds its encoding time to every client)")
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--json", help="also write every measurement to this file")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--base-url", help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.worker:
        print(json.dumps(worker(a.worker, a.base_url)))
        return 0

    from make_stream_scenario import make_scenario
    from mockctl import MockServer

    clients = [c for c in a.clients.split(",") if c]
    scenario = make_scenario(a.text_bytes, a.delta_chars, a.chunk_size or None, a.synthesize)
    text = scenario.pop("text")
    print(f"scenario: {len(text.encode()):,} bytes of text in {a.delta_chars}-character deltas "
          f"(~{len(text) // a.delta_chars:,} text_delta events), "
          f"{'HTTP chunks of ' + str(a.chunk_size) + ' bytes' if a.chunk_size else 'one HTTP chunk per event'}; "
          f"{a.runs} runs per client; python {sys.version.split()[0]}")
    results: Dict[str, List[Dict[str, Any]]] = {c: [] for c in clients}
    with MockServer(scenario) as mock:
        for run in range(a.runs):
            for kind in clients:
                mock.load(scenario)
                proc = subprocess.run([sys.executable, __file__, "--worker", kind, "--base-url", mock.base_url],
                                      capture_output=True, text=True, timeout=600,
                                      env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
                if proc.returncode != 0:
                    print(f"{kind} failed:\n{proc.stderr}", file=sys.stderr)
                    return 1
                r = json.loads(proc.stdout.strip().splitlines()[-1])
                if kind != "bytes" and (r["final_chars"] != len(text) or r["text_chars"] != len(text)):
                    print(f"{kind}: wrong text length {r['text_chars']}/{r['final_chars']} != {len(text)}",
                          file=sys.stderr)
                    return 1
                results[kind].append(r)
                print(f"  run {run + 1} {kind:17s} {r['seconds']:7.3f} s  peak RSS {r['peak_rss_mb']:7.1f} MB",
                      flush=True)

    mb = len(text.encode()) / 1e6
    print()
    print(f"{'client':17s} {'median time':>12s} {'text MB/s':>10s} {'peak RSS':>10s} {'RSS after import':>17s} "
          f"{'stream cost':>12s} {'import':>8s}")
    summary = {}
    for kind, rs in results.items():
        t = statistics.median(r["seconds"] for r in rs)
        rss = statistics.median(r["peak_rss_mb"] for r in rs)
        base = statistics.median(r["rss_after_import_mb"] for r in rs)
        imp = statistics.median(r["import_seconds"] for r in rs)
        summary[kind] = {"median_seconds": t, "median_peak_rss_mb": rss, "median_rss_after_import_mb": base,
                         "median_import_seconds": imp}
        print(f"{kind:17s} {t:10.3f} s {mb / t:10.1f} {rss:8.1f} MB {base:14.1f} MB {rss - base:9.1f} MB "
              f"{imp:6.2f} s")
    if "tooloop" in summary:
        for kind in summary:
            if kind != "tooloop":
                ratio = summary[kind]["median_seconds"] / summary["tooloop"]["median_seconds"]
                print(f"tooloop is {ratio:.1f}x faster than {kind}")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"summary": summary, "runs": results}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
