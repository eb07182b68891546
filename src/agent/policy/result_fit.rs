//! Each tool result within limits: the provider's size limits on what a result may carry (an image too
//! large is replaced by why), and the results of a turn together within a share of the context window (see
//! `fit.rs`). Always in the set; before any note is appended, so a note is never cut off.

use super::*;

#[derive(Default)]
pub(super) struct ResultFit {
    /// The tokens left of the turn's budget for results, and the window (as the turn began).
    fit: Option<(f64, u64)>,
}

impl Policy for ResultFit {
    fn name(&self) -> &'static str {
        "result fit"
    }

    fn before_tools(&mut self, cx: &mut Cx<'_>, _calls: &[ToolUseBlock]) {
        let agent = cx.agent;
        self.fit = agent.context_window().map(|w| {
            // The room the next request leaves: the window less what it holds already (the answer with these
            // calls included) and the answer after it, at most an eighth of the window (the command's own
            // limit on a small window; a host's large default max_tokens would leave no room at all).
            let answer = u64::from(lock(&agent.config).max_tokens).min(w / 8);
            let room = agent.baseline_estimate().map(|used| w.saturating_sub(used + answer));
            (crate::agent::fit::turn_budget(w, room), w)
        });
    }

    fn after_tool(&mut self, cx: &mut Cx<'_>, _done: &CallDone<'_>, outcome: &mut CallOutcome) -> Result<()> {
        let limits = crate::content::limits(cx.agent.provider().name());
        if let Err(m) = crate::content::check_result(&outcome.content, limits) {
            // The model reads why instead of the request failing on the API's size limit.
            outcome.content = Value::String(format!("the tool's result was not sent: {m}"));
            outcome.is_error = true;
        }
        if let Some((left, window)) = &mut self.fit {
            crate::agent::fit::fit_result(&mut outcome.content, left, *window);
        }
        Ok(())
    }
}
