//! The agent handle: `tooloop_agent`, created from a JSON config, run on text or content blocks, resumed,
//! cancelled, read (messages, history, usage, todos, MCP status), reset and compacted. Tools, the
//! permission hook, hooks, sessions and host models each have their own module.
//!
//! Must never: keep state of its own about a run (busy, failures): the core says both through its errors.

use std::collections::BTreeMap;
use std::ffi::{c_char, c_void};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tooloop::{Agent, AgentOptions, ContentBlock, Event, Provider};

use crate::config;
use crate::events::{EventSink, tooloop_event_fn};
use crate::ffi::{
    Failure, FfiResult, HostHeld, boundary, boundary_void, handle, opt_str_arg, out_arg, owned_string, str_arg,
    value_out_arg, write_out, write_value,
};
use crate::status_codes::{TOOLOOP_ERROR, TOOLOOP_INVALID_ARGUMENT, TOOLOOP_INVALID_JSON, tooloop_status};

/// An agent: a model, its tools and a conversation. Create with `tooloop_agent_new` or
/// `tooloop_agent_new_with_model`, free with `tooloop_agent_free`.
///
/// Threads: one thread at a time may use an agent, except `tooloop_agent_cancel`,
/// `tooloop_agent_messages_json`, `tooloop_agent_history_json`, `tooloop_agent_usage_json` and
/// `tooloop_agent_context_window`, which any thread may call at any time (also while a run is in progress
/// on another thread) until `tooloop_agent_free` is called. A second run (or a `tooloop_agent_compact`)
/// while one is in progress gets `TOOLOOP_BUSY`.
pub struct tooloop_agent {
    /// Shared with the runs stepped by the host (`tooloop_run`), which keep it alive until they are freed.
    pub(crate) agent: Arc<Agent>,
    /// The host permission hook, also held by the core's hook closure. Kept here so that replacing or
    /// clearing it drops the host's userdata outside the core's lock (a destructor may call back into
    /// tooloop), on the thread that called set_permission.
    pub(crate) permission: Mutex<Option<HostHeld>>,
    /// The host hooks by kind, also held by the core's hook closures (kept here for the same reason).
    pub(crate) hooks: Mutex<BTreeMap<&'static str, HostHeld>>,
}

/// The agent the options describe, with `provider` as its model when given (a host model).
pub(crate) fn build_agent(provider: Option<Arc<dyn Provider>>, options: AgentOptions) -> FfiResult<tooloop_agent> {
    let agent = match provider {
        Some(p) => options.build_with(p),
        None => options.build(),
    }?;
    Ok(tooloop_agent { agent: Arc::new(agent), permission: Mutex::new(None), hooks: Mutex::new(BTreeMap::new()) })
}

