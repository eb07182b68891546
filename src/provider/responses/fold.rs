//! A Responses `response` object, or its stream of semantic events, folded into the neutral turn: reasoning
//! items as thinking blocks (the item kept under [`REASONING_KEY`]), message parts as text, `function_call`
//! items as tool uses; usage, stop reasons and the errors a response or an event carries.

use serde_json::{Map, Value, json};

use super::REASONING_KEY;
use crate::error::{ApiError, ApiErrorKind};
use crate::provider::StreamEvent;
use crate::types::{ContentBlock, MessageResponse, StopReason, ThinkingBlock, ToolUseBlock, Usage};

/// Map Responses usage (`input_tokens` includes cached ones) onto the neutral [`Usage`]; reasoning tokens
/// (part of `output_tokens`) are kept in `extra` as `reasoning_tokens`.
pub fn map_usage(u: &Value) -> Usage {
    let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    let cached = u.get("input_tokens_details").and_then(|d| d.get("cached_tokens")).and_then(Value::as_u64);
    let mut usage = Usage {
        input_tokens: n(u.get("input_tokens")).saturating_sub(cached.unwrap_or(0)),
        output_tokens: n(u.get("output_tokens")),
        cache_read_input_tokens: cached,
        ..Default::default()
    };
    if let Some(r) = u.get("output_tokens_details").and_then(|d| d.get("reasoning_tokens")).and_then(Value::as_u64) {
        usage.extra.insert("reasoning_tokens".into(), json!(r));
    }
    usage
}

fn tool_use(id: &str, name: &str, arguments: &str) -> ContentBlock {
    let trimmed = arguments.trim();
    let input = if trimmed.is_empty() {
        Value::Object(Map::new())
    } else {
        serde_json::from_str(trimmed).unwrap_or_else(|_| Value::String(arguments.to_string()))
    };
    ContentBlock::ToolUse(ToolUseBlock { id: id.to_string(), name: name.to_string(), input, extra: Map::new() })
}

