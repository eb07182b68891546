//! The host's hooks as policies (see [`crate::hooks`]): `after_tool` sees each result first, `on_stop` may
//! keep a run going that every other policy let end, `before_request` sees each request as it goes out. The
//! `before_tool` hook is part of the permission decision (`permission.rs`): a new input it gives is judged
//! by the rules again. Always in the set: each does nothing without its hook.
//!
//! Must never: call a hook again in a turn after one failed (the run ends after the turn).

use super::*;

/// `after_tool`: `Some(text)` replaces what the model reads of a call that ran.
#[derive(Default)]
pub(super) struct AfterToolHook {
    /// The hook as the turn began.
    hook: Option<crate::hooks::AfterToolHook>,
}

impl Policy for AfterToolHook {
    fn name(&self) -> &'static str {
        "after_tool hook"
    }

    fn before_tools(&mut self, cx: &mut Cx<'_>, _calls: &[ToolUseBlock]) {
        self.hook = lock(&cx.agent.control).hooks.after_tool.clone();
    }

    fn after_tool(&mut self, cx: &mut Cx<'_>, done: &CallDone<'_>, outcome: &mut CallOutcome) -> Result<()> {
        let Some(hook) = self.hook.as_ref().filter(|_| done.ran && !done.hook_failed) else { return Ok(()) };
        let view = crate::hooks::ToolResultView {
            content: outcome.content.clone(),
            is_error: outcome.is_error,
            denied: done.denied,
        };
        match hook(done.call, &view) {
            Ok(Some(text)) => outcome.content = Value::String(cx.agent.tools.cap_text(text)),
            Ok(None) => {}
            Err(message) => return Err(Error::Hook { hook: "after_tool".into(), message }),
        }
        Ok(())
    }
}

/// `on_stop`: the run would end; `Some(text)` goes to the model as a new user message and the run goes on.
pub(super) struct OnStopHook;

impl Policy for OnStopHook {
    fn name(&self) -> &'static str {
        "on_stop hook"
    }

    fn at_stop(&mut self, cx: &mut Cx<'_>) -> Result<Flow> {
        let on_stop = lock(&cx.agent.control).hooks.on_stop.clone();
        let Some(hook) = on_stop else { return Ok(Flow::Go) };
        match hook(cx.run) {
            Ok(None) => Ok(Flow::Go),
            Ok(Some(text)) => {
                // Capped like tool output: a hook's text must not put megabytes into the next request.
                let text = cx.agent.tools.cap_text(text);
                cx.agent.record(Entry::new(EntryRole::User, vec![ContentBlock::text(text)]))?;
                Ok(Flow::Again)
            }
            Err(message) => Err(Error::Hook { hook: "on_stop".into(), message }),
        }
    }
}

/// `before_request`: sees each model turn's request as it is sent (observe only).
pub(super) struct BeforeRequestHook;

impl Policy for BeforeRequestHook {
    fn name(&self) -> &'static str {
        "before_request hook"
    }

    fn before_send(&mut self, cx: &mut Cx<'_>, request: &Request) -> Result<()> {
        let before_request = lock(&cx.agent.control).hooks.before_request.clone();
        if let Some(hook) = before_request {
            hook(request).map_err(|message| Error::Hook { hook: "before_request".into(), message })?;
        }
        Ok(())
    }
}
