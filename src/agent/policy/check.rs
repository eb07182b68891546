//! The check and the run's record held at the stop (issue 41: `check`, `expect_changes`, `verify_claims`):
//! the check's files are read-only for the run, an answer without calls is held to the check
//! ([`crate::check`]) and to the record of what changed and ran (`finish.rs`, [`crate::evidence`]), and the
//! model is sent back once told why. In the set when one of the options is set — or, for a child agent, when
//! its parent's check files are read-only to it.
//!
//! When the check runs: each time the model answers without tool calls, if it has not run yet in this run
//! or a write-kind or shell-kind call was made since its last run. A failure goes back to the model as a
//! user message ([`crate::check::CheckResult::failure_message`], or what the host's `after_check` hook
//! makes of it) and the loop goes on; an answer with
//! nothing changed since the check failed ends the run with stop_reason `check_failed` (the model has given
//! up; asking again would spend turns for nothing), and so does `max_turns` with the check failing, under
//! either `max_turns_policy` (the check, run once more first if something changed, is the verdict: the turn
//! cap asks [`Agent::check_at_cap`]). When a repetition guard ends the run, the check runs once more too if
//! something changed, so the result says whether the work done before the loop holds
//! ([`Agent::check_at_guard_stop`]).
//!
//! Must never: leave the check's files read-only after the run (`run_end` clears them, whichever way the
//! run ended), or challenge an answer more than once per run.

use super::*;
use crate::check::{CheckResult, CheckSpec};
use crate::evidence::Snapshot;
use crate::tools::ToolKind;

pub(super) struct Check;

impl Policy for Check {
    fn name(&self) -> &'static str {
        "check"
    }

    fn run_start(&mut self, cx: &mut Cx<'_>) {
        cx.agent.protect_check_files(cx.state, cx.run);
    }

    fn before_tool(&mut self, cx: &mut Cx<'_>, _index: usize, call: &ToolUseBlock) -> CallVerdict {
        // The check's files are read-only for the run, whoever would allow the write.
        match cx.agent.check_refusal(call) {
            Some(why) => CallVerdict::Refuse { result: format!("Permission denied: {why}"), denied: true, stop: None },
            None => CallVerdict::Go,
        }
    }

    fn at_stop(&mut self, cx: &mut Cx<'_>) -> Result<Flow> {
        if cx.agent.before_answer(cx.state, cx.run, cx.cancel)? {
            return Ok(Flow::Again);
        }
        if cx.run.stop_reason == Some(StopReason::CheckFailed) {
            return Ok(Flow::Stop);
        }
        Ok(Flow::Go)
    }

    fn run_end(&mut self, cx: &mut Cx<'_>) {
        if cx.run.stop_reason == Some(StopReason::Repetition) {
            cx.agent.check_at_guard_stop(cx.state, cx.run, cx.cancel);
        }
        cx.agent.unprotect_check_files(cx.state);
    }
}

impl Agent {
    /// The check policy's start (`policy/check.rs`): the check's files become read-only to the tools.
    pub(super) fn protect_check_files(&self, state: &mut RunState, run: &mut RunResult) {
        let check = lock(&self.config).check.clone();
        if let Some(spec) = &check {
            run.check = Some(CheckResult::new(&spec.command));
            if let Some(root) = self.finish_root().and_then(|r| r.canonicalize().ok()) {
                state.finish.protected = crate::check::files_named(&spec.command, &root);
                self.tools.set_run_protected(state.finish.protected.clone());
            }
        }
    }

    /// The check policy's end: the check's files are writable again.
    pub(super) fn unprotect_check_files(&self, state: &mut RunState) {
        if !state.finish.protected.is_empty() {
            self.tools.set_run_protected(Vec::new());
            state.finish.protected.clear();
        }
    }

    /// Whether the conversation holds a write-kind call that succeeded: a run that continues a task (a
    /// correction, a follow-up) counts the changes the earlier runs made (not what their commands changed).
    fn wrote_before(&self) -> bool {
        let entries = self.conversation.snapshot();
        let mut writes = std::collections::HashSet::new();
        for e in &entries {
            for b in &e.content {
                match b {
                    ContentBlock::ToolUse(t) if self.kind_of(&t.name).written_path(&t.input).is_some() => {
                        writes.insert(t.id.clone());
                    }
                    ContentBlock::ToolResult(r) if r.is_error != Some(true) && writes.contains(&r.tool_use_id) => {
                        return true;
                    }
                    _ => {}
                }
            }
        }
        false
    }

    /// Why a write-kind call is refused: it would write one of the check's files.
    /// The registry's set is the one source: a `task` child gets its parent's (build.rs).
    pub(super) fn check_refusal(&self, call: &ToolUseBlock) -> Option<String> {
        let protected = self.tools.run_protected().get();
        if protected.is_empty() {
            return None;
        }
        let kind = self.kind_of(&call.name);
        let path = kind.written_path(&call.input)?;
        let root = self.finish_root()?.canonicalize().ok()?;
        let command = lock(&self.config).check.as_ref().map(|c| c.command.clone());
        crate::check::write_refusal(path, &root, &protected, command.as_deref())
    }

    /// Whether something changed since the check last ran (or it never ran).
    fn check_stale(&self, state: &RunState, run: &RunResult) -> bool {
        let Some(at) = state.finish.checked_at else { return true };
        run.tool_calls[at.min(run.tool_calls.len())..]
            .iter()
            .any(|c| matches!(self.kind_of(&c.name), ToolKind::Write { .. } | ToolKind::Shell) && !c.denied)
    }

