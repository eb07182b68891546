//! `draft_first`: the run's first request goes without tools and asks for every file to change as a whole
//! fenced block ([`crate::text_edits::DRAFT_NOTE`], in that request only); the loop turns the blocks into
//! `write_file` calls (`Agent::text_edits`), and the run goes on with the tools to run and check them.
//!
//! aider's way with small models, measured for issue 41: asked once for whole files in fenced blocks,
//! Qwen2.5-Coder-1.5B wrote correct files 14 times of 27, against 6 of 27 as `write_file` calls in the same
//! request. Only the run that starts a conversation drafts (no model turn in it yet: a request with no tools
//! may not carry calls, and a later message has the loop's context), only with the built-in `write_file`,
//! and never with `output_schema` or a `tool_choice` the host set: those requests are the host's.

use super::*;

#[derive(Default, PartialEq, Eq)]
enum Stage {
    /// The run's first request has not been shaped yet.
    #[default]
    Pending,
    /// The draft was sent: its answer is the turn being judged.
    Sent,
    /// Drafted and answered, or not drafting in this run.
    Done,
}

#[derive(Default)]
pub(super) struct Draft {
    stage: Stage,
    /// The task's words, when short enough to say again in [`no_file_note`].
    task: Option<String>,
}

/// The longest task (in characters) the note to a draft with no file says again.
const TASK_AGAIN: usize = 600;

/// The note to a draft that gave no file: the run goes on with the tools. A short task is said again: after
/// a long answer and this note, a small model asked "Please provide the task" (Qwen2.5-Coder-1.5B, issue 41).
fn no_file_note(task: Option<&str>) -> String {
    let again = task.map(|t| format!(" The task: {t}")).unwrap_or_default();
    format!(
        "[tooloop: no file was written from that answer. You have the tools now: use them if the task needs a \
         file changed or a command run; if it does not, give your final answer.{again}]"
    )
}

impl Policy for Draft {
    fn name(&self) -> &'static str {
        "draft"
    }

    fn before_request(&mut self, _cx: &mut Cx<'_>, _plan: &mut TurnPlan) -> Result<Flow> {
        // The turn after the draft's: the draft has been answered, whatever it gave.
        if self.stage == Stage::Sent {
            self.stage = Stage::Done;
        }
        Ok(Flow::Go)
    }

    fn shape_request(&mut self, cx: &mut Cx<'_>, plan: &mut TurnPlan, request: &mut Request) -> Result<Flow> {
        if std::mem::replace(&mut self.stage, Stage::Done) != Stage::Pending {
            return Ok(Flow::Go);
        }
        let host_shaped =
            lock(&cx.agent.config).output.is_some() || !crate::progress::wrap_up_applies(request.tool_choice.as_ref());
        // The conversation's first request only: a request with no tools may not carry calls, and a later task
        // (a REPL's next message) has the loop's context already.
        let started = request.messages.iter().any(|m| m.role == crate::Role::Assistant);
        let task = request.messages.last_mut().filter(|m| m.role == crate::Role::User);
        let Some(task) = task.filter(|_| !host_shaped && !started && !plan.wrap_up.0 && cx.agent.builtin_write())
        else {
            return Ok(Flow::Go);
        };
        let words: Vec<&str> = task
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect();
        let words = words.join("\n");
        self.task = (!words.trim().is_empty() && words.chars().count() <= TASK_AGAIN).then_some(words);
        task.content.push(ContentBlock::text(crate::text_edits::DRAFT_NOTE));
        request.tools.clear();
        request.tool_choice = None;
        plan.draft = true;
        self.stage = Stage::Sent;
        Ok(Flow::Go)
    }

    fn at_stop(&mut self, cx: &mut Cx<'_>) -> Result<Flow> {
        // The draft's answer had no file in it (else its calls ran and the model was asked again).
        if std::mem::replace(&mut self.stage, Stage::Done) != Stage::Sent {
            return Ok(Flow::Go);
        }
        let note = no_file_note(self.task.as_deref());
        cx.agent.record(Entry::new(EntryRole::User, vec![ContentBlock::text(note)]))?;
        Ok(Flow::Again)
    }
}
