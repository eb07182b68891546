//! Hooks implemented by C callbacks (`tooloop_agent_set_hook`), answering through a `tooloop_hook_result`
//! handle like a tool's.

use std::ffi::{c_char, c_void};
use std::sync::Arc;

use serde_json::Value;
use tooloop::Request;
use tooloop::ToolUseBlock;
use tooloop::{BeforeTool, Hooks, ToolResultView};

use crate::agent::tooloop_agent;
use crate::ffi::{
    Failure, FfiResult, UserData, boundary, c_string_lossy, handle, handle_mut, lock, str_arg, tooloop_free_fn,
};
use crate::status_codes::{TOOLOOP_INVALID_JSON, tooloop_status};

/// A hook failed: its callback returned non-zero (or answered with something invalid). The run ends;
/// every call of the turn has its result, so the conversation is valid and `tooloop_agent_resume` goes on.
/// `tooloop_last_error()` names the hook.
pub const TOOLOOP_HOOK_FAILED: tooloop_status = 18;

/// Where a hook callback puts its answer. Owned by the library and lent to one callback call: valid only
/// until the callback returns; never free it. Setting nothing means "carry on".
pub struct tooloop_hook_result {
    kind: &'static str,
    text: Option<String>,
    deny: Option<String>,
    input: Option<Value>,
    invalid: Option<String>,
}

/// A hook implemented by the host (see `tooloop_agent_set_hook`).
///
/// `userdata` is the pointer given to `tooloop_agent_set_hook`; `event_json` is what the hook is about
/// (borrowed for the call): for `"before_tool"` the call `{"id", "name", "input"}`; for `"after_tool"` the
/// call and its result `{"id", "name", "input", "content", "is_error", "denied"}`; for `"before_request"` the
/// request as it will be sent (Messages API shape); for `"on_stop"` the run's result (as
/// `tooloop_agent_run` returns it); for `"after_check"` the failed check and the message that goes back to the
/// model `{"check": {"command", "passed", "exit_code", "output_tail", "runs"}, "message"}`. `result` is where
/// the answer goes (borrowed for the call):
/// - `"before_tool"`: `tooloop_hook_result_set_error(result, reason)` denies the call (the model reads the
///   reason); `tooloop_hook_result_set_input(result, json)` runs it with that input instead (checked
///   against the permission rules again).
/// - `"after_tool"`: `tooloop_hook_result_set_text(result, text)` replaces the result the model sees.
/// - `"before_request"`: observe only.
/// - `"on_stop"`: `tooloop_hook_result_set_text(result, text)` sends `text` as a new user message and the run
///   goes on (within `max_turns`).
/// - `"after_check"`: `tooloop_hook_result_set_text(result, text)` replaces the message the model reads of
///   the failed check (e.g. the message with a hint appended).
///
/// Return 0 to carry on; a non-zero value fails the hook: the run ends with `TOOLOOP_HOOK_FAILED`.
///
/// Threads: called on the thread that called `tooloop_agent_run` / `tooloop_agent_resume`, one call at a
/// time. Same rules as `tooloop_tool_fn`.
pub type tooloop_hook_fn = Option<
    unsafe extern "C" fn(userdata: *mut c_void, event_json: *const c_char, result: *mut tooloop_hook_result) -> i32,
>;

/// A hook held by an agent: the callback and its host data.
pub(crate) struct HostHook {
    f: unsafe extern "C" fn(*mut c_void, *const c_char, *mut tooloop_hook_result) -> i32,
    userdata: UserData,
}

impl HostHook {
    fn call(&self, kind: &'static str, event: &Value) -> Result<tooloop_hook_result, String> {
        let json = c_string_lossy(&event.to_string());
        let mut result = tooloop_hook_result { kind, text: None, deny: None, input: None, invalid: None };
        // SAFETY: the host's callback with its own userdata; both pointers we pass live for the call.
        let rc = unsafe { (self.f)(self.userdata.ptr, json.as_ptr(), &mut result) };
        if rc != 0 {
            return Err(format!("the {kind} callback returned {rc}"));
        }
        if let Some(why) = result.invalid.take() {
            return Err(why);
        }
        Ok(result)
    }
}

/// The kinds, as C names them.
fn kind_name(kind: &str) -> Option<&'static str> {
    tooloop::HOOK_KINDS.iter().copied().find(|k| *k == kind)
}

