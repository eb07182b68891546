"""A line of `tooloop batch`'s tasks file may narrow what the command line allowed, never widen it (issue 37,
item 5): permission, sandbox, network, base_url, keys, hooks, MCP servers, env pass-through and tools to
import are refused with an error naming the key and the line, before any request is sent; numeric limits
may only go lower. The installed command against the mock server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

import pytest

from _support import MockServer, cli_env, run_cli
from test_batch import flow
from test_batch_cli import bash_flow


def tasks_file(path: Path, *lines: Dict[str, Any]) -> None:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def plain(i: int, **extra: Any) -> Dict[str, Any]:
    return {"id": f"t{i}", "input": f"task {i}", "workspace": f"ws/t{i}", **extra}


WIDENING: List[Any] = [
    ({"permission": None, "sandbox": "off"}, "options.permission"),
    ({"sandbox": "off"}, "options.sandbox"),
    ({"network": True}, "options.network"),
    ({"api_key": "sk-other"}, "options.api_key"),
    ({"hooks": {"before_tool": "x"}}, "options.hooks"),
    ({"mcp_servers": {"s": {"command": "sh"}}}, "options.mcp_servers"),
    ({"env_passthrough": ["ANTHROPIC_API_KEY"]}, "options.env_passthrough"),
    ({"tools": ["os:system"]}, "options.tools"),
    ({"session": "/tmp/elsewhere.jsonl"}, "options.session"),
    ({"max_turns": 51}, "options.max_turns"),
    ({"builtin_tools": True}, "options.builtin_tools"),
]


@pytest.mark.parametrize("options,named", WIDENING, ids=[w[1] + str(i) for i, w in enumerate(WIDENING)])
def test_a_task_line_that_widens_the_command_line_is_refused_naming_the_key_and_line(
        tooloop_exe, tmp_path, options, named):
    tasks_file(tmp_path / "tasks.jsonl", plain(0), plain(1, options=options))
    marker = tmp_path / "unconfined"
    with MockServer(bash_flow(f"touch {marker}")) as mock:
        proc = run_cli(tooloop_exe, tmp_path, cli_env(tmp_path, mock), "batch", "tasks.jsonl", "--read-only")
        assert mock.requests() == []
    assert proc.returncode == 2
    assert f"tasks.jsonl:2: " in proc.stderr and named in proc.stderr, proc.stderr
    assert not marker.exists()


def test_a_task_line_cannot_send_the_users_key_to_its_own_base_url(tooloop_exe, tmp_path):
    with MockServer(flow()) as theirs, MockServer(flow()) as mine:
        tasks_file(tmp_path / "tasks.jsonl", plain(0, options={"base_url": theirs.base_url}))
        proc = run_cli(tooloop_exe, tmp_path, cli_env(tmp_path, mine), "batch", "tasks.jsonl", "--yes")
        assert theirs.requests() == [] and mine.requests() == []
    assert proc.returncode == 2
    assert "tasks.jsonl:1: a task line may not set options.base_url" in proc.stderr


@pytest.mark.parametrize("line,named", [
    ({"sandbox": "off"}, "unknown field 'sandbox'"),
    ({"workspace": "/"}, '"workspace" must name a project folder'),
])
def test_a_task_line_with_an_unknown_field_or_the_whole_disk_as_workspace_is_refused(
        tooloop_exe, tmp_path, line, named):
    tasks_file(tmp_path / "tasks.jsonl", {**plain(0), **line})
    with MockServer(flow()) as mock:
        proc = run_cli(tooloop_exe, tmp_path, cli_env(tmp_path, mock), "batch", "tasks.jsonl", "--yes")
        assert mock.requests() == []
    assert proc.returncode == 2 and f"tasks.jsonl:1: {named}" in proc.stderr, proc.stderr


def test_a_task_line_may_narrow_the_limits_and_tools(tooloop_exe, tmp_path):
    # t0 may take one turn only (the command line allows 5); t1 keeps the command line's.
    tasks_file(tmp_path / "tasks.jsonl", plain(0, options={"max_turns": 1, "builtin_tools": ["bash", "read_file"],
                                                             "model": "claude-sonnet-4-6"}),
               plain(1, metadata={"expected": "anything"}))
    with MockServer(bash_flow("echo hi")) as mock:
        proc = run_cli(tooloop_exe, tmp_path, cli_env(tmp_path, mock), "batch", "tasks.jsonl", "--yes",
                       "--max-turns", "5")
        reqs = mock.requests()
    assert proc.returncode == 1, proc.stderr   # t0 stopped at its own limit
    results = {json.loads(x)["id"]: json.loads(x) for x in (tmp_path / "runs" / "results.jsonl").read_text().splitlines()}
    assert results["t0"]["status"] == "max_turns" and results["t1"]["status"] == "ok"
    tools_of_t0 = [sorted(t["name"] for t in r["body"].get("tools", [])) for r in reqs
                   if "task 0" in json.dumps(r["body"]["messages"][0])]
    assert tools_of_t0 and all(t == ["bash", "read_file"] for t in tools_of_t0), tools_of_t0
