"""``tooloop.batch``: many agents at once — a bounded pool of agents in this process (``engine="threads"``), or
the same on Ray (``engine="ray"``) when one machine is not enough.

Each task gets its own ``Agent`` built from ``options``, its own session file ``out/<id>.jsonl`` and, when it
names one, its own workspace. Outcomes are appended to ``out/results.jsonl`` as tasks finish. Running the same
batch again skips the tasks whose last outcome was ``"ok"`` and resumes the others from their sessions: the
core never runs a completed tool call twice, even after a SIGKILL mid-task. ``budget_usd`` bounds the spend of
the whole batch; ``requests_per_minute`` / ``tokens_per_minute`` are shared by every agent of the batch.

Must never: hold agent logic the core has (resume, pricing, the loop), import the CLI, or import ``ray`` unless
``engine="ray"`` is asked for.
"""

from __future__ import annotations

import os

from ._batch import RESULTS_FILE, STATUSES, BatchResult, load_results
from ._batch import Batch as _ThreadsBatch

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, Iterable, List, Optional

    from ._batch import _Progress

__all__ = ["BatchResult", "Batch", "run", "load_results", "STATUSES", "RESULTS_FILE"]


class Batch(_ThreadsBatch):
    """A batch of tasks (see ``run``); ``engine="ray"`` runs it on Ray."""

    def _run_elsewhere(self, pending: List[Dict[str, Any]], results: Dict[str, BatchResult],
                       prog: _Progress) -> None:
        from . import _batch_ray

        _batch_ray.run_on_ray(self, pending, results, prog)


def run(tasks: Iterable[Dict[str, Any]], options: Optional[Dict[str, Any]] = None, out: str | os.PathLike[str] = "runs/",
        concurrency: int = 8, engine: str = "threads", address: Optional[str] = None,
        budget_usd: Optional[float] = None, check: Optional[Callable[[Dict[str, Any], BatchResult], Any]] = None,
        progress: Any = True, *, requests_per_minute: Optional[float] = None,
        tokens_per_minute: Optional[float] = None, agents_per_worker: int = 8,
        session_db: Any = None) -> List[BatchResult]:
    """Run many agents at once: one ``Agent(**options)`` per task, at most ``concurrency`` at a time.

    ``tasks``: dicts ``{"id": str, "input": str | content blocks, "workspace": path (optional), "options":
    dict (optional, merged over options), "attempts": N (optional)}``; other keys are kept for ``check``. A task
    with ``attempts`` runs as ``tooloop.attempts.run`` in its workspace (N isolated copies; verified by
    ``options["check"]``, else by their own passing tests; the first verified one applied; the result's
    ``attempts`` records each; no session). ``options``: ``Agent`` keyword
    arguments; tools as functions or ``"module:function"`` strings (the form Ray workers can import).
    ``out``: each task's session ``out/<id>.jsonl``; ``out/results.jsonl`` gets one JSON line per outcome.
    Tasks whose last outcome was ``"ok"`` are skipped; the others resume from their sessions (a completed tool
    call is never run twice). ``engine="ray"`` runs on Ray (``pip install "tooloop[ray]"``): a local cluster
    started and stopped for the batch, or the one at ``address`` (``"auto"``, ``"ray://host:10001"``), each Ray
    task driving ``agents_per_worker`` agents on threads. ``budget_usd``: one spend ledger every agent of the batch
    counts in, kept by each agent's loop before every request (any model, a Python callable too; child agents
    and compaction summaries included): once what the batch spent, plus what its requests in flight hold, plus
    the next one's estimate would pass it, running tasks stop with ``"budget"`` and no new one starts (see the
    README's "How spend is counted").
    ``requests_per_minute`` / ``tokens_per_minute``: shared limits (threads engine). ``check(task, result)``:
    run after each finished task, its return value kept in ``result.check``. ``progress``: True (stderr), False,
    or a text stream. ``session_db``: keep every task's session in one SQLite database instead, as
    ``<db>#<id>`` (a path ending in .db, .sqlite or .sqlite3, or True for ``out/sessions.db``; the same as
    ``options["session"]`` set to such a path). Returns the results in task order.
    """
    return Batch(tasks, options, out=out, concurrency=concurrency, engine=engine, address=address,
                 budget_usd=budget_usd, check=check, progress=progress, requests_per_minute=requests_per_minute,
                 tokens_per_minute=tokens_per_minute, agents_per_worker=agents_per_worker,
                 session_db=session_db).run()
