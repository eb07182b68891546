//! The check and the run's record held at the stop (issue 41: `check`, `expect_changes`, `verify_claims`):
//! the check's files are read-only for the run, an answer without calls is held to the check and to the
//! record of what changed and ran, and the model is sent back once told why. The rules, and when the check
//! runs, are in `finish.rs` and [`crate::check`] / [`crate::evidence`]. In the set when one of the options is
//! set — or, for a child agent, when its parent's check files are read-only to it.
//!
//! Must never: leave the check's files read-only after the run (`run_end` clears them, whichever way the
//! run ended).

use super::*;

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
        cx.agent.unprotect_check_files(cx.state);
    }
}
