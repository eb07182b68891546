"""asyncio on top of the blocking core: ``Agent.arun``/``astream``, ``Client.acreate``/``astream``.

Why threads: the core runs a whole run (requests, tools, retries) as blocking calls with the GIL released;
there is no step engine a loop could drive without blocking. So each async run goes on a worker thread
(``_Workers``: reused, started off the loop) that makes exactly the calls the sync API makes
(``_Agent.start(input, True)`` and its handle, or the raw client's), and hands what comes out to the caller's
loop with ``loop.call_soon_threadsafe``, coalesced: one wake-up of the loop per batch of events, not per
event (from a ``_Driven``, a step's events come in one call, ``next_events``, and go to the loop in one
piece after they are all converted). The loop thread itself only ever calls non-blocking methods (``cancel()``: a flag) and converts
nothing.

``async def`` tools and an ``async def`` permission callable are awaited ON THE CALLER'S LOOP, in the
caller's context variables (``_Bridge.wait``): the worker schedules them there and waits, with the tool's
timeout, so they can use the app's connections and locks. Sync tools stay on the worker.

Cancellation is asyncio's: a cancelled awaiting task (``task.cancel()``, ``asyncio.wait_for``, leaving an
``async for`` through ``aclose()``) cancels the run, cancels any tool awaiting on the loop, and waits — on
the loop, never blocking it — until the worker has stopped, so the conversation is valid when
``asyncio.CancelledError`` reaches the caller.

Must never: block the loop thread on the network, on a worker's lock or on a join; import anything at
``import tooloop`` time (this module loads on the first async call, with ``asyncio``).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextvars
import queue
import threading
import weakref
from typing import (TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, Deque, Dict, Generic, List, Optional,
                    Set, Tuple, TypeVar, Union)

from . import _approval
from .events import ApprovalRequestEvent, DoneEvent, RunResult, _event_from

if TYPE_CHECKING:
    from . import _tooloop
    from .events import Event

__all__ = ["AsyncAgentStream", "AsyncMessageStream"]

_T = TypeVar("_T")
_Handle = Union["_tooloop._Run", "_tooloop._Driven", "_tooloop._Stream"]

#: Grace given to an awaited tool past its time limit: the core answers the call at the limit; this only tells
#: the coroutine to stop (as the thread alarm does for a sync tool).
_GRACE = 0.05


class _Bridge:
    """Where the Python callables of one agent (tools, permission) find the loop of the async run in progress.

    Shared by the agent and the callables it registered with the core (not the agent itself: no cycle). The
    core calls tools on threads of its own (a tool with a timeout gets one), so a thread-local would not do.
    """

    __slots__ = ("loop", "context", "loop_thread", "pending", "lock", "depth")

    def __init__(self) -> None:
        self.depth = 0  # async runs begun on `loop` and not ended (a second one is refused by the core, BusyError)
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self.context: Optional[contextvars.Context] = None
        self.loop_thread: Optional[int] = None
        self.pending: Set[concurrent.futures.Future[Any]] = set()
        self.lock = threading.Lock()

    def enter(self, loop: asyncio.AbstractEventLoop) -> None:
        # Called on the loop thread; a refused second run must not take the loop from the one in progress.
        if self.loop is not loop or self.depth == 0:
            self.loop, self.context, self.loop_thread, self.depth = loop, contextvars.copy_context(), \
                threading.get_ident(), 0
        self.depth += 1

    def leave(self, loop: asyncio.AbstractEventLoop) -> None:
        if self.loop is loop:
            self.depth -= 1
            if self.depth <= 0:
                self.loop = self.context = self.loop_thread = None
                self.depth = 0

    def cancel_pending(self) -> None:
        with self.lock:
            pending = list(self.pending)
        for f in pending:
            f.cancel()

    def wait(self, awaitable: Awaitable[_T], timeout: Optional[float]) -> _T:
        """The awaitable's value: awaited on the async run's loop when there is one (this thread waits, at most
        ``timeout`` plus a grace, then the coroutine is cancelled and ``TimeoutError`` raised), else on a
        fresh loop as the sync API does."""
        loop, context = self.loop, self.context
        if loop is None or context is None or loop.is_closed() or threading.get_ident() == self.loop_thread:
            from ._tools import _run_awaitable

            result: _T = _run_awaitable(awaitable)
            return result
        done: concurrent.futures.Future[_T] = concurrent.futures.Future()

        async def body() -> _T:
            return await awaitable

        def begin() -> None:
            if done.cancelled():
                return
            task = context.run(loop.create_task, body())  # the caller's context variables

            def finished(t: asyncio.Task[_T]) -> None:
                if done.done():
                    return
                try:
                    if t.cancelled():
                        done.cancel()
                    elif t.exception() is not None:
                        done.set_exception(t.exception())
                    else:
                        done.set_result(t.result())
                except concurrent.futures.InvalidStateError:
                    pass

            task.add_done_callback(finished)
            done.add_done_callback(lambda f: loop.call_soon_threadsafe(task.cancel) if f.cancelled() else None)

        with self.lock:
            self.pending.add(done)
        try:
            loop.call_soon_threadsafe(begin)
            try:
                return done.result(None if timeout is None else timeout + _GRACE)
            except concurrent.futures.TimeoutError:
                done.cancel()
                raise TimeoutError(f"did not finish within {timeout} s") from None
            except concurrent.futures.CancelledError:
                raise _ToolCancelled("cancelled: the run was cancelled while it waited for this call") from None
        finally:
            with self.lock:
                self.pending.discard(done)


class _Workers:
    """The threads the async runs go on, reused: the loop only puts a job in a queue (never blocks).

    ``Thread.start()`` waits until the new thread runs, which under a busy GIL takes milliseconds; sixteen
    starts in a row stalled the loop for 40 ms. So new threads are started by a spawner thread of their own,
    and a worker stays idle for a while (``IDLE`` seconds) for the next job before it ends.
    """

    IDLE = 30.0

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._spawns: queue.SimpleQueue[None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0  # idle workers not yet claimed by a job
        self._spawner: Optional[threading.Thread] = None

    def submit(self, job: Callable[[], None]) -> None:
        self._jobs.put(job)
        with self._lock:
            if self._idle > 0:
                self._idle -= 1
                return
            if self._spawner is None:  # once per process: the only Thread.start() the loop itself makes
                self._spawner = threading.Thread(target=self._spawn, name="tooloop-async-spawner", daemon=True)
                self._spawner.start()
        self._spawns.put(None)

    def _spawn(self) -> None:
        while True:
            self._spawns.get()
            threading.Thread(target=self._work, name="tooloop-async", daemon=True).start()

    def _work(self) -> None:
        while True:
            try:
                job = self._jobs.get(timeout=self.IDLE)
            except queue.Empty:
                with self._lock:
                    if self._idle > 0:  # still unclaimed: end
                        self._idle -= 1
                        return
                continue  # claimed just now: its job is on the way
            job()
            del job
            with self._lock:
                self._idle += 1


_WORKERS = _Workers()


class _Inbox:
    """The wake-ups one event loop is asked for by the workers of its runs, coalesced across runs: a worker
    with events queues its pump here and writes to the loop's self-pipe (``call_soon_threadsafe``) only when
    no wake-up of the loop is pending yet; the loop then wakes every queued pump in one callback. With many
    runs at once (64 agents streaming), one wake-up of the loop serves many runs' events, where each used to
    cost the loop a wake-up and the GIL a hand-over."""

    __slots__ = ("loop", "ready", "lock", "pending", "__weakref__")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.ready: Deque[_Pump[Any]] = collections.deque()
        self.lock = threading.Lock()
        self.pending = False

    def post(self, pump: _Pump[Any]) -> None:
        # Appended first, the flag read after (as in _Pump._push): a wake-up still pending runs after this
        # append and finds the pump; a stale False costs a spare wake-up.
        self.ready.append(pump)
        if self.pending:
            return
        with self.lock:
            if self.pending:
                return
            self.pending = True
        try:
            self.loop.call_soon_threadsafe(self._drain)
        except RuntimeError:  # the loop is closed: nobody is waiting
            pass

    def _drain(self) -> None:
        with self.lock:
            self.pending = False
        ready = self.ready
        while True:
            try:
                pump = ready.popleft()
            except IndexError:
                return
            pump._wake()


#: One inbox per loop (a loop that is gone takes its inbox with it); made and looked up on the loop's thread.
_INBOXES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Inbox] = weakref.WeakKeyDictionary()


def _inbox(loop: asyncio.AbstractEventLoop) -> _Inbox:
    try:
        inbox = _INBOXES.get(loop)
        if inbox is None:
            inbox = _INBOXES[loop] = _Inbox(loop)
    except TypeError:  # a loop class that takes no weak reference: an inbox of the run's own (no sharing)
        inbox = _Inbox(loop)
    return inbox


class _ToolCancelled(Exception):
    """An awaited tool or permission check cancelled with its run (the model reads it as an error result)."""


_EMPTY: Any = object()  # no event queued yet
_END: Any = object()  # the outcome is in


class _Pump(Generic[_T]):
    """One blocking operation on a worker thread of its own, its events and outcome handed to the loop.

    ``start`` (on the worker) returns the handle (``_Run``/``_Driven``/``_Stream``); with ``events`` the worker
    pulls ``next_event`` until None, converting each with ``convert`` (None: skipped); then ``finish`` builds
    the outcome from ``handle.result()``. The loop side reads with ``next()`` and ``outcome()``.
    """

    def __init__(self, start: Callable[[], _Handle], finish: Callable[[Dict[str, Any]], _T],
                 convert: Optional[Callable[[Dict[str, Any]], Any]], bridge: Optional[_Bridge] = None,
                 name: str = "tooloop-async") -> None:
        self._loop = asyncio.get_running_loop()
        self._inbox = _inbox(self._loop)
        self._bridge = bridge
        self._items: Deque[Tuple[int, Any]] = collections.deque()
        self._lock = threading.Lock()
        self._wake_pending = False
        self._waiter: Optional[asyncio.Future[None]] = None
        self._ended = self._loop.create_future()  # set once the worker has made its last call
        self._handle: Optional[_Handle] = None
        self._cancelled = False
        self._outcome: Optional[Tuple[bool, Any]] = None  # (ok, value or exception)
        self._start, self._finish, self._convert = start, finish, convert
        # Set by approve() and cancel(): wakes the worker from a pause for approvals (the state is the run's).
        self._answered = threading.Event()
        # `start` runs on the worker in the awaiting task's context: what it reads there (the caller's current
        # OpenTelemetry span, through tooloop._otel) is the caller's, as for a run started on the caller's thread.
        self._context = contextvars.copy_context()
        if bridge is not None:
            bridge.enter(self._loop)
        _WORKERS.submit(self._work)

    # -- the worker ----------------------------------------------------------------------------------------

    def _work(self) -> None:
        try:
            handle = self._context.run(self._start)
            self._handle = handle
            if self._cancelled:  # a cancel that came before the handle existed is not lost
                handle.cancel()
            convert = self._convert
            batches = getattr(handle, "next_events", None)  # a _Driven: a step's events at a time
            if convert is not None and batches is not None:
                while True:
                    ds = batches()
                    if ds is None:
                        break
                    if ds and ds[0].get("type") == "approval_pause":  # comes alone, after the step's events
                        self._answered.wait()
                        self._answered.clear()
                        continue
                    items = [item for item in map(convert, ds) if item is not None]
                    if items:
                        self._push_all(items)
            elif convert is not None:
                while True:
                    d = handle.next_event()
                    if d is None:
                        break
                    if d.get("type") == "approval_pause":  # wait (off the loop) for approve() or cancel()
                        self._answered.wait()
                        self._answered.clear()
                        continue
                    item = convert(d)
                    if item is not None:
                        self._push(0, item)
            value = self._finish(handle.result())
            self._push(1, value)
        except BaseException as e:  # handed to the awaiting task as it is
            self._push(2, e)
        finally:
            self._handle = None
            try:
                self._loop.call_soon_threadsafe(self._end)
            except RuntimeError:  # the loop is closed: nobody is waiting
                pass

    def _push_all(self, events: List[Any]) -> None:
        # A step's events in one piece, then one wake-up (see _push).
        self._items.extend([(0, e) for e in events])
        self._wake_once()

    def _push(self, kind: int, value: Any) -> None:
        self._items.append((kind, value))
        self._wake_once()

    def _wake_once(self) -> None:
        # Appended first, the flag read after: a wake-up still pending (True) runs after this append and the
        # consumer finds the item; a stale False only costs a spare wake-up. So most events take no lock.
        if self._wake_pending:
            return
        with self._lock:
            if self._wake_pending:
                return
            self._wake_pending = True
        self._inbox.post(self)

    # -- the loop side -------------------------------------------------------------------------------------

    def _wake(self) -> None:
        with self._lock:
            self._wake_pending = False
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _end(self) -> None:
        if self._bridge is not None:
            self._bridge.leave(self._loop)
        if not self._ended.done():
            self._ended.set_result(None)
        self._wake()

    def cancel(self) -> None:
        """Ask the run to stop (non-blocking; any thread)."""
        self._cancelled = True
        handle = self._handle
        if handle is not None:
            handle.cancel()
        self._answered.set()
        if self._bridge is not None:
            self._bridge.cancel_pending()

    def approve(self, call_id: str, deny: Optional[str], read_only: bool) -> None:
        """Answer a call the run paused for, and wake the worker (on the loop: the run is paused, so the
        handle's lock is free or held for a moment)."""
        approve = getattr(self._handle, "approve", None)
        if approve is None:
            from .errors import ConfigError

            raise ConfigError("this run was started without pause_for_approval, or has ended: nothing to approve")
        approve(call_id, deny, read_only)
        self._answered.set()

    def pending(self) -> Any:
        pending = getattr(self._handle, "pending_approvals", None)
        return [] if pending is None else pending()

    async def stop(self) -> None:
        """Cancel the run if it is going, and wait (on the loop) until the worker has stopped."""
        if not self._ended.done():
            self.cancel()
            await asyncio.shield(self._ended)
        self._items.clear()

    async def _take(self) -> Tuple[int, Any]:
        while True:
            # deque.popleft is atomic; the lock only guards the wake-up flag (see _push and _wake).
            try:
                return self._items.popleft()
            except IndexError:
                pass
            waiter = self._loop.create_future()
            self._waiter = waiter
            try:
                await waiter
            except asyncio.CancelledError:
                await self.stop()
                raise
            finally:
                self._waiter = None

    def next_nowait(self) -> Any:
        """The next event if one is queued (the common case: no coroutine step per event), else ``_EMPTY``;
        ``_END`` once the outcome is in."""
        if self._outcome is not None:
            return _END
        try:
            kind, value = self._items.popleft()
        except IndexError:
            return _EMPTY
        if kind == 0:
            return value
        self._outcome = (kind == 1, value)
        return _END

    async def next(self) -> Tuple[bool, Any]:
        """(True, event), or (False, None) once the outcome is in (then ``outcome()`` has it)."""
        if self._outcome is not None:
            return False, None
        kind, value = await self._take()
        if kind == 0:
            return True, value
        self._outcome = (kind == 1, value)
        return False, None

    async def outcome(self) -> _T:
        """The outcome (events still queued are dropped), or the operation's exception."""
        while self._outcome is None:
            await self.next()
        ok, value = self._outcome
        if not ok:
            raise value
        result: _T = value
        return result

    def drop(self) -> None:
        # The stream object was dropped mid-run (an `async for` left by `break`, then garbage collection):
        # stop the run; the worker ends on its own (it holds this pump until then).
        if not self._ended.done():
            self.cancel()


class AsyncAgentStream:
    """The events of one async run, as they happen: ``async for event in agent.astream(...)``.

    The same event records, in the same order, as ``agent.stream()``; the last is a ``DoneEvent`` carrying the
    ``RunResult`` (also kept in ``.result``); a failed run raises its exception from the iteration. Leaving
    early: ``await stream.aclose()`` or ``async with agent.astream(...) as stream:`` cancels the run and waits
    (without blocking the loop) until it has stopped; the conversation stays valid. A cancelled task waiting
    on it raises ``asyncio.CancelledError`` with the run stopped the same way.
    """

    result: Optional[RunResult]

    def __init__(self, pump: _Pump[RunResult]) -> None:
        self._pump = pump
        self._finished = False
        self.result = None

    def __aiter__(self) -> AsyncIterator[Event]:
        return self

    async def __anext__(self) -> Event:
        if self._finished:
            raise StopAsyncIteration
        event = self._pump.next_nowait()
        if event is _EMPTY:
            more, event = await self._pump.next()
            if not more:
                event = _END
        if event is not _END:
            result: Event = event
            return result
        self._finished = True
        self.result = await self._pump.outcome()
        return DoneEvent(self.result)

    def cancel(self) -> None:
        """Ask the run to stop (non-blocking); iteration then ends with ``tooloop.Cancelled``."""
        self._pump.cancel()

    async def aclose(self) -> None:
        """Cancel the run if it is still going, and wait until it has stopped."""
        self._finished = True
        await self._pump.stop()

    async def approve(self, call_id: str, decision: Any = True) -> None:
        """Answer a call the run paused for (``astream(..., pause_for_approval=True)``), as
        ``AgentStream.approve``; the run goes on once every waiting call is answered."""
        deny, read_only = _approval.decision(decision)
        self._pump.approve(call_id, deny, read_only)

    def pending_approvals(self) -> List[ApprovalRequestEvent]:
        """The calls waiting for an answer now (empty when none does)."""
        return _approval.waiting(self._pump.pending())

    async def __aenter__(self) -> AsyncAgentStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __del__(self) -> None:
        pump = getattr(self, "_pump", None)
        if pump is not None:
            pump.drop()


class AsyncMessageStream:
    """An async streaming request (``client.astream(request)``): ``async for`` the raw events (dicts, the same
    as ``MessageStream``'s), then ``await final_message()``. ``aclose()`` or leaving ``async with`` early
    cancels the request."""

    def __init__(self, pump: _Pump[Dict[str, Any]]) -> None:
        self._pump = pump

    def __aiter__(self) -> AsyncIterator[Dict[str, Any]]:
        return self

    async def __anext__(self) -> Dict[str, Any]:
        event = self._pump.next_nowait()
        if event is _EMPTY:
            more, event = await self._pump.next()
            if not more:
                event = _END
        if event is not _END:
            result: Dict[str, Any] = event
            return result
        await self._pump.outcome()  # a failed stream raises here rather than stop quietly
        raise StopAsyncIteration

    async def final_message(self) -> Dict[str, Any]:
        """The complete message (reading the rest of the stream first), equal to ``create()``'s."""
        return await self._pump.outcome()

    async def get_final_text(self) -> str:
        """The text of the final message (as ``MessageStream.get_final_text``)."""
        message = await self.final_message()
        if message.get("object") == "chat.completion":
            choices = message.get("choices") or [{}]
            return str((choices[0].get("message") or {}).get("content") or "")
        return "".join(b.get("text", "") for b in message.get("content") or [] if b.get("type") == "text")

    def cancel(self) -> None:
        """Ask the request to stop (non-blocking)."""
        self._pump.cancel()

    async def aclose(self) -> None:
        """Cancel the request if it is still going, and wait until it has stopped."""
        await self._pump.stop()

    async def __aenter__(self) -> AsyncMessageStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __del__(self) -> None:
        pump = getattr(self, "_pump", None)
        if pump is not None:
            pump.drop()


def agent_stream(start: Callable[[], _Handle], finish: Callable[[Dict[str, Any]], RunResult],
                 bridge: _Bridge) -> AsyncAgentStream:
    return AsyncAgentStream(_Pump(start, finish, _event_from, bridge, "tooloop-astream"))


async def agent_run(start: Callable[[], _Handle], finish: Callable[[Dict[str, Any]], RunResult],
                    bridge: _Bridge) -> RunResult:
    return await _Pump(start, finish, None, bridge, "tooloop-arun").outcome()


def _same(d: Dict[str, Any]) -> Dict[str, Any]:
    return d


def message_stream(start: Callable[[], _Handle]) -> AsyncMessageStream:
    return AsyncMessageStream(_Pump(start, _same, _same, None, "tooloop-astream"))


async def create(start: Callable[[], _Handle]) -> Dict[str, Any]:
    return await _Pump(start, _same, None, None, "tooloop-acreate").outcome()
