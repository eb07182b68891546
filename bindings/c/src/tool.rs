//! The tool handle: host tools implemented by C callbacks (`tooloop_agent_add_tool`), their time limits,
//! and the `tooloop_tool_result` they answer through (each setter copies what it is given).
//!
//! Must never: keep a pointer the host lent for one callback call, or let a callback's failure unwind.

use std::ffi::{CString, c_char, c_void};

use serde_json::Value;
use tooloop::ToolHandler;
use tooloop::{CancelToken, Error, Tool, ToolContext, ToolError, ToolOutput};

use crate::agent::tooloop_agent;
use crate::ffi::{Failure, FfiResult, UserData, boundary, boundary_void, handle, handle_mut, str_arg, tooloop_free_fn};
use crate::status_codes::{TOOLOOP_INVALID_ARGUMENT, TOOLOOP_INVALID_JSON, tooloop_status};

/// Where a tool callback puts its answer. Owned by the library and lent to one callback call: valid only
/// until the callback returns; never free it.
pub struct tooloop_tool_result {
    /// `Ok(text)`: the result; `Err(message)`: an is_error result.
    outcome: Option<Result<String, String>>,
    /// Content blocks set by `tooloop_tool_result_set_content` (the outcome is then `Ok("")`).
    content: Option<Vec<Value>>,
    cancel: CancelToken,
}

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
        let tool = Tool::new(name, description, schema, HostTool { f, userdata }).map_err(|e| match e {
            // An invalid name or schema is this call's argument, not the agent's configuration.
            Error::Config(m) => Failure::invalid(m),
            other => Failure::from(other),
        })?;
        // A name already taken is the core's `DuplicateTool`: TOOLOOP_DUPLICATE_TOOL.
        a.agent.tools().register(tool).map_err(Failure::from)
    })
}

/// Mark the tool `name` (a C tool, or any other registered tool) as idempotent (`idempotent` non-zero, the
/// default for every tool) or not (0): a tool whose same call with the same input may rightly bring something
/// new each time (`roll_dice`, `next_page`, a poll). The repetition guards (`"progress_guard"`,
/// `"repeat_guard"` in the config, off by default) never refuse, count or comment on the calls of a tool
/// that is not idempotent. Call it after registering the tool and before a run.
///
/// Statuses: `TOOLOOP_INVALID_ARGUMENT` (NULL `agent` or `name`, no tool of that name),
/// `TOOLOOP_INVALID_UTF8`, `TOOLOOP_PANIC`. Threads: the agent's thread, not during a run.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_agent_set_tool_idempotent(
    agent: *mut tooloop_agent,
    name: *const c_char,
    idempotent: i32,
) -> tooloop_status {
    boundary("tooloop_agent_set_tool_idempotent", move || {
        let a = handle(agent, "agent")?;
        let name = str_arg(name, "name")?;
        let Some(tool) = a.agent.tools().get(name) else {
            return Err(Failure::invalid(format!("no tool named '{name}' is registered")));
        };
        a.agent.tools().unregister(name);
        a.agent.tools().register(tool.idempotent(idempotent != 0)).map_err(Failure::from)
    })
}

/// What a tool does, for `tooloop_agent_set_tool_kind`: one of the `TOOLOOP_TOOL_KIND_*` codes (never
/// renumbered).
pub type tooloop_tool_kind = i32;

/// Nothing the library knows of (every tool's kind until set): judged by its results alone.
pub const TOOLOOP_TOOL_KIND_OTHER: tooloop_tool_kind = 0;
/// Reads (like `read_file`): changes nothing (the tool is also marked read-only), and progress detection
/// counts a call as looking, not as a check run after a change.
pub const TOOLOOP_TOOL_KIND_READ: tooloop_tool_kind = 1;
/// Writes the workspace file named by the string field `path_field` of its input (like `write_file`): each
/// call that succeeds is followed by a `TOOLOOP_EVENT_FILE_CHANGE` event with what the file held before
/// (for undo and diffs), progress detection counts it as a change, and an `Edit` permission rule covers it.
pub const TOOLOOP_TOOL_KIND_WRITE: tooloop_tool_kind = 2;
/// Runs a shell command (like `bash`).
pub const TOOLOOP_TOOL_KIND_SHELL: tooloop_tool_kind = 3;
/// Reaches the network (like `web_fetch`).
pub const TOOLOOP_TOOL_KIND_NETWORK: tooloop_tool_kind = 4;

