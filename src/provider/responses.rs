//! OpenAI's Responses API: `POST {base}/responses` where `base` ends in `/v1`. The wire OpenAI's reasoning
//! models need for tools with reasoning (Chat Completions refuses the two together for them).
//!
//! Renders the neutral request as `instructions` + `input` items (user and assistant messages,
//! `function_call` / `function_call_output` items paired by `call_id`, the reasoning items this wire made)
//! with flat function tools, `store: false`, and folds the JSON response or its semantic stream events
//! (`response.output_item.added` … `response.completed`) back into the neutral [`MessageResponse`].
//!
//! A reasoning item becomes a `thinking` block whose text is the item's summary and whose `extra` holds the
//! whole item under [`REASONING_KEY`] (its `id` and `encrypted_content` included): that is what goes back to
//! the API on the next request, so multi-turn reasoning works without server-side state. Thinking blocks
//! without it (Anthropic's, a Chat Completions server's `reasoning_content`) are never sent here.
//!
//! Must never: send a reasoning item without its `encrypted_content` (with `store: false` the API cannot
//! find it by id), crash on invalid `arguments` JSON (it reaches the loop as the raw string), or take the
//! end of the body for the end of a stream that sent no terminal event.

use serde_json::{Map, Value, json};

use super::{
    Provider, RawOpen, RawStream, Response, Secret, StreamEvent, TurnOpen, TurnStream, body_error, cut_short,
    redact_key,
};
use crate::cancel::CancelToken;
use crate::error::{ApiError, ApiErrorKind, Error, Result};
use crate::http::{HttpClient, HttpRequest, HttpResponse};
use crate::sse::{SseDecoder, SseEvent};
use crate::types::{
    ContentBlock, Message, MessageResponse, Request, Role, StopReason, ThinkingBlock, ToolUseBlock, Usage,
};

/// The official endpoint (the same as Chat Completions').
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The key of a thinking block's `extra` that holds the Responses reasoning item it came from (with its
/// `encrypted_content`). Only this wire sends such a block back; every other wire must drop it.
pub const REASONING_KEY: &str = "openai_reasoning";

/// Responses API provider.
///
/// # Threads and cloning
/// `Send + Sync`; concurrent `send` calls share the connection pool.
pub struct ResponsesProvider {
    http: HttpClient,
    base_url: String,
    api_key: Option<Secret>,
    headers: Vec<(String, String)>,
}

impl std::fmt::Debug for ResponsesProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponsesProvider").field("base_url", &self.base_url).field("api_key", &self.api_key).finish()
    }
}

impl ResponsesProvider {
    /// A provider for `base_url` (ending in `/v1`).
    pub fn new(http: HttpClient, base_url: String, api_key: Option<Secret>, headers: Vec<(String, String)>) -> Self {
        ResponsesProvider { http, base_url, api_key, headers }
    }
}

/// Whether `model` is one of OpenAI's reasoning models (o-series, gpt-5 family, codex): they reason whether
/// asked to or not, so their reasoning items are always asked for in encrypted form.
pub fn is_reasoning_model(model: &str) -> bool {
    crate::models::prefers_responses(model)
}

/// The `reasoning` object for a neutral `thinking` config: an `effort` given in it wins; a budget picks one
/// (under 4096 tokens `low`, under 16384 `medium`, else `high`); `adaptive` is `medium`; `disabled` none.
/// Summaries are asked for (`auto`): they are what a host sees as thinking.
pub fn reasoning_for(thinking: &Value) -> Option<Value> {
    let kind = thinking.get("type").and_then(Value::as_str).unwrap_or("enabled");
    if kind == "disabled" {
        return None;
    }
    let effort = match thinking.get("effort").and_then(Value::as_str) {
        Some(e) => e.to_string(),
        None => match thinking.get("budget_tokens").and_then(Value::as_u64) {
            Some(b) if b < 4096 => "low".into(),
            Some(b) if b < 16384 => "medium".into(),
            Some(_) => "high".into(),
            None => "medium".into(),
        },
    };
    Some(json!({"effort": effort, "summary": "auto"}))
}

fn system_text(system: &Value) -> String {
    match system {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => {
            blocks.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n")
        }
        other => other.to_string(),
    }
}

