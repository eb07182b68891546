//! The status codes: the `tooloop_status` every fallible function returns, and its values. The bottom of
//! the crate: every other module reads its codes from here, and this one reads nothing.
//!
//! Must never: renumber a code.

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
