"""The event loop is never kept busy or waiting by tooloop (issue 40 item 5): an ``astream`` run wakes it once
per network read, with all of that read's events, never once per event; runs on one loop share its wake-ups;
what the loop asks of a run does not wait for the run's step in progress."""

from __future__ import annotations

import asyncio
import time
from typing import Any, List, Tuple

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


def test_runs_whose_events_arrive_while_the_loop_is_busy_share_one_wake_up(mock: Any) -> None:
    # 32 runs at once, each the stream above (a write every 80 ms). Once every run has handed out its first
    # event, the loop is kept busy for 200 ms (a blocking sleep in a coroutine: a stand-in for an app's slow
    # callback), while about two more reads of every run arrive: one wake-up of the loop is asked for them
    # all, where each run used to ask for its own (32).
    text = ("agent loop tool stream delta token " * 60)[:2000]
    reply = {**text_reply(text), "delta_chars": 8, "chunk_size": 6_000, "delay_ms_between": 80}
    server = mock({"responses": [reply] * 32})
    agents = [agent_for(server) for _ in range(32)]
    loop = CountingLoop()
    started = asyncio.Event()
    first: List[int] = []

    async def consume(agent: Any) -> int:
        n = 0
        async for _ in agent.astream("go"):
            n += 1
            if n == 1:
                first.append(1)
                if len(first) == 32:
                    started.set()
        return n

    async def busy() -> int:
        await started.wait()
        before = loop.wakeups
        time.sleep(0.2)
        return loop.wakeups - before

    async def main() -> Tuple[List[int], int]:
        during = asyncio.ensure_future(busy())
        counts = list(await asyncio.gather(*(consume(a) for a in agents)))
        return counts, await during

    try:
        counts, during = loop.run_until_complete(main())
    finally:
        loop.close()
    assert counts == [254] * 32
    assert during <= 2, f"{during} wake-ups asked for while the loop was busy"



def test_pending_approvals_on_the_loop_does_not_wait_for_a_step_in_progress(mock: Any) -> None:
    # The worker is in a step, waiting 1.5 s for the model's reply: no call waits for an answer, and asking so
    # on the loop must not wait for the step to end.
    server = mock({"responses": [{**text_reply("late"), "delay_ms": 1500}]})
    agent = agent_for(server)

    async def main() -> Tuple[List[Any], float, List[Any]]:
        stream = agent.astream("go", pause_for_approval=True)
        await asyncio.sleep(0.3)
        t = time.monotonic()
        pending = stream.pending_approvals()
        took = time.monotonic() - t
        return pending, took, [e async for e in stream]

    pending, took, events = asyncio.run(main())
    assert pending == [] and took < 0.1, f"pending_approvals() kept the loop {took:.3f} s"
    assert isinstance(events[-1], tooloop.DoneEvent) and events[-1].result.text == "late"
