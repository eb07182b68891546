//! Running one turn's tool calls: rules, hooks and the permission callable around each, concurrency for
//! parallel-safe tools, and exactly one result per call.

use std::collections::HashSet;

use super::*;

/// What the checks before a call decided.
pub(super) enum Gate {
    /// Run it, with this input; `true`: only with no power to change anything
    /// ([`Permission::AllowReadOnly`]).
    Run(Value, bool),
    /// Refused, with the reason the model reads.
    Deny(String),
    /// The host decides (a pausing run): the input as it would run, and why it asks (`None`: every call not
    /// decided by a rule or a hook asks).
    Ask(Value, Option<String>),
    /// A hook failed: the run ends.
    Fail(Error),
}

/// The checks before one call, in order: the permission rules, `before_tool`, the permission callable.
pub(super) fn gate(
    call: &ToolUseBlock,
    kind: &crate::tools::ToolKind,
    rules: Option<&(Arc<crate::rules::PermissionRules>, std::path::PathBuf)>,
    hooks: &crate::hooks::Hooks,
    permission: Option<&PermissionHook>,
    pausing: bool,
    on_event: &mut dyn FnMut(&Event),
) -> Gate {
    use crate::hooks::BeforeTool;
    use crate::rules::RuleDecision;
    let decide = |input: &Value| match rules {
        Some((r, ws)) => r.decide_kind(&call.name, kind, input, ws),
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
    let mut ask = |call: &ToolUseBlock, rule: Option<String>| {
        if permission.is_none() && !pausing {
            return Gate::Run(call.input.clone(), false);
        }
        // Announced before the callable is asked, so a UI draws the question in order with the other events.
        on_event(&Event::ApprovalRequest { id: call.id.clone(), name: call.name.clone(), input: call.input.clone() });
        match permission.filter(|_| !pausing) {
            Some(p) => decided(p(call), call.input.clone()),
            None => Gate::Ask(call.input.clone(), rule.map(|r| format!("the rule {r} asks for approval of this call"))),
        }
    };
    match decision {
        RuleDecision::Allow(_) => Gate::Run(call.input.clone(), false),
        RuleDecision::Ask(rule) if permission.is_none() && !pausing => {
            Gate::Deny(format!("the rule {rule} asks for approval of this call, and there is no one to ask"))
        }
        RuleDecision::Ask(rule) => ask(&call, Some(rule.to_string())),
        _ => ask(&call, None),
    }
}

/// What a call's answer (the permission callable's or the host's) makes of it.
pub(super) fn decided(answer: Permission, input: Value) -> Gate {
    match answer {
        Permission::Deny(reason) => Gate::Deny(reason),
        Permission::AllowReadOnly => Gate::Run(input, true),
        Permission::Allow => Gate::Run(input, false),
    }
}

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
    permission: Option<PermissionHook>,
    hooks: crate::hooks::Hooks,
    rules: Option<(Arc<crate::rules::PermissionRules>, std::path::PathBuf)>,
    fit: Option<(usize, u64)>,
    concurrency: usize,
    guard: Option<RepeatGuard>,
    progress_guard: Option<crate::progress::ProgressGuard>,
    not_idempotent: HashSet<String>,
    planning: bool,
    reminder: Option<String>,
    stop: bool,
    /// Whether the runaway guard answered a call of this turn: then it, not progress detection, speaks.
    turn_repeated: bool,
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
    repeated: Vec<bool>,
    /// The same call as in the turn before: the runaway guard's to count, not progress detection's.
    again: Vec<bool>,
    to_run: Vec<usize>,
    /// The calls as they run: `before_tool` may have replaced an input.
    effective: Vec<ToolUseBlock>,
    /// The calls that wait for the host (pausing runs): their place in the batch, what was asked, the answer.
    pub(super) asked: Vec<(usize, super::ApprovalRequest, Option<Permission>)>,
    /// Its `task` call's child, ended (child.rs): what the call answers.
    child: Option<super::child::Ran>,
}

