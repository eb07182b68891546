"""The interactive session: prompt_toolkit for line editing and a persistent history, the runner for
each task, slash commands for the rest.

Ctrl+C while a task runs cancels it and comes back to the prompt; Ctrl+C at the prompt clears the line;
Ctrl+D (or /quit, /q) leaves.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Optional

from . import paths
from .render import Renderer, estimate_cost, status_line, usage_numbers, usage_report
from .runner import run_task

HELP = """\
Type a task and press Enter (Alt+Enter or Esc Enter for a new line). Commands:
  /help         this help
  /clear        start a new conversation (the session file keeps the old one)
  /usage        tokens and estimated cost of this session
  /quit, /q     leave (Ctrl+D works too)
Ctrl+C stops the running task and returns here."""


class Repl:
    def __init__(self, agent: Any, settings: Any, renderer: Renderer, policy: Any, session: Path,
                 abort: threading.Event, resumed: bool = False):
        self.agent = agent
        self.settings = settings
        self.r = renderer
        self.policy = policy
        self.session = session
        self.abort = abort
        self.resumed = resumed

    def _prompt_session(self) -> Any:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory, InMemoryHistory
        from prompt_toolkit.key_binding import KeyBindings

        history: Any
        try:
            hist_path = paths.history_file()
            hist_path.parent.mkdir(parents=True, exist_ok=True)
            history = FileHistory(str(hist_path))
        except OSError:
            history = InMemoryHistory()
        keys = KeyBindings()

        @keys.add("escape", "enter")
        def _newline(event: Any) -> None:  # Alt+Enter: a new line inside the same message
            event.current_buffer.insert_text("\n")

        return PromptSession(history=history, key_bindings=keys, multiline=False,
                             enable_history_search=False)

    def _message(self) -> Any:
        if self.r.color:
            from prompt_toolkit.formatted_text import FormattedText
            return FormattedText([("ansicyan bold", self.r.glyph["user"] + " ")])
        return self.r.glyph["user"] + " "

    def banner(self) -> None:
        s = self.settings
        self.r.info(f"tooloop · {s.model} ({s.provider}) · {s.workspace}")
        if self.resumed:
            n = len(getattr(self.agent, "messages", []) or [])
            self.r.info(f"resumed session {self.session.stem} ({n} messages)")
        self.r.info(f"permissions: {self.policy.mode} · session {self.session.stem} · "
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
        if paths.has_entries(self.session):
            self.r.info(f"session {self.session.stem} saved; continue with: tooloop --continue")
        return 0

    def task(self, text: str) -> None:
        outcome = run_task(self.agent, text, self.r, self.abort, self.settings)
        if outcome.status == "error":
            self.r.error(f"error: {outcome.message}")
            return
        if outcome.status == "cancelled":
            return
        total = estimate_cost(self.settings.model, usage_numbers(getattr(self.agent, "usage", None)))
        self.r.status(status_line(self.settings.model, outcome.turns, outcome.usage, total))
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
        elif name == "/usage":
            for ln in usage_report(self.settings.model, getattr(self.agent, "usage", None)):
                self.r.info(ln)
        else:
            self.r.notice(f"unknown command {name}; /help lists the commands")
        return None
