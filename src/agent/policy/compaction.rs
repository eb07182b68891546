//! Compaction's trigger: a turn's request estimated past the threshold (`compact_threshold` of the window,
//! or less when the answer's `max_tokens` would not fit beside it) is preceded by a compaction, and goes
//! rebuilt from the compacted conversation (see `compact.rs` for how, and [`crate::compaction`] for what
//! stays). On with `compaction` (the default). The compaction after an answer that the prompt was too long
//! is the loop's (it answers an error; see [`Agent::after_overflow`]).
//!
//! Must never: send a turn's request that the summary's cost put past the spend cap.

use super::*;

pub(super) struct Compaction;

impl Policy for Compaction {
    fn name(&self) -> &'static str {
        "compaction"
    }

    fn shape_request(&mut self, cx: &mut Cx<'_>, plan: &mut TurnPlan, request: &mut Request) -> Result<Flow> {
        use crate::compaction::Reason;
        let agent = cx.agent;
        if !agent.over_threshold(plan.tokens) {
            return Ok(Flow::Go);
        }
        let mut spent = (&mut cx.run.usage, &mut cx.run.cost_usd);
        if agent.compact_inner(Reason::Threshold, None, false, cx.cancel, &mut spent, cx.on_event)?.is_none() {
            return Ok(Flow::Go);
        }
        *request = agent.wrapped_request(plan.wrap_up);
        plan.measured = Some(agent.sizes.request_bytes(request));
        // The summary was spent too: the turn's request must still fit under the cap; else it is not sent.
        if agent.request_affordable(request) {
            return Ok(Flow::Go);
        }
        cx.run.turns -= 1;
        agent.budget_stop(cx.run)?;
        Ok(Flow::Stop)
    }
}