/// Install `hook` as the core's hook of `kind` (None: remove it).
pub(crate) fn install(hooks: &mut Hooks, kind: &'static str, hook: Option<Arc<HostHook>>) {
    match kind {
        "before_tool" => {
            hooks.before_tool = hook.map(|h| -> tooloop::BeforeToolHook {
                Arc::new(move |call: &ToolUseBlock| {
                    let event = serde_json::json!({"id": call.id, "name": call.name, "input": call.input});
                    let r = h.call("before_tool", &event)?;
                    Ok(match (r.deny, r.input) {
                        (Some(reason), _) => BeforeTool::Deny(reason),
                        (None, Some(input)) => BeforeTool::Input(input),
                        (None, None) => BeforeTool::Continue,
                    })
                })
            })
        }
        "after_tool" => {
            hooks.after_tool = hook.map(|h| -> tooloop::AfterToolHook {
                Arc::new(move |call: &ToolUseBlock, r: &ToolResultView| {
                    let event = serde_json::json!({"id": call.id, "name": call.name, "input": call.input,
                        "content": r.content, "is_error": r.is_error, "denied": r.denied});
                    Ok(h.call("after_tool", &event)?.text)
                })
            })
        }
        "before_request" => {
            hooks.before_request = hook.map(|h| -> tooloop::BeforeRequestHook {
                Arc::new(move |request: &Request| {
                    let event = serde_json::to_value(request).unwrap_or(Value::Null);
                    h.call("before_request", &event).map(|_| ())
                })
            })
        }
        "after_check" => {
            hooks.after_check = hook.map(|h| -> tooloop::AfterCheckHook {
                Arc::new(move |check: &tooloop::CheckResult, message: &str| {
                    let event = serde_json::json!({"check": check, "message": message});
                    Ok(h.call("after_check", &event)?.text)
                })
            })
        }
        _ => {
            hooks.on_stop = hook.map(|h| -> tooloop::OnStopHook {
                Arc::new(move |result: &tooloop::RunResult| {
                    let event = serde_json::to_value(result).unwrap_or(Value::Null);
                    Ok(h.call("on_stop", &event)?.text)
                })
            })
        }
    }
}

/// Set the hook of kind `kind` (`"before_tool"`, `"after_tool"`, `"before_request"`, `"on_stop"` or
/// `"after_check"`; see `tooloop_hook_fn`) on an agent. A NULL `fn` removes that hook. Setting a hook
/// replaces the previous hook of that kind. Order around each tool call: the permission rules
/// (`"permission_rules"` in the config), `"before_tool"`, the permission callback, the tool, `"after_tool"`.
/// Every tool gets them: host tools, built-in tools, MCP tools and the calls of a subagent (which inherits
/// all but `"on_stop"` and `"after_check"`). `"after_check"` runs when the config's `"check"` failed, before
/// the model reads why.
///
/// Ownership: `userdata` is the host's; tooloop calls `userdata_free(userdata)` (if not NULL) exactly once:
/// when the hook is replaced or removed by a later call, or when the agent is freed. When this call fails for
/// any reason (even a NULL argument), or when `fn` is NULL, it runs before this function returns.
///
/// Statuses: `TOOLOOP_OK`, `TOOLOOP_INVALID_ARGUMENT` (NULL `agent` or `kind`, an unknown kind),
/// `TOOLOOP_INVALID_UTF8`, `TOOLOOP_BUSY` (a run is in progress), `TOOLOOP_PANIC`. Threads: the agent's
/// thread, not during a run.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_agent_set_hook(
    agent: *mut tooloop_agent,
    kind: *const c_char,
    r#fn: tooloop_hook_fn,
    userdata: *mut c_void,
    userdata_free: tooloop_free_fn,
) -> tooloop_status {
    // Owned from the first line, so every failure path below frees it exactly once.
    let userdata = UserData::new(userdata, userdata_free);
    boundary("tooloop_agent_set_hook", move || {
        let a = handle(agent, "agent")?;
        let kind_text = str_arg(kind, "kind")?;
        let Some(kind) = kind_name(kind_text) else {
            return Err(Failure::invalid(format!(
                "unknown hook kind {kind_text:?}; the kinds are \"before_tool\", \"after_tool\", \"before_request\", \
                 \"on_stop\" and \"after_check\""
            )));
        };
        let previous = a
            .agent
            .when_idle(|| {
                let host = r#fn.map(|f| Arc::new(HostHook { f, userdata }));
                a.agent.update_hooks(|h| install(h, kind, host.clone()));
                Ok(match host {
                    Some(h) => lock(&a.hooks).insert(kind, h),
                    None => lock(&a.hooks).remove(kind),
                })
            })
            .map_err(Failure::from)?;
        // Outside every lock: the host's destructor may call back into tooloop.
        drop(previous);
        Ok(())
    })
}

