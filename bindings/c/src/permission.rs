//! The permission handle: the host's permission hook (`tooloop_agent_set_permission`) and the
//! `tooloop_permission` answer it gives the reason of a denial through.
//!
//! Must never: run a replaced hook's destructor while a run may still call the hook.

use std::ffi::{c_char, c_void};
use std::sync::Arc;

use tooloop::ToolUseBlock;
use tooloop::{Permission, PermissionHook};

use crate::agent::tooloop_agent;
use crate::ffi::{
    Failure, HostHeld, UserData, boundary, c_string_lossy, handle, handle_mut, lock, str_arg, tooloop_free_fn,
};
use crate::status_codes::tooloop_status;

/// Where a permission callback puts the reason of a denial (`tooloop_permission_set_reason`). Owned by the
/// library and lent to one callback call: valid only until the callback returns; never free it.
pub struct tooloop_permission {
    reason: Option<String>,
    read_only: bool,
}

/// Decides, before each tool call of a run, whether the call may run (see `tooloop_agent_set_permission`).
///
/// `userdata` is the pointer given to `tooloop_agent_set_permission`; `call_json` is the call the model made,
/// `{"id": "toolu_...", "name": "...", "input": {...}}` (borrowed for the call; read it with
/// `tooloop_json_get`, e.g. pointer `"/name"`); `answer` is where the reason of a denial goes, through
/// `tooloop_permission_set_reason` (borrowed for the call). Return 0 to let the tool run; a non-zero value
/// denies the call: the tool does not run, and the model reads the error result "Permission denied:
/// <reason>", where the reason is the one set on `answer`, or "the host denied this tool call" when none was
/// set. The run goes on either way (to end it too, call `tooloop_agent_cancel` from the callback). A reason
/// set on an allowed call is ignored. Returning 0 after `tooloop_permission_set_read_only(answer)` allows the
/// call only with no power to change anything (see there).
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

/// The reason a denied call gets when the permission callback set none.
const DEFAULT_DENIAL: &str = "the host denied this tool call";

/// A permission hook implemented by a C callback.
pub(crate) struct HostPermission {
    f: unsafe extern "C" fn(*mut c_void, *const c_char, *mut tooloop_permission) -> i32,
    userdata: UserData,
}

impl HostPermission {
    fn check(&self, call: &ToolUseBlock) -> Permission {
        let json = serde_json::json!({"id": call.id, "name": call.name, "input": call.input}).to_string();
        // serde_json escapes control characters, so this never has to replace anything.
        let json = c_string_lossy(&json);
        let mut answer = tooloop_permission { reason: None, read_only: false };
        // SAFETY: the host's callback with its own userdata; both pointers we pass live for the call.
        let rc = unsafe { (self.f)(self.userdata.ptr, json.as_ptr(), &mut answer) };
        if rc == 0 && answer.read_only {
            Permission::AllowReadOnly
        } else if rc == 0 {
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
        // outlive this call; and one thread at a time is the agent's rule anyway. Busy: the core says so.
        let previous = a
            .agent
            .when_idle(|| {
                let host = r#fn.map(|f| Arc::new(HostPermission { f, userdata }));
                let hook =
                    host.clone().map(|h| -> PermissionHook { Arc::new(move |call: &ToolUseBlock| h.check(call)) });
                a.agent.set_permission(hook);
                Ok(std::mem::replace(&mut *lock(&a.permission), host.map(|h| h as HostHeld)))
            })
            .map_err(Failure::from)?;
        // Outside every lock: the host's destructor may call back into tooloop.
        drop(previous);
        Ok(())
    })
}

/// Give the reason of a denial: the model reads "Permission denied: <reason>" as the call's error result.
/// `reason` is UTF-8, copied. A later set replaces an earlier one. The reason counts only when the
/// permission callback returns non-zero (deny); without one the model reads "the host denied this tool call".
///
/// If this call fails on its `reason` (NULL or invalid UTF-8), the reason becomes the default one with a
/// note saying the host's reason could not be set, unless a later set succeeds.
///
/// Statuses: `TOOLOOP_OK`, `TOOLOOP_INVALID_ARGUMENT` (NULL `answer` or `reason`), `TOOLOOP_INVALID_UTF8`,
/// `TOOLOOP_PANIC`. Threads: only inside the permission callback that received `answer`.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_permission_set_reason(
    answer: *mut tooloop_permission,
    reason: *const c_char,
) -> tooloop_status {
    boundary("tooloop_permission_set_reason", || {
        let a = handle_mut(answer, "answer")?;
        match str_arg(reason, "reason") {
            Ok(r) => {
                a.reason = Some(r.to_string());
                Ok(())
            }
            Err(f) => {
                a.reason = Some(format!("{DEFAULT_DENIAL} (its reason could not be set: {})", f.message));
                Err(f)
            }
        }
    })
}

/// Allow the call only with no power to change anything, when the permission callback then returns 0: for a
/// call let through because it *looks* harmless ("this command only reads"), so a wrong guess costs nothing.
/// The built-in `bash` then runs under the kernel's read-only sandbox with the network off (refused where the
/// kernel cannot confine it), a read-only tool runs as it is, and any other tool is refused with a reason the
/// model reads. Ignored when the callback returns non-zero (the call is denied).
///
/// Statuses: `TOOLOOP_OK`, `TOOLOOP_INVALID_ARGUMENT` (NULL `answer`), `TOOLOOP_PANIC`. Threads: only inside
/// the permission callback that received `answer`.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_permission_set_read_only(answer: *mut tooloop_permission) -> tooloop_status {
    boundary("tooloop_permission_set_read_only", || {
        handle_mut(answer, "answer")?.read_only = true;
        Ok(())
    })
}