/// Render a neutral request as a Responses request body.
pub fn render_request(request: &Request) -> Value {
    let mut input = Vec::new();
    for m in &request.messages {
        render_message(m, &mut input);
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    if let Some(system) = &request.system {
        body.insert("instructions".into(), json!(system_text(system)));
    }
    body.insert("input".into(), Value::Array(input));
    body.insert("max_output_tokens".into(), json!(request.max_tokens));
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| match t.server_type() {
                // A tool the API defines by its `type` (`web_search`, `file_search`…) goes out as given.
                Some(_) => serde_json::to_value(t).unwrap_or(Value::Null),
                // Flat, unlike Chat Completions; `strict` is required (null or a bool) and strict mode needs
                // every property required, which ordinary tool schemas are not.
                None => json!({"type": "function", "name": t.name, "description": t.description,
                    "parameters": t.input_schema, "strict": false}),
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(tc) = &request.tool_choice {
        let choice = match tc.get("type").and_then(Value::as_str).unwrap_or("auto") {
            "any" => json!("required"),
            "none" => json!("none"),
            "tool" => json!({"type": "function", "name": tc.get("name").cloned().unwrap_or(Value::Null)}),
            _ => json!("auto"),
        };
        body.insert("tool_choice".into(), choice);
        if tc.get("disable_parallel_tool_use").and_then(Value::as_bool) == Some(true) {
            body.insert("parallel_tool_calls".into(), json!(false));
        }
    }
    if let Some(t) = request.temperature {
        body.insert("temperature".into(), json!(t));
    }
    // The API has no stop sequences (`stop_sequences` is not sent) and its `metadata` is not Anthropic's.
    if let Some(reasoning) = request.thinking.as_ref().and_then(reasoning_for) {
        body.insert("reasoning".into(), reasoning);
    }
    if request.stream {
        body.insert("stream".into(), json!(true));
    }
    for (k, v) in &request.extra {
        body.insert(k.clone(), v.clone());
    }
    // Stateless: nothing is kept on OpenAI's side, so the reasoning items must come back encrypted and
    // travel in the conversation. Non-reasoning models refuse the include, so it is asked only with
    // reasoning on (a host's own `include` wins).
    body.insert("store".into(), json!(false));
    if (body.contains_key("reasoning") || is_reasoning_model(&request.model)) && !body.contains_key("include") {
        body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    }
    // Structured output arrives in the neutral (Messages API) field: the Responses API calls it `text.format`.
    if let Some(Value::Object(mut config)) = body.remove("output_config") {
        if let Some(format) = config.remove("format") {
            let schema = format.get("schema").cloned().unwrap_or(Value::Null);
            let format = json!({"type": "json_schema", "name": "output", "schema": schema, "strict": false});
            match body.get_mut("text") {
                Some(Value::Object(text)) => {
                    text.insert("format".into(), format);
                }
                _ => {
                    body.insert("text".into(), json!({ "format": format }));
                }
            }
        }
        if !config.is_empty() {
            body.insert("output_config".into(), Value::Object(config));
        }
    }
    Value::Object(body)
}

fn render_message(m: &Message, out: &mut Vec<Value>) {
    match m.role {
        Role::User => {
            let mut parts = Vec::new();
            for b in &m.content {
                match b {
                    ContentBlock::ToolResult(r) => {
                        let text = r.text();
                        let text = if r.is_error == Some(true) { format!("Error: {text}") } else { text };
                        let images: Vec<Value> =
                            r.content.as_array().into_iter().flatten().filter_map(input_image).collect();
                        // A result with images is a list of input parts; otherwise the plain string.
                        let output = if images.is_empty() {
                            json!(text)
                        } else {
                            let mut list = vec![json!({"type": "input_text", "text": text})];
                            list.extend(images);
                            Value::Array(list)
                        };
                        out.push(json!({"type": "function_call_output", "call_id": r.tool_use_id, "output": output}));
                    }
                    ContentBlock::Text(t) => parts.push(json!({"type": "input_text", "text": t.text})),
                    ContentBlock::Unknown(v) => {
                        if let Some(image) = input_image(v) {
                            parts.push(image);
                        }
                    }
                    _ => {}
                }
            }
            if !parts.is_empty() {
                out.push(json!({"role": "user", "content": parts}));
            }
        }
        Role::Assistant => {
            // Items in the order of the blocks; consecutive text blocks make one assistant message.
            let mut text = String::new();
            let flush = |text: &mut String, out: &mut Vec<Value>| {
                if !text.is_empty() {
                    out.push(json!({"role": "assistant", "content": std::mem::take(text)}));
                }
            };
            for b in &m.content {
                match b {
                    ContentBlock::Text(t) => text.push_str(&t.text),
                    ContentBlock::ToolUse(t) => {
                        flush(&mut text, out);
                        // Invalid arguments arrived as a raw string: send back exactly what the model wrote.
                        let arguments = match &t.input {
                            Value::String(s) => s.clone(),
                            v => v.to_string(),
                        };
                        out.push(json!({"type": "function_call", "call_id": t.id, "name": t.name,
                            "arguments": arguments}));
                    }
                    ContentBlock::Thinking(t) => {
                        if let Some(item) = own_reasoning(t) {
                            flush(&mut text, out);
                            out.push(item);
                        }
                    }
                    // Other providers' reasoning and blocks this wire has no item for are not sent.
                    _ => {}
                }
            }
            flush(&mut text, out);
        }
    }
}

/// The reasoning item a thinking block carries, as it goes back to the API: only one this wire made, and
/// only with its `encrypted_content` (without it, and with `store: false`, the API has nothing to find).
fn own_reasoning(t: &ThinkingBlock) -> Option<Value> {
    let item = t.extra.get(REASONING_KEY)?.as_object()?;
    item.get("encrypted_content")?.as_str()?;
    let mut item = item.clone();
    // `status` is an output field; the input item is the rest, unchanged.
    item.remove("status");
    item.insert("type".into(), json!("reasoning"));
    Some(Value::Object(item))
}

/// A neutral `image` block as an `input_image` part (base64 as a data URL, or a URL).
fn input_image(block: &Value) -> Option<Value> {
    if block.get("type")?.as_str()? != "image" {
        return None;
    }
    let src = block.get("source")?;
    let url = match src.get("type")?.as_str()? {
        "base64" => format!("data:{};base64,{}", src.get("media_type")?.as_str()?, src.get("data")?.as_str()?),
        "url" => src.get("url")?.as_str()?.to_string(),
        _ => return None,
    };
    Some(json!({"type": "input_image", "image_url": url, "detail": "auto"}))
}

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

/// The request id of a response (OpenAI's `x-request-id`, or `request-id`).
fn request_id(resp: &HttpResponse) -> Option<String> {
    resp.header("x-request-id").or_else(|| resp.header("request-id")).map(str::to_string)
}

fn is_sse(resp: &HttpResponse) -> bool {
    resp.header("content-type").is_some_and(|c| c.starts_with("text/event-stream"))
}

/// Read one 2xx response (JSON or SSE): the final `response` object and the neutral turn. Every stream
/// event goes to `on_event` as its typed events and then as [`StreamEvent::Raw`]; `emitted` tells whether
/// any event reached the caller.
fn read(mut resp: HttpResponse, on_event: &mut dyn FnMut(StreamEvent), emitted: &mut bool) -> Result<Response> {
    if !is_sse(&resp) {
        return read_json(resp);
    }
    let mut reader = EventReader::new(request_id(&resp));
    let whole = loop {
        let step = reader.step(&mut resp, on_event);
        *emitted = reader.emitted;
        match step {
            Ok(true) => break Ok(()),
            Ok(false) => {}
            Err(e) => break Err(e),
        }
    };
    whole.map(|()| reader.response())
}

/// A JSON (not streamed) response: the `response` object and its neutral turn; a `failed` one is its error.
fn read_json(mut resp: HttpResponse) -> Result<Response> {
    let request_id = request_id(&resp);
    let body = resp.read_all().map_err(|e| body_error(e, MessageResponse::default(), false))?;
    let raw: Value = serde_json::from_slice(&body).map_err(|e| Error::InvalidResponse {
        message: format!("response is not JSON ({e}): {}", String::from_utf8_lossy(&body[..body.len().min(200)])),
        request_id: request_id.clone(),
    })?;
    let message = parse_response(&raw).map_err(|mut a| {
        a.request_id = request_id.clone();
        Error::Api(Box::new(a))
    })?;
    Ok(Response { message, raw, request_id })
}

/// A Responses stream being read, one network read per [`EventReader::step`]: what [`read`] loops over, and
/// what a caller that drives the stream itself ([`PulledEvents`], [`PulledRaw`]) keeps between reads.
struct EventReader {
    acc: EventAccumulator,
    decoder: SseDecoder,
    /// The events of the last read (kept for its buffer).
    events: Vec<SseEvent>,
    request_id: Option<String>,
    /// Whether any event reached the caller (after which nothing may be retried).
    emitted: bool,
}

impl EventReader {
    fn new(request_id: Option<String>) -> Self {
        EventReader {
            acc: EventAccumulator::default(),
            decoder: SseDecoder::new(),
            events: Vec::new(),
            request_id,
            emitted: false,
        }
    }

    /// Wait for the next bytes of `resp` and fold the events they complete (typed events, then the `Raw`
    /// one, to `on_event`); `true` once the terminal event arrived (`false`: read again). An error ends the
    /// stream; a body that ends before the terminal event is one.
    fn step(&mut self, resp: &mut HttpResponse, on_event: &mut dyn FnMut(StreamEvent)) -> Result<bool> {
        let EventReader { acc, decoder, events, request_id, emitted } = self;
        let invalid = |message: String| Error::InvalidResponse { message, request_id: request_id.clone() };
        let chunk = resp.next_chunk().map_err(|e| body_error(e, acc.snapshot(), *emitted))?;
        let finished = chunk.is_none();
        match chunk {
            Some(bytes) => decoder.feed(&bytes, events),
            None => events.extend(decoder.finish()),
        }
        for ev in events.drain(..) {
            let data = ev.data.trim();
            if data.is_empty() || data == "[DONE]" {
                continue;
            }
            let parsed: Value = match serde_json::from_str(data) {
                Ok(v) => v,
                Err(e) => {
                    return Err(cut_short(format!("stream event is not JSON: {e}"), acc.snapshot(), *emitted, invalid));
                }
            };
            let step = acc.apply(&parsed, &mut |e| {
                *emitted = true;
                on_event(e)
            });
            if let Err(mut a) = step {
                a.request_id = request_id.clone();
                return Err(if *emitted {
                    Error::StreamInterrupted {
                        message: format!("error in stream: {}", a.message),
                        partial: Box::new(acc.snapshot()),
                        api: Some(Box::new(a)),
                    }
                } else {
                    Error::Api(Box::new(a))
                });
            }
            *emitted = true;
            let event = ev.event.clone().or_else(|| parsed.get("type").and_then(Value::as_str).map(str::to_string));
            on_event(StreamEvent::Raw { event: event.unwrap_or_else(|| "message".into()), data: parsed });
            if acc.done {
                // The terminal event: anything after it is not this response's.
                return Ok(true);
            }
        }
        if finished {
            let message = "the stream ended before response.completed".to_string();
            return Err(cut_short(message, acc.snapshot(), *emitted, |message| Error::Connection { message }));
        }
        Ok(false)
    }

    /// The whole turn (once [`EventReader::step`] said so).
    fn response(&self) -> Response {
        Response { message: self.acc.snapshot(), raw: self.acc.response(), request_id: self.request_id.clone() }
    }
}

/// Forward only the wire events (what a raw client hands out).
fn raw_only(on_event: &mut dyn FnMut(StreamEvent)) -> impl FnMut(StreamEvent) + '_ {
    move |e: StreamEvent| {
        if matches!(e, StreamEvent::Raw { .. }) {
            on_event(e)
        }
    }
}

/// A Responses turn under way, pulled by the caller (see [`Provider::open_stream`]).
struct PulledEvents {
    resp: HttpResponse,
    reader: EventReader,
}

impl TurnStream for PulledEvents {
    fn step(&mut self, on_event: &mut dyn FnMut(StreamEvent)) -> Result<Option<Response>> {
        Ok(self.reader.step(&mut self.resp, on_event)?.then(|| self.reader.response()))
    }
}

/// A raw Responses stream under way, pulled by the caller (see [`Provider::open_raw_stream`]).
struct PulledRaw {
    resp: HttpResponse,
    reader: EventReader,
}

impl RawStream for PulledRaw {
    fn step(&mut self, on_event: &mut dyn FnMut(StreamEvent)) -> Result<Option<Value>> {
        let mut raw = raw_only(on_event);
        Ok(self.reader.step(&mut self.resp, &mut raw)?.then(|| self.reader.acc.response()))
    }

    /// The text is what the typed text deltas carry (no event is handed out).
    fn step_text(&mut self, text: &mut String) -> Result<Option<Value>> {
        let done = self.reader.step(&mut self.resp, &mut |ev| {
            if let StreamEvent::TextDelta { text: t, .. } = ev {
                text.push_str(&t);
            }
        })?;
        Ok(done.then(|| self.reader.acc.response()))
    }
}

/// A raw request body as sent: `stream` set or removed.
fn raw_body(body: &Value, stream: bool) -> Result<Value> {
    let Some(obj) = body.as_object() else {
        return Err(Error::Config("the request must be an object (a Responses API request body)".into()));
    };
    let mut obj = obj.clone();
    if stream {
        obj.insert("stream".into(), Value::Bool(true));
    } else {
        obj.remove("stream");
    }
    Ok(Value::Object(obj))
}

impl Provider for ResponsesProvider {
    fn name(&self) -> &str {
        super::Protocol::OpenAiResponses.name()
    }

    /// `text.format` takes a JSON schema on OpenAI's own endpoint; other servers that speak this wire get
    /// the final-answer tool (`output_mode: "native"` asks them for `text.format` anyway).
    fn native_output(&self) -> bool {
        self.base_url.contains("://api.openai.com")
    }

    fn secrets(&self) -> Vec<Secret> {
        self.api_key.iter().cloned().collect()
    }

    fn send(&self, request: &Request, cancel: &CancelToken, on_event: &mut dyn FnMut(StreamEvent)) -> Result<Response> {
        let req = self.http_request(&render_request(request))?;
        let on_error = |s: u16, h: &[(String, String)], b: &[u8]| self.api_error(s, h, b);
        self.http.exchange(&req, cancel, &on_error, &mut |resp| {
            let mut emitted = false;
            read(resp, on_event, &mut emitted).map_err(|e| super::attempt(e, emitted))
        })
    }

    /// The body goes out as given (`stream` set as asked); the answer is the `response` object: the JSON
    /// body, or the one the stream's terminal event carries. A `failed` response is an error either way.
    fn send_raw(
        &self,
        body: &Value,
        stream: bool,
        cancel: &CancelToken,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<Value> {
        let req = self.http_request(&raw_body(body, stream)?)?;
        let on_error = |s: u16, h: &[(String, String)], b: &[u8]| self.api_error(s, h, b);
        self.http.exchange(&req, cancel, &on_error, &mut |resp| {
            let mut emitted = false;
            read(resp, &mut raw_only(on_event), &mut emitted).map(|r| r.raw).map_err(|e| super::attempt(e, emitted))
        })
    }

    fn pulls_streams(&self) -> bool {
        true
    }

    /// The exchange of [`Provider::send`] (retries included) up to the first delivered events; the rest is
    /// read by the caller through the returned [`TurnStream`].
    fn open_stream(
        &self,
        request: &Request,
        cancel: &CancelToken,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<TurnOpen> {
        let req = self.http_request(&render_request(request))?;
        let on_error = |s: u16, h: &[(String, String)], b: &[u8]| self.api_error(s, h, b);
        self.http.exchange(&req, cancel, &on_error, &mut |mut resp| {
            if !is_sse(&resp) {
                return read_json(resp).map(|r| TurnOpen::Done(Box::new(r))).map_err(|e| super::attempt(e, false));
            }
            let mut reader = EventReader::new(request_id(&resp));
            loop {
                match reader.step(&mut resp, on_event) {
                    Ok(true) => return Ok(TurnOpen::Done(Box::new(reader.response()))),
                    Ok(false) if reader.emitted => return Ok(TurnOpen::Open(Box::new(PulledEvents { resp, reader }))),
                    Ok(false) => {}
                    Err(e) => return Err(super::attempt(e, reader.emitted)),
                }
            }
        })
    }

    fn pulls_raw_streams(&self) -> bool {
        true
    }

    /// The exchange of [`Provider::send_raw`] (retries included) up to the first delivered events; the rest
    /// is read by the caller through the returned [`RawStream`].
    fn open_raw_stream(
        &self,
        body: &Value,
        cancel: &CancelToken,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<RawOpen> {
        let req = self.http_request(&raw_body(body, true)?)?;
        let on_error = |s: u16, h: &[(String, String)], b: &[u8]| self.api_error(s, h, b);
        self.http.exchange(&req, cancel, &on_error, &mut |mut resp| {
            if !is_sse(&resp) {
                return read_json(resp).map(|r| RawOpen::Done(r.raw)).map_err(|e| super::attempt(e, false));
            }
            let mut reader = EventReader::new(request_id(&resp));
            let mut raw = raw_only(on_event);
            loop {
                match reader.step(&mut resp, &mut raw) {
                    Ok(true) => return Ok(RawOpen::Done(reader.acc.response())),
                    Ok(false) if reader.emitted => return Ok(RawOpen::Open(Box::new(PulledRaw { resp, reader }))),
                    Ok(false) => {}
                    Err(e) => return Err(super::attempt(e, reader.emitted)),
                }
            }
        })
    }
}

impl ResponsesProvider {
    fn http_request(&self, body: &Value) -> Result<HttpRequest> {
        let body = serde_json::to_vec(body).map_err(|e| Error::Config(format!("request not serializable: {e}")))?;
        let mut headers = vec![("content-type".to_string(), "application/json".to_string())];
        if let Some(key) = &self.api_key {
            headers.push(("authorization".to_string(), format!("Bearer {}", key.expose())));
        }
        super::override_headers(&mut headers, &self.headers);
        Ok(HttpRequest { url: format!("{}/responses", self.base_url), headers, body })
    }

    fn api_error(&self, s: u16, h: &[(String, String)], b: &[u8]) -> ApiError {
        let mut e = super::anthropic::api_error_with_hint(s, h, b, "OPENAI_API_KEY");
        if let Some(id) = crate::http::header_value(h, "x-request-id") {
            e.request_id = Some(id.to_string());
        }
        redact_key(e, self.api_key.as_ref())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::types::ToolResultBlock;

    #[test]
    fn only_own_reasoning_with_encrypted_content_goes_back_and_calls_pair_with_outputs() {
        let own = ThinkingBlock {
            thinking: "sum".into(),
            signature: String::new(),
            extra: [(
                REASONING_KEY.to_string(),
                json!({"type": "reasoning", "id": "rs_1", "summary": [],
                "encrypted_content": "ENC", "status": "completed"}),
            )]
            .into_iter()
            .collect(),
        };
        let foreign = ThinkingBlock { thinking: "anthropic".into(), signature: "sig".into(), extra: Map::new() };
        let request = Request {
            model: "gpt-5".into(),
            max_tokens: 50,
            system: Some(json!("be brief")),
            messages: vec![
                Message::user("hi"),
                Message {
                    role: Role::Assistant,
                    content: vec![
                        ContentBlock::Thinking(foreign),
                        ContentBlock::Thinking(own),
                        ContentBlock::text("let me look"),
                        ContentBlock::ToolUse(ToolUseBlock {
                            id: "call_1".into(),
                            name: "f".into(),
                            input: json!({"a": 1}),
                            extra: Map::new(),
                        }),
                    ],
                },
                Message {
                    role: Role::User,
                    content: vec![ContentBlock::ToolResult(ToolResultBlock {
                        tool_use_id: "call_1".into(),
                        content: json!("42"),
                        is_error: None,
                        extra: Map::new(),
                    })],
                },
            ]
            .into(),
            ..Default::default()
        };
        let body = render_request(&request);
        assert_eq!(body["instructions"], json!("be brief"));
        assert_eq!((&body["store"], &body["include"]), (&json!(false), &json!(["reasoning.encrypted_content"])));
        assert_eq!(
            body["input"],
            json!([
                {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "ENC"},
                {"role": "assistant", "content": "let me look"},
                {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{\"a\":1}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "42"}
            ])
        );
    }

    #[test]
    fn a_non_reasoning_model_without_thinking_asks_for_no_encrypted_content() {
        let request =
            Request { model: "gpt-4.1".into(), messages: vec![Message::user("hi")].into(), ..Default::default() };
        let body = render_request(&request);
        assert_eq!((body.get("include"), body.get("reasoning")), (None, None));
        let thinking = Request { thinking: Some(json!({"type": "enabled", "budget_tokens": 20000})), ..request };
        let body = render_request(&thinking);
        assert_eq!(body["reasoning"], json!({"effort": "high", "summary": "auto"}));
        assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    }

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
