"""The interactive session: prompt_toolkit for line editing and a persistent history, the runner for
each task, slash commands for the rest.

Ctrl+C while a task runs cancels it and comes back to the prompt; Ctrl+C at the prompt clears the line;
Ctrl+D (or /quit, /q) leaves.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from . import context, paths
from .checkpoints import Checkpoints, summary
from .render import Renderer, format_cost, status_line, usage_numbers, usage_report
from .runner import _sigint_sets, one_line, run_with_corrections
from .session_db import has_entries as session_has_entries, session_id

if TYPE_CHECKING:
    import tooloop
    from prompt_toolkit import PromptSession
    from prompt_toolkit.formatted_text import AnyFormattedText
    from prompt_toolkit.history import History
    from prompt_toolkit.key_binding import KeyPressEvent

    from .config import Settings
    from .features import McpSetup
    from .media import Prompt
    from .permissions import Observed
    from .settings import Hooks

HELP = """\
Type a task and press Enter (Alt+Enter or Esc Enter for a new line). Commands:
  /help         this help
  /clear        start a new conversation (the session file keeps the old one)
  /usage        tokens and estimated cost of this session
  /model [[PROVIDER:]NAME]
                show the model, or go on with another (e.g. /model claude-haiku-4-5, /model openai:gpt-4.1)
  /compact [instructions]
                summarize the older turns now to free context (instructions: what the summary keeps)
  /plan [task]  plan mode: investigate read-only, then a plan to approve (/plan off leaves it)
  /init         have the agent write a starter AGENTS.md for this project
  /undo [N]     put the files back as they were before your last (N-th last) message
  /diff         what the agent changed in files during this session
  /resume       go on from where the last task stopped (after an error or a cancel; /retry is its old name)
  /todos        the agent's current todo list
  /bashes       background commands (bash run_in_background): state and command
  /skills       the skills found (.tooloop/skills/, ~/.config/tooloop/skills/) and any problems
  /mcp          MCP servers: state and tools; /mcp revoke NAME forgets a .mcp.json approval
  /sessions     this workspace's sessions (continue one with tooloop --resume ID)
  /quit, /q     leave (Ctrl+D works too)