/// Create an agent that talks to a model API (Anthropic Messages, OpenAI-compatible Chat Completions, OpenAI's
/// Responses API, or Claude on Amazon Bedrock).
///
/// `config_json` is a JSON object; every key is optional except `model`:
/// - `"provider"`: `"anthropic"` (default), `"openai"` (any OpenAI-compatible server), `"openai-responses"`
///   (OpenAI's Responses API, `POST /v1/responses`: OpenAI's reasoning models with tools) or `"bedrock"`.
/// - `"model"`: the model name, e.g. `"claude-sonnet-4-6"`.
/// - `"system"`: the system prompt, a string or an array of text blocks.
/// - `"api_key"`, `"base_url"`: default from the environment: `ANTHROPIC_API_KEY` / `ANTHROPIC_BASE_URL`,
///   or `OPENAI_API_KEY` / `OPENAI_BASE_URL` (an OpenAI base URL ends with `/v1`, an Anthropic one not).
/// - `"max_tokens"` (default 8192), `"max_turns"` (model requests per run, default 20, `null`: no cap).
/// - `"thinking"`: a budget in tokens (at least 1024, less than `"max_tokens"`), or a thinking object passed
///   to the API as is; `null`/`false`: off.
/// - `"timeout"`: seconds for one whole request (default 600); `"max_retries"` (default 2).
/// - `"stream"`: stream responses (default true; events arrive as the bytes do).
/// - `"builtin_tools"`: `true` for bash, read_file, write_file and edit_file, or an array of some of
///   their names; `"workspace"`: the folder they work in (default: the current folder). bash runs in the
///   `"sandbox"` below.
/// - `"session"`: a JSONL session file, or a session of a SQLite database named `path.db#id` (also
///   `.sqlite`, `.sqlite3`; the database and the session are created if new): loaded if it exists, then
///   every finished entry is appended.
/// - `"max_turns_policy"`: `"error"` (default: the run fails with `TOOLOOP_MAX_TURNS`) or `"return"`
///   (the run succeeds with `"max_turns_reached": true`).
/// - `"temperature"`, `"stop_sequences"` (array of strings), `"tool_choice"` (object): request options.
/// - `"headers"`: extra HTTP headers on every request, e.g. `{"anthropic-beta": "..."}`.
/// - `"extra"`: other request body fields, passed through unchanged.
/// - `"planning"`: `true` adds the `todo_write` tool, a todo list the model keeps (read it with
///   `tooloop_agent_todos_json`; `TOOLOOP_EVENT_TODO` when it changes); `{"remind_after": N}` sets after
///   how many turns an unfinished list left alone gets a reminder (default 3, `null`: never).
/// - `"skills"`: folders holding skills (`<name>/SKILL.md` with `name` and `description` front matter):
///   their names join the system prompt and the `skill` tool loads one on demand.
/// - `"subagents"`: child agent types for the `task` tool, e.g. `{"explore": {"description": "Searches the
///   code", "system": "...", "tools": ["read_file"], "max_turns": 10}}` (`"tools"` names tools of this
///   agent, default all; `"model"` default this agent's). Child events arrive as TOOLOOP_EVENT_SUBAGENT.
/// - `"sandbox"`: kernel confinement of the built-in `bash` (Linux Landlock): `"workspace-write"` (default:
///   writes only inside the workspace and a private temp folder), `"read-only"` or `"off"`; `"network"`:
///   `false` refuses every socket family but Unix sockets to bash (TCP, UDP, loopback included). A mode the
///   kernel cannot enforce (no Landlock or seccomp) is `TOOLOOP_CONFIG`, never run unconfined.
///   `"env_passthrough"`: names of secret-looking environment variables bash keeps (by default every variable whose name holds KEY, SECRET, TOKEN,
///   PASSWORD or CREDENTIAL, and the AWS ones, is dropped and its value redacted from tool results).
/// - `"protected_paths"`: paths relative to the workspace that bash sees read-only in `"workspace-write"`
///   (default `[".tooloop", ".claude", ".mcp.json", ".git/hooks", ".git/config"]`; `[]` lifts it). Needs
///   root and mount namespaces: elsewhere Landlock cannot make a read-only hole in a writable tree and they
///   are as writable as the workspace; a path that does not exist when a command starts cannot be protected.
/// - `"mcp_servers"`: MCP servers whose tools the agent gets as `mcp__<server>__<tool>`, e.g.
///   `{"docs": {"command": ["python3", "server.py"], "env": {"TOKEN": "${DOCS_TOKEN}"}}, "tracker": {"url":
///   "http://localhost:8000/mcp"}}`; they stop when the agent is freed. A server that cannot start is
///   skipped: `tooloop_agent_mcp_status_json` says which and why.
/// - `"provider": "bedrock"` with `"region"` (default from `AWS_REGION`): Claude on Amazon Bedrock, AWS
///   credentials from the environment or `~/.aws/credentials`; `"server_tools"`: tools the API runs itself,
///   sent as given (`[{"type": "web_search_20250305", "name": "web_search"}]`).
/// - `"tool_concurrency"`: most parallel-safe tools run at once in one turn (default 4).
/// - `"repeat_guard"`: the runaway guard, `true` (`{"warn_after": 3, "stop_after": 2}`), `false`, or the
///   object; not given, it is on exactly when `"progress_guard"` is (off by default): the `warn_after`-th
///   identical call in a row is answered with an error instead of run, and after `stop_after` more the run
///   ends with stop_reason `"repetition"`.
/// - `"progress_guard"`: the coding agent's guards, off by default (the `tooloop` command turns them on):
///   `false` (default), `true`, or `{"stop_after": 2}`. On, it brings the runaway guard too; and a turn whose
///   calls change nothing (a file rewritten with its own content, a command with the same output as last
///   time, a cycle of calls) gets a note in its last tool result; after `stop_after` more such turns in a row
///   the run ends with stop_reason `"repetition"` (TOOLOOP_EVENT_REPETITION says why in its `note`). After a
///   turn that only re-ran a check that had already passed (or rewrote a file unchanged), the next request
///   goes out once with tools disabled (`tool_choice` none) asking for the final answer; calls a server sends
///   anyway are not run and the request goes once more, without the tools, then they end the run; a host's
///   own `tool_choice` (other than auto) is left alone; `{"wrap_up": false}` turns that off.
///   `{"unstick_temperature": 0.8}` (default off): after a turn stuck on a failure (the same failing call
///   again), the next request goes once at that temperature, if the request sets a lower one.
///   Neither guard ever refuses or judges a call of a tool marked not idempotent
///   (`tooloop_agent_set_tool_idempotent`).
/// - `"check"`: a check to finish against (default none), a shell command run in the workspace with the
///   built-in bash's sandbox (at most `"check_timeout"` seconds, default 120) when the model answers, if it
///   has not run yet or something changed since; its failure goes back to the model with the failing lines
///   and the run goes on; the result JSON's `"check"` says `"passed"` only once it passes, and stop_reason
///   `"check_failed"` when turns run out or the model answers again with nothing changed. The workspace
///   files the command runs or names are read-only to the agent for the run.
/// - `"expect_changes"`: the task asks for changes (default false): an answer with no file changed is told
///   once what the run did, then the result JSON says `"unverified"`. `"verify_claims"` (default false): the
///   same for an answer that says a command ran or a test passed when the run's record shows otherwise.
/// - `"context_window"`: the model's context window in tokens (default: from the model's name, e.g. 200000
///   for Claude models; set it for local models); `tooloop_agent_context_window` reads the one in use.
/// - `"compaction"`: `"auto"` (default) or `"off"`. With `"auto"`, before a request that would fill more than
///   `"compact_threshold"` of the context window (default 0.8; 0.1 to 1), and after an API answer that the
///   prompt is too long, the run compacts the conversation (old large tool results cleared, older turns
///   summarized by the model or dropped) and tells the event callback with TOOLOOP_EVENT_COMPACTION.
///   `tooloop_agent_compact` compacts on demand, also when it is off.
/// - `"compaction_model"`: the model that writes compaction summaries (default: `"model"`).
/// - `"output_schema"`: a JSON Schema object the final answer must be valid against (structured output);
///   the result JSON then carries the validated value as `"output"`. Native structured output where the API
///   has it (`"output_mode"`: `"auto"` default, `"native"` or `"tool"` for a forced `final_answer` tool); an
///   invalid answer goes back to the model with the errors at most `"output_retries"` times (default 2),
///   then the run fails with `TOOLOOP_OUTPUT_INVALID`. A subagent type may have its own `"output_schema"`.
/// - `"cache"`: prompt caching on the Anthropic API and Bedrock (default true): cache breakpoints on the last
///   tool, the system prompt and the newest turns.
/// - `"short_tool_descriptions"`: compact built-in tool definitions (default false), for models with a small
///   context window: one sentence each, input schemas cut to their required fields (the tools still take
///   the optional ones), a one-sentence sandbox note.
/// - `"text_edits"`: whole files in the model's text (default false): with the built-in `write_file`, a turn
///   with no tool calls whose text gives files as fenced code blocks named on the line before them ("Here's
///   the fixed `calc.py`:") gets one `write_file` call per file, asked for and run like any other call. Shell,
///   output and diff blocks, blocks whose tag contradicts the name, and turns cut off are never edits.
/// - `"draft_first"`: a first draft without tools (default false): with the built-in `write_file`, a run that
///   starts a conversation sends its first request without tools, asking for whole files in fenced blocks;
///   they are written as `write_file` calls, its shell blocks then run as `bash` calls (with the built-in
///   `bash`), and the run goes on with the tools.
/// - `"instruction_files"`: project instructions added to the system prompt: `true` finds `AGENTS.md` (else
///   `CLAUDE.md`) in the workspace and each parent up to the repository root, plus the user's own file;
///   `false` (default) none; an array of paths: exactly those files.
/// - `"max_cost_usd"`: no request is sent that would take the agent's spend (subagents and compaction
///   summaries included) past this many US dollars; the run then returns `TOOLOOP_OK` with `"stop_reason":
///   "budget"` in its result. Needs a model with a known price.
/// - `"fallback_models"`: models tried in order when the model fails a turn before any of it reached the
///   event callback: overloaded (529, 503), rate-limited past its retries (429), down (other 5xx, or no
///   connection, after the retries) or refusing the context size. Each is a model name (same provider) or
///   `{"provider": "openai", "model": "gpt-4o", "api_key": "...", "base_url": "..."}` (also `"region"`,
///   `"headers"`); a key or URL not given comes from this config for the same provider, else from the
///   environment as it was when the agent was created. The fallback answers the rest of that run
///   (TOOLOOP_EVENT_MODEL_FALLBACK says so; the history and session record it); the next run starts on
///   `"model"` again. See `tooloop_agent_set_model` for what each provider is sent of another's turns.
/// - `"permission_rules"`: `{"allow": [...], "ask": [...], "deny": [...]}`, rules such as `"bash(git status)"`,
///   `"bash(npm test:*)"`, `"edit_file(*.md)"` or `"mcp__github"` that decide each tool call before the
///   permission callback is asked (deny wins over ask, ask over allow; an `"ask"` rule leaves the call to
///   the callback, and denies it when there is none).
///
/// The keys, defaults and checks are the core's `AgentOptions`, shared with the Python `Agent(...)`.
/// An unknown key is an error (a typo must not pass silently); so is a value that cannot work (a base URL
/// that does not parse, a header with a line break, a negative or absurd number).
///
/// On success `*out` receives the agent, which the caller owns and frees with `tooloop_agent_free`. On
/// failure `*out` is left unchanged.
///
/// Statuses: `TOOLOOP_INVALID_ARGUMENT` (NULL `config_json` or `out`, not an object, unknown key, wrong
/// type or missing `model`; the detail names the key), `TOOLOOP_INVALID_UTF8`, `TOOLOOP_INVALID_JSON`,
/// `TOOLOOP_CONFIG` (no API key, unknown built-in tool, bad workspace), `TOOLOOP_IO` (session file),
/// `TOOLOOP_PANIC`. Threads: any.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_agent_new(config_json: *const c_char, out: *mut *mut tooloop_agent) -> tooloop_status {
    boundary("tooloop_agent_new", || {
        out_arg(out, "out")?;
        let options = config::parse(str_arg(config_json, "config_json")?, false)?;
        let agent = build_agent(None, options)?;
        write_out(out, Box::into_raw(Box::new(agent)));
        Ok(())
    })
}

