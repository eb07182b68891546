#!/usr/bin/env python3
"""Build the fuzz seed corpora (fuzz/corpus/<target>/) from tests/scenarios/*.json, through the mock server's
own encoders, so the seeds are the exact bytes the suites' mock sends. Run from anywhere; idempotent."""
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "mock"))
import mockserver  # noqa: E402

CORPUS = ROOT / "fuzz" / "corpus"
STREAM = {"stream": True, "stream_options": {"include_usage": True}}


def put(target: str, data: bytes) -> None:
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / hashlib.sha1(data).hexdigest()).write_bytes(data)


# Bash commands for the permission rules (issue 38): the bypasses the rules must see through.
SHELL_SEEDS = [
    "echo hi #'\ntouch pwned", "ls #'\ntouch x", "echo X > f 2>&1", "awk 'BEGIN{print \"touch x\" | \"sh\"}'",
    "sed -n '1e cmd' f", "sort -o out in", "git --config-env=core.fsmonitor=X status", "GIT_EXTERNAL_DIFF=x git diff",
    "./tools/cat a", "bash -c 'rm -rf /'", "eval \"rm x\"", "echo rm | xargs -I{} {} x", "find . -exec rm {} +",
    "time -p rm x", "env -S 'rm x'", "\"rm\" x", "'rm' x", "\\rm x", "/bin/rm x", "cat <<EOF | sh\nrm x\nEOF",
    "echo $(rm x) `rm y` <(rm z)", "if a; then b; elif c; then d; else e; fi | f && ! g || (h) ; { i; }",
    "f() { rm x; }; f", "for i in 1 2; do rm $i; done", "case x in x) rm y;; esac", "$X y", "r\\\nm x",
    "timeout -s KILL 5 nice -n 3 npm test -- 'a && b' 2>/dev/null >&2",
]


def main() -> None:
    for s in SHELL_SEEDS:
        put("shell_rules", s.encode())
    for path in sorted((ROOT / "tests" / "scenarios").glob("*.json")):
        for resp in json.loads(path.read_text()).get("responses", []):
            for kind in ("anthropic", "openai", "responses"):
                if kind not in resp and not ("sse" in resp or "json" in resp):
                    continue
                target = f"{kind}_response"
                # Mode byte: even = a JSON body, odd = an SSE stream (see the fuzz targets).
                for mode, request in ((0, {}), (1, STREAM)):
                    body = b"".join(mockserver.build_body(resp, request).segments)
                    put(target, bytes([mode]) + body)
                    if mode == 1:
                        put("sse_decoder", bytes([len(body) % 7]) + body)
    # Session files: a header, entries, a reset, a torn tail, a line without its newline.
    header = b'{"type":"session","version":1,"created_at":1}\n'
    entry = (b'{"type":"entry","entry":{"id":"e1","role":"user","content":[{"type":"text","text":"hi"}],'
             b'"status":"complete","created_at":1}}')
    put("session_load", header + entry + b"\n")
    put("session_load", header + entry)
    put("session_load", header + entry + b"\n" + b'{"type":"reset","at":2}\n' + entry[:30])
    put("session_load", b"")
    # C configs.
    for cfg in ({"model": "m", "max_tokens": 10, "session": "/tmp/x.jsonl", "thinking": 2048},
                {"provider": "openai", "model": "gpt", "headers": {"a": "b"}, "extra": {"x": 1},
                 "stop_sequences": ["s"], "tool_choice": "auto", "builtin_tools": ["bash"]},
                {"api_key": 5, "timeout": 1.5, "max_turns_policy": "stop", "temperature": 0.2}):
        put("c_config", b"\x00" + json.dumps(cfg).encode())
        put("c_config", b"\x01" + json.dumps(cfg).encode())
    # Skill front matter (the YAML between the --- lines), the hostile shapes of issue 20 included.
    for fm in ("name: a\ndescription: b\n", "name: pdf\ndescription: \"x\"\nallowed-tools: [bash, read_file]\n"
               "meta: {a: 1, b: [1, 2.5, true, null]}\n", "a: &x [1, 2]\nb: *x\n", "x: " + "[" * 40 + "]" * 40,
               "k: |\n  multi\n  line\n", "? complex\n: key\n", "--- !tag\na: !!str 1\n"):
        put("skill_front_matter", fm.encode())
    # MCP stdio streams: a response to request 0, a server request, a notification, a batch, garbage.
    lines = [
        {"jsonrpc": "2.0", "id": 0, "result": {"content": [{"type": "text", "text": "hi"},
                                                           {"type": "image", "data": "AAAA", "mimeType": "image/png"}]}},
        {"jsonrpc": "2.0", "id": 7, "method": "ping"},
        {"jsonrpc": "2.0", "id": "s1", "method": "sampling/createMessage", "params": {}},
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
        {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}},
        [{"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "no"}}, {"jsonrpc": "2.0", "id": 2,
                                                                                "result": {"isError": True}}],
    ]
    stream = b"".join(json.dumps(m).encode() + b"\n" for m in lines) + b"not json\n\xff\xfe\n"
    put("mcp_framing", b"\x40" + stream)
    put("mcp_framing", b"\x01" + stream)


if __name__ == "__main__":
    main()
