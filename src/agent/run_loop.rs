//! The loop of a run: a request, the model's turn, its tool calls, again, until the model stops, a policy
//! ends it or the run is cancelled. This is the mechanism — requests, the store, the hold and charge of
//! each request; what judges a run (caps, guards, output validation, the check, hooks) are the policies,
//! called at their points in their one order (see `policy/mod.rs`).

use super::*;
use crate::provider::{TurnOpen, TurnStream};

/// What one run tracks across its turns.
#[derive(Default)]
pub(super) struct RunState {
    /// finish.rs: the run's record, and the state of the check held at the stop (policy/check.rs).
    pub(super) finish: super::finish::Finish,
}

/// How a model turn's answer is read: in one [`Provider::send`](crate::provider::Provider::send), or pulled
/// a network read at a time (see [`crate::provider::Provider::open_stream`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Read {
    Whole,
    Pull,
}

/// A run under way, between two calls of [`Agent::advance`]: what [`Agent::drive`] keeps on its stack, and
/// a [`super::RunDriver`] between its steps.
pub(super) struct Looping {
    pub(super) cancel: CancelToken,
    pub(super) run: RunResult,
    pub(super) state: RunState,
    /// The run's policies, in their order (see `policy/mod.rs`).
    pub(super) policies: Policies,
    pub(super) phase: Phase,
    /// The fallback models tried so far, and the model to go back to when the run ends.
    pub(super) fallbacks: super::switch::Fallbacks,
    /// Whether a call that would go to the permission callable waits for the host instead (see
    /// [`super::RunDriver::pause_for_approvals`]).
    pub(super) pausing: bool,
    /// The run's `invoke_agent` span (see [`crate::trace`]), from its first step to its end.
    pub(super) span: Option<tracing::Span>,
}

impl Looping {
    pub(super) fn new(cancel: CancelToken, policies: Policies) -> Self {
        Looping {
            cancel,
            run: new_run(),
            state: RunState::default(),
            policies,
            phase: Phase::Between,
            fallbacks: Default::default(),
            pausing: false,
            span: None,
        }
    }
}

/// Where a run is. Each [`Agent::advance`] goes one phase on: `Between` → `Ready` → (`Reading`)* →
/// `Answered` → (`Tools`)* → `Between` …, until the run ends.
pub(super) enum Phase {
    /// Before a model turn: the caps are checked and the request made.
    Between,
    /// A model turn's request, to send (again, after an overflow's compaction).
    Ready(Box<Turn>),
    /// A model turn being pulled from its stream.
    Reading(Box<OpenTurn>, Box<dyn TurnStream>),
    /// A model turn's answer is in: its calls are run next.
    Answered(Box<Answered>),
    /// A model turn's calls, run a batch at a time (a batch may wait here for the host's approvals).
    Tools(Box<ToolTurn>),
    /// The run has ended.
    Ended,
}

/// A model turn's answer: the message (every tool input an object), the inputs that were not, by call id,
/// and whether it answered the wrap-up request.
pub(super) struct Answered {
    message: MessageResponse,
    bad_inputs: HashMap<String, Value>,
    wrap_up: bool,
}

/// What a phase leads to.
pub(super) enum Next {
    Go(Phase),
    /// The run ended normally: its result is in [`Looping::run`].
    End,
}

/// A model turn's request.
pub(super) struct Turn {
    turn: u32,
    /// policy/repetition.rs: whether this is the wrap-up request, and whether it goes without tools.
    wrap_up: (bool, bool),
    /// policy/draft.rs: the run's first request, sent without tools for whole files in fenced blocks.
    draft: bool,
    request: Request,
    /// The request's size in bytes when it was measured (then the answer's usage calibrates the estimate).
    measured: Option<u64>,
    /// Answers that the prompt was too long, so far.
    overflows: u32,
}

