"""Structured output: `output_schema=` a class (here a dataclass; a pydantic model or a TypedDict works the
same) makes the final answer JSON valid against its schema, and `result.output` an instance of it. An invalid
answer goes back to the model with the errors (at most `output_retries` times). Runs offline with a model
written in Python that reads the schema from the request and gets it wrong once.

    python examples/python/structured_output.py
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List

import tooloop


@dataclass
class Release:
    version: str
    breaking: bool
    changes: List[str]


def release_brain(request: Dict[str, Any]) -> Dict[str, Any]:
    """Answers with JSON: first without the required "breaking", then, told what is missing, complete."""
    schema = request["output_config"]["format"]["schema"]   # the native structured-output field
    corrected = any("missing required property" in json.dumps(m["content"]) for m in request["messages"])
    answer: Dict[str, Any] = {"version": "2.1.0", "changes": ["faster startup", "new --json flag"]}
    if corrected:
        answer["breaking"] = False
    print(f"[model] asked for {sorted(schema['properties'])}, answering {sorted(answer)}")
    return {"content": [{"type": "text", "text": json.dumps(answer)}], "stop_reason": "end_turn"}


def main() -> int:
    agent = tooloop.Agent(model="release-brain", provider=release_brain, output_schema=Release)
    result = agent.run("Summarize the release notes as JSON.")
    release: Release = result.output
    print(f"{release.version}: breaking={release.breaking}, {len(release.changes)} changes ({result.turns} turns)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