/// Free an agent: its tools' and model's `userdata_free` destructors run now, on this thread, each
/// exactly once. An attached session file stays on disk, complete.
///
/// NULL is a no-op. The agent must not be in use: no run in progress, no other thread still calling it
/// (not even `tooloop_agent_cancel`), and not from inside one of its callbacks. Freeing twice is
/// undefined behaviour.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_agent_free(agent: *mut tooloop_agent) {
    if agent.is_null() {
        return;
    }
    boundary_void("tooloop_agent_free", || {
        // SAFETY: created by Box::into_raw in tooloop_agent_new*, freed once per the contract.
        drop(unsafe { Box::from_raw(agent) });
    });
}

/// The common tail of run and resume: map the outcome, write the result.
fn finish_run(outcome: tooloop::Result<tooloop::RunResult>, result_json: *mut *mut c_char) -> FfiResult<()> {
    match outcome {
        Ok(result) => {
            if !result_json.is_null() {
                let json = serde_json::to_string(&result)
                    .map_err(|e| Failure::new(TOOLOOP_ERROR, format!("serializing the result: {e}")))?;
                write_out(result_json, owned_string(json)?);
            }
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// Run the agent on new user input: send it, run the tools the model asks for, repeat until the model
/// stops (or `max_turns`, a cancel, an error). Blocks until then.
///
/// - `input`: the user's message (UTF-8, copied).
/// - `on_event`: receives the run's events as they happen, with `event_userdata` (see `tooloop_event`);
///   NULL for none.
/// - `result_json`: NULL if not wanted; on success `*result_json` receives the run's result, which the
///   caller frees with `tooloop_string_free`: `{"text": "<last turn's text>", "stop_reason": "end_turn",
///   "turns": 2, "usage": {...}, "tool_calls": [{"id", "name", "input", "output", "is_error",
///   "duration_ms"}, ...], "max_turns_reached": false, "message": {<the last assistant message>},
///   "cost_usd": 0.0012, "output": <the structured answer with "output_schema", else null>,
///   "check": {"command", "passed", "exit_code", "output_tail", "runs"} or null without `"check"`,
///   "files_changed": ["src/a.py", ...], "commands_run": [{"command", "exit_code"}, ...],
///   "unverified": null or what the answer claims that the run's record does not show}`.
///   On failure it is left unchanged.
///
/// Whatever happens, the conversation stays valid: the input, every finished model turn and every tool
/// result are kept (and appended to the session file, if any), so after a failure, a cancel or
/// `TOOLOOP_MAX_TURNS`, `tooloop_agent_resume` continues without re-running tools that already ran.
///
/// Statuses: `TOOLOOP_OK`; `TOOLOOP_INVALID_ARGUMENT` (NULL `agent` or `input`), `TOOLOOP_INVALID_UTF8`,
/// `TOOLOOP_BUSY`; from the run: `TOOLOOP_CANCELLED`, `TOOLOOP_MAX_TURNS`, `TOOLOOP_TOOL_ABORTED`,
/// `TOOLOOP_MODEL_FAILED`, the API codes (`TOOLOOP_API_ERROR` .. `TOOLOOP_INTERNAL_SERVER`),
/// `TOOLOOP_CONNECTION`, `TOOLOOP_TIMEOUT`, `TOOLOOP_STREAM_INTERRUPTED`, `TOOLOOP_INVALID_RESPONSE`,
/// `TOOLOOP_OUTPUT_INVALID`, `TOOLOOP_CONFIG` (also: an image over the provider's size limit),
/// `TOOLOOP_IO`, `TOOLOOP_PANIC`. Threads: the agent's thread; the callbacks run on it.
/// Another thread may call `tooloop_agent_cancel` meanwhile.
///
/// `input` may also be a JSON array of content blocks (see `tooloop_agent_run_content`); any other text is
/// the user's message as is.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_agent_run(
    agent: *mut tooloop_agent,
    input: *const c_char,
    on_event: tooloop_event_fn,
    event_userdata: *mut c_void,
    result_json: *mut *mut c_char,
) -> tooloop_status {
    boundary("tooloop_agent_run", || {
        let a = handle(agent, "agent")?;
        let input = str_arg(input, "input")?;
        // A JSON array of content blocks is taken as blocks (images, documents), plain text as text.
        let blocks = content_input(input, false)?.unwrap_or_else(|| vec![tooloop::ContentBlock::text(input)]);
        let sink = EventSink { f: on_event, userdata: event_userdata };
        let outcome = a.agent.run_with(blocks, &mut |ev: &Event| sink.emit(ev));
        finish_run(outcome, result_json)
    })
}

/// Input that is a JSON array of content blocks, read as blocks (`required`: anything else is an error;
/// otherwise text that is not such an array gives `None`).
pub(crate) fn content_input(input: &str, required: bool) -> FfiResult<Option<Vec<tooloop::ContentBlock>>> {
    let looks = input.trim_start().starts_with('[');
    if !looks && !required {
        return Ok(None);
    }
    let value: Value = match serde_json::from_str(input) {
        Ok(v) => v,
        Err(_) if !required => return Ok(None),
        Err(e) => return Err(Failure::new(TOOLOOP_INVALID_JSON, format!("content_json does not parse: {e}"))),
    };
    let typed = value
        .as_array()
        .is_some_and(|a| !a.is_empty() && a.iter().all(|b| b.get("type").is_some_and(Value::is_string)));
    if !typed && !required {
        return Ok(None);
    }
    tooloop::parse_blocks(&value)
        .map(Some)
        .map_err(|m| Failure::new(TOOLOOP_INVALID_ARGUMENT, format!("content_json: {m}")))
}

/// Run the agent on new user input given as content blocks: `content_json` is a JSON array such as
/// `[{"type": "text", "text": "What is in this picture?"}, {"type": "image", "source": {"type": "base64",
/// "media_type": "image/png", "data": "<base64>"}}]` (also `document` blocks with a base64 PDF or text
/// source). The blocks are sent as given; an image or document over the provider's size limit (Anthropic 5
/// MB per image, Bedrock 3.75 MB, OpenAI 20 MB; PDFs 32 MB) is refused with `TOOLOOP_CONFIG` before
/// anything is stored or sent. Otherwise exactly `tooloop_agent_run` (which also takes such an array as its
/// `input`).
///
/// Statuses: those of `tooloop_agent_run`, plus `TOOLOOP_INVALID_JSON` (`content_json` does not parse) and
/// `TOOLOOP_INVALID_ARGUMENT` (not an array of blocks; the detail names the block). Threads: as
/// `tooloop_agent_run`.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_agent_run_content(
    agent: *mut tooloop_agent,
    content_json: *const c_char,
    on_event: tooloop_event_fn,
    event_userdata: *mut c_void,
    result_json: *mut *mut c_char,
) -> tooloop_status {
    boundary("tooloop_agent_run_content", || {
        let a = handle(agent, "agent")?;
        let input = str_arg(content_json, "content_json")?;
        let blocks = content_input(input, true)?.unwrap_or_default();
        let sink = EventSink { f: on_event, userdata: event_userdata };
        let outcome = a.agent.run_with(blocks, &mut |ev: &Event| sink.emit(ev));
        finish_run(outcome, result_json)
    })
}

/// Continue the conversation after a failure, a cancel or `TOOLOOP_MAX_TURNS`: tool calls left without a
/// result are answered as interrupted (tools that already ran are never re-run), then the conversation
/// is sent again and the run goes on as in `tooloop_agent_run`. Also continues a conversation loaded from
/// a session file.
///
/// Parameters, result and ownership as `tooloop_agent_run` (without input).
///
/// Statuses: as `tooloop_agent_run`; `TOOLOOP_CONFIG` when the conversation is empty. Threads: as
/// `tooloop_agent_run`.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_agent_resume(
    agent: *mut tooloop_agent,
    on_event: tooloop_event_fn,
    event_userdata: *mut c_void,
    result_json: *mut *mut c_char,
) -> tooloop_status {
    boundary("tooloop_agent_resume", || {
        let a = handle(agent, "agent")?;
        let sink = EventSink { f: on_event, userdata: event_userdata };
        let outcome = a.agent.resume(&mut |ev: &Event| sink.emit(ev));
        finish_run(outcome, result_json)
    })
}