/// A model turn sent: its entry in the store, when it began, the run's usage before it, and whether any
/// event of it reached the host.
pub(super) struct OpenTurn {
    turn: Turn,
    id: String,
    started: Instant,
    before: Usage,
    streamed: bool,
    /// The request's estimate, held in the ledger until its answer is priced; and its input tokens as
    /// estimated when it was held (what it is charged for when the answer reports no usage).
    hold: Option<crate::ledger::Hold>,
    input_tokens: u64,
    /// The request's `chat` span.
    span: tracing::Span,
}

/// A provider's event for the host, as the loop's event (`before`: the run's usage before the turn).
fn forward(ev: StreamEvent, streamed: &mut bool, before: &Usage, on_event: &mut dyn FnMut(&Event)) {
    match ev {
        StreamEvent::TextDelta { text, .. } => {
            *streamed = true;
            on_event(&Event::Text { text })
        }
        StreamEvent::ThinkingDelta { thinking, .. } => {
            *streamed = true;
            on_event(&Event::Thinking { thinking })
        }
        StreamEvent::ToolInputDelta { index, partial_json } => {
            *streamed = true;
            on_event(&Event::ToolInputDelta { index, partial_json })
        }
        StreamEvent::Usage(u) => {
            *streamed = true;
            let mut total = before.clone();
            total.add(&u);
            on_event(&Event::Usage { turn: u, run: total });
        }
        StreamEvent::ToolUseStart { .. } => *streamed = true,
        StreamEvent::Raw { .. } | StreamEvent::RawJson { .. } => {}
    }
}

/// A run's result before its first turn.
fn new_run() -> RunResult {
    RunResult {
        text: String::new(),
        stop_reason: None,
        turns: 0,
        usage: Usage::default(),
        tool_calls: Vec::new(),
        max_turns_reached: false,
        message: None,
        cost_usd: None,
        output: None,
        check: None,
        files_changed: Vec::new(),
        commands_run: Vec::new(),
        unverified: None,
    }
}

/// The mark of a run in progress (see [`Agent::begin`]): the next run may begin once it is dropped.
pub(super) struct Busy(Arc<Mutex<Option<CancelToken>>>);

impl Drop for Busy {
    fn drop(&mut self) {
        lock(&self.0).take();
    }
}

/// Add `text` at the end of a tool result's content (a string or blocks).
pub(super) fn append_text(content: &mut Value, text: &str) {
    match content {
        Value::String(s) => {
            s.push_str("\n\n");
            s.push_str(text);
        }
        Value::Array(blocks) => blocks.push(serde_json::json!({"type": "text", "text": text})),
        other => *other = Value::String(format!("{other}\n\n{text}")),
    }
}

impl Agent {
    pub(super) fn begin(&self, cancel: CancelToken) -> Result<Busy> {
        let mut current = lock(&self.current);
        if current.is_some() {
            return Err(Error::Busy);
        }
        *current = Some(cancel);
        Ok(Busy(self.current.clone()))
    }

    pub(super) fn token(&self) -> CancelToken {
        lock(&self.current).clone().unwrap_or_default()
    }

    pub(super) fn answer_pending(&self, why: &str) -> Result<()> {
        for call in self.conversation.pending_tool_uses() {
            self.record(Entry::tool_result(&call.id, &call.name, Value::String(why.to_string()), true))?;
        }
        Ok(())
    }

    pub(super) fn request(&self) -> Request {
        let c = lock(&self.config).clone();
        let provider = self.provider();
        let cache = c.cache && provider.supports_cache();
        let target = crate::carry::Target { provider: provider.name(), model: &c.model };
        // A conversation that changed provider or model is rendered for this one (see crate::carry); one that
        // did not takes the cached view.
        let carried = self.conversation.with_entries(|entries| {
            crate::carry::needs_carrying(entries, target).then(|| crate::carry::view(entries, target))
        });
        let messages = match carried {
            Some(view) => view.into(),
            None => self.conversation.shared_view(),
        };
        let mut request = Request {
            model: c.model.clone(),
            max_tokens: c.max_tokens,
            messages,
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
            crate::output::prepare(&mut request, spec, spec.uses_tool(provider.native_output()));
        }
        if cache {
            crate::cache::add_breakpoints(&mut request);
        }
        crate::carry::fit_request(&mut request, target);
        request
    }

