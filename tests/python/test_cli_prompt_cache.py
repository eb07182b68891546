"""What the `tooloop` command sends a model with a small context window (under 16k tokens), against the mock:
a prefix (system prompt and tools) that is the same bytes on every turn, task and workspace, so a local server
reuses its prompt cache instead of reading it again; and a first request about the size of the simplest SDK
loop's (bench/simple_loop.py), where a large window keeps the full prompt and tools.
"""

import ast
import json
from datetime import date

import pytest

from _support import ROOT, cli_env, run_cli, text_reply, tool_reply
from mockctl import MockServer

TASK = "Create hello.py that prints exactly Hello, world! and run it to check."   # bench/local_tasks.py's first
SMALL = ("-p", "--yes", "--no-color", "--model", "qwen2.5-coder-q15", "--context-window", "4096")


def openai_reply(message, finish="stop"):
    return {"openai": {"id": "c", "object": "chat.completion", "created": 1, "model": "qwen2.5-coder-q15",
                       "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                       "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}}


def steps(wire):
    """A write, a command, an answer: three requests."""
    write = {"path": "hello.py", "content": "print('Hello, world!')\n"}
    if wire == "anthropic":
        return [tool_reply(("w", "write_file", write)), tool_reply(("b", "bash", {"command": "python3 hello.py"})),
                text_reply("hello.py prints Hello, world!")]
    call = lambda i, name, args: openai_reply(  # noqa: E731
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": i, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]},
        "tool_calls")
    return [call("w", "write_file", write), call("b", "bash", {"command": "python3 hello.py"}),
            openai_reply({"role": "assistant", "content": "hello.py prints Hello, world!"})]


def run_task(exe, ws, tmp_path, wire, task, *extra):
    """One `tooloop -p` task on `wire` in `ws`; the bodies of the requests it sent."""
    with MockServer({"responses": steps(wire)}) as mock:
        base = mock.base_url + ("/v1" if wire == "openai" else "")
        proc = run_cli(exe, ws, cli_env(tmp_path, mock), *SMALL, "--provider", wire, "--base-url", base, *extra,
                       task)
        bodies = [r["body"] for r in mock.requests()]
    assert proc.returncode == 0, proc.stderr
    return bodies


def prefix(body):
    """What comes before the conversation, exactly as sent (cache markers included)."""
    if "system" in body:   # Anthropic Messages
        return json.dumps([body["system"], body.get("tools")])
    assert body["messages"][0]["role"] == "system"
    return json.dumps([body["messages"][0], body.get("tools")])


@pytest.mark.parametrize("wire", ["anthropic", "openai"])
def test_small_window_prefix_is_the_same_bytes_on_every_turn_task_and_workspace(tooloop_exe, tmp_path, wire):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    (one / "t.py").write_text("print('ok')\n")
    bodies = run_task(tooloop_exe, one, tmp_path, wire, TASK)
    # Another task in the same workspace, one with a check of its own, and a task in another workspace.
    bodies += run_task(tooloop_exe, one, tmp_path, wire, "Fix t.py so that it prints ok.", "--check", "python3 t.py")
    bodies += run_task(tooloop_exe, two, tmp_path, wire, "What does hello.py print?")
    assert len(bodies) == 9
    # Each task's first request is the draft (no tools, draft_first); every other request offers the tools.
    drafts, loop = [b for b in bodies if not b.get("tools")], [b for b in bodies if b.get("tools")]
    assert len(drafts) == 3 and all(not bodies[i].get("tools") for i in (0, 3, 6))
    prefixes = {prefix(b) for b in loop}
    assert len(prefixes) == 1, "the prefix changed between requests"
    assert len({prefix(b) for b in drafts}) == 1, "the draft's prefix changed between tasks"
    # The draft's system prompt is the loop's, so the server reuses that much of its cache.
    assert json.loads(prefix(drafts[0]))[0] == json.loads(prefix(loop[0]))[0]
    sent = prefixes.pop()
    # Nothing of a task, a workspace or a day in it.
    for varying in (str(one), str(two), "t.py", "hello.py", "Hello, world", date.today().isoformat()):
        assert varying not in sent, varying


def rendered(system, tools, task):
    """A first request as a llama.cpp chat template for tools renders it (Qwen2.5's, from the server's
    /props): the system prompt, each tool's definition as JSON, the task. The bytes a model reads, and close to
    its tokens: measured with the server's /tokenize, the command's first request and the simple loop's are in
    the same ratio as these bytes (510 and 264 tokens, 2080 and 1100 bytes)."""
    lines = [f"<|im_start|>system\n{system}\n\n# Tools\n\nYou may call one or more functions to assist with the user "
             "query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>"]
    for t in tools:
        lines.append("\n" + json.dumps({"type": "function", "function": {
            "name": t["name"], "description": t["description"], "parameters": t["input_schema"]}}))
    lines.append("\n</tools>\n\nFor each function call, return a json object with function name and arguments "
                 "inside a ```json code block:\n```json\n{\"name\": <function-name>, \"arguments\": "
                 "<args-json-object>}\n```<|im_end|>\n")
    lines.append(f"<|im_start|>user\n{task}<|im_end|>\n<|im_start|>assistant\n")
    return "".join(lines).encode()


def simple_loop_request():
    """bench/simple_loop.py's system prompt and tools (read from its source: it needs the `anthropic` package)."""
    tree = ast.parse((ROOT / "bench" / "simple_loop.py").read_text())
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in ("SYSTEM", "TOOLS"):
                found[node.targets[0].id] = ast.literal_eval(node.value)
    return found["SYSTEM"], found["TOOLS"]


