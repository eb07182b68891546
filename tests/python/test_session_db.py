"""Sessions in SQLite through Python and the CLI: ``session="runs/sessions.db#id"`` across
processes, ``tooloop.migrate_session`` both ways, ``--session-db`` (new, ``--continue``, ``--resume``),
``tooloop sessions`` listing both stores with turns, tools, tokens and cost, filtered by workspace and date,
and ``tooloop sessions migrate``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import tooloop

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "mock"))
from mockctl import MockServer  # noqa: E402
from _support import cli_env  # noqa: E402

SCENARIOS = ROOT / "tests" / "scenarios"


def tool_brain() -> Any:
    """A model that calls `echo` once, then answers; counts tokens in its usage."""
    def brain(request: Dict[str, Any]) -> Dict[str, Any]:
        last = request["messages"][-1]["content"]
        if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
            return {"content": "done", "usage": {"input_tokens": 20, "output_tokens": 5}}
        return {"content": [{"type": "tool_use", "id": f"t{len(request['messages'])}", "name": "echo",
                             "input": {"x": 1}}], "stop_reason": "tool_use",
                "usage": {"input_tokens": 10, "output_tokens": 3}}
    return brain


def make_agent(session: str) -> Any:
    agent = tooloop.Agent(provider=tool_brain(), session=session)

    @agent.tool
    def echo(x: int) -> str:
        """Echo."""
        return str(x)

    return agent


def test_migrate_jsonl_into_a_database_and_back_gives_the_same_messages(tmp_path: Path) -> None:
    source = tmp_path / "s.jsonl"
    agent = make_agent(str(source))
    agent.run("first task\nsecond line")
    agent.reset()
    agent.run("after the reset")
    messages = agent.messages
    agent.close()
    db = f"{tmp_path / 'all.db'}#moved"
    assert tooloop.migrate_session(source, db) == 9
    back = tmp_path / "back.jsonl"
    assert tooloop.migrate_session(db, back) == 9
    for spec in (db, str(back)):
        again = tooloop.Agent(provider=tool_brain(), session=spec)
        assert json.dumps(again.messages) == json.dumps(messages)
        again.close()
    try:
        tooloop.migrate_session(source, db)
        raise AssertionError("migrating onto an existing session must fail")
    except tooloop.ConfigError as e:
        assert "already holds" in str(e)


def cli(tooloop_exe: str, cwd: Path, env: Dict[str, str], *args: str) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    proc = subprocess.run([tooloop_exe, *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=90)
    print("exit", proc.returncode, "\n--- stdout\n" + proc.stdout + "--- stderr\n" + proc.stderr)
    return proc


def listing(tooloop_exe: str, cwd: Path, env: Dict[str, str], *args: str) -> List[Dict[str, Any]]:
    proc = cli(tooloop_exe, cwd, env, "sessions", "--json", *args)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_cli_session_db_keeps_sessions_in_one_database_and_continue_resumes_there(tooloop_exe: str,
                                                                                 tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    db = tmp_path / "store" / "sessions.db"
    with MockServer(SCENARIOS / "cli_continue.json") as mock:
        first = cli(tooloop_exe, ws, cli_env(tmp_path, mock), "--session-db", str(db), "-p", "remember 42")
    assert first.returncode == 0
    assert db.exists() and not list((tmp_path / "home").glob("sessions/*/*.jsonl")), "no JSONL file was written"
    [row] = tooloop._tooloop.list_db_sessions(str(db))
    assert Path(row["workspace"]).resolve() == ws.resolve()
    with MockServer(SCENARIOS / "cli_continue.json") as mock:
        second = cli(tooloop_exe, ws, cli_env(tmp_path, mock, TOOLOOP_SESSION_DB=str(db)), "--continue", "-p",
                     "what did I say?")
        reqs = mock.requests()
    assert second.returncode == 0
    sent = json.dumps(reqs[0]["body"]["messages"])
    assert "remember 42" in sent and "what did I say?" in sent, "the resumed request carries the first task"
    assert len(tooloop._tooloop.list_db_sessions(str(db))) == 1
    with MockServer(SCENARIOS / "cli_continue.json") as mock:
        third = cli(tooloop_exe, ws, cli_env(tmp_path, mock), "--session-db", str(db), "--resume", row["id"][:15],
                    "-p", "and again?")
    assert third.returncode == 0
    [only] = listing(tooloop_exe, ws, cli_env(tmp_path), "--db", str(db))
    assert only["id"] == row["id"] and only["turns"] == 3 and only["task"] == "remember 42"
    listed = cli(tooloop_exe, ws, cli_env(tmp_path), "--session-db", str(db), "--list")
    assert listed.returncode == 0 and row["id"] in listed.stdout and "remember 42" in listed.stdout
    # Nothing to continue in another workspace of the same database.
    other = tmp_path / "other"
    other.mkdir()
    proc = cli(tooloop_exe, other, cli_env(tmp_path, ANTHROPIC_API_KEY="k"), "--session-db", str(db), "--continue",
               "-p", "x")
    assert proc.returncode == 2 and "no earlier session" in proc.stderr


def test_tooloop_sessions_lists_both_stores_with_tools_tokens_and_cost_filtered_by_workspace_and_date(
        tooloop_exe: str, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    db = tmp_path / "runs.db"
    for i in range(2):
        agent = tooloop.Agent(provider=tool_brain(), session=f"{db}#task-{i}", workspace=str(ws))

        @agent.tool
        def echo(x: int) -> str:
            """Echo."""
            return str(x)

        agent.run(f"task number {i}\nmore detail")
        agent.close()
    # A JSONL session of the same workspace, where the CLI keeps them, migrated from one of the above.
    from tooloop.cli import paths
    env = cli_env(tmp_path)
    folder = paths.sessions_dir(ws, env)
    folder.mkdir(parents=True)
    assert tooloop.migrate_session(f"{db}#task-0", folder / "from-db.jsonl") == 4
    rows = listing(tooloop_exe, ws, env, "--db", str(db))
    assert sorted(r["id"] for r in rows) == ["from-db", "task-0", "task-1"]
    for r in rows:
        assert (r["turns"], r["tools"], r["tokens"]) == (2, 1, 38), r
        assert r["task"].startswith("task number") and "\n" not in r["task"]
    # Another workspace sees none of them; dates filter.
    other = tmp_path / "other"
    other.mkdir()
    assert listing(tooloop_exe, other, env, "--db", str(db)) == []
    assert listing(tooloop_exe, ws, env, "--db", str(db), "--since", "2999-01-01") == []
    assert len(listing(tooloop_exe, ws, env, "--db", str(db), "--until", "2999-01-01")) == 3
    table = cli(tooloop_exe, ws, env, "sessions", "--db", str(db))
    assert table.returncode == 0 and "TOOLS" in table.stdout and "task number 1" in table.stdout


def test_tooloop_sessions_migrate_moves_a_folder_into_a_database(tooloop_exe: str, tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    for name in ("a", "b"):
        agent = make_agent(str(folder / f"{name}.jsonl"))
        agent.run(f"task {name}")
        agent.close()
    db = tmp_path / "all.sqlite"
    proc = cli(tooloop_exe, tmp_path, cli_env(tmp_path), "sessions", "migrate", str(folder), str(db))
    assert proc.returncode == 0, proc.stderr
    assert sorted(r["id"] for r in tooloop._tooloop.list_db_sessions(str(db))) == ["a", "b"]
    assert tooloop.load_session(f"{db}#b").first_user_line == "task b"
    again = cli(tooloop_exe, tmp_path, cli_env(tmp_path), "sessions", "migrate", str(folder / "a.jsonl"), f"{db}#a")
    assert again.returncode == 1 and "already holds" in again.stderr


def test_the_users_settings_can_keep_the_cli_sessions_in_a_database(tooloop_exe: str, tmp_path: Path) -> None:
    # "sessionDb" in the user's settings.json (a path relative to that file's folder) is --session-db's default.
    ws = tmp_path / "ws"
    ws.mkdir()
    config = tmp_path / "config"
    (config / "tooloop").mkdir(parents=True)
    (config / "tooloop" / "settings.json").write_text(json.dumps({"sessionDb": "store/sessions.db"}))
    with MockServer(SCENARIOS / "cli_continue.json") as mock:
        proc = cli(tooloop_exe, ws, cli_env(tmp_path, mock, XDG_CONFIG_HOME=str(config)), "-p", "remember 42")
    assert proc.returncode == 0
    db = config / "tooloop" / "store" / "sessions.db"
    [row] = tooloop.list_sessions(db)
    assert Path(row["workspace"]).resolve() == ws.resolve()
    assert not list((tmp_path / "home").glob("sessions/*/*.jsonl")), "no JSONL file was written"
    [listed] = listing(tooloop_exe, ws, cli_env(tmp_path, XDG_CONFIG_HOME=str(config)))
    assert listed["id"] == row["id"] and listed["task"] == "remember 42"
    # The flag still wins over the setting.
    other = tmp_path / "flag.db"
    with MockServer(SCENARIOS / "cli_continue.json") as mock:
        proc = cli(tooloop_exe, ws, cli_env(tmp_path, mock, XDG_CONFIG_HOME=str(config)), "--session-db", str(other),
                   "-p", "again")
    assert proc.returncode == 0 and len(tooloop.list_sessions(other)) == 1 and len(tooloop.list_sessions(db)) == 1