    /// The API view of `entries` as the current provider and model take them (see [`crate::carry`]).
    pub(super) fn view_of(&self, entries: &[Entry]) -> Vec<crate::types::Message> {
        let provider = self.provider();
        let model = lock(&self.config).model.clone();
        crate::carry::view(entries, crate::carry::Target { provider: provider.name(), model: &model })
    }

    /// Run the loop to its end on this thread, each model turn read in one [`Provider::send`].
    pub(super) fn drive(&self, on_event: &mut dyn FnMut(&Event)) -> Result<RunResult> {
        let mut run = Looping::new(self.token(), Policies::for_run(self));
        loop {
            if let Some(outcome) = self.advance(&mut run, Read::Whole, on_event) {
                return outcome;
            }
        }
    }

    /// Take the run one phase further (see [`Phase`]); `Some(outcome)` once it has ended. With
    /// [`Read::Pull`], a model turn is read a network read per call; with [`Read::Whole`], in one.
    pub(super) fn advance(
        &self,
        l: &mut Looping,
        read: Read,
        on_event: &mut dyn FnMut(&Event),
    ) -> Option<Result<RunResult>> {
        // Each step runs inside the run's span, under the span's subscriber (whichever thread steps).
        let span = l.span.get_or_insert_with(|| self.run_span()).clone();
        let next = crate::trace::in_span(&span, || match std::mem::replace(&mut l.phase, Phase::Ended) {
            Phase::Between => self.before_turn(l, on_event),
            Phase::Ready(turn) => self.send_turn(l, turn, read, on_event),
            Phase::Reading(open, stream) => self.read_turn(l, open, stream, on_event),
            Phase::Answered(answered) => {
                let Answered { message, bad_inputs, wrap_up } = *answered;
                self.after_turn(l, message, bad_inputs, wrap_up, on_event)
            }
            Phase::Tools(mut tools) => match self.tools_step(&mut tools, l, on_event) {
                Ok(false) => Ok(Next::Go(Phase::Tools(tools))),
                // Every call has its result: a policy may end the run here (a guard that stopped it).
                Ok(true) => {
                    let Looping { cancel, run, state, policies, pausing, .. } = l;
                    let mut cx = Cx { agent: self, run, state, cancel, pausing: *pausing, on_event };
                    match policies.after_tools(&mut cx) {
                        Flow::Stop => Ok(Next::End),
                        Flow::Go | Flow::Again => Ok(Next::Go(Phase::Between)),
                    }
                }
                Err(e) => Err(e),
            },
            Phase::Ended => Err(Error::Config("the run has ended".into())),
        });
        let next = match next {
            Ok(Next::Go(phase)) => {
                l.phase = phase;
                return None;
            }
            Ok(Next::End) => Ok(()),
            Err(e) => Err(e),
        };
        {
            // The run has ended, whichever way: every policy's `run_end`.
            let Looping { cancel, run, state, policies, pausing, .. } = l;
            policies.run_end(&mut Cx { agent: self, run, state, cancel, pausing: *pausing, on_event });
        }
        let outcome = match next {
            Ok(()) => {
                self.finish_end(&mut l.state, Some(&mut l.run));
                Ok(std::mem::replace(&mut l.run, new_run()))
            }
            Err(e) => {
                self.finish_end(&mut l.state, None);
                Err(e)
            }
        };
        self.end_fallbacks(&mut l.fallbacks);
        crate::trace::end_run(&span, outcome.as_ref());
        l.span = None;
        Some(outcome)
    }

    /// The `invoke_agent` span of a run of this agent.
    fn run_span(&self) -> tracing::Span {
        if !crate::trace::enabled() {
            return tracing::Span::none();
        }
        let model = lock(&self.config).model.clone();
        let conversation = lock(&self.attached).session.as_ref().map(|s| s.location());
        let name = self.spec().trace_name.clone();
        crate::trace::run_span(name.as_deref(), self.provider().name(), &model, conversation.as_deref())
    }

