"""Command-line arguments of `tooloop`. Standard library only (argparse)."""

from __future__ import annotations

import argparse
from typing import List, Optional

DESCRIPTION = """\
A coding agent in your terminal. `tooloop "task"` runs one task and exits; `tooloop` alone opens a
session where you type tasks. The agent reads and edits files in the workspace and runs commands there
with bash (asking you first on a terminal)."""

EPILOG = """\
keys and defaults (environment, or a .env file in the workspace; the environment wins; a base URL
from .env is used only with a key from the same .env, so a repository cannot redirect your key):
  ANTHROPIC_API_KEY, OPENAI_API_KEY   API keys
  ANTHROPIC_BASE_URL, OPENAI_BASE_URL  API endpoints (OpenAI-compatible URLs end in /v1)
  TOOLOOP_PROVIDER, TOOLOOP_MODEL      defaults for --provider and --model
  TOOLOOP_MAX_TURNS, TOOLOOP_THINKING  defaults for --max-turns and --thinking
  TOOLOOP_CONTEXT_WINDOW, TOOLOOP_COMPACTION_MODEL   defaults for --context-window, --compaction-model
  TOOLOOP_COMPACTION                   off: like --no-compaction (default: auto)
  AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE, AWS_REGION   for --provider bedrock
  TOOLOOP_HOME                         where sessions and history go (default
                                       $XDG_DATA_HOME/tooloop or ~/.local/share/tooloop)
  TOOLOOP_SESSION_DB                   default for --session-db (sessions in one SQLite database)
  NO_COLOR                             plain output

permissions:
  on a terminal, bash, write_file and edit_file ask first: press y (yes), n (no) or a (always), no
  Enter needed, or type a reason for refusing; read_file never asks.
  When stdin is not a terminal the agent is read-only unless --yes is given.
  Protected, whatever the mode: .tooloop/, .claude/, .mcp.json, .git/hooks/, .git/config and
  ~/.config/tooloop; bash sees them read-only, write_file and edit_file ask every time (no "always")
  and are refused with -p and --yes; --allow-config-edits lifts this.

exit codes: 0 done, 1 the task failed (API error, turn limit, ...), 2 usage or configuration error,
130 interrupted.

examples:
  tooloop "add a --verbose flag to cli.py and test it"
  git diff | tooloop -p "review this diff"
  tooloop --continue "now update the README"
  tooloop --list                      this workspace's sessions (then: tooloop --resume ID-PREFIX)
  tooloop sessions [--db PATH] [--all] [--since DATE]   sessions of either store: turns, tools, tokens, cost
  tooloop sessions migrate FILE.jsonl DB.db#ID        copy a session between the stores (and back)
  tooloop --provider openai --base-url http://localhost:11434/v1 --model qwen2.5-coder
  tooloop --output-format stream-json "fix the test"   JSON events, one per line, then the result
  tooloop -p --json-schema schema.json "list the TODOs" the answer as JSON valid against the schema
  tooloop --image shot.png "why does this look wrong?"  (or @shot.png inside the task)
  tooloop export SESSION-ID --format atif -o traj.json  a session as an ATIF trajectory file

project instructions: AGENTS.md (else CLAUDE.md) in the workspace and each parent up to the repository
root, and ~/.config/tooloop/AGENTS.md, go into the system prompt (--no-instructions: none); /init writes one.

settings: ~/.config/tooloop/settings.json (yours), <workspace>/.tooloop/settings.json and
.tooloop/settings.local.json (in the workspace: their allow rules and hooks apply once you approve them, with
the scripts those hooks run), in Claude Code's format:
{"permissions": {"allow": ["bash(npm test:*)"], "deny": ["bash(rm:*)"]}, "hooks": {"PreToolUse": [...]}}.

skills: folders with a SKILL.md in <workspace>/.tooloop/skills/ and ~/.config/tooloop/skills/.
MCP: servers in <workspace>/.mcp.json start after you approve them once (y/n at the session's start);
/mcp lists them, /mcp revoke NAME forgets an approval.

in the session: /plan, /init, /undo [N], /diff, /resume, /todos, /skills, /mcp, /sessions, /clear, /usage, /help, /quit"""


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def _thinking_budget(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a token budget such as 4096, got {text!r}") from None
    if n != 0 and n < 1024:
        raise argparse.ArgumentTypeError(f"the thinking budget must be 0 (off) or at least 1024, got {n}")
    return n


def _temperature(text: str) -> float:
    try:
        t = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number such as 0.2, got {text!r}") from None
    if not 0 <= t <= 2:
        raise argparse.ArgumentTypeError(f"must be between 0 and 2, got {t}")
    return t


def _budget(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an amount in US dollars such as 0.50, got {text!r}") from None
    if not x >= 0 or x != x or x == float("inf"):
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return x


def add_model_flags(p: argparse.ArgumentParser) -> None:
    """--model and --provider, the same for a task and for a batch."""
    p.add_argument("--model", help="model name (default: $TOOLOOP_MODEL, or claude-sonnet-4-6 for anthropic)")
    from tooloop import PROVIDERS   # the library's provider table

    p.add_argument("--provider", choices=[row["name"] for row in PROVIDERS], type=str.lower,
                   help="API protocol (default: $TOOLOOP_PROVIDER or anthropic); openai-responses: OpenAI's "
                   "Responses API (picked by itself for OpenAI's reasoning models); bedrock: Claude on Amazon "
                   "Bedrock with AWS credentials")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tooloop", description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("task", nargs="*", help="the task; without one, a session opens (or, when stdin is "
                   "piped, the task is read from stdin). `-` reads it from stdin")
    p.add_argument("-p", "--print", dest="print_mode", action="store_true",
                   help="print only the final answer, as plain text (for pipes and scripts)")
    add_model_flags(p)
    p.add_argument("--region", help="AWS region for --provider bedrock (default: $AWS_REGION or "
                   "$AWS_DEFAULT_REGION)")
    p.add_argument("--base-url", help="API endpoint, e.g. http://localhost:11434/v1 for a local "
                   "OpenAI-compatible server")
    p.add_argument("--max-turns", type=_positive_int, metavar="N",
                   help="most model requests per task (default: $TOOLOOP_MAX_TURNS or 50)")
    p.add_argument("--thinking", type=_thinking_budget, metavar="N",
                   help="extended thinking with a budget of N tokens (0: off)")
    p.add_argument("--context-window", type=_positive_int, metavar="TOKENS",
                   help="the model's context size, for the status bar, small-model settings and when to "
                   "compact (default: $TOOLOOP_CONTEXT_WINDOW, known models, or what a local server reports)")
    p.add_argument("--fallback-model", action="append", metavar="[PROVIDER:]MODEL",
                   help="a model to fall back to, for the rest of a task, when the model is overloaded, "
                   "rate-limited, down or refuses the context size (repeatable, tried in order; e.g. "
                   "claude-haiku-4-5 or openai:gpt-4.1; another provider's key and URL come from its variables)")
    p.add_argument("--compaction-model", metavar="NAME",
                   help="the model that writes the summary when the conversation is compacted (default: "
                   "$TOOLOOP_COMPACTION_MODEL, or the session's model)")
    p.add_argument("--no-compaction", action="store_true",
                   help="never compact the conversation by itself when it nears the context window "
                   "(/compact still works; also TOOLOOP_COMPACTION=off)")
    p.add_argument("--temperature", type=_temperature, metavar="T",
                   help="sampling temperature (default: the API's, or 0.2 for a custom --base-url)")
    p.add_argument("--prompt", choices=["full", "compact"], dest="prompt_style",
                   help="system prompt: full, or compact for small local models (default: compact when "
                   "the context window is under 16k tokens)")
    p.add_argument("--sandbox", choices=["workspace-write", "read-only", "off", "required"], type=str.lower,
                   help="confine bash with Landlock: workspace-write (default; writes only in the workspace "
                   "and $TMPDIR), read-only, off; required: workspace-write, or refuse to start where the "
                   "kernel cannot confine bash")
    p.add_argument("--no-network", action="store_true",
                   help="bash may not open network sockets of any kind (TCP, UDP, loopback included; a seccomp allow-list)")
    p.add_argument("--env-passthrough", metavar="NAME", action="append", default=[],
                   help="keep this secret-looking environment variable for bash (repeatable); by default "
                   "variables named like *KEY*, *SECRET*, *TOKEN*, *PASSWORD*, *CREDENTIAL* and AWS ones are dropped")
    p.add_argument("--mcp-config", metavar="FILE", action="append", default=[],
                   help="MCP servers to start, as JSON {\"mcpServers\": {...}} (trusted: no question asked); "
                   "the workspace's .mcp.json servers start only once you approve them")
    p.add_argument("--max-budget-usd", type=_budget, metavar="USD", dest="max_budget_usd",
                   help="stop before a request that would take this task's spend past USD (by the price "
                   "table; exit 1 with one line)")
    p.add_argument("--allow-config-edits", action="store_true",
                   help="let write_file and edit_file change the files that decide what the agent may run "
                   "(.tooloop/, .claude/, .mcp.json, .git/hooks/, .git/config, ~/.config/tooloop), asking "
                   "as for any other write; without it they ask every time, and are refused with -p and --yes")
    p.add_argument("--no-instructions", action="store_true",
                   help="do not load AGENTS.md / CLAUDE.md project instructions into the system prompt")
    p.add_argument("--plan", action="store_true",
                   help="plan mode: the model only investigates (read-only tools and read-only bash) and ends "
                   "with a plan you approve before anything changes")
    p.add_argument("--no-planning", action="store_true", help="no todo list tool (todo_write)")
    p.add_argument("--no-task-files", action="store_true",
                   help="with the compact prompt, send the task without the text of the files it names (by "
                   "default those that fit a quarter of the context window go with it)")
    p.add_argument("--no-draft", action="store_true",
                   help="with the compact prompt, give the model its tools from the first request (by default "
                   "the first request asks, without tools, for the changed files in full)")
    p.add_argument("--no-hints", action="store_true",
                   help="with the compact prompt, leave a failed command's Python error as it is (by default an "
                   "error whose cause the workspace's files name, such as a name the test does not import, gets a "
                   "one-line hint)")
    p.add_argument("--no-progress-guard", action="store_true",
                   help="let the model go on when its tool calls change nothing (by default turns that rewrite "
                   "identical files, repeat the same output or cycle get a note, and after 2 more the task stops)")
    p.add_argument("--check", metavar="CMD",
                   help="a check to finish against, e.g. --check 'python3 test_x.py': run in the sandbox when the "
                   "model answers, its failure goes back to the model, the task is done only when it passes "
                   "(exit 1 otherwise); the files it runs or names are read-only to the agent")
    p.add_argument("--attempts", type=_positive_int, metavar="N",
                   help="N independent attempts at the task, each in its own copy of the workspace at its own "
                   "temperature; the first one verified (--check passes, else its own tests passed) is applied "
                   "as one change (/undo after --continue takes it back), the others discarded; none verified: "
                   "exit 1. Needs --yes")
    p.add_argument("--concurrency", type=_positive_int, metavar="N", default=1,
                   help="with --attempts: how many attempts run at once (default: 1, one after another)")
    p.add_argument("--no-subagents", action="store_true", help="no task tool (explore and general subagents)")
    p.add_argument("--workspace", "-w", metavar="DIR",
                   help="the project folder the agent works in (default: the current folder)")
    p.add_argument("--session-db", metavar="PATH",
                   help="keep sessions in this SQLite database (PATH.db#ID each) instead of one JSONL file each "
                   "(also $TOOLOOP_SESSION_DB); --continue and --resume look there; list with `tooloop sessions`")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--continue", "-c", dest="continue_", action="store_true",
                   help="continue the latest session of this workspace")
    g.add_argument("--resume", "-r", metavar="ID",
                   help="continue session ID (a unique prefix is enough; or a session file)")
    g.add_argument("--list", "-l", dest="list_sessions", action="store_true",
                   help="list this workspace's sessions (id, start, turns, cost, task) and exit")
    perm = p.add_mutually_exclusive_group()
    perm.add_argument("--yes", "-y", action="store_true",
                      help="allow every tool call without asking")
    perm.add_argument("--read-only", action="store_true",
                      help="deny bash, write_file and edit_file (the model is told why)")
    p.add_argument("--output-format", choices=["text", "json", "stream-json"], default="text", type=str.lower,
                   help="text (default); json: one result object at the end (Claude Code's fields: type, "
                   "subtype, is_error, result, output, stop_reason, num_turns, usage, total_cost_usd, session_id, "
                   "duration_ms); stream-json: an init object, then one JSON event per line, then the result")
    p.add_argument("--json-schema", metavar="SCHEMA",
                   help="the answer must be JSON valid against this JSON Schema (inline JSON or a file); it is "
                   "the result's \"output\" (retried with the errors when invalid)")
    p.add_argument("--image", metavar="PATH", action="append", default=[],
                   help="send this picture (png, jpg, gif, webp) or PDF with the task (repeatable); "
                   "`@path/to/file.png` in the task does the same")
    p.add_argument("--no-color", action="store_true", help="plain output without colors")
    p.add_argument("--version", action="store_true", help="print the version and exit")
    return p


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    # Intermixed, so `tooloop fix the bug --yes` and `tooloop --yes fix the bug` both work.
    args = build_parser().parse_intermixed_args(argv)
    args.task = " ".join(args.task).strip() if args.task else None
    return args


def version() -> str:
    """The installed tooloop's version (``--version``, and the trajectories ``tooloop export`` writes)."""
    try:
        from importlib.metadata import version as _v
        return _v("tooloop")
    except Exception:
        return "unknown"
