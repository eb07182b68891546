#!/usr/bin/env python3
"""The simplest agent loop, on the official `anthropic` package: the yardstick bench/local_tasks.py holds the
`tooloop` command against. Two tools (write_file, bash), a three-sentence system prompt, temperature 0 (sent as a body field: this SDK has no temperature parameter),
max_tokens 512. Runs in the current folder; exits 0 when the model answered without a tool, 1 otherwise. Prints
`turns: N` and `tokens: first N, sent N, cached N` (the prompt tokens the server counted) on stderr for
bench/local_tasks.py.

    python3 bench/simple_loop.py --base-url http://127.0.0.1:8091 --model qwen2.5-coder-q15 "TASK"
"""

import argparse, pathlib, subprocess, sys

import anthropic

SYSTEM = ("You are a coding agent working in the current folder. Use the tools to write files and run "
          "commands. When the task is done, answer in one sentence without calling a tool.")
TOOLS = [
    {"name": "write_file", "description": "Write a text file.", "input_schema": {"type": "object", "properties": {
        "path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]}},
    {"name": "bash", "description": "Run a shell command.", "input_schema": {"type": "object", "properties": {
        "command": {"type": "string"}}, "required": ["command"]}},
]


def run_tool(name, args):
    if name == "write_file":
        pathlib.Path(args["path"]).write_text(args["content"])
        return f"wrote {args['path']}"
    p = subprocess.run(args["command"], shell=True, capture_output=True, text=True, timeout=60)
    return (p.stdout + p.stderr)[-4000:] + f"\n(exit code {p.returncode})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", default="http://127.0.0.1:8091")
    ap.add_argument("--model", default="qwen2.5-coder-q15")
    ap.add_argument("--max-turns", type=int, default=15)
    ap.add_argument("task")
    a = ap.parse_args()
    # The SDK adds /v1/messages itself: an OpenAI-style base URL (…/v1, what the benchmark's other agents are
    # given for --provider openai) would reach /v1/v1/messages and fail every run with a 404.
    base = a.base_url.rstrip("/")
    client = anthropic.Anthropic(base_url=base[:-3] if base.endswith("/v1") else base, api_key="local",
                                 timeout=1800, max_retries=0)
    messages = [{"role": "user", "content": a.task}]
    sent = []   # prompt tokens of each request (the server's count), and how many came from its cache
    cached = 0
    for turn in range(1, a.max_turns + 1):
        msg = client.messages.create(model=a.model, system=SYSTEM, tools=TOOLS, messages=messages,
                                     max_tokens=512, extra_body={"temperature": 0})
        u = msg.usage
        read = getattr(u, "cache_read_input_tokens", None) or 0
        sent.append((getattr(u, "input_tokens", None) or 0) + read
                    + (getattr(u, "cache_creation_input_tokens", None) or 0))
        cached += read
        print(f"tokens: first {sent[0]}, sent {sum(sent)}, cached {cached}", file=sys.stderr)
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in msg.content]})
        calls = [b for b in msg.content if b.type == "tool_use"]
        print(f"turn {turn}: " + "; ".join(f"{c.name}({c.input})" if c.type == "tool_use" else repr(c.text[:200])
                                          for c in msg.content if c.type in ("tool_use", "text")), file=sys.stderr)
        if not calls:
            print(f"turns: {turn}", file=sys.stderr)
            return 0
        results = []
        for c in calls:
            try:
                out = run_tool(c.name, c.input)
            except Exception as e:
                out = f"error: {e}"
            results.append({"type": "tool_result", "tool_use_id": c.id, "content": out})
        messages.append({"role": "user", "content": results})
    print(f"turns: {a.max_turns} (limit)", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