/// Cancel the run in progress on `agent`, if any: `tooloop_agent_run` / `tooloop_agent_resume` returns
/// `TOOLOOP_CANCELLED` within about 200 ms, even mid-stream or while waiting on a hung server, and the
/// conversation stays valid (resume continues it). A running tool or host model callback is not
/// interrupted; it can poll `tooloop_tool_result_is_cancelled` / `tooloop_model_response_is_cancelled`.
/// With no run in progress it does nothing (it does not cancel a run started later).
///
/// Statuses: `TOOLOOP_OK`, `TOOLOOP_INVALID_ARGUMENT` (NULL `agent`), `TOOLOOP_PANIC`.
/// Threads: any thread, at any time until `tooloop_agent_free`; also from the agent's own callbacks.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_agent_cancel(agent: *const tooloop_agent) -> tooloop_status {
    boundary("tooloop_agent_cancel", || {
        handle(agent, "agent")?.agent.cancel();
        Ok(())
    })
}

fn json_out<T: serde::Serialize>(value: &T, out: *mut *mut c_char) -> FfiResult<()> {
    let json = serde_json::to_string(value).map_err(|e| Failure::new(TOOLOOP_ERROR, format!("serializing: {e}")))?;
    write_out(out, owned_string(json)?);
    Ok(())
}