    /// Before a model turn: the cancel, then the policies' `before_request` (the caps, a wrap-up), then the
    /// turn's request is made and shaped (`shape_request`: compaction, temperature).
    fn before_turn(&self, l: &mut Looping, on_event: &mut dyn FnMut(&Event)) -> Result<Next> {
        let Looping { cancel, run, state, policies, pausing, .. } = l;
        if cancel.is_cancelled() {
            return Err(Error::Cancelled { partial: None });
        }
        self.finish_begin(state);
        let mut cx = Cx { agent: self, run, state, cancel, pausing: *pausing, on_event };
        policies.run_start(&mut cx);
        let mut plan = TurnPlan::default();
        if policies.before_request(&mut cx, &mut plan)? == Flow::Stop {
            return Ok(Next::End);
        }
        cx.run.turns += 1;
        let turn = cx.run.turns;
        (cx.on_event)(&Event::TurnStart { turn });
        let mut request = self.wrapped_request(plan.wrap_up);
        (plan.tokens, plan.measured) = self.estimate_request(&request);
        if policies.shape_request(&mut cx, &mut plan, &mut request)? == Flow::Stop {
            return Ok(Next::End);
        }
        let (wrap_up, draft, measured) = (plan.wrap_up, plan.draft, plan.measured);
        Ok(Next::Go(Phase::Ready(Box::new(Turn { turn, wrap_up, draft, request, measured, overflows: 0 }))))
    }

    /// A compaction's summary left too little under the spend cap for the turn's request: it is not sent,
    /// and the run ends with `budget`.
    fn unsent(&self, run: &mut RunResult) -> Result<Next> {
        run.turns -= 1;
        self.budget_stop(run).map(|()| Next::End)
    }

    /// Send a model turn's request: the whole answer read at once, or (pulled) up to its first events.
    fn send_turn(
        &self,
        l: &mut Looping,
        turn: Box<Turn>,
        read: Read,
        on_event: &mut dyn FnMut(&Event),
    ) -> Result<Next> {
        // The request is held in the ledger before it goes: what every other request in flight holds (a
        // batch's agents, parallel children) counts, so together they cannot pass a cap.
        let (input_tokens, _) = self.estimate_request(&turn.request);
        let Some(hold) = self.reserve(&turn.request.model, input_tokens, None) else {
            return self.unsent(&mut l.run);
        };
        {
            let Looping { cancel, run, state, policies, pausing, .. } = l;
            let mut cx = Cx { agent: self, run, state, cancel, pausing: *pausing, on_event: &mut *on_event };
            policies.before_send(&mut cx, &turn.request)?;
        }
        let mut open = self.open_turn(turn, &l.run.usage, hold, input_tokens)?;
        let chat = open.span.clone();
        let _in_chat = chat.enter();
        let OpenTurn { turn, streamed, before, .. } = &mut *open;
        let mut forward = |ev| forward(ev, streamed, before, on_event);
        let provider = self.provider();
        // A fallback may have brought a provider that reads its turns only in one piece.
        let read = if provider.pulls_streams() { read } else { Read::Whole };
        let answer = match read {
            Read::Whole => provider.send(&turn.request, &l.cancel, &mut forward),
            Read::Pull => match provider.open_stream(&turn.request, &l.cancel, &mut forward) {
                Ok(TurnOpen::Open(stream)) => return Ok(Next::Go(Phase::Reading(open, stream))),
                Ok(TurnOpen::Done(response)) => Ok(*response),
                Err(e) => Err(e),
            },
        };
        self.turn_answered(l, open, answer, on_event)
    }

