//! The event handle: event codes, the `tooloop_event` a host's event callback receives, and the sink that
//! turns the core's events into calls of that callback.

use std::ffi::{c_char, c_void};

use tooloop::Event;

// ---------------------------------------------------------------------------------------------------------
// Event codes
// ---------------------------------------------------------------------------------------------------------

/// The kind of a `tooloop_event`: one of the `TOOLOOP_EVENT_*` codes. Codes are never renumbered; new ones
/// may be added, so ignore a code you do not know.
pub type tooloop_event_type = i32;

/// `tooloop_event.type`: a model request is about to go out. json: `{"type":"turn_start","turn":1}`.
pub const TOOLOOP_EVENT_TURN_START: tooloop_event_type = 1;
/// Text arrived; `text` is the new text (a delta). json: `{"type":"text","text":"..."}`.
pub const TOOLOOP_EVENT_TEXT: tooloop_event_type = 2;
/// Thinking arrived; `text` is the new thinking text. json: `{"type":"thinking","thinking":"..."}`.
pub const TOOLOOP_EVENT_THINKING: tooloop_event_type = 3;
/// A fragment of a tool call's input arrived; `text` is the JSON fragment.
/// json: `{"type":"tool_input_delta","index":1,"partial_json":"..."}`.
pub const TOOLOOP_EVENT_TOOL_INPUT_DELTA: tooloop_event_type = 4;
/// The model called a tool; its TOOLOOP_EVENT_TOOL_RESULT follows (also when the call is not run).
/// json: `{"type":"tool_use","id":"toolu_...","name":"...","input":{...}}`.
pub const TOOLOOP_EVENT_TOOL_USE: tooloop_event_type = 5;
/// A tool finished (or was denied, interrupted or not run).
/// json: `{"type":"tool_result","id":"...","name":"...","content":...,"is_error":false,"duration_ms":3}`.
pub const TOOLOOP_EVENT_TOOL_RESULT: tooloop_event_type = 6;
/// Token usage so far. json: `{"type":"usage","turn":{...},"run":{...}}`.
pub const TOOLOOP_EVENT_USAGE: tooloop_event_type = 7;
/// A model turn ended. json: `{"type":"turn_end","turn":1,"stop_reason":"tool_use","usage":{...},
/// "model":"<the model that answered>","id":"<the answer's id>"}` (`model`/`id` empty when the API gave none).
pub const TOOLOOP_EVENT_TURN_END: tooloop_event_type = 8;
/// The runaway guard answered a tool call instead of running it: the model repeated the same call with the
/// same input too many times in a row; or progress detection (`"progress_guard"`) found `count` turns in a
/// row that changed nothing and told the model so (with `"stopped": true` the run then ends with stop_reason
/// `"repetition"`). json: `{"type":"repetition","id":"...","name":"...","count":3,"stopped":false,
/// "note":"what the model was told"}`.
pub const TOOLOOP_EVENT_REPETITION: tooloop_event_type = 9;
/// The todo list changed (`"planning": true`). json: `{"type":"todo","todos":[{"content":"...","status":
/// "in_progress"}, ...]}`; `tooloop_agent_todos_json` reads the current list at any time.
pub const TOOLOOP_EVENT_TODO: tooloop_event_type = 10;
/// An event of a child agent started by the `task` tool (`"subagents"` config): json
/// `{"type":"subagent","parent_id":"<the task call id>","agent_type":"explore","event":{...the child's event...}}`.
pub const TOOLOOP_EVENT_SUBAGENT: tooloop_event_type = 11;
/// The conversation was compacted, during a run (reason `"threshold"`: the next request would have passed
/// `compact_threshold` of the context window; `"overflow"`: the API answered that the prompt is too long)
/// or by `tooloop_agent_compact` (`"manual"`). The API view is smaller from now on; the history keeps every
/// entry. `method`: `"clear_tool_results"` (old large tool results replaced by a note), `"summary"` (older
/// turns replaced by a summary the model wrote) or `"drop"` (older turns dropped; `fallback_reason` says why
/// the summary was not used); `removed` / `cleared`: how many entries left the view / had their result
/// cleared. json: `{"type":"compaction","reason":"threshold","method":"summary","tokens_before":9000,
/// "tokens_after":2100,"removed":6,"cleared":0,"summary":"...","fallback_reason":null}`.
pub const TOOLOOP_EVENT_COMPACTION: tooloop_event_type = 12;
/// The permission callback (`tooloop_agent_set_permission`) is about to be asked about a call: draw the
/// question from this event. Comes after the call's TOOLOOP_EVENT_TOOL_USE, before its TOOLOOP_EVENT_TOOL_RESULT;
/// `input` is what the call runs with. json: `{"type":"approval_request","id":"toolu_...","name":"bash",
/// "input":{...}}`.
pub const TOOLOOP_EVENT_APPROVAL_REQUEST: tooloop_event_type = 13;
/// A tool of kind write (`write_file`, `edit_file`, or a host's own: `tooloop_agent_set_tool_kind`) changed a
/// file; comes before the call's TOOLOOP_EVENT_TOOL_RESULT. `kind`: `"created"`, `"modified"` or `"deleted"`;
/// `path` is relative to the workspace; `before` the content before when it was UTF-8 text, else `before_base64`; both null when the file
/// did not exist or `before_too_large` (over 8 MiB). json: `{"type":"file_change","id":"toolu_...",
/// "name":"edit_file","path":"src/a.c","kind":"modified","before":"...","before_base64":null,
/// "before_mode":420,"before_too_large":false}`.
pub const TOOLOOP_EVENT_FILE_CHANGE: tooloop_event_type = 14;
/// The model failed a turn before any of it reached the callback (`"reason"`: `"overloaded"`,
/// `"rate_limit"`, `"server_error"`, `"unavailable"` or `"context_overflow"`) and the next of the config's
/// `"fallback_models"` answers it and the rest of the run. json: `{"type":"model_fallback",
/// "from_provider":"anthropic","from_model":"claude-sonnet-4-6","to_provider":"openai","to_model":"gpt-4o",
/// "reason":"overloaded","error":"..."}`.
pub const TOOLOOP_EVENT_MODEL_FALLBACK: tooloop_event_type = 15;
/// An event of a kind without its own code in this version; its json's `"type"` names it.
pub const TOOLOOP_EVENT_OTHER: tooloop_event_type = 99;

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

