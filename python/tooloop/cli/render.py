"""What the user sees: streamed answers, dimmed thinking, one line per tool call with a short result
preview, a status line per task, permission questions.

Two faces: colored (rich styles, on a terminal) and plain (no escape codes at all: NO_COLOR, --no-color,
output that is not a terminal). rich is imported only for the colored face, so piped runs start fast.
Must never: raise while rendering (a display problem must not kill a run), or buffer streamed text.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Set, TextIO, Tuple

if TYPE_CHECKING:
    from tooloop import Event, Usage
    from tooloop.types import Todo

THINKING_LINES = 3      # thinking is shown dimmed, only its first lines
PREVIEW_LINES = 3       # lines of a tool result shown under the call
DETAIL_LINES = 20       # lines of a write or edit shown when asking permission

USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


def usage_numbers(usage: Optional[Usage]) -> Dict[str, int]:
    """The token counts of a ``tooloop.Usage`` (all zero for None)."""
    return {k: int(getattr(usage, k)) if usage is not None else 0 for k in USAGE_KEYS}


def format_cost(cost: Optional[float]) -> str:
    if cost is None:
        return "cost n/a"
    return f"${cost:.4f}" if cost < 1 else f"${cost:.2f}"


def status_line(model: str, turns: int, usage: Optional[Usage], total_cost: Optional[float] = None,
                ctx: Optional[str] = None) -> str:
    """``model · N turns · X in / Y out · Z cache read · $cost`` for one task (the cost is the library's
    estimate, ``usage.cost_usd``), then the session's cost when it differs and `ctx` (how full the context
    is, e.g. ``ctx 34%``, see context.ctx_label) when given."""
    u = usage_numbers(usage)
    parts = [model, f"{turns} turn{'s' if turns != 1 else ''}",
             f"{u['input_tokens']:,} in / {u['output_tokens']:,} out",
             f"{u['cache_read_input_tokens']:,} cache read",
             format_cost(usage.cost_usd if usage is not None else None)]
    if total_cost is not None and format_cost(total_cost) != parts[-1]:
        parts.append(f"session {format_cost(total_cost)}")
    if ctx:
        parts.append(ctx)
    return " · ".join(parts)


def usage_report(model: str, usage: Usage, cost: Optional[float], compactions: Optional[int] = None,
                 context: Optional[str] = None) -> List[str]:
    """The /usage lines: the conversation's tokens and its estimated cost (``Agent.cost_usd``); with
    `compactions`, how many times the conversation was compacted, with `context` how full it is now."""
    u = usage_numbers(usage)
    lines = [f"model          {model}",
             f"input tokens   {u['input_tokens']:,}",
             f"output tokens  {u['output_tokens']:,}",
             f"cache reads    {u['cache_read_input_tokens']:,}",
             f"cache writes   {u['cache_creation_input_tokens']:,}"]
    if context is not None:
        lines.append(f"context        {context}")
    if compactions is not None:
        lines.append(f"compactions    {compactions}")
    lines.append(f"estimated cost {format_cost(cost)}")
    return lines


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 1)] + "…"


def content_text(content: Any) -> str:
    """A tool result's content (a string or a list of blocks) as text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text":
                parts.append(str(block.get("text", "")))
            else:
                parts.append(f"[{kind or 'block'}]")
        return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False)


