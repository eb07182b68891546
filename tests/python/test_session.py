"""Sessions: a run saved to a JSONL file in one process is loaded and resumed in another, without re-running
the tool that already ran."""

from __future__ import annotations

import gc
import json
import textwrap
from typing import Any

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


def test_session_saved_in_one_process_is_resumed_in_another(mock: Any, tmp_path: Any) -> None:
    server = mock("py_session_resume")
    session = tmp_path / "sessions" / "s1.jsonl"
    counter = tmp_path / "tool_calls.txt"
    env = mock_env(server.base_url)

    first = run_script(PROCESS.replace("sys.argv[1], sys.argv[2], sys.argv[3]",
                                       f"{str(session)!r}, {str(counter)!r}, 'first'"), env)
    assert first.returncode == 0, first.stderr
    out1 = json.loads(first.stdout)
    assert out1["error"] == ["InternalServerError", 500]
    assert out1["report"]["created"] is True
    assert counter.read_text() == "Lyon\n"
    assert session.exists()
    lines = [json.loads(line) for line in session.read_text().splitlines()]
    assert lines[0]["type"] == "session"
    assert "sk-ant-mock" not in session.read_text()  # secrets never reach the file

    second = run_script(PROCESS.replace("sys.argv[1], sys.argv[2], sys.argv[3]",
                                        f"{str(session)!r}, {str(counter)!r}, 'second'"), env)
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


def test_session_records_reset_and_a_new_agent_starts_from_it(tmp_path: Any) -> None:
    path = tmp_path / "s.jsonl"
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
