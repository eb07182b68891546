"""Long sessions through the Python door: automatic compaction against a mock server that enforces a context
limit (the shared `agent_compaction` scenario), `agent.compact()`, `agent.count_tokens()`, the compaction
event, and a session resumed after a compaction."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Dict, List

import pytest

import tooloop
from _support import MockServer, agent_for, assert_valid_view, scenario

MARK = "You write the working memory"


def dump(part: int, bytes: int = 1000) -> str:
    """Dump one part of the data.

    Args:
        part: which part
        bytes: how many bytes
    """
    head = f"part {part}: "
    return head + "x" * max(0, bytes - len(head))


def agent_requests(server: MockServer) -> List[Dict[str, Any]]:
    return [r for r in server.requests() if r["path"] == "/v1/messages" and MARK not in r["raw_body"]]


def test_a_long_session_compacts_itself_and_every_request_fits() -> None:
    with MockServer(scenario("agent_compaction")) as server:
        agent = agent_for(server, tools=[dump], max_turns=None, context_window=8000)
        events = [e for e in agent.stream("Dump all 30 parts.")]
        done = events[-1]
        assert isinstance(done, tooloop.DoneEvent) and done.result.text == "All 30 parts dumped."
        compactions = [e for e in events if isinstance(e, tooloop.CompactionEvent)]
        assert compactions, "the 8000-token window was crossed"
        assert all(c.reason == "threshold" and c.tokens_after < c.tokens_before for c in compactions)
        # 2.5 KB results: clearing the old ones is the cheap first step, then summaries.
        assert {c.method for c in compactions} <= {"clear_tool_results", "summary"}
        assert all((c.summary or "").startswith("SUMMARY:") for c in compactions if c.method == "summary")
        reqs = server.requests()
        assert not [r for r in reqs if r.get("rejected")], "nothing went over the limit"
        for r in agent_requests(server):
            assert r["tokens"] <= 8000
            assert_valid_view(r["body"]["messages"])
        assert_valid_view(agent.messages)
        tool_entries = [e for e in agent.history if e["role"] == "tool"]
        assert len(tool_entries) == 30, "history keeps every result"
        records = [e for e in agent.history if e["role"] == "system" and "compaction" in e.get("meta", {})]
        assert len(records) == len(compactions)


def test_compaction_off_lets_the_api_refuse() -> None:
    with MockServer(scenario("agent_compaction")) as server:
        agent = agent_for(server, tools=[dump], max_turns=None, context_window=8000, compaction="off")
        with pytest.raises(tooloop.BadRequestError, match="prompt is too long"):
            agent.run("Dump all 30 parts.")
        assert_valid_view(agent.messages)


def test_compact_on_demand_returns_the_summary_and_count_tokens_asks_the_api() -> None:
    sc = scenario("agent_compaction")
    sc["responses"] = sc["responses"][:5] + sc["responses"][-1:]
    with MockServer(sc) as server:
        agent = agent_for(server, tools=[dump])
        agent.run("Dump five parts.")
        before = agent.count_tokens()
        counted = [r for r in server.requests() if r["path"] == "/v1/messages/count_tokens"]
        assert counted and counted[-1]["tokens"] == before
        n_messages = len(agent.messages)
        summary = agent.compact("keep the part numbers")
        assert summary is not None and summary.startswith("SUMMARY:")
        assert len(agent.messages) < n_messages
        assert_valid_view(agent.messages)
        assert agent.messages[0]["content"][0]["text"] == "Dump five parts."
        after = agent.count_tokens()
        assert after < before
        assert agent.count_tokens("and this") > after
        asked = [r for r in server.requests() if MARK in r["raw_body"]]
        assert "keep the part numbers" in asked[-1]["raw_body"]


def test_the_context_window_comes_from_the_table_or_the_option() -> None:
    assert tooloop.Agent("claude-sonnet-4-6", api_key="k").context_window == 200_000
    assert tooloop.Agent("my-local-model", provider="openai", api_key="k",
                         base_url="http://127.0.0.1:9/v1").context_window is None
    assert tooloop.Agent("my-local-model", provider="openai", api_key="k", base_url="http://127.0.0.1:9/v1",
                         context_window=32768).context_window == 32768
    with pytest.raises(tooloop.ConfigError, match="compact_threshold"):
        tooloop.Agent("claude-sonnet-4-6", api_key="k", compact_threshold=1.5)
    with pytest.raises(tooloop.ConfigError, match="compaction"):
        tooloop.Agent("claude-sonnet-4-6", api_key="k", compaction="sometimes")


def test_a_session_resumed_after_compaction_sends_the_compacted_view(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    sc = scenario("agent_compaction")
    first = copy.deepcopy(sc)
    first["responses"] = sc["responses"][:20] + sc["responses"][-1:]
    for r in first["responses"][:20]:  # results under the clearing size: making room takes a summary
        r["anthropic"]["content"][1]["input"]["bytes"] = 1800
    with MockServer(first) as server:
        agent = agent_for(server, tools=[dump], max_turns=None, context_window=8000, session=path)
        agent.run("Dump twenty parts.")
        view = agent.messages
        agent.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert any(line["type"] == "compaction" for line in lines)
    second = copy.deepcopy(sc)
    second["responses"] = sc["responses"][20:21] + sc["responses"][-1:]
    with MockServer(second) as server:
        agent = agent_for(server, tools=[dump], max_turns=None, context_window=8000, session=path)
        assert agent.messages == view
        assert agent.run("One more.").text == "All 30 parts dumped."
        sent = agent_requests(server)[0]["body"]["messages"]
        assert "SUMMARY:" in json.dumps(sent)
