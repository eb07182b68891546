//! libtooloop: the C ABI of tooloop. A thin layer: handles, status codes, callbacks and JSON strings
//! around the core crate's `Agent`. No agent logic lives here.
//!
//! The `///` comments on exported items are the C documentation: cbindgen copies them into
//! `include/tooloop.h` (regenerate with
//! `TOOLOOP_BLESS=1 cargo test -p tooloop-capi --test header`; `tests/header.rs` fails when it is stale).
//!
//! Must never: let a panic unwind into C, write an out-parameter of a failed call, free memory the host
//! allocated (host data goes back through the host's own destructor), or put an API key in an error.
// The unsafe of the whole project lives here: every raw pointer is read through the helpers in ffi.rs.
#![deny(unsafe_op_in_unsafe_fn)]
// C names: `tooloop_agent`, `tooloop_status`, ... are the names C programs see.
#![allow(non_camel_case_types)]
// Exported functions take raw pointers from C; their contract (non-NULL or NULL, alive, NUL-terminated) is
// documented in the header, which is where C programmers read it — Rust's `unsafe fn` marker would not
// reach them. Each dereference goes through a checked helper in ffi.rs.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

mod answers;
mod config;
mod events;
mod ffi;
mod hooks;
mod json;
mod restore;
mod status;

pub use answers::*;
pub use events::*;
pub use hooks::*;
pub use json::*;
pub use restore::*;
pub use status::*;

use std::ffi::{CStr, CString, c_char, c_void};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tooloop::provider::FnProvider;
use tooloop::tools::ToolHandler;
use tooloop::types::ToolUseBlock;
use tooloop::{
    Agent, AgentOptions, ApiErrorKind, CancelToken, ContentBlock, Error, Event, MessageResponse, Permission,
    PermissionHook, Provider, Request, Session, Tool, ToolContext, ToolError, ToolOutput,
};

use crate::ffi::{
    Failure, FfiResult, UserData, boundary, boundary_void, c_string_lossy, handle, handle_mut, last_error_ptr,
    opt_str_arg, out_arg, owned_string, str_arg, value_out_arg, write_out, write_value,
};

// ---------------------------------------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------------------------------------

/// An agent: a model, its tools and a conversation. Create with `tooloop_agent_new` or
/// `tooloop_agent_new_with_model`, free with `tooloop_agent_free`.
///
/// Threads: one thread at a time may use an agent, except `tooloop_agent_cancel`,
/// `tooloop_agent_messages_json`, `tooloop_agent_history_json`, `tooloop_agent_usage_json` and
/// `tooloop_agent_context_window`, which any thread may call at any time (also while a run is in progress
/// on another thread) until `tooloop_agent_free` is called. A second run (or a `tooloop_agent_compact`)
/// while one is in progress gets `TOOLOOP_BUSY`.
pub struct tooloop_agent {
    agent: Agent,
    busy: AtomicBool,
    /// A host model's own failure (non-zero return), which the core reports as an invalid response:
    /// kept here so the run returns TOOLOOP_MODEL_FAILED instead.
    model_failure: Arc<Mutex<Option<Failure>>>,
    /// The host permission hook, also held by the core's hook closure. Kept here so that replacing or
    /// clearing it drops the host's userdata outside the core's lock (a destructor may call back into
    /// tooloop), on the thread that called set_permission.
    permission: Mutex<Option<Arc<HostPermission>>>,
    /// The host hooks by kind, also held by the core's hook closures (kept here for the same reason).
    hooks: Mutex<std::collections::BTreeMap<&'static str, Arc<hooks::HostHook>>>,
}

/// Where a tool callback puts its answer. Owned by the library and lent to one callback call: valid only
/// until the callback returns; never free it.
pub struct tooloop_tool_result {
    /// `Ok(text)`: the result; `Err(message)`: an is_error result.
    outcome: Option<Result<String, String>>,
    /// Content blocks set by `tooloop_tool_result_set_content` (the outcome is then `Ok("")`).
    content: Option<Vec<Value>>,
    cancel: CancelToken,
}

/// Where a permission callback puts the reason of a denial (`tooloop_permission_set_reason`). Owned by the
/// library and lent to one callback call: valid only until the callback returns; never free it.
pub struct tooloop_permission {
    reason: Option<String>,
}

/// Where a host model callback puts its response. Owned by the library and lent to one callback call:
/// valid only until the callback returns; never free it.
pub struct tooloop_model_response {
    message: Option<MessageResponse>,
    invalid: Option<String>,
    cancel: CancelToken,
}

