#!/usr/bin/env python3
"""Scripted mock of the Anthropic Messages API, Claude on Amazon Bedrock Runtime (SigV4-checked, AWS
event-stream framing) and OpenAI-compatible Chat Completions.

Every tooloop test suite (Rust, Python, C) talks to this one server, so it speaks the real wire formats
and writes bytes exactly as the scenario says: chunk boundaries, delays and faults are the point, which is
why it uses raw sockets rather than http.server's buffered response helpers.

Usage: python3 mockserver.py [--verbose] [SCENARIO.json | -]   (TOOLOOP_MOCK_VERBOSE=1 = --verbose)
Prints exactly one line "PORT <n>" on stdout once it listens on 127.0.0.1:<n>, then serves until killed.
The scenario format is documented in README.md next to this file (a contract for three suites).
Standard library only, Python >= 3.9.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import math
import os
import re
import signal
import struct
import socket
import sys
import threading
import time
import zlib
from http import HTTPStatus
from urllib.parse import quote
from typing import Any, Dict, Iterator, List, Optional, Tuple

CONTROL_PREFIX = "/_mock/"
JSON_CT = "application/json"
# The real APIs both answer streams with this exact value; clients should only check the prefix.
SSE_CT = "text/event-stream; charset=utf-8"

BODY_KINDS = ("json", "raw", "sse", "anthropic", "openai", "responses")
RESPONSE_KEYS = set(BODY_KINDS) | {
    "status", "headers", "delay_ms", "content_type", "line_ending", "chunk_size", "delay_ms_between",
    "delta_chars", "fault", "expect", "interleave_tool_calls", "description", "bedrock",
}
SCENARIO_KEYS = {"description", "responses", "context", "routes"}
CONTEXT_DEFAULTS = {"limit": None, "chars_per_token": 4, "usage": True, "cache": True, "min_cache_tokens": 0}
ROUTE_KEYS = {"match", "response", "times", "description"}
MATCH_KEYS = {"path", "method", "body_contains"}
ANTHROPIC_PATHS = ("/v1/messages", "/v1/messages/count_tokens")
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"
OPENAI_PATH = "/v1/chat/completions"
RESPONSES_PATH = "/v1/responses"
# A cache read may land on any of this many block boundaries ending at a breakpoint (the real API's lookback).
CACHE_LOOKBACK = 20
BEDROCK_KEYS = {"exception", "corrupt_crc_after_events", "secret_access_key", "check"}
EVENTSTREAM_CT = "application/vnd.amazon.eventstream"
BEDROCK_VERSION = "bedrock-2023-05-31"
BEDROCK_PATH = re.compile(r"^/model/([^/]+)/(invoke|invoke-with-response-stream)$")
AUTH_RE = re.compile(r"^AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/bedrock/aws4_request, "
                     r"SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$")
FAULT_TYPES = ("drop", "stall", "close", "stall_headers")
LINE_ENDINGS = ("\n", "\r\n", "\r")
# Blocks whose `input` the real API streams as input_json_delta fragments.
TOOL_BLOCK_KINDS = ("tool_use", "server_tool_use", "mcp_tool_use")
TOOL_ARG_PIECE = 7
DEFAULT_DELTA_CHARS = 8
MAX_LINE = 65536
REASONS = {529: "Overloaded"}


class ScenarioError(ValueError):
    """The scenario JSON does not follow README.md."""


class BadRequest(Exception):
    """The client sent something that is not HTTP/1.x."""


# --------------------------------------------------------------------------------------------- scenario

def compact(value: Any) -> str:
    # The real APIs send compact JSON; ensure_ascii=False keeps multi-byte UTF-8 on the wire so chunk
    # boundaries can land inside a character.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class Scenario:
    """A parsed scenario: the response queue, the context window settings (None = off) and the routes."""

    def __init__(self, responses: List[Dict[str, Any]], context: Optional[Dict[str, Any]] = None,
                 routes: Optional[List[Dict[str, Any]]] = None):
        self.responses, self.context, self.routes = responses, context, routes or []


def load_scenario(obj: Any) -> Scenario:
    """Validate a scenario. Typos fail loudly here instead of as a puzzling test."""
    if isinstance(obj, list):
        obj = {"responses": obj}
    if not isinstance(obj, dict) or not isinstance(obj.get("responses", []), list):
        raise ScenarioError('a scenario is {"description": ..., "responses": [...]}')
    unknown = set(obj) - SCENARIO_KEYS
    if unknown:
        raise ScenarioError(f"unknown scenario keys {sorted(unknown)}")
    responses = obj.get("responses", [])
    for i, resp in enumerate(responses):
        try:
            check_response(resp)
        except ScenarioError as e:
            raise ScenarioError(f"responses[{i}]: {e}") from None
    context = check_context(obj["context"]) if obj.get("context") is not None else None
    return Scenario(responses, context, check_routes(obj.get("routes", [])))


def parse_scenario(obj: Any) -> List[Dict[str, Any]]:
    """Validate a scenario and return its responses."""
    return load_scenario(obj).responses


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_context(ctx: Any) -> Dict[str, Any]:
    """The `context` object with its defaults filled in."""
    if not isinstance(ctx, dict):
        raise ScenarioError("context must be an object")
    unknown = set(ctx) - set(CONTEXT_DEFAULTS)
    if unknown:
        raise ScenarioError(f"context: unknown keys {sorted(unknown)}")
    out = dict(CONTEXT_DEFAULTS, **ctx)
    if out["limit"] is not None and (not is_int(out["limit"]) or out["limit"] < 0):
        raise ScenarioError("context.limit must be null or a non-negative integer")
    cpt = out["chars_per_token"]
    if not isinstance(cpt, (int, float)) or isinstance(cpt, bool) or not 0 < cpt < float("inf"):
        raise ScenarioError("context.chars_per_token must be a number > 0")
    for key in ("usage", "cache"):
        if not isinstance(out[key], bool):
            raise ScenarioError(f"context.{key} must be true or false")
    if not is_int(out["min_cache_tokens"]) or out["min_cache_tokens"] < 0:
        raise ScenarioError("context.min_cache_tokens must be a non-negative integer")
    return out


def check_routes(routes: Any) -> List[Dict[str, Any]]:
    if not isinstance(routes, list):
        raise ScenarioError("routes must be an array")
    for k, route in enumerate(routes):
        where = f"routes[{k}]"
        if not isinstance(route, dict):
            raise ScenarioError(f"{where}: must be an object")
        unknown = set(route) - ROUTE_KEYS
        if unknown:
            raise ScenarioError(f"{where}: unknown keys {sorted(unknown)}")
        match = route.get("match", {})
        if not isinstance(match, dict) or set(match) - MATCH_KEYS:
            raise ScenarioError(f"{where}.match must be an object with keys among {sorted(MATCH_KEYS)}")
        for key, value in match.items():
            if not isinstance(value, str):
                raise ScenarioError(f"{where}.match.{key} must be a string")
        times = route.get("times")
        if times is not None and (not is_int(times) or times < 0):
            raise ScenarioError(f"{where}.times must be a non-negative integer")
        if "response" not in route:
            raise ScenarioError(f"{where}: needs a response")
        try:
            check_response(route["response"])
        except ScenarioError as e:
            raise ScenarioError(f"{where}.response: {e}") from None
    return routes


def check_response(resp: Any) -> None:
    if not isinstance(resp, dict):
        raise ScenarioError("must be an object")
    unknown = set(resp) - RESPONSE_KEYS
    if unknown:
        raise ScenarioError(f"unknown keys {sorted(unknown)}")
    kinds = [k for k in BODY_KINDS if k in resp]
    if len(kinds) > 1:
        raise ScenarioError(f"more than one body kind: {kinds}")
    if not isinstance(resp.get("status", 200), int):
        raise ScenarioError("status must be an integer")
    if not isinstance(resp.get("headers", {}), dict):
        raise ScenarioError("headers must be an object")
    if resp.get("line_ending", "\n") not in LINE_ENDINGS:
        raise ScenarioError(f"line_ending must be one of {LINE_ENDINGS}")
    for key in ("chunk_size", "delta_chars"):
        if key in resp and (not isinstance(resp[key], int) or resp[key] < 1):
            raise ScenarioError(f"{key} must be a positive integer")
    for key in ("delay_ms", "delay_ms_between"):
        if not isinstance(resp.get(key, 0), (int, float)) or resp.get(key, 0) < 0:
            raise ScenarioError(f"{key} must be a non-negative number")
    if "raw" in resp and not isinstance(resp["raw"], str):
        raise ScenarioError("raw must be a string")
    for key in ("anthropic", "openai", "responses"):
        if key in resp and not isinstance(resp[key], dict):
            raise ScenarioError(f"{key} must be an object")
    if "anthropic" in resp and not isinstance(resp["anthropic"].get("content", []), list):
        raise ScenarioError("anthropic.content must be an array of blocks")
    if "responses" in resp and not isinstance(resp["responses"].get("output", []), list):
        raise ScenarioError("responses.output must be an array of items")
    if "sse" in resp:
        if not isinstance(resp["sse"], list):
            raise ScenarioError("sse must be an array")
        for item in resp["sse"]:
            if not isinstance(item, dict) or not ({"event", "data", "id", "comment", "raw"} >= set(item)):
                raise ScenarioError(f"bad sse item {item!r}")
    fault = resp.get("fault")
    if fault is not None:
        if not isinstance(fault, dict) or fault.get("type") not in FAULT_TYPES:
            raise ScenarioError(f"fault.type must be one of {FAULT_TYPES}")
        if fault["type"] in ("drop", "stall") and ("after_events" in fault) == ("after_bytes" in fault):
            raise ScenarioError(f"fault {fault['type']} needs exactly one of after_events, after_bytes")
        if fault["type"] in ("stall", "stall_headers") and not isinstance(fault.get("ms"), (int, float)):
            raise ScenarioError(f"fault {fault['type']} needs ms")
    if not isinstance(resp.get("expect", {}), dict):
        raise ScenarioError("expect must be an object")
    bedrock = resp.get("bedrock")
    if bedrock is not None:
        if bedrock is True:
            return
        if not isinstance(bedrock, dict) or set(bedrock) - BEDROCK_KEYS:
            raise ScenarioError(f"bedrock must be true or an object with keys among {sorted(BEDROCK_KEYS)}")
        exc = bedrock.get("exception")
        if exc is not None and (not isinstance(exc, dict) or not isinstance(exc.get("type"), str)
                                or not isinstance(exc.get("after_events", 0), int)):
            raise ScenarioError("bedrock.exception is {\"type\": str, \"message\": str, \"after_events\": int}")


def pieces(text: str, size: int) -> List[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


# ------------------------------------------------------------------------------------- stream synthesis

def anthropic_events(msg: Dict[str, Any], delta_chars: int) -> Iterator[Tuple[str, Dict[str, Any]]]:
    """A Messages API message object as the (event, data) sequence the real API streams for it."""
    usage = dict(msg.get("usage") or {})
    start = dict(msg, content=[], stop_reason=None, stop_sequence=None, usage=dict(usage, output_tokens=1))
    yield "message_start", {"type": "message_start", "message": start}
    yield "ping", {"type": "ping"}
    for index, block in enumerate(msg.get("content") or []):
        first, deltas = split_block(block, delta_chars)
        yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": first}
        for delta in deltas:
            yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    # message_delta carries the final, cumulative usage (not an increment), like the real API.
    yield "message_delta", {
        "type": "message_delta",
        "delta": {"stop_reason": msg.get("stop_reason"), "stop_sequence": msg.get("stop_sequence")},
        "usage": usage,
    }
    yield "message_stop", {"type": "message_stop"}


def split_block(block: Dict[str, Any], delta_chars: int) -> Tuple[Dict[str, Any], List[Dict[str, Any]]]:
    """(the block as content_block_start shows it, the deltas that complete it)."""
    kind = block.get("type")
    if kind == "text":
        first = dict(block, text="")
        deltas = []
        if "citations" in block:
            first["citations"] = []
            deltas += [{"type": "citations_delta", "citation": c} for c in block["citations"] or []]
        deltas += [{"type": "text_delta", "text": p} for p in pieces(block.get("text", ""), delta_chars)]
        return first, deltas
    if kind == "thinking":
        deltas = [{"type": "thinking_delta", "thinking": p}
                  for p in pieces(block.get("thinking", ""), delta_chars)]
        if "signature" in block:
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        return dict(block, thinking="", signature=""), deltas
    if kind in TOOL_BLOCK_KINDS:
        args = block.get("input", {})
        # The real API sends no input_json_delta at all for an empty input.
        text = "" if args == {} else compact(args)
        return dict(block, input={}), [{"type": "input_json_delta", "partial_json": p}
                                       for p in pieces(text, TOOL_ARG_PIECE)]
    # redacted_thinking, server tool results and kinds we don't know arrive whole in the start event.
    return block, []


def openai_chunks(completion: Dict[str, Any], delta_chars: int, include_usage: bool,
                  interleave: bool) -> Iterator[Any]:
    """A chat.completion object as the chat.completion.chunk data sequence, ending with "[DONE]"."""
    head = {"id": completion.get("id"), "object": "chat.completion.chunk"}
    head.update((k, v) for k, v in completion.items() if k not in ("id", "object", "choices", "usage"))

    def chunk(choices: List[Dict[str, Any]], usage: Any = None) -> Dict[str, Any]:
        out = dict(head, choices=choices)
        if include_usage:
            out["usage"] = usage  # null on every chunk but the last, as OpenAI does
        return out

    for position, choice in enumerate(completion.get("choices") or []):
        index = choice.get("index", position)

        def delta(d: Dict[str, Any], finish: Optional[str] = None) -> Dict[str, Any]:
            return chunk([{"index": index, "delta": d, "logprobs": None, "finish_reason": finish}])

        msg = choice.get("message") or {}
        # The first delta opens content as OpenAI does: "" for a text answer, null for a tool-call-only one;
        # and says "refusal": null when the message has that key.
        first = {"role": "assistant", "content": "" if isinstance(msg.get("content"), str) else None}
        if "refusal" in msg:
            first["refusal"] = None
        yield delta(first)
        for key in ("reasoning_content", "reasoning"):
            # DeepSeek style: reasoning chunks carry an explicit null content.
            for p in pieces(msg.get(key) or "", delta_chars):
                yield delta({"content": None, key: p})
        for p in pieces(msg.get("content") or "", delta_chars):
            yield delta({"content": p})
        for p in pieces(msg.get("refusal") or "", delta_chars):
            yield delta({"refusal": p})
        per_call = [tool_call_fragments(k, call) for k, call in enumerate(msg.get("tool_calls") or [])]
        ordered = itertools.chain.from_iterable(
            itertools.zip_longest(*per_call) if interleave else per_call)
        for fragment in ordered:
            if fragment is not None:
                yield delta({"tool_calls": [fragment]})
        yield delta({}, choice.get("finish_reason"))
    if include_usage:
        yield chunk([], completion.get("usage"))
    yield "[DONE]"


def responses_events(response: Dict[str, Any], delta_chars: int) -> Iterator[Dict[str, Any]]:
    """A Responses API `response` object as the semantic event sequence the real API streams for it: the
    lifecycle events around, per output item `response.output_item.added`, its deltas, its `.done` events and
    `response.output_item.done` (the whole item: a reasoning item's encrypted_content only arrives there)."""
    seq = itertools.count()
    full = dict(response)
    full.setdefault("object", "response")
    status = full.get("status") or "completed"
    start = dict(full, status="in_progress", output=[], usage=None, incomplete_details=None, error=None)

    def ev(kind: str, **fields: Any) -> Dict[str, Any]:
        return dict({"type": kind, "sequence_number": next(seq)}, **fields)

    yield ev("response.created", response=start)
    yield ev("response.in_progress", response=start)
    for oi, item in enumerate(full.get("output") or []):
        kind = item.get("type")
        item_id = item.get("id", f"item_{oi}")
        if kind == "message":
            added = dict(item, status="in_progress", content=[])
        elif kind == "function_call":
            added = dict(item, status="in_progress", arguments="")
        elif kind == "reasoning":
            added = {k: v for k, v in item.items() if k != "encrypted_content"}
            added["summary"] = []
        else:
            added = item
        yield ev("response.output_item.added", output_index=oi, item=added)
        if kind == "message":
            for ci, part in enumerate(item.get("content") or []):
                is_text = part.get("type") == "output_text"
                key = "text" if is_text else "refusal"
                empty = dict(part, **{key: ""})
                if is_text:
                    empty["annotations"] = []
                yield ev("response.content_part.added", item_id=item_id, output_index=oi, content_index=ci,
                         part=empty)
                name = "response.output_text" if is_text else "response.refusal"
                for p in pieces(part.get(key) or "", delta_chars):
                    extra = {"logprobs": []} if is_text else {}
                    yield ev(name + ".delta", item_id=item_id, output_index=oi, content_index=ci, delta=p,
                             **extra)
                done = {"text": part.get(key, "")} if is_text else {"refusal": part.get(key, "")}
                yield ev(name + ".done", item_id=item_id, output_index=oi, content_index=ci,
                         **(dict(done, logprobs=[]) if is_text else done))
                yield ev("response.content_part.done", item_id=item_id, output_index=oi, content_index=ci,
                         part=part)
        elif kind == "function_call":
            args = item.get("arguments", "")
            if not isinstance(args, str):
                args = compact(args)
            for p in pieces(args, TOOL_ARG_PIECE):
                yield ev("response.function_call_arguments.delta", item_id=item_id, output_index=oi, delta=p)
            yield ev("response.function_call_arguments.done", item_id=item_id, output_index=oi, arguments=args)
        elif kind == "reasoning":
            for si, part in enumerate(item.get("summary") or []):
                yield ev("response.reasoning_summary_part.added", item_id=item_id, output_index=oi,
                         summary_index=si, part={"type": "summary_text", "text": ""})
                for p in pieces(part.get("text") or "", delta_chars):
                    yield ev("response.reasoning_summary_text.delta", item_id=item_id, output_index=oi,
                             summary_index=si, delta=p)
                yield ev("response.reasoning_summary_text.done", item_id=item_id, output_index=oi,
                         summary_index=si, text=part.get("text", ""))
                yield ev("response.reasoning_summary_part.done", item_id=item_id, output_index=oi,
                         summary_index=si, part=part)
        yield ev("response.output_item.done", output_index=oi, item=item)
    terminal = {"completed": "response.completed", "incomplete": "response.incomplete",
                "failed": "response.failed"}.get(status, "response.completed")
    yield ev(terminal, response=dict(full, status=status))


def tool_call_fragments(index: int, call: Dict[str, Any]) -> List[Dict[str, Any]]:
    fn = call.get("function") or {}
    args = fn.get("arguments", "")
    if not isinstance(args, str):  # tolerate an object in the scenario; the wire always has a string
        args = compact(args)
    first = {"index": index, "id": call.get("id"), "type": call.get("type", "function"),
             "function": {"name": fn.get("name"), "arguments": ""}}
    return [first] + [{"index": index, "function": {"arguments": p}} for p in pieces(args, TOOL_ARG_PIECE)]


def encode_sse(item: Dict[str, Any], eol: str) -> bytes:
    if "raw" in item:
        return item["raw"].encode()
    if "comment" in item:
        return f": {item['comment']}{eol}".encode()
    lines = []
    if "event" in item:
        lines.append(f"event: {item['event']}")
    if "id" in item:
        lines.append(f"id: {item['id']}")
    if "data" in item:
        data = item["data"] if isinstance(item["data"], str) else compact(item["data"])
        lines += [f"data: {line}" for line in data.split("\n")]
    return "".join(line + eol for line in lines).encode() + eol.encode()


# ------------------------------------------------------------------------------------------- bedrock

def es_frame(headers: List[Tuple[str, str]], payload: bytes) -> bytes:
    """One AWS event-stream frame: prelude (total and headers lengths) + its CRC, string headers (type 7),
    payload, and the CRC32 of everything before it."""
    hbytes = b"".join(bytes([len(k.encode())]) + k.encode() + b"\x07" + struct.pack(">H", len(v.encode()))
                      + v.encode() for k, v in headers)
    prelude = struct.pack(">II", 16 + len(hbytes) + len(payload), len(hbytes))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + hbytes + payload
    return message + struct.pack(">I", zlib.crc32(message))


def chunk_frame(event: Any) -> bytes:
    """An Anthropic stream event as Bedrock sends it: a `chunk` event of base64 JSON (plus the padding
    field `p` the real service adds)."""
    data = base64.b64encode(compact(event).encode()).decode()
    payload = compact({"bytes": data, "p": "abcdefghijklmnopqrstuvwxyzABCDEF"[:len(data) % 32]}).encode()
    return es_frame([(":event-type", "chunk"), (":content-type", "application/json"),
                     (":message-type", "event")], payload)


def exception_frame(kind: str, message: str) -> bytes:
    return es_frame([(":exception-type", kind), (":content-type", "application/json"),
                     (":message-type", "exception")], compact({"message": message}).encode())


def bedrock_events(resp: Dict[str, Any]) -> List[Any]:
    """The Anthropic event JSONs of a bedrock response (`anthropic` synthesized, or the data of `sse` items)."""
    if "anthropic" in resp:
        events = [d for _, d in anthropic_events(resp["anthropic"], resp.get("delta_chars", DEFAULT_DELTA_CHARS))]
        usage = resp["anthropic"].get("usage") or {}
        events[-1] = dict(events[-1], **{"amazon-bedrock-invocationMetrics": {
            "inputTokenCount": usage.get("input_tokens", 0), "outputTokenCount": usage.get("output_tokens", 0),
            "invocationLatency": 1, "firstByteLatency": 1}})
        return events
    return [item["data"] for item in resp.get("sse", []) if "data" in item]


def bedrock_body(resp: Dict[str, Any], stream: bool) -> "Body":
    opts = resp["bedrock"] if isinstance(resp["bedrock"], dict) else {}
    if "json" in resp or "raw" in resp or not stream:
        if "anthropic" in resp:
            return Body(resp.get("content_type", JSON_CT), [compact(resp["anthropic"]).encode()], False)
        return build_body({k: v for k, v in resp.items() if k != "bedrock"}, None)
    frames = [chunk_frame(e) for e in bedrock_events(resp)]
    corrupt = opts.get("corrupt_crc_after_events")
    if isinstance(corrupt, int) and corrupt < len(frames):
        bad = bytearray(frames[corrupt])
        bad[-1] ^= 0xFF  # the message CRC no longer matches
        frames[corrupt] = bytes(bad)
    exc = opts.get("exception")
    if exc:
        at = min(exc.get("after_events", len(frames)), len(frames))
        frames = frames[:at] + [exception_frame(exc["type"], exc.get("message", ""))]
    return Body(resp.get("content_type", EVENTSTREAM_CT), frames, True)


def bedrock_error(status: int, kind: str, message: str) -> Dict[str, Any]:
    return {"status": status, "headers": {"x-amzn-ErrorType": f"{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/",
                                          "x-should-retry": "false"}, "json": {"message": f"mock: {message}"}}


def check_bedrock(req: "Request", opts: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The request as Bedrock Runtime would judge it: None if fine, else the error response it would get."""
    if not BEDROCK_PATH.match(req.path):
        return bedrock_error(404, "UnknownOperationException", f"no Bedrock operation at {req.path}")
    h = req.headers
    auth = h.get("authorization", "")
    if not auth:
        return bedrock_error(403, "MissingAuthenticationTokenException", "no Authorization header")
    m = AUTH_RE.match(auth)
    if not m:
        return bedrock_error(403, "IncompleteSignatureException", f"malformed Authorization header: {auth[:40]}...")
    _key_id, date, region, signed, signature = m.groups()
    amz_date = h.get("x-amz-date", "")
    if not re.match(r"^\d{8}T\d{6}Z$", amz_date) or amz_date[:8] != date:
        return bedrock_error(403, "IncompleteSignatureException", f"x-amz-date {amz_date!r} does not match {date}")
    names = signed.split(";")
    must = ["host", "x-amz-date"] + (["x-amz-security-token"] if "x-amz-security-token" in h else [])
    missing = [n for n in must if n not in names]
    if missing or names != sorted(names) or any(n not in h for n in names):
        return bedrock_error(403, "IncompleteSignatureException", f"SignedHeaders {signed} (must sign {must})")
    if "x-amz-content-sha256" in h and h["x-amz-content-sha256"] != hashlib.sha256(req.body).hexdigest():
        return bedrock_error(400, "XAmzContentSHA256Mismatch", "x-amz-content-sha256 does not match the body")
    secret = opts.get("secret_access_key")
    if secret is not None:
        canonical_uri = "/".join(quote(seg, safe="-_.~") for seg in req.path.split("/"))
        query = "&".join(sorted(p for p in req.query.split("&") if p))
        canonical_headers = "".join(f"{n}:{' '.join(h[n].split())}\n" for n in names)
        creq = "\n".join([req.method, canonical_uri, query, canonical_headers, signed,
                          hashlib.sha256(req.body).hexdigest()])
        scope = f"{date}/{region}/bedrock/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(creq.encode()).hexdigest()])
        key = ("AWS4" + secret).encode()
        for part in (date, region, "bedrock", "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        if hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest() != signature:
            return bedrock_error(403, "InvalidSignatureException",
                                 "The request signature we calculated does not match the signature you provided")
    body = req.json
    if not isinstance(body, dict):
        return bedrock_error(400, "ValidationException", "the body is not a JSON object")
    wrong = []
    if body.get("anthropic_version") != BEDROCK_VERSION:
        wrong.append(f"anthropic_version must be {BEDROCK_VERSION!r}")
    wrong += [f"extraneous key [{k}] is not permitted" for k in ("model", "stream") if k in body]
    wrong += [f"{k} is required" for k in ("max_tokens", "messages") if k not in body]
    if wrong:
        return bedrock_error(400, "ValidationException", "; ".join(wrong))
    return None


# ------------------------------------------------------------------------------------- context window

def api_kind(path: str) -> Optional[str]:
    """Which request shape a path carries: "anthropic" (Messages, count_tokens, Bedrock), "openai" or None."""
    if path in ANTHROPIC_PATHS or BEDROCK_PATH.match(path):
        return "anthropic"
    if path == OPENAI_PATH:
        return "openai"
    if path == RESPONSES_PATH:
        return "responses"
    return None


class Block:
    """One prompt block as the estimate and the cache simulation see it."""

    def __init__(self, tag: str, value: Any):
        self.breakpoint = isinstance(value, dict) and value.get("cache_control") is not None
        if isinstance(value, dict) and "cache_control" in value:
            value = {k: v for k, v in value.items() if k != "cache_control"}
        self.tag, self.data = tag, compact(value).encode()


def prompt_blocks(kind: Optional[str], body: Any) -> List[Block]:
    """The request's prompt as README.md's ordered block list (tools, system, message content)."""
    if not isinstance(body, dict):
        return []

    def items(key: str) -> List[Any]:
        value = body.get(key)
        return value if isinstance(value, list) else []

    if kind == "openai":
        return [Block("messages", m) for m in items("messages")] + [Block("tools", t) for t in items("tools")]
    if kind == "responses":
        blocks = []
        if isinstance(body.get("instructions"), str):
            blocks.append(Block("system", {"type": "text", "text": body["instructions"]}))
        if isinstance(body.get("input"), str):
            blocks.append(Block("input", {"role": "user", "content": body["input"]}))
        return blocks + [Block("input", m) for m in items("input")] + [Block("tools", t) for t in items("tools")]
    if kind != "anthropic":
        return []
    blocks = [Block("tools", t) for t in items("tools")]
    system = body.get("system")
    if isinstance(system, str):
        blocks.append(Block("system", {"type": "text", "text": system}))
    elif isinstance(system, list):
        blocks += [Block("system", b) for b in system]
    for msg in items("messages"):
        if not isinstance(msg, dict):
            continue
        role = msg.get("role") if isinstance(msg.get("role"), str) else ""
        content = msg.get("content")
        if isinstance(content, str):
            blocks.append(Block(role, {"type": "text", "text": content}))
        elif isinstance(content, list):
            blocks += [Block(role, b) for b in content]
    return blocks


def tokens_ceil(nbytes: int, cpt: float) -> int:
    return -(-nbytes // cpt) if is_int(cpt) else math.ceil(nbytes / cpt)


def tokens_floor(nbytes: int, cpt: float) -> int:
    return nbytes // cpt if is_int(cpt) else math.floor(nbytes / cpt)


def simulate_cache(blocks: List[Block], ctx: Dict[str, Any], cache: set) -> Tuple[int, int, List[bytes]]:
    """(cache_read, cache_creation, prefix hashes to add to the cache) for one Messages request.

    The hashes are chained over the blocks, so a prefix hash names the whole prompt up to that block.
    """
    cpt, minimum = ctx["chars_per_token"], ctx["min_cache_tokens"]
    hashes, ends, h, total = [], [], b"", 0
    for block in blocks:
        h = hashlib.sha256(h + block.tag.encode() + block.data).digest()
        total += len(block.data)
        hashes.append(h)
        ends.append(total)
    breakpoints = [i for i, b in enumerate(blocks) if b.breakpoint]
    hit = -1
    for b in breakpoints:
        for j in range(b, max(0, b - CACHE_LOOKBACK + 1) - 1, -1):
            if hashes[j] in cache:
                hit = max(hit, j)
                break
    read = tokens_floor(ends[hit], cpt) if hit >= 0 else 0
    writes = [hashes[b] for b in breakpoints if hashes[b] not in cache and tokens_floor(ends[b], cpt) >= minimum]
    creation = 0
    if breakpoints and breakpoints[-1] > hit and tokens_floor(ends[breakpoints[-1]], cpt) >= minimum:
        creation = max(0, tokens_floor(ends[breakpoints[-1]], cpt) - read)
    estimate = tokens_ceil(total, cpt)
    read = min(read, estimate)
    return read, min(creation, estimate - read), writes


def too_long(kind: Optional[str], path: str, tokens: int, limit: int) -> Dict[str, Any]:
    """The reply the real API gives to a prompt over the context window."""
    headers = {"x-should-retry": "false"}
    message = f"prompt is too long: {tokens} tokens > {limit} maximum"
    if BEDROCK_PATH.match(path):
        headers["x-amzn-ErrorType"] = "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"
        return {"status": 400, "headers": headers, "json": {"message": message}}
    if kind in ("openai", "responses"):
        return {"status": 400, "headers": headers, "json": {"error": {
            "message": f"This model's maximum context length is {limit} tokens. However, your messages resulted "
                       f"in {tokens} tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error", "param": "messages" if kind == "openai" else "input",
            "code": "context_length_exceeded"}}}
    return {"status": 400, "headers": headers, "json": error_body("invalid_request_error", message)}


def with_usage(resp: Dict[str, Any], tokens: int, read: int, creation: int) -> Dict[str, Any]:
    """A copy of resp whose anthropic/openai usage reports the request's estimate (the stored one is reused)."""
    if isinstance(resp.get("anthropic"), dict):
        msg = resp["anthropic"]
        usage = dict(msg.get("usage") or {}, input_tokens=tokens - read - creation,
                     cache_creation_input_tokens=creation, cache_read_input_tokens=read)
        return dict(resp, anthropic=dict(msg, usage=usage))
    if isinstance(resp.get("openai"), dict):
        completion = resp["openai"]
        usage = dict(completion.get("usage") or {})
        output = usage.get("completion_tokens", 0)
        details = usage.get("prompt_tokens_details")
        usage.update(prompt_tokens=tokens, total_tokens=tokens + (output if is_int(output) else 0),
                     prompt_tokens_details=dict(details if isinstance(details, dict) else {}, cached_tokens=0))
        return dict(resp, openai=dict(completion, usage=usage))
    if isinstance(resp.get("responses"), dict):
        response = resp["responses"]
        usage = dict(response.get("usage") or {})
        output = usage.get("output_tokens", 0)
        details = usage.get("input_tokens_details")
        usage.update(input_tokens=tokens, total_tokens=tokens + (output if is_int(output) else 0),
                     input_tokens_details=dict(details if isinstance(details, dict) else {}, cached_tokens=0))
        return dict(resp, responses=dict(response, usage=usage))
    return resp


# ---------------------------------------------------------------------------------------------- HTTP

class Request:
    def __init__(self, method: str, target: str, version: str, headers: Dict[str, str], body: bytes):
        self.method, self.version, self.headers, self.body = method, version, headers, body
        self.path, _, self.query = target.partition("?")
        self.text = body.decode("utf-8", errors="replace")
        try:
            self.json = json.loads(body) if body else None
        except ValueError:
            self.json = None

    def keep_alive(self) -> bool:
        tokens = [t.strip() for t in self.headers.get("connection", "").lower().split(",")]
        if self.version == "HTTP/1.0":
            return "keep-alive" in tokens
        return "close" not in tokens

    def record(self, index: Optional[int]) -> Dict[str, Any]:
        return {"index": index, "method": self.method, "path": self.path, "query": self.query,
                "headers": self.headers, "body": self.json,
                "raw_body": self.text}


def read_line(rfile) -> bytes:
    line = rfile.readline(MAX_LINE + 1)
    if len(line) > MAX_LINE:
        raise BadRequest("line too long")
    return line


def read_request(rfile, sock: socket.socket) -> Optional[Request]:
    """One request off a keep-alive connection; None on a clean EOF between requests."""
    line = read_line(rfile)
    while line in (b"\r\n", b"\n"):  # RFC 9112 asks servers to ignore stray empty lines before a request
        line = read_line(rfile)
    if not line:
        return None
    parts = line.decode("latin-1").rstrip("\r\n").split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise BadRequest(f"bad request line {line!r}")
    headers: Dict[str, str] = {}
    while True:
        hline = read_line(rfile)
        if not hline:
            raise BadRequest("connection closed inside the headers")
        if hline in (b"\r\n", b"\n"):
            break
        name, sep, value = hline.decode("latin-1").partition(":")
        if not sep:
            raise BadRequest(f"bad header line {hline!r}")
        name = name.strip().lower()
        value = value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    if headers.get("expect", "").lower() == "100-continue":
        sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = read_chunked(rfile)
    else:
        try:
            length = int(headers.get("content-length", "0") or 0)
        except ValueError:
            raise BadRequest("bad content-length") from None
        body = rfile.read(length)
        if len(body) != length:
            raise BadRequest("connection closed inside the body")
    return Request(parts[0], parts[1], parts[2], headers, body)


def read_chunked(rfile) -> bytes:
    body = bytearray()
    while True:
        size_line = read_line(rfile)
        try:
            size = int(size_line.split(b";")[0].strip(), 16)
        except ValueError:
            raise BadRequest(f"bad chunk size {size_line!r}") from None
        if size == 0:
            while read_line(rfile) not in (b"\r\n", b"\n", b""):  # trailers
                pass
            return bytes(body)
        body += rfile.read(size)
        read_line(rfile)  # the CRLF after the chunk data


def error_body(kind: str, message: str) -> Dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


class Body:
    """What to send after the head: segments are the natural write units (one SSE event each)."""

    def __init__(self, content_type: Optional[str], segments: List[bytes], streamed: bool):
        self.content_type, self.segments, self.streamed = content_type, segments, streamed


def build_body(resp: Dict[str, Any], request_json: Any) -> Body:
    """The response body; anthropic/openai replies stream when the request body says "stream": true."""
    stream = isinstance(request_json, dict) and request_json.get("stream") is True
    eol = resp.get("line_ending", "\n")
    delta_chars = resp.get("delta_chars", DEFAULT_DELTA_CHARS)
    json_ct = resp.get("content_type", JSON_CT)
    if "json" in resp:
        return Body(json_ct, [compact(resp["json"]).encode()], False)
    if "raw" in resp:
        return Body(json_ct, [resp["raw"].encode()], False)
    if "sse" in resp:
        items = resp["sse"]
    elif "anthropic" in resp:
        if not stream:
            return Body(json_ct, [compact(resp["anthropic"]).encode()], False)
        items = [{"event": e, "data": d} for e, d in anthropic_events(resp["anthropic"], delta_chars)]
    elif "openai" in resp:
        if not stream:
            return Body(json_ct, [compact(resp["openai"]).encode()], False)
        options = request_json.get("stream_options") or {}
        include_usage = isinstance(options, dict) and options.get("include_usage") is True
        items = [{"data": d} for d in openai_chunks(resp["openai"], delta_chars, include_usage,
                                                      bool(resp.get("interleave_tool_calls")))]
    elif "responses" in resp:
        if not stream:
            return Body(json_ct, [compact(resp["responses"]).encode()], False)
        items = [{"event": e["type"], "data": e} for e in responses_events(resp["responses"], delta_chars)]
    else:
        return Body(resp.get("content_type"), [], False)
    return Body(resp.get("content_type", SSE_CT), [encode_sse(item, eol) for item in items], True)


def plan_writes(body: Body, chunk_size: Optional[int], fault: Dict[str, Any]) -> Tuple[List[bytes], int]:
    """Cut the body into writes and find the byte offset where the fault (if any) fires.

    Without chunk_size each segment is one write (one HTTP chunk in a stream); with it the whole body is
    cut every chunk_size bytes regardless of events, lines or UTF-8. The fault offset is always a cut too,
    so "after N events" means exactly after the N-th event's last byte.
    """
    data = b"".join(body.segments)
    ends = list(itertools.accumulate(len(s) for s in body.segments))
    fault_at = -1
    if fault.get("type") in ("drop", "stall"):
        if "after_bytes" in fault:
            fault_at = fault["after_bytes"]
        else:  # a Content-Length body has no events: the fault fires before its first byte
            n = fault["after_events"]
            fault_at = (ends[n - 1] if n <= len(ends) else len(data)) if body.streamed and n > 0 else 0
        fault_at = min(fault_at, len(data))
    cuts = set(range(0, len(data), chunk_size)) if chunk_size else set([0] + ends[:-1])
    if fault_at > 0:
        cuts.add(fault_at)
    bounds = sorted(c for c in cuts if c < len(data)) + [len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:]) if b > a], fault_at


