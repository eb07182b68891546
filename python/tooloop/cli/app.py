"""`tooloop`: the coding agent in the terminal. Wires flags, settings, the permission policy, the session
file and the renderer to a ``tooloop.Agent``; runs one task or the REPL.

Exit codes: 0 done, 1 the task failed, 2 usage or configuration error, 130 interrupted. Every failure is
one line on stderr, never a traceback (an unexpected bug still shows its traceback: that is a bug report).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, TextIO, Union

from . import paths
from .args import parse_args, version
from .config import (ConfigProblem, Settings, compaction_settings, env_context_window, fallback_option,
                     fallback_settings, resolve)
from .permissions import AskPolicy, AutoPolicy, Observed, Protected, ReadOnlyPolicy, TerminalReader, choose
from .prompt import system_prompt
from .render import Renderer, status_line
from .settings import RulesPolicy
from .runner import Outcome, run_with_corrections

if TYPE_CHECKING:
    import tooloop

    from .checkpoints import Checkpoints
    from .media import Prompt
    from .settings import LoadedSettings

from .runner import REPETITION_LINE, budget_line, repetition_line  # noqa: F401 (REPETITION_LINE: re-exported)

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def _say(message: str) -> None:
    print(f"tooloop: {message}", file=sys.stderr, flush=True)


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def use_color(args: argparse.Namespace, environ: Mapping[str, str] = os.environ, stream: Optional[TextIO] = None) -> bool:
    """Colors only on a terminal, and never with NO_COLOR (any value), --no-color, --print or TERM=dumb."""
    stream = sys.stdout if stream is None else stream
    if args.no_color or args.print_mode or "NO_COLOR" in environ or environ.get("TERM") == "dumb":
        return False
    return _isatty(stream)


def _unicode_ok(stream: TextIO) -> bool:
    enc = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
    return enc.startswith("utf")


def make_policy(args: argparse.Namespace, stdin_tty: bool, renderer: Renderer, abort: threading.Event,
                loaded: Optional[LoadedSettings] = None, workspace: Optional[Path] = None) -> Observed:
    mode = choose("auto" if args.yes else "read-only" if args.read_only else None, stdin_tty)
    if mode == "auto":
        policy: Union[AutoPolicy, ReadOnlyPolicy, AskPolicy, RulesPolicy] = AutoPolicy()
    elif mode == "read-only":
        policy = ReadOnlyPolicy()
    else:
        asker = renderer
        if not _isatty(renderer.out) and _isatty(sys.stderr):
            # `tooloop "task" > log`: the questions must reach the person at the terminal, not the log.
            asker = Renderer(sys.stderr, color=use_color(args, stream=sys.stderr), unicode=_unicode_ok(sys.stderr))
            asker.asks_for(renderer)
        policy = AskPolicy(asker.permission_request, TerminalReader(sys.stdin.fileno(), abort, echo=asker.echo))
        if workspace is not None:
            policy.offer_rule = lambda rule: offer_rule(rule, workspace, asker, abort)
    if loaded is not None and workspace is not None and loaded.has_rules():
        policy = RulesPolicy(policy, loaded, workspace)
    # Protected paths (permissions.Protected): asked every time on a terminal, refused with -p and --yes.
    guard = Protected(workspace) if workspace is not None and not args.allow_config_edits else None
    return Observed(policy, denied=renderer.note_denial, protected=guard,
                    can_ask=not args.print_mode)


def offer_rule(rule: str, workspace: Path, renderer: Renderer, abort: threading.Event) -> None:
    """After an "always" for a bash command: offer to keep its prefix rule in .tooloop/settings.local.json."""
    from .settings import local_settings_file, save_local_rule

    answer = ask_key(f"Allowed {rule} for this session. Save it to {local_settings_file(workspace)} "
                     "for next time? [y/n] ", renderer, abort)
    if answer:
        try:
            path = save_local_rule(workspace, rule)
            renderer.info(f"saved {rule} to {path}")
        except (OSError, ConfigProblem) as e:
            renderer.notice(f"could not save the rule: {e}")


def session_path(args: argparse.Namespace, workspace: Path) -> Path:
    from .session_db import configured_db, session_spec
    db = configured_db(args)
    if db is not None:  # --session-db / TOOLOOP_SESSION_DB: sessions are ids in one SQLite database
        return session_spec(args, db, workspace)
    if args.continue_:
        latest = paths.latest_session(workspace)
        if latest is None:
            raise ConfigProblem(f"no earlier session to continue in {workspace} "
                                f"(sessions are kept in {paths.sessions_dir(workspace)})")
        return latest
    if args.resume:
        try:
            return paths.find_session(args.resume, workspace)
        except paths.SessionNotFound as e:
            raise ConfigProblem(str(e)) from None
    return paths.new_session_path(workspace)


def local_settings(settings: Settings, args: argparse.Namespace) -> None:
    """Context window, temperature, max_tokens and prompt style; may ask a local server its context size."""
    from . import local

    window = args.context_window or env_context_window(settings)
    custom = local.is_custom_endpoint(settings.base_url)
    if (window is None and custom and settings.provider in ("openai", "openai-responses", "anthropic")
            and settings.base_url
            and not local.hosted_model(settings.model)):
        # A local server's own figure wins over the table: the same model name runs with whatever context
        # the server was started with (llama.cpp -c 4096 for a model the table lists at 32k).
        window = local.probe_context(settings.base_url, settings.api_key)
    if window is None:
        window = local.known_window(settings.model)
    settings.context_window = window
    if args.temperature is not None:
        settings.temperature = args.temperature
    elif custom and settings.thinking is None:   # thinking requires the API's default temperature
        settings.temperature = local.DEFAULT_LOCAL_TEMPERATURE
    if settings.thinking is None:
        settings.max_tokens = local.fit_max_tokens(settings.max_tokens, window)
    settings.prompt_style = args.prompt_style or (
        "compact" if window is not None and window < local.COMPACT_BELOW else "full")


def build_agent(settings: Settings, policy: Observed, session: Path,
                extra_options: Optional[Dict[str, Any]] = None) -> tooloop.Agent:
    import tooloop

    agent = tooloop.Agent(**agent_kwargs(settings, policy, session, extra_options))
    bind = getattr(policy, "bind", None)
    if bind is not None:
        bind(agent)  # the policy asks the agent which tools are read-only
    return agent


def agent_kwargs(settings: Settings, policy: Observed, session: Path,
                 extra_options: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The ``tooloop.Agent`` keyword arguments of this start (build_agent; each of --attempts' agents)."""
    from .local import extra_body
    from .prompt import compact_system_prompt

    system = (compact_system_prompt(settings.workspace, policy.mode) if settings.prompt_style == "compact"
              else system_prompt(settings.workspace, policy.mode))
    kwargs: Dict[str, Any] = dict(
        model=settings.model, system=system, provider=settings.provider, api_key=settings.api_key,
        base_url=settings.base_url, max_tokens=settings.max_tokens, max_turns=settings.max_turns,
        thinking=settings.thinking, builtin_tools=True, workspace=str(settings.workspace),
        session=str(session), permission=policy)
    extra = extra_body(settings.temperature)
    if extra:
        kwargs["extra"] = extra
    if settings.sandbox is not None:
        kwargs["sandbox"] = settings.sandbox
    if settings.region is not None:
        kwargs["region"] = settings.region
    if settings.env_passthrough:
        kwargs["env_passthrough"] = list(settings.env_passthrough)
    if not settings.network:
        kwargs["network"] = False
    # The window the status bar shows is the one compaction works with (flag, table, local server).
    if settings.context_window is not None:
        kwargs["context_window"] = settings.context_window
    if not settings.compaction:
        kwargs["compaction"] = "off"
    if settings.compaction_model:
        kwargs["compaction_model"] = settings.compaction_model
    if settings.fallback_models:
        kwargs["fallback_models"] = fallback_option(settings)
    kwargs.update(extra_options or {})
    return kwargs