/// One event of a run, passed to a `tooloop_event_fn`. The struct and its strings are borrowed: valid only
/// for the duration of the callback call (copy what you keep).
#[repr(C)]
pub struct tooloop_event {
    /// One of the `TOOLOOP_EVENT_*` codes. Unknown codes may be added: ignore them.
    pub r#type: tooloop_event_type,
    /// For `TOOLOOP_EVENT_TEXT` and `TOOLOOP_EVENT_THINKING` the new text, for
    /// `TOOLOOP_EVENT_TOOL_INPUT_DELTA` the JSON fragment; NULL for the other types. UTF-8; a NUL character
    /// in the text shows as U+FFFD here (`json` has it exactly).
    pub text: *const c_char,
    /// The whole event as a JSON object (`{"type": "text", ...}`, the same shape as the Python and Rust
    /// events). Never NULL.
    pub json: *const c_char,
}

/// A destructor for host data (`userdata`). Called exactly once, with the pointer given at registration.
pub type tooloop_free_fn = Option<unsafe extern "C" fn(userdata: *mut c_void)>;

/// A tool implemented by the host.
///
/// `userdata` is the pointer given to `tooloop_agent_add_tool`; `input_json` is the tool input the model
/// wrote, a JSON object that passed the schema's checks (borrowed for the call); `result` is where the
/// answer goes, through `tooloop_tool_result_set_text` or `tooloop_tool_result_set_error` (borrowed for
/// the call). Return 0 to let the run go on; a non-zero value aborts the run, which then fails with
/// `TOOLOOP_TOOL_ABORTED`. Returning 0 without setting a result gives the model the error result "the tool
/// returned no result".
///
/// Threads: called on the thread that called `tooloop_agent_run` / `tooloop_agent_resume`, one call at a
/// time. It may call `tooloop_agent_cancel` and the `*_json` readers of its agent, but not run, reset or
/// free it. A C++ callback must not let an exception escape.
pub type tooloop_tool_fn = Option<
    unsafe extern "C" fn(userdata: *mut c_void, input_json: *const c_char, result: *mut tooloop_tool_result) -> i32,
>;

/// Decides, before each tool call of a run, whether the call may run (see `tooloop_agent_set_permission`).
///
/// `userdata` is the pointer given to `tooloop_agent_set_permission`; `call_json` is the call the model made,
/// `{"id": "toolu_...", "name": "...", "input": {...}}` (borrowed for the call; read it with
/// `tooloop_json_get`, e.g. pointer `"/name"`); `answer` is where the reason of a denial goes, through
/// `tooloop_permission_set_reason` (borrowed for the call). Return 0 to let the tool run; a non-zero value
/// denies the call: the tool does not run, and the model reads the error result "Permission denied:
/// <reason>", where the reason is the one set on `answer`, or "the host denied this tool call" when none was
/// set. The run goes on either way (to end it too, call `tooloop_agent_cancel` from the callback). A reason
/// set on an allowed call is ignored.
///
/// It runs for every tool call the model makes, after the call's `TOOLOOP_EVENT_TOOL_USE` event and before
/// the tool's input is checked against its schema, also for a tool name the agent does not know. Calls
/// skipped because the run was cancelled or a tool aborted it are not asked about.
///
/// Threads: called on the thread that called `tooloop_agent_run` / `tooloop_agent_resume`, one call at a
/// time. Same rules as `tooloop_tool_fn`.
pub type tooloop_permission_fn = Option<
    unsafe extern "C" fn(userdata: *mut c_void, call_json: *const c_char, answer: *mut tooloop_permission) -> i32,
>;

/// Receives the events of a run (see `tooloop_event`). `userdata` is the pointer given to the run call.
///
/// Threads: called on the thread that called `tooloop_agent_run` / `tooloop_agent_resume`, as the events
/// happen (text deltas as their bytes arrive). It may call `tooloop_agent_cancel` and the `*_json` readers
/// of its agent, but not run, reset or free it. A C++ callback must not let an exception escape.
pub type tooloop_event_fn = Option<unsafe extern "C" fn(userdata: *mut c_void, event: *const tooloop_event)>;

/// A model implemented by the host (the "fake brain" of tests, or a custom backend).
///
/// `request_json` is the request in the Anthropic Messages API shape (`model`, `max_tokens`, `messages`,
/// `system`, `tools`, ...; borrowed for the call). Answer with `tooloop_model_response_set_json(response,
/// message_json)`, a Messages API message such as `{"role": "assistant", "content": [{"type": "text",
/// "text": "Hi"}], "stop_reason": "end_turn", "usage": {"input_tokens": 3, "output_tokens": 1}}`, and
/// return 0. A non-zero return fails the run with `TOOLOOP_MODEL_FAILED` (or `TOOLOOP_CANCELLED` when
/// the run was cancelled, see `tooloop_model_response_is_cancelled`).
///
/// Threads: called on the thread that called `tooloop_agent_run` / `tooloop_agent_resume`, one call at a
/// time. Same rules as `tooloop_tool_fn`.
pub type tooloop_model_fn = Option<
    unsafe extern "C" fn(
        userdata: *mut c_void,
        request_json: *const c_char,
        response: *mut tooloop_model_response,
    ) -> i32,
>;

