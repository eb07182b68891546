//! The runaway guard ([`RepeatGuard`]) and progress detection ([`crate::progress`]), and the answer with
//! tools off that ends a run one of them stopped (`repeat_guard`, `progress_guard`; off by default). The
//! rules are in `progress.rs`; this is where the loop's points reach them.
//!
//! Must never: count or judge a call of a tool marked not idempotent, or send more than one wrap-up request
//! for a guard's stop per run.

use std::collections::HashSet;

use super::*;

/// The stopped guard's wrap-up request: not due, due (the next request), sent (its answer ends the run).
#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum GuardWrapUp {
    #[default]
    No,
    Due,
    Sent,
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

#[derive(Default)]
pub(super) struct Repetition {
    repeats: Repeats,
    progress: crate::progress::Progress,
    guard_wrap_up: GuardWrapUp,
    /// This turn's settings (read when its calls begin).
    guard: Option<RepeatGuard>,
    progress_guard: Option<crate::progress::ProgressGuard>,
    not_idempotent: HashSet<String>,
    /// The count of the call just seen.
    count: u32,
    /// A guard stopped the run in this turn.
    stop: bool,
    /// Whether the runaway guard answered a call of this turn: then it, not progress detection, speaks.
    turn_repeated: bool,
    /// The turn's calls the runaway guard refused.
    repeated: HashSet<usize>,
    /// The turn's calls that are the same as the call before: the runaway guard's to count, not progress
    /// detection's.
    again: HashSet<usize>,
}

impl Repetition {
    /// A guard stopped the run: `true` when the model gets one request with tools off to answer from what it
    /// has (once per run; not when the host set a `tool_choice` of its own, or `progress_guard` has
    /// `wrap_up` off).
    fn wrap_up_due(&mut self, agent: &Agent) -> bool {
        let (applies, on) = {
            let c = lock(&agent.config);
            (crate::progress::wrap_up_applies(c.tool_choice.as_ref()), c.progress_guard.is_none_or(|g| g.wrap_up))
        };
        if !applies || !on || self.guard_wrap_up != GuardWrapUp::No {
            return false;
        }
        self.guard_wrap_up = GuardWrapUp::Due;
        true
    }
}

