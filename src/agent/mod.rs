//! The agent loop: input → request → (tool_use → run tools → results)* → answer.
//!
//! Invariants kept here: the user's input, every completed assistant turn and every tool result are in the
//! store (and the session file) before the next request goes out; a failed or cancelled run leaves a valid
//! conversation that [`Agent::resume`] continues without re-running tools that already ran; every
//! `tool_use` gets exactly one result — one that was cut off, denied, interrupted or never started says so.
//!
//! Where things are: this file holds the [`Agent`] handle and its public API (setters, run/resume entry
//! points, usage, close); `config.rs` [`AgentConfig`] and the permission hook's types; `events.rs`
//! [`Event`]; `spec.rs` [`AgentSpec`] and the builder, the one way an agent is put together (for the options
//! and for a `task` call's child agents), its system prompt assembled there from named sections; `build.rs`
//! a child agent's run; `run_loop.rs` the loop of a run (requests, the model's
//! turn, the spend cap, structured answers), one phase at a time; `driver.rs` [`RunDriver`], a run its caller
//! steps through those phases; `approval.rs` a stepped run's pause for approvals; `dispatch.rs` one turn's
//! tool calls (rules, hooks, permission, concurrency); `switch.rs` changing the model and provider (`set_model`,
//! fallbacks); `compact.rs` token estimates and compaction as the loop needs them; `fit.rs` keeps each tool
//! result within a share of the context window.

mod approval;
mod build;
mod child;
mod compact;
mod config;
mod dispatch;
mod driver;
mod events;
mod finish;
mod fit;
mod run_loop;
mod spans;
mod spec;
mod switch;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::cancel::CancelToken;
use crate::conversation::{Conversation, Entry, EntryRole, EntryStatus, now_ms};
use crate::error::{Error, Result};
use crate::provider::{Provider, StreamEvent};
pub use crate::run::{RunResult, ToolCallRecord};
use crate::store::SessionStore;
use crate::tools::{CallOutcome, ToolRegistry};
use crate::types::{ContentBlock, MessageResponse, Request, StopReason, ToolUseBlock, Usage};

pub use approval::{ApprovalError, ApprovalRequest, Step};
use compact::*;
pub use config::{AgentConfig, MAX_TOOL_CALLS_PER_TURN, MaxTurnsPolicy, Permission, PermissionHook, RepeatGuard};
use dispatch::*;
pub use driver::RunDriver;
pub use events::{Event, FILE_CHANGE_BEFORE_CAP, FileChangeKind};
use run_loop::*;
pub(crate) use spec::AgentBuilder;
pub use spec::{AgentSpec, PROMPT_SECTIONS, PromptSection};
pub use switch::ModelSpec;

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
/// [`Error::Busy`]); `cancel`, `usage`, `messages` and the store may be used from any thread
/// during a run.
pub struct Agent {
    /// What the agent was built from (see `spec.rs`): replaced by a changed copy only by the deprecated
    /// setters of what it holds, never by the options or the loop.
    spec: std::sync::RwLock<Arc<AgentSpec>>,
    /// The provider requests go to; replaced between runs by [`Agent::set_model`], and within a run by a
    /// fallback (see `switch.rs`).
    provider: std::sync::RwLock<Arc<dyn Provider>>,
    tools: ToolRegistry,
    conversation: Conversation,
    config: Mutex<AgentConfig>,
    /// What the host may change between runs: the permission callable, hooks, rules, child agent types.
    control: Mutex<Control>,
    /// What the agent holds outside its memory, let go by [`Agent::close`]: the session, MCP servers.
    attached: Mutex<Attached>,
    /// The run under way (or `when_idle`, `set_model`, `compact`): its cancel token; `None`: idle. One cell, so
    /// "is one running" and "what cancels it" cannot disagree.
    current: Arc<Mutex<Option<CancelToken>>>,
    sizing: Mutex<Sizing>,
    /// Each message's size from the last measured request, so measuring the next one costs what is new.
    sizes: crate::compaction::SizeCache,
    spend: Mutex<Spend>,
}

