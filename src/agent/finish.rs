//! The run's record: what files changed and what commands ran ([`crate::evidence`]), on every ended run's
//! result — from the write-kind calls, and from a look at the workspace before and after when the agent has
//! a shell tool. The state of the check held at the stop (`policy/check.rs`) is kept beside it: the check
//! reads the record and absorbs what it wrote itself.
//!
//! Must never: count as the run's change what the check itself wrote.

use std::path::PathBuf;

use super::*;
use crate::evidence::Snapshot;
use crate::tools::ToolKind;

/// What one run's ending tracks.
#[derive(Default)]
pub(super) struct Finish {
    pub(super) begun: bool,
    /// The check's files held read-only for this run (relative to the workspace).
    pub(super) protected: Vec<PathBuf>,
    /// `run.tool_calls.len()` when the check last ran (`None`: it has not).
    pub(super) checked_at: Option<usize>,
    /// The workspace before the run, when it has one and a shell tool.
    pub(super) snapshot: Option<Snapshot>,
    /// Whether the answer was challenged once already.
    pub(super) challenged: bool,
}

impl Agent {
    /// Where the check runs and the record is kept: the built-in tools' workspace, else the agent's.
    pub(super) fn finish_root(&self) -> Option<PathBuf> {
        let spec = self.spec();
        let builtin = spec.builtin.as_ref().map(|(o, _)| o.workspace.clone());
        builtin.or_else(|| spec.workspace.clone())
    }

    pub(super) fn kind_of(&self, name: &str) -> ToolKind {
        self.tools.get(name).map(|t| t.kind).unwrap_or_default()
    }

    /// Before the run's first request: the workspace is looked at so the record can tell what commands
    /// changed.
    pub(super) fn finish_begin(&self, state: &mut RunState) {
        if std::mem::replace(&mut state.finish.begun, true) {
            return;
        }
        let root = self.finish_root().and_then(|r| r.canonicalize().ok());
        let shell = self.tools.names().iter().any(|n| self.kind_of(n) == ToolKind::Shell);
        if let (Some(root), true) = (root, shell) {
            state.finish.snapshot = Some(Snapshot::take(&root));
        }
    }

    /// The run ends, whichever way: an ended run's result gets its record.
    pub(super) fn finish_end(&self, state: &mut RunState, run: Option<&mut RunResult>) {
        if let Some(run) = run {
            let (files, commands) = self.record_of(state, run);
            run.files_changed = files;
            run.commands_run = commands;
        }
    }

    /// The run's record so far: files changed, commands run.
    pub(super) fn record_of(
        &self,
        state: &RunState,
        run: &RunResult,
    ) -> (Vec<String>, Vec<crate::evidence::CommandRun>) {
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
}
