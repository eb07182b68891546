"""Plan mode (``/plan``, ``--plan``) and ``/init``.

In plan mode the model only investigates: tools that change nothing (``read_file``, ``grep``, ``glob``, ...),
read-only bash commands (``ls``, ``git status``, ``grep``; the core's ``read_only_command`` decides), the
todo list and subagents (whose calls pass the same gate). Anything else is refused with a reason that tells
the model to put it in the plan instead. The guess only decides what is refused at once: every call plan mode
lets through is answered ``tooloop.ALLOW_READ_ONLY``, so bash runs under the kernel's read-only sandbox
(network off) whatever the command really does, and where the kernel cannot confine it, it is refused. An MCP
tool runs in its server, which no sandbox of ours holds: it is asked about every time (refused where no one
can be asked). The run ends with a plan in Markdown; the user approves it (the
normal mode goes on and carries it out), or types what to change (the model plans again), or says no.

Must never: let a call that writes run while planning.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Protocol

if TYPE_CHECKING:
    import tooloop

    from .permissions import CallLike, Decision, Observed
    from .render import Renderer

class Repl(Protocol):
    """What plan mode needs of the REPL (``repl.Repl``): its agent, policy and renderer, and a way to run a
    task. A protocol, so this module need not import the REPL that imports it."""

    agent: tooloop.Agent
    policy: Observed
    r: Renderer
    abort: threading.Event
    plan_mode: bool

    @property
    def workspace(self) -> Path: ...

    def run_task(self, text: Optional[str]) -> None: ...


PLAN_REASON = ("Plan mode: {name} calls that can change something are not allowed while planning. Do not "
               "retry; put this step in the plan instead.")

PLAN_PROMPT = """[Plan mode] Investigate before changing anything: read the relevant files and run only \
read-only commands. Do not edit or create files. When you understand the task, answer with a concrete plan \
in Markdown: a heading "## Plan", then numbered steps naming the files and commands involved, and any risks \
or open questions.