def _piped(stream: TextIO) -> bool:
    """Whether stdin is a pipe or a file (not a terminal, /dev/null or a socket): only then does a
    task given as an argument also read it."""
    try:
        mode = os.fstat(stream.fileno()).st_mode
    except (AttributeError, ValueError, OSError):
        return False
    return stat.S_ISFIFO(mode) or (stat.S_ISREG(mode) and os.fstat(stream.fileno()).st_size > 0)


def read_stdin_task() -> Optional[str]:
    try:
        data = sys.stdin.read()
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return data.strip() or None


def main(argv: Optional[List[str]] = None) -> int:
    raw = sys.argv[1:] if argv is None else list(argv)
    if raw[:1] == ["sessions"]:  # `tooloop sessions [migrate]`: list or migrate sessions of either store
        from .session_db import main as sessions_main
        return sessions_main(raw[1:])
    if raw[:1] == ["batch"]:  # `tooloop batch TASKS.jsonl ...`: many tasks at once (cli/batch.py)
        from .batch import main as batch_main
        return batch_main(raw[1:])
    if raw[:1] == ["export"]:   # `tooloop export SESSION --format atif`: a trajectory file
        from .export import main as export_main
        return export_main(raw[1:])
    args = parse_args(argv)
    json_mode = args.output_format != "text"

    def problem(message: str) -> int:
        """A usage or configuration problem: one line on stderr (and, in the JSON modes, a result object)."""
        _say(message)
        if json_mode:
            from .jsonout import error_result
            print(json.dumps(error_result(message)), flush=True)
        return EXIT_USAGE

    if args.version:
        print(f"tooloop {version()}")
        return EXIT_OK
    stdin_tty = _isatty(sys.stdin)
    if args.list_sessions:
        return list_sessions(args)

    task = args.task
    if task is None and stdin_tty and json_mode:
        return problem(f"--output-format {args.output_format} needs a task: tooloop --output-format "
                       f"{args.output_format} \"explain main.py\" (or pipe it on stdin)")
    if task is None and stdin_tty and args.print_mode:
        _say("--print needs a task: tooloop -p \"explain main.py\" (or pipe it on stdin)")
        return EXIT_USAGE
    if task == "-" or (task is None and not stdin_tty):
        task = read_stdin_task()
        if task is None:
            return problem("no task: give one as an argument (tooloop \"fix the failing test\") or on stdin; "
                           "the interactive session needs a terminal")
    elif task is not None and _piped(sys.stdin):
        # `git diff | tooloop -p "review this"`: what was piped in comes with the task.
        piped = read_stdin_task()
        if piped:
            task = f"{task}\n\n{piped}"

    from .attempts import usage_problem
    why = usage_problem(args, task)
    if why is not None:
        return problem(why)
    try:
        settings = resolve(args)
    except ConfigProblem as e:
        return problem(str(e))

    color = use_color(args)
    # In the JSON modes stdout holds only JSON: anything for a person (questions) goes to stderr.
    out = sys.stderr if json_mode else sys.stdout
    renderer = Renderer(out, color=color and not json_mode, unicode=_unicode_ok(out))
    abort = threading.Event()
    if settings.wire_note:
        renderer.info(settings.wire_note)
    from . import settings as settings_files
    try:
        loaded = settings_files.load(settings.workspace)
    except ConfigProblem as e:
        return problem(str(e))
    for why in loaded.problems:
        _say(why)
    interactive = task is None and stdin_tty
    if loaded.waiting:
        if interactive:
            try:
                settings_files.approve_pending(loaded, settings.workspace, lambda q: ask_key(q, renderer, abort))
            except KeyboardInterrupt:
                renderer.echo("\n")
                return EXIT_INTERRUPTED
        for waiting in loaded.waiting:
            why = "declined" if interactive else "not approved yet: run `tooloop` in this workspace to approve them"
            _say(f"the allow rules and hooks of {waiting.path} are not used ({why})")
    policy = make_policy(args, stdin_tty, renderer, abort, loaded, settings.workspace)
    try:
        session = session_path(args, settings.workspace)
    except ConfigProblem as e:
        return problem(str(e))
    from .session_db import checkpoint_anchor, exists as session_exists
    resumed = session_exists(session)
    from .checkpoints import Checkpoints
    # Filled from the run's file_change events (see runner.run_task), not from the permission callable.
    checkpoints = Checkpoints.for_session(checkpoint_anchor(session), settings.workspace)

    try:
        import tooloop
    except ImportError as e:
        _say(f"the tooloop module cannot be loaded ({e}); reinstall with `pip install tooloop`")
        return EXIT_FAILED
    try:
        local_settings(settings, args)
        compaction_settings(settings, args)
        fallback_settings(settings, args)
        fallback_option(settings)   # a fallback on another provider without a key: said now, not mid-run
    except ConfigProblem as e:
        return problem(str(e))
    settings.env_passthrough = list(args.env_passthrough)
    settings.network = not args.no_network
    from . import features
    try:
        settings.sandbox, settings.sandbox_note = features.sandbox_mode(args.sandbox, args.read_only)
    except ConfigProblem as e:
        return problem(str(e))
    try:
        mcp = features.McpSetup(settings.workspace, args.mcp_config)
    except ConfigProblem as e:
        return problem(str(e))
    if mcp.project_problem:
        _say(f"{mcp.project_problem} (its servers are not started)")
    if interactive and mcp.pending():
        try:
            mcp.ask(lambda q: ask_key(q, renderer, abort))
        except KeyboardInterrupt:   # Ctrl+C at the approval question leaves, like Ctrl+C at a question
            renderer.echo("\n")
            return EXIT_INTERRUPTED
    servers = mcp.servers()
    for name in mcp.skipped:
        why = "declined" if interactive else "not approved yet: run `tooloop` in this workspace to approve it"
        _say(f"MCP server '{name}' from .mcp.json skipped ({why})")
    from .permissions import protection_options
    options: Dict[str, Any] = protection_options(args.allow_config_edits, settings.workspace)
    # The runaway guard and progress detection are this coding agent's policy (the library's are off);
    # --no-progress-guard turns off the second only.
    options.update({"repeat_guard": True, "progress_guard": not args.no_progress_guard})
    from .local import LOCAL_TIMEOUT, SMALL_MODEL_TOOLS, UNSTICK_TEMPERATURE, hosted_model, is_custom_endpoint
    if is_custom_endpoint(settings.base_url) and not hosted_model(settings.model):
        options["timeout"] = LOCAL_TIMEOUT
        if not args.no_progress_guard and args.temperature is None:
            # The temperature is ours (DEFAULT_LOCAL_TEMPERATURE): a turn stuck on a failure gets a higher one.
            options["progress_guard"] = {"unstick_temperature": UNSTICK_TEMPERATURE}
    if settings.prompt_style == "compact":
        # A small context (or --prompt compact): the four file and shell tools only. Every tool definition
        # costs the prompt tokens, and a small model offered todo_write, task and skill uses them instead of
        # finishing. MCP servers the user configured still come.
        options["builtin_tools"] = list(SMALL_MODEL_TOOLS)
        options["short_tool_descriptions"] = True
        # A small model asked for a file often answers with it in a fenced block under its name (and writes
        # better code there than inside a JSON argument): such an answer writes the files (issue 41).
        options["text_edits"] = True
        # And asked once without tools for whole files (aider's way), it writes correct files twice as often
        # as through write_file calls: the first request of a conversation is that draft, then the tool loop
        # runs and checks it (issue 41).
        # Not where the task asks to run something before it asks for a change ("`python3 report.py` crashes.
        # Run it, read the traceback and fix the cause"): a draft written before anything ran guesses what the
        # run prints (issue 41's traceback task: with the draft 0 of 6 plain runs in the table and 1 of 6 on the
        # next build, whose drafts mostly "fixed" a json module that was never missing; 6 of 6 without it).
        from .evidence import asks_to_run_first
        options["draft_first"] = not getattr(args, "no_draft", False) and not (task is not None
                                                                               and asks_to_run_first(task))
        if servers:
            options["mcp_servers"] = servers
    else:
        options["planning"] = not args.no_planning
        if not args.no_subagents:
            options["subagents"] = features.subagents()
        options["skills"] = features.skill_dirs(settings.workspace)
        if servers:
            options["mcp_servers"] = servers
    hooks = settings_files.Hooks(loaded.hooks, settings.workspace, session_id=session.stem,
                                 transcript=str(session), show=renderer.notice,
                                 ask=(lambda q: ask_key(q, renderer, abort)) if interactive else None,
                                 skipped=renderer.notice if interactive else _say, files=loaded.files)
    options["instruction_files"] = not args.no_instructions
    # The answer is held to the run's record (evidence.py): claims always; "no file changed" when the task
    # reads as a change request.
    from .evidence import asks_for_changes
    options["verify_claims"] = True
    # Not in plan or read-only mode: nothing may change there.
    options["expect_changes"] = task is not None and asks_for_changes(task) and not (args.plan or args.read_only)
    if args.check:
        options["check"] = args.check
    if args.max_budget_usd is not None:
        options["max_cost_usd"] = args.max_budget_usd
    if loaded.hooks:
        options["hooks"] = hooks.library_hooks()
    if settings.prompt_style == "compact" and not getattr(args, "no_hints", False):
        # A failed command's Python error whose cause the workspace's files name gets a one-line hint (a
        # test that does not import what it tests), after the user's own PostToolUse hooks (issue 41).
        from .hints import after_check_hook, after_tool_hook
        made = options.setdefault("hooks", {})
        made["after_tool"] = after_tool_hook(settings.workspace, made.get("after_tool"))
        if args.check:
            made["after_check"] = after_check_hook(settings.workspace, args.check)
    if args.json_schema:
        from .jsonout import load_schema
        try:
            options["output_schema"] = load_schema(args.json_schema)
        except ConfigProblem as e:
            return problem(str(e))
    task_input: Prompt = task if task is not None else ""   # used only with a task
    if task is not None:
        from .media import prompt_input
        try:
            task_input = prompt_input(task, settings.workspace, args.image)
        except ConfigProblem as e:
            return problem(str(e))
    elif args.image:
        return problem("--image goes with a task: tooloop --image shot.png \"what is wrong here?\"")
    task_input = _with_task_files(task_input, settings, args)
    if args.attempts is not None and task is not None:   # --attempts N: isolated copies (attempts.py)
        from .attempts import run_attempts
        options.pop("hooks", None)
        return run_attempts(args, settings, task, task_input,
                            agent_kwargs(settings, policy, session, options), session, checkpoints, loaded)
    try:
        agent = build_agent(settings, policy, session, options)
        renderer.bind(agent)  # a tool is drawn by what the agent says it is
    except tooloop.Error as e:
        return problem(" ".join(str(e).split()))
    found = getattr(agent, "instructions", None)
    for skipped in (found or {}).get("skipped", []) if isinstance(found, dict) else []:
        _say(f"instructions file {skipped.get('path')} skipped: {skipped.get('reason')}")
    start_context = hooks.session_start("resume" if resumed else "startup")
    if servers:
        for failure in agent.mcp_status().get("failures", []):
            name, reason = str(failure.get("server")), " ".join(str(failure.get("reason")).split())
            _say(reason if f"'{name}'" in reason else f"MCP server '{name}' failed to start: {reason}")

    try:
        if task is not None:
            if getattr(settings, "sandbox_note", ""):
                _say(settings.sandbox_note)   # the REPL says it in its header line instead
            checkpoints.begin_task(task)
            sent, why = hooks.prompt(task)
            if sent is None:
                blocked = f"the task was blocked by a UserPromptSubmit hook: {why}"
                _say(blocked)
                if json_mode:   # the JSON modes end with a result object, also when nothing ran
                    from .jsonout import error_result
                    print(json.dumps(error_result(blocked, session.stem), separators=(",", ":")), flush=True)
                return EXIT_FAILED
            if start_context:
                sent = f"<session-context>\n{start_context}\n</session-context>\n\n{sent}"
            if sent != task:
                from .media import prompt_input
                try:
                    task_input = _with_task_files(prompt_input(sent, settings.workspace, args.image), settings,
                                                  args)
                except ConfigProblem as e:
                    return problem(str(e))
            if args.plan and json_mode:
                # A program asked: plan read-only and report the plan as the result (no one to approve it).
                from .jsonout import JsonOutput, run_json
                from .plan import PLAN_PROMPT, _with_plan_policy
                jout = JsonOutput(sys.stdout, args.output_format == "stream-json", session.stem)
                jout.init(agent, settings, "plan")
                _with_plan_policy(agent, policy)
                try:
                    return run_json(agent, PLAN_PROMPT.format(task=sent), settings, abort, jout, checkpoints,
                                    args.max_budget_usd)
                finally:
                    agent.set_permission(policy)
            if args.plan:
                from .plan import plan_one_shot
                return plan_one_shot(
                    agent, sent, renderer, policy, ask=_isatty(sys.stdin),
                    one_shot=lambda text: one_shot(agent, text, settings, renderer, abort, args.print_mode,
                                                   args.max_budget_usd, checkpoints))
            if json_mode:
                from .jsonout import JsonOutput, run_json
                jout = JsonOutput(sys.stdout, args.output_format == "stream-json", session.stem)
                jout.init(agent, settings, str(getattr(policy, "mode", "")))
                return run_json(agent, task_input, settings, abort, jout, checkpoints, args.max_budget_usd)
            return one_shot(agent, task_input, settings, renderer, abort, args.print_mode, args.max_budget_usd,
                            checkpoints)
        from .repl import Repl
        repl = Repl(agent, settings, renderer, policy, session, abort, resumed=resumed,
                    checkpoints=checkpoints, mcp=mcp)
        repl.hooks = hooks
        repl.start_context = start_context
        repl.plan_mode = bool(args.plan)
        repl.max_budget_usd = args.max_budget_usd
        return repl.run()
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    finally:
        close = getattr(agent, "close", None)
        if close is not None:
            try:
                close()
            except Exception:
                pass
        if not resumed:
            paths.remove_if_empty(session)


