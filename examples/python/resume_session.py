"""Resuming a session: the conversation is saved to a JSONL file as it goes. Run the script again after a
failure (network error, rate limit, Ctrl+C) and it picks up where it stopped — tools that already ran are
not run again.

    python examples/python/resume_session.py chat.jsonl "What's the weather in Lyon?"
    python examples/python/resume_session.py chat.jsonl            # resume / continue
"""

from __future__ import annotations

import sys

import tooloop


def get_weather(city: str) -> str:
    """Current weather of a city."""
    return f"21 C and sunny in {city}"


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    path, question = sys.argv[1], " ".join(sys.argv[2:])
    agent = tooloop.Agent(model="claude-sonnet-4-6", tools=[get_weather], session=path)
    report = agent.session_report
    if report is not None and not report["created"]:
        print(f"[loaded {report['entries']} entries from {path}]")
    messages = agent.messages
    try:
        if messages and messages[-1]["role"] == "user":
            # The last run stopped before the model answered: continue it.
            result = agent.resume()
        elif question:
            result = agent.run(question)
        else:
            print("nothing to resume; give a question")
            return 0
    except KeyboardInterrupt:
        print(f"\n[interrupted; run again to resume from {path}]")
        return 130
    except tooloop.Error as e:
        print(f"[failed: {type(e).__name__}: {e}; run again to resume from {path}]", file=sys.stderr)
        return 1
    print(result.text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
