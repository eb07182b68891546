//! The agent loop: input → request → (tool_use → run tools → results)* → answer.
//!
//! Invariants kept here: the user's input, every completed assistant turn and every tool result are in the
//! store (and the session file) before the next request goes out; a failed or cancelled run leaves a valid
//! conversation that [`Agent::resume`] continues without re-running tools that already ran; every
//! `tool_use` gets exactly one result — one that was cut off, denied, interrupted or never started says so.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::cancel::CancelToken;
use crate::conversation::{Conversation, Entry, EntryRole, EntryStatus, now_ms};
use crate::error::{Error, Result};
use crate::provider::{Provider, StreamEvent};
use crate::store::SessionStore;
use crate::tools::{CallOutcome, ToolRegistry};
use crate::types::{ContentBlock, MessageResponse, Request, StopReason, ToolUseBlock, Usage};

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
    /// The runaway guard (`None`: off). Default on, see [`RepeatGuard`].
    pub repeat_guard: Option<RepeatGuard>,
    /// Progress detection (`None`: off). Default on, see [`crate::progress`].
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
}

/// The runaway guard: a model that makes the same tool call (same name, same input) again and again in a
/// row is told so instead of having the call run again, and is stopped if it keeps on.
///
/// Every call counts, within one turn as across turns: the `warn_after`-th identical call in a row does
/// not run: its `is_error` result tells the model it repeated
/// itself and that, if the task is done, it should answer without a tool. Identical calls go on being
/// refused; after `stop_after` more of them the run ends normally with [`StopReason::Repetition`]. A call
/// with a different name or input in between starts the count again, so legitimate repeated calls with
/// different inputs are never touched. The count is per run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RepeatGuard {
    /// Identical calls in a row before the guard answers instead of the tool (default 3, at least 2).
    pub warn_after: u32,
    /// Further refused repeats before the run is stopped (default 2).
    pub stop_after: u32,
}

impl Default for RepeatGuard {
    fn default() -> Self {
        RepeatGuard { warn_after: 3, stop_after: 2 }
    }
}

/// What one run tracks across its turns.
#[derive(Default)]
struct RunState {
    repeats: Repeats,
    progress: crate::progress::Progress,
    /// Model turns with tool calls since the last `todo_write`.
    since_todo: u32,
    /// Structured answers the model gave in this run (the first one and its corrections).
    output_attempts: u32,
}

/// What checking a structured answer decided.
enum Verdict {
    /// Valid: the run ends with it.
    Done,
    /// Invalid, the model was told why: another turn.
    Retry,
}

/// Consecutive identical calls seen in this run, within a turn as across turns: a turn of hundreds of
/// identical calls is a runaway too, not a parallel batch.
#[derive(Default)]
struct Repeats {
    last: Option<(String, String)>,
    count: u32,
}

impl Repeats {
    /// Count `call`; returns how many identical calls in a row were made, this one included.
    fn see(&mut self, call: &ToolUseBlock) -> u32 {
        let key = (call.name.clone(), call.input.to_string());
        if self.last.as_ref() != Some(&key) {
            self.last = Some(key);
            self.count = 0;
        }
        self.count += 1;
        self.count
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
            max_tokens: 8192,
            max_turns: Some(20),
            max_turns_policy: MaxTurnsPolicy::Error,
            thinking: None,
            stream: true,
            tool_choice: None,
            temperature: None,
            stop_sequences: Vec::new(),
            extra: Map::new(),
            tool_concurrency: 4,
            repeat_guard: Some(RepeatGuard::default()),
            progress_guard: Some(crate::progress::ProgressGuard::default()),
            todo_reminder_after: Some(3),
            server_tools: Vec::new(),
            cache: true,
            context_window: None,
            compaction: true,
            compact_threshold: 0.8,
            compaction_model: None,
            max_cost_usd: None,
            output: None,
        }
    }
}

/// The answer of a permission hook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Permission {
    /// Run the tool.
    Allow,
    /// Don't; the model reads the reason.
    Deny(String),
}

/// Decides, before each tool call, whether it may run.
pub type PermissionHook = Arc<dyn Fn(&ToolUseBlock) -> Permission + Send + Sync>;

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

/// One tool call made during a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolCallRecord {
    /// Call id.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Input.
    pub input: Value,
    /// Result content.
    pub output: Value,
    /// Whether it was an error result.
    pub is_error: bool,
    /// Whether the permission hook refused it.
    pub denied: bool,
    /// Duration.
    pub duration_ms: u64,
}

/// The outcome of a run that ended normally.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunResult {
    /// Text of the last assistant turn.
    pub text: String,
    /// Why the last turn stopped (`None` when max_turns stopped the run first).
    pub stop_reason: Option<StopReason>,
    /// Model requests made in this run.
    pub turns: u32,
    /// Usage of this run.
    pub usage: Usage,
    /// Tool calls of this run, in order.
    pub tool_calls: Vec<ToolCallRecord>,
    /// Whether the run stopped because of max_turns (policy `Return`).
    pub max_turns_reached: bool,
    /// The last assistant message.
    pub message: Option<MessageResponse>,
    /// Estimated cost in USD of this run (list prices, cache rates included; `None` for a model without a
    /// known price).
    pub cost_usd: Option<f64>,
    /// The structured answer, valid against `output_schema` (`None` without a schema, or when the run
    /// stopped before an answer: max_turns with policy `Return`, the runaway guard).
    pub output: Option<Value>,
}

/// What attaching a session file found (see [`Agent::session_info`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionInfo {
    /// The session file.
    pub path: std::path::PathBuf,
    /// Entries loaded into the conversation.
    pub entries: usize,
    /// A torn last line that was cut off: (1-based line number, its byte length).
    pub torn_tail: Option<(usize, usize)>,
    /// Lines that did not parse and were skipped: (1-based line number, why).
    pub skipped: Vec<(usize, String)>,
    /// Whether the file was created by this open.
    pub created: bool,
}

/// The agent: conversation + provider + tools + policy.
///
/// # Threads and cloning
/// `Send + Sync`: share it in an `Arc`. One run at a time (a second concurrent `run` gets
/// [`Error::Config`] "busy"); `cancel`, `usage`, `messages` and the store may be used from any thread
/// during a run.
pub struct Agent {
    provider: Arc<dyn Provider>,
    tools: ToolRegistry,
    conversation: Conversation,
    config: Mutex<AgentConfig>,
    session: Mutex<Option<Box<dyn SessionStore>>>,
    session_info: Mutex<Option<SessionInfo>>,
    skills: Mutex<Option<crate::skills::SkillSet>>,
    subagents: Mutex<std::collections::BTreeMap<String, crate::subagent::SubAgent>>,
    mcp: Mutex<Option<crate::mcp::McpServers>>,
    builtin: Mutex<Option<crate::builtin::BuiltinOptions>>,
    background: Mutex<Option<Arc<crate::builtin::BackgroundShells>>>,
    permission: Mutex<Option<PermissionHook>>,
    current: Mutex<Option<CancelToken>>,
    running: Mutex<()>,
    estimator: Mutex<crate::compaction::Estimator>,
    baseline: Mutex<Option<Baseline>>,
    hooks: Mutex<crate::hooks::Hooks>,
    rules: Mutex<Option<(Arc<crate::rules::PermissionRules>, std::path::PathBuf)>>,
    spend: Mutex<Spend>,
    instructions: Mutex<Option<crate::instructions::Instructions>>,
}

/// What the agent has spent, for `max_cost_usd`.
#[derive(Clone, Copy, Debug, Default)]
struct Spend {
    /// USD, every request of this agent (and its children) priced from the table.
    usd: f64,
    /// The largest answer seen, in output tokens: the estimate of the next answer's size.
    out_tokens: u64,
}

/// What the API reported for the last request: its prompt tokens plus the answer's tokens, and how many
/// entries the store held once that answer was in. The next request's size is this plus what was added
/// since, so the estimate stays anchored to the API's own count (and costs no serialization per turn).
#[derive(Clone, Copy, Debug)]
struct Baseline {
    tokens: u64,
    upto: usize,
}

