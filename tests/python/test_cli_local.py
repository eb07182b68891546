"""The CLI's pieces for small local models, without a terminal: text tool-call detection, context windows
and max_tokens, the llama.cpp probe (against the mock server). Undo's checkpoints: test_undo.py."""

import sys
from pathlib import Path

import pytest

from tooloop.cli import local
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
    ("<tool_response>\nE\nNameError: name 'slugify' is not defined\n</tool_response>", "tool_response"),
])
def test_tool_calls_written_as_text_are_recognized(text, name):
    assert local.text_tool_call(text, TOOLS) == name
    assert name in local.correction(name) or name in ("tools", "tool_response")
    assert "\n" not in local.correction(name)


@pytest.mark.parametrize("text", [
    "Done. hello.py prints Hello, world!",
    'Here is the config:\n```json\n{"name": "my-app", "version": "1.0"}\n```',   # not a tool's name
    "",
    "The test failed with a NameError; the <tool_response> above shows it.",   # mentions it, does not open with it
])
def test_ordinary_answers_are_not_tool_calls(text):
    assert local.text_tool_call(text, TOOLS) is None


def test_context_windows_and_max_tokens():
    assert local.known_window("claude-sonnet-4-6") == 200_000
    assert local.known_window("qwen2.5-coder:7b") == 32_768
    assert local.known_window("org/qwen2.5-coder-7b") == 32_768
    assert local.known_window("mystery") is None
    assert local.fit_max_tokens(8192, None) == 8192
    assert local.fit_max_tokens(8192, 4096) == 512
    assert local.fit_max_tokens(8192, 32_768) == 4096
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
