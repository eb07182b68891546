"""Streaming output: print text as it arrives, show tool calls as they happen. Ctrl+C stops the run at once
and the conversation stays usable.

    python examples/python/streaming.py "Write a haiku about Rust."
"""

from __future__ import annotations

import sys

import tooloop


def main() -> int:
    prompt = " ".join(sys.argv[1:]) or "Write a haiku about Rust."
    agent = tooloop.Agent(model="claude-sonnet-4-6", max_tokens=1024)

    @agent.tool
    def word_count(text: str) -> int:
        """Count the words in a text."""
        return len(text.split())

    try:
        for event in agent.stream(prompt):
            if isinstance(event, tooloop.TextEvent):
                print(event.text, end="", flush=True)
            elif isinstance(event, tooloop.ThinkingEvent):
                print(f"\x1b[2m{event.thinking}\x1b[0m", end="", flush=True)
            elif isinstance(event, tooloop.ToolUseEvent):
                print(f"\n→ {event.name}({event.input})", flush=True)
            elif isinstance(event, tooloop.ToolResultEvent):
                print(f"← {event.content}{' (error)' if event.is_error else ''}", flush=True)
            elif isinstance(event, tooloop.DoneEvent):
                usage = event.result.usage
                print(f"\n[{event.result.stop_reason}; {usage.input_tokens} in / {usage.output_tokens} out]")
    except KeyboardInterrupt:
        print("\n[interrupted: the conversation is intact]")
        return 130
    except tooloop.Error as e:
        print(f"\n[failed: {e}]", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