/// The conversation as the model sees it (the API view): a JSON array of messages in the Anthropic
/// Messages shape, `[{"role": "user", "content": [...]}, {"role": "assistant", "content": [...]}, ...]`.
/// Always valid to send: it starts with a user turn, roles alternate, every tool_use has its tool_result.
///
/// On success `*out` receives the string; the caller frees it with `tooloop_string_free`. On failure `*out`
/// is left unchanged.
///
/// Statuses: `TOOLOOP_OK`, `TOOLOOP_INVALID_ARGUMENT` (NULL `agent` or `out`), `TOOLOOP_PANIC`.
/// Threads: any thread, also during a run (a consistent snapshot).
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_agent_messages_json(agent: *const tooloop_agent, out: *mut *mut c_char) -> tooloop_status {
    boundary("tooloop_agent_messages_json", || {
        let a = handle(agent, "agent")?;
        out_arg(out, "out")?;
        json_out(&a.agent.messages(), out)
    })
}

/// The conversation's internal entries, with what the API view leaves out: a JSON array of `{"id",
/// "role": "user"|"assistant"|"tool"|"system", "content": [...], "status":
/// "streaming"|"complete"|"error", "created_at", "duration_ms", "model", "usage", "stop_reason", "error",
/// "meta"}` (optional fields omitted when absent). A failed or cancelled turn is here with status "error"
/// and the partial content it had.
///
/// Ownership, statuses and threads as `tooloop_agent_messages_json`.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_agent_history_json(agent: *const tooloop_agent, out: *mut *mut c_char) -> tooloop_status {
    boundary("tooloop_agent_history_json", || {
        let a = handle(agent, "agent")?;
        out_arg(out, "out")?;
        json_out(&a.agent.conversation().snapshot(), out)
    })
}

