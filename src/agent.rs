//! The agent loop: input → request → (tool_use → run tools → results)* → answer.
//!
//! Invariants kept here: the user's input, every completed assistant turn and every tool result are in the
//! store (and the session file) before the next request goes out; a failed or cancelled run leaves a valid
//! conversation that [`Agent::resume`] continues without re-running tools that already ran; every
//! `tool_use` gets exactly one result — one that was cut off, denied, interrupted or never started says so.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::cancel::CancelToken;
use crate::conversation::{Conversation, Entry, EntryRole, EntryStatus, now_ms};
use crate::error::{Error, Result};
use crate::provider::{Provider, StreamEvent};
use crate::session::Session;
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
    /// Tools the API runs itself (`{"type": "web_search_20250305", "name": "web_search"}`, code execution,
    /// …), appended to the registered tools as given. Their `server_tool_use` / `*_tool_result` blocks stay
    /// in the conversation verbatim and are never run here. Values that are not objects are skipped.
    pub server_tools: Vec<Value>,
}

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
            server_tools: Vec::new(),
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

/// What a run reports as it goes. Serializes to `{"type": "...", ...}`.
#[derive(Clone, Debug, PartialEq, Serialize)]
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
    session: Mutex<Option<Session>>,
    permission: Mutex<Option<PermissionHook>>,
    current: Mutex<Option<CancelToken>>,
    running: Mutex<()>,
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
        Agent {
            provider,
            tools: ToolRegistry::new(),
            conversation: Conversation::new(),
            config: Mutex::new(config),
            session: Mutex::new(None),
            permission: Mutex::new(None),
            current: Mutex::new(None),
            running: Mutex::new(()),
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
    pub fn attach_session(&self, mut session: Session) -> Result<crate::session::LoadReport> {
        let report = session.take_report();
        if !self.conversation.is_empty() {
            return Err(Error::Config("attach the session before the conversation has entries".into()));
        }
        for e in &report.entries {
            self.conversation.push(e.clone());
        }
        *lock(&self.session) = Some(session);
        self.answer_pending(
            "interrupted: the previous session ended before this tool call finished; it may or may not have run",
        )?;
        Ok(report)
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
        Request {
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
        }
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
        };
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
            run.turns += 1;
            let turn = run.turns;
            on_event(&Event::TurnStart { turn });
            let message = self.model_turn(turn, &cancel, &mut run.usage, on_event)?;
            run.text = message.text();
            run.stop_reason = message.stop_reason.clone();
            run.message = Some(message.clone());
            let calls: Vec<ToolUseBlock> = message.tool_uses().into_iter().cloned().collect();
            match message.stop_reason {
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
                    return Ok(run);
                }
                Some(StopReason::PauseTurn) if calls.is_empty() => continue,
                _ if !calls.is_empty() => {
                    self.run_tools(&calls, &cancel, &mut run, on_event)?;
                }
                _ => return Ok(run),
            }
        }
    }

    /// One request/response. The assistant entry exists while streaming; it ends complete or error.
    fn model_turn(
        &self,
        turn: u32,
        cancel: &CancelToken,
        run_usage: &mut Usage,
        on_event: &mut dyn FnMut(&Event),
    ) -> Result<MessageResponse> {
        let request = self.request();
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
            StreamEvent::Raw { .. } => {}
        };
        let result = self.provider.send(&request, cancel, &mut send_event);
        let duration_ms = started.elapsed().as_millis() as u64;
        match result {
            Ok(resp) => {
                if !streamed.get() {
                    // A provider that answered in one piece (a JSON response) reported nothing as it went:
                    // give the host the events a stream would have, so a UI shows the text and the usage
                    // whether `stream` is on or off.
                    crate::provider::host::emit_message_events(&resp.message, &mut send_event);
                }
                let m = resp.message;
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
                run_usage.add(&m.usage);
                on_event(&Event::TurnEnd { turn, stop_reason: m.stop_reason.clone(), usage: m.usage.clone() });
                Ok(m)
            }
            Err(err) => {
                let partial = err.partial().cloned();
                self.conversation.update(&id, |e| {
                    e.status = EntryStatus::Error;
                    e.duration_ms = Some(duration_ms);
                    e.error = Some(err.to_string());
                    if let Some(p) = &partial {
                        e.content = p.content.clone();
                        e.usage = Some(p.usage.clone());
                    }
                });
                if let Some(p) = &partial {
                    run_usage.add(&p.usage);
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

    fn run_tools(
        &self,
        calls: &[ToolUseBlock],
        cancel: &CancelToken,
        run: &mut RunResult,
        on_event: &mut dyn FnMut(&Event),
    ) -> Result<()> {
        let permission = lock(&self.permission).clone();
        let concurrency = lock(&self.config).tool_concurrency.max(1);
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
            let mut to_run = Vec::new();
            for (k, call) in batch.iter().enumerate() {
                // Every call the model made is announced, also one that is then refused or not run, so a
                // host sees a tool_use before each tool_result.
                on_event(&Event::ToolUse { id: call.id.clone(), name: call.name.clone(), input: call.input.clone() });
                if let Some((tool, _)) = &fatal {
                    outcomes[k] = Some(CallOutcome::error(format!("not run: tool '{tool}' aborted the run first")));
                } else if cancel.is_cancelled() {
                    outcomes[k] =
                        Some(CallOutcome::error("interrupted: the run was cancelled before this tool call ran"));
                } else if let Some(Permission::Deny(reason)) = permission.as_ref().map(|p| p(call)) {
                    outcomes[k] = Some(CallOutcome::error(format!("Permission denied: {reason}")));
                } else {
                    to_run.push(k);
                }
            }
            if to_run.len() == 1 {
                let k = to_run[0];
                outcomes[k] = Some(self.tools.execute(&batch[k], cancel));
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
            for (call, outcome) in batch.iter().zip(outcomes) {
                let outcome = outcome.unwrap_or_else(|| CallOutcome::error("not run"));
                if let (Some(m), None) = (&outcome.fatal, &fatal) {
                    fatal = Some((call.name.clone(), m.clone()));
                }
                let mut entry = Entry::tool_result(&call.id, &call.name, outcome.content.clone(), outcome.is_error);
                entry.duration_ms = Some(outcome.duration.as_millis() as u64);
                entry.created_at = now_ms();
                self.record(entry)?;
                on_event(&Event::ToolResult {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    content: outcome.content.clone(),
                    is_error: outcome.is_error,
                    duration_ms: outcome.duration.as_millis() as u64,
                });
                run.tool_calls.push(ToolCallRecord {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    input: call.input.clone(),
                    output: outcome.content,
                    is_error: outcome.is_error,
                    duration_ms: outcome.duration.as_millis() as u64,
                });
            }
            i = end;
        }
        if let Some((tool, message)) = fatal {
            return Err(Error::ToolAborted { tool, message });
        }
        if cancel.is_cancelled() {
            return Err(Error::Cancelled { partial: None });
        }
        Ok(())
    }
}