// ---------------------------------------------------------------------------------------------------------
// Agent
// ---------------------------------------------------------------------------------------------------------

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn api_status(kind: ApiErrorKind) -> tooloop_status {
    match kind {
        ApiErrorKind::BadRequest => TOOLOOP_BAD_REQUEST,
        ApiErrorKind::Authentication => TOOLOOP_AUTHENTICATION,
        ApiErrorKind::PermissionDenied => TOOLOOP_PERMISSION_DENIED,
        ApiErrorKind::NotFound => TOOLOOP_NOT_FOUND,
        ApiErrorKind::RequestTooLarge => TOOLOOP_REQUEST_TOO_LARGE,
        ApiErrorKind::RateLimit => TOOLOOP_RATE_LIMIT,
        ApiErrorKind::Overloaded => TOOLOOP_OVERLOADED,
        ApiErrorKind::InternalServer => TOOLOOP_INTERNAL_SERVER,
        _ => TOOLOOP_API_ERROR,
    }
}

/// A core error as a status and a message a person can act on.
fn core_failure(e: &Error) -> Failure {
    let status = match e {
        Error::Api(api) => api_status(api.kind),
        Error::Connection { .. } => TOOLOOP_CONNECTION,
        Error::Timeout { .. } => TOOLOOP_TIMEOUT,
        Error::StreamInterrupted { .. } => TOOLOOP_STREAM_INTERRUPTED,
        Error::Cancelled { .. } => TOOLOOP_CANCELLED,
        Error::MaxTurns { .. } => TOOLOOP_MAX_TURNS,
        Error::ToolAborted { .. } => TOOLOOP_TOOL_ABORTED,
        Error::InvalidResponse { .. } => TOOLOOP_INVALID_RESPONSE,
        Error::Config(_) => TOOLOOP_CONFIG,
        Error::InvalidOption { .. } => TOOLOOP_INVALID_ARGUMENT,
        Error::Io { .. } => TOOLOOP_IO,
        Error::Hook { .. } => TOOLOOP_HOOK_FAILED,
        Error::OutputValidation(_) => TOOLOOP_OUTPUT_INVALID,
        _ => TOOLOOP_ERROR,
    };
    let mut message = e.to_string();
    // A stream ended by an `error` event: its Display says "interrupted"; the API detail is what to act on.
    if let (Error::StreamInterrupted { .. }, Some(api)) = (e, e.api()) {
        message.push_str(&format!(" [API error: {api}]"));
    }
    if let Error::OutputValidation(f) = e {
        message.push_str(&format!(". Last answer: {}", f.text));
    }
    Failure::new(status, message)
}

/// Marks an agent busy for the length of a run; dropping it (also on panic) clears the mark.
struct Busy<'a>(&'a AtomicBool);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

impl tooloop_agent {
    fn new(agent: Agent, model_failure: Arc<Mutex<Option<Failure>>>) -> Self {
        tooloop_agent {
            agent,
            busy: AtomicBool::new(false),
            model_failure,
            permission: Mutex::new(None),
            hooks: Mutex::new(Default::default()),
        }
    }

    fn begin(&self) -> FfiResult<Busy<'_>> {
        match self.busy.compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => Ok(Busy(&self.busy)),
            Err(_) => Err(Failure::new(
                TOOLOOP_BUSY,
                "a run is in progress on this agent (one at a time; tooloop_agent_cancel stops it)",
            )),
        }
    }

    fn attach_session(&self, path: &Path) -> FfiResult<()> {
        if !self.agent.conversation().is_empty() {
            // Checked before opening: the open would lock the file, and this agent may be the one holding it,
            // which would read as "in use" rather than the real reason.
            let refused = Error::Config("attach the session before the conversation has entries".into());
            return Err(core_failure(&refused));
        }
        let session = tooloop::store::open(path, None).map_err(|e| core_failure(&e))?;
        self.agent.attach_store(session).map_err(|e| core_failure(&e))?;
        Ok(())
    }
}

fn build_agent(
    provider: Option<Arc<dyn Provider>>,
    options: AgentOptions,
    model_failure: Arc<Mutex<Option<Failure>>>,
) -> FfiResult<tooloop_agent> {
    let agent = match provider {
        Some(p) => options.build_with(p),
        None => options.build(),
    }
    .map_err(|e| core_failure(&e))?;
    Ok(tooloop_agent::new(agent, model_failure))
}

