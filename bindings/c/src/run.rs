//! The run handle: `tooloop_run`, a run the host steps (`tooloop_agent_start` → `tooloop_run_step`), so a
//! C or C++ host with its own event loop (a GUI, a game loop) never lends a thread to tooloop; with
//! `TOOLOOP_RUN_PAUSE_FOR_APPROVAL`, a tool call that needs a decision pauses the run
//! (`TOOLOOP_STEP_NEEDS_APPROVAL`) until the host answers it (`tooloop_run_approve`). A thin layer over the
//! core's `RunDriver`.
//!
//! Must never: step a run from inside one of its own callbacks (the lock says `TOOLOOP_BUSY`), or leave a
//! run under way when its handle is freed (the core's driver cancels it and answers every call).

use std::ffi::{c_char, c_void};
use std::sync::Mutex;

use tooloop::{ApprovalError, CancelToken, Event, Permission, RunDriver, Step};

use crate::agent::{content_input, tooloop_agent};
use crate::events::{EventSink, tooloop_event_fn};
use crate::ffi::{
    Failure, FfiResult, boundary, boundary_void, handle, opt_str_arg, out_arg, owned_string, str_arg, value_out_arg,
    write_out, write_value,
};
use crate::status_codes::{
    TOOLOOP_BUSY, TOOLOOP_ERROR, TOOLOOP_INVALID_ARGUMENT, TOOLOOP_RUN_ENDED, TOOLOOP_RUN_NOT_ENDED,
    TOOLOOP_UNKNOWN_CALL, tooloop_status,
};

/// `tooloop_agent_start` flag: a tool call that needs a decision pauses the run
/// (`TOOLOOP_STEP_NEEDS_APPROVAL`) instead of going to the permission callback. Which calls: every call the
/// callback would be asked about — each one not already allowed or refused by the permission rules or a
/// `before_tool` hook. The calls of one batch (consecutive parallel-safe tools) pause together; a later
/// call pauses after the calls before it ran. The agent's permission callback is not called for the run's
/// own calls; a subagent's (`task` tool) calls are still asked of it, and refused when none is set.
pub const TOOLOOP_RUN_PAUSE_FOR_APPROVAL: u32 = 1;

/// What a `tooloop_run_step` came to: one of the `TOOLOOP_STEP_*` codes.
pub type tooloop_step_kind = i32;
/// The run goes on: step again (when the host's loop has time).
pub const TOOLOOP_STEP_CONTINUE: tooloop_step_kind = 0;
/// Tool calls wait for the host's answer: read them with `tooloop_run_pending_approvals`, answer each with
/// `tooloop_run_approve`, then step again. A step before every call is answered runs nothing and says
/// `TOOLOOP_STEP_NEEDS_APPROVAL` again.
pub const TOOLOOP_STEP_NEEDS_APPROVAL: tooloop_step_kind = 1;
/// The run has ended: `tooloop_run_result` gives its outcome. Stepping again is `TOOLOOP_RUN_ENDED`.
pub const TOOLOOP_STEP_DONE: tooloop_step_kind = 2;

/// `tooloop_run_approve` decision: run the call.
pub const TOOLOOP_DECISION_ALLOW: i32 = 0;
/// `tooloop_run_approve` decision: refuse the call; the model reads "Permission denied: <reason>".
pub const TOOLOOP_DECISION_DENY: i32 = 1;
/// `tooloop_run_approve` decision: run the call only with no power to change anything (see
/// `tooloop_permission_set_read_only`).
pub const TOOLOOP_DECISION_ALLOW_READ_ONLY: i32 = 2;

/// The reason a denied call gets when the host gave none.
const DEFAULT_DENIAL: &str = "the host denied this tool call";

/// A run under way, stepped by the host. Create with `tooloop_agent_start`, free with `tooloop_run_free`.
///
/// Threads: one thread at a time steps, answers and reads it (not necessarily the agent's creator);
/// `tooloop_run_cancel` may be called from any thread at any time until `tooloop_run_free`. Tools, hooks,
/// the permission callback and the step's event callback run on the thread that steps, within the step.
/// While the run is under way its agent is busy (`TOOLOOP_BUSY` for a run, resume, compact or reset).
pub struct tooloop_run {
    cancel: CancelToken,
    state: Mutex<State>,
}