impl Policy for Repetition {
    fn name(&self) -> &'static str {
        "repetition"
    }

    fn before_request(&mut self, cx: &mut Cx<'_>, plan: &mut TurnPlan) -> Result<Flow> {
        // A guard stopped the run, and this request is its answer with tools off (past max_turns too).
        let forced = self.guard_wrap_up == GuardWrapUp::Due;
        if forced {
            self.guard_wrap_up = GuardWrapUp::Sent;
        }
        plan.past_caps = forced;
        // progress.rs: this request with tools disabled (the second time, without them), unless the host
        // chose a tool_choice of its own.
        let wrap_up = forced
            || self.progress.take_wrap_up()
                && crate::progress::wrap_up_applies(cx.agent.request().tool_choice.as_ref());
        plan.wrap_up = (wrap_up, wrap_up && self.progress.wrap_up_without_tools());
        Ok(Flow::Go)
    }

    fn shape_request(&mut self, cx: &mut Cx<'_>, plan: &mut TurnPlan, request: &mut Request) -> Result<Flow> {
        // progress.rs: a turn stuck on a failure makes this one go with a higher temperature.
        let unstick = lock(&cx.agent.config).progress_guard.and_then(|g| g.unstick_temperature);
        if let Some(t) = unstick.filter(|_| self.progress.take_unstick() && !plan.wrap_up.0) {
            crate::progress::unstick(request, t);
        }
        Ok(Flow::Go)
    }

    fn after_response(&mut self, cx: &mut Cx<'_>, a: &Answer<'_>) -> Result<Flow> {
        if self.guard_wrap_up == GuardWrapUp::Sent {
            // A guard's last answer, with tools off; calls sent anyway are answered, not run.
            if !a.cut_off {
                for call in a.calls {
                    let result = crate::progress::WRAP_UP_IGNORED;
                    cx.agent.record(Entry::tool_result(&call.id, &call.name, Value::String(result.into()), true))?;
                }
            }
            cx.run.stop_reason = Some(StopReason::Repetition);
            return Ok(Flow::Stop);
        }
        if !a.wrap_up || a.calls.is_empty() || a.cut_off || a.final_answer {
            return Ok(Flow::Go);
        }
        // The wrap-up asked for the answer with tools off, and the server sent calls anyway (some local servers
        // ignore tool_choice none). The turn before only repeated what was done: they are not run, each gets
        // its one result; the first time the wrap-up goes once more, the second time the run ends here.
        let stop = self.progress.wrap_up_ignored();
        let stopped = stop.is_some();
        let result = if stopped { crate::progress::WRAP_UP_IGNORED } else { crate::progress::WRAP_UP_AGAIN };
        for call in a.calls {
            cx.agent.record(Entry::tool_result(&call.id, &call.name, Value::String(result.into()), true))?;
        }
        if let Some(call) = a.calls.last() {
            (cx.on_event)(&Event::Repetition {
                id: call.id.clone(),
                name: call.name.clone(),
                count: if stopped { 2 } else { 1 },
                stopped,
                note: stop.unwrap_or_else(|| {
                    "[tooloop: no progress: asked for its final answer with tools off, the model called a tool \
                     anyway; not run, and asked once more]"
                        .into()
                }),
            });
        }
        if stopped {
            cx.run.stop_reason = Some(StopReason::Repetition);
            return Ok(Flow::Stop);
        }
        Ok(Flow::Again)
    }

    fn before_tools(&mut self, cx: &mut Cx<'_>, calls: &[ToolUseBlock]) {
        let agent = cx.agent;
        (self.guard, self.progress_guard) = {
            let c = lock(&agent.config);
            (c.repeat_guard, c.progress_guard)
        };
        self.stop = false;
        self.turn_repeated = false;
        self.repeated.clear();
        self.again.clear();
        // A tool the host marked not idempotent (`roll_dice`, `next_page`): neither guard counts or judges
        // its calls. A call of a tool not registered is answered with an error; judged like any other.
        self.not_idempotent = calls
            .iter()
            .filter(|c| agent.tools.get(&c.name).is_some_and(|t| !t.idempotent))
            .map(|c| c.name.clone())
            .collect();
        if self.progress_guard.is_none() {
            return;
        }
        let progress = &mut self.progress;
        progress.set_not_idempotent(self.not_idempotent.clone());
        let kinds = calls.iter().filter_map(|c| agent.tools.get(&c.name).map(|t| (c.name.clone(), t.kind)));
        progress.set_kinds(kinds.collect());
        let shell = agent
            .tools
            .names()
            .into_iter()
            .find(|n| agent.tools.get(n).is_some_and(|t| t.kind == crate::tools::ToolKind::Shell));
        progress.set_command_tool(shell.as_deref());
        // The note names the tool that writes a file whole: a thing the kind does not tell (edit_file is of
        // kind write too), so the built-in's name does.
        progress.set_write_tool(agent.tools.get("write_file").map(|_| "write_file"));
        progress.begin_turn(calls);
    }

    fn call_seen(&mut self, _cx: &mut Cx<'_>, index: usize, call: &ToolUseBlock) {
        // bash_output answers with what arrived since the last read, so the same call again is a poll, not a
        // runaway: the runaway guard leaves it alone (a poll that brings nothing new is progress detection's
        // to judge, on its result). A tool marked not idempotent is left alone by both. (The name, not a
        // flag: that a repeat is a poll here but judged by its result there is bash_output's own; a host's
        // poll says `idempotent: false`.)
        self.count = if call.name == "bash_output" || self.not_idempotent.contains(&call.name) {
            self.repeats = Repeats::default();
            1
        } else {
            self.repeats.see(call)
        };
        if self.guard.is_some() && self.count >= 2 {
            self.again.insert(index);
        }
    }

    fn before_tool(&mut self, cx: &mut Cx<'_>, index: usize, call: &ToolUseBlock) -> CallVerdict {
        let count = self.count;
        let Some(g) = self.guard.filter(|g| count >= g.warn_after) else { return CallVerdict::Go };
        let stop = count >= g.warn_after.saturating_add(g.stop_after);
        self.stop |= stop;
        self.repeated.insert(index);
        self.turn_repeated = true;
        // progress.rs: while a failure is outstanding, or when this call failed the last time, not "if the task
        // is done, answer" (a small model took it as leave to stop with the bug in place).
        let then = self.progress.outstanding_failure().unwrap_or_else(|| {
            if self.progress.failed_last_time(call) {
                "It failed the last time, and made as it is it will keep failing: change the input or try another \
                 way."
            } else {
                "If the task is done, answer without calling a tool; otherwise change the input or try another way."
            }
            .to_string()
        });
        let note = format!(
            "not run: same call and same input as the previous {} calls to {}, which already ran. {then}",
            count - 1,
            call.name
        );
        (cx.on_event)(&Event::Repetition {
            id: call.id.clone(),
            name: call.name.clone(),
            count,
            stopped: stop,
            note: note.clone(),
        });
        let later = stop.then_some("not run: the run was stopped for repeating the same call");
        CallVerdict::Refuse { result: note, denied: false, stop: later }
    }

    fn after_tool(&mut self, cx: &mut Cx<'_>, done: &CallDone<'_>, outcome: &mut CallOutcome) -> Result<()> {
        let Some(g) = self.progress_guard else { return Ok(()) };
        let call = done.call;
        // A command may have written a file (a redirect): looked for only until a change is known, and only
        // where the run took the workspace's snapshot (a workspace and a shell tool).
        let shell = cx.agent.tools.get(&call.name).is_some_and(|t| t.kind == crate::tools::ToolKind::Shell);
        if shell
            && !self.progress.knows_a_change()
            && cx.state.finish.snapshot.as_ref().is_some_and(|s| !s.changed().is_empty())
        {
            self.progress.commands_changed_files();
        }
        // A refusal by the user is news to the model, not a repeat; so is any call of a tool that is not
        // idempotent.
        if done.denied || self.not_idempotent.contains(&call.name) {
            self.progress.moved();
        } else if self.repeated.contains(&done.index) {
            // Refused by the runaway guard, which said so: no verdict here, but a refused repeat of a check
            // that passed may call for the wrap-up.
            self.progress.refused(call);
        } else if self.again.contains(&done.index) {
            if let Some(note) = self.progress.again(call, &outcome.content, outcome.is_error) {
                append_text(&mut outcome.content, &note);
            }
        } else {
            self.progress.see(call, &outcome.content, outcome.is_error);
        }
        if !done.last {
            return Ok(());
        }
        if let Some(stall) = self.progress.end_turn(&g).filter(|_| !self.turn_repeated) {
            append_text(&mut outcome.content, &stall.note);
            (cx.on_event)(&Event::Repetition {
                id: call.id.clone(),
                name: call.name.clone(),
                count: stall.count,
                stopped: stall.stop,
                note: stall.note,
            });
            self.stop |= stall.stop;
        } else if let Some(note) = self.progress.turn_note() {
            append_text(&mut outcome.content, &note);
        }
        Ok(())
    }

    fn after_tools(&mut self, cx: &mut Cx<'_>) -> Flow {
        if !self.stop {
            return Flow::Go;
        }
        // A guard stopped the run; one more request with tools off is its answer.
        if self.wrap_up_due(cx.agent) {
            return Flow::Again;
        }
        cx.run.stop_reason = Some(StopReason::Repetition);
        Flow::Stop
    }
}
