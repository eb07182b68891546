//! Models supplied by the host: a function `request → response` (the "fake brain" that tests and custom
//! backends plug in), and a scripted list of responses replayed in order.
//!
//! Both emit the same typed events a network stream would (one delta per block), so hosts see identical
//! event sequences whichever provider runs.

use std::collections::VecDeque;
use std::sync::Mutex;

use super::{Provider, Response, StreamEvent};
use crate::cancel::CancelToken;
use crate::error::{Error, Result};
use crate::types::{ContentBlock, MessageResponse, Request, StopReason};

/// Emit the typed events a stream of `message` would have produced.
pub fn emit_message_events(message: &MessageResponse, on_event: &mut dyn FnMut(StreamEvent)) {
    for (index, block) in message.content.iter().enumerate() {
        match block {
            ContentBlock::Text(t) => on_event(StreamEvent::TextDelta { index, text: t.text.clone() }),
            ContentBlock::Thinking(t) => on_event(StreamEvent::ThinkingDelta { index, thinking: t.thinking.clone() }),
            ContentBlock::ToolUse(t) => {
                on_event(StreamEvent::ToolUseStart { index, id: t.id.clone(), name: t.name.clone() });
                on_event(StreamEvent::ToolInputDelta { index, partial_json: t.input.to_string() });
            }
            _ => {}
        }
    }
    on_event(StreamEvent::Usage(message.usage.clone()));
}

/// Check a host-produced message: a stop reason must be present.
fn validate(mut message: MessageResponse) -> Result<MessageResponse> {
    if message.stop_reason.is_none() {
        return Err(Error::InvalidResponse {
            message: "the host model returned a message without stop_reason".into(),
            request_id: None,
        });
    }
    if message.id.is_empty() {
        message.id = format!("msg_host_{}", crate::conversation::new_id());
    }
    Ok(message)
}

type ModelFn = dyn Fn(&Request, &CancelToken) -> Result<MessageResponse> + Send + Sync;

/// A provider backed by a host function.
///
/// # Threads and cloning
/// The function may be called from the thread running the agent; it must be `Send + Sync`.
pub struct FnProvider {
    f: Box<ModelFn>,
}

impl FnProvider {
    /// Wrap `f`. It receives the request and the run's cancel token.
    pub fn new(f: impl Fn(&Request, &CancelToken) -> Result<MessageResponse> + Send + Sync + 'static) -> Self {
        FnProvider { f: Box::new(f) }
    }
}

impl Provider for FnProvider {
    fn name(&self) -> &str {
        "host"
    }

    fn send(&self, request: &Request, cancel: &CancelToken, on_event: &mut dyn FnMut(StreamEvent)) -> Result<Response> {
        if cancel.is_cancelled() {
            return Err(Error::Cancelled { partial: None });
        }
        let message = validate((self.f)(request, cancel)?)?;
        emit_message_events(&message, on_event);
        let raw = serde_json::to_value(&message).unwrap_or_default();
        Ok(Response { message, raw, request_id: None })
    }
}

/// One scripted step: a message to return, or an error to fail with.
pub enum ScriptStep {
    /// Return this message.
    Reply(MessageResponse),
    /// Fail with this error.
    Fail(Error),
}

/// A provider that replays scripted steps in order and records every request it was sent.
///
/// # Threads and cloning
/// `Send + Sync`; steps are taken under a lock in the order requests arrive.
#[derive(Default)]
pub struct ScriptedProvider {
    steps: Mutex<VecDeque<ScriptStep>>,
    requests: Mutex<Vec<Request>>,
}

impl ScriptedProvider {
    /// A provider that returns `replies` in order.
    pub fn new(replies: impl IntoIterator<Item = MessageResponse>) -> Self {
        Self::with_steps(replies.into_iter().map(ScriptStep::Reply))
    }

    /// A provider that plays `steps` in order (replies and failures).
    pub fn with_steps(steps: impl IntoIterator<Item = ScriptStep>) -> Self {
        ScriptedProvider { steps: Mutex::new(steps.into_iter().collect()), requests: Mutex::new(Vec::new()) }
    }

    /// Append a step.
    pub fn push(&self, step: ScriptStep) {
        self.steps.lock().unwrap_or_else(|e| e.into_inner()).push_back(step);
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Steps not yet played.
    pub fn remaining(&self) -> usize {
        self.steps.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl Provider for ScriptedProvider {
    fn name(&self) -> &str {
        "scripted"
    }

    fn send(&self, request: &Request, cancel: &CancelToken, on_event: &mut dyn FnMut(StreamEvent)) -> Result<Response> {
        if cancel.is_cancelled() {
            return Err(Error::Cancelled { partial: None });
        }
        self.requests.lock().unwrap_or_else(|e| e.into_inner()).push(request.clone());
        let step = self.steps.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
        match step {
            Some(ScriptStep::Reply(m)) => {
                let message = validate(m)?;
                emit_message_events(&message, on_event);
                let raw = serde_json::to_value(&message).unwrap_or_default();
                Ok(Response { message, raw, request_id: None })
            }
            Some(ScriptStep::Fail(e)) => Err(e),
            None => Err(Error::InvalidResponse {
                message: "the scripted provider has no response left".into(),
                request_id: None,
            }),
        }
    }
}

/// Convenience for scripts: an assistant message from blocks and a stop reason.
pub fn reply(content: Vec<ContentBlock>, stop: StopReason) -> MessageResponse {
    MessageResponse { content, stop_reason: Some(stop), model: "scripted".into(), ..Default::default() }
}
