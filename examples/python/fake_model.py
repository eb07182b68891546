"""A model written in Python: `provider=callable`. The callable gets the request (a Messages API request as a
dict) and returns an Anthropic-shaped message. This is the "fake brain" tests use, and how a custom backend
plugs in. Runs offline.

    python examples/python/fake_model.py "add 2 and 40"
"""

from __future__ import annotations

import re
import sys
from typing import Any, Dict, List

import tooloop


def calculator_brain(request: Dict[str, Any]) -> Dict[str, Any]:
    """A rule-based "model": asks for the add tool when the user mentions two numbers, then reports."""
    last = request["messages"][-1]
    blocks: List[Dict[str, Any]] = last["content"]
    results = [b for b in blocks if b["type"] == "tool_result"]
    if results:
        return {"content": [{"type": "text", "text": f"The sum is {results[0]['content']}."}],
                "stop_reason": "end_turn", "usage": {"input_tokens": 12, "output_tokens": 6}}
    text = " ".join(b.get("text", "") for b in blocks if b["type"] == "text")
    numbers = [int(n) for n in re.findall(r"-?\d+", text)]
    if len(numbers) >= 2 and any(t["name"] == "add" for t in request.get("tools", [])):
        call = {"type": "tool_use", "id": "toolu_fake_1", "name": "add", "input": {"a": numbers[0], "b": numbers[1]}}
        return {"content": [{"type": "text", "text": "Let me add those."}, call], "stop_reason": "tool_use",
                "usage": {"input_tokens": 10, "output_tokens": 8}}
    return {"content": [{"type": "text", "text": "Give me two numbers to add."}], "stop_reason": "end_turn"}


def main() -> int:
    agent = tooloop.Agent(model="calculator-brain", provider=calculator_brain)

    @agent.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    result = agent.run(" ".join(sys.argv[1:]) or "add 2 and 40")
    print(result.text)
    print(f"{result.turns} turns, tool calls: {[(c.name, c.input, c.output) for c in result.tool_calls]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