impl Agent {
    /// A turn's calls, about to run (see [`Agent::tools_step`]).
    pub(super) fn begin_tools(
        &self,
        calls: Vec<ToolUseBlock>,
        bad_inputs: HashMap<String, Value>,
        state: &mut RunState,
    ) -> ToolTurn {
        let (permission, hooks, rules) = {
            let c = lock(&self.control);
            (c.permission.clone(), c.hooks.clone(), c.rules.clone())
        };
        // fit.rs: no result takes more than a share of the context window.
        let fit =
            self.context_window().map(|w| (fit::result_budget(w, lock(&self.sizing).estimator.bytes_per_token), w));
        let (concurrency, guard, remind_after, progress_guard) = {
            let c = lock(&self.config);
            (c.tool_concurrency.max(1), c.repeat_guard, c.todo_reminder_after, c.progress_guard)
        };
        // A tool the host marked not idempotent (`roll_dice`, `next_page`): neither guard counts or judges
        // its calls. A call of a tool not registered is answered with an error; judged like any other.
        let not_idempotent: HashSet<String> = calls
            .iter()
            .filter(|c| self.tools.get(&c.name).is_some_and(|t| !t.idempotent))
            .map(|c| c.name.clone())
            .collect();
        if progress_guard.is_some() {
            state.progress.set_not_idempotent(not_idempotent.clone());
            let kinds = calls.iter().filter_map(|c| self.tools.get(&c.name).map(|t| (c.name.clone(), t.kind)));
            state.progress.set_kinds(kinds.collect());
            let shell = self
                .tools
                .names()
                .into_iter()
                .find(|n| self.tools.get(n).is_some_and(|t| t.kind == crate::tools::ToolKind::Shell));
            state.progress.set_command_tool(shell.as_deref());
            // The note names the tool that writes a file whole: a thing the kind does not tell (edit_file is of
            // kind write too), so the built-in's name does.
            state.progress.set_write_tool(self.tools.get("write_file").map(|_| "write_file"));
            state.progress.begin_turn(&calls);
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
        ToolTurn {
            calls,
            bad_inputs,
            permission,
            hooks,
            rules,
            fit,
            concurrency,
            guard,
            progress_guard,
            not_idempotent,
            planning,
            reminder,
            stop: false,
            turn_repeated: false,
            i: 0,
            fatal: None,
            hook_failed: None,
            waiting: None,
            child: None,
        }
    }

    /// Run a turn's calls, a batch at a time. `Ok(None)`: a batch waits for the host's answers (with
    /// `pausing`, each call that would go to the permission callable waits instead); `Ok(Some(stop))`: every
    /// call has its result, `stop` when the runaway guard stops the run. Cancelled while waiting, the waiting
    /// batch's calls are answered as interrupted, none of them run.
    pub(super) fn tools_step(
        &self,
        t: &mut ToolTurn,
        pausing: bool,
        state: &mut RunState,
        cancel: &CancelToken,
        run: &mut RunResult,
        on_event: &mut dyn FnMut(&Event),
    ) -> Result<Option<bool>> {
        loop {
            // A `task` call's child under way: one step of it per step of this run (child.rs).
            if let Some((mut b, mut c)) = t.child.take() {
                match c.step(pausing, on_event) {
                    None => {
                        t.child = Some((b, c));
                        return Ok(None);
                    }
                    Some(result) => {
                        let span = c.span.clone();
                        let (outcome, info, failed) = self.end_child(*c, result);
                        b.child = Some(super::child::Ran { outcome, info, failed, span });
                        self.run_batch(t, b, state, cancel, run, on_event)?;
                        continue;
                    }
                }
            }
            let mut batch = match t.waiting.take() {
                Some(b) if !cancel.is_cancelled() && b.asked.iter().any(|(_, _, a)| a.is_none()) => {
                    t.waiting = Some(b);
                    return Ok(None);
                }
                Some(b) => self.settle_asked(b, cancel),
                None if t.i < t.calls.len() => {
                    let b = self.check_batch(t, pausing, state, cancel, on_event);
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
                match crate::trace::in_span(&span, || self.start_child(call, cancel, span.clone())) {
                    Ok(c) => {
                        t.child = Some((batch, Box::new(c)));
                        continue;
                    }
                    Err(outcome) => batch.child = Some(super::child::Ran { outcome, info: None, failed: None, span }),
                }
            }
            self.run_batch(t, batch, state, cancel, run, on_event)?;
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
        Ok(Some(t.stop))
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
    fn check_batch(
        &self,
        t: &mut ToolTurn,
        pausing: bool,
        state: &mut RunState,
        cancel: &CancelToken,
        on_event: &mut dyn FnMut(&Event),
    ) -> Batch {
        let ToolTurn {
            calls,
            bad_inputs,
            permission,
            hooks,
            rules,
            concurrency,
            guard,
            not_idempotent,
            stop,
            turn_repeated,
            i,
            fatal,
            hook_failed,
            ..
        } = t;
        let (i, concurrency, guard) = (*i, *concurrency, *guard);
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
            repeated: vec![false; batch.len()],
            again: vec![false; batch.len()],
            to_run: Vec::new(),
            effective: batch.to_vec(),
            asked: Vec::new(),
            child: None,
        };
        for (k, call) in batch.iter().enumerate() {
            // Every call the model made is announced, also one that is then refused or not run, so a
            // host sees a tool_use before each tool_result.
            on_event(&Event::ToolUse { id: call.id.clone(), name: call.name.clone(), input: call.input.clone() });
            // bash_output answers with what arrived since the last read, so the same call again is a
            // poll, not a runaway: the runaway guard leaves it alone (a poll that brings nothing new is
            // progress detection's to judge, on its result). A tool marked not idempotent is left alone by
            // both. (The name, not a flag: that a repeat is a poll here but judged by its result there is
            // bash_output's own; a host's poll says `idempotent: false`.)
            let count = if call.name == "bash_output" || not_idempotent.contains(&call.name) {
                state.repeats.last = None;
                state.repeats.count = 0;
                1
            } else {
                state.repeats.see(call)
            };
            b.again[k] = guard.is_some() && count >= 2;
            if let Some((tool, _)) = &fatal {
                b.outcomes[k] = Some(CallOutcome::error(format!("not run: tool '{tool}' aborted the run first")));
            } else if let Some(e) = &hook_failed {
                b.outcomes[k] = Some(CallOutcome::error(self.tools.cap_text(format!("not run: {e}"))));
            } else if *stop {
                b.outcomes[k] = Some(CallOutcome::error("not run: the run was stopped for repeating the same call"));
            } else if i + k >= MAX_TOOL_CALLS_PER_TURN {
                b.outcomes[k] = Some(CallOutcome::error(format!(
                    "not run: a turn may make at most {MAX_TOOL_CALLS_PER_TURN} tool calls and this turn made {}; \
                     make fewer calls per turn (one bash command can do many things)",
                    calls.len()
                )));
            } else if let Some(raw) = bad_inputs.get(&call.id) {
                b.outcomes[k] = Some(CallOutcome::error(bad_input_message(raw)));
            } else if let Some(g) = guard.filter(|g| count >= g.warn_after) {
                *stop = count >= g.warn_after.saturating_add(g.stop_after);
                b.repeated[k] = true;
                *turn_repeated = true;
                // progress.rs: while a failure is outstanding, or when this call failed the last time, not
                // "if the task is done, answer" (a small model took it as leave to stop with the bug in place).
                let then = state.progress.outstanding_failure().unwrap_or_else(|| {
                    if state.progress.failed_last_time(call) {
                        "It failed the last time, and made as it is it will keep failing: change the input or try \
                         another way."
                    } else {
                        "If the task is done, answer without calling a tool; otherwise change the input or try \
                         another way."
                    }
                    .to_string()
                });
                let note = format!(
                    "not run: same call and same input as the previous {} calls to {}, which already ran. {then}",
                    count - 1,
                    call.name
                );
                on_event(&Event::Repetition {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    count,
                    stopped: *stop,
                    note: note.clone(),
                });
                b.outcomes[k] = Some(CallOutcome::error(note));
            } else if cancel.is_cancelled() {
                b.outcomes[k] =
                    Some(CallOutcome::error("interrupted: the run was cancelled before this tool call ran"));
            } else if let Some(why) = self.check_refusal(call) {
                // finish.rs: the check's files are read-only for the run, whoever would allow the write.
                b.denied[k] = true;
                b.outcomes[k] = Some(CallOutcome::error(format!("Permission denied: {why}")));
            } else {
                let kind = self.tools.get(&call.name).map(|t| t.kind).unwrap_or_default();
                let gate = gate(call, &kind, rules.as_ref(), hooks, permission.as_ref(), pausing, on_event);
                b.apply(k, gate, &self.tools, hook_failed);
            }
        }
        b
    }

    /// Run a batch whose checks are done, then answer each of its calls.
    #[allow(clippy::too_many_arguments)]
    fn run_batch(
        &self,
        t: &mut ToolTurn,
        b: Batch,
        state: &mut RunState,
        cancel: &CancelToken,
        run: &mut RunResult,
        on_event: &mut dyn FnMut(&Event),
    ) -> Result<()> {
        let ToolTurn {
            calls,
            hooks,
            fit,
            progress_guard,
            not_idempotent,
            planning,
            reminder,
            stop,
            turn_repeated,
            i,
            fatal,
            hook_failed,
            ..
        } = t;
        let Batch { end, mut outcomes, denied, confined, repeated, again, to_run, effective, child: ran, .. } = b;
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
                    Ok(Some(text)) => outcome.content = Value::String(self.tools.cap_text(text)),
                    Ok(None) => {}
                    Err(message) => *hook_failed = Some(Error::Hook { hook: "after_tool".into(), message }),
                }
            }
            if let Err(m) =
                crate::content::check_result(&outcome.content, crate::content::limits(self.provider().name()))
            {
                // The model reads why instead of the request failing on the API's size limit.
                outcome.content = Value::String(format!("the tool's result was not sent: {m}"));
                outcome.is_error = true;
            }
            if let Some((budget, window)) = *fit {
                fit::fit_result(&mut outcome.content, budget, window);
            }
            if let Some(g) = &progress_guard {
                // A refusal by the user is news to the model, not a repeat; so is any call of a tool that is
                // not idempotent.
                if denied || not_idempotent.contains(&call.name) {
                    state.progress.moved();
                } else if repeated {
                    // Refused by the runaway guard, which said so: no verdict here, but a refused repeat
                    // of a check that passed may call for the wrap-up.
                    state.progress.refused(call);
                } else if again {
                    if let Some(note) = state.progress.again(call, &outcome.content, outcome.is_error) {
                        append_text(&mut outcome.content, &note);
                    }
                } else {
                    state.progress.see(call, &outcome.content, outcome.is_error);
                }
                if last_batch && k + 1 == batch_len {
                    if let Some(stall) = state.progress.end_turn(g).filter(|_| !*turn_repeated) {
                        append_text(&mut outcome.content, &stall.note);
                        on_event(&Event::Repetition {
                            id: call.id.clone(),
                            name: call.name.clone(),
                            count: stall.count,
                            stopped: stall.stop,
                            note: stall.note,
                        });
                        *stop |= stall.stop;
                    } else if let Some(note) = state.progress.turn_note() {
                        append_text(&mut outcome.content, &note);
                    }
                }
            }
            if last_batch && k + 1 == batch_len {
                if let Some(text) = reminder.take() {
                    append_text(&mut outcome.content, &text);
                }
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
                self.charge(c.cost_usd, &c.usage, &mut run.usage, &mut run.cost_usd);
            }
            entry.created_at = now_ms();
            self.record(entry)?;
            if let (Some(state), false) = (file_states[k].take(), outcome.is_error) {
                on_event(&events::file_change(call, state));
            }
            on_event(&Event::ToolResult {
                id: call.id.clone(),
                name: call.name.clone(),
                content: outcome.content.clone(),
                is_error: outcome.is_error,
                denied,
                duration_ms: outcome.duration.as_millis() as u64,
            });
            if call.name == crate::todo::TOOL_NAME && !outcome.is_error && *planning {
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
