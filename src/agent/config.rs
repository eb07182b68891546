//! The agent's configuration ([`AgentConfig`]) and the permission hook's types.

use super::*;
use crate::defaults;

/// What happens when a run reaches `max_turns`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MaxTurnsPolicy {
    /// Return [`Error::MaxTurns`] (the conversation stays valid; resume to continue).
    #[default]
    Error,
    /// Return the run's result so far, with `max_turns_reached` set.
    Return,
}

/// The agent's configuration. Plain data: build it, then hand it to [`Agent::new`].
#[derive(Clone, Debug)]
pub struct AgentConfig {
    /// Model name.
    pub model: String,
    /// System prompt: a string or an array of text blocks.
    pub system: Option<Value>,
    /// Output token cap per model turn. Default 8192.
    pub max_tokens: u32,
    /// Cap on model requests per run (`None`: no cap). Default 20.
    pub max_turns: Option<u32>,
    /// What reaching `max_turns` does.
    pub max_turns_policy: MaxTurnsPolicy,
    /// `thinking` config passed to the API, e.g. `{"type":"enabled","budget_tokens":2048}`.
    pub thinking: Option<Value>,
    /// Stream responses (SSE). Default true.
    pub stream: bool,
    /// `tool_choice`, passed through.
    pub tool_choice: Option<Value>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Stop sequences.
    pub stop_sequences: Vec<String>,
    /// Other request fields, passed through unchanged.
    pub extra: Map<String, Value>,
    /// Most parallel-safe tools run at once within one turn. Default 4.
    pub tool_concurrency: usize,
    /// The runaway guard (`None`: off, the default): a coding agent's policy, not the library's; see
    /// [`RepeatGuard`]. A tool marked not idempotent ([`crate::Tool::idempotent`]) is never counted.
    pub repeat_guard: Option<RepeatGuard>,
    /// Progress detection (`None`: off, the default): a coding agent's policy, not the library's; see
    /// [`crate::progress`]. A tool marked not idempotent is never judged by it.
    pub progress_guard: Option<crate::progress::ProgressGuard>,
    /// With the `todo_write` tool registered (`planning`): after this many model turns with tool calls in a
    /// row that left an unfinished todo list alone, a short reminder is added to the turn's last tool result
    /// (`None`: never). Default 3.
    pub todo_reminder_after: Option<u32>,
    /// Tools the API runs itself (`{"type": "web_search_20250305", "name": "web_search"}`, code execution,
    /// …), appended to the registered tools as given. Their `server_tool_use` / `*_tool_result` blocks stay
    /// in the conversation verbatim and are never run here. Values that are not objects are skipped.
    pub server_tools: Vec<Value>,
    /// Prompt caching: `cache_control` breakpoints on the last tool, the system prompt and the newest turns,
    /// where the provider takes them (Anthropic, Bedrock). Default true. See [`crate::cache`].
    pub cache: bool,
    /// The model's context window in tokens (`None`: from the model table,
    /// [`crate::compaction::context_window`]; unknown models then compact only when the API says the prompt
    /// is too long).
    pub context_window: Option<u64>,
    /// Automatic compaction (default true): before a request estimated past `compact_threshold` of the
    /// window, and once when the API answers that the prompt is too long. See [`crate::compaction`].
    pub compaction: bool,
    /// Fraction of the context window a request may fill before compaction (default 0.8).
    pub compact_threshold: f64,
    /// The model that writes summaries (`None`: the agent's model).
    pub compaction_model: Option<String>,
    /// The spend cap in USD (`None`: none): no request is sent that would take the agent's spend past it;
    /// the run then ends with [`StopReason::Budget`]. See [`Agent::spent_usd`].
    pub max_cost_usd: Option<f64>,
    /// Structured output (`None`: a plain text answer): the final answer must be JSON valid against the
    /// schema; see [`crate::output`].
    pub output: Option<crate::output::OutputSpec>,
    /// A check to finish against (`None`: none); see [`crate::check`] and the `check` option.
    pub check: Option<crate::check::CheckSpec>,
    /// The task asks for changes: an answer with no file changed is challenged once (see [`crate::evidence`]).
    pub expect_changes: bool,
    /// Hold the final answer's claims (a command ran, a test passed) to the run's record, once.
    pub verify_claims: bool,
    /// Whole files given as fenced code blocks in a turn with no tool calls become `write_file` calls, when
    /// the built-in `write_file` is registered (default false; see [`crate::text_edits`]).
    pub text_edits: bool,
    /// The run that starts a conversation sends its first request without tools,
    /// asking for whole files in fenced blocks (default false; see `policy/draft.rs`).
    pub draft_first: bool,
}

