"""Tools say what they are (``kind``): a host's own tool of kind "write" gets the file-change events and undo
the built-in write_file gets, one of kind "read" the progress credit of read_file; the built-ins report their
kinds; a kind that does not fit the tool is refused when the tool is made."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

import pytest

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
    return {"description": "tool kinds", "responses": responses}


def test_a_host_tool_of_kind_write_yields_file_change_events_that_restore_file_undoes(mock: Any,
                                                                                     tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("old\n")
    server = mock(_scenario([
        {"name": "save_note", "input": {"target": "notes.md", "text": "new\n"}},
        {"name": "save_note", "input": {"target": "sub/fresh.md", "text": "x"}},
    ]))

    @tooloop.tool(kind="write", path_field="target")
    def save_note(target: str, text: str) -> str:
        """Save a note."""
        p = tmp_path / target
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        return f"saved {target}"

    agent = agent_for(server, model="claude-sonnet-4-6", tools=[save_note], workspace=str(tmp_path), stream=False)
    events = list(agent.stream("save"))
    changes = [e for e in events if isinstance(e, tooloop.FileChangeEvent)]
    assert [(c.id, c.name, c.path, c.kind, c.before) for c in changes] == [
        ("toolu_00", "save_note", "notes.md", "modified", "old\n"),
        ("toolu_01", "save_note", "sub/fresh.md", "created", None),
    ]
    assert (tmp_path / "notes.md").read_text() == "new\n"
    # Undo, the library's way (what the CLI's /undo does with the same events): newest first.
    for c in reversed(changes):
        tooloop.restore_file(str(tmp_path), c.path, c.before_bytes, c.before_mode or 0o644)
    assert (tmp_path / "notes.md").read_text() == "old\n"
    assert not (tmp_path / "sub" / "fresh.md").exists()
    info = agent.tool_info("save_note")
    assert (info.kind, info.path_field, info.read_only) == ("write", "target", False)


def test_a_host_tool_of_kind_read_gets_the_progress_credit_of_read_file(mock: Any, tmp_path: Path) -> None:
    # write, look with the host's tool, write the same again: as after a read_file, nothing has been run since
    # the change, and the note on the rewrite asks for the check rather than "if the task is done, answer".
    server = mock(_scenario([
        {"name": "write_file", "input": {"path": "hello.py", "content": "print(1)\n"}},
        {"name": "peek", "input": {"path": "hello.py"}},
        {"name": "write_file", "input": {"path": "hello.py", "content": "print(1)\n"}},
    ]))

    @tooloop.tool(kind="read")
    def peek(path: str) -> str:
        """Show a file."""
        return (tmp_path / path).read_text()

    agent = agent_for(server, model="claude-sonnet-4-6", tools=[peek], builtin_tools=["write_file"],
                      workspace=str(tmp_path), sandbox="off", stream=False, progress_guard={"wrap_up": False})
    result = agent.run("write hello.py")
    told = result.tool_calls[2].output
    assert "Nothing has been run since you wrote it" in told, told
    assert agent.tool_info("peek").read_only, "a read tool changes nothing"


def test_the_built_in_tools_report_their_kinds(tmp_path: Path) -> None:
    agent = tooloop.Agent(model="claude-sonnet-4-6", api_key="sk-ant-x", builtin_tools=True, workspace=str(tmp_path),
                          sandbox="off")
    kinds = {name: agent.tool_info(name).kind for name in agent.tools}
    assert kinds == {"bash": "shell", "read_file": "read", "write_file": "write", "edit_file": "write",
                     "grep": "read", "glob": "read", "web_fetch": "network", "bash_output": None, "bash_kill": None}
    assert agent.tool_info("edit_file").path_field == "path"
    assert agent.tool_info("bash").confinable and agent.tool_info("bash").idempotent


def test_a_kind_that_does_not_fit_the_tool_is_refused_when_the_tool_is_made() -> None:
    def save(path: str, text: str, count: int) -> None:
        """Save."""

    with pytest.raises(ValueError, match="unknown kind 'writes': the kinds are 'read', 'write', 'shell', 'network'"):
        tooloop.tool(save, kind="writes")
    with pytest.raises(ValueError, match="path_field is for kind='write' only"):
        tooloop.tool(save, kind="read", path_field="path")
    with pytest.raises(ValueError, match="path_field 'file' is not a property of the input schema"):
        tooloop.tool(save, kind="write", path_field="file")
    with pytest.raises(ValueError, match="path_field 'count' must be a string property"):
        tooloop.tool(save, kind="write", path_field="count")
    with pytest.raises(ValueError, match="cannot be read_only"):
        tooloop.tool(save, kind="write", read_only=True)
    schema = {"type": "object", "properties": {"dest": {"type": "string"}}}
    with pytest.raises(ValueError, match="kind='write' needs path_field="):
        tooloop.Tool("copy", "", schema, lambda dest: None, kind="write")
    made = tooloop.Tool("copy", "", schema, lambda dest: None, kind="write", path_field="dest")
    assert (made.kind, made.path_field) == ("write", "dest")
    assert tooloop.tool(save, kind="write").path_field == "path", "path is the default field"
    assert tooloop.tool(save, kind="read").read_only


def _agent_with_a_host_writer(tmp_path: Path) -> Any:
    @tooloop.tool(kind="write", path_field="target")
    def save_note(target: str, text: str) -> str:
        """Save a note."""
        return "saved"

    return tooloop.Agent(model="claude-sonnet-4-6", api_key="sk-ant-x", tools=[save_note], workspace=str(tmp_path))


def test_the_cli_renderer_draws_a_host_tool_of_kind_write_by_its_path_like_write_file(tmp_path: Path) -> None:
    # The `tooloop` command has no host tools of its own (only MCP servers' tools, which cannot say they write a
    # path): its renderer is tested bound to a library agent that has one.
    import io

    from tooloop.cli.render import Renderer

    out = io.StringIO()
    renderer = Renderer(out, color=False, unicode=False)
    renderer.question_wait = 0   # the question's call was not drawn as a tool_use first: no need to wait for it
    renderer.bind(_agent_with_a_host_writer(tmp_path))
    renderer.tool_use("save_note", {"target": "notes/today.md", "text": "a long note\n" * 20}, "t1")
    renderer.permission_request("save_note", {"target": "notes/today.md", "text": "hi"}, "t2")
    lines = out.getvalue().splitlines()
    assert lines[0] == "* save_note(notes/today.md)", lines
    assert lines[1] == "* save_note(notes/today.md)", lines
    assert lines[2] == "  write notes/today.md:", lines
    assert '"text": "hi"' in lines[4], lines


def test_a_host_tool_of_kind_write_cannot_write_a_protected_path_under_the_cli_policy(tmp_path: Path) -> None:
    from tooloop.cli.permissions import AutoPolicy, Observed, Protected

    policy = Observed(AutoPolicy(), lambda *a: None, protected=Protected(tmp_path, config_dir=tmp_path / "cfg"))
    policy.bind(_agent_with_a_host_writer(tmp_path))
    refused = policy({"name": "save_note", "input": {"target": ".tooloop/settings.json", "text": "{}"}, "id": "1"})
    assert isinstance(refused, str) and ".tooloop/ is protected" in refused
    assert policy({"name": "save_note", "input": {"target": "notes.md", "text": "x"}, "id": "2"}) is True