/// Say what the tool `name` (a C tool, or any other registered tool) does: `kind` is one of the
/// `TOOLOOP_TOOL_KIND_*` codes; `path_field` names the input field holding the path a
/// `TOOLOOP_TOOL_KIND_WRITE` tool writes (a `"type": "string"` property of its schema; relative to the
/// config's `"workspace"`, else the current folder, or absolute inside it) and must be NULL for the other
/// kinds. The built-in tools have theirs already. Call it after registering the tool and before a run.
/// `path_field` is copied.
///
/// Statuses: `TOOLOOP_INVALID_ARGUMENT` (NULL `agent` or `name`, no tool of that name, an unknown `kind`, a
/// `path_field` missing for `TOOLOOP_TOOL_KIND_WRITE`, given for another kind, or not a string property of
/// the schema), `TOOLOOP_INVALID_UTF8`, `TOOLOOP_PANIC`. Threads: the agent's thread, not during a run.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_agent_set_tool_kind(
    agent: *mut tooloop_agent,
    name: *const c_char,
    kind: tooloop_tool_kind,
    path_field: *const c_char,
) -> tooloop_status {
    boundary("tooloop_agent_set_tool_kind", move || {
        let a = handle(agent, "agent")?;
        let name = str_arg(name, "name")?;
        let path_field = if path_field.is_null() { None } else { Some(str_arg(path_field, "path_field")?) };
        let kind_name = match kind {
            TOOLOOP_TOOL_KIND_OTHER => None,
            TOOLOOP_TOOL_KIND_READ => Some("read"),
            TOOLOOP_TOOL_KIND_WRITE => Some("write"),
            TOOLOOP_TOOL_KIND_SHELL => Some("shell"),
            TOOLOOP_TOOL_KIND_NETWORK => Some("network"),
            other => {
                return Err(Failure::invalid(format!(
                    "unknown tool kind {other}: the kinds are TOOLOOP_TOOL_KIND_OTHER (0), _READ (1), _WRITE (2), \
                     _SHELL (3) and _NETWORK (4)"
                )));
            }
        };
        let Some(tool) = a.agent.tools().get(name) else {
            return Err(Failure::invalid(format!("no tool named '{name}' is registered")));
        };
        let parsed = tooloop::ToolKind::parse(kind_name, path_field, &tool.spec.input_schema)
            .map_err(|m| Failure::invalid(format!("tool '{name}': {m}")))?;
        let tool = tool.kind(parsed).map_err(|e| Failure::invalid(e.to_string()))?;
        a.agent.tools().unregister(name);
        a.agent.tools().register(tool).map_err(Failure::from)
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
        a.agent.tools().register(tool.timeout(std::time::Duration::from_secs_f64(seconds))).map_err(Failure::from)
    })
}

/// Answer a tool call with `text` (UTF-8, copied; it may be JSON). A later set replaces an earlier one.
///
/// If this call fails on its `text` (NULL or invalid UTF-8), the result becomes an error result saying so,
/// unless a later set succeeds: the model learns the tool misbehaved instead of getting nothing.
///
/// Statuses: `TOOLOOP_OK`, `TOOLOOP_INVALID_ARGUMENT` (NULL `result` or `text`), `TOOLOOP_INVALID_UTF8`,
/// `TOOLOOP_PANIC`. Threads: only inside the tool callback that received `result`.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_tool_result_set_text(
    result: *mut tooloop_tool_result,
    text: *const c_char,
) -> tooloop_status {
    boundary("tooloop_tool_result_set_text", || set_outcome(result, text, "text", true))
}

