"""Sessions: a run saved to a JSONL file in one process is loaded and resumed in another, without re-running
the tool that already ran. Each test runs on both stores: a JSONL file and a session of a SQLite database
(``session="path.db#id"``)."""

from __future__ import annotations

import gc
import json
import textwrap
from typing import Any

import pytest

import tooloop
from _support import assert_valid_view, mock_env, run_script, unmarked

PROCESS = textwrap.dedent("""
    import json, os, sys
    import tooloop

    session, counter, step = sys.argv[1], sys.argv[2], sys.argv[3]
    agent = tooloop.Agent(base_url=os.environ["TOOLOOP_MOCK_URL"], api_key="sk-ant-mock", session=session)

    @agent.tool
    def get_weather(city: str) -> str:
        "Weather of a city."
        with open(counter, "a") as f:
            f.write(city + "\\n")
        return f"21 C in {city}"

    out = {"report": agent.session_report}
    try:
        if step == "first":
            agent.run("Weather in Lyon?")
        else:
            out["resumed"] = agent.resume().text
            out["next"] = agent.run("Thanks!").text
    except tooloop.APIError as e:
        out["error"] = [type(e).__name__, e.status_code]
    out["messages"] = agent.messages
    print(json.dumps(out))
""")


STORES = ["jsonl", "sqlite"]


def spec(folder: Any, store: str, name: str) -> str:
    """The ``session`` value of a new session ``name`` under ``folder``: a file, or an id in one database."""
    return str(folder / f"{name}.jsonl") if store == "jsonl" else f"{folder / 'sessions.db'}#{name}"


def stored_bytes(session: str) -> str:
    """Everything the store keeps on disk (the database with its WAL)."""
    from pathlib import Path
    if session.endswith(".jsonl"):
        return Path(session).read_text()
    db = session.split("#")[0]
    return "".join(Path(db + s).read_bytes().decode("utf-8", "replace") for s in ("", "-wal")
                   if Path(db + s).exists())


@pytest.mark.parametrize("store", STORES)
def test_session_saved_in_one_process_is_resumed_in_another(mock: Any, tmp_path: Any, store: str) -> None:
    server = mock("py_session_resume")
    session = spec(tmp_path / "sessions", store, "s1")
    counter = tmp_path / "tool_calls.txt"
    env = mock_env(server.base_url)

    first = run_script(PROCESS.replace("sys.argv[1], sys.argv[2], sys.argv[3]",
                                       f"{session!r}, {str(counter)!r}, 'first'"), env)
    assert first.returncode == 0, first.stderr
    out1 = json.loads(first.stdout)
    assert out1["error"] == ["InternalServerError", 500]
    assert out1["report"]["created"] is True
    assert counter.read_text() == "Lyon\n"
    if store == "jsonl":
        lines = [json.loads(line) for line in stored_bytes(session).splitlines()]
        assert lines[0]["type"] == "session"
    assert "Weather in Lyon?" in stored_bytes(session)
    assert "sk-ant-mock" not in stored_bytes(session)  # secrets never reach the file

    second = run_script(PROCESS.replace("sys.argv[1], sys.argv[2], sys.argv[3]",
                                        f"{session!r}, {str(counter)!r}, 'second'"), env)
    assert second.returncode == 0, second.stderr
    out2 = json.loads(second.stdout)
    assert out2["report"]["created"] is False and out2["report"]["entries"] >= 3
    assert out2["resumed"] == "It is 21 C in Lyon."
    assert out2["next"] == "You're welcome."
    assert counter.read_text() == "Lyon\n", "the tool ran again on resume"

    requests = server.requests()
    assert len(requests) == 4
    resumed = requests[2]["body"]["messages"]
    assert_valid_view(resumed)
    assert unmarked(resumed[0]["content"]) == [{"type": "text", "text": "Weather in Lyon?"}]
    assert resumed[1]["content"][1] == {"type": "tool_use", "id": "toolu_py_sess_1", "name": "get_weather",
                                        "input": {"city": "Lyon"}}
    assert unmarked(resumed[2]["content"]) == [{"type": "tool_result", "tool_use_id": "toolu_py_sess_1",
                                      "content": "21 C in Lyon"}]
    last = requests[3]["body"]["messages"]
    assert_valid_view(last)
    assert [m["role"] for m in last] == ["user", "assistant", "user", "assistant", "user"]
    assert unmarked(last[-1]["content"]) == [{"type": "text", "text": "Thanks!"}]
    assert_valid_view(out2["messages"])


@pytest.mark.parametrize("store", STORES)
def test_session_records_reset_and_a_new_agent_starts_from_it(tmp_path: Any, store: str) -> None:
    path = spec(tmp_path, store, "s")
    brain = lambda req: {"content": f"seen {len(req['messages'])} messages"}  # noqa: E731
    agent = tooloop.Agent(provider=brain, session=path)
    agent.run("one")
    agent.reset()
    agent.run("two")
    del agent  # it holds the session's lock until it is gone
    gc.collect()
    again = tooloop.Agent(provider=brain, session=str(path))
    assert [m["content"][0]["text"] for m in again.messages] == ["two", "seen 1 messages"]
    assert again.session_report is not None and again.session_report["entries"] == 2
    loaded = tooloop.load_session(path)
    assert [e["content"][0]["text"] for e in loaded.entries] == ["two", "seen 1 messages"]
    assert loaded.id == "s" and loaded.turns == 1


def test_many_database_sessions_from_threads_at_once_keep_each_order(tmp_path: Any) -> None:
    """The batch runner's case: many agents, one database, each its own id, all writing at once."""
    import threading
    db = tmp_path / "runs" / "sessions.db"
    brain = lambda req: {"content": f"seen {len(req['messages'])}"}  # noqa: E731
    errors = []

    def one(i: int) -> None:
        try:
            agent = tooloop.Agent(provider=brain, session=f"{db}#task-{i}")
            for r in range(3):
                agent.run(f"task {i} run {r}")
            agent.close()
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for i in range(16):
        texts = [e["content"][0]["text"] for e in tooloop.load_session(f"{db}#task-{i}").entries]
        assert texts == [f"task {i} run 0", "seen 1", f"task {i} run 1", "seen 3", f"task {i} run 2", "seen 5"]