/// What the host may change between runs (one cell: a tool call reads them together).
#[derive(Clone, Default)]
struct Control {
    permission: Option<PermissionHook>,
    hooks: crate::hooks::Hooks,
    rules: Option<(Arc<crate::rules::PermissionRules>, std::path::PathBuf)>,
    subagents: std::collections::BTreeMap<String, crate::subagent::SubAgent>,
}

/// What the agent holds outside its memory (one cell: [`Agent::close`] lets go of them together).
#[derive(Default)]
struct Attached {
    session: Option<Box<dyn SessionStore>>,
    /// What attaching the session found; kept after it is closed.
    session_info: Option<SessionInfo>,
    mcp: Option<crate::mcp::McpServers>,
}

/// What the agent has spent, for `max_cost_usd`.
#[derive(Debug)]
struct Spend {
    /// The account each request is held against before it is sent and charged to after (see
    /// [`crate::ledger`]): the agent's own, one under a batch's, or — for a child agent — its parent's.
    ledger: Arc<crate::ledger::Ledger>,
    /// USD charged for this agent's requests (its children's and compaction summaries included): what a
    /// child reports to its parent's run (`None`: nothing priced).
    usd: Option<f64>,
    /// The largest answer seen, in output tokens: the estimate of the next answer's size (`None` before the
    /// first answer: then `max_tokens`).
    out_tokens: Option<u64>,
}