    fn run_check(&self, spec: &CheckSpec, state: &mut RunState, run: &mut RunResult, cancel: &CancelToken) {
        let result = run.check.get_or_insert_with(|| CheckResult::new(&spec.command));
        state.finish.checked_at = Some(run.tool_calls.len());
        let builtin = self.spec().builtin.as_ref().map(|(o, _)| o.clone());
        let (root, opts) = match builtin {
            Some(o) => {
                let opts = crate::builtin::BashOptions {
                    sandbox: o.sandbox,
                    network: o.network,
                    env_passthrough: o.env_passthrough.clone(),
                    protected_paths: o.protected_paths.clone(),
                    ..crate::builtin::BashOptions::default()
                };
                (Some(o.workspace), opts)
            }
            None => (self.spec().workspace.clone(), crate::builtin::BashOptions::default()),
        };
        let ws = root.as_ref().map(crate::builtin::Workspace::new);
        // What the check itself writes (a log, a cache) is not the run's change: the record absorbs it.
        let before = state.finish.snapshot.as_ref().map(|s| Snapshot::take(s.root()));
        match ws {
            Some(Ok(ws)) => {
                crate::check::run(spec, &ws, &opts, cancel, result);
                if let (Some(snapshot), Some(before)) = (state.finish.snapshot.as_mut(), before) {
                    let after = Snapshot::take(snapshot.root());
                    snapshot.absorb(&before, &after);
                }
            }
            _ => {
                result.runs += 1;
                result.passed = false;
                result.exit_code = None;
                result.output_tail = "no workspace to run the check in (set `workspace` or the built-in tools)".into();
            }
        }
    }

    /// The model answered without tool calls: the check and the record decide whether the run ends.
    /// `true`: the model was told why not, and the loop goes on.
    pub(super) fn before_answer(
        &self,
        state: &mut RunState,
        run: &mut RunResult,
        cancel: &CancelToken,
    ) -> Result<bool> {
        let (check, expect_changes, verify_claims) = {
            let c = lock(&self.config);
            (c.check.clone(), c.expect_changes, c.verify_claims)
        };
        if let Some(spec) = &check {
            if self.check_stale(state, run) {
                self.run_check(spec, state, run, cancel);
                if let Some(result) = run.check.as_ref().filter(|r| !r.passed) {
                    let text = self.tools.cap_text(self.check_failure_text(result)?);
                    self.record(Entry::new(EntryRole::User, vec![ContentBlock::text(text)]))?;
                    return Ok(true);
                }
            } else if run.check.as_ref().is_some_and(|r| !r.passed) {
                // Answered again with nothing changed since the check failed: the model has given up.
                run.stop_reason = Some(StopReason::CheckFailed);
                return Ok(false);
            }
        }
        if !expect_changes && !verify_claims {
            return Ok(false);
        }
        let (files, commands) = self.record_of(state, run);
        let mut problems = Vec::new();
        if expect_changes && files.is_empty() && !self.wrote_before() {
            problems.push("the task asks for changes, and no file was changed".to_string());
        }
        if verify_claims {
            let check_passed = run.check.as_ref().is_some_and(|c| c.passed);
            problems.extend(crate::evidence::claims(&run.text, &commands, check_passed));
        }
        if problems.is_empty() {
            run.unverified = None;
            return Ok(false);
        }
        if std::mem::replace(&mut state.finish.challenged, true) {
            run.unverified = Some(problems.join("; "));
            return Ok(false);
        }
        let text = self.tools.cap_text(crate::evidence::challenge(&problems, &files, &commands));
        self.record(Entry::new(EntryRole::User, vec![ContentBlock::text(text)]))?;
        Ok(true)
    }

    /// What the model reads of a failed check: its failure message, or what the host's `after_check` hook
    /// makes of it (a hook that fails ends the run, as any hook's failure does).
    fn check_failure_text(&self, result: &CheckResult) -> Result<String> {
        let message = result.failure_message();
        let hook = lock(&self.control).hooks.after_check.clone();
        let Some(hook) = hook else { return Ok(message) };
        match hook(result, &message) {
            Ok(Some(text)) => Ok(text),
            Ok(None) => Ok(message),
            Err(message) => Err(Error::Hook { hook: "after_check".into(), message }),
        }
    }

    /// A repetition or progress guard ended the run: with a check, it is run once more if something changed
    /// since it last ran, so the result's `check` says whether the work the model did before it looped holds
    /// (the stop_reason stays `repetition`: the guard did fire).
    pub(super) fn check_at_guard_stop(&self, state: &mut RunState, run: &mut RunResult, cancel: &CancelToken) {
        let Some(spec) = lock(&self.config).check.clone() else { return };
        if self.check_stale(state, run) && !cancel.is_cancelled() {
            self.run_check(&spec, state, run, cancel);
        }
    }

    /// `max_turns` is reached: with a check, it is run once more if something changed, and a failing one
    /// ends the run with `check_failed` (whatever the policy). `true`: the run ends so.
    pub(super) fn check_at_cap(&self, state: &mut RunState, run: &mut RunResult, cancel: &CancelToken) -> bool {
        let Some(spec) = lock(&self.config).check.clone() else { return false };
        if self.check_stale(state, run) {
            self.run_check(&spec, state, run, cancel);
        }
        if run.check.as_ref().is_some_and(|r| r.passed) {
            return false;
        }
        run.stop_reason = Some(StopReason::CheckFailed);
        run.max_turns_reached = true;
        true
    }
}