/// The tokens of a request as the API reports them (uncached, cache writes and cache reads).
fn prompt_tokens(u: &Usage) -> u64 {
    u.input_tokens + u.cache_creation_input_tokens.unwrap_or(0) + u.cache_read_input_tokens.unwrap_or(0)
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.close();
    }
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent").field("provider", &self.provider.name()).field("tools", &self.tools).finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Agent {
    /// An agent with an empty conversation and no tools.
    pub fn new(provider: Arc<dyn Provider>, config: AgentConfig) -> Self {
        let tools = ToolRegistry::new();
        // The keys this agent sends never come back to the model through a tool result (`cat .env`).
        tools.add_secrets(provider.secrets().iter().map(|s| s.expose().to_string()));
        Agent {
            provider,
            tools,
            conversation: Conversation::new(),
            config: Mutex::new(config),
            session: Mutex::new(None),
            session_info: Mutex::new(None),
            skills: Mutex::new(None),
            subagents: Mutex::new(std::collections::BTreeMap::new()),
            mcp: Mutex::new(None),
            builtin: Mutex::new(None),
            background: Mutex::new(None),
            permission: Mutex::new(None),
            current: Mutex::new(None),
            running: Mutex::new(()),
            estimator: Mutex::new(crate::compaction::Estimator::default()),
            baseline: Mutex::new(None),
            hooks: Mutex::new(crate::hooks::Hooks::default()),
            rules: Mutex::new(None),
            spend: Mutex::new(Spend::default()),
            instructions: Mutex::new(None),
        }
    }

    /// Set the hooks (see [`crate::hooks`]); they apply from the next tool call or request.
    pub fn set_hooks(&self, hooks: crate::hooks::Hooks) {
        *lock(&self.hooks) = hooks;
    }

    /// Change some hooks in place.
    pub fn update_hooks(&self, f: impl FnOnce(&mut crate::hooks::Hooks)) {
        f(&mut lock(&self.hooks));
    }

    /// The hooks.
    pub fn hooks(&self) -> crate::hooks::Hooks {
        lock(&self.hooks).clone()
    }

    /// Set (or clear) the permission rules; relative path rules are anchored at `workspace`.
    pub fn set_rules(&self, rules: Option<Arc<crate::rules::PermissionRules>>, workspace: std::path::PathBuf) {
        *lock(&self.rules) = rules.map(|r| (r, workspace));
    }

    /// The permission rules, if any.
    pub fn rules(&self) -> Option<Arc<crate::rules::PermissionRules>> {
        lock(&self.rules).as_ref().map(|(r, _)| r.clone())
    }

    /// Record the instruction files that were loaded (done by [`crate::AgentOptions::build`]).
    pub fn set_instructions(&self, found: crate::instructions::Instructions) {
        *lock(&self.instructions) = Some(found);
    }

    /// The instruction files loaded into the system prompt and the ones skipped (`None`: none asked for).
    pub fn instructions(&self) -> Option<crate::instructions::Instructions> {
        lock(&self.instructions).clone()
    }

    /// What this agent has spent so far in USD by the price table (every request, its children's and
    /// compaction summaries included; a loaded session's turns too). What `max_cost_usd` is checked against.
    pub fn spent_usd(&self) -> f64 {
        lock(&self.spend).usd
    }

    /// Add a request's cost to the spend.
    fn charge(&self, model: &str, usage: &Usage) {
        let mut s = lock(&self.spend);
        if let Some(c) = crate::pricing::estimate_cost_usd(model, usage) {
            s.usd += c;
        }
        s.out_tokens = s.out_tokens.max(usage.output_tokens);
    }

    /// Whether a request of about `input_tokens` on `model` fits under the cap (always, without one).
    fn affordable(&self, model: &str, input_tokens: u64) -> bool {
        let Some(cap) = lock(&self.config).max_cost_usd else { return true };
        let s = *lock(&self.spend);
        match crate::pricing::request_cost_usd(model, input_tokens, s.out_tokens) {
            Some(c) => s.usd + c <= cap,
            // Checked at build; a model changed since has no price: refuse rather than spend unbounded.
            None => false,
        }
    }

    /// The tool registry (register tools here).
    pub fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    /// The conversation store.
    pub fn conversation(&self) -> &Conversation {
        &self.conversation
    }

    /// The provider.
    pub fn provider(&self) -> &Arc<dyn Provider> {
        &self.provider
    }

    /// A copy of the configuration.
    pub fn config(&self) -> AgentConfig {
        lock(&self.config).clone()
    }

    /// Change the configuration (takes effect at the next request).
    pub fn update_config(&self, f: impl FnOnce(&mut AgentConfig)) {
        f(&mut lock(&self.config));
    }

    /// Set (or clear) the permission hook.
    pub fn set_permission(&self, hook: Option<PermissionHook>) {
        *lock(&self.permission) = hook;
    }

    /// Attach a session: its entries are loaded into the (empty) store, a torn or unanswered tail is
    /// repaired, and from now on every finished entry is appended to it. Returns what loading found.
    pub fn attach_session(&self, session: impl SessionStore + 'static) -> Result<crate::session::LoadReport> {
        self.attach_store(Box::new(session))
    }

    /// [`Agent::attach_session`] for a store chosen at run time (see [`crate::store::open`]).
    pub fn attach_store(&self, mut session: Box<dyn SessionStore>) -> Result<crate::session::LoadReport> {
        let report = session.take_report();
        if !self.conversation.is_empty() {
            return Err(Error::Config("attach the session before the conversation has entries".into()));
        }
        for e in &report.entries {
            self.conversation.push(e.clone());
        }
        *lock(&self.session_info) = Some(SessionInfo {
            path: session.location().into(),
            entries: report.entries.len(),
            torn_tail: report.torn_tail,
            skipped: report.skipped.clone(),
            created: report.created,
        });
        *lock(&self.session) = Some(session);
        // A resumed conversation's turns were spent too.
        lock(&self.spend).usd += self.conversation.cost_usd().unwrap_or(0.0);
        self.rebase();
        self.answer_pending(
            "interrupted: the previous session ended before this tool call finished; it may or may not have run",
        )?;
        Ok(report)
    }

    /// The attached session file and what attaching it found (`None`: no session).
    pub fn session_info(&self) -> Option<SessionInfo> {
        lock(&self.session_info).clone()
    }

    /// The skills found at creation, and the ones skipped with why (`None`: no skill folders given).
    pub fn skills(&self) -> Option<crate::skills::SkillSet> {
        lock(&self.skills).clone()
    }

    /// Record the skills this agent offers (done by [`crate::AgentOptions::build`]).
    pub fn set_skills(&self, set: crate::skills::SkillSet) {
        *lock(&self.skills) = Some(set);
    }

    /// Offer these child agent types through the `task` tool (registered here; replaced if it was). An
    /// empty map removes the tool. See [`crate::subagent`].
    pub fn set_subagents(&self, types: std::collections::BTreeMap<String, crate::subagent::SubAgent>) -> Result<()> {
        self.tools.unregister(crate::subagent::TOOL_NAME);
        if !types.is_empty() {
            self.tools.register(crate::subagent::tool(&types))?;
        }
        *lock(&self.subagents) = types;
        Ok(())
    }

    /// Hand the agent its MCP servers (their tools are already in [`Agent::tools`]): they are stopped by
    /// [`Agent::close`] or when the agent is dropped. Replaces (and closes) earlier ones.
    pub fn set_mcp(&self, servers: crate::mcp::McpServers) {
        let old = lock(&self.mcp).replace(servers);
        if let Some(old) = old {
            old.close();
        }
    }

    /// Each MCP server's name, state and tools (empty without MCP servers).
    pub fn mcp_status(&self) -> Vec<crate::mcp::McpServerStatus> {
        lock(&self.mcp).as_ref().map(|m| m.status()).unwrap_or_default()
    }

    /// MCP servers that failed to start, with why.
    pub fn mcp_failures(&self) -> Vec<crate::mcp::McpStartError> {
        lock(&self.mcp).as_ref().map(|m| m.failures().to_vec()).unwrap_or_default()
    }

    /// Let go of what the agent holds outside its memory: its MCP servers are stopped (their tools go away)
    /// and its session file is detached (its lock released, so another agent may open it; later entries
    /// are not written to it), and every background command of the built-in `bash` is killed with its process
    /// tree. The conversation stays usable. Idempotent; also done on drop.
    pub fn close(&self) {
        let servers = lock(&self.mcp).take();
        if let Some(s) = servers {
            s.close();
        }
        lock(&self.session).take();
        // Background commands (bash run_in_background) end with the agent, their process trees with them.
        let background = lock(&self.background).clone();
        if let Some(b) = background {
            b.close();
        }
    }

    /// The background commands the built-in `bash` started (`run_in_background`), oldest first; empty
    /// without built-in tools.
    pub fn background_commands(&self) -> Vec<crate::builtin::BackgroundInfo> {
        lock(&self.background).as_ref().map(|b| b.list()).unwrap_or_default()
    }

    /// Register the built-in coding tools with these options (see [`crate::builtin::register`]), and keep the
    /// options so a child agent type with a sandbox of its own gets the same tools in that mode.
    pub fn register_builtins(&self, options: crate::builtin::BuiltinOptions) -> Result<()> {
        let background = crate::builtin::register_owned(&self.tools, &options)?;
        *lock(&self.background) = Some(background);
        *lock(&self.builtin) = Some(options);
        Ok(())
    }

    /// Give the child agent type `agent_type` a tool of its own (beside the parent's tools it names).
    pub fn add_subagent_tool(&self, agent_type: &str, tool: crate::tools::Tool) -> Result<()> {
        let mut types = lock(&self.subagents);
        let Some(kind) = types.get_mut(agent_type) else {
            return Err(Error::Config(format!("no agent type {agent_type:?}")));
        };
        if kind.own_tools.iter().any(|t| t.spec.name == tool.spec.name) {
            return Err(Error::Config(format!("agent type {agent_type} already has a tool named {}", tool.spec.name)));
        }
        kind.own_tools.push(tool);
        Ok(())
    }

    /// The child agent types offered (see [`Agent::set_subagents`]).
    pub fn subagents(&self) -> std::collections::BTreeMap<String, crate::subagent::SubAgent> {
        lock(&self.subagents).clone()
    }

    /// Run one `task` call: a fresh child agent, its events forwarded tagged with the call's id.
    fn run_child(
        &self,
        call: &ToolUseBlock,
        cancel: &CancelToken,
        on_event: &mut dyn FnMut(&Event),
    ) -> (CallOutcome, Option<crate::subagent::ChildRun>) {
        let started = Instant::now();
        let fail = |m: String| (CallOutcome { duration: started.elapsed(), ..CallOutcome::error(m) }, None);
        // The same input check as every registered tool gets.
        if let Some(t) = self.tools.get(crate::subagent::TOOL_NAME) {
            if let Err(m) = crate::tools::validate_input(&t.spec.input_schema, &call.input) {
                return fail(format!("Invalid input for tool 'task': {m}. Fix the arguments and call it again."));
            }
        }
        let agent_type = call.input.get("agent_type").and_then(Value::as_str).unwrap_or("").to_string();
        let prompt = call.input.get("prompt").and_then(Value::as_str).unwrap_or("").to_string();
        let Some(kind) = lock(&self.subagents).get(&agent_type).cloned() else {
            let known: Vec<String> = lock(&self.subagents).keys().cloned().collect();
            return fail(format!("no agent type {agent_type:?}; the types are: {}", known.join(", ")));
        };
        if prompt.trim().is_empty() {
            return fail("`prompt` is empty: give the agent the full instructions".into());
        }
        let parent = self.config();
        // The child answers in its own type's shape (a schema of its own), never in the parent's.
        let output = kind.output_schema.clone().map(|schema| crate::output::OutputSpec {
            schema,
            ..parent.output.clone().unwrap_or_else(|| crate::output::OutputSpec::new(Value::Null))
        });
        let config = AgentConfig {
            output,
            model: kind.model.clone().unwrap_or(parent.model),
            system: kind.system.clone().map(Value::String),
            max_turns: Some(kind.max_turns.unwrap_or(20)),
            max_turns_policy: MaxTurnsPolicy::Error,
            tool_choice: None,
            todo_reminder_after: None,
            // The child may spend what is left of the parent's cap.
            max_cost_usd: parent.max_cost_usd.map(|c| (c - self.spent_usd()).max(0.0)),
            ..parent
        };
        let model = config.model.clone();
        let child = Agent::new(self.provider.clone(), config);
        child.tools.share_secrets(&self.tools);
        let wanted: Vec<String> = match &kind.tools {
            Some(names) => names.clone(),
            None => self.tools.names(),
        };
        // Built-in tools in the child's own sandbox mode, when its type asks for one.
        let rebuilt: Vec<String> = match (kind.sandbox, lock(&self.builtin).clone()) {
            (Some(mode), Some(parent)) => {
                let names: Vec<String> =
                    wanted.iter().filter(|n| crate::builtin::NAMES.contains(&n.as_str())).cloned().collect();
                if !names.is_empty() {
                    let own = crate::builtin::BuiltinOptions { names: names.clone(), sandbox: mode, ..parent };
                    if let Err(e) = crate::builtin::register(&child.tools, &own) {
                        return fail(format!("agent type {agent_type}: {e}"));
                    }
                }
                names
            }
            _ => Vec::new(),
        };
        for name in wanted.iter().filter(|n| n.as_str() != crate::subagent::TOOL_NAME && !rebuilt.contains(n)) {
            match self.tools.get(name) {
                Some(t) => {
                    if let Err(e) = child.tools.register(t) {
                        return fail(format!("agent type {agent_type}: {e}"));
                    }
                }
                None => return fail(format!("agent type {agent_type} names tool {name:?}, which does not exist")),
            }
        }
        for t in kind.own_tools {
            if let Err(e) = child.tools.register(t) {
                return fail(format!("agent type {agent_type}: {e}"));
            }
        }
        // The child is told what its bash may do, as the parent is.
        if let (Some(parent), true) = (lock(&self.builtin).clone(), child.tools.get("bash").is_some()) {
            let prompt = crate::builtin::sandbox_prompt(kind.sandbox.unwrap_or(parent.sandbox), parent.network);
            if !prompt.is_empty() {
                child.update_config(|c| c.system = Some(crate::options::with_text(c.system.take(), &prompt)));
            }
        }
        child.set_permission(lock(&self.permission).clone());
        child.set_hooks(lock(&self.hooks).for_child());
        *lock(&child.rules) = lock(&self.rules).clone();
        let parent_id = call.id.clone();
        let mut forward = |ev: &Event| {
            on_event(&Event::Subagent {
                parent_id: parent_id.clone(),
                agent_type: agent_type.clone(),
                event: Box::new(ev.clone()),
            })
        };
        let result = child.run_cancellable(vec![ContentBlock::text(prompt)], cancel.clone(), &mut forward);
        let transcript = serde_json::to_value(child.conversation().snapshot()).unwrap_or(Value::Null);
        let turns = child
            .conversation()
            .snapshot()
            .iter()
            .filter(|e| e.role == EntryRole::Assistant && e.status != EntryStatus::Streaming)
            .count() as u32;
        let info = crate::subagent::ChildRun {
            agent_type: agent_type.clone(),
            model,
            usage: child.usage(),
            turns,
            transcript,
        };
        let duration = started.elapsed();
        let outcome = match result {
            Ok(r) if r.stop_reason == Some(StopReason::Budget) => CallOutcome {
                duration,
                ..CallOutcome::error(
                    "the agent stopped: its next request would have passed the spend cap (max_cost_usd)",
                )
            },
            Ok(r) if r.output.is_some() => {
                // A structured answer goes to the parent's model as the JSON itself.
                let json = r.output.as_ref().map(Value::to_string).unwrap_or_default();
                CallOutcome { content: Value::String(self.tools.redact(json)), is_error: false, fatal: None, duration }
            }
            Err(Error::OutputValidation(f)) => CallOutcome {
                duration,
                ..CallOutcome::error(self.tools.redact(format!(
                    "the agent's answer did not match its output schema: {}. Its last answer: {}",
                    f.errors.join("; "),
                    f.text
                )))
            },
            Ok(r) => {
                let text = if r.text.trim().is_empty() { "(the agent gave no answer)".to_string() } else { r.text };
                CallOutcome {
                    content: Value::String(self.tools.redact(format!("{text}\n\n{}", info.summary()))),
                    is_error: false,
                    fatal: None,
                    duration,
                }
            }
            Err(Error::Cancelled { .. }) => CallOutcome {
                duration,
                ..CallOutcome::error("interrupted: the run was cancelled while the agent worked on this task")
            },
            Err(Error::MaxTurns { turns }) => {
                let last = child
                    .conversation()
                    .snapshot()
                    .iter()
                    .rev()
                    .find(|e| e.role == EntryRole::Assistant)
                    .map(|e| {
                        e.content
                            .iter()
                            .filter_map(|b| if let ContentBlock::Text(t) = b { Some(t.text.as_str()) } else { None })
                            .collect::<Vec<_>>()
                            .join("")
                    })
                    .unwrap_or_default();
                CallOutcome {
                    duration,
                    ..CallOutcome::error(self.tools.redact(format!(
                        "the agent stopped after max_turns={turns} without finishing. Its last words: {}",
                        if last.is_empty() { "(none)".to_string() } else { last }
                    )))
                }
            }
            Err(e) => {
                CallOutcome { duration, ..CallOutcome::error(self.tools.redact(format!("the agent failed: {e}"))) }
            }
        };
        (outcome, Some(info))
    }

    /// The current todo list (see [`crate::todo`]): empty without planning or before the first
    /// `todo_write`.
    pub fn todos(&self) -> Vec<crate::todo::TodoItem> {
        crate::todo::current(&self.conversation.snapshot())
    }

    /// Estimated cost in USD of the whole conversation (see [`Conversation::cost_usd`]).
    pub fn cost_usd(&self) -> Option<f64> {
        self.conversation.cost_usd()
    }

    /// Usage summed over the whole conversation.
    pub fn usage(&self) -> Usage {
        self.conversation.usage()
    }

    /// The API view of the conversation.
    pub fn messages(&self) -> Vec<crate::types::Message> {
        self.conversation.api_view()
    }

    /// Cancel the current run, if any (callable from any thread; the run ends within 200 ms).
    pub fn cancel(&self) {
        if let Some(t) = lock(&self.current).as_ref() {
            t.cancel();
        }
    }

    /// Clear the conversation (the session file records the reset).
    pub fn reset(&self) -> Result<()> {
        self.conversation.clear();
        *lock(&self.baseline) = None;
        if let Some(s) = lock(&self.session).as_mut() {
            s.append_reset()?;
        }
        Ok(())
    }

    /// Add an entry to the store, then to the session file. The store comes first: if the file cannot be
    /// written (disk full), the run fails with `Error::Io` but the entry — a tool result, say — is kept, so
    /// a resume in this process neither loses it nor runs the tool again.
    pub fn record(&self, entry: Entry) -> Result<String> {
        let id = self.conversation.push(entry);
        self.persist(&id)?;
        Ok(id)
    }

    /// Run with new user input (text).
    pub fn run(&self, input: &str, on_event: &mut dyn FnMut(&Event)) -> Result<RunResult> {
        self.run_with(vec![ContentBlock::text(input)], on_event)
    }

    /// Run with new user input (blocks: text, images, …).
    pub fn run_with(&self, input: Vec<ContentBlock>, on_event: &mut dyn FnMut(&Event)) -> Result<RunResult> {
        self.run_cancellable(input, CancelToken::new(), on_event)
    }

    /// Like [`Agent::run_with`], stopped by `cancel` (as well as by [`Agent::cancel`]). A host that starts the
    /// run on another thread keeps a clone of the token, so a cancel issued before the run has begun is not lost.
    /// An already-cancelled token ends the run at once — after the input is stored.
    pub fn run_cancellable(
        &self,
        input: Vec<ContentBlock>,
        cancel: CancelToken,
        on_event: &mut dyn FnMut(&Event),
    ) -> Result<RunResult> {
        let _busy = self.begin(cancel)?;
        // An image or document the API would refuse for its size is refused here, before it is stored or sent.
        crate::content::check(&input, crate::content::limits(self.provider.name())).map_err(Error::Config)?;
        self.record(Entry::new(EntryRole::User, input))?;
        self.drive(on_event)
    }

    /// Continue after a failure, a cancel or max_turns: answer any unanswered tool call as interrupted
    /// (tools that already ran are never re-run), then send the conversation again.
    pub fn resume(&self, on_event: &mut dyn FnMut(&Event)) -> Result<RunResult> {
        self.resume_cancellable(CancelToken::new(), on_event)
    }

    /// Like [`Agent::resume`], stopped by `cancel` (see [`Agent::run_cancellable`]).
    pub fn resume_cancellable(&self, cancel: CancelToken, on_event: &mut dyn FnMut(&Event)) -> Result<RunResult> {
        let _busy = self.begin(cancel)?;
        if self.conversation.api_view().is_empty() {
            return Err(Error::Config("nothing to resume: the conversation is empty".into()));
        }
        self.answer_pending("interrupted: the run stopped before this tool call ran; it was not run")?;
        self.drive(on_event)
    }

    fn begin(&self, cancel: CancelToken) -> Result<std::sync::MutexGuard<'_, ()>> {
        let guard = match self.running.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                return Err(Error::Config("the agent is busy: a run is already in progress".into()));
            }
        };
        *lock(&self.current) = Some(cancel);
        Ok(guard)
    }

    fn token(&self) -> CancelToken {
        lock(&self.current).clone().unwrap_or_default()
    }

    fn answer_pending(&self, why: &str) -> Result<()> {
        for call in self.conversation.pending_tool_uses() {
            self.record(Entry::tool_result(&call.id, &call.name, Value::String(why.to_string()), true))?;
        }
        Ok(())
    }

    fn request(&self) -> Request {
        let c = lock(&self.config).clone();
        let cache = c.cache && self.provider.supports_cache();
        let mut request = Request {
            model: c.model,
            max_tokens: c.max_tokens,
            messages: self.conversation.api_view(),
            system: c.system,
            tools: self
                .tools
                .specs()
                .into_iter()
                .chain(c.server_tools.iter().filter_map(|t| serde_json::from_value(t.clone()).ok()))
                .collect(),
            tool_choice: c.tool_choice,
            thinking: c.thinking,
            stop_sequences: c.stop_sequences,
            temperature: c.temperature,
            metadata: None,
            stream: c.stream,
            extra: c.extra,
        };
        if let Some(spec) = &c.output {
            crate::output::prepare(&mut request, spec, spec.uses_tool(self.provider.native_output()));
        }
        if cache {
            crate::cache::add_breakpoints(&mut request);
        }
        request
    }

    fn drive(&self, on_event: &mut dyn FnMut(&Event)) -> Result<RunResult> {
        let cancel = self.token();
        let mut run = RunResult {
            text: String::new(),
            stop_reason: None,
            turns: 0,
            usage: Usage::default(),
            tool_calls: Vec::new(),
            max_turns_reached: false,
            message: None,
            cost_usd: None,
            output: None,
        };
        let mut state = RunState::default();
        loop {
            if cancel.is_cancelled() {
                return Err(Error::Cancelled { partial: None });
            }
            let (max_turns, policy) = {
                let c = lock(&self.config);
                (c.max_turns, c.max_turns_policy)
            };
            if let Some(max) = max_turns {
                if run.turns >= max {
                    let note = format!("stopped: max_turns={max} reached");
                    self.record(Entry::new(EntryRole::System, vec![ContentBlock::text(note)]))?;
                    return match policy {
                        MaxTurnsPolicy::Error => Err(Error::MaxTurns { turns: max }),
                        MaxTurnsPolicy::Return => {
                            run.max_turns_reached = true;
                            run.stop_reason = None;
                            Ok(run)
                        }
                    };
                }
            }
            if !self.next_request_affordable() {
                let cap = lock(&self.config).max_cost_usd.unwrap_or(0.0);
                let note = format!("stopped: the next request would take the spend past max_cost_usd={cap}");
                self.record(Entry::new(EntryRole::System, vec![ContentBlock::text(note)]))?;
                run.stop_reason = Some(StopReason::Budget);
                return Ok(run);
            }
            run.turns += 1;
            let turn = run.turns;
            on_event(&Event::TurnStart { turn });
            let wrap_up = state.progress.take_wrap_up(); // progress.rs: this request with tools disabled
            let (message, bad_inputs) = self.compacting_turn(turn, wrap_up, &cancel, &mut run, on_event)?;
            run.text = message.text();
            run.stop_reason = message.stop_reason.clone();
            run.message = Some(message.clone());
            let calls: Vec<ToolUseBlock> = message.tool_uses().into_iter().cloned().collect();
            let output = lock(&self.config).output.clone();
            match message.stop_reason.clone() {
                Some(stop @ (StopReason::MaxTokens | StopReason::ModelContextWindowExceeded | StopReason::Refusal)) => {
                    // The turn was cut off (a call's input may be incomplete) or refused: never run its calls,
                    // and stop — asking again would hit the same wall. Each call still gets its one result.
                    let why = match stop {
                        StopReason::MaxTokens => {
                            "not run: the response hit max_tokens before this tool call was complete"
                        }
                        StopReason::Refusal => "not run: the model refused in the turn that made this tool call",
                        _ => "not run: the response hit the context window limit before this tool call was complete",
                    };
                    for call in &calls {
                        self.record(Entry::tool_result(&call.id, &call.name, Value::String(why.into()), true))?;
                    }
                    if let Some(spec) = &output {
                        // No correction: asking again would hit the same wall.
                        let answer = crate::output::answer_of(&message, &spec.schema);
                        state.output_attempts += 1;
                        match crate::output::check(&answer, &spec.schema) {
                            Ok(v) => run.output = Some(v),
                            Err((errors, value)) => return Err(output_failure(errors, value, &answer, &state)),
                        }
                    }
                    return Ok(run);
                }
                Some(StopReason::PauseTurn) if calls.is_empty() => continue,
                _ if output.is_some() && calls.iter().any(|c| c.name == crate::output::TOOL_NAME) => {
                    let spec = output.as_ref().map(|o| (o.schema.clone(), o.retries)).unwrap_or_default();
                    match self.final_answer(&message, &calls, &bad_inputs, spec, &mut state, &mut run, on_event)? {
                        Verdict::Done => return Ok(run),
                        Verdict::Retry => continue,
                    }
                }
                _ if !calls.is_empty() => {
                    if self.run_tools(&calls, &bad_inputs, &mut state, &cancel, &mut run, on_event)? {
                        run.stop_reason = Some(StopReason::Repetition);
                        return Ok(run);
                    }
                }
                _ => {
                    if let Some(spec) = &output {
                        if let Verdict::Retry = self.text_answer(&message, spec, &mut state, &mut run)? {
                            continue;
                        }
                    }
                    // The run would end here: `on_stop` may keep it going with a new user message.
                    let on_stop = lock(&self.hooks).on_stop.clone();
                    let Some(hook) = on_stop else { return Ok(run) };
                    match hook(&run) {
                        Ok(None) => return Ok(run),
                        Ok(Some(text)) => {
                            self.record(Entry::new(EntryRole::User, vec![ContentBlock::text(text)]))?;
                        }
                        Err(message) => return Err(Error::Hook { hook: "on_stop".into(), message }),
                    }
                }
            }
        }
    }

    /// With a spend cap: whether the next request fits under it. `false` ends the run with `budget`.
    fn next_request_affordable(&self) -> bool {
        if lock(&self.config).max_cost_usd.is_none() {
            return true;
        }
        let request = self.request();
        let (tokens, _) = self.estimate_request(&request);
        self.affordable(&request.model, tokens)
    }

    /// Whether this agent's requests carry the final-answer tool (else the native field).
    fn output_tool(&self, spec: &crate::output::OutputSpec) -> bool {
        spec.uses_tool(self.provider.native_output())
    }

    /// A turn that ended without tool calls, under `output_schema`: its text is the answer.
    fn text_answer(
        &self,
        message: &MessageResponse,
        spec: &crate::output::OutputSpec,
        state: &mut RunState,
        run: &mut RunResult,
    ) -> Result<Verdict> {
        let answer = crate::output::Answer::Text(message.text());
        state.output_attempts += 1;
        match crate::output::check(&answer, &spec.schema) {
            Ok(v) => {
                run.output = Some(v);
                Ok(Verdict::Done)
            }
            Err((errors, value)) => {
                if state.output_attempts > spec.retries {
                    return Err(output_failure(errors, value, &answer, state));
                }
                let text = crate::output::correction(&errors, self.output_tool(spec));
                self.record(Entry::new(EntryRole::User, vec![ContentBlock::text(text)]))?;
                Ok(Verdict::Retry)
            }
        }
    }

    /// A turn that called `final_answer`: its input is the answer. The turn's other calls are not run (the
    /// model is told to make them before answering); every call gets its one result.
    #[allow(clippy::too_many_arguments)]
    fn final_answer(
        &self,
        message: &MessageResponse,
        calls: &[ToolUseBlock],
        bad_inputs: &HashMap<String, Value>,
        (schema, retries): (Value, u32),
        state: &mut RunState,
        run: &mut RunResult,
        on_event: &mut dyn FnMut(&Event),
    ) -> Result<Verdict> {
        let answer = crate::output::answer_of(message, &schema);
        state.output_attempts += 1;
        let verdict = match &answer {
            crate::output::Answer::Tool { id, .. } if bad_inputs.contains_key(id) => {
                let raw = bad_inputs.get(id).cloned();
                Err((vec![bad_input_message(raw.as_ref().unwrap_or(&Value::Null))], raw))
            }
            a => crate::output::check(a, &schema),
        };
        let failed = verdict.as_ref().err().map(|(errors, _)| crate::output::correction(errors, true));
        for call in calls {
            on_event(&Event::ToolUse { id: call.id.clone(), name: call.name.clone(), input: call.input.clone() });
            let (content, is_error) = if call.name != crate::output::TOOL_NAME {
                let why = "not run: final_answer was called in the same turn; make the calls you need first,                            then call final_answer alone";
                (why.to_string(), true)
            } else {
                match &failed {
                    Some(text) => (text.clone(), true),
                    None => ("accepted".to_string(), false),
                }
            };
            self.record(Entry::tool_result(&call.id, &call.name, Value::String(content.clone()), is_error))?;
            on_event(&Event::ToolResult {
                id: call.id.clone(),
                name: call.name.clone(),
                content: Value::String(content),
                is_error,
                denied: false,
                duration_ms: 0,
            });
        }
        match verdict {
            Ok(v) => {
                // The caller sees what a native answer gives: the JSON as the text, a turn that ended.
                if run.text.trim().is_empty() {
                    run.text = v.to_string();
                }
                run.stop_reason = Some(StopReason::EndTurn);
                run.output = Some(v);
                Ok(Verdict::Done)
            }
            Err((errors, value)) if state.output_attempts > retries => {
                Err(output_failure(errors, value, &answer, state))
            }
            Err(_) => Ok(Verdict::Retry),
        }
    }

    /// One model turn, with compaction around it: before the request when it would pass the threshold, and
    /// after an answer that the prompt is too long (then the turn is sent again; at most twice, the second
    /// time keeping only the last turn).
    fn compacting_turn(
        &self,
        turn: u32,
        wrap_up: bool,
        cancel: &CancelToken,
        run: &mut RunResult,
        on_event: &mut dyn FnMut(&Event),
    ) -> Result<(MessageResponse, HashMap<String, Value>)> {
        use crate::compaction::Reason;
        let request_now = || {
            let mut r = self.request();
            crate::progress::wrap_up(&mut r, wrap_up);
            r
        };
        let mut request = request_now();
        let (tokens, mut measured) = self.estimate_request(&request);
        if self.over_threshold(tokens) {
            let mut spent = (&mut run.usage, &mut run.cost_usd);
            if self.compact_inner(Reason::Threshold, None, false, cancel, &mut spent, on_event)?.is_some() {
                request = request_now();
                measured = Some(crate::compaction::request_bytes(&request));
            }
        }
        let mut overflows = 0;
        loop {
            match self.model_turn(turn, (request, measured), cancel, &mut run.usage, &mut run.cost_usd, on_event) {
                Err(e) if overflows < 2 && self.config().compaction && crate::compaction::is_overflow(&e) => {
                    overflows += 1;
                    let mut spent = (&mut run.usage, &mut run.cost_usd);
                    if self
                        .compact_inner(Reason::Overflow, None, overflows > 1, cancel, &mut spent, on_event)?
                        .is_none()
                    {
                        return Err(e);
                    }
                    request = request_now();
                    measured = Some(crate::compaction::request_bytes(&request));
                }
                other => return other,
            }
        }
    }

    /// The context window used for compaction: the configured one, else the model table's.
    pub fn context_window(&self) -> Option<u64> {
        let c = lock(&self.config);
        c.context_window.or_else(|| crate::compaction::context_window(&c.model))
    }

    /// Tokens the next request would carry, estimated from its size and the ratio of the last real usage
    /// (no request is made). `input`: user input to count as if it were added.
    pub fn estimate_tokens(&self, input: Option<Vec<ContentBlock>>) -> u64 {
        let extra = input.as_ref().map(crate::compaction::json_bytes).unwrap_or(0);
        let est = *lock(&self.estimator);
        match self.baseline_estimate() {
            Some(t) => t + est.tokens(extra),
            None => est.tokens(crate::compaction::request_bytes(&self.request_with(input))),
        }
    }

    /// The next request's tokens from the last reported usage plus what was added since (`None` without a
    /// usable baseline: before the first answer, after a compaction or a reset).
    fn baseline_estimate(&self) -> Option<u64> {
        let b = (*lock(&self.baseline))?;
        let added = self.conversation.content_bytes_from(b.upto)?;
        Some(b.tokens + lock(&self.estimator).tokens(added))
    }

    /// The next request's estimated tokens, and its size in bytes when it had to be measured (then the answer's
    /// usage calibrates the estimator).
    fn estimate_request(&self, request: &Request) -> (u64, Option<u64>) {
        match self.baseline_estimate() {
            Some(t) => (t, None),
            None => {
                let bytes = crate::compaction::request_bytes(request);
                (lock(&self.estimator).tokens(bytes), Some(bytes))
            }
        }
    }

    /// Anchor the estimate to the newest answered turn in the store that no compaction came after (what
    /// a loaded session holds).
    fn rebase(&self) {
        let entries = self.conversation.snapshot();
        let mut found = None;
        for (i, e) in entries.iter().enumerate().rev() {
            if crate::compaction::Compaction::of(e).is_some() {
                break;
            }
            if e.role == EntryRole::Assistant && e.status == EntryStatus::Complete {
                found = e.usage.as_ref().map(|u| (i, prompt_tokens(u) + u.output_tokens)).filter(|(_, t)| *t > 0);
                break;
            }
        }
        *lock(&self.baseline) = found.map(|(i, tokens)| Baseline { tokens, upto: i + 1 });
    }

    /// Tokens the next request would carry: from the API's token-counting endpoint where the provider offers
    /// one (Anthropic), else [`Agent::estimate_tokens`]. `input`: user input to count as if it were added.
    pub fn count_tokens(&self, input: Option<Vec<ContentBlock>>) -> Result<u64> {
        let request = self.request_with(input.clone());
        match self.provider.count_tokens(&request, &CancelToken::new())? {
            Some(n) => Ok(n),
            None => Ok(self.estimate_tokens(input)),
        }
    }

    fn request_with(&self, input: Option<Vec<ContentBlock>>) -> Request {
        let mut request = self.request();
        if let Some(blocks) = input {
            let mut entries = self.conversation.snapshot();
            entries.push(Entry::new(EntryRole::User, blocks));
            request.messages = crate::conversation::render_view(&entries);
            if lock(&self.config).cache && self.provider.supports_cache() {
                crate::cache::add_breakpoints(&mut request);
            }
        }
        request
    }

    /// Whether a request of `tokens` passes the compaction threshold: `compact_threshold` of the window, or
    /// less when the answer's `max_tokens` would not fit beside it.
    fn over_threshold(&self, tokens: u64) -> bool {
        let (on, threshold, max_tokens) = {
            let c = lock(&self.config);
            (c.compaction, c.compact_threshold, c.max_tokens)
        };
        let Some(window) = self.context_window().filter(|_| on) else { return false };
        let mut limit = threshold * window as f64;
        if u64::from(max_tokens) * 2 < window {
            limit = limit.min((window - u64::from(max_tokens)) as f64);
        }
        tokens as f64 > limit
    }

    /// Compact the conversation now (see [`crate::compaction`]): summarize the older turns with the model
    /// (`instructions` say what the summary should keep), keeping the first user message and the newest
    /// turns; when the summary request fails, drop the older turns instead. The history keeps everything;
    /// the record is an entry (and a session line). Returns it, or `None` when there was nothing to compact.
    pub fn compact(
        &self,
        instructions: Option<&str>,
        on_event: &mut dyn FnMut(&Event),
    ) -> Result<Option<crate::compaction::Compaction>> {
        let _busy = self.begin(CancelToken::new())?;
        let cancel = self.token();
        let mut usage = Usage::default();
        let mut cost = None;
        let mut spent = (&mut usage, &mut cost);
        self.compact_inner(crate::compaction::Reason::Manual, instructions, false, &cancel, &mut spent, on_event)
    }

    fn compact_inner(
        &self,
        reason: crate::compaction::Reason,
        instructions: Option<&str>,
        aggressive: bool,
        cancel: &CancelToken,
        spent: &mut (&mut Usage, &mut Option<f64>),
        on_event: &mut dyn FnMut(&Event),
    ) -> Result<Option<crate::compaction::Compaction>> {
        use crate::compaction::{Compaction, Method, Plan, entry_bytes, json_bytes, request_bytes};
        let config = self.config();
        let window = self.context_window();
        let request = self.request();
        let est = *lock(&self.estimator);
        let total = request_bytes(&request);
        let before = est.tokens(total);
        // Budgets in bytes: the window's, or (unknown window) the request's own size.
        let window_bytes = window.map(|w| w as f64 * est.bytes_per_token).unwrap_or(total as f64 * 1.25);
        let fits = |bytes: u64| (bytes as f64) <= config.compact_threshold * window_bytes;
        let target = (0.5 * window_bytes) as u64;
        let manual = reason == crate::compaction::Reason::Manual;
        // Keep about 30% of the window verbatim; asked by hand, at most a quarter of what there is (so a
        // conversation far from the limit still gets compacted).
        let tail_budget = match (aggressive, manual) {
            (true, _) => 0,
            (false, true) => ((0.3 * window_bytes) as u64).min(total / 4),
            (false, false) => (0.3 * window_bytes) as u64,
        };
        let head_budget = (0.1 * window_bytes) as u64;
        let entries = self.conversation.snapshot();
        let eff = crate::compaction::effective(&entries).into_owned();
        let plan = Plan::new(&eff, tail_budget, head_budget);
        let size_of =
            |ids: &[String]| -> u64 { eff.iter().filter(|e| ids.contains(&e.id)).map(entry_bytes).sum::<u64>() };
        const NOTE_BYTES: u64 = 160;
        let clear_saves = size_of(&plan.clearable).saturating_sub(NOTE_BYTES * plan.clearable.len() as u64);
        let mut record = Compaction {
            reason,
            method: Method::ClearToolResults,
            tokens_before: before,
            tokens_after: before,
            removed: Vec::new(),
            cleared: Vec::new(),
            summary: None,
            fallback_reason: None,
            instructions: instructions.map(str::to_string),
            todos: None,
        };
        // 1. The cheapest win: clear old, large tool results, when that is enough.
        let clearing_is_enough = !manual && !aggressive && total.saturating_sub(clear_saves) <= target;
        if !plan.clearable.is_empty() && (clearing_is_enough || !plan.has_middle()) {
            record.cleared = plan.clearable.clone();
            record.tokens_after = est.tokens(total.saturating_sub(clear_saves));
            return self.record_compaction(record, None, spent, on_event).map(Some);
        }
        if !plan.has_middle() {
            return Ok(None);
        }
        // 2. Summarize the middle; 3. or drop it.
        let middle = &eff[plan.middle_start..plan.tail_start];
        let middle_bytes: u64 = middle.iter().map(entry_bytes).sum();
        let removed: Vec<String> = middle.iter().map(|e| e.id.clone()).collect();
        let todos = {
            let list = self.todos();
            (!list.is_empty()).then(|| crate::todo::render(&list))
        };
        let model = config.compaction_model.clone().unwrap_or(config.model.clone());
        let max_summary = window.map(|w| (w / 20).clamp(1024, 8192)).unwrap_or(4096) as u32;
        let transcript_budget = ((0.5 * window_bytes) as usize).clamp(8_000, 600_000);
        let text = crate::compaction::transcript(middle, transcript_budget);
        let summary_req =
            crate::compaction::summary_request(&model, &text, todos.as_deref(), instructions, max_summary);
        let mut summary_turn = None;
        let summary_tokens = est.tokens(request_bytes(&summary_req));
        let answer = if self.affordable(&model, summary_tokens + u64::from(max_summary)) {
            // The summary request is a request too: the host's before_request hook sees it.
            let before_request = lock(&self.hooks).before_request.clone();
            if let Some(hook) = before_request {
                hook(&summary_req).map_err(|message| Error::Hook { hook: "before_request".into(), message })?;
            }
            self.provider.send(&summary_req, cancel, &mut |_| {})
        } else {
            Err(Error::Config("it would take the spend past max_cost_usd".into()))
        };
        let fallback = match answer {
            Err(Error::Cancelled { .. }) => return Err(Error::Cancelled { partial: None }),
            Err(e) => Some(format!("the summary request failed: {e}")),
            Ok(resp) => {
                let summary = resp.message.text();
                let after = total.saturating_sub(middle_bytes) + json_bytes(&summary) + NOTE_BYTES * 2;
                let used = (resp.message.model.clone(), resp.message.usage.clone());
                summary_turn = Some(used);
                if summary.trim().is_empty() {
                    Some("the summary came back empty".to_string())
                } else if !fits(after) && window.is_some() {
                    Some(format!("the summary left the request at ~{} tokens, still too large", est.tokens(after)))
                } else {
                    record.method = Method::Summary;
                    record.summary = Some(summary);
                    record.tokens_after = est.tokens(after);
                    None
                }
            }
        };
        record.removed = removed;
        record.todos = todos;
        if let Some(why) = fallback {
            record.method = Method::Drop;
            record.fallback_reason = Some(why);
            let mut after = total.saturating_sub(middle_bytes) + NOTE_BYTES * 2;
            if window.is_some() && !fits(after) && !aggressive {
                // Keep only the last turn.
                let tight = Plan::new(&eff, 0, head_budget);
                let middle = &eff[tight.middle_start..tight.tail_start];
                record.removed = middle.iter().map(|e| e.id.clone()).collect();
                after = total.saturating_sub(middle.iter().map(entry_bytes).sum::<u64>()) + NOTE_BYTES * 2;
            }
            record.tokens_after = est.tokens(after);
        }
        let model_for = summary_turn.map(|(m, u)| (if m.is_empty() { model.clone() } else { m }, u));
        self.record_compaction(record, model_for, spent, on_event).map(Some)
    }

    /// Store the compaction (and its summary request's usage), tell the host.
    fn record_compaction(
        &self,
        record: crate::compaction::Compaction,
        summary_turn: Option<(String, Usage)>,
        spent: &mut (&mut Usage, &mut Option<f64>),
        on_event: &mut dyn FnMut(&Event),
    ) -> Result<crate::compaction::Compaction> {
        *lock(&self.baseline) = None;
        let mut entry = record.clone().into_entry();
        if let Some((model, usage)) = summary_turn {
            spent.0.add(&usage);
            if let Some(c) = crate::pricing::estimate_cost_usd(&model, &usage) {
                *spent.1.get_or_insert(0.0) += c;
            }
            self.charge(&model, &usage);
            entry.usage = Some(usage);
            entry.model = Some(model);
        }
        self.record(entry)?;
        on_event(&Event::Compaction {
            reason: record.reason,
            method: record.method,
            tokens_before: record.tokens_before,
            tokens_after: record.tokens_after,
            removed: record.removed.len(),
            cleared: record.cleared.len(),
            summary: record.summary.clone(),
            fallback_reason: record.fallback_reason.clone(),
        });
        Ok(record)
    }

    /// One request/response (`measured`: the request's size in bytes, when it was measured, to calibrate the
    /// token estimate with the answer's usage). The assistant entry exists while streaming; it ends complete
    /// or error.
    /// Returns the message with every tool input an object (what the API view holds and sends), and the
    /// inputs that were not, by call id, so those calls are answered with an error instead of being run.
    fn model_turn(
        &self,
        turn: u32,
        (request, measured): (Request, Option<u64>),
        cancel: &CancelToken,
        run_usage: &mut Usage,
        run_cost: &mut Option<f64>,
        on_event: &mut dyn FnMut(&Event),
    ) -> Result<(MessageResponse, HashMap<String, Value>)> {
        let before_request = lock(&self.hooks).before_request.clone();
        if let Some(hook) = before_request {
            hook(&request).map_err(|message| Error::Hook { hook: "before_request".into(), message })?;
        }
        let mut entry = Entry::new(EntryRole::Assistant, Vec::new());
        entry.status = EntryStatus::Streaming;
        entry.model = Some(request.model.clone());
        let id = self.conversation.push(entry);
        let started = Instant::now();
        let before = run_usage.clone();
        let streamed = std::cell::Cell::new(false);
        let mut send_event = |ev: StreamEvent| match ev {
            StreamEvent::TextDelta { text, .. } => {
                streamed.set(true);
                on_event(&Event::Text { text })
            }
            StreamEvent::ThinkingDelta { thinking, .. } => {
                streamed.set(true);
                on_event(&Event::Thinking { thinking })
            }
            StreamEvent::ToolInputDelta { index, partial_json } => {
                streamed.set(true);
                on_event(&Event::ToolInputDelta { index, partial_json })
            }
            StreamEvent::Usage(u) => {
                streamed.set(true);
                let mut total = before.clone();
                total.add(&u);
                on_event(&Event::Usage { turn: u, run: total });
            }
            StreamEvent::ToolUseStart { .. } => streamed.set(true),
            StreamEvent::Raw { .. } | StreamEvent::RawJson { .. } => {}
        };
        let result = self.provider.send(&request, cancel, &mut send_event);
        let duration_ms = started.elapsed().as_millis() as u64;
        match result {
            Ok(resp) => {
                if !streamed.get() {
                    // A provider that answered in one piece (a JSON response) reported nothing as it went:
                    // give the host the events a stream would have, so a UI shows the text and the usage
                    // whether `stream` is on or off.
                    crate::provider::emit_message_events(&resp.message, &mut send_event);
                }
                let mut m = resp.message;
                let bad_inputs = object_inputs(&mut m.content);
                self.conversation.update(&id, |e| {
                    e.content = m.content.clone();
                    e.status = EntryStatus::Complete;
                    e.duration_ms = Some(duration_ms);
                    if !m.model.is_empty() {
                        e.model = Some(m.model.clone());
                    }
                    e.usage = Some(m.usage.clone());
                    e.stop_reason = m.stop_reason.clone();
                    if let Some(rid) = &resp.request_id {
                        e.meta.insert("request_id".into(), Value::String(rid.clone()));
                    }
                    if !m.id.is_empty() {
                        e.meta.insert("message_id".into(), Value::String(m.id.clone()));
                    }
                });
                self.persist(&id)?;
                let prompt = prompt_tokens(&m.usage);
                if let Some(bytes) = measured {
                    lock(&self.estimator).learn(bytes, prompt);
                }
                *lock(&self.baseline) = (prompt > 0)
                    .then(|| Baseline { tokens: prompt + m.usage.output_tokens, upto: self.conversation.len() });
                run_usage.add(&m.usage);
                // Priced like the stored turn: by the model that answered, else the one asked for.
                let priced = if m.model.is_empty() { &request.model } else { &m.model };
                if let Some(c) = crate::pricing::estimate_cost_usd(priced, &m.usage) {
                    *run_cost.get_or_insert(0.0) += c;
                }
                self.charge(priced, &m.usage);
                on_event(&Event::TurnEnd { turn, stop_reason: m.stop_reason.clone(), usage: m.usage.clone() });
                Ok((m, bad_inputs))
            }
            Err(err) => {
                let partial = err.partial().cloned();
                self.conversation.update(&id, |e| {
                    e.status = EntryStatus::Error;
                    e.duration_ms = Some(duration_ms);
                    e.error = Some(err.to_string());
                    if let Some(p) = &partial {
                        e.content = p.content.clone();
                        object_inputs(&mut e.content);
                        e.usage = Some(p.usage.clone());
                    }
                });
                if let Some(p) = &partial {
                    run_usage.add(&p.usage);
                    if let Some(c) = crate::pricing::estimate_cost_usd(&request.model, &p.usage) {
                        *run_cost.get_or_insert(0.0) += c;
                    }
                    self.charge(&request.model, &p.usage);
                }
                self.persist(&id)?;
                Err(err)
            }
        }
    }

    fn persist(&self, id: &str) -> Result<()> {
        if let Some(s) = lock(&self.session).as_mut() {
            if let Some(e) = self.conversation.get(id) {
                s.append(&e)?;
            }
        }
        Ok(())
    }

    /// Run one turn's calls. Returns `true` when the runaway guard stops the run.
    fn run_tools(
        &self,
        calls: &[ToolUseBlock],
        bad_inputs: &HashMap<String, Value>,
        state: &mut RunState,
        cancel: &CancelToken,
        run: &mut RunResult,
        on_event: &mut dyn FnMut(&Event),
    ) -> Result<bool> {
        let permission = lock(&self.permission).clone();
        let hooks = lock(&self.hooks).clone();
        let rules = lock(&self.rules).clone();
        let mut hook_failed: Option<Error> = None;
        let (concurrency, guard, remind_after, progress_guard) = {
            let c = lock(&self.config);
            (c.tool_concurrency.max(1), c.repeat_guard, c.todo_reminder_after, c.progress_guard)
        };
        if progress_guard.is_some() {
            state.progress.begin_turn(calls);
        }
        // The todo reminder: due when the model has left an unfinished list alone for a while.
        let planning = self.tools.get(crate::todo::TOOL_NAME).is_some();
        let mut reminder = None;
        if planning && calls.iter().any(|c| c.name == crate::todo::TOOL_NAME) {
            state.since_todo = 0;
        } else if planning {
            state.since_todo += 1;
            if remind_after.is_some_and(|n| state.since_todo >= n.max(1)) {
                let list = crate::todo::current(&self.conversation.snapshot());
                if crate::todo::unfinished(&list) > 0 {
                    reminder = Some(crate::todo::reminder(&list));
                    state.since_todo = 0;
                }
            }
        }
        let mut stop = false;
        // Whether the runaway guard answered a call of this turn: then it, not progress detection, speaks.
        let mut turn_repeated = false;
        let mut i = 0;
        let mut fatal: Option<(String, String)> = None;
        while i < calls.len() {
            // A batch: one call, or a run of consecutive parallel-safe calls (up to the cap).
            let parallel = |c: &ToolUseBlock| self.tools.get(&c.name).is_some_and(|t| t.parallel_safe);
            let mut end = i + 1;
            if parallel(&calls[i]) {
                while end < calls.len() && end - i < concurrency && parallel(&calls[end]) {
                    end += 1;
                }
            }
            let batch = &calls[i..end];
            let mut outcomes: Vec<Option<CallOutcome>> = vec![None; batch.len()];
            let mut denied = vec![false; batch.len()];
            let mut repeated = vec![false; batch.len()];
            // The same call as in the turn before: the runaway guard's to count, not progress detection's.
            let mut again = vec![false; batch.len()];
            let mut to_run = Vec::new();
            // The calls as they run: `before_tool` may have replaced an input.
            let mut effective: Vec<ToolUseBlock> = batch.to_vec();
            for (k, call) in batch.iter().enumerate() {
                // Every call the model made is announced, also one that is then refused or not run, so a
                // host sees a tool_use before each tool_result.
                on_event(&Event::ToolUse { id: call.id.clone(), name: call.name.clone(), input: call.input.clone() });
                let count = state.repeats.see(call);
                again[k] = guard.is_some() && count >= 2;
                if let Some((tool, _)) = &fatal {
                    outcomes[k] = Some(CallOutcome::error(format!("not run: tool '{tool}' aborted the run first")));
                } else if let Some(e) = &hook_failed {
                    outcomes[k] = Some(CallOutcome::error(format!("not run: {e}")));
                } else if stop {
                    outcomes[k] = Some(CallOutcome::error("not run: the run was stopped for repeating the same call"));
                } else if i + k >= MAX_TOOL_CALLS_PER_TURN {
                    outcomes[k] = Some(CallOutcome::error(format!(
                        "not run: a turn may make at most {MAX_TOOL_CALLS_PER_TURN} tool calls and this turn made {}; \
                         make fewer calls per turn (one bash command can do many things)",
                        calls.len()
                    )));
                } else if let Some(raw) = bad_inputs.get(&call.id) {
                    outcomes[k] = Some(CallOutcome::error(bad_input_message(raw)));
                } else if let Some(g) = guard.filter(|g| count >= g.warn_after) {
                    stop = count >= g.warn_after.saturating_add(g.stop_after);
                    repeated[k] = true;
                    turn_repeated = true;
                    let note = format!(
                        "not run: same call and same input as the previous {} calls to {}, which already ran. If the \
                         task is done, answer without calling a tool; otherwise change the input or try another way.",
                        count - 1,
                        call.name
                    );
                    on_event(&Event::Repetition {
                        id: call.id.clone(),
                        name: call.name.clone(),
                        count,
                        stopped: stop,
                        note: note.clone(),
                    });
                    outcomes[k] = Some(CallOutcome::error(note));
                } else if cancel.is_cancelled() {
                    outcomes[k] =
                        Some(CallOutcome::error("interrupted: the run was cancelled before this tool call ran"));
                } else {
                    match gate(call, rules.as_ref(), &hooks, permission.as_ref()) {
                        Gate::Run(input) => {
                            effective[k].input = input;
                            to_run.push(k);
                        }
                        Gate::Deny(reason) => {
                            denied[k] = true;
                            outcomes[k] = Some(CallOutcome::error(format!("Permission denied: {reason}")));
                        }
                        Gate::Fail(e) => {
                            outcomes[k] = Some(CallOutcome::error(format!("not run: {e}")));
                            hook_failed = Some(e);
                        }
                    }
                }
            }
            let batch = &effective[..];
            let mut children: Vec<Option<crate::subagent::ChildRun>> = vec![None; batch.len()];
            if to_run.len() == 1 {
                let k = to_run[0];
                // `task` is not parallel-safe, so it always runs alone, here, where its child's events can
                // reach the host as they happen.
                if batch[k].name == crate::subagent::TOOL_NAME && !lock(&self.subagents).is_empty() {
                    let (o, child) = self.run_child(&batch[k], cancel, on_event);
                    outcomes[k] = Some(o);
                    children[k] = child;
                } else {
                    outcomes[k] = Some(self.tools.execute(&batch[k], cancel));
                }
            } else if !to_run.is_empty() {
                let results: Vec<(usize, CallOutcome)> = std::thread::scope(|s| {
                    let handles: Vec<_> =
                        to_run.iter().map(|&k| (k, s.spawn(move || self.tools.execute(&batch[k], cancel)))).collect();
                    handles
                        .into_iter()
                        .map(|(k, h)| {
                            (k, h.join().unwrap_or_else(|_| CallOutcome::error("the tool's thread panicked")))
                        })
                        .collect()
                });
                for (k, o) in results {
                    outcomes[k] = Some(o);
                }
            }
            let last_batch = end == calls.len();
            let batch_len = batch.len();
            for (k, (((((call, outcome), denied), repeated), again), child)) in
                batch.iter().zip(outcomes).zip(denied).zip(repeated).zip(again).zip(children).enumerate()
            {
                let mut outcome = outcome.unwrap_or_else(|| CallOutcome::error("not run"));
                if let (Some(hook), true, None) = (&hooks.after_tool, to_run.contains(&k), &hook_failed) {
                    let view = crate::hooks::ToolResultView {
                        content: outcome.content.clone(),
                        is_error: outcome.is_error,
                        denied,
                    };
                    match hook(call, &view) {
                        Ok(Some(text)) => outcome.content = Value::String(self.tools.redact(text)),
                        Ok(None) => {}
                        Err(message) => hook_failed = Some(Error::Hook { hook: "after_tool".into(), message }),
                    }
                }
                if let Err(m) =
                    crate::content::check_result(&outcome.content, crate::content::limits(self.provider.name()))
                {
                    // The model reads why instead of the request failing on the API's size limit.
                    outcome.content = Value::String(format!("the tool's result was not sent: {m}"));
                    outcome.is_error = true;
                }
                if let Some(g) = &progress_guard {
                    // A refusal by the user is news to the model, not a repeat.
                    if denied {
                        state.progress.moved();
                    } else if repeated {
                        // Refused by the runaway guard, which said so: no verdict here.
                    } else if again {
                        if let Some(note) = state.progress.again(call, &outcome.content, outcome.is_error) {
                            append_text(&mut outcome.content, &note);
                        }
                    } else {
                        state.progress.see(call, &outcome.content, outcome.is_error);
                    }
                    if last_batch && k + 1 == batch_len {
                        if let Some(stall) = state.progress.end_turn(g).filter(|_| !turn_repeated) {
                            append_text(&mut outcome.content, &stall.note);
                            on_event(&Event::Repetition {
                                id: call.id.clone(),
                                name: call.name.clone(),
                                count: stall.count,
                                stopped: stall.stop,
                                note: stall.note,
                            });
                            stop |= stall.stop;
                        }
                    }
                }
                if last_batch && k + 1 == batch_len {
                    if let Some(text) = reminder.take() {
                        append_text(&mut outcome.content, &text);
                    }
                }
                if let (Some(m), None) = (&outcome.fatal, &fatal) {
                    fatal = Some((call.name.clone(), m.clone()));
                }
                let mut entry = Entry::tool_result(&call.id, &call.name, outcome.content.clone(), outcome.is_error);
                entry.duration_ms = Some(outcome.duration.as_millis() as u64);
                if let Some(c) = &child {
                    // The child's usage rolls into the conversation's (and the session's) through this entry.
                    entry.usage = Some(c.usage.clone());
                    entry.model = Some(c.model.clone());
                    entry.meta.insert("subagent".into(), c.meta());
                    run.usage.add(&c.usage);
                    if let Some(cost) = crate::pricing::estimate_cost_usd(&c.model, &c.usage) {
                        *run.cost_usd.get_or_insert(0.0) += cost;
                    }
                    self.charge(&c.model, &c.usage);
                }
                entry.created_at = now_ms();
                self.record(entry)?;
                on_event(&Event::ToolResult {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    content: outcome.content.clone(),
                    is_error: outcome.is_error,
                    denied,
                    duration_ms: outcome.duration.as_millis() as u64,
                });
                if call.name == crate::todo::TOOL_NAME && !outcome.is_error && planning {
                    on_event(&Event::Todo { todos: crate::todo::current(&self.conversation.snapshot()) });
                }
                run.tool_calls.push(ToolCallRecord {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    input: call.input.clone(),
                    output: outcome.content,
                    is_error: outcome.is_error,
                    denied,
                    duration_ms: outcome.duration.as_millis() as u64,
                });
            }
            i = end;
        }
        if let Some((tool, message)) = fatal {
            return Err(Error::ToolAborted { tool, message });
        }
        if let Some(e) = hook_failed {
            return Err(e);
        }
        if cancel.is_cancelled() {
            return Err(Error::Cancelled { partial: None });
        }
        Ok(stop)
    }
}

