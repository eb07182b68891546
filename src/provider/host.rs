//! Models supplied by the host: a function `request → response` (the "fake brain" that tests and custom
//! backends plug in), and a scripted list of responses replayed in order.
//!
//! Both emit the same typed events a network stream would (one delta per block), so hosts see identical
//! event sequences whichever provider runs.

use std::collections::VecDeque;
use std::sync::Mutex;

use super::{Provider, Response, StreamEvent, emit_message_events};
use crate::cancel::CancelToken;
use crate::error::{Error, Result};
use crate::types::{ContentBlock, MessageResponse, Request, StopReason};
use serde_json::{Value, json};

/// The stop reasons a host model may give (the API's own).
const STOP_REASONS: [&str; 7] =
    ["end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal", "model_context_window_exceeded"];

/// Check a host model's reply, given as JSON (a Python dict, a C host's JSON): the one set of rules for
/// every door. It must be a Messages API message object: `content` a list of blocks each with a `type`
/// (a plain string stands for one text block); `role` and `type`, when present, `assistant` and `message`;
/// `stop_reason` one of the API's values, or absent — then inferred as the API would have said it
/// (`tool_use` when the reply calls a tool, else `end_turn`). The error says what is wrong.
pub fn check_reply(reply: Value) -> std::result::Result<MessageResponse, String> {
    let shorten = |v: &Value| {
        let s = v.to_string();
        if s.len() <= 120 { s } else { format!("{}…", s.chars().take(120).collect::<String>()) }
    };
    let Value::Object(mut obj) = reply else {
        return Err(format!(
            "the reply must be an object (a Messages API message with \"content\" and \"stop_reason\"), got {}",
            shorten(&reply)
        ));
    };
    let content = match obj.remove("content") {
        None => {
            let keys: Vec<&String> = obj.keys().collect();
            return Err(format!("the reply has no \"content\" (a list of content blocks); keys: {keys:?}"));
        }
        Some(Value::String(text)) => vec![json!({"type": "text", "text": text})],
        Some(Value::Array(blocks)) => blocks,
        Some(other) => {
            return Err(format!("the reply's \"content\" must be a list of content blocks, got {}", shorten(&other)));
        }
    };
    if let Some(i) = content.iter().position(|b| b.get("type").and_then(Value::as_str).is_none()) {
        return Err(format!("content[{i}] must be an object with a \"type\" string, got {}", shorten(&content[i])));
    }
    match obj.get("role") {
        None | Some(Value::Null) => {}
        Some(r) if r == "assistant" => {}
        Some(_) => return Err("\"role\" must be \"assistant\"".into()),
    }
    match obj.get("type") {
        None | Some(Value::Null) => {}
        Some(t) if t == "message" => {}
        Some(_) => return Err("\"type\" must be \"message\"".into()),
    }
    let stop = match obj.get("stop_reason") {
        None | Some(Value::Null) => {
            let calls = content.iter().any(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"));
            if calls { "tool_use" } else { "end_turn" }.to_string()
        }
        Some(Value::String(s)) if STOP_REASONS.contains(&s.as_str()) => s.clone(),
        Some(Value::String(s)) => {
            return Err(format!("unknown stop_reason {s:?}; expected one of {}", STOP_REASONS.join(", ")));
        }
        Some(other) => {
            return Err(format!("\"stop_reason\" must be a string such as \"end_turn\", got {}", shorten(other)));
        }
    };
    obj.insert("content".into(), Value::Array(content));
    obj.insert("stop_reason".into(), Value::String(stop));
    obj.entry("role").or_insert_with(|| json!("assistant"));
    obj.entry("type").or_insert_with(|| json!("message"));
    let message: MessageResponse =
        serde_json::from_value(Value::Object(obj)).map_err(|e| format!("not a valid Messages API message: {e}"))?;
    Ok(with_id(message))
}

fn with_id(mut message: MessageResponse) -> MessageResponse {
    if message.id.is_empty() {
        message.id = format!("msg_host_{}", crate::id::new_id());
    }
    message
}

/// A typed host message: a missing stop reason is inferred as [`check_reply`] does.
fn validate(mut message: MessageResponse) -> Result<MessageResponse> {
    if message.stop_reason.is_none() {
        let calls = message.content.iter().any(|b| matches!(b, ContentBlock::ToolUse(_)));
        message.stop_reason = Some(if calls { StopReason::ToolUse } else { StopReason::EndTurn });
    }
    Ok(with_id(message))
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
    /// A host model reads the schema from the request's `output_config.format` and answers with JSON text.
    fn native_output(&self) -> bool {
        true
    }

    fn name(&self) -> &str {
        "host"
    }

    fn send(&self, request: &Request, cancel: &CancelToken, on_event: &mut dyn FnMut(StreamEvent)) -> Result<Response> {
        if cancel.is_cancelled() {
            return Err(Error::Cancelled { partial: None });
        }
        let message = validate((self.f)(request, cancel)?)?;
        // A cancel that came while the host model worked wins over its answer: the host asked for the run
        // to stop, and a run must not go on (or end "normally") after that.
        if cancel.is_cancelled() {
            return Err(Error::Cancelled { partial: None });
        }
        emit_message_events(&message, on_event);
        let raw = serde_json::to_value(&message).unwrap_or_default();
        Ok(Response { message, raw, request_id: None })
    }
}

/// One scripted step: a message to return, or an error to fail with.
#[allow(clippy::large_enum_variant)] // a test script: a few steps, built once
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
    /// A host model reads the schema from the request's `output_config.format` and answers with JSON text.
    fn native_output(&self) -> bool {
        true
    }

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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_without_stop_reason_gets_the_one_the_api_would_have_sent() {
        let m = check_reply(json!({"content": "hi"})).unwrap();
        assert_eq!((m.stop_reason.clone(), m.text()), (Some(StopReason::EndTurn), "hi".to_string()));
        let m = check_reply(json!({"content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]})).unwrap();
        assert_eq!(m.stop_reason, Some(StopReason::ToolUse));
        assert!(m.id.starts_with("msg_host_"));
        let typed = MessageResponse { content: vec![ContentBlock::text("x")], ..Default::default() };
        assert_eq!(validate(typed).unwrap().stop_reason, Some(StopReason::EndTurn));
    }

    #[test]
    fn every_rule_has_a_message_that_names_what_is_wrong() {
        for (reply, expected) in [
            (json!([1]), "must be an object"),
            (json!(null), "must be an object"),
            (json!({"stop_reason": "end_turn"}), "has no \"content\""),
            (json!({"content": 42}), "\"content\" must be a list"),
            (json!({"content": [{"text": "no type"}]}), "content[0] must be an object with a \"type\""),
            (json!({"content": [], "stop_reason": "because"}), "unknown stop_reason \"because\""),
            (json!({"content": [], "stop_reason": 5}), "\"stop_reason\" must be a string"),
            (json!({"content": [], "role": "user"}), "\"role\" must be \"assistant\""),
            (json!({"content": [], "type": "error"}), "\"type\" must be \"message\""),
        ] {
            let e = check_reply(reply.clone()).unwrap_err();
            assert!(e.contains(expected), "{reply}: {e}");
        }
    }
}
