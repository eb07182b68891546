//! The host model handle: an agent whose model is a C callback (`tooloop_agent_new_with_model`), and the
//! `tooloop_model_response` the callback answers through. A callback that fails becomes the core's
//! `Error::Host`, which the status mapping turns into `TOOLOOP_MODEL_FAILED`: no state is kept here.
//!
//! Must never: keep a pointer the host lent for one callback call.

use std::ffi::{CString, c_char, c_void};
use std::sync::Arc;

use serde_json::Value;
use tooloop::FnProvider;
use tooloop::{CancelToken, Error, MessageResponse, Provider, Request};

use crate::agent::{build_agent, tooloop_agent};
use crate::config;
use crate::ffi::{
    Failure, FfiResult, UserData, boundary, boundary_void, handle, handle_mut, out_arg, str_arg, tooloop_free_fn,
    write_out,
};
use crate::status_codes::{TOOLOOP_INVALID_JSON, tooloop_status};

/// Where a host model callback puts its response. Owned by the library and lent to one callback call:
/// valid only until the callback returns; never free it.
pub struct tooloop_model_response {
    message: Option<MessageResponse>,
    invalid: Option<String>,
    cancel: CancelToken,
}

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

/// The host model behind `tooloop_agent_new_with_model`.
struct HostModel {
    f: unsafe extern "C" fn(*mut c_void, *const c_char, *mut tooloop_model_response) -> i32,
    userdata: UserData,
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
            return Err(Error::Host { message: format!("the host model callback returned {rc}"), source: None });
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
        let host = HostModel { f, userdata };
        let provider: Arc<dyn Provider> =
            Arc::new(FnProvider::new(move |req: &Request, cancel: &CancelToken| host.call(req, cancel)));
        let agent = build_agent(Some(provider), options)?;
        write_out(out, Box::into_raw(Box::new(agent)));
        Ok(())
    })
}

/// Check a host model's answer with the core's rules (`tooloop::provider::host::check_reply`), the same
/// for every door.
fn parse_model_message(json: &str) -> FfiResult<MessageResponse> {
    let v: Value = serde_json::from_str(json)
        .map_err(|e| Failure::new(TOOLOOP_INVALID_JSON, format!("json is not valid JSON: {e}")))?;
    tooloop::check_host_reply(v).map_err(Failure::invalid)
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
