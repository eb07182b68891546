"""Session files through the Python doors: `Agent(session=path)` and the CLI's
`--resume` refuse a file that is not a tooloop session and a newer format version (the file untouched),
one agent at a time may hold a session (also across processes), a last line without its newline is kept,
and files and folders are created owner-only."""

from __future__ import annotations

import gc
import json
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict

import pytest

import tooloop

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "mock"))
from mockctl import MockServer  # noqa: E402
from _support import cli_env  # noqa: E402

HEADER = '{"type":"session","version":1,"created_at":1}\n'
ENTRY = json.dumps({"type": "entry", "entry": {"id": "e1", "role": "user", "status": "complete", "created_at": 1,
                                               "content": [{"type": "text", "text": "kept without newline"}]}})


def brain(request: Dict[str, Any]) -> Dict[str, Any]:
    return {"content": "ok"}


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("content", ['{"todo": "milk"}\n', "remember the milk\n", "no newline at all"])
def test_a_file_that_is_not_a_session_is_refused_and_left_untouched(tmp_path: Path, content: str) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_text(content)
    with pytest.raises(tooloop.SessionError, match="is not a tooloop session"):
        tooloop.Agent(provider=brain, session=path)
    assert path.read_text() == content


def test_a_newer_session_version_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    content = '{"type":"session","version":2,"created_at":1}\n' + ENTRY + "\n"
    path.write_text(content)
    with pytest.raises(tooloop.SessionError, match="newer tooloop"):
        tooloop.Agent(provider=brain, session=path)
    assert path.read_text() == content


def test_a_complete_last_line_without_its_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(HEADER + ENTRY)
    agent = tooloop.Agent(provider=brain, session=path)
    assert agent.messages[0]["content"][0]["text"] == "kept without newline"
    agent.run("more")
    del agent
    gc.collect()
    lines = path.read_text().splitlines()
    assert all(json.loads(line) for line in lines), "a line was glued onto the unterminated one"
    again = tooloop.Agent(provider=brain, session=path)
    assert [b["text"] for m in again.messages for b in m["content"]] == ["kept without newline", "more", "ok"]


def spec(folder: Path, store: str, name: str) -> str:
    """The ``session`` value of a new session ``name`` under ``folder``: a file, or an id in one database."""
    return str(folder / f"{name}.jsonl") if store == "jsonl" else f"{folder / 'sessions.db'}#{name}"


@pytest.mark.parametrize("store", ["jsonl", "sqlite"])
def test_a_second_agent_cannot_open_a_session_the_first_holds(tmp_path: Path, store: str) -> None:
    path = spec(tmp_path, store, "s")
    first = tooloop.Agent(provider=brain, session=path)
    with pytest.raises(tooloop.SessionError, match="is in use"):
        tooloop.Agent(provider=brain, session=path)
    tooloop.Agent(provider=brain, session=spec(tmp_path, store, "other")).run("at the same time")
    del first
    gc.collect()
    tooloop.Agent(provider=brain, session=path)


HOLDER = textwrap.dedent("""
    import sys, tooloop
    agent = tooloop.Agent(provider=lambda r: {"content": "ok"}, session=sys.argv[1])
    print("ready", flush=True)
    sys.stdin.read()
""")


@pytest.mark.parametrize("store", ["jsonl", "sqlite"])
def test_a_session_held_by_another_process_is_refused(tmp_path: Path, store: str) -> None:
    path = spec(tmp_path, store, "s")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        with pytest.raises(tooloop.SessionError, match="is in use"):
            tooloop.Agent(provider=brain, session=path)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        assert holder.wait(timeout=30) == 0
    tooloop.Agent(provider=brain, session=path)


@pytest.mark.parametrize("store", ["jsonl", "sqlite"])
def test_session_files_are_created_0600_in_0700_folders(tmp_path: Path, store: str) -> None:
    spec_ = spec(tmp_path / "a" / "b", store, "s")
    path = Path(spec_.split("#")[0])
    agent = tooloop.Agent(provider=brain, session=spec_)
    agent.run("hi")
    assert mode(path) == 0o600
    for side in ("-wal", "-shm"):
        if Path(f"{path}{side}").exists():
            assert mode(Path(f"{path}{side}")) == 0o600
    assert mode(tmp_path / "a" / "b") == 0o700
    assert mode(tmp_path / "a") == 0o700


def test_a_database_that_is_not_tooloops_is_refused_and_left_untouched(tmp_path: Path) -> None:
    import sqlite3
    db = tmp_path / "app.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE sessions (id TEXT)")
    con.commit()
    con.close()
    before = db.read_bytes()
    with pytest.raises(tooloop.SessionError, match="is not a tooloop session database"):
        tooloop.Agent(provider=brain, session=f"{db}#s")
    assert db.read_bytes() == before
    with pytest.raises(tooloop.ConfigError, match="no session id"):
        tooloop.Agent(provider=brain, session=str(tmp_path / "new.db"))


def test_a_killed_database_writer_never_blocks_the_next_open(tmp_path: Path) -> None:
    session = f"{tmp_path / 'runs.db'}#crashy"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, session], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
    holder.kill()  # SIGKILL: it never lets go of the session
    holder.wait(timeout=30)
    tooloop.Agent(provider=brain, session=session).run("after the crash")


# ------------------------------------------------------------------------------------------------ the CLI

def cli(tooloop_exe: str, tmp_path: Path, env: Dict[str, str], *args: str) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    proc = subprocess.run([tooloop_exe, *args], cwd=ws, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=60)
    print("exit", proc.returncode, "\n--- stdout\n" + proc.stdout + "--- stderr\n" + proc.stderr)
    return proc


def test_cli_resume_refuses_a_file_that_is_not_a_session(tooloop_exe: str, tmp_path: Path) -> None:
    notes = tmp_path / "notes.jsonl"
    notes.write_text('{"todo": "milk"}\n')
    proc = cli(tooloop_exe, tmp_path, cli_env(tmp_path, ANTHROPIC_API_KEY="k"), "--resume", str(notes), "-p", "hi")
    assert proc.returncode == 2
    assert "is not a tooloop session" in proc.stderr and "Traceback" not in proc.stderr
    assert notes.read_text() == '{"todo": "milk"}\n'


def test_cli_resume_refuses_a_session_another_agent_holds(tooloop_exe: str, tmp_path: Path) -> None:
    path = tmp_path / "held.jsonl"
    holder = tooloop.Agent(provider=brain, session=path)
    holder.run("hi")
    proc = cli(tooloop_exe, tmp_path, cli_env(tmp_path, ANTHROPIC_API_KEY="k"), "--resume", str(path), "-p", "go")
    assert proc.returncode == 2 and "is in use" in proc.stderr


def test_cli_session_folders_and_files_are_owner_only(tooloop_exe: str, tmp_path: Path) -> None:
    with MockServer(ROOT / "tests" / "scenarios" / "cli_continue.json") as mock:
        proc = cli(tooloop_exe, tmp_path, cli_env(tmp_path, mock), "-p", "hi")
    assert proc.returncode == 0
    [session] = sorted((tmp_path / "home" / "sessions").glob("*/*.jsonl"))
    assert mode(session) == 0o600
    assert mode(session.parent) == 0o700
    assert mode(session.parent.parent) == 0o700
