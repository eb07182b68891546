#!/usr/bin/env python3
"""What a small model is sent, request by request: the `tooloop` command and bench/simple_loop.py run one
scripted task (write hello.py, run it, answer) against the mock server (tests/mock), on both wires, in two
workspaces; each request body they sent is rendered by a llama.cpp server's chat template (`POST
/apply-template`, the same body on the OpenAI wire; an Anthropic body turned into it as llama.cpp does) and
counted with its tokenizer (`POST /tokenize`): the system prompt, the tool definitions, injected notes, the
conversation, and the prefix (everything before the first user message) — which the server can take from its
prompt cache when it is the same as the last request's. Two short calls per request; nothing is generated.

    python3 bench/prompt_tokens.py --server http://127.0.0.1:8091 [-- EXTRA TOOLOOP FLAGS]

Without --server the bytes of the rendered prompts are given instead of tokens (a llama.cpp Qwen2.5-style
template, close to the tokens' ratio). The simple loop needs the `anthropic` package (--simple-python names a
Python that has it); without it its first request is built from its SYSTEM and TOOLS. Standard library only.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "mock"))
from mockctl import MockServer  # noqa: E402

TASK = "Create hello.py that prints exactly Hello, world! and run it to check."
WRITE = {"path": "hello.py", "content": "print('Hello, world!')\n"}


def _anthropic(content: List[Dict[str, Any]], stop: str) -> Dict[str, Any]:
    return {"anthropic": {"id": "m", "type": "message", "role": "assistant", "model": "m", "content": content,
                          "stop_reason": stop, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}}


def _openai(message: Dict[str, Any], finish: str) -> Dict[str, Any]:
    return {"openai": {"id": "c", "object": "chat.completion", "created": 1, "model": "m",
                       "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                       "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}}


def script(wire: str) -> List[Dict[str, Any]]:
    """write hello.py, run it, answer."""
    if wire == "anthropic":
        use = lambda i, n, a: _anthropic([{"type": "tool_use", "id": i, "name": n, "input": a}], "tool_use")  # noqa: E731
        return [use("w", "write_file", WRITE), use("b", "bash", {"command": "python3 hello.py"}),
                _anthropic([{"type": "text", "text": "hello.py prints Hello, world!"}], "end_turn")]
    call = lambda i, n, a: _openai({"role": "assistant", "content": None, "tool_calls": [  # noqa: E731
        {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}]}, "tool_calls")
    return [call("w", "write_file", WRITE), call("b", "bash", {"command": "python3 hello.py"}),
            _openai({"role": "assistant", "content": "hello.py prints Hello, world!"}, "stop")]


def to_chat(body: Dict[str, Any]) -> Dict[str, Any]:
    """A request body as llama.cpp's chat template takes it (OpenAI chat form); `notes` lists the texts the
    agent added to the conversation itself (user-side text after the task)."""
    notes: List[str] = []
    if "system" not in body:   # already OpenAI chat
        msgs = body["messages"]
        seen_user = False
        for m in msgs:
            if m["role"] == "user":
                if seen_user and isinstance(m.get("content"), str):
                    notes.append(m["content"])
                seen_user = True
        return {"messages": msgs, "tools": body.get("tools") or [], "notes": notes}
    msgs: List[Dict[str, Any]] = []
    system = body["system"]
    msgs.append({"role": "system", "content": system if isinstance(system, str) else "".join(b["text"] for b in system)})
    for i, m in enumerate(body["messages"]):
        content = m["content"]
        if isinstance(content, str):
            msgs.append({"role": m["role"], "content": content})
            continue
        texts = [b["text"] for b in content if b.get("type") == "text"]
        if m["role"] == "assistant":
            calls = [{"id": b["id"], "type": "function", "function": {"name": b["name"], "arguments": json.dumps(b["input"])}}
                     for b in content if b.get("type") == "tool_use"]
            msg: Dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
            if calls:
                msg["tool_calls"] = calls
            msgs.append(msg)
            continue
        for b in content:
            if b.get("type") == "tool_result":
                c = b.get("content")
                c = "".join(x.get("text", "") for x in c) if isinstance(c, list) else (c or "")
                msgs.append({"role": "tool", "tool_call_id": b["tool_use_id"], "content": c})
        if texts:
            msgs.append({"role": "user", "content": "\n".join(texts)})
            if i > 0:
                notes += texts
    tools = [{"type": "function", "function": {"name": t["name"], "description": t.get("description", ""),
                                               "parameters": t["input_schema"]}} for t in body.get("tools") or []]
    return {"messages": msgs, "tools": tools, "notes": notes}


def render(chat: Dict[str, Any]) -> str:
    """Qwen2.5's template for tools (the one llama.cpp's /props showed for the benchmark's model), offline."""
    msgs, tools = chat["messages"], chat.get("tools") or []
    out = ""
    if msgs and msgs[0]["role"] == "system":
        system, rest = msgs[0]["content"], msgs[1:]
    else:
        system, rest = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.", msgs
    if tools:
        out += f"<|im_start|>system\n{system}\n\n# Tools\n\nYou may call one or more functions to assist with the " \
               "user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>"
        out += "".join("\n" + json.dumps(t) for t in tools)
        out += "\n</tools>\n\nFor each function call, return a json object with function name and arguments inside " \
               "a ```json code block:\n```json\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n```" \
               "<|im_end|>\n"
    else:
        out += f"<|im_start|>system\n{system}<|im_end|>\n"
    for m in rest:
        if m["role"] == "tool":
            out += f"<|im_start|>user\n<tool_response>\n{m['content']}\n</tool_response><|im_end|>\n"
        elif m.get("tool_calls"):
            out += "<|im_start|>assistant" + (f"\n{m['content']}" if m.get("content") else "")
            for c in m["tool_calls"]:
                out += f"\n```json\n{{\"name\": \"{c['function']['name']}\", \"arguments\": {c['function']['arguments']}}}\n```"
            out += "<|im_end|>\n"
        else:
            out += f"<|im_start|>{m['role']}\n{m.get('content') or ''}<|im_end|>\n"
    return out + "<|im_start|>assistant\n"