    /// One network read of a pulled model turn.
    fn read_turn(
        &self,
        l: &mut Looping,
        mut open: Box<OpenTurn>,
        mut stream: Box<dyn TurnStream>,
        on_event: &mut dyn FnMut(&Event),
    ) -> Result<Next> {
        let chat = open.span.clone();
        let _in_chat = chat.enter();
        let OpenTurn { streamed, before, .. } = &mut *open;
        let answer = match stream.step(&mut |ev| forward(ev, streamed, before, on_event)) {
            Ok(None) => return Ok(Next::Go(Phase::Reading(open, stream))),
            Ok(Some(response)) => Ok(response),
            Err(e) => Err(e),
        };
        self.turn_answered(l, open, answer, on_event)
    }

    /// A model turn's answer (or its error) goes into the store; a prompt the API found too long is
    /// compacted and the turn sent again (see [`Agent::after_overflow`]).
    fn turn_answered(
        &self,
        l: &mut Looping,
        mut open: Box<OpenTurn>,
        answer: Result<crate::provider::Response>,
        on_event: &mut dyn FnMut(&Event),
    ) -> Result<Next> {
        let Looping { cancel, run, fallbacks, .. } = l;
        let err = match self.close_turn(&mut open, answer, run, on_event) {
            Ok((message, bad_inputs)) => {
                let wrap_up = open.turn.wrap_up.0;
                return Ok(Next::Go(Phase::Answered(Box::new(Answered { message, bad_inputs, wrap_up }))));
            }
            Err(e) => e,
        };
        let mut turn = open.turn;
        // None of the turn's content reached the host: the next fallback model answers it instead (switch.rs).
        if super::switch::nothing_shown(&err) && self.fall_back(fallbacks, &err, on_event)? {
            turn.request = self.wrapped_request(turn.wrap_up);
            if turn.draft {
                super::policy::as_draft(&mut turn.request);
            }
            turn.measured = Some(self.sizes.request_bytes(&turn.request));
            turn.overflows = 0;
            return Ok(Next::Go(Phase::Ready(Box::new(turn))));
        }
        match self.after_overflow(err, &mut turn.overflows, turn.wrap_up, cancel, run, on_event)? {
            Some((request, measured)) => {
                turn.request = request;
                turn.measured = measured;
                if turn.draft {
                    super::policy::as_draft(&mut turn.request);
                    turn.measured = measured.map(|_| self.sizes.request_bytes(&turn.request));
                }
                Ok(Next::Go(Phase::Ready(Box::new(turn))))
            }
            None => self.unsent(run),
        }
    }

    /// After a model turn's answer: the policies' `after_response`, then its tool calls, or — no calls — the
    /// policies' `at_stop` (which may send the model back), else the end of the run.
    fn after_turn(
        &self,
        l: &mut Looping,
        message: MessageResponse,
        bad_inputs: HashMap<String, Value>,
        wrap_up: bool,
        on_event: &mut dyn FnMut(&Event),
    ) -> Result<Next> {
        let Looping { run, state, cancel, policies, pausing, .. } = l;
        run.text = message.text();
        run.stop_reason = message.stop_reason.clone();
        run.message = Some(message.clone());
        let calls: Vec<ToolUseBlock> = message.tool_uses().into_iter().cloned().collect();
        let stop = message.stop_reason.clone();
        let cut_off =
            matches!(stop, Some(StopReason::MaxTokens | StopReason::ModelContextWindowExceeded | StopReason::Refusal));
        if cut_off {
            // The turn was cut off (a call's input may be incomplete) or refused: never run its calls, and stop
            // — asking again would hit the same wall. Each call still gets its one result.
            let why = match stop {
                Some(StopReason::MaxTokens) => {
                    "not run: the response hit max_tokens before this tool call was complete"
                }
                Some(StopReason::Refusal) => "not run: the model refused in the turn that made this tool call",
                _ => "not run: the response hit the context window limit before this tool call was complete",
            };
            for call in &calls {
                self.record(Entry::tool_result(&call.id, &call.name, Value::String(why.into()), true))?;
            }
        }
        let final_answer =
            lock(&self.config).output.is_some() && calls.iter().any(|c| c.name == crate::output::TOOL_NAME);
        let answer =
            Answer { message: &message, calls: &calls, bad_inputs: &bad_inputs, wrap_up, cut_off, final_answer };
        let mut cx = Cx { agent: self, run, state, cancel, pausing: *pausing, on_event };
        match policies.after_response(&mut cx, &answer)? {
            Flow::Stop => return Ok(Next::End),
            Flow::Again => return Ok(Next::Go(Phase::Between)),
            Flow::Go => {}
        }
        if cut_off {
            return Ok(Next::End);
        }
        if !calls.is_empty() {
            return Ok(Next::Go(Phase::Tools(Box::new(self.begin_tools(calls, bad_inputs, policies, &mut cx)))));
        }
        if stop == Some(StopReason::PauseTurn) {
            return Ok(Next::Go(Phase::Between));
        }
        // The run would end here: a policy may keep it going, once the model is told why.
        match policies.at_stop(&mut cx)? {
            Flow::Again => Ok(Next::Go(Phase::Between)),
            Flow::Go | Flow::Stop => Ok(Next::End),
        }
    }

