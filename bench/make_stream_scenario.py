#!/usr/bin/env python3
"""Writes a mock-server scenario whose one response streams a large text (default ≥ 1 MB of text deltas).

    python3 bench/make_stream_scenario.py [--text-bytes N] [--delta-chars N] [--chunk-size N] [-o FILE]

The text is deterministic prose-like words with some multi-byte characters (so UTF-8 sequences get split
across HTTP chunks). With `--chunk-size`, the server cuts the SSE body every N bytes regardless of events,
as a proxy or a busy network would; `delta_chars` is the size of each `text_delta`.

The stream is pre-rendered here (the exact Messages API event sequence the mock would synthesize, as `raw`
SSE items), so the server spends no time encoding 70,000 events per request and the clients are what the
benchmark measures. `--synthesize` leaves that to the server instead (an `anthropic` response).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from typing import Any, Dict, List, Optional

WORDS = ("agent loop tool model stream delta token cache rust python latency memory request response "
         "événement überprüfung naïve café 東京 データ — “quoted” words").split()


def make_text(n_bytes: int, seed: int = 7) -> str:
    rng = random.Random(seed)
    parts = []
    size = 0
    while size < n_bytes:
        w = rng.choice(WORDS)
        sep = "\n" if rng.random() < 0.05 else " "
        parts.append(w + sep)
        size += len((w + sep).encode())
    return "".join(parts)


def message_for(text: str) -> Dict[str, Any]:
    return {
        "id": "msg_bench_large", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": len(text) // 4},
    }


def sse_items(message: Dict[str, Any], delta_chars: int) -> List[Dict[str, str]]:
    """The Messages API stream of a one-text-block `message`, one raw SSE item per event."""
    def event(name: str, data: Dict[str, Any]) -> Dict[str, str]:
        body = json.dumps({"type": name, **data}, separators=(",", ":"), ensure_ascii=False)
        return {"raw": f"event: {name}\ndata: {body}\n\n"}

    text = message["content"][0]["text"]
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None,
             "usage": {**message["usage"], "output_tokens": 1}}
    items = [event("message_start", {"message": start}), event("ping", {}),
             event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})]
    for i in range(0, len(text), delta_chars):
        items.append(event("content_block_delta",
                           {"index": 0, "delta": {"type": "text_delta", "text": text[i:i + delta_chars]}}))
    items += [event("content_block_stop", {"index": 0}),
              event("message_delta", {"delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                                      "usage": message["usage"]}),
              event("message_stop", {})]
    return items


def make_scenario(text_bytes: int = 1_200_000, delta_chars: int = 16, chunk_size: Optional[int] = 16384,
                  synthesize: bool = False) -> Dict[str, Any]:
    text = make_text(text_bytes)
    message = message_for(text)
    response: Dict[str, Any] = {"expect": {"method": "POST", "path": "/v1/messages"}}
    if synthesize:
        response.update({"delta_chars": delta_chars, "anthropic": message})
    else:
        response["sse"] = sse_items(message, delta_chars)
    if chunk_size:
        response["chunk_size"] = chunk_size
    return {"description": f"one streamed text of {len(text.encode())} bytes in {delta_chars}-character deltas",
            "responses": [response], "text": text}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--text-bytes", type=int, default=1_200_000)
    ap.add_argument("--delta-chars", type=int, default=16)
    ap.add_argument("--chunk-size", type=int, default=16384, help="0: one HTTP chunk per SSE event")
    ap.add_argument("--synthesize", action="store_true", help="let the server build the stream")
    ap.add_argument("-o", "--output", default="-")
    a = ap.parse_args()
    sc = make_scenario(a.text_bytes, a.delta_chars, a.chunk_size or None, a.synthesize)
    del sc["text"]
    if a.output == "-":
        json.dump(sc, sys.stdout)
    else:
        with open(a.output, "w", encoding="utf-8") as f:
            json.dump(sc, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