/// Create an agent that talks to a model API (Anthropic Messages, or OpenAI-compatible Chat Completions).
///
/// `config_json` is a JSON object; every key is optional except `model`:
/// - `"provider"`: `"anthropic"` (default), `"openai"` (any OpenAI-compatible server) or `"bedrock"`.
/// - `"model"`: the model name, e.g. `"claude-sonnet-4-6"`.
/// - `"system"`: the system prompt, a string or an array of text blocks.
/// - `"api_key"`, `"base_url"`: default from the environment: `ANTHROPIC_API_KEY` / `ANTHROPIC_BASE_URL`,
///   or `OPENAI_API_KEY` / `OPENAI_BASE_URL` (an OpenAI base URL ends with `/v1`, an Anthropic one not).
/// - `"max_tokens"` (default 8192), `"max_turns"` (model requests per run, default 20, `null`: no cap).
/// - `"thinking"`: a budget in tokens, or a thinking object passed to the API as is; `null`/`false`: off.
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
/// - `"mcp_servers"`: MCP servers whose tools the agent gets as `mcp__<server>__<tool>`, e.g.
///   `{"docs": {"command": ["python3", "server.py"], "env": {"TOKEN": "${DOCS_TOKEN}"}}, "tracker": {"url":
///   "http://localhost:8000/mcp"}}`; they stop when the agent is freed. A server that cannot start is
///   skipped: `tooloop_agent_mcp_status_json` says which and why.
/// - `"provider": "bedrock"` with `"region"` (default from `AWS_REGION`): Claude on Amazon Bedrock, AWS
///   credentials from the environment or `~/.aws/credentials`; `"server_tools"`: tools the API runs itself,
///   sent as given (`[{"type": "web_search_20250305", "name": "web_search"}]`).
/// - `"tool_concurrency"`: most parallel-safe tools run at once in one turn (default 4).
/// - `"repeat_guard"`: the runaway guard, `{"warn_after": 3, "stop_after": 2}` (default) or `false`: the
///   `warn_after`-th identical call in a row is answered with an error instead of run, and after
///   `stop_after` more the run ends with stop_reason `"repetition"`.
/// - `"progress_guard"`: progress detection, `true` (default), `false`, or `{"stop_after": 2}`: a turn whose
///   calls change nothing (a file rewritten with its own content, a command with the same output as last
///   time, a cycle of calls) gets a note in its last tool result; after `stop_after` more such turns in a row
///   the run ends with stop_reason `"repetition"` (TOOLOOP_EVENT_REPETITION says why in its `note`).
/// - `"context_window"`: the model's context window in tokens (default: from the model's name, e.g. 200000
///   for Claude models; set it for local models); `tooloop_agent_context_window` reads the one in use.
/// - `"compaction"`: `"auto"` (default) or `"off"`: before a request that would fill more than
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
        let agent = build_agent(None, options, Arc::new(Mutex::new(None)))?;
        write_out(out, Box::into_raw(Box::new(agent)));
        Ok(())
    })
}

/// The host model behind `tooloop_agent_new_with_model`.
struct HostModel {
    f: unsafe extern "C" fn(*mut c_void, *const c_char, *mut tooloop_model_response) -> i32,
    userdata: UserData,
    failure: Arc<Mutex<Option<Failure>>>,
}

impl HostModel {
    fn call(&self, request: &Request, cancel: &CancelToken) -> tooloop::Result<MessageResponse> {
        let invalid = |message: String| Error::InvalidResponse { message, request_id: None };
        let json = serde_json::to_string(request).map_err(|e| invalid(format!("serializing the request: {e}")))?;
        // serde_json escapes control characters, so the request JSON never holds a NUL byte.
        let json = CString::new(json).map_err(|_| invalid("the request JSON contains a NUL byte".into()))?;
        let mut response = tooloop_model_response { message: None, invalid: None, cancel: cancel.clone() };
        // SAFETY: the host's callback with its own userdata; both pointers we pass live for the call.
        let rc = unsafe { (self.f)(self.userdata.ptr, json.as_ptr(), &mut response) };
        if rc != 0 {
            if cancel.is_cancelled() {
                return Err(Error::Cancelled { partial: None });
            }
            let message = format!("the host model callback returned {rc}");
            *lock(&self.failure) = Some(Failure::new(TOOLOOP_MODEL_FAILED, message.clone()));
            return Err(invalid(message));
        }
        match (response.message, response.invalid) {
            (Some(m), _) => Ok(m),
            (None, Some(why)) => Err(invalid(format!("the host model's response was rejected: {why}"))),
            (None, None) => Err(invalid(
                "the host model callback returned 0 without a response: call tooloop_model_response_set_json \
                 before returning"
                    .into(),
            )),
        }
    }
}

