"""Approvals and file changes as events in Python (against the mock server): ``agent.stream()`` yields a
``FileChangeEvent`` (with what the file was before) between a file tool's ``tool_use`` and ``tool_result``,
and an ``ApprovalRequestEvent`` before the ``permission`` callable is asked."""

from __future__ import annotations

import base64
import pickle
import threading
from pathlib import Path
from typing import Any, Dict, List

import tooloop
from _support import agent_for


def _scenario(calls: List[Dict[str, Any]]) -> Dict[str, Any]:
    responses = []
    for i, call in enumerate(calls + [{}]):
        content: List[Dict[str, Any]] = (
            [{"type": "tool_use", "id": f"toolu_{i:02}", "name": call["name"], "input": call["input"]}]
            if call else [{"type": "text", "text": "done"}])
        responses.append({"anthropic": {
            "id": f"msg_{i:02}", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
            "content": content, "stop_reason": "tool_use" if call else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5}}})
    return {"description": "file change events", "responses": responses}


def _order(events: List[Any]) -> List[str]:
    return [f"{e.type}:{e.id}" for e in events
            if e.type in ("tool_use", "tool_result", "file_change", "approval_request")]


def test_file_tools_yield_file_change_events_with_the_content_before(mock: Any, tmp_path: Path) -> None:
    (tmp_path / "old.txt").write_text("before\n")
    (tmp_path / "blob").write_bytes(b"\xff\x00")
    server = mock(_scenario([
        {"name": "write_file", "input": {"path": "new/a.txt", "content": "a\n"}},
        {"name": "edit_file", "input": {"path": "old.txt", "old_text": "before", "new_text": "after"}},
        {"name": "write_file", "input": {"path": "blob", "content": "text"}},
    ]))
    agent = agent_for(server, model="claude-sonnet-4-6", builtin_tools=True, workspace=str(tmp_path),
                      sandbox="off", stream=False)
    events = list(agent.stream("go"))
    assert _order(events) == [
        "tool_use:toolu_00", "file_change:toolu_00", "tool_result:toolu_00",
        "tool_use:toolu_01", "file_change:toolu_01", "tool_result:toolu_01",
        "tool_use:toolu_02", "file_change:toolu_02", "tool_result:toolu_02",
    ]
    created, modified, binary = [e for e in events if isinstance(e, tooloop.FileChangeEvent)]
    assert (created.path, created.kind, created.name, created.before, created.before_mode) == \
        ("new/a.txt", "created", "write_file", None, None)
    assert created.before_bytes is None
    assert (modified.path, modified.kind, modified.before) == ("old.txt", "modified", "before\n")
    assert modified.before_mode is not None and modified.before_mode & 0o600 == 0o600
    assert modified.before_bytes == b"before\n"
    assert binary.before is None and binary.before_base64 == base64.b64encode(b"\xff\x00").decode()
    assert binary.before_bytes == b"\xff\x00"
    assert pickle.loads(pickle.dumps(created)) == created


def test_approval_request_event_comes_before_the_permission_callable_is_asked(mock: Any, tmp_path: Path) -> None:
    server = mock(_scenario([{"name": "write_file", "input": {"path": "a.txt", "content": "a"}}]))
    seen: List[str] = []
    lock = threading.Lock()

    def permission(call: tooloop.ToolCall) -> bool:
        with lock:
            seen.append(f"asked:{call.id}")
        return True

    agent = agent_for(server, model="claude-sonnet-4-6", builtin_tools=True, workspace=str(tmp_path),
                      sandbox="off", stream=False, permission=permission)
    events = []
    for event in agent.stream("go"):
        events.append(event)
        if event.type == "approval_request":
            with lock:
                # The worker asks the callable only after announcing the question.
                seen.append(f"event:{event.id}")
    approvals = [e for e in events if isinstance(e, tooloop.ApprovalRequestEvent)]
    assert [(a.id, a.name, a.input) for a in approvals] == [("toolu_00", "write_file",
                                                             {"path": "a.txt", "content": "a"})]
    assert _order(events) == ["tool_use:toolu_00", "approval_request:toolu_00", "file_change:toolu_00",
                              "tool_result:toolu_00"]
    assert "asked:toolu_00" in seen and "event:toolu_00" in seen
