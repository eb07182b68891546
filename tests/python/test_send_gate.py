"""A batch's send gate (``_Agent.set_gate``, what ``tooloop.batch`` installs) travels with the run's token: every
model request of the run passes it, on whichever thread it is made — a subagent's as well as the run's own, in
``run`` and in a stream."""

from __future__ import annotations

import threading
from typing import Any, List, Optional

import tooloop
from _support import agent_for, assert_valid_view, text_reply, tool_reply


class Gate:
    """Lets everything go, and records what it was asked."""

    def __init__(self) -> None:
        self.sends: List[int] = []
        self.statuses: List[int] = []
        self.lock = threading.Lock()

    def __call__(self, kind: str, n: int, retry_after: Optional[float]) -> None:
        with self.lock:
            (self.sends if kind == "send" else self.statuses).append(n)


def _gated_parent(mock: Any) -> Any:
    """A parent whose first call starts a `helper` subagent, with a send gate on its runs."""
    server = mock("anthropic_text")
    server.load({"responses": [
        tool_reply(("toolu_1", "task", {"description": "d", "prompt": "say hi", "agent_type": "helper"})),
        text_reply("hi from the child"),
        text_reply("parent done"),
    ]})
    agent = agent_for(server, subagents={"helper": tooloop.SubAgent("says hi")})
    gate = Gate()
    agent._core.set_gate(gate)
    return server, agent, gate


def test_a_subagents_requests_go_through_the_parents_send_gate(mock: Any) -> None:
    server, agent, gate = _gated_parent(mock)
    assert agent.run("go").text == "parent done"
    assert len(server.requests()) == 3
    assert len(gate.sends) == 3, "the child's request passed the gate too"
    assert gate.statuses == [200, 200, 200]
    assert_valid_view(agent.messages)


def test_a_streamed_runs_subagent_requests_go_through_the_send_gate(mock: Any) -> None:
    server, agent, gate = _gated_parent(mock)
    kinds = [event.type for event in agent.stream("go")]
    assert kinds[-1] == "done" and "subagent" in kinds
    assert len(gate.sends) == 3 and gate.statuses == [200, 200, 200]