/// Create an agent whose model is a host callback instead of a network API: the "fake brain" tests use,
/// or a custom backend. Each model turn calls `model(model_userdata, request_json, response)`; see
/// `tooloop_model_fn`.
///
/// `config_json` takes the keys of `tooloop_agent_new`; `"provider"` may be left out or be `"host"`,
/// `"model"` defaults to `"host"`, and the network keys (`api_key`, `base_url`, `timeout`,
/// `max_retries`) are accepted and unused.
///
/// Ownership: `model_userdata` is the host's; tooloop calls `model_userdata_free(model_userdata)` (if not
/// NULL) exactly once: when the agent is freed, or before this function returns if it fails (even for a
/// NULL argument). On success `*out` receives the agent (free with `tooloop_agent_free`); on failure
/// `*out` is left unchanged.
///
/// Statuses: as `tooloop_agent_new` (`TOOLOOP_INVALID_ARGUMENT` also for a NULL `model`, or a `provider`
/// other than `"host"`). Threads: any.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_agent_new_with_model(
    config_json: *const c_char,
    model: tooloop_model_fn,
    model_userdata: *mut c_void,
    model_userdata_free: tooloop_free_fn,
    out: *mut *mut tooloop_agent,
) -> tooloop_status {
    // Owned from the first line, so every failure path below frees it exactly once.
    let userdata = UserData::new(model_userdata, model_userdata_free);
    boundary("tooloop_agent_new_with_model", move || {
        out_arg(out, "out")?;
        let f = model.ok_or_else(|| Failure::invalid("model is NULL"))?;
        let options = config::parse(str_arg(config_json, "config_json")?, true)?;
        let failure = Arc::new(Mutex::new(None));
        let host = HostModel { f, userdata, failure: failure.clone() };
        let provider: Arc<dyn Provider> =
            Arc::new(FnProvider::new(move |req: &Request, cancel: &CancelToken| host.call(req, cancel)));
        let agent = build_agent(Some(provider), options, failure)?;
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

/// A tool implemented by a C callback.
struct HostTool {
    f: unsafe extern "C" fn(*mut c_void, *const c_char, *mut tooloop_tool_result) -> i32,
    userdata: UserData,
}

impl ToolHandler for HostTool {
    fn call(&self, input: &Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        // serde_json escapes control characters, so the input JSON never holds a NUL byte.
        let json = CString::new(input.to_string())
            .map_err(|_| ToolError::Respond("the tool input contains a NUL byte".into()))?;
        let mut result = tooloop_tool_result { outcome: None, content: None, cancel: ctx.cancel.clone() };
        // SAFETY: the host's callback with its own userdata; both pointers we pass live for the call.
        let rc = unsafe { (self.f)(self.userdata.ptr, json.as_ptr(), &mut result) };
        if rc != 0 {
            let mut why = format!("the tool callback returned {rc}");
            if let Some(Err(m)) = &result.outcome {
                why.push_str(&format!(": {m}"));
            }
            return Err(ToolError::Fatal(why));
        }
        match result.outcome {
            Some(Ok(_)) if result.content.is_some() => Ok(ToolOutput::Blocks(result.content.unwrap_or_default())),
            Some(Ok(text)) => Ok(ToolOutput::Text(text)),
            Some(Err(message)) => Err(ToolError::Respond(message)),
            None => Err(ToolError::Respond("the tool returned no result".into())),
        }
    }
}

/// Register a tool implemented by a C callback. The model sees `name`, `description` and the JSON schema
/// of the tool's input; when it calls the tool, the input is checked against the schema (required fields,
/// types, enums) and `fn(userdata, input_json, result)` runs: see `tooloop_tool_fn`.
///
/// - `name`: `^[a-zA-Z0-9_-]{1,64}$`, unique within the agent (built-in tools included).
/// - `description`: what the tool does, for the model; NULL means none.
/// - `schema_json`: a JSON Schema object for the input, e.g. `{"type": "object", "properties": {"city":
///   {"type": "string"}}, "required": ["city"]}` (a missing `"type"` is taken as `"object"`).
///
/// All strings are copied.
///
/// Ownership: `userdata` is the host's; tooloop calls `userdata_free(userdata)` (if not NULL) exactly once:
/// when the agent is freed, or before this function returns if registration fails for any reason (even a
/// NULL argument or a duplicate name).
///
/// Statuses: `TOOLOOP_INVALID_ARGUMENT` (NULL `agent`, `name`, `schema_json` or `fn`; an invalid name; a
/// schema that is not a JSON object or whose `"type"` is not `"object"`), `TOOLOOP_INVALID_UTF8`,
/// `TOOLOOP_INVALID_JSON` (schema), `TOOLOOP_DUPLICATE_TOOL`, `TOOLOOP_PANIC`. Threads: the agent's
/// thread; tools added during a run are offered from the next model request.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_agent_add_tool(
    agent: *mut tooloop_agent,
    name: *const c_char,
    description: *const c_char,
    schema_json: *const c_char,
    r#fn: tooloop_tool_fn,
    userdata: *mut c_void,
    userdata_free: tooloop_free_fn,
) -> tooloop_status {
    // Owned from the first line, so every failure path below frees it exactly once.
    let userdata = UserData::new(userdata, userdata_free);
    boundary("tooloop_agent_add_tool", move || {
        let a = handle(agent, "agent")?;
        let name = str_arg(name, "name")?;
        let description = if description.is_null() { "" } else { str_arg(description, "description")? };
        let schema_text = str_arg(schema_json, "schema_json")?;
        let f = r#fn.ok_or_else(|| Failure::invalid("fn is NULL"))?;
        let schema: Value = serde_json::from_str(schema_text).map_err(|e| {
            Failure::new(TOOLOOP_INVALID_JSON, format!("schema_json of tool '{name}' is not valid JSON: {e}"))
        })?;
        if a.agent.tools().get(name).is_some() {
            return Err(Failure::new(TOOLOOP_DUPLICATE_TOOL, format!("a tool named '{name}' is already registered")));
        }
        let tool = Tool::new(name, description, schema, HostTool { f, userdata }).map_err(|e| match e {
            Error::Config(m) => Failure::invalid(m),
            other => core_failure(&other),
        })?;
        a.agent.tools().register(tool).map_err(|e| {
            // Lost a race with another registration of the same name.
            if a.agent.tools().get(name).is_some() {
                Failure::new(TOOLOOP_DUPLICATE_TOOL, format!("a tool named '{name}' is already registered"))
            } else {
                core_failure(&e)
            }
        })
    })
}

/// Limit each call of the tool `name` (a C tool, or any other registered tool) to `seconds`: the callback
/// then runs on a thread of its own, and a call that overruns is answered at once with an error result the
/// model reads ("did not finish within its time limit"), so the run never hangs on a stuck tool. The
/// overrunning callback is told to stop: `tooloop_tool_result_is_cancelled` returns true from then on, and
/// it should return soon; its `userdata` stays alive until it has returned (its `userdata_free` may
/// therefore run after `tooloop_agent_free`, on the callback's thread). Call it once per tool, after
/// registering it and before a run.
///
/// Statuses: `TOOLOOP_INVALID_ARGUMENT` (NULL `agent` or `name`, no tool of that name, `seconds` not a
/// positive finite number), `TOOLOOP_INVALID_UTF8`, `TOOLOOP_PANIC`. Threads: the agent's thread, not during
/// a run.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_agent_set_tool_timeout(
    agent: *mut tooloop_agent,
    name: *const c_char,
    seconds: f64,
) -> tooloop_status {
    boundary("tooloop_agent_set_tool_timeout", move || {
        let a = handle(agent, "agent")?;
        let name = str_arg(name, "name")?;
        if !(seconds.is_finite() && seconds > 0.0 && seconds < 1e9) {
            return Err(Failure::invalid(format!("tool '{name}': timeout must be a positive number of seconds")));
        }
        let Some(tool) = a.agent.tools().get(name) else {
            return Err(Failure::invalid(format!("no tool named '{name}' is registered")));
        };
        a.agent.tools().unregister(name);
        a.agent
            .tools()
            .register(tool.timeout(std::time::Duration::from_secs_f64(seconds)))
            .map_err(|e| core_failure(&e))
    })
}

/// The reason a denied call gets when the permission callback set none.
const DEFAULT_DENIAL: &str = "the host denied this tool call";

/// A permission hook implemented by a C callback.
struct HostPermission {
    f: unsafe extern "C" fn(*mut c_void, *const c_char, *mut tooloop_permission) -> i32,
    userdata: UserData,
}

impl HostPermission {
    fn check(&self, call: &ToolUseBlock) -> Permission {
        let json = serde_json::json!({"id": call.id, "name": call.name, "input": call.input}).to_string();
        // serde_json escapes control characters, so this never has to replace anything.
        let json = c_string_lossy(&json);
        let mut answer = tooloop_permission { reason: None };
        // SAFETY: the host's callback with its own userdata; both pointers we pass live for the call.
        let rc = unsafe { (self.f)(self.userdata.ptr, json.as_ptr(), &mut answer) };
        if rc == 0 {
            Permission::Allow
        } else {
            Permission::Deny(answer.reason.unwrap_or_else(|| DEFAULT_DENIAL.to_string()))
        }
    }
}

/// Set the permission hook of an agent: before each tool call, `fn(userdata, call_json, answer)` decides
/// whether it may run (see `tooloop_permission_fn`); a denied call is answered with an error result the model
/// reads, and the run goes on. A NULL `fn` clears the hook: every call runs. Setting a hook replaces the
/// previous one. The hook applies from the next run or resume.
///
/// Ownership: `userdata` is the host's; tooloop calls `userdata_free(userdata)` (if not NULL) exactly once:
/// when the hook is replaced or cleared by a later `tooloop_agent_set_permission`, or when the agent is
/// freed. When this call fails for any reason (even a NULL argument), or when `fn` is NULL (there is then
/// nothing to keep it for), it runs before this function returns. Replacing or clearing a hook runs the
/// previous hook's destructor before this function returns, on this thread; a failed call leaves the
/// previous hook in place.
///
/// Statuses: `TOOLOOP_OK`, `TOOLOOP_INVALID_ARGUMENT` (NULL `agent`), `TOOLOOP_BUSY` (a run or resume is in
/// progress on the agent, or the call was made from inside one of its callbacks), `TOOLOOP_PANIC`.
/// Threads: the agent's thread, not during a run.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_agent_set_permission(
    agent: *mut tooloop_agent,
    r#fn: tooloop_permission_fn,
    userdata: *mut c_void,
    userdata_free: tooloop_free_fn,
) -> tooloop_status {
    // Owned from the first line, so every failure path below frees it exactly once.
    let userdata = UserData::new(userdata, userdata_free);
    boundary("tooloop_agent_set_permission", move || {
        let a = handle(agent, "agent")?;
        // Not during a run: the run holds its own clone of the hook, so a replaced hook's userdata would
        // outlive this call; and one thread at a time is the agent's rule anyway.
        let _busy = a.begin()?;
        let host = match r#fn {
            Some(f) => Some(Arc::new(HostPermission { f, userdata })),
            None => {
                drop(userdata);
                None
            }
        };
        let hook = host.clone().map(|h| -> PermissionHook { Arc::new(move |call: &ToolUseBlock| h.check(call)) });
        a.agent.set_permission(hook);
        let previous = std::mem::replace(&mut *lock(&a.permission), host);
        // Outside every lock: the host's destructor may call back into tooloop.
        drop(previous);
        Ok(())
    })
}