    /// With `text_edits` and the built-in `write_file`: a turn that ended on its own with no tool calls, whose
    /// text gives whole files as named fenced blocks, gets one `write_file` call per file after its text
    /// (and `stop_reason` "tool_use"), so the files take the path of any call — permission, protected and
    /// read-only paths, events, evidence — and the next request carries their results. The one place a
    /// turn's message is changed before it is stored, streamed or whole; the host saw the text as it came.
    /// Only when the request offered `write_file`, or was the draft (`draft_first`, which asked for files
    /// this way): another turn asked for with tools off (the wrap-up's `tool_choice` none, or no tools at
    /// all) stays an answer. The draft's shell blocks also become `bash` calls, after its files (with the
    /// built-in `bash`): its note says they run. A draft cut off at `max_tokens` gives its closed file blocks;
    /// a text that ends inside a block (cut off, or never closed) gives none for the file that block names
    /// (it may have been rewriting one of them), and a draft that does runs no command: a small model's files
    /// and test can outrun a small window's limit, and written again with the tools, in parts, the rest can
    /// follow.
    fn text_edits(&self, m: &mut MessageResponse, entry: &str, request: &Request, draft: bool) {
        let tools_off =
            request.tool_choice.as_ref().and_then(|c| c.get("type")).and_then(Value::as_str) == Some("none");
        let offered = !tools_off && request.tools.iter().any(|t| t.name == crate::text_edits::WRITE_TOOL);
        let cut = m.stop_reason == Some(StopReason::MaxTokens);
        if !(draft || lock(&self.config).text_edits && offered)
            || !(m.stop_reason == Some(StopReason::EndTurn) || draft && cut)
            || !m.tool_uses().is_empty()
            || !self.builtin_write()
        {
            return;
        }
        if draft {
            // An echo of the draft's note is the note, not the answer: out of the turn before it is stored. So
            // is its example given alone, unless the task names the example's file.
            let task =
                request.messages.iter().filter(|msg| msg.role == crate::types::Role::User).flat_map(|msg| &msg.content);
            let task: String =
                task.filter_map(|b| if let ContentBlock::Text(t) = b { Some(t.text.as_str()) } else { None }).collect();
            let example = !crate::text_edits::names_example_file(&task);
            for block in &mut m.content {
                if let ContentBlock::Text(t) = block {
                    if let Some(clean) = crate::text_edits::without_note(&t.text) {
                        t.text = clean;
                    }
                    if example && let Some(clean) = crate::text_edits::without_example(&t.text) {
                        t.text = clean;
                    }
                }
            }
            m.content.retain(|b| !matches!(b, ContentBlock::Text(t) if t.text.is_empty()));
        }
        let text = m.text();
        let open = crate::text_edits::unclosed(&text);
        let cut_path = open.as_ref().and_then(|o| o.path.clone());
        let edits = crate::text_edits::file_edits(&text).into_iter().filter(|e| Some(&e.path) != cut_path.as_ref());
        let edits = edits.map(|edit| {
            (crate::text_edits::WRITE_TOOL, serde_json::json!({"path": edit.path, "content": edit.content}))
        });
        // The draft's commands, after its files: its note says they run once the files are written.
        let commands = if draft && open.is_none() && self.builtin(crate::text_edits::RUN_TOOL) {
            crate::text_edits::commands(&text)
        } else {
            Vec::new()
        };
        let runs = commands.into_iter().map(|c| (crate::text_edits::RUN_TOOL, serde_json::json!({"command": c})));
        let calls: Vec<_> = edits.chain(runs).collect();
        if calls.is_empty() {
            return;
        }
        for (n, (name, input)) in calls.into_iter().enumerate() {
            m.content.push(ContentBlock::ToolUse(ToolUseBlock {
                id: format!("{}{entry}_{}", crate::text_edits::ID_PREFIX, n + 1),
                name: name.into(),
                input,
                extra: Default::default(),
            }));
        }
        m.stop_reason = Some(StopReason::ToolUse);
    }