Ctrl+C stops the running task and returns here."""


_short = context.short


class Repl:
    def __init__(self, agent: tooloop.Agent, settings: Settings, renderer: Renderer, policy: Observed, session: Path,
                 abort: threading.Event, resumed: bool = False, checkpoints: Optional[Checkpoints] = None,
                 mcp: Optional[McpSetup] = None):
        self.mcp = mcp
        self.agent = agent
        self.settings = settings
        self.r = renderer
        self.policy = policy
        self.session = session
        self.abort = abort
        self.resumed = resumed
        self.can_resume = False   # the last task ended in an error or a cancel
        self.checkpoints = checkpoints or Checkpoints.for_session(session, settings.workspace)
        self.last_context = 0    # input tokens of the last model turn: how full the context is
        # Until a model turn says it (a resumed session, after /compact): the core's estimate, no request.
        self.context_estimate: Optional[int] = context.estimate_tokens(agent) if resumed else None
        self.undo_note = ""      # told to the model with the next message: the files changed under it

    @property
    def workspace(self) -> Path:
        """The folder the agent works in."""
        return self.settings.workspace

    def _prompt_session(self) -> PromptSession[str]:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory, InMemoryHistory
        from prompt_toolkit.key_binding import KeyBindings

        history: History
        try:
            hist_path = paths.history_file()
            hist_path.parent.mkdir(parents=True, exist_ok=True)
            history = FileHistory(str(hist_path))
        except OSError:
            history = InMemoryHistory()
        keys = KeyBindings()

        @keys.add("escape", "enter")
        def _newline(event: KeyPressEvent) -> None:  # Alt+Enter: a new line inside the same message
            event.current_buffer.insert_text("\n")

        from prompt_toolkit.styles import Style

        # Plain face: the bar keeps its text but no reverse video or colors.
        style = Style.from_dict({"bottom-toolbar": "noreverse" if not self.r.color else "reverse"})
        return PromptSession(history=history, key_bindings=keys, multiline=False,
                             enable_history_search=False, bottom_toolbar=self.toolbar, style=style)

    def toolbar(self) -> str:
        """The status bar under the prompt: model · provider · context used · tokens · cost · sandbox ·
        session. Recomputed whenever the prompt is drawn (so after each task)."""
        s = self.settings
        u = usage_numbers(self.agent.usage)
        ctx = context.ctx_label(self.context_tokens(), context.window_of(self.agent, s), with_window=True)
        # Before the first priced turn the conversation has no cost yet; its usage still says whether the
        # model has a price ($0 rather than "n/a").
        total = self.agent.cost_usd
        cost = format_cost(total if total is not None else self.agent.usage.cost_usd)
        parts = [s.model, s.provider, ctx, f"{_short(u['input_tokens'])} in / {_short(u['output_tokens'])} out",
                 f"{_short(u['cache_read_input_tokens'])} cached", cost, f"sandbox {self.sandbox_label()}",
                 session_id(self.session)]
        return " " + " · ".join(parts) + " "

    def context_tokens(self) -> Optional[int]:
        """How many tokens the conversation fills: the last model turn's input (what the API counted), or,
        when no turn has said it since the conversation last changed size, the core's estimate (cheap, no
        request). Cached: the bar is drawn on every key press."""
        if self.last_context:
            return self.last_context
        return self.context_estimate if self.context_estimate is not None else 0

    def ctx_label(self) -> str:
        return context.ctx_label(self.context_tokens(), context.window_of(self.agent, self.settings))

    def sandbox_label(self) -> str:
        mode = getattr(self.settings, "sandbox", None)
        if mode:
            return str(mode)
        return "default"   # not set: the library's default mode

    def sandbox_header(self) -> str:
        note = getattr(self.settings, "sandbox_note", "")
        return f"sandbox: {self.sandbox_label()}" + (f" ({note})" if note else "")

    def _message(self) -> AnyFormattedText:
        if self.r.color:
            from prompt_toolkit.formatted_text import FormattedText
            return FormattedText([("ansicyan bold", self.r.glyph["user"] + " ")])
        return self.r.glyph["user"] + " "

    def banner(self) -> None:
        s = self.settings
        self.r.info(f"tooloop · {s.model} ({s.provider}) · {s.workspace}")
        if self.resumed:
            n = len(getattr(self.agent, "messages", []) or [])
            self.r.info(f"resumed session {session_id(self.session)} ({n} messages)")
        self.r.info(f"permissions: {self.policy.mode} · {self.sandbox_header()} · session {session_id(self.session)} · "
                    f"/help for commands, Ctrl+D to quit")

    def run(self) -> int:
        prompt = self._prompt_session()
        self.banner()
        while True:
            try:
                line = prompt.prompt(self._message())
            except KeyboardInterrupt:
                continue  # clears the line, like a shell
            except EOFError:
                break
            text = line.strip()
            if not text:
                continue
            if text.startswith("/"):
                if self.command(text) == "quit":
                    break
                continue
            self.task(text)
        if session_has_entries(self.session):
            self.r.info(f"session {session_id(self.session)} saved; continue with: tooloop --continue")
        return 0

    hooks: Optional[Hooks] = None   # settings.Hooks: UserPromptSubmit runs on each message
    start_context = ""           # what SessionStart hooks said, sent with the first message
    plan_mode = False            # --plan / /plan: investigate read-only, then a plan to approve
    max_budget_usd: Optional[float] = None

    def task(self, text: Optional[str]) -> None:
        if text is not None and self.hooks is not None:
            sent, why = self.hooks.prompt(text)
            if sent is None:
                self.r.notice(f"blocked by a UserPromptSubmit hook: {why}")
                return
            text = sent
        if text is not None and self.start_context:
            text = f"<session-context>\n{self.start_context}\n</session-context>\n\n{text}"
            self.start_context = ""
        if text is not None and self.plan_mode:
            from .plan import plan_task
            plan_task(self, text)
            return
        self.run_task(text)

    def run_task(self, text: Optional[str]) -> None:
        if text is not None:
            self.checkpoints.begin_task(text)
            if self.undo_note:
                text = f"{self.undo_note}\n\n{text}"
                self.undo_note = ""
        run_input: Optional[Prompt] = text
        if text is not None:
            from .media import prompt_input
            run_input = prompt_input(text, self.settings.workspace)   # `@picture.png` mentions become images
        outcome = run_with_corrections(self.agent, run_input, self.r, self.abort, self.settings,
                                       self.checkpoints)
        if outcome.last_turn is not None:
            t = usage_numbers(outcome.last_turn)
            self.last_context = (t["input_tokens"] + t["cache_read_input_tokens"]
                                 + t["cache_creation_input_tokens"])
        elif outcome.compactions or outcome.status != "ok":
            self.refresh_context()
        for problem in self.checkpoints.errors:
            self.r.notice(f"warning: {problem} (/undo cannot restore it)")
        self.checkpoints.errors.clear()
        self.can_resume = outcome.status in ("error", "cancelled")
        if outcome.status == "error":
            self.r.error(f"error: {outcome.message}")
            self.r.info("/resume goes on from where it stopped")
            return
        if outcome.status == "cancelled":
            return
        if outcome.result is not None:
            from .evidence import verdict_lines
            for line in verdict_lines(outcome.result)[0]:
                self.r.notice(line)   # `check passed` / `check failed: …`, `unverified: …`
        if outcome.result is not None and outcome.result.stop_reason == "repetition":
            from .runner import repetition_line
            self.r.notice(repetition_line(outcome.repetition))
        if outcome.result is not None and outcome.result.stop_reason == "budget":
            from .runner import budget_line
            self.r.notice(budget_line(self.max_budget_usd))
        total = self.agent.cost_usd
        self.r.status(status_line(self.settings.model, outcome.turns, outcome.usage, total, self.ctx_label()))
        self.r.info("")  # a blank line between one task and the next prompt

    def command(self, text: str) -> Optional[str]:
        name = text.split()[0].lower()
        if name in ("/quit", "/q", "/exit"):
            return "quit"
        if name in ("/help", "/?"):
            for ln in HELP.splitlines():
                self.r.info(ln)
        elif name == "/clear":
            try:
                self.agent.reset()
            except Exception as e:  # a session file that can't be written: say so, keep going
                self.r.error(f"error: could not clear: {e}")
                return None
            self.r.info("conversation cleared")
            self.refresh_context()
        elif name == "/usage":
            window = context.window_of(self.agent, self.settings)
            used = self.context_tokens()
            ctx = (f"~{_short(used or 0)} of {_short(window)} tokens ({context.ctx_label(used, window)[4:]})"
                   if window else f"~{_short(used or 0)} tokens")
            for ln in usage_report(self.settings.model, self.agent.usage, self.agent.cost_usd,
                                   compactions=len(context.records(self.agent)), context=ctx):
                self.r.info(ln)
        elif name == "/compact":
            self.compact(text[len(text.split()[0]):].strip() or None)
        elif name == "/model":
            self.model_command(text[len(text.split()[0]):].strip())
        elif name == "/plan":
            from .plan import plan_command
            plan_command(self, text[len(text.split()[0]):].strip())
        elif name == "/init":
            from .plan import init_command
            init_command(self)
        elif name == "/undo":
            self.undo(text)
        elif name == "/diff":
            self.diff()
        elif name in ("/resume", "/retry"):
            # One word, one meaning: "resume" is the library's Agent.resume() (go on after a failure or a
            # cancel, no tool run twice), which this calls; "retry" is left to the HTTP retries.
            if name == "/retry":
                self.r.notice("/retry is deprecated: it is now called /resume")
            if not self.can_resume:
                self.r.notice("nothing to resume: the last task did not fail")
                return None
            self.task(None)
        elif name == "/todos":
            self.r.todos(list(getattr(self.agent, "todos", []) or []), title="todos")
        elif name == "/bashes":
            self.bashes()
        elif name == "/skills":
            self.skills()
        elif name == "/mcp":
            self.mcp_command(text)
        elif name == "/sessions":
            from .sessions import list_infos, table

            rows = table(list_infos(self.settings.workspace), width=self.r.width)
            if not rows:
                self.r.info("no saved sessions in this workspace yet")
            for row in rows:
                mark = "  (this one)" if row.startswith(session_id(self.session)) else ""
                self.r.info(row + mark)
        else:
            self.r.notice(f"unknown command {name}; /help lists the commands")
        return None

    def model_command(self, arg: str) -> None:
        """/model [[PROVIDER:]NAME]: the model in use, or switch to another for the next tasks (the
        conversation goes on; the library decides what of it the new provider is sent)."""
        import tooloop

        from .config import ConfigProblem, endpoint, model_ref

        if not arg:
            self.r.info(f"model {self.settings.model} ({self.settings.provider})")
            return
        try:
            provider, model = model_ref(arg)
            options = {} if provider in (None, self.settings.provider) else endpoint(provider, self.settings.workspace)
            self.agent.set_model(model, provider=provider, **options)
        except (ConfigProblem, tooloop.Error) as e:
            self.r.error(f"error: could not switch: {e}")
            return
        self.settings.model = model
        if provider is not None:
            self.settings.provider = provider
        self.r.info(f"model: {model} ({self.agent.provider}) from the next message on")

    def bashes(self) -> None:
        """/bashes: the background commands the agent started, one line each."""
        listed = list(getattr(self.agent, "background_commands", []) or [])
        if not listed:
            self.r.info("no background commands (the agent starts them with bash and run_in_background)")
            return
        for b in listed:
            state = b["status"] + (f" ({b['exit_code']})" if b.get("exit_code") is not None else "")
            line = f"{b['id']}  {state:<12} {' '.join(str(b['command']).split())}"
            self.r.info(line if len(line) <= self.r.width else line[: max(self.r.width - 1, 10)] + "…")

    def refresh_context(self) -> None:
        """The conversation changed size without a model turn (compacted, cleared, a failed run): the bar
        shows the core's estimate until the next turn reports real numbers."""
        self.last_context = 0
        self.context_estimate = context.estimate_tokens(self.agent)

    def compact(self, instructions: Optional[str]) -> None:
        """/compact [instructions]: compact the conversation now; one line says what it did."""
        import tooloop

        if not hasattr(self.agent, "compact"):
            self.r.notice("this tooloop library cannot compact; upgrade tooloop")
            return
        seen = len(context.records(self.agent))
        self.abort.clear()
        self.r.waiting()   # the summary is a model request: the spinner shows while it runs
        try:
            with _sigint_sets(self.abort):
                self.agent.compact(instructions)
        except (KeyboardInterrupt, tooloop.Cancelled):
            self.r.arrived()
            self.r.notice("cancelled")
            return
        except tooloop.Error as e:
            self.r.arrived()
            self.r.error(f"error: could not compact: {one_line(e, self.settings)}")
            return
        finally:
            self.abort.set()
            self.r.arrived()
        recs = context.records(self.agent)
        if len(recs) <= seen:
            self.r.info("nothing to compact: the conversation is too short")
            return
        rec = recs[-1]
        self.refresh_context()
        self.r.info(context.compacted_line(rec))
        reason = context.fallback_reason(rec)
        if reason:
            self.r.notice(f"the summary failed ({reason}); the older turns were dropped instead")

    def skills(self) -> None:
        found = getattr(self.agent, "skills", None) or {}
        skills, problems = found.get("skills", []), found.get("problems", [])
        if not skills:
            self.r.info("no skills (put <name>/SKILL.md in .tooloop/skills/ or ~/.config/tooloop/skills/)")
        for sk in skills:
            self.r.info(f"  {sk.get('name')}: {sk.get('description', '')}  ({sk.get('dir', '')})")
        for pr in problems:
            self.r.notice(f"  skipped {pr.get('path')}: {pr.get('reason')}")

    def mcp_command(self, text: str) -> None:
        words = text.split()
        if len(words) >= 2 and words[1] == "revoke":
            if len(words) != 3 or self.mcp is None:
                self.r.notice("usage: /mcp revoke NAME")
                return
            try:
                done = self.mcp.revoke(words[2])
            except OSError as e:
                self.r.error(f"error: could not save: {e}")
                return
            if done:
                self.r.info(f"approval of MCP server '{words[2]}' revoked; it will not start next time "
                            "without asking (it keeps running in this session)")
            else:
                self.r.notice(f"no approved MCP server '{words[2]}' in this workspace")
            return
        status = self.agent.mcp_status()
        running = {sv["name"]: sv for sv in status["servers"]}
        names = list(running)
        if self.mcp is not None:
            names += [n for n in list(self.mcp.trusted) + list(self.mcp.project) if n not in names]
        if not names:
            self.r.info("no MCP servers (add them to .mcp.json, or pass --mcp-config FILE)")
        for n in names:
            sv = running.get(n)
            where = self.mcp.source(n) if self.mcp is not None else ""
            if sv is None:
                self.r.info(f"  {n}: not started ({where})")
                continue
            tools = sv.get("tools") or []
            count = len(tools) if isinstance(tools, list) else tools
            line = f"  {n}: {sv.get('state')} · {count} tool{'s' if count != 1 else ''}" + (f" ({where})" if where else "")
            if sv.get("error"):
                line += f" · {sv.get('error')}"
            self.r.info(line)
            if isinstance(tools, list) and tools:
                self.r.info("    " + ", ".join(str(t.get("name") if isinstance(t, dict) else t) for t in tools))
        for f in status.get("failures", []):
            self.r.notice(f"  {f.get('server')}: failed: {f.get('reason')}")

    def undo(self, text: str) -> None:
        words = text.split()
        try:
            n = int(words[1]) if len(words) > 1 else 1
        except ValueError:
            self.r.notice("usage: /undo or /undo N (N: how many of your messages to go back)")
            return
        try:
            count, restored = self.checkpoints.undo(n)
        except ValueError as e:
            self.r.notice(f"nothing to undo: {e}")
            return
        except OSError as e:
            self.r.error(f"error: undo failed: {e}")
            return
        lines = summary(restored)
        which = "your last message" if count == 1 else f"your last {count} messages"
        if not lines:
            self.r.info(f"no file changes to undo since {which}")
        else:
            self.r.info(f"files put back as they were before {which}:")
            for ln in lines:
                self.r.info("  " + ln)
            self.undo_note += ("[Note from the user's tool: the user undid the file changes of their last "
                              f"{count} message{'s' if count != 1 else ''}: " + "; ".join(lines) +
                              ". The files no longer hold those changes.]")
        self.r.info("commands run with bash are not undone (their effects are not tracked); "
                    "the conversation keeps its messages")

    def diff(self) -> None:
        lines = self.checkpoints.diff()
        if not lines:
            self.r.info("no file changes by the agent in this session")
            return
        self.r.diff(lines)