/// Delivers core events to a C event callback.
struct EventSink {
    f: tooloop_event_fn,
    userdata: *mut c_void,
}

impl EventSink {
    fn emit(&self, event: &Event) {
        let Some(f) = self.f else { return };
        let (code, text) = match event {
            Event::TurnStart { .. } => (TOOLOOP_EVENT_TURN_START, None),
            Event::Text { text } => (TOOLOOP_EVENT_TEXT, Some(text.as_str())),
            Event::Thinking { thinking } => (TOOLOOP_EVENT_THINKING, Some(thinking.as_str())),
            Event::ToolInputDelta { partial_json, .. } => (TOOLOOP_EVENT_TOOL_INPUT_DELTA, Some(partial_json.as_str())),
            Event::ToolUse { .. } => (TOOLOOP_EVENT_TOOL_USE, None),
            Event::ToolResult { .. } => (TOOLOOP_EVENT_TOOL_RESULT, None),
            Event::Usage { .. } => (TOOLOOP_EVENT_USAGE, None),
            Event::TurnEnd { .. } => (TOOLOOP_EVENT_TURN_END, None),
            Event::Repetition { .. } => (TOOLOOP_EVENT_REPETITION, None),
            Event::Todo { .. } => (TOOLOOP_EVENT_TODO, None),
            Event::Subagent { .. } => (TOOLOOP_EVENT_SUBAGENT, None),
            Event::Compaction { .. } => (TOOLOOP_EVENT_COMPACTION, None),
            // A kind this version of the C API has no code for yet: its JSON still says what it is.
            _ => (TOOLOOP_EVENT_OTHER, None),
        };
        // The strings are written into this thread's reusable buffers (no allocation per event once they have
        // grown); taken out for the call, so a callback that starts another run on this thread gets its own.
        let (mut json, mut text_buf) = EVENT_BUFFERS.with_borrow_mut(std::mem::take);
        json.clear();
        if serde_json::to_writer(&mut json, event).is_err() {
            json.clear();
            json.extend_from_slice(b"{}");
        }
        json.push(0); // serde_json escapes NUL inside strings: the only NUL is this terminator
        let text_ptr = match text {
            Some(t) => {
                text_buf.clear();
                if t.contains('\0') {
                    text_buf.extend_from_slice(t.replace('\0', "\u{FFFD}").as_bytes());
                } else {
                    text_buf.extend_from_slice(t.as_bytes());
                }
                text_buf.push(0);
                text_buf.as_ptr().cast::<c_char>()
            }
            None => std::ptr::null(),
        };
        let ev = tooloop_event { r#type: code, text: text_ptr, json: json.as_ptr().cast::<c_char>() };
        // SAFETY: the host's callback with its own userdata; `ev` and its NUL-terminated strings live for the
        // call.
        unsafe { f(self.userdata, &ev) };
        EVENT_BUFFERS.with_borrow_mut(|b| *b = (json, text_buf));
    }
}

thread_local! {
    /// The JSON and text buffers `EventSink::emit` fills for each event.
    static EVENT_BUFFERS: std::cell::RefCell<(Vec<u8>, Vec<u8>)> = const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

/// The common tail of run and resume: map the outcome, write the result.
fn finish_run(
    a: &tooloop_agent,
    outcome: tooloop::Result<tooloop::RunResult>,
    result_json: *mut *mut c_char,
) -> FfiResult<()> {
    match outcome {
        Ok(result) => {
            if !result_json.is_null() {
                let json = serde_json::to_string(&result)
                    .map_err(|e| Failure::new(TOOLOOP_ERROR, format!("serializing the result: {e}")))?;
                write_out(result_json, owned_string(json)?);
            }
            Ok(())
        }
        Err(e) => Err(lock(&a.model_failure).take().unwrap_or_else(|| core_failure(&e))),
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
///   "cost_usd": 0.0012, "output": <the structured answer with "output_schema", else null>}`.
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
        let _busy = a.begin()?;
        lock(&a.model_failure).take();
        let sink = EventSink { f: on_event, userdata: event_userdata };
        let outcome = a.agent.run_with(blocks, &mut |ev: &Event| sink.emit(ev));
        finish_run(a, outcome, result_json)
    })
}

/// Input that is a JSON array of content blocks, read as blocks (`required`: anything else is an error;
/// otherwise text that is not such an array gives `None`).
fn content_input(input: &str, required: bool) -> FfiResult<Option<Vec<tooloop::ContentBlock>>> {
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
    tooloop::content::parse_blocks(&value)
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
        let _busy = a.begin()?;
        lock(&a.model_failure).take();
        let sink = EventSink { f: on_event, userdata: event_userdata };
        let outcome = a.agent.run_with(blocks, &mut |ev: &Event| sink.emit(ev));
        finish_run(a, outcome, result_json)
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
        let _busy = a.begin()?;
        lock(&a.model_failure).take();
        let sink = EventSink { f: on_event, userdata: event_userdata };
        let outcome = a.agent.resume(&mut |ev: &Event| sink.emit(ev));
        finish_run(a, outcome, result_json)
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

/// Attach a session file (or a database session, `path.db#id`, as the `"session"` key) to an agent whose
/// conversation is empty: the file's conversation is loaded (a
/// torn last line from a crash is cut off; a tool call left without a result is answered as
/// interrupted), then every finished entry is appended to it as the conversation goes on (flushed and
/// synced before the next request). The file (0600) and its folders (0700) are created if missing. Same
/// as the `"session"` config key. `tooloop_agent_resume` continues a loaded conversation;
/// `tooloop_agent_run` adds to it. The agent holds the file locked until `tooloop_agent_free`.
///
/// Statuses: `TOOLOOP_OK`, `TOOLOOP_INVALID_ARGUMENT` (NULL `agent` or `path`), `TOOLOOP_INVALID_UTF8`,
/// `TOOLOOP_BUSY`, `TOOLOOP_CONFIG` (the conversation is not empty), `TOOLOOP_IO` (cannot be read or
/// written; not a tooloop session or a newer format version, left untouched; in use by another agent),
/// `TOOLOOP_PANIC`.
/// Threads: the agent's thread.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_agent_open_session(agent: *mut tooloop_agent, path: *const c_char) -> tooloop_status {
    boundary("tooloop_agent_open_session", || {
        let a = handle(agent, "agent")?;
        let path = str_arg(path, "path")?;
        let _busy = a.begin()?;
        a.attach_session(Path::new(path))
    })
}

/// Write the whole conversation to `path` as a session file (the format `tooloop_agent_open_session`
/// and the Python `session=` load), replacing any file there atomically (written beside it, then
/// renamed). Saving onto the agent's own attached session file does nothing: that file is always current.
/// The agent does not start appending to `path`: use `tooloop_agent_open_session` for that.
///
/// Statuses: `TOOLOOP_OK`, `TOOLOOP_INVALID_ARGUMENT` (NULL `agent` or `path`), `TOOLOOP_INVALID_UTF8`,
/// `TOOLOOP_BUSY`, `TOOLOOP_IO`, `TOOLOOP_PANIC`. Threads: the agent's thread.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_agent_save_session(agent: *const tooloop_agent, path: *const c_char) -> tooloop_status {
    boundary("tooloop_agent_save_session", || {
        let a = handle(agent, "agent")?;
        let path = PathBuf::from(str_arg(path, "path")?);
        let _busy = a.begin()?;
        // Saving onto the agent's own attached session file does nothing: that file is always current.
        if let Some(current) = a.agent.session_info().map(|i| i.path) {
            let same = match (std::fs::canonicalize(&current), std::fs::canonicalize(&path)) {
                (Ok(x), Ok(y)) => x == y,
                _ => false,
            };
            if same {
                return Ok(());
            }
        }
        if let tooloop::store::Location::Database { .. } =
            tooloop::store::Location::parse(&path).map_err(|e| core_failure(&e))?
        {
            let refused = Error::Config("save writes a session file; a database session is written as it goes".into());
            return Err(core_failure(&refused));
        }
        Session::save(&path, &a.agent.conversation().snapshot()).map_err(|e| core_failure(&e))
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
        let _busy = a.begin()?;
        a.agent.reset().map_err(|e| core_failure(&e))
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
        let _busy = a.begin()?;
        lock(&a.model_failure).take();
        let outcome = a.agent.compact(instructions, &mut |_: &Event| {});
        match outcome {
            Ok(record) => json_out(&record, out_json),
            Err(e) => Err(lock(&a.model_failure).take().unwrap_or_else(|| core_failure(&e))),
        }
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
        let n = a.agent.count_tokens(input).map_err(|e| core_failure(&e))?;
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