struct State {
    /// The run, until it has ended.
    driver: Option<RunDriver>,
    /// Its outcome once it has ended: the result JSON, or the failure (status and detail).
    outcome: Option<Result<String, (tooloop_status, String)>>,
}

impl tooloop_run {
    /// The state, or `TOOLOOP_BUSY` while a step holds it (a callback of this run calling back in).
    fn state(&self) -> FfiResult<std::sync::MutexGuard<'_, State>> {
        match self.state.try_lock() {
            Ok(g) => Ok(g),
            Err(std::sync::TryLockError::Poisoned(p)) => Ok(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => {
                Err(Failure::new(TOOLOOP_BUSY, "a step of this run is in progress (called from one of its callbacks?)"))
            }
        }
    }
}

/// Start a run to step (see `tooloop_run_step`): the input is checked and stored now; nothing is sent
/// until the first step.
///
/// - `input`: the user's message (UTF-8, copied; a JSON array of content blocks is taken as blocks, as in
///   `tooloop_agent_run`); NULL resumes the conversation instead (as `tooloop_agent_resume`).
/// - `flags`: 0, or `TOOLOOP_RUN_PAUSE_FOR_APPROVAL`.
/// - `out`: on success `*out` receives the run, which the caller owns and frees with `tooloop_run_free`;
///   on failure it is left unchanged.
///
/// The run keeps the agent's core alive: free the run before the agent (if the agent is freed first, its
/// callbacks' `userdata_free` run when the run is freed).
///
/// Statuses: `TOOLOOP_OK`; `TOOLOOP_INVALID_ARGUMENT` (NULL `agent` or `out`, an unknown flag),
/// `TOOLOOP_INVALID_UTF8`, `TOOLOOP_BUSY` (a run is in progress on the agent), `TOOLOOP_CONFIG` (nothing to
/// resume; an image over the provider's limit), `TOOLOOP_IO` (the session file), `TOOLOOP_PANIC`.
/// Threads: the agent's thread.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_agent_start(
    agent: *mut tooloop_agent,
    input: *const c_char,
    flags: u32,
    out: *mut *mut tooloop_run,
) -> tooloop_status {
    boundary("tooloop_agent_start", || {
        let a = handle(agent, "agent")?;
        out_arg(out, "out")?;
        if flags & !TOOLOOP_RUN_PAUSE_FOR_APPROVAL != 0 {
            return Err(Failure::invalid(format!(
                "flags: unknown bits {:#x}",
                flags & !TOOLOOP_RUN_PAUSE_FOR_APPROVAL
            )));
        }
        let input = match opt_str_arg(input, "input")? {
            Some(text) => Some(content_input(text, false)?.unwrap_or_else(|| vec![tooloop::ContentBlock::text(text)])),
            None => None,
        };
        let cancel = CancelToken::new();
        let mut driver = a.agent.start(input, cancel.clone())?;
        driver.pause_for_approvals(flags & TOOLOOP_RUN_PAUSE_FOR_APPROVAL != 0);
        let run = tooloop_run { cancel, state: Mutex::new(State { driver: Some(driver), outcome: None }) };
        write_out(out, Box::into_raw(Box::new(run)));
        Ok(())
    })
}