def ask_key(question: str, renderer: Renderer, abort: threading.Event) -> Optional[bool]:
    """A y/n question on the terminal, answered with one key (like the permission question)."""
    reader = TerminalReader(sys.stdin.fileno(), abort, echo=renderer.echo)
    reader.begin()
    renderer.question(question)
    try:
        answer = reader()
    except Exception:
        return None
    if answer is None:
        return None
    return answer.strip().lower() in ("y", "yes", "a", "always")


def list_sessions(args: argparse.Namespace) -> int:
    """`tooloop --list`: needs no key, only the workspace."""
    from .sessions import list_infos, table

    workspace = Path(args.workspace or os.getcwd()).expanduser()
    if not workspace.is_dir():
        _say(f"workspace {str(workspace)!r} is not a folder")
        return EXIT_USAGE
    from .session_db import configured_db, main as sessions_main
    db = configured_db(args)
    if db is not None:  # --session-db: this workspace's sessions in the database (and its JSONL files)
        return sessions_main(["--db", str(db), "--workspace", str(workspace)])
    rows = table(list_infos(workspace.resolve()), width=shutil.get_terminal_size((120, 24)).columns)
    if not rows:
        print(f"no sessions in {workspace.resolve()} yet")
    for row in rows:
        print(row)
    if rows:
        print("continue one with: tooloop --resume ID (a unique prefix of the id is enough)")
    return EXIT_OK