    /// Whether the built-in `write_file` is registered (what a text edit becomes a call of).
    pub(super) fn builtin_write(&self) -> bool {
        self.builtin(crate::text_edits::WRITE_TOOL)
    }

    /// Whether the built-in tool `name` is registered (not a host's tool of that name).
    fn builtin(&self, name: &str) -> bool {
        let spec = self.spec();
        let builtin =
            spec.builtin.as_ref().is_some_and(|(o, _)| o.names.is_empty() || o.names.iter().any(|n| n == name));
        builtin && self.tools.get(name).is_some()
    }

    /// A model turn begins: its assistant entry is in the store while it streams (it ends complete or error,
    /// see [`Agent::close_turn`]).
    fn open_turn(
        &self,
        turn: Box<Turn>,
        run_usage: &Usage,
        hold: crate::ledger::Hold,
        input_tokens: u64,
    ) -> Result<Box<OpenTurn>> {
        let mut entry = Entry::new(EntryRole::Assistant, Vec::new());
        entry.status = EntryStatus::Streaming;
        entry.model = Some(turn.request.model.clone());
        // What made it decides what of it another provider may be sent (crate::carry).
        entry.provider = Some(self.provider().name().to_string());
        let id = self.conversation.push(entry);
        let span = crate::trace::chat_span(&tracing::Span::current(), self.provider().name(), &turn.request.model);
        Ok(Box::new(OpenTurn {
            span,
            turn: *turn,
            id,
            started: Instant::now(),
            before: run_usage.clone(),
            streamed: false,
            hold: Some(hold),
            input_tokens,
        }))
    }