/// Take the run one step further: everything up to the next network read of the model's answer runs (the
/// request, the tool calls of the turn before, their hooks), then one read; a step also ends when a model
/// turn is complete, before its tool calls run, and when calls wait for approval. The step's events go to
/// `on_event(event_userdata, event)` (NULL: not wanted), on this thread, before it returns.
///
/// On success `*out_kind` receives `TOOLOOP_STEP_CONTINUE`, `TOOLOOP_STEP_NEEDS_APPROVAL` or
/// `TOOLOOP_STEP_DONE` (then `tooloop_run_result` has the outcome: a failed run is a successful step); on
/// failure it is left unchanged.
///
/// Statuses: `TOOLOOP_OK`, `TOOLOOP_INVALID_ARGUMENT` (NULL `run` or `out_kind`), `TOOLOOP_RUN_ENDED` (a
/// step after `TOOLOOP_STEP_DONE`), `TOOLOOP_BUSY` (called from one of this run's callbacks),
/// `TOOLOOP_PANIC`. Threads: as `tooloop_run`; a step blocks for at most one network read (cancel ends it
/// within 200 ms) plus the tools it runs.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_run_step(
    run: *const tooloop_run,
    on_event: tooloop_event_fn,
    event_userdata: *mut c_void,
    out_kind: *mut tooloop_step_kind,
) -> tooloop_status {
    boundary("tooloop_run_step", || {
        let r = handle(run, "run")?;
        value_out_arg(out_kind, "out_kind")?;
        let mut st = r.state()?;
        let Some(driver) = st.driver.as_mut() else {
            return Err(Failure::new(TOOLOOP_RUN_ENDED, "the run has ended: tooloop_run_result has its outcome"));
        };
        let sink = EventSink { f: on_event, userdata: event_userdata };
        let kind = match driver.next(&mut |ev: &Event| sink.emit(ev)) {
            Step::NeedsApproval(_) => TOOLOOP_STEP_NEEDS_APPROVAL,
            Step::Done(outcome) => {
                let outcome = match outcome {
                    Ok(result) => serde_json::to_string(&result)
                        .map_err(|e| (TOOLOOP_ERROR, format!("serializing the result: {e}"))),
                    Err(e) => {
                        let f = Failure::from(e);
                        Err((f.status, f.message))
                    }
                };
                st.outcome = Some(outcome);
                st.driver = None;
                TOOLOOP_STEP_DONE
            }
            _ => TOOLOOP_STEP_CONTINUE,
        };
        write_value(out_kind, kind);
        Ok(())
    })
}

/// The tool calls waiting for an answer now: a JSON array, `[{"call_id": "toolu_...", "tool": "bash",
/// "input": {...}, "reason": "<the permission rule that asks>" | null, "read_only": false}, ...]` in the
/// order the model made them; `[]` when none waits (also after the end). A subagent's call (the `task` tool's
/// child, which waits with the run) also has `"agent_type"` (the child's type) and `"parent_id"` (the `task`
/// call's id); answer it with `tooloop_run_approve` like any other.
///
/// On success `*out_json` receives the string, which the caller frees with `tooloop_string_free`; on failure
/// it is left unchanged.
///
/// Statuses: `TOOLOOP_OK`, `TOOLOOP_INVALID_ARGUMENT` (NULL `run` or `out_json`), `TOOLOOP_BUSY` (from one of
/// this run's callbacks), `TOOLOOP_PANIC`. Threads: as `tooloop_run`.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_run_pending_approvals(run: *const tooloop_run, out_json: *mut *mut c_char) -> tooloop_status {
    boundary("tooloop_run_pending_approvals", || {
        let r = handle(run, "run")?;
        out_arg(out_json, "out_json")?;
        let st = r.state()?;
        let pending = st.driver.as_ref().map(RunDriver::pending_approvals).unwrap_or_default();
        let json =
            serde_json::to_string(&pending).map_err(|e| Failure::new(TOOLOOP_ERROR, format!("serializing: {e}")))?;
        write_out(out_json, owned_string(json)?);
        Ok(())
    })
}