Task: {task}"""

APPROVED = ("The user approved the plan. Carry it out now, step by step, then say briefly what you did.")

INIT_PROMPT = """Look through this project (its layout, build and test commands, conventions, anything a new \
contributor must know) and write a concise starter AGENTS.md at the workspace root: the instructions an \
agent should follow here (how to build, test and lint; code style; where things live; what not to touch). \
{existing}Keep it short and specific to this project; no generic advice."""


class PlanPolicy:
    """The permission callable while planning: read-only calls go to the normal policy (so the settings'
    rules and the questions still apply), read-only bash runs, everything else is refused."""

    ALWAYS_OK = frozenset({"todo_write", "task"})

    def __init__(self, inner: Observed, agent: tooloop.Agent):
        self.inner = inner
        self.agent = agent
        self.mode = "plan"

    def __call__(self, call: CallLike) -> Decision:
        from tooloop.rules import read_only_command

        from .permissions import call_parts

        name, inp, _ = call_parts(call)
        if name == "bash":
            command = str(inp.get("command") or "")
            if not read_only_command(command):
                return PLAN_REASON.format(name="bash") + " (only read-only commands such as ls, cat, grep and " \
                    "git status/log/diff run while planning)"
            return self._rules_or_true(call, name, inp)
        info = self.agent.tool_info(name)
        if name.startswith("mcp__"):
            ask: Optional[Callable[..., Decision]] = getattr(getattr(self.inner, "policy", self.inner), "ask", None)
            if ask is None:
                return PLAN_REASON.format(name=name) + " (an MCP tool runs in its server, which cannot be held to " \
                    "read-only, and no one can be asked here)"
            return ask(call, force=True)
        if name in self.ALWAYS_OK:
            return self.inner(call)
        if info is not None and info.read_only:
            return self._confined(self.inner(call))
        return PLAN_REASON.format(name=name)

    @staticmethod
    def _confined(decision: Decision) -> Decision:
        """An allowing answer becomes "allowed only as read-only": the kernel keeps the promise, not the guess."""
        import tooloop

        return tooloop.ALLOW_READ_ONLY if decision is True else decision

    def _rules_or_true(self, call: CallLike, name: str, inp: Dict[str, Any]) -> Decision:
        # A read-only command needs no question, but the settings' deny rules still hold.
        note = getattr(self.inner, "note", None)
        rules_policy = getattr(self.inner, "policy", None)
        settings = getattr(rules_policy, "settings", None)
        workspace = getattr(rules_policy, "workspace", None)
        if settings is not None and workspace is not None:
            from tooloop.rules import match_rules

            d = match_rules({"deny": settings.deny}, name, inp, workspace)
            if d is not None:
                return f"The settings deny this call (rule {d[1]})."
        if note is not None:
            try:
                from .permissions import call_parts

                _, _, ident = call_parts(call)
                note(ident, name, inp)
            except Exception:
                pass
        return self._confined(True)


def _with_plan_policy(agent: tooloop.Agent, policy: Observed) -> PlanPolicy:
    gate = PlanPolicy(policy, agent)
    agent.set_permission(gate)
    return gate


def ask_approval(renderer: Renderer, abort: threading.Event) -> Optional[str]:
    """'y', 'n', or the text of a refinement; None when input is closed."""
    from .permissions import TerminalReader

    # A fresh event: the run that wrote the plan has set `abort` on its way out (to free its questions).
    # Only y and n answer at once: a change typed in ("add a test", "also ...") must never approve the plan.
    reader = TerminalReader(sys.stdin.fileno(), threading.Event(), echo=renderer.echo, keys="yn")
    reader.begin()
    renderer.question("Approve this plan and carry it out? [y = yes, n = no, or type what to change] ")
    try:
        answer = reader()
    except (Exception, KeyboardInterrupt):
        return None
    if answer is None:
        return None
    a = answer.strip()
    if a.lower() in ("y", "yes"):
        return "y"
    if a.lower() in ("", "n", "no"):
        return "n"
    return a


def plan_task(repl: Repl, text: str) -> None:
    """Plan `text` in the REPL, then ask; approve → carry it out in the normal mode."""
    request = PLAN_PROMPT.format(task=text)
    while True:
        _with_plan_policy(repl.agent, repl.policy)
        try:
            repl.run_task(request)
        finally:
            repl.agent.set_permission(repl.policy)
        answer = ask_approval(repl.r, repl.abort)
        if answer == "y":
            repl.plan_mode = False
            repl.r.info("plan approved: carrying it out (normal mode)")
            repl.run_task(APPROVED)
            return
        if answer is None or answer == "n":
            repl.r.info("plan not approved; still in plan mode (/plan off leaves it)")
            return
        request = f"[Plan mode] Revise the plan: {answer}\nAnswer with the whole revised plan under \"## Plan\"."


def plan_command(repl: Repl, arg: str) -> None:
    """/plan [task | off]."""
    if arg.lower() in ("off", "exit", "stop"):
        repl.plan_mode = False
        repl.r.info("plan mode off: the agent may change files again (as the permissions allow)")
        return
    repl.plan_mode = True
    if arg:
        plan_task(repl, arg)
        return
    repl.r.info("plan mode on: the agent investigates read-only and answers with a plan to approve; "
                "type the task (/plan off leaves)")


def plan_one_shot(agent: tooloop.Agent, task: str, renderer: Renderer, policy: Observed,
                  one_shot: Callable[[str], int], ask: bool) -> int:
    """`tooloop --plan "task"`: plan; when `ask` (a terminal), ask, then carry it out; otherwise print the
    plan. `one_shot(text)` runs one task and returns its exit code (0: done), as the CLI's one-shot mode."""
    EXIT_OK = 0
    _with_plan_policy(agent, policy)
    code = one_shot(PLAN_PROMPT.format(task=task))
    agent.set_permission(policy)
    if code != EXIT_OK or not ask:
        return code
    request: Optional[str] = None
    while True:
        answer = ask_approval(renderer, threading.Event())
        if answer == "y":
            return one_shot(APPROVED)
        if answer is None or answer == "n":
            renderer.info("plan not approved; nothing was changed")
            return EXIT_OK
        request = f"[Plan mode] Revise the plan: {answer}\nAnswer with the whole revised plan under \"## Plan\"."
        _with_plan_policy(agent, policy)
        code = one_shot(request)
        agent.set_permission(policy)
        if code != EXIT_OK:
            return code


def init_command(repl: Repl) -> None:
    """/init: ask the model to write a starter AGENTS.md for the project."""
    existing = (repl.workspace / "AGENTS.md").exists()
    note = ("An AGENTS.md exists already: read it and improve it rather than starting over. " if existing else "")
    repl.run_task(INIT_PROMPT.format(existing=note))
