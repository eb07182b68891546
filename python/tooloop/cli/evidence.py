"""The command's reading of a task and of a run's evidence: whether the task asks for changes (the library's
``expect_changes``), whether it asks to run something before it asks for a change (then the command sends
no draft), and the lines that say what the check and the record showed.

Must never: judge by anything but the task's words and the result's fields (no I/O).
"""

from __future__ import annotations

import re
from typing import Any, List, Optional, Tuple

# A task is a change request when one of these verbs begins a clause of its first sentences (after "please",
# "can you", "then" ...) and it is not a question: "fix the failing test", "please add a --verbose flag",
# "rename foo to bar". "why does the test fail?", "explain main.py", "what does x print" are not.
CHANGE_VERBS = frozenset("""fix add create write implement rename refactor change update remove delete edit replace
move convert make modify patch rewrite port migrate bump set""".split())
LEAD_IN = frozenset("please can could would you kindly i we need want to just go ahead and then also finally "
                    "next".split())


RUN_VERBS = frozenset(["run", "execute"])


def _clause_heads(task: str) -> List[str]:
    """The first word past the lead-ins of each clause (split at commas, semicolons, "and", "then") of the
    first three sentences of the task's first paragraph that are not questions, in order; none when the first
    sentence is a question."""
    paragraph = re.split(r"\n\s*\n", task.strip(), maxsplit=1)[0]
    sentences = [s for s in re.split(r"(?<=[.!?])\s+|\n", paragraph) if s.strip()][:3]
    if not sentences or sentences[0].rstrip().endswith("?"):
        return []
    heads = []
    for sentence in sentences:
        if sentence.rstrip().endswith("?"):
            continue
        for clause in re.split(r"[,;]\s*|\s+(?:and|then)\s+", sentence.lower()):
            head = next((w for w in re.findall(r"[a-z']+", clause)[:8] if w not in LEAD_IN), None)
            if head is not None:
                heads.append(head)
    return heads


def asks_for_changes(task: str) -> bool:
    """Whether the task text reads as a request to change files (see CHANGE_VERBS): in one of the first
    three sentences of its first paragraph that is not a question, a clause (split at commas, semicolons,
    "and", "then") whose first word that is not a lead-in ("please", "can you") is a change verb. "fix the
    bug in calc.py", and "`python3 report.py` crashes. Run it, read the traceback and fix the cause" (the
    bench's traceback task: its first sentence names no change, and a run that changed nothing answered "I
    made the change" unchallenged); not "why does the test fail?" or "show me how to add a flag"."""
    return any(head in CHANGE_VERBS for head in _clause_heads(task))


def asks_to_run_first(task: str) -> bool:
    """Whether the task asks to run something before it asks for a change, as clauses read by
    asks_for_changes: "`python3 report.py` crashes. Run it, read the traceback and fix the cause" does;
    "create hello.py and run it", "rename f, then run main.py to check" and "why does x fail?" do not.
    Such a task's answer depends on what the run prints, which a draft written before anything ran can
    only guess."""
    for head in _clause_heads(task):
        if head in CHANGE_VERBS:
            return False
        if head in RUN_VERBS:
            return True
    return False


def check_line(check: Optional[Any]) -> Optional[str]:
    """``check passed`` or ``check failed: …`` (None without a check)."""
    if not check:
        return None
    if check.get("passed"):
        return "check passed"
    command, code = check.get("command", ""), check.get("exit_code")
    if not check.get("runs"):
        return "check failed: it did not run"
    if code is None:
        tail = [ln for ln in str(check.get("output_tail") or "").splitlines() if ln.strip()]
        return f"check failed: `{command}` did not finish: {tail[-1] if tail else 'no output'}"
    return f"check failed: `{command}` exited {code}"


def verdict_lines(result: Optional[Any]) -> Tuple[List[str], bool]:
    """The lines to say after a run (the check's, an unverified answer's), and whether the run is unproven:
    its check failed or its answer claims what its record does not show."""
    if result is None:
        return [], False
    lines: List[str] = []
    check = getattr(result, "check", None)
    line = check_line(check)
    if line:
        lines.append(line)
    unverified = getattr(result, "unverified", None)
    if unverified:
        lines.append(f"unverified: {unverified}")
    return lines, bool(unverified) or bool(check and not check.get("passed"))


def guard_stop_failed(result: Optional[Any]) -> bool:
    """Whether a run a repetition guard ended counts as failed: yes, unless the user's check passed after it
    (the library runs the check at a guard's stop when something changed; the check is the verdict, as at the
    turn cap). Without a check nothing vouches for the work done before the loop."""
    check = getattr(result, "check", None) if result is not None else None
    return not (check and check.get("passed"))
