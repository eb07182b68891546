"""A tool-using agent: two plain Python functions become tools, the model calls them, the loop runs them.

    export ANTHROPIC_API_KEY=sk-ant-...        # or ANTHROPIC_BASE_URL pointing at a compatible server
    python examples/python/tool_agent.py "What's the weather in Paris, and what time is it there?"
"""

from __future__ import annotations

import datetime
import sys
from typing import Dict, Union

import tooloop

agent = tooloop.Agent(
    model="claude-sonnet-4-6",
    system="You are a concise assistant. Use the tools when they help.",
    max_turns=10,
)


@agent.tool
def get_weather(city: str, units: str = "celsius") -> Dict[str, Union[str, int]]:
    """Current weather of a city.

    Args:
        city: The city name, e.g. "Paris".
        units: "celsius" or "fahrenheit".
    """
    # A real tool would call a weather service; any JSON-able value is sent to the model as JSON.
    temp = 18 if units == "celsius" else 64
    return {"city": city, "temperature": temp, "units": units, "sky": "partly cloudy"}


@agent.tool(parallel_safe=True)
def get_time(utc_offset_hours: int = 0) -> str:
    """The current time at a UTC offset, as ISO 8601."""
    tz = datetime.timezone(datetime.timedelta(hours=utc_offset_hours))
    return datetime.datetime.now(tz).isoformat(timespec="minutes")


def main() -> int:
    question = " ".join(sys.argv[1:]) or "What's the weather in Paris?"
    try:
        result = agent.run(question)
    except tooloop.AuthenticationError as e:
        print(f"authentication failed ({e.status_code}): set ANTHROPIC_API_KEY", file=sys.stderr)
        return 2
    except tooloop.Error as e:
        print(f"the run failed: {e}", file=sys.stderr)
        return 1
    for call in result.tool_calls:
        print(f"[tool] {call.name}({call.input}) -> {call.output}{' (error)' if call.is_error else ''}")
    print(result.text)
    cost = f", ~${result.usage.cost_usd:.4f}" if result.usage.cost_usd is not None else ""
    print(f"({result.turns} turns, {result.usage.input_tokens} in / {result.usage.output_tokens} out{cost})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