/// A reasoning item's summary texts, joined by a blank line.
fn summary_text(item: &Value) -> String {
    item.get("summary")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn reasoning_block(item: &Value) -> ContentBlock {
    let mut extra = Map::new();
    extra.insert(REASONING_KEY.into(), item.clone());
    ContentBlock::Thinking(ThinkingBlock { thinking: summary_text(item), signature: String::new(), extra })
}

/// The stop reason of a finished response: `incomplete` says why (`max_output_tokens` is the max_tokens
/// stop); a complete one with function calls wants tools.
fn stop_reason(status: Option<&str>, incomplete: Option<&str>, has_calls: bool) -> Option<StopReason> {
    Some(match status? {
        "incomplete" => match incomplete {
            Some("max_output_tokens") => StopReason::MaxTokens,
            Some("content_filter") => StopReason::Refusal,
            Some(other) => StopReason::Other(other.to_string()),
            None => StopReason::Other("incomplete".into()),
        },
        _ if has_calls => StopReason::ToolUse,
        "completed" => StopReason::EndTurn,
        other => StopReason::Other(other.to_string()),
    })
}

/// The API error a `failed` response, an `error` event or a `response.failed` event carries.
pub fn stream_error(err: &Value) -> ApiError {
    let code = err.get("code").or_else(|| err.get("type")).and_then(Value::as_str).unwrap_or("").to_string();
    let kind = match code.as_str() {
        "rate_limit_exceeded" => ApiErrorKind::RateLimit,
        "server_error" => ApiErrorKind::InternalServer,
        "context_length_exceeded" => ApiErrorKind::BadRequest,
        other => ApiErrorKind::classify(200, other),
    };
    // A prompt too long is the 400 it would have been before the stream (so compaction recognises it).
    let status = if code == "context_length_exceeded" { 400 } else { 200 };
    ApiError {
        kind,
        status,
        error_type: code,
        message: err.get("message").and_then(Value::as_str).unwrap_or("error in stream").to_string(),
        request_id: None,
        retry_after: None,
        hint: None,
    }
}

/// Convert a `response` object into the neutral message. A `failed` response is its error.
pub fn parse_response(raw: &Value) -> std::result::Result<MessageResponse, ApiError> {
    let status = raw.get("status").and_then(Value::as_str);
    if status == Some("failed") {
        return Err(stream_error(raw.get("error").unwrap_or(&Value::Null)));
    }
    let mut content = Vec::new();
    let mut has_calls = false;
    for item in raw.get("output").and_then(Value::as_array).into_iter().flatten() {
        match item.get("type").and_then(Value::as_str) {
            Some("reasoning") => content.push(reasoning_block(item)),
            Some("message") => {
                for part in item.get("content").and_then(Value::as_array).into_iter().flatten() {
                    let text = part.get("text").or_else(|| part.get("refusal")).and_then(Value::as_str);
                    if let Some(t) = text {
                        content.push(ContentBlock::text(t));
                    }
                }
            }
            Some("function_call") => {
                has_calls = true;
                let s = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or("");
                content.push(tool_use(s("call_id"), s("name"), s("arguments")));
            }
            // Server-side tool calls (web search…) and kinds this version does not know are not kept.
            _ => {}
        }
    }
    let incomplete = raw.get("incomplete_details").and_then(|d| d.get("reason")).and_then(Value::as_str);
    Ok(MessageResponse {
        id: raw.get("id").and_then(Value::as_str).unwrap_or("").to_string(),
        model: raw.get("model").and_then(Value::as_str).unwrap_or("").to_string(),
        content,
        stop_reason: stop_reason(status, incomplete, has_calls),
        usage: raw.get("usage").filter(|u| !u.is_null()).map(map_usage).unwrap_or_default(),
        ..Default::default()
    })
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum SlotKind {
    Reasoning,
    Text,
    Call,
}

/// One neutral block being built from a stream: where it sits on the wire and what arrived so far.
#[derive(Debug)]
struct Slot {
    output_index: u64,
    content_index: u64,
    kind: SlotKind,
    /// Text, summary text, or a call's arguments.
    text: String,
    /// A call's `call_id` and name.
    id: String,
    name: String,
    /// A reasoning item (the final one once `response.output_item.done` came).
    item: Value,
    /// The summary part last written to (a new part starts after a blank line).
    summary_index: Option<u64>,
}

/// Folds Responses stream events into the neutral message, emitting typed events as it goes.
#[derive(Debug, Default)]
pub struct EventAccumulator {
    slots: Vec<Slot>,
    /// The `response` object of the last lifecycle event (`response.created` … `response.completed`).
    response: Value,
    usage: Option<Value>,
    /// Whether a terminal event (`response.completed` / `response.incomplete`) arrived.
    pub done: bool,
}

impl EventAccumulator {
    fn slot(&mut self, output_index: u64, content_index: u64, kind: SlotKind) -> (usize, bool) {
        match self.slots.iter().position(|s| s.output_index == output_index && s.content_index == content_index) {
            Some(i) => (i, false),
            None => {
                self.slots.push(Slot {
                    output_index,
                    content_index,
                    kind,
                    text: String::new(),
                    id: String::new(),
                    name: String::new(),
                    item: Value::Null,
                    summary_index: None,
                });
                (self.slots.len() - 1, true)
            }
        }
    }

    /// Apply one parsed event. An `error` event or `response.failed` comes back as its error.
    pub fn apply(&mut self, ev: &Value, on_event: &mut dyn FnMut(StreamEvent)) -> std::result::Result<(), ApiError> {
        let kind = ev.get("type").and_then(Value::as_str).unwrap_or("");
        let u = |k: &str| ev.get(k).and_then(Value::as_u64).unwrap_or(0);
        let delta = ev.get("delta").and_then(Value::as_str).unwrap_or("");
        match kind {
            // The reference puts `code` and `message` on the event; some servers nest them in `error`.
            "error" => return Err(stream_error(ev.get("error").filter(|e| e.is_object()).unwrap_or(ev))),
            "response.failed" => {
                let response = ev.get("response").cloned().unwrap_or(Value::Null);
                return Err(stream_error(response.get("error").unwrap_or(&Value::Null)));
            }
            "response.created"
            | "response.in_progress"
            | "response.queued"
            | "response.completed"
            | "response.incomplete" => {
                if let Some(r) = ev.get("response").filter(|r| r.is_object()) {
                    self.response = r.clone();
                    if let Some(usage) = r.get("usage").filter(|u| !u.is_null()) {
                        self.usage = Some(usage.clone());
                        on_event(StreamEvent::Usage(map_usage(usage)));
                    }
                }
                if matches!(kind, "response.completed" | "response.incomplete") {
                    self.done = true;
                }
            }
            "response.output_item.added" => {
                let item = ev.get("item").cloned().unwrap_or(Value::Null);
                let output_index = u("output_index");
                match item.get("type").and_then(Value::as_str) {
                    Some("reasoning") => {
                        let (i, _) = self.slot(output_index, 0, SlotKind::Reasoning);
                        self.slots[i].item = item;
                    }
                    Some("function_call") => {
                        let (i, _) = self.slot(output_index, 0, SlotKind::Call);
                        let s = &mut self.slots[i];
                        s.id = item.get("call_id").and_then(Value::as_str).unwrap_or("").to_string();
                        s.name = item.get("name").and_then(Value::as_str).unwrap_or("").to_string();
                        s.text = item.get("arguments").and_then(Value::as_str).unwrap_or("").to_string();
                        on_event(StreamEvent::ToolUseStart { index: i, id: s.id.clone(), name: s.name.clone() });
                        if !s.text.is_empty() {
                            on_event(StreamEvent::ToolInputDelta { index: i, partial_json: s.text.clone() });
                        }
                    }
                    _ => {}
                }
            }
            "response.content_part.added"
                if ev.get("part").and_then(|p| p.get("type")).and_then(Value::as_str).is_some() =>
            {
                self.slot(u("output_index"), u("content_index"), SlotKind::Text);
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                let (i, _) = self.slot(u("output_index"), u("content_index"), SlotKind::Text);
                if !delta.is_empty() {
                    self.slots[i].text.push_str(delta);
                    on_event(StreamEvent::TextDelta { index: i, text: delta.to_string() });
                }
            }
            "response.reasoning_summary_text.delta" => {
                let (i, _) = self.slot(u("output_index"), 0, SlotKind::Reasoning);
                let part = u("summary_index");
                let s = &mut self.slots[i];
                let mut piece = String::new();
                if s.summary_index.is_some_and(|p| p != part) && !s.text.is_empty() {
                    piece.push_str("\n\n");
                }
                s.summary_index = Some(part);
                piece.push_str(delta);
                if !piece.is_empty() {
                    s.text.push_str(&piece);
                    on_event(StreamEvent::ThinkingDelta { index: i, thinking: piece });
                }
            }
            "response.function_call_arguments.delta" => {
                let (i, _) = self.slot(u("output_index"), 0, SlotKind::Call);
                if !delta.is_empty() {
                    self.slots[i].text.push_str(delta);
                    on_event(StreamEvent::ToolInputDelta { index: i, partial_json: delta.to_string() });
                }
            }
            "response.function_call_arguments.done" => {
                if let Some(args) = ev.get("arguments").and_then(Value::as_str) {
                    let (i, _) = self.slot(u("output_index"), 0, SlotKind::Call);
                    self.slots[i].text = args.to_string();
                }
            }
            "response.output_item.done" => {
                // The item as it ended is the truth (a reasoning item's encrypted_content is only whole here).
                let item = ev.get("item").cloned().unwrap_or(Value::Null);
                let output_index = u("output_index");
                match item.get("type").and_then(Value::as_str) {
                    Some("reasoning") => {
                        let (i, _) = self.slot(output_index, 0, SlotKind::Reasoning);
                        self.slots[i].text = summary_text(&item);
                        self.slots[i].item = item;
                    }
                    Some("function_call") => {
                        let (i, fresh) = self.slot(output_index, 0, SlotKind::Call);
                        let s = &mut self.slots[i];
                        let get = |k: &str| item.get(k).and_then(Value::as_str).map(str::to_string);
                        s.id = get("call_id").unwrap_or_else(|| s.id.clone());
                        s.name = get("name").unwrap_or_else(|| s.name.clone());
                        if let Some(a) = get("arguments") {
                            s.text = a;
                        }
                        if fresh {
                            on_event(StreamEvent::ToolUseStart { index: i, id: s.id.clone(), name: s.name.clone() });
                            on_event(StreamEvent::ToolInputDelta { index: i, partial_json: s.text.clone() });
                        }
                    }
                    Some("message") => {
                        for (k, part) in item.get("content").and_then(Value::as_array).into_iter().flatten().enumerate()
                        {
                            let text = part.get("text").or_else(|| part.get("refusal")).and_then(Value::as_str);
                            let Some(text) = text else { continue };
                            let (i, fresh) = self.slot(output_index, k as u64, SlotKind::Text);
                            if fresh && !text.is_empty() {
                                on_event(StreamEvent::TextDelta { index: i, text: text.to_string() });
                            }
                            self.slots[i].text = text.to_string();
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The neutral message so far.
    pub fn snapshot(&self) -> MessageResponse {
        let mut content = Vec::new();
        let mut has_calls = false;
        for s in &self.slots {
            content.push(match s.kind {
                SlotKind::Reasoning => {
                    let mut item = if s.item.is_object() { s.item.clone() } else { json!({"type": "reasoning"}) };
                    if let Some(obj) = item.as_object_mut() {
                        obj.entry("summary").or_insert_with(|| json!([]));
                    }
                    let mut extra = Map::new();
                    extra.insert(REASONING_KEY.into(), item);
                    ContentBlock::Thinking(ThinkingBlock { thinking: s.text.clone(), signature: String::new(), extra })
                }
                SlotKind::Text => ContentBlock::text(s.text.clone()),
                SlotKind::Call => {
                    has_calls = true;
                    tool_use(&s.id, &s.name, &s.text)
                }
            });
        }
        let r = &self.response;
        let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let status = if self.done { r.get("status").and_then(Value::as_str) } else { None };
        let incomplete = r.get("incomplete_details").and_then(|d| d.get("reason")).and_then(Value::as_str);
        MessageResponse {
            id: s("id"),
            model: s("model"),
            content,
            stop_reason: stop_reason(status, incomplete, has_calls),
            usage: self.usage.as_ref().map(map_usage).unwrap_or_default(),
            ..Default::default()
        }
    }

    /// The final `response` object (what the JSON call returns), from the terminal event.
    pub fn response(&self) -> Value {
        self.response.clone()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn summary_parts_are_joined_by_a_blank_line_and_the_done_item_wins() {
        let mut acc = EventAccumulator::default();
        let mut seen = Vec::new();
        for ev in [
            json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning", "id": "rs", "summary": []}}),
            json!({"type": "response.reasoning_summary_text.delta", "output_index": 0, "summary_index": 0, "delta": "a"}),
            json!({"type": "response.reasoning_summary_text.delta", "output_index": 0, "summary_index": 1, "delta": "b"}),
            json!({"type": "response.output_item.done", "output_index": 0, "item": {"type": "reasoning", "id": "rs",
                "summary": [{"type": "summary_text", "text": "a"}, {"type": "summary_text", "text": "b"}], "encrypted_content": "E"}}),
            json!({"type": "response.completed", "response": {"id": "r", "status": "completed", "output": []}}),
        ] {
            acc.apply(&ev, &mut |e| seen.push(e)).unwrap();
        }
        let m = acc.snapshot();
        let ContentBlock::Thinking(t) = &m.content[0] else { panic!("{m:?}") };
        assert_eq!(t.thinking, "a\n\nb");
        assert_eq!(t.extra[REASONING_KEY]["encrypted_content"], json!("E"));
        assert_eq!(m.stop_reason, Some(StopReason::EndTurn));
        let thinking: String = seen
            .iter()
            .filter_map(|e| {
                if let StreamEvent::ThinkingDelta { thinking, .. } = e { Some(thinking.as_str()) } else { None }
            })
            .collect();
        assert_eq!(thinking, "a\n\nb");
    }
}