def checked(req: "Request", resp: Dict[str, Any], label: Any) -> Dict[str, Any]:
    """resp, or the error that replaces it when the request fails its `expect` or the Bedrock checks."""
    expect = resp.get("expect") or {}
    wrong = [(k, expect[k], getattr(req, k)) for k in ("method", "path") if k in expect
             and expect[k] != getattr(req, k)]
    if wrong:
        msg = "; ".join(f"expected {k} {want!r}, got {got!r}" for k, want, got in wrong)
        return {"status": 400, "headers": {"x-should-retry": "false"},
                "json": error_body("invalid_request_error", f"mock: request {label}: {msg}")}
    if "bedrock" in resp:
        opts = resp["bedrock"] if isinstance(resp["bedrock"], dict) else {}
        refused = check_bedrock(req, opts) if opts.get("check", True) else None
        if refused is not None:
            return refused
    return resp


class MockServer:
    def __init__(self, scenario: Scenario, verbose: bool = False):
        self.lock = threading.Lock()
        self.verbose = verbose
        self.install(scenario)

    def install(self, scenario: Scenario) -> None:
        """Start over with a scenario: queue, recording, counters and prompt cache (caller holds the lock)."""
        self.scenario = scenario
        self.responses = scenario.responses
        self.recorded: List[Dict[str, Any]] = []
        self.taken = 0  # queue counter: responses[i] goes to the i-th request answered from the queue
        self.route_hits = [0] * len(scenario.routes)
        self.cache: set = set()
        # (id(response), streamed, include_usage) -> (response, body, writes, fault offset): see `rendered`.
        self.renders: Dict[Tuple[int, bool, bool], Tuple[Dict[str, Any], Body, List[bytes], int]] = {}

    def log(self, msg: str) -> None:
        if self.verbose:
            print(f"mockserver: {msg}", file=sys.stderr, flush=True)

    def take(self, req: Request) -> Tuple[Dict[str, Any], Dict[str, Any], str]:
        """Record the request and choose its reply: (record, response, request-id).

        One lock makes the order global across connections and keeps the prompt cache consistent.
        """
        ctx = self.scenario.context
        kind = api_kind(req.path)
        with self.lock:
            rec = req.record(None)
            arrival = len(self.recorded)
            blocks = prompt_blocks(kind, req.json) if ctx else []
            tokens = tokens_ceil(sum(len(b.data) for b in blocks), ctx["chars_per_token"]) if ctx else 0
            if ctx:
                rec["tokens"] = tokens
                if kind == "anthropic":
                    rec["cache_read"] = rec["cache_creation"] = 0
            if ctx and req.method == "POST" and req.path == COUNT_TOKENS_PATH:
                resp = {"json": {"input_tokens": tokens}}
            elif ctx and ctx["limit"] is not None and tokens > ctx["limit"]:
                rec["rejected"] = "context_limit"
                resp = too_long(kind, req.path, tokens, ctx["limit"])
            else:
                resp = self.route(req, rec)
                if resp is None:
                    index = rec["index"] = self.taken
                    self.taken += 1
                    resp = self.responses[index] if index < len(self.responses) else {
                        "status": 500, "headers": {"x-should-retry": "false"},
                        "json": error_body("api_error", f"mock: no scenario response left for request {index} "
                                                        f"(0-based index; the scenario has {len(self.responses)} "
                                                        f"responses)")}
                resp = checked(req, resp, rec["index"] if rec["index"] is not None else f"a{arrival}")
                if ctx and kind == "anthropic" and ctx["cache"]:
                    read, creation, writes = simulate_cache(blocks, ctx, self.cache)
                    rec["cache_read"], rec["cache_creation"] = read, creation
                    if resp.get("status", 200) < 400:  # a refused request caches nothing
                        self.cache.update(writes)
                if ctx and ctx["usage"]:
                    resp = with_usage(resp, tokens, rec.get("cache_read", 0), rec.get("cache_creation", 0))
            self.recorded.append(rec)
        request_id = f"req_mock_{rec['index']}" if rec["index"] is not None else f"req_mock_a{arrival}"
        return rec, resp, request_id

    def route(self, req: Request, rec: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        """The response of the first route that matches the request (counted), or None."""
        for k, route in enumerate(self.scenario.routes):
            times = route.get("times")
            if times is not None and self.route_hits[k] >= times:
                continue
            match = route.get("match") or {}
            if (match.get("path", req.path) == req.path and match.get("method", req.method) == req.method
                    and match.get("body_contains", "") in req.text):
                self.route_hits[k] += 1
                rec["route"] = k
                return route["response"]
        return None

    # -- connection loop

    def handle_connection(self, sock: socket.socket) -> None:
        # Small writes must leave as separate segments, promptly: that is what streaming tests observe.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        rfile = sock.makefile("rb")
        try:
            while True:
                try:
                    req = read_request(rfile, sock)
                except BadRequest as e:
                    bad = {"status": 400, "json": error_body("invalid_request_error", f"mock: {e}")}
                    self.send_response(sock, bad, None, keep=False)
                    return
                if req is None or not self.dispatch(sock, req):
                    return
        except OSError:
            pass  # the client went away; nothing to report to anyone
        finally:
            rfile.close()
            sock.close()

    def dispatch(self, sock: socket.socket, req: Request) -> bool:
        """Answer one request; True if the connection stays open for another."""
        if req.path.startswith(CONTROL_PREFIX):
            status, payload = self.control(req)
            return self.send_response(sock, {"status": status, "json": payload}, None, req.keep_alive())
        rec, resp, request_id = self.take(req)
        self.log(f"#{rec['index']} {req.method} {req.path}?{req.query} {req.text[:200]}")
        if "bedrock" in resp:
            stream = req.path.endswith("/invoke-with-response-stream")
            resp = dict(resp, bedrock_body=bedrock_body(resp, stream))
        return self.send_response(sock, resp, req.json, req.keep_alive(), request_id)

    def control(self, req: Request) -> Tuple[int, Any]:
        route = (req.method, req.path[len(CONTROL_PREFIX):])
        if route == ("GET", "health"):
            return 200, {"ok": True}
        if route == ("GET", "requests"):
            with self.lock:
                return 200, list(self.recorded)
        if route == ("POST", "scenario"):
            try:
                scenario = load_scenario(req.json)
            except ScenarioError as e:
                return 400, error_body("invalid_request_error", f"mock: bad scenario: {e}")
            with self.lock:
                self.install(scenario)
            return 200, {"ok": True, "responses": len(scenario.responses)}
        return 404, error_body("not_found_error", f"mock: no control endpoint {req.method} {req.path}")

    # -- writing

    def send_response(self, sock: socket.socket, resp: Dict[str, Any], request_json: Any, keep: bool,
                      request_id: Optional[str] = None) -> bool:
        """Write one scenario response (or a control/error answer); True if the connection stays open."""
        fault = resp.get("fault") or {}
        delay = resp.get("delay_ms", 0) + (fault.get("ms", 0) if fault.get("type") == "stall_headers" else 0)
        time.sleep(delay / 1000)
        if fault.get("type") == "close":
            sock.shutdown(socket.SHUT_RDWR)
            return False

        body, writes, fault_at = self.rendered(resp, request_json, fault, keep=request_id is not None)
        defaults = [("request-id", request_id), ("content-type", body.content_type)]
        if "bedrock" in resp or "x-amzn-ErrorType" in resp.get("headers", {}):
            defaults.append(("x-amzn-requestid", request_id))
        if body.streamed:
            defaults += [("transfer-encoding", "chunked"), ("cache-control", "no-cache")]
        else:
            defaults.append(("content-length", str(sum(map(len, writes)))))
        if not keep:
            defaults.append(("connection", "close"))
        # Scenario headers win over defaults of the same name, even framing ones (to test lying servers).
        given = resp.get("headers", {})
        overridden = {k.lower() for k in given}
        head = [(k, v) for k, v in defaults if v is not None and k not in overridden]
        head += [(k, str(v)) for k, v in given.items()]
        keep = keep and all(v.lower() != "close" for k, v in head if k.lower() == "connection")
        sock.sendall(status_head(resp.get("status", 200), head))

        between = resp.get("delay_ms_between", 0) / 1000
        written = 0
        for i, data in enumerate(writes):
            if written == fault_at and not self.fire_fault(sock, fault):
                return False
            if i and between:
                time.sleep(between)
            sock.sendall(data)
            written += len(data) - (framing(data) if body.streamed else 0)
        if written == fault_at and not self.fire_fault(sock, fault):
            return False
        if body.streamed:
            sock.sendall(b"0\r\n\r\n")
        return keep

    def rendered(self, resp: Dict[str, Any], request_json: Any, fault: Dict[str, Any],
                 keep: bool) -> Tuple[Body, List[bytes], int]:
        """The response's body and its writes (HTTP chunks framed), rendered once per scenario response and
        request shape and then served as bytes: encoding a stream's events anew for every request would make
        the server, not the client under test, the cost of a small streamed answer. The same bytes and the
        same writes either way. `keep`: a scenario's response (kept with the scenario), worth keeping."""
        stream = isinstance(request_json, dict) and request_json.get("stream") is True
        options = request_json.get("stream_options") if stream else None
        usage = isinstance(options, dict) and options.get("include_usage") is True
        key = (id(resp), stream, usage)
        with self.lock:
            hit = self.renders.get(key)
        if hit is not None and hit[0] is resp:
            return hit[1], hit[2], hit[3]
        body = resp["bedrock_body"] if "bedrock_body" in resp else build_body(resp, request_json)
        writes, fault_at = plan_writes(body, resp.get("chunk_size"), fault)
        if body.streamed:
            writes = [b"%x\r\n%s\r\n" % (len(data), data) for data in writes]
        if keep and "bedrock_body" not in resp:  # (a bedrock response is a new dict per request)
            with self.lock:
                if len(self.renders) >= 256:  # responses made per request (usage filled in) never hit
                    self.renders.clear()
                # The response is kept with its render: its id stays its own while the entry lives.
                self.renders[key] = (resp, body, writes, fault_at)
        return body, writes, fault_at

    def fire_fault(self, sock: socket.socket, fault: Dict[str, Any]) -> bool:
        """Apply a drop or stall fault; False if the connection is gone."""
        if fault["type"] == "stall":
            time.sleep(fault["ms"] / 1000)  # per-connection thread: other connections keep being served
            return True
        # A FIN, not a RST: the client must still get every byte sent so far, then an early EOF.
        sock.shutdown(socket.SHUT_RDWR)
        return False


def framing(write: bytes) -> int:
    """How many bytes of an HTTP chunk are its framing (size line and CRLF), not body."""
    return write.index(b"\r\n") + 4


def status_head(status: int, headers: List[Tuple[str, str]]) -> bytes:
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = REASONS.get(status, "Unknown")
    lines = [f"HTTP/1.1 {status} {reason}"] + [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def watch_parent() -> None:
    # A test runner killed with SIGKILL cannot stop us; exiting when we are orphaned avoids leaked servers.
    parent = os.getppid()
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(0)


def main(argv: List[str]) -> int:
    # The env switch reaches a server started deep inside a Rust, Python or C test without changing it.
    verbose = "--verbose" in argv or os.environ.get("TOOLOOP_MOCK_VERBOSE", "") not in ("", "0")
    args = [a for a in argv if a != "--verbose"]
    if len(args) > 1:
        print("usage: mockserver.py [--verbose] [SCENARIO.json | -]", file=sys.stderr)
        return 2
    try:
        if not args:
            scenario = Scenario([])
        elif args[0] == "-":
            scenario = load_scenario(json.load(sys.stdin))
        else:
            with open(args[0], encoding="utf-8") as f:
                scenario = load_scenario(json.load(f))
    except (OSError, ValueError) as e:  # ScenarioError and JSONDecodeError are ValueErrors
        print(f"mockserver: cannot load scenario: {e}", file=sys.stderr)
        return 2

    server = MockServer(scenario, verbose)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    threading.Thread(target=watch_parent, daemon=True).start()
    print(f"PORT {listener.getsockname()[1]}", flush=True)
    try:
        while True:
            conn, _ = listener.accept()
            # Daemon threads: a connection stalled for 30 s must not hold up exit on SIGTERM.
            threading.Thread(target=server.handle_connection, args=(conn,), daemon=True).start()
    except KeyboardInterrupt:
        return 0
    finally:
        listener.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
