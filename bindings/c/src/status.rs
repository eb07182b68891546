//! Status codes, their static text and the last error of the calling thread; the mapping from core errors
//! to codes. Every other module reads its codes from here.
//!
//! Must never: renumber a code, or map a core error by matching on its message text (the core's `Error`
//! variants say what happened; a binding that needs a side channel to know is a sign a variant is missing).

use std::ffi::{CStr, CString, c_char};

use tooloop::{ApiErrorKind, Error};

use crate::ffi::{Failure, boundary_void, last_error_ptr};
use crate::hooks::TOOLOOP_HOOK_FAILED;

// ---------------------------------------------------------------------------------------------------------
// Status codes
// ---------------------------------------------------------------------------------------------------------

/// The result of every fallible tooloop function: `TOOLOOP_OK` (0) or one of the `TOOLOOP_*` codes below.
/// Codes are never renumbered; new ones may be added, so treat an unknown non-zero code as a failure and
/// show `tooloop_status_str(code)` and `tooloop_last_error()`.
pub type tooloop_status = i32;

/// Success.
pub const TOOLOOP_OK: tooloop_status = 0;
/// A pointer argument was NULL where one is required, or an argument's value is not acceptable (an unknown
/// or mistyped config key, an invalid tool name, a tool schema that is not a JSON object, a host model
/// response that is not a Messages API message). `tooloop_last_error()` names the argument.
pub const TOOLOOP_INVALID_ARGUMENT: tooloop_status = 1;
/// A string argument is not valid UTF-8.
pub const TOOLOOP_INVALID_UTF8: tooloop_status = 2;
/// A JSON argument does not parse.
pub const TOOLOOP_INVALID_JSON: tooloop_status = 3;
/// A tool with this name is already registered on the agent.
pub const TOOLOOP_DUPLICATE_TOOL: tooloop_status = 4;
/// The agent is running (a run, resume or compaction is in progress on it, possibly on another thread, or
/// the call was made from inside one of its callbacks).
pub const TOOLOOP_BUSY: tooloop_status = 5;
/// A configuration problem found by the core: no API key available, an unknown built-in tool, a workspace
/// that does not exist, a session opened on a non-empty conversation, nothing to resume.
pub const TOOLOOP_CONFIG: tooloop_status = 6;
/// Reading or writing a session file failed (the OS error is in `tooloop_last_error()`), or the file was
/// refused: it is not a tooloop session, it was written in a newer format version, or another agent (in
/// this or another process) has it open.
pub const TOOLOOP_IO: tooloop_status = 7;
/// A bug inside libtooloop was caught at the API boundary (a Rust panic); nothing unwound into C. The
/// handle involved is still safe to free.
pub const TOOLOOP_PANIC: tooloop_status = 8;
/// An error of a kind this version of the header has no code for.
pub const TOOLOOP_ERROR: tooloop_status = 9;
/// `tooloop_agent_cancel` stopped the run. The conversation is valid; `tooloop_agent_resume` continues it.
pub const TOOLOOP_CANCELLED: tooloop_status = 10;
/// The run reached `max_turns` model requests. The conversation is valid; `tooloop_agent_resume` continues.
pub const TOOLOOP_MAX_TURNS: tooloop_status = 11;
/// A tool callback returned non-zero, which ends the run on purpose. `tooloop_last_error()` names the tool.
/// Every tool result up to that point is in the conversation.
pub const TOOLOOP_TOOL_ABORTED: tooloop_status = 12;
/// The host model callback (`tooloop_agent_new_with_model`) returned non-zero.
pub const TOOLOOP_MODEL_FAILED: tooloop_status = 13;
/// `tooloop_json_get`: the JSON document has no value at that pointer.
pub const TOOLOOP_NO_VALUE: tooloop_status = 14;
/// The API answered with an error of a kind that has no code of its own below. The detail has the HTTP
/// status, the API's error type and message, and the request id.
pub const TOOLOOP_API_ERROR: tooloop_status = 20;
/// HTTP 400 `invalid_request_error`: the request is wrong; retrying will not help.
pub const TOOLOOP_BAD_REQUEST: tooloop_status = 21;
/// HTTP 401 `authentication_error`: a missing or invalid API key.
pub const TOOLOOP_AUTHENTICATION: tooloop_status = 22;
/// HTTP 403 `permission_error`.
pub const TOOLOOP_PERMISSION_DENIED: tooloop_status = 23;
/// HTTP 404 `not_found_error`: a wrong model name or base URL.
pub const TOOLOOP_NOT_FOUND: tooloop_status = 24;
/// HTTP 413 `request_too_large`.
pub const TOOLOOP_REQUEST_TOO_LARGE: tooloop_status = 25;
/// HTTP 429 `rate_limit_error`, after the configured retries.
pub const TOOLOOP_RATE_LIMIT: tooloop_status = 26;
/// HTTP 529 `overloaded_error`, after the configured retries.
pub const TOOLOOP_OVERLOADED: tooloop_status = 27;
/// HTTP 500 (and other 5xx) `api_error`, after the configured retries.
pub const TOOLOOP_INTERNAL_SERVER: tooloop_status = 28;
/// The connection could not be made or broke before any content arrived (after the configured retries).
pub const TOOLOOP_CONNECTION: tooloop_status = 30;
/// A timeout fired (connect, idle read, or the total `timeout` of the config).
pub const TOOLOOP_TIMEOUT: tooloop_status = 31;
/// A stream broke after content had arrived (a dropped connection, or an `error` event such as
/// `overloaded_error` mid-stream; the detail names it). The partial turn is kept in the history, the
/// conversation is valid, and `tooloop_agent_resume` retries the turn.
pub const TOOLOOP_STREAM_INTERRUPTED: tooloop_status = 32;
/// The model's response was not valid: malformed JSON from the API, or a host model that returned 0
/// without a valid `tooloop_model_response_set_json`.
pub const TOOLOOP_INVALID_RESPONSE: tooloop_status = 33;
/// The run's final answer did not match the config's `"output_schema"` after `"output_retries"`
/// corrections. `tooloop_last_error()` has the validation errors and the last answer; the conversation is
/// valid.
pub const TOOLOOP_OUTPUT_INVALID: tooloop_status = 40;
/// `tooloop_run_approve`: no tool call with that id waits for approval (never asked, or already settled).
pub const TOOLOOP_UNKNOWN_CALL: tooloop_status = 50;
/// A step, or an answer, for a run that has ended (`TOOLOOP_STEP_DONE`): `tooloop_run_result` has its
/// outcome.
pub const TOOLOOP_RUN_ENDED: tooloop_status = 51;
/// `tooloop_run_result` before the run has ended: step it to `TOOLOOP_STEP_DONE` first.
pub const TOOLOOP_RUN_NOT_ENDED: tooloop_status = 52;

