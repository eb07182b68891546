//! The static text of the status codes (`status_codes.rs` holds the codes), the last error of the calling
//! thread, and the mapping from core errors to codes.
//!
//! Must never: renumber a code, or map a core error by matching on its message text (the core's `Error`
//! variants say what happened; a binding that needs a side channel to know is a sign a variant is missing).

use std::ffi::{CStr, CString, c_char};

use tooloop::{ApiErrorKind, Error};

use crate::ffi::{Failure, boundary_void, last_error_ptr};
use crate::hooks::TOOLOOP_HOOK_FAILED;
use crate::status_codes::*;

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
