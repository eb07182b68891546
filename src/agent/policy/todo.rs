//! The todo reminder (`todo_reminder_after`, with the `todo_write` tool registered): after that many model
//! turns with tool calls in a row that left an unfinished todo list alone, a short reminder is appended to
//! the turn's last tool result. See [`crate::todo`].

use super::*;

#[derive(Default)]
pub(super) struct TodoReminder {
    /// Model turns with tool calls since the last `todo_write`.
    since_todo: u32,
    /// The reminder due at this turn's last result.
    reminder: Option<String>,
}

impl Policy for TodoReminder {
    fn name(&self) -> &'static str {
        "todo reminder"
    }

    fn before_tools(&mut self, cx: &mut Cx<'_>, calls: &[ToolUseBlock]) {
        let agent = cx.agent;
        self.reminder = None;
        // Due when the model has left an unfinished list alone for a while.
        if agent.tools.get(crate::todo::TOOL_NAME).is_none() {
            return;
        }
        if calls.iter().any(|c| c.name == crate::todo::TOOL_NAME) {
            self.since_todo = 0;
            return;
        }
        self.since_todo += 1;
        let remind_after = lock(&agent.config).todo_reminder_after;
        if remind_after.is_some_and(|n| self.since_todo >= n.max(1)) {
            let list = crate::todo::current(&agent.conversation.snapshot());
            if crate::todo::unfinished(&list) > 0 {
                self.reminder = Some(crate::todo::reminder(&list));
                self.since_todo = 0;
            }
        }
    }

    fn after_tool(&mut self, _cx: &mut Cx<'_>, done: &CallDone<'_>, outcome: &mut CallOutcome) -> Result<()> {
        if !done.last {
            return Ok(());
        }
        if let Some(text) = self.reminder.take() {
            append_text(&mut outcome.content, &text);
        }
        Ok(())
    }
}