    /// A model turn's answer goes into its entry (with `measured`, the request's size in bytes when it was
    /// measured, the token estimate is calibrated by the answer's usage), or its error and partial content.
    /// Returns the message with every tool input an object (what the API view holds and sends), and the
    /// inputs that were not, by call id, so those calls are answered with an error instead of being run.
    fn close_turn(
        &self,
        open: &mut OpenTurn,
        answer: Result<crate::provider::Response>,
        run: &mut RunResult,
        on_event: &mut dyn FnMut(&Event),
    ) -> Result<(MessageResponse, HashMap<String, Value>)> {
        let OpenTurn { turn, id, started, before, streamed, hold, input_tokens, span } = open;
        let (request, measured) = (&turn.request, turn.measured);
        let duration_ms = started.elapsed().as_millis() as u64;
        match answer {
            Ok(resp) => {
                if !*streamed {
                    // A provider that answered in one piece (a JSON response) reported nothing as it went:
                    // give the host the events a stream would have, so a UI shows the text and the usage
                    // whether `stream` is on or off.
                    crate::provider::emit_message_events(&resp.message, &mut |ev| {
                        forward(ev, streamed, before, on_event)
                    });
                }
                let mut m = resp.message;
                crate::trace::end_chat(span, &m);
                super::spans::chat_content(span, &m, &self.tools);
                self.text_edits(&mut m, id, request, turn.draft);
                let bad_inputs = object_inputs(&mut m.content);
                // Priced at the higher of the asked and the answering model's price; no usage: the estimate.
                let max_tokens = u64::from(request.max_tokens);
                let cost = Agent::request_cost(&request.model, &m.model, &m.usage, *input_tokens, max_tokens);
                if let Some(h) = hold.take() {
                    h.settle(cost.unwrap_or(0.0));
                }
                self.conversation.update(id, |e| {
                    e.content = m.content.clone();
                    e.status = EntryStatus::Complete;
                    e.duration_ms = Some(duration_ms);
                    if !m.model.is_empty() {
                        e.model = Some(m.model.clone());
                        if m.model != request.model {
                            let asked = Value::String(request.model.clone());
                            e.meta.insert(crate::carry::REQUESTED_MODEL_KEY.into(), asked);
                        }
                    }
                    e.usage = Some(m.usage.clone());
                    e.stop_reason = m.stop_reason.clone();
                    if let Some(c) = cost {
                        e.meta.insert(crate::conversation::COST_KEY.into(), serde_json::json!(c));
                    }
                    if let Some(rid) = &resp.request_id {
                        e.meta.insert("request_id".into(), Value::String(rid.clone()));
                    }
                    if !m.id.is_empty() {
                        e.meta.insert("message_id".into(), Value::String(m.id.clone()));
                    }
                });
                self.persist(id)?;
                let prompt = prompt_tokens(&m.usage);
                let upto = self.conversation.len();
                let mut sizing = lock(&self.sizing);
                if let Some(bytes) = measured {
                    sizing.estimator.learn(bytes, prompt);
                }
                sizing.baseline = (prompt > 0).then(|| Baseline { tokens: prompt + m.usage.output_tokens, upto });
                drop(sizing);
                let out = Agent::charged_usage(&m.usage, *input_tokens, max_tokens).output_tokens;
                let mut spend = lock(&self.spend);
                spend.out_tokens = Some(spend.out_tokens.unwrap_or(0).max(out));
                drop(spend);
                self.charge(cost, &m.usage, &mut run.usage, &mut run.cost_usd);
                on_event(&Event::TurnEnd {
                    turn: turn.turn,
                    stop_reason: m.stop_reason.clone(),
                    usage: m.usage.clone(),
                    model: m.model.clone(),
                    id: m.id.clone(),
                });
                Ok((m, bad_inputs))
            }
            Err(err) => {
                if !span.is_disabled() {
                    crate::trace::record_error(span, &crate::trace::error_type(&err));
                }
                let partial = err.partial().cloned();
                // A request that failed without an answer is released; one cut off after it began to answer
                // is charged (its estimate, when the part that came reported no usage).
                let max_tokens = u64::from(request.max_tokens);
                let cost = partial
                    .as_ref()
                    .and_then(|p| Agent::request_cost(&request.model, &p.model, &p.usage, *input_tokens, max_tokens));
                if let (Some(h), Some(_)) = (hold.take(), &partial) {
                    h.settle(cost.unwrap_or(0.0));
                }
                self.conversation.update(id, |e| {
                    e.status = EntryStatus::Error;
                    e.duration_ms = Some(duration_ms);
                    e.error = Some(err.to_string());
                    if let Some(p) = &partial {
                        e.content = p.content.clone();
                        object_inputs(&mut e.content);
                        e.usage = Some(p.usage.clone());
                        if let Some(c) = cost {
                            e.meta.insert(crate::conversation::COST_KEY.into(), serde_json::json!(c));
                        }
                    }
                });
                if let Some(p) = &partial {
                    self.charge(cost, &p.usage, &mut run.usage, &mut run.cost_usd);
                }
                self.persist(id)?;
                Err(err)
            }
        }
    }

    pub(super) fn persist(&self, id: &str) -> Result<()> {
        if let Some(s) = lock(&self.attached).session.as_mut() {
            if let Some(e) = self.conversation.get(id) {
                s.append(&e)?;
            }
        }
        Ok(())
    }
}
