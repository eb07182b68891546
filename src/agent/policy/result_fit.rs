//! Each tool result within limits: the provider's size limits on what a result may carry (an image too
//! large is replaced by why), and a share of the context window (see `fit.rs`). Always in the set; before
//! any note is appended, so a note is never cut off.

use super::*;

#[derive(Default)]
pub(super) struct ResultFit {
    /// The share of the window one result may take, in bytes, and the window (as the turn began).
    fit: Option<(usize, u64)>,
}

impl Policy for ResultFit {
    fn name(&self) -> &'static str {
        "result fit"
    }

    fn before_tools(&mut self, cx: &mut Cx<'_>, _calls: &[ToolUseBlock]) {
        let agent = cx.agent;
        self.fit = agent
            .context_window()
            .map(|w| (crate::agent::fit::result_budget(w, lock(&agent.sizing).estimator.bytes_per_token), w));
    }

    fn after_tool(&mut self, cx: &mut Cx<'_>, _done: &CallDone<'_>, outcome: &mut CallOutcome) -> Result<()> {
        let limits = crate::content::limits(cx.agent.provider().name());
        if let Err(m) = crate::content::check_result(&outcome.content, limits) {
            // The model reads why instead of the request failing on the API's size limit.
            outcome.content = Value::String(format!("the tool's result was not sent: {m}"));
            outcome.is_error = true;
        }
        if let Some((budget, window)) = self.fit {
            crate::agent::fit::fit_result(&mut outcome.content, budget, window);
        }
        Ok(())
    }
}