/// Receives the events of a run (see `tooloop_event`). `userdata` is the pointer given to the run call.
///
/// Threads: called on the thread that called `tooloop_agent_run` / `tooloop_agent_resume`, as the events
/// happen (text deltas as their bytes arrive). It may call `tooloop_agent_cancel` and the `*_json` readers
/// of its agent, but not run, reset or free it. A C++ callback must not let an exception escape.
///
/// Tracing (OpenTelemetry or a host's own): the events are enough to build the spans the Rust and Python
/// APIs report (GenAI semantic conventions; README "Tracing"), timed by the host's clock as they arrive:
/// - `invoke_agent`: from the call of `tooloop_agent_run` to its return; usage, turns and cost are in the
///   result JSON, a failure's kind in the status and `tooloop_last_error()`.
/// - `chat {model}`: from a TOOLOOP_EVENT_TURN_START to its TOOLOOP_EVENT_TURN_END (`stop_reason`, `usage`,
///   and the answering `model` and the answer's `id`); a request that fails ends the run without a
///   TURN_END: end its span with the run's error.
/// - `execute_tool {name}`: per call id, from TOOLOOP_EVENT_TOOL_USE's `id` and `name` to its
///   TOOLOOP_EVENT_TOOL_RESULT (`is_error`, `denied`); calls that run in parallel report their results
///   after the batch, so take the span's start as the result's arrival minus its `duration_ms`.
/// - a child agent's events come inside TOOLOOP_EVENT_SUBAGENT: nest them under the span of the `task`
///   call named by `parent_id`.
pub type tooloop_event_fn = Option<unsafe extern "C" fn(userdata: *mut c_void, event: *const tooloop_event)>;

/// Delivers core events to a C event callback.
pub(crate) struct EventSink {
    pub(crate) f: tooloop_event_fn,
    pub(crate) userdata: *mut c_void,
}

impl EventSink {
    pub(crate) fn emit(&self, event: &Event) {
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
            Event::ApprovalRequest { .. } => (TOOLOOP_EVENT_APPROVAL_REQUEST, None),
            Event::FileChange { .. } => (TOOLOOP_EVENT_FILE_CHANGE, None),
            Event::ModelFallback { .. } => (TOOLOOP_EVENT_MODEL_FALLBACK, None),
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