/// Token usage summed over the whole conversation (every model turn, failed ones included):
/// `{"input_tokens": N, "output_tokens": N, "cache_creation_input_tokens": N, "cache_read_input_tokens": N}`
/// (cache fields present when the API reported them).
///
/// Ownership, statuses and threads as `tooloop_agent_messages_json`.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_agent_usage_json(agent: *const tooloop_agent, out: *mut *mut c_char) -> tooloop_status {
    boundary("tooloop_agent_usage_json", || {
        let a = handle(agent, "agent")?;
        out_arg(out, "out")?;
        json_out(&a.agent.usage(), out)
    })
}

/// The current todo list (with `"planning": true`): `[{"content": "...", "status": "pending" | "in_progress" |
/// "completed", "active_form": "..."}]`, `[]` before the model wrote one. Read from the conversation, so it
/// is restored with a session.
///
/// Ownership, statuses and threads as `tooloop_agent_messages_json`.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_agent_todos_json(agent: *const tooloop_agent, out: *mut *mut c_char) -> tooloop_status {
    boundary("tooloop_agent_todos_json", || {
        let a = handle(agent, "agent")?;
        out_arg(out, "out")?;
        json_out(&a.agent.todos(), out)
    })
}

/// The agent's MCP servers: `{"servers": [{"name", "state": "connected" | "disconnected" | "failed" |
/// "starting" | "closed", "tools": [...], "protocol_version", "restarts", "error", "log_tail"}],
/// "failures": [{"server", "reason"}]}` (`"failures"`: servers that could not start and were skipped).
///
/// Ownership, statuses and threads as `tooloop_agent_messages_json`.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_agent_mcp_status_json(agent: *const tooloop_agent, out: *mut *mut c_char) -> tooloop_status {
    boundary("tooloop_agent_mcp_status_json", || {
        let a = handle(agent, "agent")?;
        out_arg(out, "out")?;
        json_out(&serde_json::json!({"servers": a.agent.mcp_status(), "failures": a.agent.mcp_failures()}), out)
    })
}

