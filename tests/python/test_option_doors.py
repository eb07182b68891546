"""The three doors to the core's options agree: the core's key list (``AgentOptions::KEYS``, exposed as
``tooloop._tooloop.OPTION_KEYS``), the keys the C header documents for ``tooloop_agent_new``, and the keyword
arguments of ``tooloop.Agent``. And Python passes only what the caller gave, so the core's defaults are the
only defaults."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any, Dict, List, Set

import pytest

import tooloop
from tooloop import _tooloop

ROOT = Path(__file__).resolve().parents[2]

# Keyword arguments of `tooloop.Agent` that are not core options, on purpose:
PYTHON_ONLY = {
    "tools",       # Python callables, registered one by one after the agent is built (C: tooloop_agent_add_tool)
    "permission",  # a Python callable (C: tooloop_agent_set_permission)
    "hooks",       # Python callables (C: tooloop_agent_set_hook)
}
# Core options `tooloop.Agent` does not take as a keyword argument, on purpose: none today.
CORE_ONLY: Set[str] = set()


def _header_doc() -> str:
    header = (ROOT / "include" / "tooloop.h").read_text(encoding="utf-8")
    start = header.index("Create an agent that talks to a model API")
    return header[start:header.index("tooloop_status tooloop_agent_new(", start)]


def _header_bullet_keys(doc: str) -> Set[str]:
    """The key each `- "key"` bullet of the config list opens with."""
    return set(re.findall(r'^ \* - `"([a-z_]+)"`', doc, flags=re.M))


def test_core_keys_are_exposed_to_python() -> None:
    keys = list(_tooloop.OPTION_KEYS)
    assert len(keys) == len(set(keys)) > 40
    assert {"model", "max_turns_policy", "stop_sequences", "stream", "tool_choice", "tool_concurrency"} <= set(keys)


def test_every_core_option_is_documented_in_the_c_header() -> None:
    doc = _header_doc()
    mentioned = set(re.findall(r'`"([a-z_]+)"`', doc))
    missing = [k for k in _tooloop.OPTION_KEYS if k not in mentioned]
    assert not missing, f"core options the C header does not document for tooloop_agent_new: {missing}"
    unknown = _header_bullet_keys(doc) - set(_tooloop.OPTION_KEYS)
    assert not unknown, f"the C header documents options the core does not have: {sorted(unknown)}"


def test_python_agent_takes_every_core_option_and_nothing_else_unexplained() -> None:
    params = set(inspect.signature(tooloop.Agent.__init__).parameters) - {"self"}
    core = set(_tooloop.OPTION_KEYS)
    assert core - params == CORE_ONLY, f"core options Python cannot reach: {sorted(core - params - CORE_ONLY)}"
    assert params - core == PYTHON_ONLY, f"Agent arguments that are no core option: {sorted(params - core)}"


def test_python_restates_no_core_default() -> None:
    """Every core option of `Agent` defaults to "not given" (the core decides), except `model`."""
    restated = {
        name: p.default for name, p in inspect.signature(tooloop.Agent.__init__).parameters.items()
        if name in _tooloop.OPTION_KEYS and name != "model" and repr(p.default) != "<core default>"
    }
    assert not restated, f"Agent restates core defaults: {restated}"


def _echo_model(seen: List[Dict[str, Any]]) -> Any:
    def model(request: Dict[str, Any]) -> Dict[str, Any]:
        seen.append(request)
        return {"role": "assistant", "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
                "usage": {"input_tokens": 1, "output_tokens": 1}}
    return model


def test_core_defaults_reach_python_users() -> None:
    """Nothing given: the request carries the core's defaults (max_tokens 8192, no stop sequences)."""
    seen: List[Dict[str, Any]] = []
    agent = tooloop.Agent(provider=_echo_model(seen))
    agent.run("hi")
    assert seen[0]["max_tokens"] == 8192
    assert "stop_sequences" not in seen[0] and "tool_choice" not in seen[0]


def test_request_options_once_c_only_now_reach_the_request() -> None:
    seen: List[Dict[str, Any]] = []
    agent = tooloop.Agent(provider=_echo_model(seen), stop_sequences=("END",), tool_choice={"type": "auto"},
                          tool_concurrency=2, stream=False)
    agent.run("hi")
    assert seen[0]["stop_sequences"] == ["END"]
    assert seen[0]["tool_choice"] == {"type": "auto"}


def test_max_turns_policy_return_ends_with_a_result() -> None:
    def looping(request: Dict[str, Any]) -> Dict[str, Any]:
        n = len(request["messages"])
        return {"role": "assistant", "stop_reason": "tool_use", "usage": {"input_tokens": 1, "output_tokens": 1},
                "content": [{"type": "tool_use", "id": f"t{n}", "name": "ping", "input": {}}]}

    def ping() -> str:
        """Ping."""
        return "pong"

    agent = tooloop.Agent(provider=looping, tools=[ping], max_turns=2, max_turns_policy="return")
    result = agent.run("go")
    assert result.max_turns_reached and result.turns == 2
    with pytest.raises(tooloop.MaxTurnsExceeded):
        tooloop.Agent(provider=looping, tools=[ping], max_turns=2).run("go")


@pytest.mark.parametrize("key,value", [("max_turns_policy", "sometimes"), ("tool_concurrency", 0),
                                       ("stop_sequences", "END"), ("tool_choice", "auto")])
def test_bad_new_options_are_refused_by_the_core_naming_the_key(key: str, value: Any) -> None:
    with pytest.raises(tooloop.ConfigError, match=key):
        tooloop.Agent(provider=_echo_model([]), **{key: value})
