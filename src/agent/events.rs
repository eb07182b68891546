//! What a run reports as it goes ([`Event`]).

use super::*;

/// What a run reports as it goes. Serializes to `{"type": "...", ...}`. New kinds may be added.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A model request is about to go out.
    TurnStart {
        /// 1-based turn number within the run.
        turn: u32,
    },
    /// Text arrived.
    Text {
        /// The new text.
        text: String,
    },
    /// Thinking arrived.
    Thinking {
        /// The new thinking text.
        thinking: String,
    },
    /// A fragment of a tool call's input arrived (for UIs that show calls as they are written).
    ToolInputDelta {
        /// Block index in the turn.
        index: usize,
        /// The fragment.
        partial_json: String,
    },
    /// The model called a tool: about to be checked by the permission hook and run (every `tool_result`
    /// event follows its `tool_use` event).
    ToolUse {
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// Its input.
        input: Value,
    },
    /// The permission callable is about to be asked about this call (the rules and `before_tool` let it
    /// through to the question): a UI draws the question from this event, in order with the others. Comes
    /// after the call's `tool_use` event and before its `tool_result`. `input` is the input the call will run
    /// with (a `before_tool` hook may have replaced it).
    ApprovalRequest {
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// The input the callable is asked about.
        input: Value,
    },
    /// A write-kind tool ([`crate::tools::ToolKind::Write`]: the built-in `write_file` and `edit_file`, or a
    /// host's own) changed a file in the workspace. Comes after the
    /// call's `tool_use` and before its `tool_result`; carries what the file was before, so a host can keep
    /// undo checkpoints (put it back with [`crate::builtin::restore_file`]) or draw a diff.
    FileChange {
        /// The call id that changed it.
        id: String,
        /// The tool that changed it.
        name: String,
        /// The path relative to the workspace root (`/`-separated), as `restore_file` takes it.
        path: String,
        /// What happened to the file.
        kind: FileChangeKind,
        /// The content before, when the file existed and was UTF-8 text.
        before: Option<String>,
        /// The content before, base64, when the file existed and was not UTF-8.
        before_base64: Option<String>,
        /// Permission bits before (e.g. `0o644`), when the file existed.
        before_mode: Option<u32>,
        /// The file existed but was larger than [`FILE_CHANGE_BEFORE_CAP`]: its content before is not given.
        before_too_large: bool,
    },
    /// A tool finished (or was denied, interrupted or not run).
    ToolResult {
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// The result content (string or blocks).
        content: Value,
        /// Whether the model reads it as an error.
        is_error: bool,
        /// Whether the permission hook refused the call (it did not run; `content` holds the reason).
        denied: bool,
        /// How long it ran.
        duration_ms: u64,
    },
    /// Token usage so far in this turn, and the run's total including it.
    Usage {
        /// This turn (cumulative within the turn).
        turn: Usage,
        /// The run so far.
        run: Usage,
    },
    /// An event of a child agent started by a `task` call.
    Subagent {
        /// The parent's `task` call id.
        parent_id: String,
        /// The child's agent type.
        agent_type: String,
        /// The child's own event.
        event: Box<Event>,
    },
    /// The todo list changed (a `todo_write` call succeeded): the whole new list.
    Todo {
        /// The list, in order.
        todos: Vec<crate::todo::TodoItem>,
    },
    /// The runaway guard answered a call instead of the tool (`stopped`: and ended the run).
    Repetition {
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// Identical calls in a row, this one included.
        count: u32,
        /// Whether the run stops here.
        stopped: bool,
        /// What the model was told: which repeat, and that it may answer without a tool.
        note: String,
    },
    /// The conversation was compacted (see [`crate::compaction`]): the API view from now on is smaller; the
    /// history keeps everything.
    Compaction {
        /// Why: `threshold`, `overflow` or `manual`.
        reason: crate::compaction::Reason,
        /// How: `clear_tool_results`, `summary` or `drop`.
        method: crate::compaction::Method,
        /// Estimated tokens of the request before.
        tokens_before: u64,
        /// Estimated tokens after.
        tokens_after: u64,
        /// Entries that left the view.
        removed: usize,
        /// Tool results cleared.
        cleared: usize,
        /// The summary, for method `summary`.
        summary: Option<String>,
        /// Why the summary was not used, when the method fell back to `drop`.
        fallback_reason: Option<String>,
    },
    /// The model failed a turn before any of it reached the host (overloaded, rate-limited past its
    /// retries, down, or it refused the context size) and the next fallback model takes over, for the rest of
    /// the run (see [`crate::Agent::set_fallback_models`]); the turn is sent again to it.
    ModelFallback {
        /// The provider that failed.
        from_provider: String,
        /// The model that failed.
        from_model: String,
        /// The provider taking over.
        to_provider: String,
        /// The model taking over.
        to_model: String,
        /// Why: `overloaded`, `rate_limit`, `server_error`, `unavailable` or `context_overflow`.
        reason: String,
        /// The error the failed model answered with.
        error: String,
    },
    /// A model turn ended.
    TurnEnd {
        /// Turn number.
        turn: u32,
        /// Why the model stopped.
        stop_reason: Option<StopReason>,
        /// The turn's usage.
        usage: Usage,
        /// The model that answered, as the API named it (may differ from the one asked; empty when the API
        /// did not say): with `id`, what a host needs for its own span of the request (see [`crate::trace`]).
        model: String,
        /// The answer's id (`msg_…`, `chatcmpl-…`; empty when the API gave none).
        id: String,
    },
}

/// The largest file whose content before a change a [`Event::FileChange`] carries (8 MiB).
pub const FILE_CHANGE_BEFORE_CAP: u64 = 8 << 20;

/// What a [`Event::FileChange`] did to its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
#[serde(rename_all = "snake_case")]
pub enum FileChangeKind {
    /// There was no file at the path before.
    Created,
    /// The file existed and was rewritten or edited.
    Modified,
    /// The file was removed (no built-in tool does this yet; hosts should expect it).
    Deleted,
}

impl FileChangeKind {
    /// The name in the event's JSON: `created`, `modified` or `deleted`.
    pub fn as_str(self) -> &'static str {
        match self {
            FileChangeKind::Created => "created",
            FileChangeKind::Modified => "modified",
            FileChangeKind::Deleted => "deleted",
        }
    }
}

/// The event for a file tool's call that succeeded, from the file's state before it ran.
pub(super) fn file_change(call: &ToolUseBlock, state: crate::builtin::FileState) -> Event {
    let before_mode = state.before.as_ref().map(|(_, mode)| *mode);
    let kind =
        if state.before.is_some() || state.too_large { FileChangeKind::Modified } else { FileChangeKind::Created };
    let (before, before_base64) = match state.before {
        None => (None, None),
        Some((data, _)) => match String::from_utf8(data) {
            Ok(text) => (Some(text), None),
            Err(e) => (None, Some(aws_smithy_types::base64::encode(e.into_bytes()))),
        },
    };
    Event::FileChange {
        id: call.id.clone(),
        name: call.name.clone(),
        path: state.path,
        kind,
        before,
        before_base64,
        before_mode,
        before_too_large: state.too_large,
    }
}
