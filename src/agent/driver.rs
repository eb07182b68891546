//! A run its caller drives a step at a time ([`Agent::start`] → [`RunDriver`]), so a host that hands out
//! the run's events as an iterator reads them on its own thread, with no worker thread and no hand-over
//! per event. The steps are the run loop's own phases (see `run_loop.rs`): the same code as
//! [`Agent::run`], with each model turn read a network read per step where the provider can hand out a
//! stream to pull ([`Provider::pulls_streams`](crate::provider::Provider::pulls_streams)), and in one
//! piece where it cannot.
//!
//! Must never: leave a turn streaming in the store when the driver is dropped part-way.

use super::*;

/// A run under way, advanced by [`RunDriver::step`] on the caller's thread. The agent is busy until the
/// run has ended or the driver is dropped.
///
/// # Threads and cloning
/// `Send`: step it from any thread, one step at a time. Tools, hooks and the permission hook run on the
/// thread that steps, within a step; [`Agent::cancel`] (or the token given to [`Agent::start`]) from any
/// thread ends the run within 200 ms, at the next step.
pub struct RunDriver {
    pub(super) agent: Arc<Agent>,
    pub(super) looping: Looping,
    pub(super) read: Read,
    /// Set while the run is under way; dropped when it has ended.
    pub(super) busy: Option<Busy>,
}

impl std::fmt::Debug for RunDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunDriver").field("turns", &self.looping.run.turns).field("ended", &self.ended()).finish()
    }
}

impl Agent {
    /// Begin a run to drive step by step (see [`RunDriver::step`]): `input` is new user input (as
    /// [`Agent::run_cancellable`]), `None` resumes (as [`Agent::resume_cancellable`]). The input is checked
    /// and stored here; nothing is sent until the first step. [`Error::Busy`] if a run is in progress.
    pub fn start(self: &Arc<Self>, input: Option<Vec<ContentBlock>>, cancel: CancelToken) -> Result<RunDriver> {
        let busy = self.begin(cancel.clone())?;
        match input {
            Some(input) => {
                crate::content::check(&input, crate::content::limits(self.provider().name())).map_err(Error::Config)?;
                self.record(Entry::new(EntryRole::User, input))?;
            }
            None => {
                if self.conversation.shared_view().is_empty() {
                    return Err(Error::Config("nothing to resume: the conversation is empty".into()));
                }
                self.answer_pending("interrupted: the run stopped before this tool call ran; it was not run")?;
            }
        }
        let read = if self.provider().pulls_streams() { Read::Pull } else { Read::Whole };
        Ok(RunDriver { agent: self.clone(), looping: Looping::new(self.token()), read, busy: Some(busy) })
    }

    /// Whether this agent can start child agents (the `task` tool). A child's run is stepped with its
    /// parent's, a child step per [`RunDriver`] step, so its events reach the caller as they happen.
    pub fn starts_subagents(&self) -> bool {
        !lock(&self.control).subagents.is_empty() || self.tools.get(crate::subagent::TOOL_NAME).is_some()
    }

    /// Whether a [`RunDriver`] of this agent reads model turns a network read per step (the provider hands
    /// out a stream to pull); otherwise each turn is read within one step.
    pub fn pulls_streams(&self) -> bool {
        self.provider().pulls_streams()
    }
}

impl RunDriver {
    /// Take the run further: everything up to the next network read of a model turn's stream runs to
    /// completion (the checks, compaction, the request, the tool calls of the turn before, their hooks and
    /// permission questions), then one read; the events produced go to `on_event`, on this thread.
    /// A step also ends once a model turn is complete, before its tool calls run, so a host has shown the
    /// turn before any of its calls asks a question. Returns `Some(outcome)` once the run has ended (then
    /// every later step returns an error); `None`: step again. A pause for approvals (see
    /// [`RunDriver::next`]) is answered here by the agent's permission callable, and the step goes on.
    pub fn step(&mut self, on_event: &mut dyn FnMut(&Event)) -> Option<Result<RunResult>> {
        loop {
            match self.next(on_event) {
                Step::Continue => return None,
                Step::Done(outcome) => return Some(outcome),
                Step::NeedsApproval(asked) => self.answer_with_callable(asked),
            }
        }
    }

    /// Whether the run has ended (its outcome was returned by a step).
    pub fn ended(&self) -> bool {
        self.busy.is_none()
    }

    /// Step to the end, the events going to `on_event`: what [`Agent::run_cancellable`] does.
    pub fn finish(&mut self, on_event: &mut dyn FnMut(&Event)) -> Result<RunResult> {
        loop {
            if let Some(outcome) = self.step(on_event) {
                return outcome;
            }
        }
    }
}

impl Drop for RunDriver {
    /// A run dropped part-way is cancelled and stepped to its end (at once: every wait ends on the cancel),
    /// so its turn under way ends as an error in the store and the conversation stays valid.
    fn drop(&mut self) {
        if self.ended() {
            return;
        }
        self.looping.cancel.cancel();
        let _ = self.finish(&mut |_| {});
    }
}
