//! How a run ends, held to something outside the model's word: the `check` command ([`crate::check`]),
//! the run's record of changes and commands ([`crate::evidence`]), and one answer with tools off when a
//! guard stops the run. The loop calls in here at a few points (the first turn, an answer that would end the
//! run, `max_turns`, a guard's stop, the end); the rules live in the modules named.
//!
//! When the check runs: each time the model answers without tool calls, if it has not run yet in this run
//! or a write-kind or shell-kind call was made since its last run. A failure goes back to the model as a
//! user message ([`crate::check::CheckResult::failure_message`]) and the loop goes on; an answer with
//! nothing changed since the check failed ends the run with stop_reason `check_failed` (the model has given
//! up; asking again would spend turns for nothing), and so does `max_turns` with the check failing, under
//! either `max_turns_policy` (the check, run once more first if something changed, is the verdict).
//!
//! Must never: leave the check's files read-only after the run ([`Agent::finish_end`] clears them on every
//! way out), or challenge an answer more than once per run.

use std::path::PathBuf;

use super::*;
use crate::check::{CheckResult, CheckSpec};
use crate::evidence::Snapshot;
use crate::tools::ToolKind;

/// What one run's ending tracks.
#[derive(Default)]
pub(super) struct Finish {
    begun: bool,
    /// The check's files held read-only for this run (relative to the workspace).
    protected: Vec<PathBuf>,
    /// `run.tool_calls.len()` when the check last ran (`None`: it has not).
    checked_at: Option<usize>,
    /// The workspace before the run, when it has one and a shell tool.
    snapshot: Option<Snapshot>,
    /// Whether the answer was challenged once already.
    challenged: bool,
    /// A guard stopped the run: the next request is its answer with tools off; then whether it was sent.
    guard_wrap_up: GuardWrapUp,
}

#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum GuardWrapUp {
    #[default]
    No,
    Due,
    Sent,
}

impl Agent {
    /// Where the check runs and the record is kept: the built-in tools' workspace, else the agent's.
    fn finish_root(&self) -> Option<PathBuf> {
        let spec = self.spec();
        let builtin = spec.builtin.as_ref().map(|(o, _)| o.workspace.clone());
        builtin.or_else(|| spec.workspace.clone())
    }

    fn kind_of(&self, name: &str) -> ToolKind {
        self.tools.get(name).map(|t| t.kind).unwrap_or_default()
    }

    /// Before the run's first request: the check's files become read-only to the tools, and the workspace
    /// is looked at so the record can tell what commands changed.
    pub(super) fn finish_begin(&self, state: &mut RunState, run: &mut RunResult) {
        if std::mem::replace(&mut state.finish.begun, true) {
            return;
        }
        let check = lock(&self.config).check.clone();
        let root = self.finish_root().and_then(|r| r.canonicalize().ok());
        if let Some(spec) = &check {
            run.check = Some(CheckResult::new(&spec.command));
            if let Some(root) = &root {
                state.finish.protected = crate::check::files_named(&spec.command, root);
                self.tools.set_run_protected(state.finish.protected.clone());
            }
        }
        let shell = self.tools.names().iter().any(|n| self.kind_of(n) == ToolKind::Shell);
        if let (Some(root), true) = (root, shell) {
            state.finish.snapshot = Some(Snapshot::take(&root));
        }
    }

    /// The run ends, whichever way: the check's files are writable again; an ended run's result gets its
    /// record.
    pub(super) fn finish_end(&self, state: &mut RunState, run: Option<&mut RunResult>) {
        if !state.finish.protected.is_empty() {
            self.tools.set_run_protected(Vec::new());
            state.finish.protected.clear();
        }
        if let Some(run) = run {
            let (files, commands) = self.record_of(state, run);
            run.files_changed = files;
            run.commands_run = commands;
        }
    }

    /// The run's record so far: files changed, commands run.
    fn record_of(&self, state: &RunState, run: &RunResult) -> (Vec<String>, Vec<crate::evidence::CommandRun>) {
        let kind = |n: &str| self.kind_of(n);
        let mut files = crate::evidence::files_written(&run.tool_calls, &kind);
        if let Some(snapshot) = &state.finish.snapshot {
            for f in snapshot.changed() {
                if !files.contains(&f) {
                    files.push(f);
                }
            }
        }
        (files, crate::evidence::commands_run(&run.tool_calls, &kind))
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
                    let text = self.tools.cap_text(result.failure_message());
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

    /// A guard stopped the run: `true` when the model gets one request with tools off to answer from what it
    /// has (once per run; not when the host set a `tool_choice` of its own, or `progress_guard` has
    /// `wrap_up` off).
    pub(super) fn guard_wrap_up(&self, state: &mut RunState) -> bool {
        let (applies, on) = {
            let c = lock(&self.config);
            (crate::progress::wrap_up_applies(c.tool_choice.as_ref()), c.progress_guard.is_none_or(|g| g.wrap_up))
        };
        if !applies || !on || state.finish.guard_wrap_up != GuardWrapUp::No {
            return false;
        }
        state.finish.guard_wrap_up = GuardWrapUp::Due;
        true
    }

    /// Whether the next request is a guard's wrap-up (taken: `true` once).
    pub(super) fn take_guard_wrap_up(state: &mut RunState) -> bool {
        if state.finish.guard_wrap_up == GuardWrapUp::Due {
            state.finish.guard_wrap_up = GuardWrapUp::Sent;
            return true;
        }
        false
    }

    /// Whether the turn just answered was a guard's wrap-up: then the run ends with the guard's stop reason,
    /// whatever the turn did (calls are answered, not run).
    pub(super) fn answered_guard_wrap_up(state: &RunState) -> bool {
        state.finish.guard_wrap_up == GuardWrapUp::Sent
    }
}
