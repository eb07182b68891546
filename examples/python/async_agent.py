"""asyncio: an agent inside an event loop (a web handler, a bot). The run goes on a worker thread and the loop
keeps serving; the async tool below is awaited on this loop, so it may use the app's async clients and locks.

    python examples/python/async_agent.py "Weather in Paris?"
"""

from __future__ import annotations

import asyncio
import sys

import tooloop


async def main(question: str) -> None:
    agent = tooloop.Agent(model="claude-sonnet-4-6", system="Be concise.")

    @agent.tool
    async def get_weather(city: str) -> str:
        """Current weather of a city."""
        await asyncio.sleep(0.05)  # stands in for an async HTTP call of your app, on this very loop
        return f"18 °C and sunny in {city}"

    async for event in agent.astream(question):  # the same events as agent.stream()
        if event.type == "text":
            print(event.text, end="", flush=True)
        elif event.type == "tool_use":
            print(f"[tool] {event.name}({event.input})")
    print()
    # One call instead: result = await agent.arun(question)  (task.cancel() stops it within 200 ms)


if __name__ == "__main__":
    asyncio.run(main(" ".join(sys.argv[1:]) or "Weather in Paris?"))