def cli_first_request(body):
    """The system text and tools (in Anthropic form, without cache markers) of an Anthropic body."""
    system = body["system"]
    text = system if isinstance(system, str) else "".join(b["text"] for b in system)
    tools = [{k: v for k, v in t.items() if k != "cache_control"} for t in body["tools"]]
    return text, tools


def test_small_window_first_request_is_at_most_twice_the_simple_loops(tooloop_exe, ws, tmp_path):
    # The first request that offers the tools (the draft before it offers none and is smaller still).
    draft, body = run_task(tooloop_exe, ws, tmp_path, "anthropic", TASK)[:2]
    system, tools = cli_first_request(body)
    simple = rendered(*simple_loop_request(), TASK)
    assert len(json.dumps(draft)) < len(json.dumps(body))
    ours = rendered(system, tools, TASK)
    assert len(ours) <= 2 * len(simple), (len(ours), len(simple))
    # What it needs to call them right is still there: every required field, and the paths rule.
    by_name = {t["name"]: t for t in tools}
    assert sorted(by_name) == ["bash", "edit_file", "read_file", "write_file"]
    assert by_name["edit_file"]["input_schema"]["required"] == ["path", "old_text", "new_text"]
    assert by_name["write_file"]["input_schema"]["required"] == ["path", "content"]
    assert "exactly" in by_name["edit_file"]["description"] and "once" in by_name["edit_file"]["description"]
    assert "paths are relative to it" in system


def test_large_window_keeps_the_full_prompt_and_tool_definitions(tooloop_exe, ws, tmp_path):
    body = run_task(tooloop_exe, ws, tmp_path, "anthropic", TASK, "--context-window", "200000")[0]
    system, tools = cli_first_request(body)
    by_name = {t["name"]: t for t in tools}
    # The full prompt: where it works, the date, the rules; the whole tool set with every field described.
    assert str(ws) in system and "- Date: " in system and "Search with the grep tool" in system
    assert {"grep", "glob", "web_fetch", "todo_write"} <= set(by_name)
    bash = by_name["bash"]["input_schema"]
    assert {"timeout", "run_in_background"} <= set(bash["properties"]) and bash["additionalProperties"] is False
    assert "old_text` must match the file exactly" in by_name["edit_file"]["description"]
    simple = rendered(*simple_loop_request(), TASK)
    assert len(rendered(system, tools, TASK)) > 4 * len(simple)


def test_bench_table_shows_the_prompt_tokens_sent_and_cached_of_each_agent(tooloop_exe, tmp_path):
    # The server's own counts, as llama.cpp reports them on the OpenAI wire (prompt_tokens, of which
    # prompt_tokens_details.cached_tokens came from its cache); another agent says them in a stderr line.
    import subprocess
    import sys

    def usage(prompt, cached):
        return {"prompt_tokens": prompt, "completion_tokens": 5, "total_tokens": prompt + 5,
                "prompt_tokens_details": {"cached_tokens": cached}}

    first, answer = steps("openai")[0], steps("openai")[2]
    first["openai"]["usage"] = usage(500, 0)
    answer["openai"]["usage"] = usage(560, 480)
    other = (f"simple={sys.executable} -c \"import sys; print('turns: 1', file=sys.stderr); "
             "print('tokens: first 250, sent 250, cached 0', file=sys.stderr)\"")
    with MockServer({"responses": [first, answer]}) as mock:
        proc = subprocess.run([sys.executable, str(ROOT / "bench" / "local_tasks.py"), "--provider", "openai",
                               "--base-url", mock.base_url + "/v1", "--model", "qwen2.5-coder", "-n", "1",
                               "--tasks", "hello", "--tooloop", tooloop_exe, "--agent", other, "--json",
                               "--", "--sandbox", "off", "--context-window", "4096"],
                              env=cli_env(tmp_path), capture_output=True, text=True, timeout=300,
                              stdin=subprocess.DEVNULL)
    print(proc.stdout, proc.stderr)
    runs = {r["agent"]: r for r in (json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{"))}
    assert [runs["tooloop"][k] for k in ("first_tokens", "sent_tokens", "cached_tokens")] == [500, 1060, 480]
    assert [runs["simple"][k] for k in ("first_tokens", "sent_tokens", "cached_tokens")] == [250, 250, 0]
    header = next(ln for ln in proc.stdout.splitlines() if ln.startswith("agent"))
    assert "1st tok" in header and "sent tok" in header and "cached" in header
    row = next(ln for ln in proc.stdout.splitlines() if ln.startswith("tooloop ") and "hello" in ln)
    assert "500" in row.split() and "1060" in row.split() and "480" in row.split()


def test_prompt_tokens_bench_splits_each_request_and_sees_the_prefix_reused(tooloop_exe, tmp_path):
    # Offline (no llama.cpp server): bytes of the rendered prompts instead of tokens.
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "prompt_tokens.py"), "--tooloop", tooloop_exe],
                          env=cli_env(tmp_path), capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    print(proc.stdout, proc.stderr)
    assert proc.returncode == 0
    rows = [ln.split() for ln in proc.stdout.splitlines()[1:] if ln.split()[2].isdigit()]
    ours = [r for r in rows if r[0] == "tooloop"]
    assert len(ours) == 12   # two wires, two workspaces, three requests each
    # Each task's draft goes without tools (its prefix is the system prompt alone); after it, every prefix is the
    # one before it.
    assert [r[-1] for r in ours] == ["new", "new", "same"] * 4
    simple_first = next(int(r[3]) for r in rows if r[0] == "simple")
    # The first request (the draft) and what the loop's requests send before the conversation (system prompt and
    # tools) are each at most twice the simple loop's first request.
    assert int(ours[0][3]) <= 2 * simple_first and int(ours[1][-2]) <= 2 * simple_first
