"""A hand-written misbehaving MCP server (no SDK), used by tests/mcp.rs. Mode from argv[1]:

- silent:  starts a grandchild (which also holds our stdout), reads stdin and never answers, ignores
           SIGTERM and outlives its stdin (initialize times out; closing must escalate to SIGKILL and stop
           the whole process group)
- orphan:  like garbage, but a tools/call starts a grandchild that keeps our stdout open, then exits
           (no EOF reaches the client: it must notice the exit by itself)
- garbage: answers initialize, then writes a non-JSON line, invalid UTF-8 and a stray response before
           every real answer; sends a request of its own (sampling) and records our reply on stderr.
"""

import json
import signal
import subprocess
import sys
import time

mode = sys.argv[1] if len(sys.argv) > 1 else "silent"
out = sys.stdout.buffer
if mode == "silent":
    marker = sys.argv[2] if len(sys.argv) > 2 else ""
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", marker])
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def send(obj):
    out.write(json.dumps(obj).encode() + b"\n")
    out.flush()


for raw in sys.stdin.buffer:
    if mode == "silent":
        continue
    msg = json.loads(raw)
    method, mid = msg.get("method"), msg.get("id")
    if method is None:
        # a response to our own request, or nothing we expect
        print(f"client replied: {json.dumps(msg)}", file=sys.stderr, flush=True)
        continue
    if mid is None:
        continue
    out.write(b"this is not json\n")
    out.write(b"\xff\xfe garbage \x00\n")
    send({"jsonrpc": "2.0", "id": 99999, "result": {}})
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
            "serverInfo": {"name": "bad", "version": "0"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": "srv-1", "method": "sampling/createMessage", "params": {"messages": []}})
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [
            {"name": "hello.world", "description": "says hi", "inputSchema": {"type": "object"}}]}})
    elif method == "tools/call" and mode == "orphan":
        marker = sys.argv[2] if len(sys.argv) > 2 else ""
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", marker])
        sys.exit(3)
    elif method == "tools/call":
        send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": "hi"}]}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "nope"}})

if mode == "silent":
    print("stdin closed; staying up", file=sys.stderr, flush=True)
    time.sleep(300)