class Counter:
    """Tokens by the server (`--server`), else bytes of the offline rendering."""

    def __init__(self, server: Optional[str]) -> None:
        self.server = server.rstrip("/") if server else None
        self.unit = "tokens" if server else "bytes"

    def _post(self, path: str, body: Dict[str, Any]) -> Any:
        assert self.server
        req = urllib.request.Request(self.server + path, data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as resp:
            return json.loads(resp.read())

    def text(self, text: str) -> int:
        if not text:
            return 0
        if not self.server:
            return len(text.encode())
        return len(self._post("/tokenize", {"content": text})["tokens"])

    def prompt(self, chat: Dict[str, Any]) -> str:
        if not self.server:
            return render(chat)
        body: Dict[str, Any] = {"messages": chat["messages"]}
        if chat.get("tools"):
            body["tools"] = chat["tools"]
        return str(self._post("/apply-template", body)["prompt"])

    def parts(self, body: Dict[str, Any]) -> Dict[str, Any]:
        chat = to_chat(body)
        msgs = chat["messages"]
        full = self.prompt(chat)
        total = self.text(full)
        bare = self.text(self.prompt({"messages": msgs})) if chat["tools"] else total
        first_user = next(i for i, m in enumerate(msgs) if m["role"] == "user")
        head = self.prompt({"messages": msgs[:first_user] + [{"role": "user", "content": ""}], "tools": chat["tools"]})
        head = head[:head.rfind("<|im_start|>user")]
        system = msgs[0]["content"] if msgs[0]["role"] == "system" else ""
        return {"total": total, "system": self.text(system), "tools": total - bare,
                "notes": sum(self.text(n) for n in chat["notes"]), "conversation": total - self.text(head),
                "prefix": head}


def simple_loop_constants() -> Any:
    tree = ast.parse((ROOT / "bench" / "simple_loop.py").read_text())
    found = {n.targets[0].id: ast.literal_eval(n.value) for n in tree.body
             if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name) and n.targets[0].id in ("SYSTEM", "TOOLS")}
    return found["SYSTEM"], found["TOOLS"]


