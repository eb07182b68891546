"""What the package's public API answers that the CLI used to reach around it for: the sandbox support, the
model table, prices, database session lists, the AWS credential check, the rule matcher, a token estimate
without a request, resuming with events, and the typed shapes of the data it hands back."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Dict, List, get_type_hints

import pytest

import tooloop
import tooloop.types
from tooloop import rules


def test_sandbox_support_is_the_library_answer() -> None:
    abi = tooloop.sandbox_support()
    assert abi is None or (isinstance(abi, int) and abi >= 1)


def test_model_table_and_prices_are_public() -> None:
    assert tooloop.model_context_window("claude-sonnet-4-6") == 200_000
    assert tooloop.model_context_window("no-such-model-xyz") is None
    cost = tooloop.estimate_cost_usd("claude-sonnet-4-6", {"input_tokens": 1_000_000, "output_tokens": 0})
    assert cost is not None and cost > 0
    assert tooloop.estimate_cost_usd("no-such-model-xyz", {"input_tokens": 10}) is None


def test_list_sessions_of_a_database(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    assert tooloop.list_sessions(db) == []   # no file: no sessions, and no file made
    assert not db.exists()
    with tooloop.Agent(provider=_model("hi"), session=f"{db}#task-1") as agent:
        agent.run("hello")
    [row] = tooloop.list_sessions(db)
    assert row["id"] == "task-1" and row["records"] >= 2
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("create table x (y)").connection.close()
    with pytest.raises(tooloop.SessionError):
        tooloop.list_sessions(other)


def test_check_aws_credentials_asks_what_the_provider_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AWS_PROFILE", "work")   # a profile no file holds: the provider would find nothing
    with pytest.raises(tooloop.ConfigError, match="no AWS credentials"):
        tooloop.check_aws_credentials()
    (tmp_path / ".aws").mkdir()
    (tmp_path / ".aws" / "credentials").write_text("[work]\naws_access_key_id = AKIA\naws_secret_access_key = s\n")
    tooloop.check_aws_credentials()
    monkeypatch.setenv("AWS_PROFILE", "other")
    with pytest.raises(tooloop.ConfigError):
        tooloop.check_aws_credentials()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIA")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    tooloop.check_aws_credentials()


def test_rules_module_is_the_core_matcher() -> None:
    assert rules.match_rules({"allow": ("Bash(npm test:*)",)}, "bash", {"command": "npm test"}, "/w") == \
        ("allow", "Bash(npm test:*)")
    assert rules.match_rules({"deny": ["edit_file(src/**)"]}, "edit_file", {"path": "src/a.py"}, Path("/w")) == \
        ("deny", "edit_file(src/**)")
    assert rules.match_rules({}, "bash", {"command": "x"}, "/w") is None
    assert rules.read_only_command("git status && ls | head")
    assert not rules.read_only_command("rm -rf x")
    assert rules.split_command("timeout 5 a && b") == ["a", "b"]


def _model(text: str) -> Any:
    def model(request: Dict[str, Any]) -> Dict[str, Any]:
        return {"role": "assistant", "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                "usage": {"input_tokens": 3, "output_tokens": 1}}
    return model


def test_count_tokens_estimate_never_calls_the_model() -> None:
    calls: List[Dict[str, Any]] = []

    def model(request: Dict[str, Any]) -> Dict[str, Any]:
        calls.append(request)
        return _model("x")(request)

    agent = tooloop.Agent(provider=model)
    assert agent.count_tokens("a fairly long question " * 20, estimate=True) > 20
    assert calls == []


def test_resume_stream_continues_a_stopped_run_with_events() -> None:
    state = {"fail": True}

    def model(request: Dict[str, Any]) -> Dict[str, Any]:
        if state["fail"]:
            state["fail"] = False
            raise RuntimeError("the network went away")
        return _model("back again")(request)

    agent = tooloop.Agent(provider=model)
    with pytest.raises(RuntimeError):
        agent.run("hello")
    events = list(agent.resume_stream())
    assert isinstance(events[-1], tooloop.DoneEvent) and events[-1].result.text == "back again"
    assert [m["role"] for m in agent.messages] == ["user", "assistant"]


def test_returned_data_has_documented_shapes() -> None:
    """The TypedDicts name exactly the keys the core produces."""
    agent = tooloop.Agent(provider=_model("hi"), planning=True)
    agent.run("hello")
    entry_keys = set(get_type_hints(tooloop.types.HistoryEntry))
    for entry in agent.history:
        assert set(entry) <= entry_keys, set(entry) - entry_keys
        assert {"id", "role", "content", "status", "created_at"} <= set(entry)
    status = agent.mcp_status()
    assert set(status) == set(get_type_hints(tooloop.types.McpStatus))
    assert set(agent.skills) == set(get_type_hints(tooloop.types.Skills))
    assert agent.todos == []
