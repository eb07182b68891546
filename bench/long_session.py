"""A 100-turn tool session against the mock server: prompt caching off/on x compaction off/on.

    python bench/long_session.py [--turns N] [--bytes B] [--window W] [--json OUT]

Each configuration runs the same scripted session (N tool turns of `dump {part, bytes}`, each result ~B bytes
of file-like text, then a final answer) against `tests/mock/mockserver.py` with a `context` of 4 bytes per
token, no limit, usage rewritten from the estimate and Anthropic prompt caching simulated from the request's
`cache_control` breakpoints. Compaction's summary requests (they contain "You write the working memory") are
answered by a route. The numbers come from the mock's recorded requests (`tokens`, `cache_read`,
`cache_creation`), so they are the server's view, summary requests included.

Billed-equivalent input = uncached + 1.25 x cache writes + 0.1 x cache reads; cost at Claude Sonnet list
prices ($3/M input, $15/M output), summary requests priced the same. This is a benchmark, not a test: it
asserts only that each session finished.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Dict, List

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "mock"))

import tooloop  # noqa: E402
from mockctl import MockServer  # noqa: E402

MODEL = "claude-sonnet-4-6"
MARK = "You write the working memory"
PRICE_IN = 3.0 / 1e6
PRICE_OUT = 15.0 / 1e6
WRITE_X = 1.25
READ_X = 0.1
OUTPUT_TOKENS_PER_TURN = 25
SUMMARY_OUTPUT_TOKENS = 300


def dump(part: int, bytes: int = 4000) -> str:
    """Dump one part of the data (a file read).

    Args:
        part: which part
        bytes: roughly how many bytes
    """
    lines: List[str] = []
    size = 0
    i = 0
    while size < bytes:
        line = f"{i + 1:4d}  def handler_{part}_{i}(request, ctx):  # part {part}: return ctx.reply(request.id * {i})"
        lines.append(line)
        size += len(line) + 1
        i += 1
    return "\n".join(lines)[:bytes]


def message(mid: str, content: List[Dict[str, Any]], stop: str, out: int) -> Dict[str, Any]:
    return {"anthropic": {"id": mid, "type": "message", "role": "assistant", "model": MODEL, "content": content,
                          "stop_reason": stop, "stop_sequence": None,
                          "usage": {"input_tokens": 1, "output_tokens": out}},
            "expect": {"path": "/v1/messages", "method": "POST"}}


def scenario(turns: int, nbytes: int) -> Dict[str, Any]:
    responses = [message(f"msg_{k:03d}",
                         [{"type": "text", "text": f"Reading part {k}."},
                          {"type": "tool_use", "id": f"toolu_dump_{k:03d}", "name": "dump",
                           "input": {"part": k, "bytes": nbytes}}],
                         "tool_use", OUTPUT_TOKENS_PER_TURN)
                 for k in range(1, turns + 1)]
    responses.append(message("msg_final", [{"type": "text", "text": f"All {turns} parts read."}], "end_turn", 8))
    summary = message("msg_summary", [{"type": "text", "text": (
        "SUMMARY: the user asked for every part to be read with the dump tool; parts were read in order and "
        "looked alike (handler definitions); continue with the next part.")}], "end_turn", SUMMARY_OUTPUT_TOKENS)
    del summary["expect"]
    return {"description": f"bench: {turns} tool turns of ~{nbytes} B results",
            "context": {"limit": None, "chars_per_token": 4, "usage": True, "cache": True},
            "routes": [{"match": {"path": "/v1/messages", "body_contains": MARK}, "response": summary}],
            "responses": responses}


def run_one(sc: Dict[str, Any], turns: int, cache: bool, compaction: str, window: int) -> Dict[str, Any]:
    with MockServer(sc) as mock:
        agent = tooloop.Agent(MODEL, api_key="sk-ant-mock", base_url=mock.base_url, tools=[dump], max_turns=None,
                              cache=cache, compaction=compaction, context_window=window)
        compactions: List[Dict[str, Any]] = []
        turn_usage: List[Dict[str, int]] = []
        done = None
        start = time.perf_counter()
        for ev in agent.stream(f"Read all {turns} parts with the dump tool, one at a time."):
            if isinstance(ev, tooloop.CompactionEvent):
                compactions.append({"reason": ev.reason, "method": ev.method, "tokens_before": ev.tokens_before,
                                    "tokens_after": ev.tokens_after})
            elif isinstance(ev, tooloop.TurnEvent):
                u = ev.usage
                turn_usage.append({"input": u.input_tokens, "cache_read": u.cache_read_input_tokens or 0,
                                   "cache_creation": u.cache_creation_input_tokens or 0})
            elif isinstance(ev, tooloop.DoneEvent):
                done = ev
        wall = time.perf_counter() - start
        reqs = [r for r in mock.requests() if r["path"] == "/v1/messages"]
        tooloop_cost = getattr(agent.usage, "cost_usd", None)
    assert done is not None and done.result.text == f"All {turns} parts read.", "the session did not finish"

    agent_reqs = [r for r in reqs if r.get("index") is not None]
    summary_reqs = [r for r in reqs if r.get("route") is not None]
    assert len(agent_reqs) == turns + 1, len(agent_reqs)
    sent = sum(r["tokens"] for r in reqs)
    read = sum(r["cache_read"] for r in reqs)
    write = sum(r["cache_creation"] for r in reqs)
    uncached = sent - read - write
    billed = uncached + WRITE_X * write + READ_X * read
    out = len(agent_reqs[:-1]) * OUTPUT_TOKENS_PER_TURN + 8 + len(summary_reqs) * SUMMARY_OUTPUT_TOKENS
    return {
        "cache": cache, "compaction": compaction, "context_window": window,
        "requests": len(reqs), "summary_requests": len(summary_reqs),
        "sent_tokens": sent, "uncached_tokens": uncached, "cache_write_tokens": write, "cache_read_tokens": read,
        "billed_input_tokens": billed, "output_tokens": out,
        "cost_usd": billed * PRICE_IN + out * PRICE_OUT,
        "tooloop_cost_usd": tooloop_cost,
        "compactions": len(compactions), "compaction_methods": sorted({c["method"] for c in compactions}),
        "compaction_events": compactions,
        "max_request_tokens": max(r["tokens"] for r in reqs),
        "wall_s": wall,
        "per_turn": [{"turn": i + 1, "tokens": r["tokens"], "cache_read": r["cache_read"],
                      "cache_creation": r["cache_creation"]} for i, r in enumerate(agent_reqs)],
        "turn_events_usage": turn_usage,
    }


def label(r: Dict[str, Any]) -> str:
    return f"cache {'on ' if r['cache'] else 'off'} / compact {'on ' if r['compaction'] != 'off' else 'off'}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=100, help="tool turns (default 100)")
    parser.add_argument("--bytes", type=int, default=4000, help="bytes per tool result (default 4000)")
    parser.add_argument("--window", type=int, default=40_000, help="context_window in tokens (default 40000)")
    parser.add_argument("--json", metavar="OUT", help="also write the full results as JSON to OUT")
    args = parser.parse_args()

    sc = scenario(args.turns, args.bytes)
    results = []
    for cache in (False, True):
        for compaction in ("off", "auto"):
            results.append(run_one(sc, args.turns, cache, compaction, args.window))

    print(f"{args.turns} tool turns, ~{args.bytes} B per result, context_window {args.window} "
          f"(compaction on), 4 B/token, Sonnet prices; summary requests included")
    print()
    head = (f"{'configuration':<25} {'sent':>9} {'uncached':>9} {'c.write':>9} {'c.read':>9} {'billed in':>10} "
            f"{'cost $':>7} {'compact':>7} {'max req':>8} {'reqs':>5} {'wall s':>7} {'base/this':>9}")
    print(head)
    print("-" * len(head))
    base = results[0]["billed_input_tokens"]
    for r in results:
        print(f"{label(r):<25} {r['sent_tokens']:>9,} {r['uncached_tokens']:>9,} {r['cache_write_tokens']:>9,} "
              f"{r['cache_read_tokens']:>9,} {r['billed_input_tokens']:>10,.0f} {r['cost_usd']:>7.3f} "
              f"{r['compactions']:>7} {r['max_request_tokens']:>8,} {r['requests']:>5} {r['wall_s']:>7.2f} "
              f"{base / r['billed_input_tokens']:>8.2f}x")
    print()
    marks = list(range(10, args.turns + 1, 10))
    print("tokens sent per request, by turn")
    print(f"{'configuration':<25}" + "".join(f"{'t' + str(t):>8}" for t in marks))
    for r in results:
        by_turn = {p["turn"]: p["tokens"] for p in r["per_turn"]}
        print(f"{label(r):<25}" + "".join(f"{by_turn[t]:>8,}" for t in marks))
    print()
    for r in results:
        if r["compactions"]:
            print(f"{label(r)}: compaction methods {', '.join(r['compaction_methods'])}; "
                  f"{r['summary_requests']} summary request(s)")
    for r in results:
        agree = len(r["turn_events_usage"]) == len(r["per_turn"]) and all(
            u["input"] + u["cache_read"] + u["cache_creation"] == t["tokens"] and u["cache_read"] == t["cache_read"]
            for u, t in zip(r["turn_events_usage"], r["per_turn"]))
        tc = r["tooloop_cost_usd"]
        print(f"{label(r)}: TurnEvent usage {'matches' if agree else 'DIFFERS FROM'} the mock's records; "
              f"agent.usage.cost_usd = {'n/a' if tc is None else f'{tc:.3f}'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"turns": args.turns, "bytes": args.bytes, "window": args.window, "results": results}, f,
                      indent=1)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