/// What the checks before a call decided.
enum Gate {
    /// Run it, with this input.
    Run(Value),
    /// Refused, with the reason the model reads.
    Deny(String),
    /// A hook failed: the run ends.
    Fail(Error),
}

/// The checks before one call, in order: the permission rules, `before_tool`, the permission callable.
fn gate(
    call: &ToolUseBlock,
    rules: Option<&(Arc<crate::rules::PermissionRules>, std::path::PathBuf)>,
    hooks: &crate::hooks::Hooks,
    permission: Option<&PermissionHook>,
) -> Gate {
    use crate::hooks::BeforeTool;
    use crate::rules::RuleDecision;
    let decide = |input: &Value| match rules {
        Some((r, ws)) => r.decide(&call.name, input, ws),
        None => RuleDecision::NoMatch,
    };
    let mut decision = decide(&call.input);
    if let RuleDecision::Deny(rule) = &decision {
        return Gate::Deny(format!("the rule {rule} forbids this call"));
    }
    let mut call = std::borrow::Cow::Borrowed(call);
    if let Some(hook) = &hooks.before_tool {
        match hook(&call) {
            Ok(BeforeTool::Continue) => {}
            Ok(BeforeTool::Deny(reason)) => return Gate::Deny(reason),
            Ok(BeforeTool::Input(input)) if input.is_object() => {
                decision = decide(&input);
                if let RuleDecision::Deny(rule) = &decision {
                    return Gate::Deny(format!("the rule {rule} forbids this call"));
                }
                call.to_mut().input = input;
            }
            Ok(BeforeTool::Input(other)) => {
                let message = format!(
                    "it replaced the input with {}, which is not an object",
                    crate::text::ellipsize(&other.to_string(), 100)
                );
                return Gate::Fail(Error::Hook { hook: "before_tool".into(), message });
            }
            Err(message) => return Gate::Fail(Error::Hook { hook: "before_tool".into(), message }),
        }
    }
    let ask = |call: &ToolUseBlock| match permission.map(|p| p(call)) {
        Some(Permission::Deny(reason)) => Gate::Deny(reason),
        _ => Gate::Run(call.input.clone()),
    };
    match decision {
        RuleDecision::Allow(_) => Gate::Run(call.input.clone()),
        RuleDecision::Ask(rule) if permission.is_none() => {
            Gate::Deny(format!("the rule {rule} asks for approval of this call, and there is no one to ask"))
        }
        _ => ask(&call),
    }
}

