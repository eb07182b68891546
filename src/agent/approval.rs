//! Approval as a pause: a stepped run ([`RunDriver`]) set to [pause for
//! approvals](RunDriver::pause_for_approvals) stops before a tool call that needs a decision and hands the
//! question to its host ([`Step::NeedsApproval`]); the host answers each call with
//! [`RunDriver::approve`] — on its own thread, at its own time — and steps again. codex's
//! `ExecApprovalRequest` / `ReviewDecision`, for a host with its own event loop (a GUI, a game loop, C,
//! asyncio) that must not lend a thread to a blocking question.
//!
//! Which calls pause: every call the permission callable would be asked about — each call not already
//! allowed or refused by the permission rules or `before_tool` (a rule that says "ask" pauses too). The
//! calls of one batch (a call alone, or consecutive parallel-safe calls: what would run at once) pause
//! together; a later batch pauses after the calls before it ran, as the callable would be asked. In a
//! pausing run the agent's permission callable is not called for the run's own calls.
//!
//! The blocking callable is the same pause answered at once: without `pause_for_approvals`, the callable
//! answers each call as the checks reach it, where [`RunDriver::step`] (and [`Agent::run`]) go on; a pausing
//! driver stepped with [`RunDriver::step`] has each pause answered by the callable (none set: refused).
//!
//! Cancelled while paused (the token, [`Agent::cancel`], or the driver dropped): the next step answers the
//! waiting batch's calls as interrupted — none of them runs — and the run ends with [`Error::Cancelled`];
//! the conversation stays valid (every call has its one result).
//!
//! Subagents (the `task` tool): a child's run is stepped by its parent's (child.rs), and in a pausing run
//! a child's call that needs a decision pauses the parent: it is one of the parent's
//! [`Step::NeedsApproval`] requests, marked with the child's agent type and the `task` call's id
//! ([`ApprovalRequest::agent_type`], [`ApprovalRequest::parent_id`]), and the parent's
//! [`RunDriver::approve`] answers it. The child waits meanwhile, so its questions come in the order it asks
//! them, after the parent's `task` call was approved; cancelled or dropped while a child waits, the child's
//! waiting calls are answered as interrupted, and so is the `task` call.
//!
//! Must never: run a call that waits for an answer before it has one, or leave a waiting call unanswered in
//! the store when the run ends.

use super::*;

/// What a step of a [`RunDriver`] came to (see [`RunDriver::next`]).
// `Done` is the large one and comes once per run: not worth a box in every host's match.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
#[non_exhaustive]
pub enum Step {
    /// The run goes on: step again.
    Continue,
    /// These tool calls wait for the host's answer ([`RunDriver::approve`] each, then step again; a step
    /// before every one is answered returns the ones still waiting, and does nothing else). Only from a
    /// driver set to [pause for approvals](RunDriver::pause_for_approvals).
    NeedsApproval(Vec<ApprovalRequest>),
    /// The run has ended with this outcome (every later step returns an error).
    Done(Result<RunResult>),
}

/// A tool call waiting for the host's decision (see [`Step::NeedsApproval`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ApprovalRequest {
    /// The call's id (`tool_use` id): what [`RunDriver::approve`] takes.
    pub call_id: String,
    /// The tool's name.
    pub tool: String,
    /// The input as the call would run (after `before_tool`, which may have replaced it).
    pub input: Value,
    /// Why it asks: the permission rule that says "ask"; `None`: every call not decided by a rule or a
    /// hook asks.
    pub reason: Option<String>,
    /// Whether the tool says it only reads ([`crate::Tool::read_only`]; `false` for a tool not registered).
    pub read_only: bool,
    /// A subagent's call: the child's agent type (`None`: the run's own agent's call).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_type: Option<String>,
    /// A subagent's call: the id of the parent's `task` call that started the child.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
}

impl ApprovalRequest {
    pub(super) fn new(call: &ToolUseBlock, reason: Option<String>, read_only: bool) -> Self {
        ApprovalRequest {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            input: call.input.clone(),
            reason,
            read_only,
            agent_type: None,
            parent_id: None,
        }
    }
}

/// Why [`RunDriver::approve`] refused an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApprovalError {
    /// The run has ended.
    Ended,
    /// No call with that id waits for an answer (never asked, or already settled by a step).
    UnknownCall,
}

impl std::fmt::Display for ApprovalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ApprovalError::Ended => "the run has ended",
            ApprovalError::UnknownCall => "no tool call with that id waits for approval",
        })
    }
}