impl Default for Spend {
    fn default() -> Self {
        Spend { ledger: crate::ledger::Ledger::new(None), usd: None, out_tokens: None }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.close();
    }
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent").field("provider", &self.provider().name()).field("tools", &self.tools).finish()
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
        let spec = Arc::new(AgentSpec::plain(config));
        Agent::assemble(provider, tools, spec, Control::default(), Spend::default(), None)
    }

    /// The agent around its spec and what the builder made with it (see `spec.rs`).
    fn assemble(
        provider: Arc<dyn Provider>,
        tools: ToolRegistry,
        spec: Arc<AgentSpec>,
        control: Control,
        spend: Spend,
        mcp: Option<crate::mcp::McpServers>,
    ) -> Self {
        Agent {
            provider: std::sync::RwLock::new(provider),
            tools,
            conversation: Conversation::new(),
            config: Mutex::new(spec.settings.clone()),
            spec: std::sync::RwLock::new(spec),
            control: Mutex::new(control),
            attached: Mutex::new(Attached { mcp, ..Attached::default() }),
            current: Default::default(),
            sizing: Mutex::new(Sizing::default()),
            sizes: Default::default(),
            spend: Mutex::new(spend),
        }
    }

    /// What this agent was built from: its settings, its system prompt's sections, its tools (see
    /// [`AgentSpec`]). The same `Arc` for the agent's life unless a deprecated setter replaced it.
    pub fn spec(&self) -> Arc<AgentSpec> {
        self.spec.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// For the deprecated setters only: swap in a copy of the spec changed by `f`.
    fn respec(&self, f: impl FnOnce(&mut AgentSpec)) {
        let mut cell = self.spec.write().unwrap_or_else(|e| e.into_inner());
        let mut spec = AgentSpec::clone(&cell);
        f(&mut spec);
        *cell = Arc::new(spec);
    }

    /// Set the hooks (see [`crate::hooks`]); they apply from the next tool call or request.
    pub fn set_hooks(&self, hooks: crate::hooks::Hooks) {
        lock(&self.control).hooks = hooks;
    }

    /// Change some hooks in place.
    pub fn update_hooks(&self, f: impl FnOnce(&mut crate::hooks::Hooks)) {
        f(&mut lock(&self.control).hooks);
    }

    /// The hooks.
    pub fn hooks(&self) -> crate::hooks::Hooks {
        lock(&self.control).hooks.clone()
    }

    /// Set (or clear) the permission rules; relative path rules are anchored at `workspace`.
    pub fn set_rules(&self, rules: Option<Arc<crate::rules::PermissionRules>>, workspace: std::path::PathBuf) {
        lock(&self.control).rules = rules.map(|r| (r, workspace));
    }

    /// The permission rules, if any.
    pub fn rules(&self) -> Option<Arc<crate::rules::PermissionRules>> {
        lock(&self.control).rules.as_ref().map(|(r, _)| r.clone())
    }

    /// Record the instruction files that were loaded.
    #[deprecated(
        note = "the options' builder records them (`instruction_files`); an agent's spec is not changed after it is built"
    )]
    pub fn set_instructions(&self, found: crate::instructions::Instructions) {
        self.respec(|s| s.instructions = Some(found));
    }

    /// The instruction files loaded into the system prompt and the ones skipped (`None`: none asked for).
    pub fn instructions(&self) -> Option<crate::instructions::Instructions> {
        self.spec().instructions.clone()
    }

    /// The tool registry (register tools here).
    pub fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    /// The conversation store.
    pub fn conversation(&self) -> &Conversation {
        &self.conversation
    }

    /// The provider requests go to now (see [`Agent::set_model`]).
    pub fn provider(&self) -> Arc<dyn Provider> {
        self.provider.read().unwrap_or_else(|e| e.into_inner()).clone()
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
        lock(&self.control).permission = hook;
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
        let info = SessionInfo {
            path: session.location().into(),
            entries: report.entries.len(),
            torn_tail: report.torn_tail,
            skipped: report.skipped.clone(),
            created: report.created,
        };
        let mut attached = lock(&self.attached);
        attached.session_info = Some(info);
        attached.session = Some(session);
        drop(attached);
        // A resumed conversation's turns were spent too.
        if let Some(before) = self.conversation.cost_usd() {
            let mut spend = lock(&self.spend);
            *spend.usd.get_or_insert(0.0) += before;
            spend.ledger.record_local(before);
        }
        self.rebase();
        self.answer_pending(
            "interrupted: the previous session ended before this tool call finished; it may or may not have run",
        )?;
        Ok(report)
    }

    /// The attached session file and what attaching it found (`None`: no session).
    pub fn session_info(&self) -> Option<SessionInfo> {
        lock(&self.attached).session_info.clone()
    }

    /// The skills found at creation, and the ones skipped with why (`None`: no skill folders given).
    pub fn skills(&self) -> Option<crate::skills::SkillSet> {
        self.spec().skills.clone()
    }

    /// Record the skills this agent offers.
    #[deprecated(
        note = "the options' builder records them (`skills`); an agent's spec is not changed after it is built"
    )]
    pub fn set_skills(&self, set: crate::skills::SkillSet) {
        self.respec(|s| s.skills = Some(set));
    }

    /// Offer these child agent types through the `task` tool (registered here; replaced if it was). An
    /// empty map removes the tool. See [`crate::subagent`].
    pub fn set_subagents(&self, types: std::collections::BTreeMap<String, crate::subagent::SubAgent>) -> Result<()> {
        self.tools.unregister(crate::subagent::TOOL_NAME);
        if !types.is_empty() {
            self.tools.register(crate::subagent::tool(&types))?;
        }
        lock(&self.control).subagents = types;
        Ok(())
    }

    /// Hand the agent its MCP servers (their tools are already in [`Agent::tools`]): they are stopped by
    /// [`Agent::close`] or when the agent is dropped. Replaces (and closes) earlier ones.
    pub fn set_mcp(&self, servers: crate::mcp::McpServers) {
        let old = lock(&self.attached).mcp.replace(servers);
        if let Some(old) = old {
            old.close();
        }
    }

    /// Each MCP server's name, state and tools (empty without MCP servers).
    pub fn mcp_status(&self) -> Vec<crate::mcp::McpServerStatus> {
        lock(&self.attached).mcp.as_ref().map(|m| m.status()).unwrap_or_default()
    }

    /// MCP servers that failed to start, with why.
    pub fn mcp_failures(&self) -> Vec<crate::mcp::McpStartError> {
        lock(&self.attached).mcp.as_ref().map(|m| m.failures().to_vec()).unwrap_or_default()
    }

    /// Let go of what the agent holds outside its memory: its MCP servers are stopped (their tools go away)
    /// and its session file is detached (its lock released, so another agent may open it; later entries
    /// are not written to it), and every background command of the built-in `bash` is killed with its process
    /// tree. The conversation stays usable. Idempotent; also done on drop.
    pub fn close(&self) {
        let (servers, session) = {
            let mut attached = lock(&self.attached);
            (attached.mcp.take(), attached.session.take())
        };
        if let Some(s) = servers {
            s.close();
        }
        drop(session);
        // Background commands (bash run_in_background) end with the agent, their process trees with them.
        let background = self.spec().builtin.as_ref().map(|(_, b)| b.clone());
        if let Some(b) = background {
            b.close();
        }
    }

    /// The background commands the built-in `bash` started (`run_in_background`), oldest first; empty
    /// without built-in tools.
    pub fn background_commands(&self) -> Vec<crate::builtin::BackgroundInfo> {
        self.spec().builtin.as_ref().map(|(_, b)| b.list()).unwrap_or_default()
    }

    /// The folder the paths of write-kind tools ([`crate::tools::ToolKind::Write`]) are relative to: each call of
    /// such a tool that succeeds sends a [`Event::FileChange`] with what its file held before, when the file is
    /// inside it. [`AgentOptions`](crate::AgentOptions) sets it to its `workspace` (else the current folder);
    /// the built-in tools' workspace, when they are registered, takes precedence (their paths resolve there).
    #[deprecated(
        note = "give the workspace to the options (`workspace`); an agent's spec is not changed after it is built"
    )]
    pub fn set_workspace(&self, workspace: Option<std::path::PathBuf>) {
        self.respec(|s| s.workspace = workspace);
    }

    /// Register the built-in coding tools with these options (see [`crate::builtin::register`]), and keep the
    /// options so a child agent type with a sandbox of its own gets the same tools in that mode.
    #[deprecated(note = "give them to the options (`builtin_tools`); an agent's spec is not changed after it is built")]
    pub fn register_builtins(&self, options: crate::builtin::BuiltinOptions) -> Result<()> {
        let background = crate::builtin::register_owned(&self.tools, &options)?;
        self.respec(|s| s.builtin = Some((options, background)));
        Ok(())
    }

    /// Give the child agent type `agent_type` a tool of its own (beside the parent's tools it names).
    pub fn add_subagent_tool(&self, agent_type: &str, tool: crate::tools::Tool) -> Result<()> {
        let mut control = lock(&self.control);
        let Some(kind) = control.subagents.get_mut(agent_type) else {
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
        lock(&self.control).subagents.clone()
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
        lock(&self.sizing).baseline = None;
        if let Some(s) = lock(&self.attached).session.as_mut() {
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
        crate::content::check(&input, crate::content::limits(self.provider().name())).map_err(Error::Config)?;
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
        if self.conversation.shared_view().is_empty() {
            return Err(Error::Config("nothing to resume: the conversation is empty".into()));
        }
        self.answer_pending("interrupted: the run stopped before this tool call ran; it was not run")?;
        self.drive(on_event)
    }

    /// Run `f` while no run is in progress and none can start ([`Error::Busy`] if one is, `f` not called):
    /// for a host that changes the agent (its session, hooks) only between runs.
    pub fn when_idle<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let _idle = self.begin(CancelToken::new())?;
        f()
    }
}
