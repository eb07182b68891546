//! The loop of a run: a request, the model's turn, its tool calls, again, until the model stops, a cap
//! is reached or the run is cancelled; the spend cap and structured answers are checked between turns.

use super::*;

/// What one run tracks across its turns.
#[derive(Default)]
pub(super) struct RunState {
    pub(super) repeats: Repeats,
    pub(super) progress: crate::progress::Progress,
    /// Model turns with tool calls since the last `todo_write`.
    pub(super) since_todo: u32,
    /// Structured answers the model gave in this run (the first one and its corrections).
    pub(super) output_attempts: u32,
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
    /// compaction summaries included; a loaded session's turns too). What `max_cost_usd` is checked against.
    pub fn spent_usd(&self) -> f64 {
        lock(&self.spend).usd
    }

    /// A request's usage on `model`, priced once by the model table ([`crate::models::cost_usd`]) and counted
    /// wherever it counts: the run's usage and cost, and the agent's spend for `max_cost_usd`.
    pub(super) fn charge(&self, model: &str, usage: &Usage, run_usage: &mut Usage, run_cost: &mut Option<f64>) {
        let cost = crate::models::cost_usd(model, usage);
        run_usage.add(usage);
        if let Some(c) = cost {
            *run_cost.get_or_insert(0.0) += c;
        }
        let mut s = lock(&self.spend);
        s.usd += cost.unwrap_or(0.0);
        s.out_tokens = s.out_tokens.max(usage.output_tokens);
    }

    /// Whether a request of about `input_tokens` on `model` fits under the cap (always, without one).
    pub(super) fn affordable(&self, model: &str, input_tokens: u64) -> bool {
        let Some(cap) = lock(&self.config).max_cost_usd else { return true };
        let s = *lock(&self.spend);
        match crate::models::request_cost_usd(model, input_tokens, s.out_tokens) {
            Some(c) => s.usd + c <= cap,
            // Checked at build; a model changed since has no price: refuse rather than spend unbounded.
            None => false,
        }
    }

    pub(super) fn begin(&self, cancel: CancelToken) -> Result<std::sync::MutexGuard<'_, ()>> {
        let guard = match self.running.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                return Err(Error::Busy);
            }
        };
        *lock(&self.current) = Some(cancel);
        Ok(guard)
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
        let cache = c.cache && self.provider.supports_cache();
        let mut request = Request {
            model: c.model,
            max_tokens: c.max_tokens,
            messages: self.conversation.shared_view(),
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

    pub(super) fn drive(&self, on_event: &mut dyn FnMut(&Event)) -> Result<RunResult> {
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
                return self.budget_stop(run);
            }
            run.turns += 1;
            let turn = run.turns;
            on_event(&Event::TurnStart { turn });
            // progress.rs: this request with tools disabled (the second time, without them), unless the host
            // chose a tool_choice of its own.
            let wrap_up =
                state.progress.take_wrap_up() && crate::progress::wrap_up_applies(self.request().tool_choice.as_ref());
            let without_tools = wrap_up && state.progress.wrap_up_without_tools();
            let Some((message, bad_inputs)) =
                self.compacting_turn(turn, (wrap_up, without_tools), &cancel, &mut run, on_event)?
            else {
                // A compaction's summary left too little under the cap for the turn's request: not sent.
                run.turns -= 1;
                return self.budget_stop(run);
            };
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
                _ if wrap_up && !calls.is_empty() => {
                    // The wrap-up asked for the answer with tools off, and the server sent calls anyway (some
                    // local servers ignore tool_choice none). The turn before only repeated what was done: they
                    // are not run, each gets its one result; the first time the wrap-up goes once more, the
                    // second time the run ends here.
                    let stop = state.progress.wrap_up_ignored();
                    let stopped = stop.is_some();
                    let result =
                        if stopped { crate::progress::WRAP_UP_IGNORED } else { crate::progress::WRAP_UP_AGAIN };
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
                        return Ok(run);
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
    pub(super) fn next_request_affordable(&self) -> bool {
        if lock(&self.config).max_cost_usd.is_none() {
            return true;
        }
        self.request_affordable(&self.request())
    }

    /// With a spend cap: whether `request` fits under it (always, without one).
    pub(super) fn request_affordable(&self, request: &Request) -> bool {
        if lock(&self.config).max_cost_usd.is_none() {
            return true;
        }
        let (tokens, _) = self.estimate_request(request);
        self.affordable(&request.model, tokens)
    }

    /// End the run because the next request would pass `max_cost_usd`: not an error, stop_reason `budget`.
    pub(super) fn budget_stop(&self, mut run: RunResult) -> Result<RunResult> {
        let cap = lock(&self.config).max_cost_usd.unwrap_or(0.0);
        let note = format!("stopped: the next request would take the spend past max_cost_usd={cap}");
        self.record(Entry::new(EntryRole::System, vec![ContentBlock::text(note)]))?;
        run.stop_reason = Some(StopReason::Budget);
        // Every model under a cap has a price: what this run spent is known, nothing included.
        run.cost_usd = Some(run.cost_usd.unwrap_or(0.0));
        Ok(run)
    }

    /// Whether this agent's requests carry the final-answer tool (else the native field).
    pub(super) fn output_tool(&self, spec: &crate::output::OutputSpec) -> bool {
        spec.uses_tool(self.provider.native_output())
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

    /// One request/response (`measured`: the request's size in bytes, when it was measured, to calibrate the
    /// token estimate with the answer's usage). The assistant entry exists while streaming; it ends complete
    /// or error.
    /// Returns the message with every tool input an object (what the API view holds and sends), and the
    /// inputs that were not, by call id, so those calls are answered with an error instead of being run.
    pub(super) fn model_turn(
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
                let upto = self.conversation.len();
                let mut sizing = lock(&self.sizing);
                if let Some(bytes) = measured {
                    sizing.estimator.learn(bytes, prompt);
                }
                sizing.baseline = (prompt > 0).then(|| Baseline { tokens: prompt + m.usage.output_tokens, upto });
                drop(sizing);
                // Priced like the stored turn: by the model that answered, else the one asked for.
                let priced = if m.model.is_empty() { &request.model } else { &m.model };
                self.charge(priced, &m.usage, run_usage, run_cost);
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
                    self.charge(&request.model, &p.usage, run_usage, run_cost);
                }
                self.persist(&id)?;
                Err(err)
            }
        }
    }

    pub(super) fn persist(&self, id: &str) -> Result<()> {
        if let Some(s) = lock(&self.session).as_mut() {
            if let Some(e) = self.conversation.get(id) {
                s.append(&e)?;
            }
        }
        Ok(())
    }
}
