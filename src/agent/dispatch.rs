//! Running one turn's tool calls: the policies' points around each (`before_tool`: the guards, the rules,
//! hooks and the permission callable; `after_tool`), concurrency for parallel-safe tools, and exactly one
//! result per call.

use super::*;

impl Batch {
    /// Record what the checks decided for the batch's call `k`.
    fn apply(&mut self, k: usize, gate: Gate, tools: &ToolRegistry, hook_failed: &mut Option<Error>) {
        match gate {
            Gate::Run(input, read_only) => {
                self.effective[k].input = input;
                self.confined[k] = read_only;
                self.to_run.push(k);
            }
            Gate::Deny(reason) => {
                self.denied[k] = true;
                // The reason may be a hook's or the permission callable's text: capped like output.
                let reason = tools.cap_text(reason);
                self.outcomes[k] = Some(CallOutcome::error(format!("Permission denied: {reason}")));
            }
            Gate::Ask(input, reason) => {
                let call = &mut self.effective[k];
                call.input = input;
                let read_only = tools.get(&call.name).is_some_and(|t| t.read_only);
                let request = super::ApprovalRequest::new(call, reason, read_only);
                self.asked.push((k, request, None));
            }
            Gate::Fail(e) => {
                self.outcomes[k] = Some(CallOutcome::error(tools.cap_text(format!("not run: {e}"))));
                *hook_failed = Some(e);
            }
        }
    }
}

