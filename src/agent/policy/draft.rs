//! `draft_first`: the run's first request goes without tools and asks for every file to change as a whole
//! fenced block, and for commands to run in shell blocks ([`crate::text_edits::DRAFT_NOTE`], in that request
//! only); the loop turns the blocks into `write_file` calls, then `bash` calls (`Agent::text_edits`), and the
//! run goes on with the tools to check the result. A draft with neither is left out of the conversation and
//! the task asked again with the tools; so is, once a run, an answer that writes the draft's results back
//! (the next request then goes at the progress guard's unstick temperature, where the host set one).
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
    /// The block the draft ended inside (cut off at `max_tokens`, or never closed), if it did: its last
    /// result says so.
    cut: Option<crate::text_edits::Unclosed>,
    /// The draft's files or commands ran: their last result carries the draft's note.
    drafted: bool,
    /// An answer that wrote the draft's results back was left out (once a run).
    echo_left_out: bool,
    /// The request after it goes at the progress guard's unstick temperature, where the host set one.
    unstick: bool,
}

/// Why a draft with no file or command is left out of the conversation (its entry's `error`).
pub(super) const LEFT_OUT: &str =
    "draft_first: a draft with no file or command in it, left out; the task asked again with tools";

/// Why an answer that wrote the draft's results back is left out of the conversation (its entry's `error`).
pub(super) const ECHO_LEFT_OUT: &str =
    "draft_first: an answer that wrote the draft's results back (its note among them), left out; asked again";

/// How the notes on the draft's last result begin (an answer that holds one wrote that result back).
const NOTE_OPENINGS: &[&str] = &["[tooloop: the files of your draft are written", "[tooloop: your draft ended inside"];

/// What the last result of the draft's commands says (they ran after its files).
pub(super) const RAN_NOTE: &str = "[tooloop: the files of your draft are written and its commands ran (their \
results are above). If the task asks to run something that has not run yet, or a result shows a failure, use the \
tools to run and fix it; then give your final answer.]";

/// What the last result of the draft's files says, when it had no command.
pub(super) const CHECK_NOTE: &str = "[tooloop: the files of your draft are written. Check them now with the tools: \
run what the task asks to run (its program or its test) and fix what fails; then give your final answer.]";

/// What the last result of a draft cut off inside a block says: what was not written or run, and how to go
/// on (a long file in parts, the tools' way past a small window's output limit).
fn cut_note(cut: &crate::text_edits::Unclosed) -> String {
    const REST: &str = "Run what the task asks to run and fix what fails; then give your final answer.";
    let (lost, write) = match (&cut.path, cut.shell) {
        (_, true) => ("a command block, so no command of your draft ran".to_string(), String::new()),
        (Some(p), _) => (
            format!("the block of `{p}`, so {p} was not written and no command of your draft ran"),
            format!(
                "Write {p} now with the tools (a long file in parts: write_file the first part, then edit_file to \
                     add the rest). "
            ),
        ),
        (None, _) => (
            "a block that names no file, which was not written, and no command of your draft ran".to_string(),
            "Write what is missing with the tools. ".to_string(),
        ),
    };
    // Where the block repeated a line until it was cut, the model is shown which: told only to write less,
    // Qwen2.5-Coder-1.5B wrote the same test with the same repetition again, three times.
    let again = cut.repeated.as_ref().map_or(String::new(), |(line, n)| {
        format!("That block gave the line `{line}` {n} times over: write each line once. ")
    });
    format!(
        "[tooloop: your draft ended inside {lost} (it was cut off before the block closed). {again}The files \
             before it are written. {write}{REST}]"
    )
}

