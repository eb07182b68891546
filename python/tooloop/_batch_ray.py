"""``tooloop.batch.run(..., engine="ray")``: the batch's tasks cut into chunks, each chunk one Ray task that drives
its agents on threads (the threads engine, in the worker), sessions written to ``out`` (a path every node
sees: a shared filesystem on a real cluster). The driver keeps at most ``concurrency`` agents running, writes
``results.jsonl`` as chunks finish and shows the progress.

A worker killed mid-chunk is retried by Ray (``max_retries``); the chunk's tasks then resume from their
sessions, so no completed tool call runs twice and a task that had already finished sends no request.

Must never: import ``ray`` at module import of ``tooloop.batch`` (only this module imports it, on demand), or
leave a local cluster it started running.
"""

from __future__ import annotations

import math

from .errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, Optional

    from ._batch import Batch, BatchResult, _Progress

#: How often Ray re-runs a chunk whose worker died (the chunk resumes from its sessions each time).
MAX_RETRIES = 3


def _chunk(tasks: List[Dict[str, Any]], options: Optional[Dict[str, Any]], out: str, threads: int,
           budget_usd: Optional[float], check: Optional[Callable[..., Any]],
           limits: Dict[str, Optional[float]], request_cost: float = 0.0,
           session_db: Optional[str] = None) -> List[Dict[str, Any]]:
    """Runs in a Ray worker: the chunk's tasks on threads; their outcomes as results.jsonl dicts.
    ``request_cost``: the most a request of the batch has cost so far (the chunk's budget starts from it).
    ``session_db``: the database holding every task's session (None: ``out/<id>.jsonl`` files)."""
    from ._batch import Batch

    if options is not None and session_db is not None:
        options = {k: v for k, v in options.items() if k != "session"}
    b = Batch(tasks, options, out=out, concurrency=threads, budget_usd=budget_usd, check=check, progress=False,
              requests_per_minute=limits.get("requests_per_minute"),
              tokens_per_minute=limits.get("tokens_per_minute"), session_db=session_db)
    b._ctl.ledger.note_request_cost(request_cost)
    b._record_results = False  # the driver writes results.jsonl (one writer, whatever the filesystem)
    b._skip_recorded = False
    return [r.to_dict() for r in b.run()]


def run_on_ray(batch: Batch, pending: List[Dict[str, Any]], results: Dict[str, BatchResult],
               prog: _Progress) -> None:
    try:
        import ray  # type: ignore[import-not-found, import-untyped, unused-ignore]
    except ImportError as e:
        raise ConfigError('engine="ray" needs the ray package: pip install "tooloop[ray]"') from e
    from ._batch import BatchResult

    started_here = False
    if not ray.is_initialized():
        if batch.address:
            ray.init(address=batch.address, log_to_driver=False)
        else:
            ray.init(include_dashboard=False, log_to_driver=False)
        started_here = True
    try:
        per = max(1, min(batch.agents_per_worker, batch.concurrency))
        chunks = [pending[i:i + per] for i in range(0, len(pending), per)]
        max_inflight = max(1, math.ceil(batch.concurrency / per))
        remote = ray.remote(max_retries=MAX_RETRIES, num_cpus=0)(_chunk)
        # Budget across processes: a chunk may spend its share of what is neither spent nor promised to the
        # chunks running (its own gate enforces it), so the chunks together never pass the budget; the driver
        # starts no chunk once the budget is spent. Rate limits: each of the `max_inflight` chunks running at
        # once gets its share of the minute.
        spent = 0.0
        request_cost = 0.0
        allotted: Dict[Any, float] = {}
        limits = {k: (v / max_inflight if v else None) for k, v in batch._limits.items()}
        inflight: Dict[Any, List[Dict[str, Any]]] = {}
        queue = list(chunks)
        cancel_sent = False
        try:
            while queue or inflight:
                stopping = batch._ctl.stopping()
                over = batch.budget_usd is not None and spent >= batch.budget_usd
                while queue and len(inflight) < max_inflight and stopping is None and not over:
                    tasks = queue.pop(0)
                    share = None
                    if batch.budget_usd is not None:
                        free = max(0.0, batch.budget_usd - spent - sum(allotted.values()))
                        if free <= 0.0 and inflight:  # all promised: wait for a running chunk to settle
                            queue.insert(0, tasks)
                            break
                        share = free / (max_inflight - len(inflight))
                    ref = remote.remote(tasks, batch._raw_options, batch.out, per, share, batch.check, limits,
                                        request_cost, batch.session_db)
                    inflight[ref] = tasks
                    if share is not None:
                        allotted[ref] = share
                if stopping == "cancelled" and not cancel_sent:
                    cancel_sent = True
                    for ref in inflight:
                        ray.cancel(ref, force=False)
                if not inflight:
                    status = "budget" if over else (stopping or "cancelled")
                    for tasks in queue:
                        for t in tasks:
                            r = BatchResult(t["id"], status)
                            results[t["id"]] = r
                            if status == "budget":
                                batch._record(r)
                    queue.clear()
                    break
                ready, _ = ray.wait(list(inflight), num_returns=1, timeout=0.1)
                if not ready:
                    prog.draw(sum(len(t) for t in inflight.values()))
                    continue
                ref = ready[0]
                tasks = inflight.pop(ref)
                allotted.pop(ref, None)
                try:
                    outcome = ray.get(ref)
                except ray.exceptions.TaskCancelledError:
                    outcome = [BatchResult(t["id"], "cancelled").to_dict() for t in tasks]
                except Exception as e:  # the chunk failed for good (retries spent): its tasks are errors
                    outcome = [BatchResult(t["id"], "error", error=f"ray: {type(e).__name__}: {e}").to_dict()
                               for t in tasks]
                for d in outcome:
                    r = BatchResult.from_dict(d)
                    results[r.id] = r
                    batch._record(r)
                    spent += r.cost_usd or 0.0
                    if r.cost_usd and r.turns:
                        request_cost = max(request_cost, r.cost_usd / r.turns)
                    prog.task(r, sum(len(t) for t in inflight.values()))
        except BaseException:
            # Ctrl+C or cancel: interrupt every running chunk (its agents are cancelled in the worker and its
            # sessions stay valid), then let the exception propagate.
            for ref in inflight:
                ray.cancel(ref, force=False)
            for ref, tasks in inflight.items():
                try:
                    for d in ray.get(ref, timeout=5):
                        r = BatchResult.from_dict(d)
                        results[r.id] = r
                        batch._record(r)
                except Exception:
                    pass
            raise
    finally:
        if started_here:
            ray.shutdown()