fn set_hook_string(
    result: *mut tooloop_hook_result,
    text: *const c_char,
    what: &str,
    put: impl FnOnce(&mut tooloop_hook_result, String) -> FfiResult<()>,
) -> FfiResult<()> {
    let r = handle_mut(result, "result")?;
    match str_arg(text, what) {
        Ok(t) => {
            let t = t.to_string();
            put(r, t).inspect_err(|f| r.invalid = Some(f.message.clone()))
        }
        Err(f) => {
            r.invalid = Some(format!("the hook's answer could not be set: {}", f.message));
            Err(f)
        }
    }
}

/// Answer an `"after_tool"` hook with the result text the model sees instead, an `"on_stop"` hook with a
/// new user message (the run goes on), or an `"after_check"` hook with the failed check's message the model
/// reads instead. `text` is UTF-8, copied. A later set replaces an earlier one.
///
/// If this call fails (NULL or invalid UTF-8 text, a hook kind that takes no text), the hook fails unless a
/// later set succeeds: the run ends with `TOOLOOP_HOOK_FAILED`.
///
/// Statuses: `TOOLOOP_OK`, `TOOLOOP_INVALID_ARGUMENT`, `TOOLOOP_INVALID_UTF8`, `TOOLOOP_PANIC`. Threads: only
/// inside the hook callback that received `result`.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_hook_result_set_text(
    result: *mut tooloop_hook_result,
    text: *const c_char,
) -> tooloop_status {
    boundary("tooloop_hook_result_set_text", || {
        set_hook_string(result, text, "text", |r, t| {
            if !matches!(r.kind, "after_tool" | "on_stop" | "after_check") {
                return Err(Failure::invalid(format!(
                    "a {} hook takes no text (only after_tool, on_stop and after_check do)",
                    r.kind
                )));
            }
            r.text = Some(t);
            r.invalid = None;
            Ok(())
        })
    })
}

/// Deny the call a `"before_tool"` hook is about: the tool does not run and the model reads "Permission
/// denied: <reason>". `reason` is UTF-8, copied.
///
/// Statuses: `TOOLOOP_OK`, `TOOLOOP_INVALID_ARGUMENT` (NULL, or not a before_tool hook),
/// `TOOLOOP_INVALID_UTF8`, `TOOLOOP_PANIC`. Threads: only inside the hook callback that received `result`.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_hook_result_set_error(
    result: *mut tooloop_hook_result,
    reason: *const c_char,
) -> tooloop_status {
    boundary("tooloop_hook_result_set_error", || {
        set_hook_string(result, reason, "reason", |r, t| {
            if r.kind != "before_tool" {
                return Err(Failure::invalid(format!("only a before_tool hook denies a call, not {}", r.kind)));
            }
            r.deny = Some(t);
            r.invalid = None;
            Ok(())
        })
    })
}

/// Run the call a `"before_tool"` hook is about with `input_json` (a JSON object, copied) instead of the
/// model's input. The new input is checked against the permission rules again.
///
/// Statuses: `TOOLOOP_OK`, `TOOLOOP_INVALID_ARGUMENT` (NULL, not an object, or not a before_tool hook),
/// `TOOLOOP_INVALID_UTF8`, `TOOLOOP_INVALID_JSON`, `TOOLOOP_PANIC`. Threads: only inside the hook callback
/// that received `result`.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_hook_result_set_input(
    result: *mut tooloop_hook_result,
    input_json: *const c_char,
) -> tooloop_status {
    boundary("tooloop_hook_result_set_input", || {
        set_hook_string(result, input_json, "input_json", |r, t| {
            if r.kind != "before_tool" {
                return Err(Failure::invalid(format!("only a before_tool hook replaces an input, not {}", r.kind)));
            }
            let v: Value = serde_json::from_str(&t)
                .map_err(|e| Failure::new(TOOLOOP_INVALID_JSON, format!("input_json is not valid JSON: {e}")))?;
            if !v.is_object() {
                return Err(Failure::invalid("input_json must be a JSON object"));
            }
            r.input = Some(v);
            r.invalid = None;
            Ok(())
        })
    })
}