/// The runaway guard: a model that makes the same tool call (same name, same input) again and again in a
/// row is told so instead of having the call run again, and is stopped if it keeps on.
///
/// Every call counts, within one turn as across turns: the `warn_after`-th identical call in a row does
/// not run: its `is_error` result tells the model it repeated
/// itself and that, if the task is done, it should answer without a tool. Identical calls go on being
/// refused; after `stop_after` more of them the run ends normally with [`StopReason::Repetition`]. A call
/// with a different name or input in between starts the count again, so legitimate repeated calls with
/// different inputs are never touched. The count is per run. A call of a tool marked not idempotent
/// ([`crate::Tool::idempotent`]: `roll_dice`, `next_page`, a poll) is never counted, and breaks a run of
/// identical calls like any other call.
///
/// Off unless asked for (the `repeat_guard` or `progress_guard` option; the `tooloop` command turns it on):
/// a host's tool called again with the same input is the host's business.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RepeatGuard {
    /// Identical calls in a row before the guard answers instead of the tool (default 3, at least 2).
    pub warn_after: u32,
    /// Further refused repeats before the run is stopped (default 2).
    pub stop_after: u32,
}

impl Default for RepeatGuard {
    fn default() -> Self {
        RepeatGuard { warn_after: defaults::REPEAT_WARN_AFTER, stop_after: defaults::REPEAT_STOP_AFTER }
    }
}

/// Most tool calls one model turn may make: the calls past it are not run, each answered with an
/// `is_error` result saying so (the conversation stays valid: every call gets its result).
pub const MAX_TOOL_CALLS_PER_TURN: usize = 64;

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            model: String::new(),
            system: None,
            max_tokens: defaults::MAX_TOKENS,
            max_turns: Some(defaults::MAX_TURNS),
            max_turns_policy: MaxTurnsPolicy::Error,
            thinking: None,
            stream: defaults::stream(false),
            tool_choice: None,
            temperature: None,
            stop_sequences: Vec::new(),
            extra: Map::new(),
            tool_concurrency: defaults::TOOL_CONCURRENCY,
            repeat_guard: None,
            progress_guard: None,
            todo_reminder_after: Some(defaults::TODO_REMIND_AFTER),
            server_tools: Vec::new(),
            cache: defaults::CACHE,
            context_window: None,
            compaction: defaults::COMPACTION,
            compact_threshold: defaults::COMPACT_THRESHOLD,
            compaction_model: None,
            max_cost_usd: None,
            output: None,
            check: None,
            expect_changes: false,
            verify_claims: false,
            text_edits: false,
            draft_first: false,
        }
    }
}

/// The answer of a permission hook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Permission {
    /// Run the tool.
    Allow,
    /// Run the tool only with no power to change anything: a read-only tool runs as it is, a
    /// [confinable](crate::tools::Tool::confinable) one (the built-in `bash`) runs confined by the kernel
    /// (read-only sandbox, network off; refused where the kernel cannot confine it), and any other tool is
    /// refused with a reason the model reads. For callers that allow a call because they judged it harmless
    /// ("this command only reads"): then a wrong judgement costs nothing.
    AllowReadOnly,
    /// Don't; the model reads the reason.
    Deny(String),
}

/// Decides, before each tool call, whether it may run.
pub type PermissionHook = Arc<dyn Fn(&ToolUseBlock) -> Permission + Send + Sync>;