/// Answer a tool call with an error the model reads and can act on (an `is_error` tool result; the run
/// goes on). `message` is UTF-8, copied. A later set replaces an earlier one. To end the run instead,
/// return non-zero from the callback (this message is then added to the abort detail).
///
/// Statuses: `TOOLOOP_OK`, `TOOLOOP_INVALID_ARGUMENT` (NULL `result` or `message`), `TOOLOOP_INVALID_UTF8`,
/// `TOOLOOP_PANIC`. Threads: only inside the tool callback that received `result`.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_tool_result_set_error(
    result: *mut tooloop_tool_result,
    message: *const c_char,
) -> tooloop_status {
    boundary("tooloop_tool_result_set_error", || set_outcome(result, message, "message", false))
}

/// Answer a tool call with content blocks: `content_json` is a JSON array such as `[{"type": "text",
/// "text": "the screen:"}, {"type": "image", "source": {"type": "base64", "media_type": "image/png",
/// "data": "<base64>"}}]` (text, image and document blocks; copied). The model receives them as the
/// `tool_result` content, byte for byte; an image over the provider's size limit becomes an error result
/// saying so instead. A later set replaces an earlier one.
///
/// If this call fails (NULL, invalid UTF-8 or JSON, not an array of blocks), the result becomes an error
/// result saying why, unless a later set succeeds.
///
/// Statuses: `TOOLOOP_OK`, `TOOLOOP_INVALID_ARGUMENT` (NULL `result` or `content_json`, or not an array of
/// content blocks), `TOOLOOP_INVALID_UTF8`, `TOOLOOP_INVALID_JSON`, `TOOLOOP_PANIC`. Threads: only inside the
/// tool callback that received `result`.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_tool_result_set_content(
    result: *mut tooloop_tool_result,
    content_json: *const c_char,
) -> tooloop_status {
    boundary("tooloop_tool_result_set_content", || {
        let r = handle_mut(result, "result")?;
        let parsed = str_arg(content_json, "content_json").and_then(|t| {
            let v: Value = serde_json::from_str(t)
                .map_err(|e| Failure::new(TOOLOOP_INVALID_JSON, format!("content_json does not parse: {e}")))?;
            tooloop::parse_blocks(&v)
                .map_err(|m| Failure::new(TOOLOOP_INVALID_ARGUMENT, format!("content_json: {m}")))?;
            Ok(v)
        });
        match parsed {
            Ok(Value::Array(blocks)) => {
                r.outcome = Some(Ok(String::new()));
                r.content = Some(blocks);
                Ok(())
            }
            Ok(_) => Err(Failure::new(TOOLOOP_INVALID_ARGUMENT, "content_json must be an array")),
            Err(f) => {
                r.content = None;
                r.outcome = Some(Err(format!("the tool's result could not be set: {}", f.message)));
                Err(f)
            }
        }
    })
}

fn set_outcome(result: *mut tooloop_tool_result, text: *const c_char, what: &str, ok: bool) -> FfiResult<()> {
    let r = handle_mut(result, "result")?;
    r.content = None;
    match str_arg(text, what) {
        Ok(t) => {
            r.outcome = Some(if ok { Ok(t.to_string()) } else { Err(t.to_string()) });
            Ok(())
        }
        Err(f) => {
            r.outcome = Some(Err(format!("the tool's result could not be set: {}", f.message)));
            Err(f)
        }
    }
}

/// Whether the run this tool call belongs to was cancelled: a long-running tool should poll it and return
/// early (with any result; the run ends with `TOOLOOP_CANCELLED` anyway).
///
/// Returns false for NULL. Threads: only inside the tool callback that received `result`.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_tool_result_is_cancelled(result: *const tooloop_tool_result) -> bool {
    let mut cancelled = false;
    boundary_void("tooloop_tool_result_is_cancelled", || {
        if let Ok(r) = handle(result, "result") {
            cancelled = r.cancel.is_cancelled();
        }
    });
    cancelled
}
