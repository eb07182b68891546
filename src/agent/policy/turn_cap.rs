//! `max_turns`: no request past the cap. What reaching it does is `max_turns_policy`'s (an error, or the
//! result so far); with a check, the check is the verdict at the cap (see `check.rs`).

use super::*;

pub(super) struct TurnCap;

impl Policy for TurnCap {
    fn name(&self) -> &'static str {
        "turn cap"
    }

    fn before_request(&mut self, cx: &mut Cx<'_>, plan: &mut TurnPlan) -> Result<Flow> {
        let (max_turns, policy) = {
            let c = lock(&cx.agent.config);
            (c.max_turns, c.max_turns_policy)
        };
        // A guard's last request (its answer with tools off) goes past the cap.
        let Some(max) = max_turns.filter(|_| !plan.past_caps) else { return Ok(Flow::Go) };
        if cx.run.turns < max {
            return Ok(Flow::Go);
        }
        let note = format!("stopped: max_turns={max} reached");
        cx.agent.record(Entry::new(EntryRole::System, vec![ContentBlock::text(note)]))?;
        if cx.agent.check_at_cap(cx.state, cx.run, cx.cancel) {
            return Ok(Flow::Stop);
        }
        match policy {
            MaxTurnsPolicy::Error => Err(Error::MaxTurns { turns: max }),
            MaxTurnsPolicy::Return => {
                cx.run.max_turns_reached = true;
                cx.run.stop_reason = None;
                Ok(Flow::Stop)
            }
        }
    }
}
