//! A `task` call's child agent under way: its run is a [`RunDriver`] its parent's run steps, one child
//! step per parent step, so the child's events reach the parent's host as they happen and a child's call
//! that needs a decision pauses the parent's run (approval.rs): the parent's [`RunDriver::pending_approvals`]
//! lists it, marked with the child's agent type and the `task` call's id, and the parent's
//! [`RunDriver::approve`] answers it. The child waits while the parent is paused; cancelled, it answers its
//! waiting calls as interrupted and ends, and the `task` call is answered as interrupted.
//!
//! Must never: step a child outside its `task` call's span, or drop a child under way without ending its run.

use super::*;

/// A `task` call's child whose run is under way (see `build.rs` for how it is made and ended).
pub(super) struct Child {
    pub(super) agent: Arc<Agent>,
    pub(super) driver: RunDriver,
    pub(super) agent_type: String,
    /// The parent's `task` call id.
    pub(super) parent_id: String,
    pub(super) model: String,
    pub(super) started: Instant,
    /// The `task` call's `execute_tool` span: each child step runs in it, so the child's run nests there.
    pub(super) span: tracing::Span,
    /// The last step paused for approvals.
    pub(super) paused: bool,
}

/// A `task` call's child that has ended (or never started): what its call's answer is made of.
pub(super) struct Ran {
    pub(super) outcome: CallOutcome,
    pub(super) info: Option<crate::subagent::ChildRun>,
    /// A host's hook failed in the child: the parent's run ends with it.
    pub(super) failed: Option<Error>,
    pub(super) span: tracing::Span,
}

impl Child {
    /// One step of the child's run (`pausing`: its calls that need a decision wait, as its parent's do);
    /// its events go to `on_event` as the parent's `subagent` events. `Some(outcome)` once it has ended.
    pub(super) fn step(&mut self, pausing: bool, on_event: &mut dyn FnMut(&Event)) -> Option<Result<RunResult>> {
        self.driver.pause_for_approvals(pausing);
        let Child { driver, agent_type, parent_id, span, .. } = self;
        let mut forward = |ev: &Event| {
            on_event(&Event::Subagent {
                parent_id: parent_id.clone(),
                agent_type: agent_type.clone(),
                event: Box::new(ev.clone()),
            })
        };
        let step = crate::trace::in_span(span, || driver.next(&mut forward));
        self.paused = matches!(step, Step::NeedsApproval(_));
        match step {
            Step::Done(outcome) => Some(outcome),
            _ => None,
        }
    }

    /// The child's calls waiting for an answer, marked as the child's.
    pub(super) fn pending_approvals(&self) -> Vec<ApprovalRequest> {
        if !self.paused {
            return Vec::new();
        }
        let mut asked = self.driver.pending_approvals();
        for request in &mut asked {
            request.agent_type = Some(self.agent_type.clone());
            request.parent_id = Some(self.parent_id.clone());
        }
        asked
    }

    /// Answer one of the child's waiting calls.
    pub(super) fn approve(&mut self, call_id: &str, decision: Permission) -> std::result::Result<(), ApprovalError> {
        if !self.paused {
            return Err(ApprovalError::UnknownCall);
        }
        self.driver.approve(call_id, decision).map_err(|_| ApprovalError::UnknownCall)
    }
}

impl Agent {
    /// The batch's call that starts a child agent (a `task` call that runs, alone, with no confinement), if any.
    pub(super) fn child_call(&self, to_run: &[usize], calls: &[ToolUseBlock], confined: &[bool]) -> Option<usize> {
        let [k] = to_run else { return None };
        (calls[*k].name == crate::subagent::TOOL_NAME && !lock(&self.control).subagents.is_empty() && !confined[*k])
            .then_some(*k)
    }
}