def summarize_call(name: str, inp: Dict[str, Any], width: int = 100, kind: Optional[str] = None,
                   path_field: Optional[str] = None) -> str:
    """One line: the tool and what it acts on, e.g. ``bash(python3 hello.py)``. A tool of the host's own is drawn
    by its `kind` (``Agent.tool_info(name).kind``): a ``"write"`` tool by the path in its `path_field`, like
    write_file; a ``"shell"`` one by its command, a ``"network"`` one by its URL."""
    def s(key: str) -> str:
        v = inp.get(key)
        return v if isinstance(v, str) else ("" if v is None else json.dumps(v, ensure_ascii=False))

    # The built-ins are drawn by name: what matters in a call is in their own arguments (write_file's line count,
    # read_file's range, edit_file's replace_all), which a tool of their kind need not have.
    if name == "bash" or (kind == "shell" and isinstance(inp.get("command"), str)):
        lines = s("command").strip().splitlines() or [""]
        arg = lines[0] + (" …" if len(lines) > 1 else "")
    elif name == "read_file":
        arg = s("path")
        if inp.get("offset") or inp.get("limit"):
            start = int(inp.get("offset") or 1)
            arg += f":{start}" + (f"-{start + int(inp['limit']) - 1}" if inp.get("limit") else "")
    elif name == "write_file":
        n = len(s("content").splitlines())
        arg = f"{s('path')}, {n} line{'s' if n != 1 else ''}"
    elif name == "edit_file":
        arg = s("path") + (", all" if inp.get("replace_all") else "")
    elif name == "task":
        arg = f"{s('agent_type')}: {s('description')}"
    elif name == "todo_write":
        n = len(inp.get("todos") or [])
        arg = f"{n} item{'s' if n != 1 else ''}"
    elif name == "skill":
        arg = s("name") or s("skill")
    elif name in ("grep", "glob"):
        arg = s("pattern") + (f" in {s('path')}" if inp.get("path") else "")
        arg += f", {s('glob')}" if inp.get("glob") else ""
    elif name == "web_fetch":
        arg = s("url")
    elif name in ("bash_output", "bash_kill"):
        arg = s("id")
    elif kind == "write" and path_field:
        arg = s(path_field)
    elif kind == "network" and isinstance(inp.get("url"), str):
        arg = s("url")
    else:
        arg = json.dumps(inp, ensure_ascii=False, separators=(",", ":"))
        if arg.startswith("{") and arg.endswith("}"):
            arg = arg[1:-1]
    return _clip(f"{name}({arg})", width)


def preview_lines(content: Any, max_lines: int = PREVIEW_LINES, width: int = 100) -> List[str]:
    """The first lines of a tool result, clipped, with a count of what was left out."""
    lines = [ln.rstrip().expandtabs(4) for ln in content_text(content).strip("\n").splitlines()]
    lines = [ln for ln in lines if ln.strip()]
    if lines and lines[0] == "exit code: 0":
        # The older bash result form led with the exit code even on success; the output is what matters.
        lines = lines[1:]
    lines = lines or ["(no output)"]
    shown = [_clip(ln, width) for ln in lines[:max_lines]]
    if len(lines) > max_lines:
        rest = len(lines) - max_lines
        shown.append(f"… +{rest} line{'s' if rest != 1 else ''}")
    return shown


def call_details(name: str, inp: Dict[str, Any], max_lines: int = DETAIL_LINES, kind: Optional[str] = None,
                 path_field: Optional[str] = None) -> List[Tuple[str, str]]:
    """What a permission question shows about a call: (style, line) pairs; style is '', '+', '-'. A host's tool
    of `kind` ``"write"`` says first which file it writes (its `path_field`), then its other arguments."""
    def clip_block(text: str, mark: str) -> List[Tuple[str, str]]:
        lines = text.splitlines() or [""]
        out = [(mark, f"    {mark} {ln}" if mark else f"    {ln}") for ln in lines[:max_lines]]
        if len(lines) > max_lines:
            out.append(("", f"    … +{len(lines) - max_lines} more lines"))
        return out

    if name == "bash":
        command = str(inp.get("command", ""))
        if "\n" not in command.strip() and len(command) < 80:
            return []  # the call's own line already shows all of it
        return clip_block(command, "$")
    if name == "write_file":
        return [("", f"  write {inp.get('path')}:")] + clip_block(str(inp.get("content", "")), "+")
    if name == "edit_file":
        head = [("", f"  edit {inp.get('path')}" + (" (every occurrence):" if inp.get("replace_all") else ":"))]
        return head + clip_block(str(inp.get("old_text", "")), "-") + clip_block(str(inp.get("new_text", "")), "+")
    if kind == "write" and path_field:
        rest = {k: v for k, v in inp.items() if k != path_field}
        head = [("", f"  write {inp.get(path_field)}" + (":" if rest else ""))]
        return head + [("", "    " + ln) for ln in
                       json.dumps(rest, indent=2, ensure_ascii=False).splitlines()[:max_lines] if rest]
    return [("", "    " + ln) for ln in json.dumps(inp, indent=2, ensure_ascii=False).splitlines()[:max_lines]]