def record(argv: List[str], wire: str, ws: Path, env: Dict[str, str]) -> List[Dict[str, Any]]:
    with MockServer({"responses": script(wire)}) as mock:
        base = mock.base_url + ("/v1" if wire == "openai" else "")
        cmd = [a.replace("{base}", base) for a in argv]
        proc = subprocess.run(cmd, cwd=ws, env=env, capture_output=True, text=True, timeout=300,
                              stdin=subprocess.DEVNULL)
        bodies = [r["body"] for r in mock.requests() if r["method"] == "POST" and isinstance(r["body"], dict)]
    if proc.returncode != 0:
        print(f"{' '.join(cmd[:3])}...: exit {proc.returncode}: {proc.stderr.strip()[-300:]}", file=sys.stderr)
    return bodies


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: List[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", help="a llama.cpp server to count tokens with (/apply-template, /tokenize)")
    p.add_argument("--tooloop", default=None, help="the tooloop command (default: this Python's -m tooloop.cli)")
    p.add_argument("--model", default="qwen2.5-coder-q15")
    p.add_argument("--context-window", default="4096")
    p.add_argument("--simple-python", default=sys.executable, help="a Python with the `anthropic` package")
    args = p.parse_args(argv)
    count = Counter(args.server)
    tooloop = args.tooloop.split() if args.tooloop else [sys.executable, "-m", "tooloop.cli"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "TOOLOOP_"))}
    env.setdefault("ANTHROPIC_API_KEY", "local")
    env.setdefault("OPENAI_API_KEY", "local")
    has_sdk = subprocess.run([args.simple_python, "-c", "import anthropic"], capture_output=True).returncode == 0
    print(f"{'agent':<8} {'wire':<10} {'request':>7} {'total':>6} {'system':>7} {'tools':>6} {'notes':>6} "
          f"{'conv':>6} {'prefix':>7}  ({count.unit}; prefix: same as the previous request's?)")
    with tempfile.TemporaryDirectory() as tmp:
        env["TOOLOOP_HOME"] = str(Path(tmp) / "home")
        for wire in ("anthropic", "openai"):
            runs = []
            for n in (1, 2):   # two tasks, each in a workspace of its own
                ws = Path(tmp) / f"{wire}-ws{n}"
                ws.mkdir()
                cli = tooloop + ["--yes", "-p", "--no-color", "--provider", wire, "--model", args.model,
                                 "--base-url", "{base}", "--context-window", args.context_window] + extra + [TASK]
                runs.append(("tooloop", record(cli, wire, ws, env)))
            if wire == "anthropic":
                if has_sdk:
                    ws = Path(tmp) / "simple"
                    ws.mkdir()
                    simple = [args.simple_python, str(ROOT / "bench" / "simple_loop.py"), "--base-url", "{base}",
                              "--model", args.model, TASK]
                    runs.append(("simple", record(simple, wire, ws, env)))
                else:
                    system, tools = simple_loop_constants()
                    runs.append(("simple", [{"system": system, "tools": tools,
                                             "messages": [{"role": "user", "content": TASK}]}]))
            last: Dict[str, str] = {}
            for agent, bodies in runs:
                for i, body in enumerate(bodies):
                    part = count.parts(body)
                    same = "same" if last.get(agent) == part["prefix"] else "new"
                    last[agent] = part["prefix"]
                    print(f"{agent:<8} {wire:<10} {i + 1:>7} {part['total']:>6} {part['system']:>7} {part['tools']:>6} "
                          f"{part['notes']:>6} {part['conversation']:>6} {count.text(part['prefix']):>5} {same}")
                if bodies:
                    total = sum(count.parts(b)["total"] for b in bodies)
                    print(f"{agent:<8} {wire:<10} {'task':>7} {total:>6}  ({len(bodies)} requests)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