/// The error that ends a run whose last structured answer was invalid.
fn output_failure(
    errors: Vec<String>,
    output: Option<Value>,
    answer: &crate::output::Answer,
    state: &RunState,
) -> Error {
    let text = match answer {
        crate::output::Answer::Text(t) => t.clone(),
        crate::output::Answer::Tool { value, .. } => value.to_string(),
    };
    Error::OutputValidation(Box::new(crate::output::OutputFailure {
        errors,
        output,
        text,
        attempts: state.output_attempts,
    }))
}

/// Add `text` at the end of a tool result's content (a string or blocks).
fn append_text(content: &mut Value, text: &str) {
    match content {
        Value::String(s) => {
            s.push_str("\n\n");
            s.push_str(text);
        }
        Value::Array(blocks) => blocks.push(serde_json::json!({"type": "text", "text": text})),
        other => *other = Value::String(format!("{other}\n\n{text}")),
    }
}

/// Make every `tool_use` input an object, in place, so the stored turn, the API view and the request are
/// the same bytes (the Messages API takes only objects; weak models send `[1, 2]`, and OpenAI `arguments`
/// may not parse). Returns the inputs replaced, by call id.
fn object_inputs(content: &mut [ContentBlock]) -> HashMap<String, Value> {
    let mut bad = HashMap::new();
    for block in content {
        if let ContentBlock::ToolUse(t) = block {
            if !t.input.is_object() {
                bad.insert(t.id.clone(), std::mem::replace(&mut t.input, Value::Object(Map::new())));
            }
        }
    }
    bad
}

fn bad_input_message(raw: &Value) -> String {
    let shown = match raw {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    format!(
        "not run: the tool input must be a JSON object with the parameters as keys, got {}",
        crate::text::ellipsize(&shown, 200)
    )
}
