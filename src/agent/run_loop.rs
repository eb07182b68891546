//! The loop of a run: a request, the model's turn, its tool calls, again, until the model stops, a cap
//! is reached or the run is cancelled; the spend cap and structured answers are checked between turns.

use super::*;
use crate::provider::{TurnOpen, TurnStream};

/// What one run tracks across its turns.
#[derive(Default)]
pub(super) struct RunState {
    pub(super) repeats: Repeats,
    pub(super) progress: crate::progress::Progress,
    /// Model turns with tool calls since the last `todo_write`.
    pub(super) since_todo: u32,
    /// Structured answers the model gave in this run (the first one and its corrections).
    pub(super) output_attempts: u32,
    /// finish.rs: the check, the record, a guard's last answer.
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
    pub(super) fn new(cancel: CancelToken) -> Self {
        Looping {
            cancel,
            run: new_run(),
            state: RunState::default(),
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
    /// progress.rs: whether this is the wrap-up request, and whether it goes without tools.
    wrap_up: (bool, bool),
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

/// What checking a structured answer decided.
pub(super) enum Verdict {
    /// Valid: the run ends with it.
    Done,
    /// Invalid, the model was told why: another turn.
    Retry,
}

/// Consecutive identical calls seen in this run, within a turn as across turns: a turn of hundreds of
/// identical calls is a runaway too, not a parallel batch.
#[derive(Default)]
pub(super) struct Repeats {
    pub(super) last: Option<(String, String)>,
    pub(super) count: u32,
}

impl Repeats {
    /// Count `call`; returns how many identical calls in a row were made, this one included.
    pub(super) fn see(&mut self, call: &ToolUseBlock) -> u32 {
        let key = (call.name.clone(), call.input.to_string());
        if self.last.as_ref() != Some(&key) {
            self.last = Some(key);
            self.count = 0;
        }
        self.count += 1;
        self.count
    }
}

/// The error that ends a run whose last structured answer was invalid.
pub(super) fn output_failure(
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
    /// What this agent has spent so far in USD by the price table (every request, its children's and
    /// compaction summaries included; a loaded session's turns too): what its ledger holds as spent, and what
    /// `max_cost_usd` is checked against. Each request is priced at the higher of the requested and the
    /// answering model's price; one whose usage was not reported, at its estimate (see [`crate::ledger`]).
    pub fn spent_usd(&self) -> f64 {
        lock(&self.spend).ledger.spent()
    }

    /// The ledger this agent's requests are held against and charged to (see [`crate::ledger`]).
    pub fn ledger(&self) -> Arc<crate::ledger::Ledger> {
        lock(&self.spend).ledger.clone()
    }

    /// Count this agent's spending from now on in `parent` as well (a batch's ledger, whose cap then holds
    /// for it beside `max_cost_usd`); `None`: in its own account only again. What it spent before stays
    /// counted against its own cap, not against `parent`'s.
    pub fn join_ledger(&self, parent: Option<Arc<crate::ledger::Ledger>>) {
        let mut spend = lock(&self.spend);
        let before = spend.ledger.spent();
        let ledger = match parent {
            Some(p) => crate::ledger::Ledger::under(p),
            None => crate::ledger::Ledger::new(None),
        };
        ledger.record_local(before);
        spend.ledger = ledger;
    }

    /// Count what a request cost (see [`Agent::request_cost`]) in the run's usage and cost and in this
    /// agent's own total; the ledger is charged by the request's [`Hold`](crate::ledger::Hold).
    pub(super) fn charge(&self, cost: Option<f64>, usage: &Usage, run_usage: &mut Usage, run_cost: &mut Option<f64>) {
        run_usage.add(usage);
        if let Some(c) = cost {
            *run_cost.get_or_insert(0.0) += c;
            *lock(&self.spend).usd.get_or_insert(0.0) += c;
        }
    }

    /// What a request asked of `requested` and answered as `answered` cost: its [charged
    /// usage](Agent::charged_usage) at the higher of the two models' prices.
    pub(super) fn request_cost(
        requested: &str,
        answered: &str,
        usage: &Usage,
        input_tokens: u64,
        max_tokens: u64,
    ) -> Option<f64> {
        let charged = Agent::charged_usage(usage, input_tokens, max_tokens);
        crate::models::charged_cost_usd(requested, answered, &charged)
    }

    /// The usage a request is charged for: what the answer reported; when it reported none — no input tokens
    /// (every request has some) and no output beyond the one token a stream's `message_start` claims before
    /// any usage is known — the request's estimate instead: `input_tokens` measured before it was sent and an
    /// answer of `max_tokens`. Never nothing.
    pub(super) fn charged_usage(usage: &Usage, input_tokens: u64, max_tokens: u64) -> Usage {
        let input = usage.input_tokens
            + usage.cache_creation_input_tokens.unwrap_or(0)
            + usage.cache_read_input_tokens.unwrap_or(0);
        if input > 0 || usage.output_tokens > 1 {
            return usage.clone();
        }
        Usage { input_tokens, output_tokens: max_tokens, ..Usage::default() }
    }

    /// A request of about `input_tokens` on `model`, in USD, before it is sent: its input, and an answer as
    /// large as the largest seen so far (`max_tokens` before the first; `output_tokens` when given) — and
    /// never less than the most a request of its ledger has cost so far (see [`crate::ledger::Ledger::largest`]).
    fn estimate_usd(&self, model: &str, input_tokens: u64, output_tokens: Option<u64>) -> Option<f64> {
        let out =
            output_tokens.or(lock(&self.spend).out_tokens).unwrap_or_else(|| u64::from(lock(&self.config).max_tokens));
        let floor = self.ledger().largest();
        crate::models::request_cost_usd(model, input_tokens, out).map(|e| e.max(floor))
    }

    /// Whether a request of about `input_tokens` on `model` fits under every cap that holds for this agent
    /// (its `max_cost_usd`, a batch's budget); nothing is held.
    pub(super) fn affordable(&self, model: &str, input_tokens: u64) -> bool {
        let cap = lock(&self.config).max_cost_usd;
        let ledger = self.ledger();
        if cap.is_none() && !ledger.capped(None) {
            return true;
        }
        // A model without a price under a cap: refused rather than spent unbounded (`max_cost_usd` refuses
        // such a model when the agent is built; a batch's budget refuses its requests).
        ledger.fits(self.estimate_usd(model, input_tokens, None), cap)
    }

    /// Hold the estimate of a request about to be sent (see [`Agent::affordable`]); `None`: it would pass a
    /// cap and must not be sent.
    pub(super) fn reserve(
        &self,
        model: &str,
        input_tokens: u64,
        output_tokens: Option<u64>,
    ) -> Option<crate::ledger::Hold> {
        let cap = lock(&self.config).max_cost_usd;
        let ledger = self.ledger();
        let estimate = if cap.is_none() && !ledger.capped(None) {
            Some(0.0)
        } else {
            self.estimate_usd(model, input_tokens, output_tokens)
        };
        ledger.reserve(estimate, cap)
    }

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
        let mut run = Looping::new(self.token());
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
            Phase::Tools(mut tools) => {
                let Looping { cancel, run, state, pausing, .. } = l;
                match self.tools_step(&mut tools, *pausing, state, cancel, run, on_event) {
                    Ok(None) => Ok(Next::Go(Phase::Tools(tools))),
                    // finish.rs: a guard stopped the run; one more request with tools off is its answer.
                    Ok(Some(true)) if self.guard_wrap_up(state) => Ok(Next::Go(Phase::Between)),
                    Ok(Some(true)) => {
                        run.stop_reason = Some(StopReason::Repetition);
                        Ok(Next::End)
                    }
                    Ok(Some(false)) => Ok(Next::Go(Phase::Between)),
                    Err(e) => Err(e),
                }
            }
            Phase::Ended => Err(Error::Config("the run has ended".into())),
        });
        let outcome = match next {
            Ok(Next::Go(phase)) => {
                l.phase = phase;
                return None;
            }
            Ok(Next::End) => {
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

    /// Before a model turn: the cancel, the turn cap and the spend cap are checked, then the turn's request
    /// is made (compacting first when it would pass the threshold).
    fn before_turn(&self, l: &mut Looping, on_event: &mut dyn FnMut(&Event)) -> Result<Next> {
        let Looping { cancel, run, state, .. } = l;
        if cancel.is_cancelled() {
            return Err(Error::Cancelled { partial: None });
        }
        self.finish_begin(state, run);
        // finish.rs: a guard stopped the run, and this request is its answer with tools off (past max_turns too).
        let guard_wrap_up = Agent::take_guard_wrap_up(state);
        let (max_turns, policy) = {
            let c = lock(&self.config);
            (c.max_turns, c.max_turns_policy)
        };
        if let Some(max) = max_turns.filter(|_| !guard_wrap_up) {
            if run.turns >= max {
                let note = format!("stopped: max_turns={max} reached");
                self.record(Entry::new(EntryRole::System, vec![ContentBlock::text(note)]))?;
                if self.check_at_cap(state, run, cancel) {
                    return Ok(Next::End);
                }
                return match policy {
                    MaxTurnsPolicy::Error => Err(Error::MaxTurns { turns: max }),
                    MaxTurnsPolicy::Return => {
                        run.max_turns_reached = true;
                        run.stop_reason = None;
                        Ok(Next::End)
                    }
                };
            }
        }
        if !self.next_request_affordable() {
            return self.budget_stop(run).map(|()| Next::End);
        }
        run.turns += 1;
        let turn = run.turns;
        on_event(&Event::TurnStart { turn });
        // progress.rs: this request with tools disabled (the second time, without them), unless the host
        // chose a tool_choice of its own.
        let wrap_up = guard_wrap_up
            || state.progress.take_wrap_up() && crate::progress::wrap_up_applies(self.request().tool_choice.as_ref());
        let without_tools = wrap_up && state.progress.wrap_up_without_tools();
        let wrap_up = (wrap_up, without_tools);
        match self.turn_request(wrap_up, cancel, run, on_event)? {
            Some((mut request, measured)) => {
                // progress.rs: a turn stuck on a failure makes this one go with a higher temperature.
                let unstick = lock(&self.config).progress_guard.and_then(|g| g.unstick_temperature);
                if let Some(t) = unstick.filter(|_| state.progress.take_unstick() && !wrap_up.0) {
                    crate::progress::unstick(&mut request, t);
                }
                Ok(Next::Go(Phase::Ready(Box::new(Turn { turn, wrap_up, request, measured, overflows: 0 }))))
            }
            None => self.unsent(run),
        }
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
            turn.measured = Some(self.sizes.request_bytes(&turn.request));
            turn.overflows = 0;
            return Ok(Next::Go(Phase::Ready(Box::new(turn))));
        }
        match self.after_overflow(err, &mut turn.overflows, turn.wrap_up, cancel, run, on_event)? {
            Some((request, measured)) => {
                turn.request = request;
                turn.measured = measured;
                Ok(Next::Go(Phase::Ready(Box::new(turn))))
            }
            None => self.unsent(run),
        }
    }

    /// After a model turn's answer: its tool calls, a structured answer, or the end of the run (`on_stop`
    /// may keep it going).
    fn after_turn(
        &self,
        l: &mut Looping,
        message: MessageResponse,
        bad_inputs: HashMap<String, Value>,
        wrap_up: bool,
        on_event: &mut dyn FnMut(&Event),
    ) -> Result<Next> {
        let Looping { run, state, cancel, .. } = l;
        run.text = message.text();
        run.stop_reason = message.stop_reason.clone();
        run.message = Some(message.clone());
        let calls: Vec<ToolUseBlock> = message.tool_uses().into_iter().cloned().collect();
        let output = lock(&self.config).output.clone();
        if Agent::answered_guard_wrap_up(state) {
            // finish.rs: a guard's last answer, with tools off; calls sent anyway are answered, not run.
            for call in &calls {
                let result = crate::progress::WRAP_UP_IGNORED;
                self.record(Entry::tool_result(&call.id, &call.name, Value::String(result.into()), true))?;
            }
            run.stop_reason = Some(StopReason::Repetition);
            return Ok(Next::End);
        }
        match message.stop_reason.clone() {
            Some(stop @ (StopReason::MaxTokens | StopReason::ModelContextWindowExceeded | StopReason::Refusal)) => {
                // The turn was cut off (a call's input may be incomplete) or refused: never run its calls,
                // and stop — asking again would hit the same wall. Each call still gets its one result.
                let why = match stop {
                    StopReason::MaxTokens => "not run: the response hit max_tokens before this tool call was complete",
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
                        Err((errors, value)) => return Err(output_failure(errors, value, &answer, state)),
                    }
                }
                return Ok(Next::End);
            }
            Some(StopReason::PauseTurn) if calls.is_empty() => return Ok(Next::Go(Phase::Between)),
            _ if output.is_some() && calls.iter().any(|c| c.name == crate::output::TOOL_NAME) => {
                let spec = output.as_ref().map(|o| (o.schema.clone(), o.retries)).unwrap_or_default();
                match self.final_answer(&message, &calls, &bad_inputs, spec, state, run, on_event)? {
                    Verdict::Done => return Ok(Next::End),
                    Verdict::Retry => return Ok(Next::Go(Phase::Between)),
                }
            }
            _ if wrap_up && !calls.is_empty() => {
                // The wrap-up asked for the answer with tools off, and the server sent calls anyway (some
                // local servers ignore tool_choice none). The turn before only repeated what was done: they
                // are not run, each gets its one result; the first time the wrap-up goes once more, the
                // second time the run ends here.
                let stop = state.progress.wrap_up_ignored();
                let stopped = stop.is_some();
                let result = if stopped { crate::progress::WRAP_UP_IGNORED } else { crate::progress::WRAP_UP_AGAIN };
                for call in &calls {
                    self.record(Entry::tool_result(&call.id, &call.name, Value::String(result.into()), true))?;
                }
                if let Some(call) = calls.last() {
                    on_event(&Event::Repetition {
                        id: call.id.clone(),
                        name: call.name.clone(),
                        count: if stopped { 2 } else { 1 },
                        stopped,
                        note: stop.unwrap_or_else(|| {
                            "[tooloop: no progress: asked for its final answer with tools off, the model called \
                             a tool anyway; not run, and asked once more]"
                                .into()
                        }),
                    });
                }
                if stopped {
                    run.stop_reason = Some(StopReason::Repetition);
                    return Ok(Next::End);
                }
            }
            _ if !calls.is_empty() => {
                return Ok(Next::Go(Phase::Tools(Box::new(self.begin_tools(calls, bad_inputs, state)))));
            }
            _ => {
                if let Some(spec) = &output {
                    if let Verdict::Retry = self.text_answer(&message, spec, state, run)? {
                        return Ok(Next::Go(Phase::Between));
                    }
                }
                // finish.rs: the check and the run's record may keep it going, once told why.
                if self.before_answer(state, run, cancel)? {
                    return Ok(Next::Go(Phase::Between));
                }
                if run.stop_reason == Some(StopReason::CheckFailed) {
                    return Ok(Next::End);
                }
                // The run would end here: `on_stop` may keep it going with a new user message.
                let on_stop = lock(&self.control).hooks.on_stop.clone();
                let Some(hook) = on_stop else { return Ok(Next::End) };
                match hook(run) {
                    Ok(None) => return Ok(Next::End),
                    Ok(Some(text)) => {
                        // Capped like tool output: a hook's text must not put megabytes into the next request.
                        let text = self.tools.cap_text(text);
                        self.record(Entry::new(EntryRole::User, vec![ContentBlock::text(text)]))?;
                    }
                    Err(message) => return Err(Error::Hook { hook: "on_stop".into(), message }),
                }
            }
        }
        Ok(Next::Go(Phase::Between))
    }

    /// With a spend cap: whether the next request fits under it. `false` ends the run with `budget`.
    pub(super) fn next_request_affordable(&self) -> bool {
        if !self.under_cap() {
            return true;
        }
        self.request_affordable(&self.request())
    }

    /// Whether some cap holds for this agent's requests: its `max_cost_usd`, or a ledger's it counts in.
    pub(super) fn under_cap(&self) -> bool {
        lock(&self.config).max_cost_usd.is_some() || self.ledger().capped(None)
    }

    /// With a spend cap: whether `request` fits under it (always, without one).
    pub(super) fn request_affordable(&self, request: &Request) -> bool {
        if !self.under_cap() {
            return true;
        }
        let (tokens, _) = self.estimate_request(request);
        self.affordable(&request.model, tokens)
    }

    /// End the run because the next request would pass `max_cost_usd`: not an error, stop_reason `budget`.
    pub(super) fn budget_stop(&self, run: &mut RunResult) -> Result<()> {
        let batch = self.ledger().parent().filter(|p| p.exhausted()).and_then(|p| p.cap());
        let note = match (batch, lock(&self.config).max_cost_usd) {
            (Some(b), _) => format!("stopped: the next request would take the spend past the batch's budget_usd={b}"),
            (None, Some(cap)) => format!("stopped: the next request would take the spend past max_cost_usd={cap}"),
            (None, None) => "stopped: the next request would take the spend past its budget".to_string(),
        };
        self.record(Entry::new(EntryRole::System, vec![ContentBlock::text(note)]))?;
        run.stop_reason = Some(StopReason::Budget);
        // Every model under a cap has a price: what this run spent is known, nothing included.
        run.cost_usd = Some(run.cost_usd.unwrap_or(0.0));
        Ok(())
    }

    /// Whether this agent's requests carry the final-answer tool (else the native field).
    pub(super) fn output_tool(&self, spec: &crate::output::OutputSpec) -> bool {
        spec.uses_tool(self.provider().native_output())
    }

    /// A turn that ended without tool calls, under `output_schema`: its text is the answer.
    pub(super) fn text_answer(
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
    pub(super) fn final_answer(
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

    /// A model turn begins: the `before_request` hook sees its request, and its assistant entry is in the
    /// store while it streams (it ends complete or error, see [`Agent::close_turn`]).
    fn open_turn(
        &self,
        turn: Box<Turn>,
        run_usage: &Usage,
        hold: crate::ledger::Hold,
        input_tokens: u64,
    ) -> Result<Box<OpenTurn>> {
        let before_request = lock(&self.control).hooks.before_request.clone();
        if let Some(hook) = before_request {
            hook(&turn.request).map_err(|message| Error::Hook { hook: "before_request".into(), message })?;
        }
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
