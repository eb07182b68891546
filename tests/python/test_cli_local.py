"""The CLI's pieces for small local models and for undo, without a terminal: text tool-call detection,
context windows and max_tokens, the llama.cpp probe (against the mock server), checkpoints."""

import os
import stat
import sys
from pathlib import Path

import pytest

from tooloop.cli import local
from tooloop.cli.checkpoints import Checkpoints
from tooloop.cli.render import _last_block_end, _rows

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "mock"))
from mockctl import MockServer  # noqa: E402

TOOLS = ["bash", "read_file", "write_file", "edit_file"]


@pytest.mark.parametrize("text, name", [
    ('```json\n{"name": "bash", "arguments": {"command": "ls"}}\n```', "bash"),
    ('Let me look.\n```\n{"name": "read_file", "arguments": {"path": "a"}}\n```', "read_file"),
    ('<tool_call>\n{"name": "write_file", "arguments": {"path": "a", "content": "x"}}\n</tool_call>', "write_file"),
    ('<tool_call>{"name": "edit_file", "arguments": {"path": "a"', "edit_file"),    # cut off
    ('{"function": {"name": "bash", "arguments": "{}"}}', "bash"),
    ("<tools>[{\"name\": \"bash\"}]</tools>", "tools"),
])
def test_tool_calls_written_as_text_are_recognized(text, name):
    assert local.text_tool_call(text, TOOLS) == name
    assert name in local.correction(name) or name == "tools"
    assert "\n" not in local.correction(name)


@pytest.mark.parametrize("text", [
    "Done. hello.py prints Hello, world!",
    'Here is the config:\n```json\n{"name": "my-app", "version": "1.0"}\n```',   # not a tool's name
    "",
])
def test_ordinary_answers_are_not_tool_calls(text):
    assert local.text_tool_call(text, TOOLS) is None


def test_context_windows_and_max_tokens():
    assert local.known_window("claude-sonnet-4-6") == 200_000
    assert local.known_window("qwen2.5-coder:7b") == 32_768
    assert local.known_window("org/qwen2.5-coder-7b") == 32_768
    assert local.known_window("mystery") is None
    assert local.fit_max_tokens(8192, None) == 8192
    assert local.fit_max_tokens(8192, 4096) == 1024
    assert local.fit_max_tokens(8192, 200_000) == 8192
    assert local.fit_max_tokens(8192, 512) == 256
    assert local.is_custom_endpoint("http://localhost:8080/v1")
    assert not local.is_custom_endpoint("https://api.openai.com/v1") and not local.is_custom_endpoint(None)


def test_probe_reads_llama_cpp_props_then_models_and_falls_back_quietly():
    with MockServer([{"json": {"default_generation_settings": {"n_ctx": 8192}}}]) as mock:
        assert local.probe_context(mock.base_url + "/v1") == 8192
        assert [r["path"] for r in mock.requests()] == ["/props"]
    with MockServer([{"status": 404, "json": {"error": "no"}},
                     {"json": {"data": [{"id": "m", "meta": {"n_ctx_train": 32768}}]}}]) as mock:
        assert local.probe_context(mock.base_url + "/v1") == 32768
        assert [r["path"] for r in mock.requests()] == ["/props", "/v1/models"]
    with MockServer([{"raw": "not json"}, {"status": 500}]) as mock:
        assert local.probe_context(mock.base_url + "/v1") is None


def test_markdown_blocks_end_at_blank_lines_and_closing_fences():
    assert _last_block_end("# Title\n\nPara") == len("# Title\n\n")
    assert _last_block_end("a\n\n```py\nx\n\ny\n```\nrest") == len("a\n\n```py\nx\n\ny\n```\n")
    assert _last_block_end("```py\nx\n\n") == 0          # a blank line inside an open fence
    assert _last_block_end("no end yet") == 0
    assert _rows("ab\ncd", 80) == 2 and _rows("x" * 81, 80) == 2 and _rows("x" * 80 + "\n", 80) == 2


def test_checkpoints_restore_bytes_and_modes_across_tasks(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_bytes(b"one\r\ntwo")
    os.chmod(ws / "a.txt", 0o640)
    cp = Checkpoints.for_session(tmp_path / "s" / "20260101-000000-abcd.jsonl", ws)
    cp.begin_task("first")
    cp.before_call("write_file", {"path": "a.txt"})
    (ws / "a.txt").write_bytes(b"changed\n")
    cp.before_call("edit_file", {"path": "a.txt"})          # the task's first state is kept
    (ws / "a.txt").write_bytes(b"changed again\n")
    cp.before_call("write_file", {"path": "new/b.txt"})
    (ws / "new").mkdir()
    (ws / "new" / "b.txt").write_text("b\n")
    cp.before_call("write_file", {"path": "../outside.txt"})   # outside the workspace: never recorded
    cp.before_call("bash", {"command": "rm -rf /"})             # not a file tool
    cp.begin_task("second, no changes")
    assert cp.diff()[0] == "--- a/a.txt"
    # A new process (a resumed session) sees the same checkpoints.
    again = Checkpoints.for_session(tmp_path / "s" / "20260101-000000-abcd.jsonl", ws)
    assert [t["text"] for t in again.tasks] == ["first", "second, no changes"]
    # A run that changes nothing leaves no folder behind.
    idle = Checkpoints.for_session(tmp_path / "s" / "20260101-000000-ffff.jsonl", ws)
    idle.begin_task("just a question")
    assert not (tmp_path / "s" / "20260101-000000-ffff.checkpoints").exists()
    with pytest.raises(ValueError):
        cp.undo(3)
    n, restored = cp.undo(2)
    assert n == 2 and {(r.path, r.action) for r in restored} == {("a.txt", "restored"), ("new/b.txt", "removed")}
    assert (ws / "a.txt").read_bytes() == b"one\r\ntwo" and stat.S_IMODE((ws / "a.txt").stat().st_mode) == 0o640
    assert not (ws / "new" / "b.txt").exists()
    assert cp.diff() == [] and cp.tasks == []
    folder = tmp_path / "s" / "20260101-000000-abcd.checkpoints"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in folder.rglob("*") if p.is_file())


def test_undo_never_writes_through_a_folder_that_now_leads_out_of_the_workspace(tmp_path):
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (ws / "d").mkdir(parents=True)
    outside.mkdir()
    (ws / "d" / "f.txt").write_text("before\n")
    cp = Checkpoints.for_session(tmp_path / "s" / "x.jsonl", ws)
    cp.begin_task("t")
    cp.before_call("write_file", {"path": "d/f.txt"})
    (ws / "d" / "f.txt").unlink()
    (ws / "d").rmdir()
    (ws / "d").symlink_to(outside)
    _, restored = cp.undo(1)
    assert [(r.path, r.action) for r in restored] == [("d/f.txt", "skipped")]
    assert list(outside.iterdir()) == []