/// Answer a waiting tool call (see `tooloop_run_pending_approvals`): `decision` is
/// `TOOLOOP_DECISION_ALLOW`, `TOOLOOP_DECISION_DENY` (the model reads "Permission denied: <reason>";
/// `reason` UTF-8, copied; NULL: "the host denied this tool call") or `TOOLOOP_DECISION_ALLOW_READ_ONLY`.
/// `reason` is ignored unless denying. An answer given again before the next step replaces the first.
/// Nothing runs until the next `tooloop_run_step`.
///
/// Statuses: `TOOLOOP_OK`, `TOOLOOP_INVALID_ARGUMENT` (NULL `run` or `call_id`, an unknown decision),
/// `TOOLOOP_INVALID_UTF8` (`call_id` or `reason`), `TOOLOOP_UNKNOWN_CALL` (no call with that id waits: never
/// asked, or already settled by a step), `TOOLOOP_RUN_ENDED`, `TOOLOOP_BUSY` (from one of this run's
/// callbacks), `TOOLOOP_PANIC`. Threads: as `tooloop_run`.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_run_approve(
    run: *const tooloop_run,
    call_id: *const c_char,
    decision: i32,
    reason: *const c_char,
) -> tooloop_status {
    boundary("tooloop_run_approve", || {
        let r = handle(run, "run")?;
        let call_id = str_arg(call_id, "call_id")?;
        let decision = match decision {
            TOOLOOP_DECISION_ALLOW => Permission::Allow,
            TOOLOOP_DECISION_ALLOW_READ_ONLY => Permission::AllowReadOnly,
            TOOLOOP_DECISION_DENY => {
                Permission::Deny(opt_str_arg(reason, "reason")?.unwrap_or(DEFAULT_DENIAL).to_string())
            }
            other => {
                return Err(Failure::new(TOOLOOP_INVALID_ARGUMENT, format!("decision: unknown value {other}")));
            }
        };
        let mut st = r.state()?;
        let Some(driver) = st.driver.as_mut() else {
            return Err(Failure::new(TOOLOOP_RUN_ENDED, "the run has ended"));
        };
        driver.approve(call_id, decision).map_err(|e| match e {
            ApprovalError::Ended => Failure::new(TOOLOOP_RUN_ENDED, "the run has ended"),
            _ => Failure::new(TOOLOOP_UNKNOWN_CALL, format!("no tool call {call_id:?} waits for approval")),
        })
    })
}

/// The outcome of a run that has ended (`TOOLOOP_STEP_DONE`): on success the run's result JSON (as
/// `tooloop_agent_run`'s `result_json`) goes to `*result_json` (NULL: not wanted), which the caller frees
/// with `tooloop_string_free`; a failed run returns its status (`TOOLOOP_CANCELLED`, `TOOLOOP_MAX_TURNS`, the
/// API codes, ... as `tooloop_agent_run`) with the detail in `tooloop_last_error()`, and leaves
/// `*result_json` unchanged. May be called again: the same answer.
///
/// Statuses: the run's; `TOOLOOP_INVALID_ARGUMENT` (NULL `run`), `TOOLOOP_RUN_NOT_ENDED` (step it to
/// `TOOLOOP_STEP_DONE` first), `TOOLOOP_BUSY` (from one of this run's callbacks), `TOOLOOP_PANIC`. Threads:
/// as `tooloop_run`.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_run_result(run: *const tooloop_run, result_json: *mut *mut c_char) -> tooloop_status {
    boundary("tooloop_run_result", || {
        let r = handle(run, "run")?;
        let st = r.state()?;
        match &st.outcome {
            None => Err(Failure::new(TOOLOOP_RUN_NOT_ENDED, "the run has not ended: step it to TOOLOOP_STEP_DONE")),
            Some(Ok(json)) => {
                if !result_json.is_null() {
                    write_out(result_json, owned_string(json.clone())?);
                }
                Ok(())
            }
            Some(Err((status, message))) => Err(Failure::new(*status, message.clone())),
        }
    })
}

/// Cancel the run: the step in progress (or the next one) ends it within about 200 ms, with
/// `TOOLOOP_CANCELLED` from `tooloop_run_result`; calls waiting for approval are answered as interrupted
/// and none of them runs. The conversation stays valid (`tooloop_agent_resume` or a new start continues
/// it). Does nothing once the run has ended.
///
/// Statuses: `TOOLOOP_OK`, `TOOLOOP_INVALID_ARGUMENT` (NULL `run`), `TOOLOOP_PANIC`. Threads: any thread, at
/// any time until `tooloop_run_free`; also from the run's own callbacks.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_run_cancel(run: *const tooloop_run) -> tooloop_status {
    boundary("tooloop_run_cancel", || {
        handle(run, "run")?.cancel.cancel();
        Ok(())
    })
}

/// Free a run. One still under way is cancelled and ended here (at once: every wait ends on the cancel;
/// waiting calls are answered as interrupted), so the conversation stays valid and the agent is free for
/// the next run. Its events go nowhere.
///
/// NULL is a no-op. Not during a step (not from its callbacks, nor while another thread steps it);
/// freeing twice is undefined behaviour.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_run_free(run: *mut tooloop_run) {
    if run.is_null() {
        return;
    }
    boundary_void("tooloop_run_free", || {
        // SAFETY: created by Box::into_raw in tooloop_agent_start, freed once per the contract.
        drop(unsafe { Box::from_raw(run) });
    });
}