// ---------------------------------------------------------------------------------------------------------
// Core errors → statuses
// ---------------------------------------------------------------------------------------------------------

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

/// The status of a core error.
pub(crate) fn status_of(e: &Error) -> tooloop_status {
    match e {
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
        Error::Busy => TOOLOOP_BUSY,
        Error::DuplicateTool { .. } => TOOLOOP_DUPLICATE_TOOL,
        Error::Host { .. } => TOOLOOP_MODEL_FAILED,
        Error::Io { .. } => TOOLOOP_IO,
        Error::Hook { .. } => TOOLOOP_HOOK_FAILED,
        Error::OutputValidation(_) => TOOLOOP_OUTPUT_INVALID,
        _ => TOOLOOP_ERROR,
    }
}

/// A core error as a status and a message a person can act on.
pub(crate) fn core_failure(e: &Error) -> Failure {
    let message = match e {
        // Said in the C API's own words (its cancel function), as before the core had a variant for it.
        Error::Busy => "a run is in progress on this agent (one at a time; tooloop_agent_cancel stops it)".to_string(),
        // A stream ended by an `error` event: its Display says "interrupted"; the API detail is what to act on.
        Error::StreamInterrupted { api: Some(api), .. } => format!("{e} [API error: {api}]"),
        Error::OutputValidation(f) => format!("{e}. Last answer: {}", f.text),
        _ => e.to_string(),
    };
    Failure::new(status_of(e), message)
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        core_failure(&e)
    }
}

// ---------------------------------------------------------------------------------------------------------
// Library
// ---------------------------------------------------------------------------------------------------------

const VERSION: &CStr = match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
    Ok(v) => v,
    Err(_) => c"unknown",
};

/// The library version, e.g. "0.1.0".
///
/// Returns a static string: never NULL, never free it. Threads: any.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_version() -> *const c_char {
    VERSION.as_ptr()
}

