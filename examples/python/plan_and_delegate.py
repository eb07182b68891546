"""Planning, a subagent and a skill, offline: a model written in Python keeps a todo list (`planning=True`),
hands a search to a child agent with a tool of its own (`subagents=`), and loads a skill from a folder
(`skills=`). Swap the model for `provider="anthropic"` and the same options work against the API.

    python examples/python/plan_and_delegate.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List

import tooloop

NOTES = {"port": "The service listens on port 8080.", "owner": "The service belongs to the platform team."}


def scripted_model(request: Dict[str, Any]) -> Dict[str, Any]:
    """The parent plans, loads the skill, delegates, then answers; the child searches once and reports."""
    system = request.get("system") or ""
    if isinstance(system, str) and system.startswith("You search notes"):
        if len(request["messages"]) == 1:
            return {"content": [{"type": "tool_use", "id": "c1", "name": "search_notes", "input": {"topic": "port"}}]}
        return {"content": "The port is 8080."}
    step = sum(1 for m in request["messages"] if m["role"] == "assistant")
    calls: List[Dict[str, Any]] = [
        {"type": "tool_use", "id": "t1", "name": "todo_write", "input": {"todos": [
            {"content": "Read the release skill", "status": "in_progress"},
            {"content": "Find the port", "status": "pending"}]}},
        {"type": "tool_use", "id": "s1", "name": "skill", "input": {"name": "release-check"}},
        {"type": "tool_use", "id": "k1", "name": "task", "input": {
            "description": "find the port", "prompt": "Which port does the service use?", "agent_type": "notes"}},
        {"type": "tool_use", "id": "t2", "name": "todo_write", "input": {"todos": [
            {"content": "Read the release skill", "status": "completed"},
            {"content": "Find the port", "status": "completed"}]}},
    ]
    if step < len(calls):
        return {"content": [calls[step]]}
    return {"content": "Release check done: the service listens on port 8080."}


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        skill = Path(tmp) / "skills" / "release-check"
        skill.mkdir(parents=True)
        (skill / "SKILL.md").write_text(
            "---\nname: release-check\ndescription: What to verify before a release.\n---\n"
            "Check the port and the owner in the notes.\n")

        def search_notes(topic: str) -> str:
            """Search the team's notes.

            Args:
                topic: what to look up, e.g. "port".
            """
            return NOTES.get(topic, "nothing found")

        notes = tooloop.SubAgent("Searches the team's notes.", system="You search notes and report briefly.",
                                 tools=[search_notes], max_turns=5)
        with tooloop.Agent(provider=scripted_model, planning=True, subagents={"notes": notes},
                           skills=[str(Path(tmp) / "skills")]) as agent:
            for event in agent.stream("Run the release check."):
                if isinstance(event, tooloop.TodoEvent):
                    marks = {"completed": "✔", "in_progress": "▸", "pending": "○"}
                    print("todo: " + " · ".join(f"{marks[t['status']]} {t['content']}" for t in event.todos))
                elif isinstance(event, tooloop.SubagentEvent) and isinstance(event.event, tooloop.ToolUseEvent):
                    print(f"  [{event.agent_type}] {event.event.name}({event.event.input})")
                elif isinstance(event, tooloop.DoneEvent):
                    print(event.result.text)
            print(f"todos at the end: {[t['status'] for t in agent.todos]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