/// Continue the conversation on another model, and provider, from the next run on.
///
/// - `model`: the model name (UTF-8, copied).
/// - `provider`: `"anthropic"`, `"openai"` or `"bedrock"` (UTF-8, copied); NULL keeps the current provider.
/// - `options_json`: NULL, or a JSON object with the new provider's `"api_key"`, `"base_url"`, `"region"`,
///   `"headers"` (copied). What it does not give comes from the agent's config when the provider is the one
///   it was created for, else from the environment as it was when the agent was created.
///
/// Every request stays valid after a switch: tool calls and results go in the new wire's own shape; thinking
/// blocks with a signature, redacted thinking and server tool blocks go back only to the provider and model
/// that made them (a tool loop's own reasoning is kept as plain text when another model takes it over);
/// tool call ids the new wire would refuse are mapped, the same way in a call and its result. The history
/// keeps everything, records which provider and model made each turn, and notes the switch (so does a
/// session file).
///
/// Statuses: `TOOLOOP_OK`, `TOOLOOP_INVALID_ARGUMENT` (NULL `agent` or `model`, unknown provider or option
/// key), `TOOLOOP_INVALID_UTF8`, `TOOLOOP_INVALID_JSON`, `TOOLOOP_BUSY` (a run is in progress),
/// `TOOLOOP_CONFIG` (no API key for the provider; a model without a price under `"max_cost_usd"`),
/// `TOOLOOP_IO` (the session file), `TOOLOOP_PANIC`. On failure nothing changes. Threads: the agent's thread.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_agent_set_model(
    agent: *mut tooloop_agent,
    model: *const c_char,
    provider: *const c_char,
    options_json: *const c_char,
) -> tooloop_status {
    boundary("tooloop_agent_set_model", || {
        let a = handle(agent, "agent")?;
        let model = str_arg(model, "model")?;
        let provider = opt_str_arg(provider, "provider")?;
        let mut spec = match opt_str_arg(options_json, "options_json")? {
            None => serde_json::Map::new(),
            Some(text) => match serde_json::from_str::<Value>(text) {
                Ok(Value::Object(m)) => m,
                Ok(_) => return Err(Failure::invalid("options_json must be a JSON object")),
                Err(e) => return Err(Failure::new(TOOLOOP_INVALID_JSON, format!("options_json: {e}"))),
            },
        };
        spec.insert("model".into(), Value::String(model.to_string()));
        if let Some(p) = provider {
            spec.insert("provider".into(), Value::String(p.to_string()));
        }
        let spec = tooloop::model_spec(&Value::Object(spec), "set_model")?;
        a.agent.set_model(spec).map_err(Failure::from)
    })
}

/// Clear the conversation (tools and configuration stay). An attached session file records the reset:
/// loading it later gives the conversation after the reset.
///
/// Statuses: `TOOLOOP_OK`, `TOOLOOP_INVALID_ARGUMENT` (NULL `agent`), `TOOLOOP_BUSY`, `TOOLOOP_IO`,
/// `TOOLOOP_PANIC`. Threads: the agent's thread.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_agent_reset(agent: *mut tooloop_agent) -> tooloop_status {
    boundary("tooloop_agent_reset", || {
        let a = handle(agent, "agent")?;
        a.agent.when_idle(|| a.agent.reset()).map_err(Failure::from)
    })
}

