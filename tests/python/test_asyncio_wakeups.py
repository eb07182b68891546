"""How often an ``astream`` run wakes the event loop (issue 40 item 5: the loop is never kept busy by tooloop):
once per network read, with all of that read's events, never once per event."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, List

import tooloop
from _support import agent_for, text_reply


class CountingLoop(asyncio.SelectorEventLoop):
    """A plain selector loop that counts the wake-ups other threads ask of it."""

    def __init__(self) -> None:
        super().__init__()
        self.wakeups = 0

    def call_soon_threadsafe(self, *args: Any, **kwargs: Any) -> Any:
        self.wakeups += 1
        return super().call_soon_threadsafe(*args, **kwargs)


def test_an_astream_run_wakes_the_loop_once_per_network_read_not_per_event(mock: Any) -> None:
    # 2,000 chars in 8-char deltas (250 text events), sent in writes of 6,000 bytes 80 ms apart: about 5 network reads.
    text = ("agent loop tool stream delta token " * 60)[:2000]
    server = mock({"responses": [{**text_reply(text), "delta_chars": 8, "chunk_size": 6_000,
                                  "delay_ms_between": 80}]})
    agent = agent_for(server)
    loop = CountingLoop()

    async def main() -> List[Any]:
        return [event async for event in agent.astream("go")]

    try:
        events = loop.run_until_complete(main())
    finally:
        loop.close()
    texts = [e for e in events if isinstance(e, tooloop.TextEvent)]
    assert "".join(e.text for e in texts) == text and len(texts) == 250
    # The writes, plus the run's start and end (turn_start, the message's first and last events): a few dozen
    # at most, where a wake-up per event would be hundreds.
    print(f"{loop.wakeups} wake-ups of the loop for {len(events)} events")
    assert loop.wakeups <= 30, f"{loop.wakeups} wake-ups for {len(events)} events"