/// Make every `tool_use` input an object, in place, so the stored turn, the API view and the request are
/// the same bytes (the Messages API takes only objects; weak models send `[1, 2]`, and OpenAI `arguments`
/// may not parse). Returns the inputs replaced, by call id.
pub(super) fn object_inputs(content: &mut [ContentBlock]) -> HashMap<String, Value> {
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

pub(super) fn bad_input_message(raw: &Value) -> String {
    let shown = match raw {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    format!(
        "not run: the tool input must be a JSON object with the parameters as keys, got {}",
        crate::text::ellipsize(&shown, 200)
    )
}

/// A turn's tool calls under way, a batch at a time: kept between two steps while a batch waits for the
/// host's approvals (a pausing run, see `approval.rs`).
pub(super) struct ToolTurn {
    calls: Vec<ToolUseBlock>,
    bad_inputs: HashMap<String, Value>,
    concurrency: usize,
    planning: bool,
    /// A policy stopped the run in this turn: what its later calls are answered instead of running.
    stopped: Option<&'static str>,
    /// The first call of the next batch.
    i: usize,
    fatal: Option<(String, String)>,
    hook_failed: Option<Error>,
    /// A batch whose checks are done, waiting for the host's answers.
    pub(super) waiting: Option<Batch>,
    /// A batch whose one call (`task`) has a child agent under way (child.rs), stepped with the run.
    pub(super) child: Option<(Batch, Box<super::child::Child>)>,
}

/// One batch of a turn's calls (one call, or consecutive parallel-safe ones), between its checks and its run.
pub(super) struct Batch {
    end: usize,
    outcomes: Vec<Option<CallOutcome>>,
    denied: Vec<bool>,
    /// Calls approved only as read-only (Permission::AllowReadOnly).
    confined: Vec<bool>,
    to_run: Vec<usize>,
    /// The calls as they run: `before_tool` may have replaced an input.
    effective: Vec<ToolUseBlock>,
    /// The calls that wait for the host (pausing runs): their place in the batch, what was asked, the answer.
    pub(super) asked: Vec<(usize, super::ApprovalRequest, Option<Permission>)>,
    /// Its `task` call's child, ended (child.rs): what the call answers.
    child: Option<super::child::Ran>,
}

impl Agent {
    /// A turn's calls, about to run (see [`Agent::tools_step`]); the policies' `before_tools`.
    pub(super) fn begin_tools(
        &self,
        calls: Vec<ToolUseBlock>,
        bad_inputs: HashMap<String, Value>,
        policies: &mut Policies,
        cx: &mut Cx<'_>,
    ) -> ToolTurn {
        let concurrency = lock(&self.config).tool_concurrency.max(1);
        policies.before_tools(cx, &calls);
        let planning = self.tools.get(crate::todo::TOOL_NAME).is_some();
        ToolTurn {
            calls,
            bad_inputs,
            concurrency,
            planning,
            stopped: None,
            i: 0,
            fatal: None,
            hook_failed: None,
            waiting: None,
            child: None,
        }
    }

    /// Run a turn's calls, a batch at a time. `Ok(false)`: a batch waits for the host's answers (with
    /// `pausing`, each call that would go to the permission callable waits instead); `Ok(true)`: every call
    /// has its result. Cancelled while waiting, the waiting batch's calls are answered as interrupted, none
    /// of them run.
    pub(super) fn tools_step(
        &self,
        t: &mut ToolTurn,
        l: &mut Looping,
        on_event: &mut dyn FnMut(&Event),
    ) -> Result<bool> {
        let Looping { cancel, run, state, policies, pausing, .. } = l;
        let mut cx = Cx { agent: self, run, state, cancel, pausing: *pausing, on_event };
        loop {
            // A `task` call's child under way: one step of it per step of this run (child.rs).
            if let Some((mut b, mut c)) = t.child.take() {
                match c.step(cx.pausing, &mut *cx.on_event) {
                    None => {
                        t.child = Some((b, c));
                        return Ok(false);
                    }
                    Some(result) => {
                        let span = c.span.clone();
                        let (outcome, info, failed) = self.end_child(*c, result);
                        b.child = Some(super::child::Ran { outcome, info, failed, span });
                        self.run_batch(t, b, policies, &mut cx)?;
                        continue;
                    }
                }
            }
            let mut batch = match t.waiting.take() {
                Some(b) if !cancel.is_cancelled() && b.asked.iter().any(|(_, _, a)| a.is_none()) => {
                    t.waiting = Some(b);
                    return Ok(false);
                }
                Some(b) => self.settle_asked(b, cancel),
                None if t.i < t.calls.len() => {
                    let b = self.check_batch(t, policies, &mut cx);
                    if !b.asked.is_empty() {
                        t.waiting = Some(b);
                        continue;
                    }
                    b
                }
                None => break,
            };
            if let Some(k) = self.child_call(&batch.to_run, &batch.effective, &batch.confined) {
                let span = if crate::trace::enabled() {
                    crate::trace::tool_span(&batch.effective[k].name, &batch.effective[k].id)
                } else {
                    tracing::Span::none()
                };
                let call = &batch.effective[k];
                match crate::trace::in_span(&span, || self.start_child(call, cx.cancel, span.clone())) {
                    Ok(c) => {
                        t.child = Some((batch, Box::new(c)));
                        continue;
                    }
                    Err(outcome) => batch.child = Some(super::child::Ran { outcome, info: None, failed: None, span }),
                }
            }
            self.run_batch(t, batch, policies, &mut cx)?;
        }
        if let Some((tool, message)) = t.fatal.take() {
            return Err(Error::ToolAborted { tool, message });
        }
        if let Some(e) = t.hook_failed.take() {
            return Err(e);
        }
        if cancel.is_cancelled() {
            return Err(Error::Cancelled { partial: None });
        }
        Ok(true)
    }

    /// The host's answers go into a waiting batch (cancelled: none of its calls runs).
    fn settle_asked(&self, mut b: Batch, cancel: &CancelToken) -> Batch {
        let interrupted = "interrupted: the run was cancelled before this tool call ran";
        if cancel.is_cancelled() {
            for k in b.to_run.drain(..) {
                b.outcomes[k] = Some(CallOutcome::error(interrupted));
            }
        }
        for (k, request, answer) in std::mem::take(&mut b.asked) {
            let gate = match answer {
                _ if cancel.is_cancelled() => {
                    b.outcomes[k] = Some(CallOutcome::error(interrupted));
                    continue;
                }
                Some(p) => decided(p, request.input),
                None => continue,
            };
            b.apply(k, gate, &self.tools, &mut None);
        }
        b.to_run.sort_unstable();
        b
    }

    /// The checks before a batch of calls (the next one of `t`), in order.
    fn check_batch(&self, t: &mut ToolTurn, policies: &mut Policies, cx: &mut Cx<'_>) -> Batch {
        let ToolTurn { calls, bad_inputs, concurrency, stopped, i, fatal, hook_failed, .. } = t;
        let (i, concurrency) = (*i, *concurrency);
        // A batch: one call, or a run of consecutive parallel-safe calls (up to the cap).
        let parallel = |c: &ToolUseBlock| self.tools.get(&c.name).is_some_and(|t| t.parallel_safe);
        let mut end = i + 1;
        if parallel(&calls[i]) {
            while end < calls.len() && end - i < concurrency && parallel(&calls[end]) {
                end += 1;
            }
        }
        let batch = &calls[i..end];
        let mut b = Batch {
            end,
            outcomes: vec![None; batch.len()],
            denied: vec![false; batch.len()],
            confined: vec![false; batch.len()],
            to_run: Vec::new(),
            effective: batch.to_vec(),
            asked: Vec::new(),
            child: None,
        };
        for (k, call) in batch.iter().enumerate() {
            // Every call the model made is announced, also one that is then refused or not run, so a
            // host sees a tool_use before each tool_result.
            (cx.on_event)(&Event::ToolUse { id: call.id.clone(), name: call.name.clone(), input: call.input.clone() });
            policies.call_seen(cx, i + k, call);
            if let Some((tool, _)) = &fatal {
                b.outcomes[k] = Some(CallOutcome::error(format!("not run: tool '{tool}' aborted the run first")));
            } else if let Some(e) = &hook_failed {
                b.outcomes[k] = Some(CallOutcome::error(self.tools.cap_text(format!("not run: {e}"))));
            } else if let Some(why) = *stopped {
                b.outcomes[k] = Some(CallOutcome::error(why));
            } else if i + k >= MAX_TOOL_CALLS_PER_TURN {
                b.outcomes[k] = Some(CallOutcome::error(format!(
                    "not run: a turn may make at most {MAX_TOOL_CALLS_PER_TURN} tool calls and this turn made {}; \
                     make fewer calls per turn (one bash command can do many things)",
                    calls.len()
                )));
            } else if let Some(raw) = bad_inputs.get(&call.id) {
                b.outcomes[k] = Some(CallOutcome::error(bad_input_message(raw)));
            } else if cx.cancel.is_cancelled() {
                b.outcomes[k] =
                    Some(CallOutcome::error("interrupted: the run was cancelled before this tool call ran"));
            } else {
                // policy/: the guards, the check's files, then the permission decision.
                match policies.before_tool(cx, i + k, call) {
                    CallVerdict::Refuse { result, denied, stop } => {
                        b.denied[k] = denied;
                        b.outcomes[k] = Some(CallOutcome::error(result));
                        *stopped = stopped.or(stop);
                    }
                    CallVerdict::Decided(gate) => b.apply(k, gate, &self.tools, hook_failed),
                    CallVerdict::Go => b.apply(k, Gate::Run(call.input.clone(), false), &self.tools, hook_failed),
                }
            }
        }
        b
    }

    /// Run a batch whose checks are done, then answer each of its calls.
    fn run_batch(&self, t: &mut ToolTurn, b: Batch, policies: &mut Policies, cx: &mut Cx<'_>) -> Result<()> {
        let ToolTurn { calls, planning, i, fatal, hook_failed, .. } = t;
        let cancel = cx.cancel;
        let Batch { end, mut outcomes, denied, confined, to_run, effective, child: ran, .. } = b;
        let batch = &effective[..];
        // What each file tool's file held before the call, for its file_change event.
        let mut file_states: Vec<Option<crate::builtin::FileState>> =
            batch.iter().enumerate().map(|(k, c)| self.file_state_before(c, to_run.contains(&k))).collect();
        let mut children: Vec<Option<crate::subagent::ChildRun>> = vec![None; batch.len()];
        // One `execute_tool` span per call that runs, entered while it runs (on its own thread too); none
        // (and no allocation) without a subscriber.
        let no_span = tracing::Span::none();
        let spans: Vec<tracing::Span> = if crate::trace::enabled() && ran.is_none() {
            to_run.iter().map(|&k| crate::trace::tool_span(&batch[k].name, &batch[k].id)).collect()
        } else {
            Vec::new()
        };
        let span_of = |i: usize| spans.get(i).unwrap_or(&no_span);
        if let (Some(ran), [k]) = (ran, to_run.as_slice()) {
            // `task` is not parallel-safe, so it always runs alone: its child ran in the steps before
            // (child.rs), where its events reached the host as they happened.
            let k = *k;
            outcomes[k] = Some(ran.outcome);
            children[k] = ran.info;
            if let Some(e) = ran.failed {
                hook_failed.get_or_insert(e);
            }
            super::spans::end_tool(&ran.span, &batch[k], outcomes[k].as_ref(), &self.tools);
        } else if to_run.len() == 1 {
            let k = to_run[0];
            let _in_tool = span_of(0).enter();
            outcomes[k] = Some(self.tools.execute_as(&batch[k], cancel, confined[k]));
            super::spans::end_tool(span_of(0), &batch[k], outcomes[k].as_ref(), &self.tools);
        } else if !to_run.is_empty() {
            let results: Vec<(usize, CallOutcome)> = std::thread::scope(|s| {
                // Each thread says when it ends (also by panicking): a thread with a poll hook waits for
                // them in slices, running its hook (a host's Ctrl+C cancels the tools then).
                let (ended, wake) = std::sync::mpsc::channel::<()>();
                let confined = &confined;
                let handles: Vec<_> = to_run
                    .iter()
                    .enumerate()
                    .map(|(i, &k)| {
                        let span = span_of(i);
                        let ended = OnDrop(ended.clone());
                        (
                            k,
                            s.spawn(move || {
                                let _ended = ended;
                                let outcome = crate::trace::in_span(span, || {
                                    self.tools.execute_as(&batch[k], cancel, confined[k])
                                });
                                super::spans::end_tool(span, &batch[k], Some(&outcome), &self.tools);
                                outcome
                            }),
                        )
                    })
                    .collect();
                drop(ended);
                if crate::cancel::polled() {
                    let mut left = handles.len();
                    while left > 0 {
                        crate::cancel::poll(false);
                        match wake.recv_timeout(std::time::Duration::from_millis(20)) {
                            Ok(()) => left -= 1,
                            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                        }
                    }
                }
                handles
                    .into_iter()
                    .map(|(k, h)| (k, h.join().unwrap_or_else(|_| CallOutcome::error("the tool's thread panicked"))))
                    .collect()
            });
            for (k, o) in results {
                outcomes[k] = Some(o);
            }
        }
        let last_batch = end == calls.len();
        let batch_len = batch.len();
        for (k, ((call, outcome), (denied, child))) in
            batch.iter().zip(outcomes).zip(denied.into_iter().zip(children)).enumerate()
        {
            let mut outcome = outcome.unwrap_or_else(|| CallOutcome::error("not run"));
            // policy/: the after_tool hook, the result's fit, the guards' notes, the todo reminder.
            let done = CallDone {
                call,
                index: *i + k,
                ran: to_run.contains(&k),
                denied,
                last: last_batch && k + 1 == batch_len,
                hook_failed: hook_failed.is_some(),
            };
            if let Some(e) = policies.after_tool(cx, &done, &mut outcome) {
                *hook_failed = Some(e);
            }
            if let (Some(m), None) = (&outcome.fatal, &fatal) {
                *fatal = Some((call.name.clone(), m.clone()));
            }
            let mut entry = Entry::tool_result(&call.id, &call.name, outcome.content.clone(), outcome.is_error);
            entry.duration_ms = Some(outcome.duration.as_millis() as u64);
            if let Some(c) = &child {
                // The child's usage rolls into the conversation's (and the session's) through this entry.
                entry.usage = Some(c.usage.clone());
                entry.model = Some(c.model.clone());
                entry.meta.insert("subagent".into(), c.meta());
                // Its requests were charged to this agent's ledger as they went; here they join this run's.
                if let Some(cost) = c.cost_usd {
                    entry.meta.insert(crate::conversation::COST_KEY.into(), serde_json::json!(cost));
                }
                self.charge(c.cost_usd, &c.usage, &mut cx.run.usage, &mut cx.run.cost_usd);
            }
            entry.created_at = now_ms();
            self.record(entry)?;
            if let (Some(state), false) = (file_states[k].take(), outcome.is_error) {
                (cx.on_event)(&events::file_change(call, state));
            }
            (cx.on_event)(&Event::ToolResult {
                id: call.id.clone(),
                name: call.name.clone(),
                content: outcome.content.clone(),
                is_error: outcome.is_error,
                denied,
                duration_ms: outcome.duration.as_millis() as u64,
            });
            if call.name == crate::todo::TOOL_NAME && !outcome.is_error && *planning {
                (cx.on_event)(&Event::Todo { todos: crate::todo::current(&self.conversation.snapshot()) });
            }
            cx.run.tool_calls.push(ToolCallRecord {
                id: call.id.clone(),
                name: call.name.clone(),
                input: call.input.clone(),
                output: outcome.content,
                is_error: outcome.is_error,
                denied,
                duration_ms: outcome.duration.as_millis() as u64,
            });
        }
        *i = end;
        Ok(())
    }

    /// The state of the file a call of a write-kind tool ([`crate::tools::ToolKind::Write`]: the built-in
    /// `write_file` and `edit_file`, or a host's own) is about to change: `None` for other calls, calls that
    /// will not run, or a path outside the workspace.
    fn file_state_before(&self, call: &ToolUseBlock, runs: bool) -> Option<crate::builtin::FileState> {
        if !runs {
            return None;
        }
        let tool = self.tools.get(&call.name)?;
        let path = tool.kind.written_path(&call.input)?;
        // The built-in tools resolve their paths in their own workspace; a host's tool in the agent's.
        let spec = self.spec();
        let workspace = spec.builtin.as_ref().map(|(o, _)| o.workspace.clone());
        let workspace = workspace.or_else(|| spec.workspace.clone())?;
        let ws = crate::builtin::Workspace::new(&workspace).ok()?;
        crate::builtin::file_state(&ws, path, FILE_CHANGE_BEFORE_CAP).ok()
    }
}

/// Sends on its channel when dropped: a scoped tool thread's "I have ended", panics included.
struct OnDrop(std::sync::mpsc::Sender<()>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        // The waiter may have stopped listening; nothing to do then.
        let _ = self.0.send(());
    }
}