/// A short description of a status code, e.g. "invalid argument" for `TOOLOOP_INVALID_ARGUMENT`.
///
/// Returns a static string for every value, known or not ("unknown status" for codes this version does
/// not know): never NULL, never free it. Threads: any.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_status_str(status: tooloop_status) -> *const c_char {
    let s: &'static CStr = match status {
        TOOLOOP_OK => c"ok",
        TOOLOOP_INVALID_ARGUMENT => c"invalid argument",
        TOOLOOP_INVALID_UTF8 => c"string is not valid UTF-8",
        TOOLOOP_INVALID_JSON => c"invalid JSON",
        TOOLOOP_DUPLICATE_TOOL => c"a tool with this name is already registered",
        TOOLOOP_BUSY => c"the agent is busy: a run is in progress",
        TOOLOOP_CONFIG => c"configuration error",
        TOOLOOP_IO => c"session file I/O error",
        TOOLOOP_PANIC => c"internal error (panic caught at the API boundary)",
        TOOLOOP_ERROR => c"error",
        TOOLOOP_CANCELLED => c"cancelled",
        TOOLOOP_MAX_TURNS => c"max_turns reached",
        TOOLOOP_TOOL_ABORTED => c"a tool aborted the run",
        TOOLOOP_MODEL_FAILED => c"the host model failed",
        TOOLOOP_NO_VALUE => c"no value at this JSON pointer",
        TOOLOOP_HOOK_FAILED => c"a hook failed",
        TOOLOOP_API_ERROR => c"API error",
        TOOLOOP_BAD_REQUEST => c"API error: bad request",
        TOOLOOP_AUTHENTICATION => c"API error: authentication failed",
        TOOLOOP_PERMISSION_DENIED => c"API error: permission denied",
        TOOLOOP_NOT_FOUND => c"API error: not found",
        TOOLOOP_REQUEST_TOO_LARGE => c"API error: request too large",
        TOOLOOP_RATE_LIMIT => c"API error: rate limited",
        TOOLOOP_OVERLOADED => c"API error: overloaded",
        TOOLOOP_INTERNAL_SERVER => c"API error: internal server error",
        TOOLOOP_CONNECTION => c"connection error",
        TOOLOOP_TIMEOUT => c"timeout",
        TOOLOOP_STREAM_INTERRUPTED => c"stream interrupted",
        TOOLOOP_INVALID_RESPONSE => c"invalid response from the model",
        TOOLOOP_OUTPUT_INVALID => c"the final answer does not match output_schema",
        TOOLOOP_UNKNOWN_CALL => c"no tool call with that id waits for approval",
        TOOLOOP_RUN_ENDED => c"the run has ended",
        TOOLOOP_RUN_NOT_ENDED => c"the run has not ended yet",
        _ => c"unknown status",
    };
    s.as_ptr()
}

/// The detail of the last failure of a tooloop call on the calling thread, e.g.
/// "tooloop_agent_run: API error: HTTP 401 authentication_error: invalid x-api-key (request-id req_1)".
/// It names the function, and where relevant the argument, config key, HTTP status, API error type,
/// request id or tool name. Empty ("") when the last fallible call on this thread succeeded.
///
/// Returns a borrowed string, never NULL: valid until the next tooloop call on this thread (other than
/// `tooloop_last_error`, `tooloop_status_str` and `tooloop_version`); copy it to keep it. Never free it.
/// Threads: each thread has its own last error.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_last_error() -> *const c_char {
    last_error_ptr()
}

/// Free a string returned by tooloop (every `char **` out-parameter).
///
/// NULL is a no-op. Passing anything else than a string from tooloop, or freeing one twice, is undefined
/// behaviour. Threads: any.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_string_free(s: *mut c_char) {
    if s.is_null() {
        return;
    }
    boundary_void("tooloop_string_free", || {
        // SAFETY: produced by CString::into_raw in owned_string, freed once per the contract.
        drop(unsafe { CString::from_raw(s) });
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_duplicate_and_host_failure_come_from_the_core_with_their_codes_and_messages() {
        let busy = core_failure(&Error::Busy);
        assert_eq!(busy.status, TOOLOOP_BUSY);
        assert_eq!(busy.message, "a run is in progress on this agent (one at a time; tooloop_agent_cancel stops it)");
        let duplicate = core_failure(&Error::DuplicateTool { name: "get_weather".into() });
        assert_eq!(duplicate.status, TOOLOOP_DUPLICATE_TOOL);
        assert_eq!(duplicate.message, "a tool named 'get_weather' is already registered");
        let host = core_failure(&Error::Host { message: "the host model callback returned 42".into(), source: None });
        assert_eq!(host.status, TOOLOOP_MODEL_FAILED);
        assert_eq!(host.message, "the host model callback returned 42");
        // Not mistaken for the kinds they used to hide among.
        assert_eq!(status_of(&Error::Config("nothing to resume".into())), TOOLOOP_CONFIG);
        let invalid = Error::InvalidResponse { message: "bad".into(), request_id: None };
        assert_eq!(status_of(&invalid), TOOLOOP_INVALID_RESPONSE);
    }
}