/// Make `request` (the conversation's first) the draft's: the note after the task, no tools. Also for the
/// draft's request built again (for a fallback model, or after an overflow's compaction).
pub(in crate::agent) fn as_draft(request: &mut Request) {
    if let Some(task) = request.messages.last_mut().filter(|m| m.role == crate::types::Role::User) {
        task.content.push(ContentBlock::text(crate::text_edits::DRAFT_NOTE));
    }
    request.tools.clear();
    request.tool_choice = None;
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
        if std::mem::take(&mut self.unstick)
            && let Some(t) = lock(&cx.agent.config).progress_guard.and_then(|g| g.unstick_temperature)
        {
            crate::progress::unstick(request, t);
        }
        if std::mem::replace(&mut self.stage, Stage::Done) != Stage::Pending {
            return Ok(Flow::Go);
        }
        let host_shaped =
            lock(&cx.agent.config).output.is_some() || !crate::progress::wrap_up_applies(request.tool_choice.as_ref());
        // The conversation's first request only: a request with no tools may not carry calls, and a later task
        // (a REPL's next message) has the loop's context already.
        let started = request.messages.iter().any(|m| m.role == crate::types::Role::Assistant);
        let task = request.messages.last().is_some_and(|m| m.role == crate::types::Role::User);
        if !task || host_shaped || started || plan.wrap_up.0 || !cx.agent.builtin_write() {
            return Ok(Flow::Go);
        }
        as_draft(request);
        plan.draft = true;
        self.stage = Stage::Sent;
        Ok(Flow::Go)
    }

    fn after_response(&mut self, cx: &mut Cx<'_>, answer: &Answer<'_>) -> Result<Flow> {
        if self.stage != Stage::Sent {
            return Ok(Flow::Go);
        }
        self.cut = crate::text_edits::unclosed(&answer.message.text());
        // Cut off at max_tokens with no whole file in it (the loop took what it could, see
        // `Agent::text_edits`): left out, and the task asked again with the tools, which write in parts.
        if answer.message.stop_reason == Some(StopReason::MaxTokens) && answer.calls.is_empty() {
            self.stage = Stage::Done;
            leave_out(cx, LEFT_OUT)?;
            return Ok(Flow::Again);
        }
        Ok(Flow::Go)
    }

    fn after_tool(&mut self, _cx: &mut Cx<'_>, done: &CallDone<'_>, outcome: &mut CallOutcome) -> Result<()> {
        // The draft's files are written: the model is asked to check them before it answers. Without this,
        // Qwen2.5-Coder-1.5B answered "done" on the next turn without running anything in 4 of 9 runs, 2 of
        // them wrong (a test never run, its import missing; a flag that printed the name unchanged). Where the
        // draft's commands ran (the last call is one), their results are the check so far.
        if self.stage == Stage::Sent && done.last && done.call.id.starts_with(crate::text_edits::ID_PREFIX) {
            let ran = done.call.name == crate::text_edits::RUN_TOOL;
            let note = match &self.cut {
                Some(cut) => cut_note(cut),
                None => (if ran { RAN_NOTE } else { CHECK_NOTE }).to_string(),
            };
            super::super::run_loop::append_text(&mut outcome.content, &note);
            self.drafted = true;
        }
        Ok(())
    }

    fn at_stop(&mut self, cx: &mut Cx<'_>) -> Result<Flow> {
        // The draft's answer had no file or command in it (else its calls ran and the model was asked again):
        // it is left out of the conversation (kept in the record, an error entry), and the task is asked again
        // with the tools, as if there had been no draft. Told instead "no file was written, you have the tools
        // now", Qwen2.5-Coder-1.5B gave its draft again word for word, or asked what the task was.
        if std::mem::replace(&mut self.stage, Stage::Done) == Stage::Sent {
            return Ok(if leave_out(cx, LEFT_OUT)? { Flow::Again } else { Flow::Go });
        }
        // An answer that writes the draft's results back, its note among them, is the chat template's
        // tool-result tags given as text, not an answer. Kept in the conversation, it is copied again: on
        // Qwen2.5-Coder-1.5B, after a draft's test failed, in every add_test run of a session, corrections and
        // all. It is left out once, and the task asked again (at the unstick temperature, where there is one).
        if !self.drafted || self.echo_left_out || !echoes_note(&cx.run.text) {
            return Ok(Flow::Go);
        }
        self.echo_left_out = true;
        self.unstick = true;
        Ok(if leave_out(cx, ECHO_LEFT_OUT)? { Flow::Again } else { Flow::Go })
    }
}

/// Whether `text` holds a note of the draft's last result.
fn echoes_note(text: &str) -> bool {
    NOTE_OPENINGS.iter().any(|n| text.contains(n))
}

/// The last answer (the last assistant entry) out of the conversation: kept in the record as an error entry,
/// `why`, in the session file too (so a resumed conversation leaves it out as well). Whether there was one.
fn leave_out(cx: &mut Cx<'_>, why: &str) -> Result<bool> {
    let entries = cx.agent.conversation.snapshot();
    let Some(answer) = entries.iter().rev().find(|e| e.role == EntryRole::Assistant) else {
        return Ok(false);
    };
    cx.agent.conversation.update(&answer.id, |e| {
        e.status = EntryStatus::Error;
        e.error = Some(why.into());
    });
    cx.agent.persist(&answer.id)?;
    Ok(true)
}