def _last_block_end(text: str) -> int:
    """Where the last complete Markdown block of `text` ends: after a blank line outside a code fence, or
    after a fence's closing line. 0 when no block is complete yet."""
    pos, cut, fence = 0, 0, False
    for line in text.splitlines(keepends=True):
        pos += len(line)
        if not line.endswith("\n"):
            break
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            fence = not fence
            if not fence:
                cut = pos
        elif not fence and not stripped and pos > 1 and text[:pos].rstrip("\n"):
            cut = pos
    return cut


def _rows(text: str, columns: Optional[int]) -> Optional[int]:
    """Terminal rows `text` took when printed from the start of a row (the cursor's row included)."""
    if not columns:
        return None
    from rich.cells import cell_len

    rows = 0
    for line in text.split("\n"):
        width = cell_len(line.expandtabs(8))
        rows += max(1, -(-width // columns))
    return rows


_ASCII = str.maketrans({"…": "...", "·": "|", "─": "-", "⎿": "->", "●": "*", "✻": "~", "›": ">", "✔": "x",
                        "▸": ">", "○": "o"})


class Renderer:
    """Writes a run's events to `out` as they arrive."""

    def __init__(self, out: TextIO, color: bool, unicode: bool = True, width: int = 100,
                 show_thinking: bool = True):
        self.out = out
        self.color = color
        self.unicode = unicode
        self.width = width
        self.show_thinking = show_thinking
        self.glyph = {"tool": "●", "result": "⎿", "think": "✻", "rule": "─", "user": "›",
                      "wait": "▶", "sep": "·"} if unicode else \
            {"tool": "*", "result": "->", "think": "~", "rule": "-", "user": ">", "wait": ">>", "sep": "|"}
        self._console = None
        if color:
            from rich.console import Console  # the colored face only: keeps plain starts light
            self._console = Console(file=out, force_terminal=True, highlight=False, soft_wrap=True,
                                    emoji=False, markup=False)
        self._block: Optional[str] = None   # "text" | "thinking" | None
        self._at_line_start = True
        self._thinking_lines = 0
        self._thinking_cut = False
        self._denials: Dict[str, str] = {}   # call id -> the reason the policy gave
        self._shown: Set[str] = set()
        #: The agent type of each subagent call drawn (call id -> type): its question says whose it is.
        self._agent_of: Dict[str, str] = {}
        self._spin_since: Optional[float] = None   # waiting for the model since (monotonic), or None
        self._spin_shown = False
        self._spin_thread: Optional[threading.Thread] = None
        #: Answers are drawn as Markdown once each block is complete (colored face only).
        self.markdown = color
        self._md = ""   # the answer's text since the last rendered block
        # The spinner draws from its own thread; a host may draw events from more than one.
        self._lock = threading.RLock()
        #: What the agent knows of a tool (``Agent.tool_info``), set by `bind`: a host's tool is drawn by its kind.
        self.tool_info: Optional[Callable[[str], Any]] = None

    def bind(self, agent: Any) -> None:
        """Draw `agent`'s tools by what it says they are (their kind) from now on."""
        self.tool_info = agent.tool_info

    def _kind(self, name: str) -> Tuple[Optional[str], Optional[str]]:
        """(kind, path_field) of the tool `name`, (None, None) when unknown. Never raises."""
        try:
            info = self.tool_info(name) if self.tool_info is not None else None
        except Exception:
            info = None
        if info is None:
            return None, None
        return getattr(info, "kind", None), getattr(info, "path_field", None)

    def summarize(self, name: str, inp: Dict[str, Any], width: int) -> str:
        """`summarize_call` with the tool's kind."""
        kind, path_field = self._kind(name)
        return summarize_call(name, inp, width, kind=kind, path_field=path_field)

    # -- low level -------------------------------------------------------------------------------
    def _write(self, text: str, style: str = "") -> None:
        if not text:
            return
        if not self.unicode:
            # A terminal that can't show UTF-8: our own symbols become ASCII, anything else a "?".
            text = text.translate(_ASCII)
            enc = getattr(self.out, "encoding", None) or "ascii"
            text = text.encode(enc, "replace").decode(enc, "replace")
        with self._lock:
            if self._spin_shown:
                self._spin_erase()
            try:
                if self._console is not None and style:
                    self._console.print(text, style=style, end="")
                else:
                    self.out.write(text)
                self.out.flush()
            except (OSError, ValueError):
                pass
            self._at_line_start = text.endswith("\n")

    def _line(self, text: str, style: str = "") -> None:
        self._newline()
        self._write(text, style)
        self._write("\n")

    def _newline(self) -> None:
        if not self._at_line_start:
            self._write("\n")

    def _switch(self, block: Optional[str]) -> None:
        if self._block != block:
            if self._block == "text":
                self._markdown_flush(final=True)
            self._newline()
            self._block = block
            self._thinking_lines = 0
            self._thinking_cut = False

    # -- the spinner: while a request waits for its first token (terminal, colored face only) -------------
    def waiting(self) -> None:
        """A request went out: show elapsed time until something arrives."""
        if not self.color:
            return
        with self._lock:
            self._spin_since = time.monotonic()
            if self._spin_thread is None:
                self._spin_thread = threading.Thread(target=self._spin, name="tooloop-spinner", daemon=True)
                self._spin_thread.start()

    def arrived(self) -> None:
        with self._lock:
            self._spin_since = None
            if self._spin_shown:
                self._spin_erase()

    def _spin_erase(self) -> None:
        self._spin_shown = False
        try:
            self.out.write("\r\x1b[K")
            self.out.flush()
        except (OSError, ValueError):
            pass

    def _spin(self) -> None:
        frames = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏" if self.unicode else "|/-\\"
        i = 0
        while True:
            time.sleep(0.1)
            with self._lock:
                since = self._spin_since
                if since is None or not self._at_line_start or time.monotonic() - since < 0.3:
                    continue
                i += 1
                try:
                    self.out.write(f"\r\x1b[2m{frames[i % len(frames)]} waiting for the model · "
                                   f"{time.monotonic() - since:.1f}s\x1b[0m\x1b[K")
                    self.out.flush()
                except (OSError, ValueError):
                    continue
                self._spin_shown = True

    # -- events ----------------------------------------------------------------------------------
    def text(self, delta: str) -> None:
        with self._lock:
            self._switch("text")
            self._write(delta)
            if self.markdown:
                self._md += delta
                self._markdown_flush(final=False)

    # -- Markdown: the answer streams as plain text; each block, once complete, is drawn again rendered ---
    def _markdown_flush(self, final: bool) -> None:
        if not self._md:
            return
        cut = len(self._md) if final else _last_block_end(self._md)
        if cut <= 0:
            return
        block, rest = self._md[:cut], self._md[cut:]
        self._md = ""
        rows = _rows(block + rest, self._columns())
        height = self._lines()
        if rows is None or height is None or rows >= height or not block.strip():
            self._md = "" if final else rest   # scrolled out of reach (or unknown size): stays plain
            return
        try:
            from rich.markdown import Markdown

            assert self._console is not None
            # Back to the block's first row, clear to the end of the screen, draw it rendered.
            self.out.write("\r" + (f"\x1b[{rows - 1}A" if rows > 1 else "") + "\x1b[J")
            self._console.print(Markdown(block.strip("\n")), soft_wrap=False, end="\n")
            if block.endswith("\n\n"):
                self.out.write("\n")
            self._at_line_start = True
            self.out.flush()
        except Exception:
            return
        if rest and not final:
            self._md = rest
            self._write(rest)

    def _columns(self) -> Optional[int]:
        try:
            return os.get_terminal_size(self.out.fileno()).columns
        except (AttributeError, ValueError, OSError):
            return None

    def _lines(self) -> Optional[int]:
        try:
            return os.get_terminal_size(self.out.fileno()).lines
        except (AttributeError, ValueError, OSError):
            return None

    def thinking(self, delta: str) -> None:
        if not self.show_thinking:
            return
        if self._block != "thinking":
            self._switch("thinking")
            self._write(f"{self.glyph['think']} " if self.color else "thinking: ", "dim")
        if self._thinking_cut:
            return
        # Show the first lines only: thinking can be long, and the answer is what matters.
        for i, piece in enumerate(delta.split("\n")):
            if i > 0:
                self._thinking_lines += 1
                if self._thinking_lines >= THINKING_LINES:
                    self._write(" …\n", "dim")
                    self._thinking_cut = True
                    return
                self._write("\n  ", "dim")
            self._write(piece, "dim italic")

    def tool_use(self, name: str, inp: Dict[str, Any], call_id: str = "") -> None:
        with self._lock:
            self._switch(None)
            if call_id and call_id in self._shown:
                return  # already on screen, in the permission question
            self._shown.add(call_id)
            self._line(f"{self.glyph['tool']} {self.summarize(name, inp, self.width)}", "bold cyan")

    def asks_for(self, main: Renderer) -> None:
        """This renderer asks the questions of calls that `main` draws (stdout redirected: questions go
        to the terminal on stderr)."""
        self._agent_of = main._agent_of
        self.tool_info = lambda name: main.tool_info(name) if main.tool_info is not None else None

    def note_denial(self, call_id: str, reason: str) -> None:
        """The policy refused the call `call_id` with `reason` (shown instead of the core's wording)."""
        with self._lock:
            self._denials[call_id] = reason

    def tool_result(self, name: str, content: Any, is_error: bool, duration_ms: Optional[int] = None,
                    call_id: str = "", denied: bool = False) -> None:
        """A result under its call; `denied` (the event's flag): the permission policy refused it."""
        with self._lock:
            self._switch(None)
            if call_id and call_id not in self._shown:
                # No tool_use event came before (the core announces every call; a host's own stream may not).
                self._shown.add(call_id)
                self._line(f"{self.glyph['tool']} {name}", "bold cyan")
            if name == "todo_write" and not is_error and not denied:
                return   # the todo event that follows draws the list
            text = content_text(content)
            style_denied = denied
            if denied:
                text = "denied: " + self._denials.pop(call_id, text)
                is_error = False
            lines = preview_lines(text, width=self.width - 6)
            if duration_ms and duration_ms >= 1000:
                lines[0] += f"  ({duration_ms / 1000:.1f}s)"
            lead = f"  {self.glyph['result']} "
            pad = " " * len(lead)
            for i, ln in enumerate(lines):
                prefix = lead if i == 0 else pad
                if is_error:
                    self._line(prefix + ("error: " if i == 0 else "") + ln, "red")
                else:
                    self._line(prefix + ln, "yellow" if style_denied else "dim")

    def end_turn(self) -> None:
        self._switch(None)

    def status(self, line: str) -> None:
        self._switch(None)
        self._line(f"{self.glyph['rule']} {line}", "dim")

    def compaction(self, line: str) -> None:
        """One dim line when the conversation was compacted during a run (the library's event)."""
        self._switch(None)
        self._line(f"· {line}", "dim")

    def notice(self, line: str) -> None:
        self._switch(None)
        self._line(line, "yellow")

    def info(self, line: str) -> None:
        self._switch(None)
        self._line(line, "dim")

    def error(self, line: str) -> None:
        self._switch(None)
        self._line(line, "bold red")

    def question(self, text: str) -> None:
        """A y/n question (e.g. approving a project's MCP server); the answer's echo ends the line."""
        with self._lock:
            self._switch(None)
            self._write(text, "bold yellow")
            self._at_line_start = True

    def todos(self, items: List[Todo], title: Optional[str] = None) -> None:
        """The todo list: ✔ completed, ▸ in progress (its active form when given), ○ pending. Without a
        title it goes under the todo_write call, as that call's result."""
        marks = {"completed": "✔", "in_progress": "▸", "pending": "○"} if self.unicode else \
            {"completed": "[x]", "in_progress": "[>]", "pending": "[ ]"}
        styles = {"completed": "dim", "in_progress": "bold", "pending": ""}
        with self._lock:
            self._switch(None)
            done = sum(1 for i in items if i["status"] == "completed")
            if title is not None:
                self._line(f"{self.glyph['tool']} {title} ({done}/{len(items)} done)", "bold cyan")
            else:
                self._line(f"  {self.glyph['result']} todos ({done}/{len(items)} done)", "dim")
            if not items:
                self._line("  (empty)", "dim")
            for item in items:
                status: str = item["status"]
                text = item["content"]
                if status == "in_progress" and item.get("active_form"):
                    text = item.get("active_form") or text
                self._line(f"    {marks.get(status, marks['pending'])} {_clip(text, self.width - 8)}",
                           styles.get(status, ""))

    def subagent(self, parent_id: str, agent_type: str, event: Event) -> None:
        """A child agent's event, indented under its task call: its tool calls, a result preview, a final
        line. Its streamed text is not shown (only its final answer reaches the parent)."""
        pad = "    "
        with self._lock:
            if event.type == "tool_use":
                self._switch(None)
                inp = event.input if isinstance(event.input, dict) else {"input": event.input}
                self._line(f"{pad}{self.glyph['tool']} {self.summarize(event.name, inp, self.width - 8)}", "cyan")
                self._agent_of[str(event.id)] = agent_type
                self._shown.add(str(event.id))
            elif event.type == "tool_result":
                self._switch(None)
                first = preview_lines(content_text(event.content), max_lines=1, width=self.width - 12)[0]
                if event.denied:
                    first = "denied: " + self._denials.pop(str(event.id), first)
                self._line(f"{pad}  {self.glyph['result']} " + ("error: " if event.is_error else "") + first,
                           "red" if event.is_error else "dim")
            elif event.type == "done":
                self._switch(None)
                turns = event.result.turns or 0
                self._line(f"{pad}{self.glyph['result']} {agent_type} agent done "
                           f"({turns} turn{'s' if turns != 1 else ''})", "dim")

    def diff(self, lines: List[str]) -> None:
        """A unified diff, colored by line kind on a terminal."""
        with self._lock:
            self._switch(None)
            for ln in lines:
                style = ("bold" if ln.startswith(("+++", "---")) else "green" if ln.startswith("+")
                         else "red" if ln.startswith("-") else "cyan" if ln.startswith("@@") else "")
                self._line(ln, style)

    def permission_request(self, name: str, inp: Dict[str, Any], call_id: str = "") -> None:
        """The question before a call. Asked when the run pauses for it (runner.run_task), on the thread
        that drew the run's events: it comes after the text it follows, and the call's line, drawn from
        its tool_use event, is printed once."""
        self.arrived()
        with self._lock:
            self._switch(None)
            if not call_id or call_id not in self._shown:
                self._shown.add(call_id)
                self._line(f"{self.glyph['tool']} {self.summarize(name, inp, self.width)}", "bold yellow")
            styles = {"+": "green", "-": "red", "$": "bold", "": ""}
            kind, path_field = self._kind(name)
            for mark, ln in call_details(name, inp, kind=kind, path_field=path_field):
                self._line(ln, styles.get(mark, ""))
            self._write(f"  {self.glyph['wait']} waiting for you", "bold reverse yellow")
            # A subagent's call (its tool_use was drawn under its task): say whose question it is.
            whose = f" {self.glyph['sep']} the {self._agent_of[call_id]} agent asks:" if call_id in self._agent_of else ""
            self._write(f"{whose} allow {name}? [y]es / [n]o / [a]lways (or type a reason to refuse): ", "bold yellow")
            self._at_line_start = True  # the answer's echo ends the line

    def echo(self, text: str) -> None:
        """The user's keys while answering a question (the terminal's own echo is off then)."""
        with self._lock:
            try:
                self.out.write(text)
                self.out.flush()
            except (OSError, ValueError):
                pass
