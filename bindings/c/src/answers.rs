//! What host callbacks answer through: the setters of tool results, model responses and permission
//! decisions (each copies what it is given).

#[allow(unused_imports)]
use super::*;

// ---------------------------------------------------------------------------------------------------------
// Callback answers
// ---------------------------------------------------------------------------------------------------------

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
            tooloop::content::parse_blocks(&v)
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

/// Check a host model's answer with the core's rules (`tooloop::provider::host::check_reply`), the same
/// for every door.
fn parse_model_message(json: &str) -> FfiResult<MessageResponse> {
    let v: Value = serde_json::from_str(json)
        .map_err(|e| Failure::new(TOOLOOP_INVALID_JSON, format!("json is not valid JSON: {e}")))?;
    tooloop::provider::host::check_reply(v).map_err(Failure::invalid)
}

/// Answer a host model call with `json`, an assistant message in the Anthropic Messages shape (copied and
/// validated now): `{"content": [...blocks...], "stop_reason": "end_turn" | "tool_use" | ..., "usage":
/// {"input_tokens": N, "output_tokens": N}}`; `id`, `model`, `role` ("assistant"), `type` ("message") and
/// `usage` are optional, and so is `stop_reason` (then `"tool_use"` when a block calls a tool, else
/// `"end_turn"`); `content` may also be a plain string (one text block). A `tool_use` block is `{"type": "tool_use", "id": "toolu_1", "name": "...",
/// "input": {...}}`. A later set replaces an earlier one.
///
/// If `json` is rejected, the response is marked invalid: unless a later set succeeds, the run fails with
/// `TOOLOOP_INVALID_RESPONSE` and this detail, even if the callback returns 0.
///
/// Statuses: `TOOLOOP_OK`, `TOOLOOP_INVALID_ARGUMENT` (NULL `response` or `json`, not a message),
/// `TOOLOOP_INVALID_UTF8`, `TOOLOOP_INVALID_JSON`, `TOOLOOP_PANIC`. Threads: only inside the model
/// callback that received `response`.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_model_response_set_json(
    response: *mut tooloop_model_response,
    json: *const c_char,
) -> tooloop_status {
    boundary("tooloop_model_response_set_json", || {
        let r = handle_mut(response, "response")?;
        match str_arg(json, "json").and_then(parse_model_message) {
            Ok(m) => {
                r.message = Some(m);
                r.invalid = None;
                Ok(())
            }
            Err(f) => {
                r.message = None;
                r.invalid = Some(f.message.clone());
                Err(f)
            }
        }
    })
}

/// Whether the run this model call belongs to was cancelled: a slow host model should poll it and return
/// non-zero (the run then ends with `TOOLOOP_CANCELLED`).
///
/// Returns false for NULL. Threads: only inside the model callback that received `response`.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_model_response_is_cancelled(response: *const tooloop_model_response) -> bool {
    let mut cancelled = false;
    boundary_void("tooloop_model_response_is_cancelled", || {
        if let Ok(r) = handle(response, "response") {
            cancelled = r.cancel.is_cancelled();
        }
    });
    cancelled
}
