#!/usr/bin/env python3
"""Issue 41, item 5, one variable: does a small model write correct files more often as whole files in fenced
text blocks (aider's "whole" format) than as JSON-escaped write_file tool arguments? One request per try, the
same message (the task and the task's files), the same temperature; bench/local_tasks.py's own checks judge
the files written. The "fence" arm reads a block's file name as aider does (the line before the block, a
first-line comment, else the task's only file); the library's text_edits is stricter (src/text_edits.rs).

    ARMS=tool,fence python3 bench/edit_format.py bugfix,function,fizzbuzz,failing_test 3 [temperature]

OpenAI wire; TOOLOOP_BENCH_URL (default http://127.0.0.1:8091/v1) and TOOLOOP_BENCH_MODEL (default
qwen2.5-coder-q15). Standard library only.
"""
import json, os, re, sys, tempfile, time, urllib.request, shutil
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
import local_tasks as lt

URL = os.environ.get("TOOLOOP_BENCH_URL", "http://127.0.0.1:8091/v1").rstrip("/") + "/chat/completions"
MODEL = os.environ.get("TOOLOOP_BENCH_MODEL", "qwen2.5-coder-q15")
INTRO = "You are a coding agent working in the current folder (the workspace); file paths are relative to it."
SYS_TOOL = INTRO + " Make the change the task asks for: write every file you create or change with the write_file tool, in full."
SYS_FENCE = (INTRO + " Make the change the task asks for: for every file you create or change, write its path on a "
             "line of its own, then the whole new file in a fenced code block, like this:\n\nhello.py\n```python\n"
             "print('hi')\n```\n\nNothing else is run for you.")
WRITE = {"type": "function", "function": {"name": "write_file", "description": "Write a whole text file.",
         "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                        "required": ["path", "content"]}}}
FENCE = re.compile(r"(?:^|\n)[`*#\s]*([\w./-]+\.\w+)[`*:\s]*\n```[\w+-]*\n(.*?)\n```", re.S)


def message(task):
    parts = [task.prompt]
    for rel, text in task.files.items():
        parts.append(f"{rel}\n```\n{text}```")
    return "\n\n".join(parts)


def ask(arm, task, temp):
    body = {"model": MODEL, "temperature": temp, "max_tokens": 1500,
            "messages": [{"role": "system", "content": SYS_TOOL if arm == "tool" else SYS_FENCE},
                         {"role": "user", "content": message(task)}]}
    if arm == "tool":
        body["tools"] = [WRITE]
    req = urllib.request.Request(URL, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def files_of(arm, resp, known=()):
    msg = resp["choices"][0]["message"]
    out = {}
    if arm == "tool":
        for c in msg.get("tool_calls") or []:
            try:
                a = json.loads(c["function"]["arguments"])
                out[a["path"]] = a["content"]
            except Exception as e:
                pass
    else:
        text = msg.get("content") or ""
        # aider-like: a block's file is named on the line before it (a bare path, or prose naming one:
        # "Here's the corrected `stats.py`:"), else by a comment on its first line, else the task's only file.
        pos = 0
        for m in re.finditer(r"```[\w+-]*\n(.*?)\n```", text, re.S):
            before = text[pos:m.start()].rstrip().splitlines()
            pos = m.end()
            body = m.group(1)
            names = re.findall(r"[\w./-]+\.(?:py|json|txt|md)\b", before[-1] if before else "")
            first = re.match(r"(?:#|//)\s*([\w./-]+\.\w+)\s*\n", body)
            if names:
                path = names[-1]
            elif first:
                path = first.group(1)
            elif len(known) == 1:
                path = known[0]
            else:
                continue
            out[path] = body + "\n"
    return out, msg


ARMS = ("tool", "fence")

def main():
    global ARMS
    ARMS = tuple(os.environ.get("ARMS", "tool,fence").split(","))
    names = sys.argv[1].split(",")
    n = int(sys.argv[2])
    temp = float(sys.argv[3]) if len(sys.argv) > 3 else 0.2
    tally = {}
    for task in [t for t in lt.TASKS if t.name in names]:
        for i in range(n):
            for arm in ARMS:
                ws = Path(tempfile.mkdtemp())
                for rel, text in task.files.items():
                    (ws / rel).write_text(text)
                t0 = time.monotonic()
                resp = ask(arm, task, temp)
                files, msg = files_of(arm, resp, list(task.files))
                for rel, text in files.items():
                    p = ws / rel.lstrip("/")
                    p.parent.mkdir(parents=True, exist_ok=True)
                    p.write_text(text)
                why = task.check(ws)
                u = resp.get("usage", {})
                tally.setdefault((task.name, arm), []).append(why is None)
                print(f"{task.name:12} {arm:6} #{i+1}: {'ok ' if why is None else 'FAIL'} {time.monotonic()-t0:5.1f}s "
                      f"prompt {u.get('prompt_tokens')} out {u.get('completion_tokens')} files {list(files)} {why or ''}"[:230],
                      flush=True)
                if why is not None and not files:
                    print("   raw:", repr((msg.get("content") or "")[:300]), flush=True)
                shutil.rmtree(ws)
    for arm in ("tool", "fence"):
        rows = {k[0]: v for k, v in tally.items() if k[1] == arm}
        print(arm, " ".join(f"{k}:{sum(v)}/{len(v)}" for k, v in rows.items()), "total",
              sum(sum(v) for v in rows.values()), "/", sum(len(v) for v in rows.values()))


if __name__ == "__main__":
    main()