/// Compact the conversation now: the older turns are replaced in the API view by a summary the model writes
/// (one extra request, to `"compaction_model"` or the agent's model), keeping the first user message and the
/// newest turns; when the summary request fails or does not fit, the older turns are dropped instead. The
/// history (`tooloop_agent_history_json`) keeps every entry and the compaction record (so does a session
/// file). Works whatever the `"compaction"` config key says.
///
/// - `instructions`: what the summary should keep or stress (UTF-8, copied); NULL for none.
/// - `out_json`: on success `*out_json` receives the compaction record, `{"reason": "manual", "method":
///   "summary" | "drop" | "clear_tool_results", "tokens_before": N, "tokens_after": N, "removed": ["<entry
///   id>", ...], "cleared": [...], "summary": "...", "fallback_reason": "...", "instructions": "..."}` (empty
///   lists and absent strings left out; tokens are estimates), or the JSON `null` when there was nothing to
///   compact. The caller frees it with `tooloop_string_free`. On failure it is left unchanged.
///
/// Blocks during the summary request. `tooloop_agent_cancel` stops it like a run (`TOOLOOP_CANCELLED`; the
/// conversation is left as it was).
///
/// Statuses: `TOOLOOP_OK`; `TOOLOOP_INVALID_ARGUMENT` (NULL `agent` or `out_json`), `TOOLOOP_INVALID_UTF8`,
/// `TOOLOOP_BUSY`, `TOOLOOP_CANCELLED`, `TOOLOOP_IO` (the session file), `TOOLOOP_PANIC`. A failed summary
/// request is not an error (the method is then `"drop"`). Threads: the agent's thread. Another thread may
/// call `tooloop_agent_cancel` meanwhile.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_agent_compact(
    agent: *mut tooloop_agent,
    instructions: *const c_char,
    out_json: *mut *mut c_char,
) -> tooloop_status {
    boundary("tooloop_agent_compact", || {
        let a = handle(agent, "agent")?;
        out_arg(out_json, "out_json")?;
        let instructions = opt_str_arg(instructions, "instructions")?;
        let outcome = a.agent.compact(instructions, &mut |_: &Event| {});
        json_out(&outcome?, out_json)
    })
}

/// The tokens the next request would carry (system prompt, tools and the API view), plus `input` as if it
/// were the next user message (UTF-8, copied; NULL for none). Asks the API's token-counting endpoint where
/// the provider has one (Anthropic: one small request, which `tooloop_agent_cancel` does not stop; the
/// `"timeout"` applies); otherwise an estimate from the request's size, calibrated by the token counts the
/// API reported so far (no request).
///
/// On success `*out_tokens` receives the count; on failure it is left unchanged.
///
/// Statuses: `TOOLOOP_OK`, `TOOLOOP_INVALID_ARGUMENT` (NULL `agent` or `out_tokens`), `TOOLOOP_INVALID_UTF8`,
/// from the counting request the API codes (`TOOLOOP_API_ERROR` .. `TOOLOOP_INTERNAL_SERVER`),
/// `TOOLOOP_CONNECTION`, `TOOLOOP_TIMEOUT`, `TOOLOOP_INVALID_RESPONSE`; `TOOLOOP_PANIC`.
/// Threads: the agent's thread (it does not wait for a run, so its callbacks may call it too).
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_agent_count_tokens(
    agent: *mut tooloop_agent,
    input: *const c_char,
    out_tokens: *mut u64,
) -> tooloop_status {
    boundary("tooloop_agent_count_tokens", || {
        let a = handle(agent, "agent")?;
        value_out_arg(out_tokens, "out_tokens")?;
        let input = opt_str_arg(input, "input")?.map(|t| vec![ContentBlock::text(t)]);
        let n = a.agent.count_tokens(input).map_err(Failure::from)?;
        write_value(out_tokens, n);
        Ok(())
    })
}

/// The context window compaction works with, in tokens: the `"context_window"` config key, else the one the
/// model's name implies (200000 for Claude models), else 0 (unknown: no automatic compaction by threshold).
///
/// On success `*out_tokens` receives it; on failure it is left unchanged.
///
/// Statuses: `TOOLOOP_OK`, `TOOLOOP_INVALID_ARGUMENT` (NULL `agent` or `out_tokens`), `TOOLOOP_PANIC`.
/// Threads: any thread, also during a run.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_agent_context_window(agent: *const tooloop_agent, out_tokens: *mut u64) -> tooloop_status {
    boundary("tooloop_agent_context_window", || {
        let a = handle(agent, "agent")?;
        value_out_arg(out_tokens, "out_tokens")?;
        write_value(out_tokens, a.agent.context_window().unwrap_or(0));
        Ok(())
    })
}