def _with_task_files(task_input: Prompt, settings: Settings, args: argparse.Namespace) -> Prompt:
    """With the compact prompt (a small window), a text task goes with the files it names (task_files.py);
    --no-task-files: the task alone."""
    if settings.prompt_style != "compact" or getattr(args, "no_task_files", False) or not isinstance(task_input, str):
        return task_input
    from .task_files import with_named_files
    return with_named_files(task_input, settings.workspace, settings.context_window)


def one_shot(agent: tooloop.Agent, task: Prompt, settings: Settings, renderer: Renderer, abort: threading.Event,
             print_mode: bool, max_budget_usd: Optional[float] = None,
             checkpoints: Optional[Checkpoints] = None) -> int:
    outcome: Outcome = run_with_corrections(agent, task, None if print_mode else renderer, abort, settings,
                                            checkpoints)
    if outcome.status == "cancelled":
        return EXIT_INTERRUPTED
    if outcome.status == "error":
        if not print_mode:
            renderer.end_turn()
        _say(outcome.message)
        return EXIT_FAILED
    result = outcome.result
    text = result.text if result is not None else ""
    output = getattr(result, "output", None)
    if output is not None and print_mode:
        from .jsonout import to_json
        text = json.dumps(to_json(output), ensure_ascii=False)
    if print_mode:
        sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")
        sys.stdout.flush()
    else:
        from . import context
        used = context.turn_tokens(outcome.last_turn)
        ctx = context.ctx_label(used if used is not None else context.estimate_tokens(agent),
                                context.window_of(agent, settings))
        renderer.status(status_line(settings.model, outcome.turns, outcome.usage, ctx=ctx))
    stop = (result.stop_reason if result is not None else None) or ""
    from .evidence import verdict_lines
    lines, unproven = verdict_lines(result)
    for line in lines:
        _say(line)
    if stop == "check_failed" or (unproven and stop not in ("repetition", "budget")):
        return EXIT_FAILED
    if stop == "repetition":
        from .evidence import guard_stop_failed
        _say(repetition_line(outcome.repetition))
        return EXIT_FAILED if guard_stop_failed(result) else EXIT_OK
    if stop == "budget":
        _say(budget_line(max_budget_usd))
        return EXIT_FAILED
    if stop == "max_tokens":
        _say("the answer was cut off at the output token limit (max_tokens)")
        return EXIT_FAILED
    if stop == "refusal":
        _say("the model declined the task (stop_reason: refusal)")
        return EXIT_FAILED
    return EXIT_OK
