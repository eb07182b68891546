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
    /// A model turn ended.
    TurnEnd {
        /// Turn number.
        turn: u32,
        /// Why the model stopped.
        stop_reason: Option<StopReason>,
        /// The turn's usage.
        usage: Usage,
    },
}
