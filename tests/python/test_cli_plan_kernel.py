"""Plan mode's promise ("nothing changes until you approve the plan") is kept by the kernel, not by the guess of
which commands only read: through the real `tooloop --plan` command against the mock server, every command a
hostile review slipped past round three's guess writes nothing, while reading still works."""

from __future__ import annotations

from pathlib import Path

import pytest

from _support import clean_env, require_landlock, run_cli, text_reply, tool_reply, tool_results

#: Commands that passed the old read-only guess and wrote (each tries to create a file named pwned*).
BYPASSES = [
    "awk 'BEGIN{print \"touch pwned1\" | \"sh\"}'",
    "sed -n '1e touch pwned2' notes.txt",
    "sort -o pwned3 notes.txt",
    "echo X > pwned4 2>&1",
    "ls #'\ntouch pwned5",
    "./tools/cat notes.txt",
    "git --config-env=core.pager=PWN log -1 2>/dev/null; touch pwned7",
    "GIT_EXTERNAL_DIFF=./tools/cat git diff --no-index notes.txt other.txt",
]


@pytest.mark.parametrize("mode", [[], ["--yes"]], ids=["default", "yes"])
def test_plan_mode_writes_nothing_whatever_the_commands_look_like(tooloop_exe, mock, ws: Path, tmp_path: Path,
                                                                  mode) -> None:
    require_landlock()
    (ws / "notes.txt").write_text("alpha\n")
    (ws / "other.txt").write_text("beta\n")
    (ws / "tools").mkdir()
    script = ws / "tools" / "cat"
    script.write_text("#!/bin/sh\ntouch pwned6\ncat \"$@\"\n")
    script.chmod(0o755)
    calls = [(f"b{i}", "bash", {"command": c}) for i, c in enumerate(BYPASSES)]
    server = mock({"responses": [
        tool_reply(*calls),
        tool_reply(("r1", "bash", {"command": "cat notes.txt"}), ("r2", "read_file", {"path": "other.txt"})),
        text_reply("## Plan\n\n1. Nothing to do."),
    ]})
    proc = run_cli(tooloop_exe, ws, clean_env(tmp_path, server), *mode, "--plan", "-p", "look around")
    assert proc.returncode == 0, proc.stderr
    assert "## Plan" in proc.stdout
    assert sorted(p.name for p in ws.iterdir()) == ["notes.txt", "other.txt", "tools"], "plan mode wrote"
    results = tool_results(server.requests()[-1])
    assert "alpha" in results["r1"][0] and not results["r1"][1], results["r1"]
    assert "beta" in results["r2"][0] and not results["r2"][1], results["r2"]
