"""The `tooloop` command for programs: `--output-format json` (one result object with Claude Code's field
names), `--output-format stream-json` (an init line, the library's events one per line, the result last),
`--json-schema` (inline or a file; the answer under "output"), and pictures in: `--image PATH` and
`@file.png` reaching the request byte for byte, an over-size image refused before anything is sent. Each
test parses stdout line by line: it must hold nothing else."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path
from typing import Any, Dict, List

import pytest

from _support import cli_env, text_reply, tool_reply

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
RESULT_KEYS = {"type", "subtype", "is_error", "result", "output", "stop_reason", "num_turns", "usage",
               "total_cost_usd", "session_id", "duration_ms"}


def run(exe: str, ws: Path, env: Dict[str, str], *args: str) -> "subprocess.CompletedProcess[str]":
    proc = subprocess.run([exe, *args], cwd=ws, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=60)
    print("exit", proc.returncode, "\n--- stdout\n" + proc.stdout + "--- stderr\n" + proc.stderr)
    return proc


def lines(stdout: str) -> List[Dict[str, Any]]:
    """Every stdout line parsed as one JSON object (fails on anything else)."""
    assert stdout.endswith("\n")
    return [json.loads(line) for line in stdout.splitlines()]


def test_json_prints_one_result_object_and_nothing_else(tooloop_exe: str, ws: Path, tmp_path: Path,
                                                        mock: Any) -> None:
    server = mock({"responses": [tool_reply(("t1", "read_file", {"path": "a.txt"})), text_reply("It says hi.")]})
    (ws / "a.txt").write_text("hi\n")
    proc = run(tooloop_exe, ws, cli_env(tmp_path, server), "--output-format", "json", "what does a.txt say?")
    assert proc.returncode == 0
    [result] = lines(proc.stdout)
    assert RESULT_KEYS <= set(result)
    assert result["type"] == "result" and result["subtype"] == "success" and result["is_error"] is False
    assert result["result"] == "It says hi." and result["output"] is None
    assert result["stop_reason"] == "end_turn" and result["num_turns"] == 2
    assert result["usage"]["input_tokens"] == 30 and result["usage"]["output_tokens"] == 13
    assert isinstance(result["total_cost_usd"], float) and result["duration_ms"] >= 0
    sessions = list((tmp_path / "home").rglob(result["session_id"] + ".jsonl"))
    assert len(sessions) == 1, "session_id names the session file"


def test_stream_json_is_init_then_events_then_the_result(tooloop_exe: str, ws: Path, tmp_path: Path,
                                                         mock: Any) -> None:
    server = mock({"responses": [tool_reply(("t1", "read_file", {"path": "a.txt"})), text_reply("Done.")]})
    (ws / "a.txt").write_text("hi\n")
    proc = run(tooloop_exe, ws, cli_env(tmp_path, server), "--output-format", "stream-json", "read a.txt")
    assert proc.returncode == 0
    objs = lines(proc.stdout)
    init, result = objs[0], objs[-1]
    assert init["type"] == "system" and init["subtype"] == "init"
    assert init["model"] == "claude-sonnet-4-6" and "read_file" in init["tools"] and "bash" in init["tools"]
    assert init["workspace"] == str(ws.resolve()) and init["session_id"] == result["session_id"]
    kinds = [o["type"] for o in objs[1:-1]]
    assert kinds.index("tool_use") < kinds.index("tool_result") < len(kinds) - 1 - kinds[::-1].index("text")
    use = next(o for o in objs if o["type"] == "tool_use")
    assert use["name"] == "read_file" and use["input"] == {"path": "a.txt"}
    res = next(o for o in objs if o["type"] == "tool_result")
    assert "hi" in json.dumps(res["content"]) and res["is_error"] is False
    turns = [o for o in objs if o["type"] == "turn"]
    assert [t["turn"] for t in turns] == [1, 2] and turns[0]["usage"]["input_tokens"] == 20
    assert "".join(o["text"] for o in objs if o["type"] == "text") == "Done."
    assert all(o["session_id"] == init["session_id"] for o in objs)
    assert result["type"] == "result" and result["subtype"] == "success" and result["result"] == "Done."


def test_stream_json_lines_arrive_as_things_happen(tooloop_exe: str, ws: Path, tmp_path: Path, mock: Any) -> None:
    # The model answers after a pause, in slow pieces: the init line and the first text must be readable
    # while the command still runs (each line flushed as it is written, through a pipe).
    slow = text_reply("one two three four five six", delay_ms=1000, chunk_size=40, delay_ms_between=60)
    server = mock({"responses": [slow]})
    proc = subprocess.Popen([tooloop_exe, "--output-format", "stream-json", "count"], cwd=ws,
                            env=cli_env(tmp_path, server), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())
        assert first["type"] == "system" and first["subtype"] == "init"
        assert proc.poll() is None, "the init line came only at the end"
        while True:
            obj = json.loads(proc.stdout.readline())
            if obj["type"] == "text":
                break
        assert proc.poll() is None, "the first text came only at the end"
        rest = [json.loads(line) for line in proc.stdout.read().splitlines()]
        assert rest[-1]["type"] == "result" and rest[-1]["result"] == "one two three four five six"
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_json_schema_inline_or_from_a_file_gives_the_output(tooloop_exe: str, ws: Path, tmp_path: Path,
                                                            mock: Any) -> None:
    schema = {"type": "object", "properties": {"files": {"type": "integer"}}, "required": ["files"]}
    server = mock({"responses": [text_reply('{"files": "three"}'), text_reply('{"files": 3}'),
                                 text_reply('{"files": 4}')]})
    proc = run(tooloop_exe, ws, cli_env(tmp_path, server), "--output-format", "json", "--json-schema",
               json.dumps(schema), "count the files")
    assert proc.returncode == 0
    [result] = lines(proc.stdout)
    assert result["output"] == {"files": 3} and result["num_turns"] == 2
    sent = server.requests()[0]["body"]["output_config"]["format"]["schema"]
    assert sent["required"] == ["files"]
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    proc = run(tooloop_exe, ws, cli_env(tmp_path, server), "-p", "--json-schema", str(tmp_path / "schema.json"),
               "count again")
    assert proc.returncode == 0 and json.loads(proc.stdout) == {"files": 4}


def test_errors_are_one_stderr_line_and_an_error_result(tooloop_exe: str, ws: Path, tmp_path: Path,
                                                        mock: Any) -> None:
    server = mock({"responses": [{"status": 401, "json": {"type": "error", "error": {
        "type": "authentication_error", "message": "invalid x-api-key"}}}]})
    proc = run(tooloop_exe, ws, cli_env(tmp_path, server), "--output-format", "json", "hello")
    assert proc.returncode == 1
    [result] = lines(proc.stdout)
    assert result["type"] == "result" and result["subtype"] == "error" and result["is_error"] is True
    assert "authentication" in result["error"]
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("tooloop: ")

    proc = run(tooloop_exe, ws, cli_env(tmp_path, server), "--output-format", "stream-json", "--max-turns", "1",
               "--json-schema", "{not json", "hi")
    assert proc.returncode == 2
    [result] = lines(proc.stdout)
    assert result["subtype"] == "error" and "--json-schema" in result["error"]


def test_max_turns_is_error_max_turns(tooloop_exe: str, ws: Path, tmp_path: Path, mock: Any) -> None:
    (ws / "a.txt").write_text("hi\n")
    server = mock({"responses": [tool_reply(("t1", "read_file", {"path": "a.txt"}))]})
    proc = run(tooloop_exe, ws, cli_env(tmp_path, server), "--output-format", "stream-json", "--max-turns", "1",
               "read")
    assert proc.returncode == 1
    result = lines(proc.stdout)[-1]
    assert result["subtype"] == "error_max_turns" and result["is_error"] is True


def test_a_budget_stop_is_error_budget_with_the_one_budget_line(tooloop_exe: str, ws: Path, tmp_path: Path,
                                                                  mock: Any) -> None:
    big = {"input_tokens": 100_000, "output_tokens": 1000}   # $0.315 a turn on claude-sonnet-4-6
    (ws / "a.txt").write_text("hi\n")
    replies = [tool_reply((f"t{i}", "read_file", {"path": "a.txt"})) for i in range(4)]
    for r in replies:
        r["anthropic"]["usage"] = big
    server = mock({"responses": replies})
    for fmt in ("json", "stream-json"):
        server.load({"responses": replies})
        proc = run(tooloop_exe, ws, cli_env(tmp_path, server), "--output-format", fmt, "--max-budget-usd", "0.5",
                   "read a.txt again and again")
        assert proc.returncode == 1
        result = lines(proc.stdout)[-1]
        assert result["type"] == "result" and result["subtype"] == "error_budget" and result["is_error"] is True
        assert result["stop_reason"] == "budget" and result["num_turns"] == 1
        assert result["total_cost_usd"] == pytest.approx(0.315)
        assert proc.stderr.splitlines() == [
            "tooloop: stopped: the next request would take the spend past $0.5 (--max-budget-usd)"]
    # A cap of 0 spends nothing: no request at all.
    server.load({"responses": replies})
    proc = run(tooloop_exe, ws, cli_env(tmp_path, server), "--output-format", "json", "--max-budget-usd", "0", "hi")
    assert proc.returncode == 1 and server.requests() == []
    [result] = lines(proc.stdout)
    assert result["subtype"] == "error_budget" and result["total_cost_usd"] == 0.0 and result["num_turns"] == 0


def test_images_from_the_flag_and_from_a_mention_reach_the_request_byte_for_byte(
        tooloop_exe: str, ws: Path, tmp_path: Path, mock: Any) -> None:
    (ws / "shot.png").write_bytes(PNG)
    gif = b"GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00"
    (tmp_path / "other.gif").write_bytes(gif)
    server = mock({"responses": [text_reply("A pixel.")]})
    proc = run(tooloop_exe, ws, cli_env(tmp_path, server), "--output-format", "json", "--image",
               str(tmp_path / "other.gif"), "what is in @shot.png?")
    assert proc.returncode == 0
    content = server.requests()[0]["body"]["messages"][0]["content"]
    images = [b for b in content if b["type"] == "image"]
    assert [base64.b64decode(b["source"]["data"]) for b in images] == [gif, PNG]
    assert [b["source"]["media_type"] for b in images] == ["image/gif", "image/png"]
    assert content[-1]["text"] == "what is in @shot.png?"


def test_an_over_size_image_is_refused_before_anything_is_sent(tooloop_exe: str, ws: Path, tmp_path: Path,
                                                                mock: Any) -> None:
    (ws / "big.png").write_bytes(b"\x89PNG" + b"\0" * (5 * 1024 * 1024 + 10))
    server = mock({"responses": [text_reply("never")]})
    proc = run(tooloop_exe, ws, cli_env(tmp_path, server), "--output-format", "json", "--image", "big.png", "look")
    assert proc.returncode != 0
    [result] = lines(proc.stdout)
    assert result["is_error"] is True and "over the Anthropic limit of 5.00 MB" in result["error"]
    assert server.requests() == []
    proc = run(tooloop_exe, ws, cli_env(tmp_path, server), "--image", "missing.png", "look")
    assert proc.returncode == 2 and "--image missing.png: no such file" in proc.stderr


def test_export_writes_an_atif_trajectory_of_the_session(tooloop_exe: str, ws: Path, tmp_path: Path,
                                                         mock: Any) -> None:
    server = mock({"responses": [tool_reply(("t1", "read_file", {"path": "a.txt"}), text="Let me look."),
                                 text_reply("It says hi.")]})
    (ws / "a.txt").write_text("hi\n")
    env = cli_env(tmp_path, server)
    proc = run(tooloop_exe, ws, env, "--output-format", "json", "what does a.txt say?")
    session_id = lines(proc.stdout)[0]["session_id"]
    proc = run(tooloop_exe, ws, env, "export", session_id[:15], "--format", "atif")
    assert proc.returncode == 0
    doc = json.loads(proc.stdout)
    assert doc["schema_version"] == "ATIF-v1.4" and doc["session_id"] == session_id
    assert doc["agent"]["name"] == "tooloop" and doc["agent"]["model_name"] == "claude-sonnet-4-6"
    steps = doc["steps"]
    assert [s["source"] for s in steps] == ["user", "agent", "agent"]
    assert [s["step_id"] for s in steps] == [1, 2, 3]
    assert steps[0]["message"] == "what does a.txt say?"
    assert steps[1]["message"] == "Let me look."
    assert steps[1]["tool_calls"] == [{"tool_call_id": "t1", "function_name": "read_file",
                                       "arguments": {"path": "a.txt"}}]
    [obs] = steps[1]["observation"]["results"]
    assert obs["source_call_id"] == "t1" and "hi" in obs["content"]
    assert steps[1]["metrics"]["prompt_tokens"] == 20 and steps[1]["metrics"]["completion_tokens"] == 8
    assert steps[2]["message"] == "It says hi." and "tool_calls" not in steps[2]
    final = doc["final_metrics"]
    assert final["total_prompt_tokens"] == 30 and final["total_completion_tokens"] == 13
    assert final["total_steps"] == 3 and final["total_cost_usd"] > 0
    out = tmp_path / "traj.json"
    proc = run(tooloop_exe, ws, env, "export", session_id, "--format", "json", "-o", str(out))
    assert proc.returncode == 0 and proc.stdout == ""
    assert [e["role"] for e in json.loads(out.read_text())["entries"]] == ["user", "assistant", "tool", "assistant"]
    assert run(tooloop_exe, ws, env, "export", "nope").returncode == 2


def test_mentions_become_blocks_before_the_text_and_unknown_ones_stay_text(tmp_path: Path) -> None:
    from tooloop.cli.config import ConfigProblem
    from tooloop.cli.media import prompt_input

    (tmp_path / "a.png").write_bytes(PNG)
    (tmp_path / "doc.pdf").write_bytes(b"%PDF-1.4\n")
    assert prompt_input("mail @bob about it", tmp_path) == "mail @bob about it"
    assert prompt_input("see @missing.png", tmp_path) == "see @missing.png"
    blocks = prompt_input("compare @a.png with @doc.pdf.", tmp_path)
    assert isinstance(blocks, list)
    assert [b["type"] for b in blocks] == ["image", "document", "text"]
    assert base64.b64decode(blocks[0]["source"]["data"]) == PNG
    assert blocks[1]["source"]["media_type"] == "application/pdf"
    assert blocks[-1] == {"type": "text", "text": "compare @a.png with @doc.pdf."}
    with pytest.raises(ConfigProblem, match="no such file"):
        prompt_input("x", tmp_path, [str(tmp_path / "nope.png")])
