"""The files a task names go with it under the compact prompt (python/tooloop/cli/task_files.py), against the
mock server through the real `tooloop` command: only existing workspace files, never a dotfile or a path out
of the workspace, within a quarter of the window; not with the full prompt or --no-task-files."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, List

from _support import cli_env, run_cli, text_reply
from mockctl import MockServer

SMALL = ("-p", "--yes", "--no-color", "--model", "qwen2.5-coder-q15", "--context-window", "4096",
         "--provider", "anthropic")
SETTINGS = "# limits\nNAME = 'svc'\nLIMIT = 4711\n"


def _first_message(tooloop_exe: str, ws: Path, tmp_path: Path, task: str, *extra: str) -> str:
    with MockServer({"responses": [text_reply("It is 4711."), text_reply("It is 4711.")]}) as server:
        proc = run_cli(tooloop_exe, ws, cli_env(tmp_path, server), *SMALL, "--base-url", server.base_url, *extra,
                       task)
        bodies: List[Any] = [r["body"] for r in server.requests()]
    assert bodies, proc.stderr
    content = bodies[0]["messages"][0]["content"]
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


def test_cli_small_window_sends_the_files_the_task_names_with_it(tooloop_exe: str, ws: Path,
                                                                 tmp_path: Path) -> None:
    (ws / "settings.py").write_text(SETTINGS)
    (ws / "other.py").write_text("X = 1\n")
    (ws / ".env").write_text("TOKEN=secret\n")
    outside = tmp_path / "outside.py"
    outside.write_text("SECRET = 1\n")
    os.symlink(outside, ws / "link.py")
    task = "`settings.py` defines LIMIT (see also .env, link.py, ../outside.py and missing.py); what is it?"
    first = _first_message(tooloop_exe, ws, tmp_path, task)
    assert first.startswith(task), "the task's own words come first, unchanged"
    assert "settings.py\n```\n" + SETTINGS + "```" in first
    for left_out in ("TOKEN=secret", "SECRET = 1", "X = 1", "missing.py\n```"):
        assert left_out not in first


def test_cli_a_file_bigger_than_a_quarter_of_the_window_is_left_out_whole(tooloop_exe: str, ws: Path,
                                                                          tmp_path: Path) -> None:
    (ws / "app.log").write_text("INFO ok\n" * 1000)   # 8000 characters: over 4096 * 0.25 tokens
    (ws / "settings.py").write_text(SETTINGS)
    first = _first_message(tooloop_exe, ws, tmp_path, "count the lines of app.log; settings.py has LIMIT")
    assert "INFO ok" not in first and "LIMIT = 4711" in first


def test_cli_full_prompt_and_no_task_files_send_the_task_alone(tooloop_exe: str, ws: Path, tmp_path: Path) -> None:
    (ws / "settings.py").write_text(SETTINGS)
    task = "settings.py defines LIMIT; what is it?"
    for extra in (["--prompt", "full"], ["--no-task-files"]):
        first = _first_message(tooloop_exe, ws, tmp_path, task, *extra)
        assert "LIMIT = 4711" not in first, extra
        assert json.dumps(task)[1:-1] in json.dumps(first)