impl std::error::Error for ApprovalError {}

impl From<ApprovalError> for Error {
    fn from(e: ApprovalError) -> Self {
        Error::Config(e.to_string())
    }
}

impl RunDriver {
    /// From the next batch of tool calls on, a call that needs a decision waits for the host
    /// ([`Step::NeedsApproval`] from [`RunDriver::next`]) instead of going to the permission callable
    /// (`false`: back to the callable). See the module docs of `approval.rs` for which calls pause.
    pub fn pause_for_approvals(&mut self, on: bool) {
        self.looping.pausing = on;
    }

    /// Take the run further, as [`RunDriver::step`] does, but return a pause for approvals to the caller
    /// instead of answering it with the permission callable.
    pub fn next(&mut self, on_event: &mut dyn FnMut(&Event)) -> Step {
        if self.ended() {
            return Step::Done(Err(Error::Config("the run has ended".into())));
        }
        loop {
            let outcome = self.agent.advance(&mut self.looping, self.read, on_event);
            if let Some(outcome) = outcome {
                self.busy = None;
                return Step::Done(outcome);
            }
            match &self.looping.phase {
                Phase::Reading(..) | Phase::Answered(_) => return Step::Continue,
                Phase::Tools(t) if t.waiting.is_some() || t.child.as_ref().is_some_and(|(_, c)| c.paused) => {
                    return Step::NeedsApproval(self.pending_approvals());
                }
                // A child agent took a step (child.rs): its events are out.
                Phase::Tools(t) if t.child.is_some() => return Step::Continue,
                _ => {}
            }
        }
    }

    /// The calls waiting for an answer now (empty when none does), in the order the model made them; a
    /// subagent's are marked as its ([`ApprovalRequest::agent_type`]).
    pub fn pending_approvals(&self) -> Vec<ApprovalRequest> {
        match &self.looping.phase {
            Phase::Tools(t) => {
                let mut asked: Vec<ApprovalRequest> = t
                    .waiting
                    .iter()
                    .flat_map(|b| &b.asked)
                    .filter(|(_, _, answer)| answer.is_none())
                    .map(|(_, request, _)| request.clone())
                    .collect();
                if let Some((_, c)) = &t.child {
                    asked.extend(c.pending_approvals());
                }
                asked
            }
            _ => Vec::new(),
        }
    }

    /// Answer a waiting call (the run's own, or a subagent's): [`Permission::Allow`] runs it, [`Permission::AllowReadOnly`] runs it with no
    /// power to change anything, [`Permission::Deny`] refuses it with the reason the model reads. An answer
    /// given again before the next step replaces the first. Nothing runs until the next step.
    pub fn approve(&mut self, call_id: &str, decision: Permission) -> std::result::Result<(), ApprovalError> {
        if self.ended() {
            return Err(ApprovalError::Ended);
        }
        let Phase::Tools(t) = &mut self.looping.phase else { return Err(ApprovalError::UnknownCall) };
        if let Some((_, c)) = &mut t.child {
            return c.approve(call_id, decision);
        }
        let slot = t.waiting.iter_mut().flat_map(|b| b.asked.iter_mut()).find(|(_, r, _)| r.call_id == call_id);
        match slot {
            Some((_, _, answer)) => {
                *answer = Some(decision);
                Ok(())
            }
            None => Err(ApprovalError::UnknownCall),
        }
    }

    /// Answer a pause with the agent's permission callable, on this thread: each of `asked` (the calls
    /// [`RunDriver::next`] returned, or [`RunDriver::pending_approvals`]; a subagent's too) is decided by it
    /// (none set: refused). What [`RunDriver::step`] does at a pause; a host that hands a step's events out
    /// before the callable asks (so a UI draws the call before its question) calls it itself, then steps
    /// with `next` again.
    pub fn answer_with_callable(&mut self, asked: Vec<ApprovalRequest>) {
        let permission = lock(&self.agent.control).permission.clone();
        for request in asked {
            let decision = match &permission {
                Some(p) => {
                    let call = ToolUseBlock {
                        id: request.call_id.clone(),
                        name: request.tool.clone(),
                        input: request.input,
                        extra: Map::new(),
                    };
                    p(&call)
                }
                None => Permission::Deny(
                    "no one answered: the run paused for approval and has no permission \
                                          callable"
                        .into(),
                ),
            };
            // The call waits (it was just listed), so the answer is taken.
            let _ = self.approve(&request.call_id, decision);
        }
    }
}
