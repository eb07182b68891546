//! OpenAI-compatible Chat Completions (OpenAI, DeepSeek, Ollama, llama.cpp, vLLM):
//! `POST {base}/chat/completions` where `base` ends in `/v1`.
//!
//! Renders the neutral request (system message, `tools` as functions, assistant `tool_calls` with string
//! arguments, one `tool` message per result) and folds JSON or streamed responses back into the neutral
//! [`MessageResponse`]. Must never: crash on invalid `arguments` JSON — it reaches the loop as the raw string,
//! which the tool registry reports to the model as an input error.

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
    ContentBlock, Message, MessageResponse, Request, Role, StopReason, TextBlock, ThinkingBlock, ToolUseBlock, Usage,
};

/// The official endpoint.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// OpenAI-compatible provider.
///
/// # Threads and cloning
/// `Send + Sync`; concurrent `send` calls share the connection pool.
pub struct OpenAiProvider {
    http: HttpClient,
    base_url: String,
    api_key: Option<Secret>,
    headers: Vec<(String, String)>,
}

impl std::fmt::Debug for OpenAiProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiProvider").field("base_url", &self.base_url).field("api_key", &self.api_key).finish()
    }
}

impl OpenAiProvider {
    /// A provider for `base_url` (ending in `/v1`).
    pub fn new(http: HttpClient, base_url: String, api_key: Option<Secret>, headers: Vec<(String, String)>) -> Self {
        OpenAiProvider { http, base_url, api_key, headers }
    }
}

/// Render a neutral request as a Chat Completions request body.
pub fn render_request(request: &Request) -> Value {
    let mut messages = Vec::new();
    if let Some(system) = &request.system {
        let text = match system {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => {
                blocks.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n")
            }
            other => other.to_string(),
        };
        messages.push(json!({"role": "system", "content": text}));
    }
    for m in &request.messages {
        render_message(m, &mut messages);
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    body.insert("messages".into(), Value::Array(messages));
    body.insert("max_tokens".into(), json!(request.max_tokens));
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| match t.server_type() {
                // A tool the API defines by its `type` goes out as given (OpenAI-compatible servers
                // have their own, e.g. `{"type": "web_search"}`); only ours become functions.
                Some(_) => serde_json::to_value(t).unwrap_or(Value::Null),
                None => json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.input_schema}}),
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(tc) = &request.tool_choice {
        let kind = tc.get("type").and_then(Value::as_str).unwrap_or("auto");
        let choice = match kind {
            "any" => json!("required"),
            "none" => json!("none"),
            "tool" => json!({"type": "function", "function": {"name": tc.get("name").cloned().unwrap_or(Value::Null)}}),
            _ => json!("auto"),
        };
        body.insert("tool_choice".into(), choice);
        if tc.get("disable_parallel_tool_use").and_then(Value::as_bool) == Some(true) {
            body.insert("parallel_tool_calls".into(), json!(false));
        }
    }
    if !request.stop_sequences.is_empty() {
        body.insert("stop".into(), json!(request.stop_sequences));
    }
    if let Some(t) = request.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if request.stream {
        body.insert("stream".into(), json!(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    for (k, v) in &request.extra {
        body.insert(k.clone(), v.clone());
    }
    // Structured output arrives in the neutral (Messages API) field: Chat Completions calls it
    // `response_format`.
    if let Some(Value::Object(mut config)) = body.remove("output_config") {
        if let Some(format) = config.remove("format") {
            let schema = format.get("schema").cloned().unwrap_or(Value::Null);
            body.insert(
                "response_format".into(),
                json!({"type": "json_schema", "json_schema": {"name": "output", "schema": schema}}),
            );
        }
        if !config.is_empty() {
            body.insert("output_config".into(), Value::Object(config));
        }
    }
    // OpenAI's reasoning models refuse `max_tokens` next to its successor: a host that passes
    // `max_completion_tokens` through `extra` gets that one alone.
    if body.contains_key("max_completion_tokens") {
        body.remove("max_tokens");
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
                        let content = if r.is_error == Some(true) { format!("Error: {text}") } else { text };
                        out.push(json!({"role": "tool", "tool_call_id": r.tool_use_id, "content": content}));
                        // Chat Completions tool messages carry text only: a result's images follow in the
                        // user message after the tool messages, labelled with their call.
                        let images: Vec<String> =
                            r.content.as_array().into_iter().flatten().filter_map(image_data_url).collect();
                        if !images.is_empty() {
                            let label = format!(
                                "(the image{} returned by tool call {})",
                                if images.len() == 1 { "" } else { "s" },
                                r.tool_use_id
                            );
                            parts.push(json!({"type": "text", "text": label}));
                            parts.extend(
                                images.into_iter().map(|url| json!({"type": "image_url", "image_url": {"url": url}})),
                            );
                        }
                    }
                    ContentBlock::Text(t) => parts.push(json!({"type": "text", "text": t.text})),
                    ContentBlock::Unknown(v) => {
                        if let Some(url) = image_data_url(v) {
                            parts.push(json!({"type": "image_url", "image_url": {"url": url}}));
                        }
                    }
                    _ => {}
                }
            }
            if parts.is_empty() {
                return;
            }
            let all_text = parts.iter().all(|p| p["type"] == "text");
            let content = if all_text {
                json!(parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n"))
            } else {
                Value::Array(parts)
            };
            out.push(json!({"role": "user", "content": content}));
        }
        Role::Assistant => {
            let text: String = m
                .content
                .iter()
                .filter_map(|b| if let ContentBlock::Text(t) = b { Some(t.text.as_str()) } else { None })
                .collect();
            let calls: Vec<Value> = m
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::ToolUse(t) => Some(json!({"id": t.id, "type": "function", "function": {
                        "name": t.name,
                        // Invalid arguments arrived as a raw string: send back exactly what the model wrote.
                        "arguments": match &t.input { Value::String(s) => s.clone(), v => v.to_string() }}})),
                    _ => None,
                })
                .collect();
            let mut msg = Map::new();
            msg.insert("role".into(), json!("assistant"));
            msg.insert("content".into(), if text.is_empty() && !calls.is_empty() { Value::Null } else { json!(text) });
            if !calls.is_empty() {
                msg.insert("tool_calls".into(), Value::Array(calls));
            }
            out.push(Value::Object(msg));
        }
    }
}

fn image_data_url(block: &Value) -> Option<String> {
    if block.get("type")?.as_str()? != "image" {
        return None;
    }
    let src = block.get("source")?;
    match src.get("type")?.as_str()? {
        "base64" => Some(format!("data:{};base64,{}", src.get("media_type")?.as_str()?, src.get("data")?.as_str()?)),
        "url" => Some(src.get("url")?.as_str()?.to_string()),
        _ => None,
    }
}

/// Map a `finish_reason` onto the neutral stop reasons (`stop` with tool calls counts as `tool_use`,
/// as some compatible servers send it that way).
pub fn map_finish_reason(reason: Option<&str>, has_tool_calls: bool) -> Option<StopReason> {
    Some(match reason? {
        "tool_calls" | "function_call" => StopReason::ToolUse,
        "stop" if has_tool_calls => StopReason::ToolUse,
        "stop" => StopReason::EndTurn,
        "length" => StopReason::MaxTokens,
        "content_filter" => StopReason::Refusal,
        other => StopReason::Other(other.to_string()),
    })
}

/// Map OpenAI usage (`prompt_tokens` includes cached tokens) onto the neutral [`Usage`].
pub fn map_usage(u: &Value) -> Usage {
    let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    let cached = u.get("prompt_tokens_details").and_then(|d| d.get("cached_tokens")).and_then(Value::as_u64);
    Usage {
        input_tokens: n(u.get("prompt_tokens")).saturating_sub(cached.unwrap_or(0)),
        output_tokens: n(u.get("completion_tokens")),
        cache_read_input_tokens: cached,
        ..Default::default()
    }
}

/// The reasoning text of a message or delta: `reasoning_content` (DeepSeek, vLLM) or `reasoning` (Ollama,
/// OpenRouter). Servers may send one as `null` next to the other, so take the first that is a string.
fn reasoning_of(v: &Value) -> Option<&str> {
    v.get("reasoning_content").and_then(Value::as_str).or_else(|| v.get("reasoning").and_then(Value::as_str))
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

/// Convert a `chat.completion` object into the neutral message.
pub fn parse_completion(raw: &Value) -> std::result::Result<MessageResponse, String> {
    let choice = raw.get("choices").and_then(|c| c.get(0)).ok_or("response has no choices[0]")?;
    let msg = choice.get("message").ok_or("choices[0] has no message")?;
    let mut content = Vec::new();
    let reasoning = reasoning_of(msg);
    if let Some(r) = reasoning.filter(|r| !r.is_empty()) {
        content.push(ContentBlock::Thinking(ThinkingBlock { thinking: r.to_string(), ..Default::default() }));
    }
    if let Some(t) = msg.get("content").and_then(Value::as_str).filter(|t| !t.is_empty()) {
        content.push(ContentBlock::text(t));
    }
    let calls = msg.get("tool_calls").and_then(Value::as_array).cloned().unwrap_or_default();
    for c in &calls {
        let f = c.get("function").cloned().unwrap_or(Value::Null);
        content.push(tool_use(
            c.get("id").and_then(Value::as_str).unwrap_or(""),
            f.get("name").and_then(Value::as_str).unwrap_or(""),
            f.get("arguments").and_then(Value::as_str).unwrap_or(""),
        ));
    }
    Ok(MessageResponse {
        id: raw.get("id").and_then(Value::as_str).unwrap_or("").to_string(),
        model: raw.get("model").and_then(Value::as_str).unwrap_or("").to_string(),
        content,
        stop_reason: map_finish_reason(choice.get("finish_reason").and_then(Value::as_str), !calls.is_empty()),
        usage: raw.get("usage").map(map_usage).unwrap_or_default(),
        ..Default::default()
    })
}

/// Folds streamed `chat.completion.chunk`s into a neutral message and a reassembled `chat.completion`.
#[derive(Debug, Default)]
pub struct ChunkAccumulator {
    id: String,
    model: String,
    created: Value,
    system_fingerprint: Option<Value>,
    reasoning: Option<String>,
    text: Option<String>,
    /// (wire index, id, name, arguments)
    calls: Vec<(u64, String, String, String)>,
    /// Neutral block order as first seen: 'r' reasoning, 't' text, or a call's wire index.
    order: Vec<BlockKey>,
    finish_reason: Option<String>,
    usage: Option<Value>,
    done: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum BlockKey {
    Reasoning,
    Text,
    Call(u64),
}

impl ChunkAccumulator {
    fn block_index(&mut self, key: BlockKey) -> usize {
        match self.order.iter().position(|k| *k == key) {
            Some(i) => i,
            None => {
                self.order.push(key);
                self.order.len() - 1
            }
        }
    }

    /// Apply one chunk (already parsed). A chunk carrying `error` ends the stream with that error.
    pub fn apply(&mut self, chunk: &Value, on_event: &mut dyn FnMut(StreamEvent)) -> std::result::Result<(), ApiError> {
        if let Some(err) = chunk.get("error") {
            let error_type =
                err.get("type").or_else(|| err.get("code")).and_then(Value::as_str).unwrap_or("").to_string();
            return Err(ApiError {
                kind: ApiErrorKind::classify(200, &error_type),
                status: 200,
                error_type,
                message: err.get("message").and_then(Value::as_str).unwrap_or("error in stream").to_string(),
                request_id: None,
                retry_after: None,
                hint: None,
            });
        }
        let s = |k: &str| chunk.get(k).and_then(Value::as_str).map(str::to_string);
        if self.id.is_empty() {
            self.id = s("id").unwrap_or_default();
            self.model = s("model").unwrap_or_default();
            self.created = chunk.get("created").cloned().unwrap_or(Value::Null);
        }
        if let Some(fp) = chunk.get("system_fingerprint").filter(|v| !v.is_null()) {
            self.system_fingerprint = Some(fp.clone());
        }
        if let Some(u) = chunk.get("usage").filter(|u| !u.is_null()) {
            self.usage = Some(u.clone());
            on_event(StreamEvent::Usage(map_usage(u)));
        }
        let Some(choice) = chunk.get("choices").and_then(|c| c.get(0)) else { return Ok(()) };
        if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(r.to_string());
        }
        let Some(delta) = choice.get("delta") else { return Ok(()) };
        let reasoning = reasoning_of(delta);
        if let Some(r) = reasoning.filter(|r| !r.is_empty()) {
            let index = self.block_index(BlockKey::Reasoning);
            self.reasoning.get_or_insert_with(String::new).push_str(r);
            on_event(StreamEvent::ThinkingDelta { index, thinking: r.to_string() });
        }
        if let Some(t) = delta.get("content").and_then(Value::as_str).filter(|t| !t.is_empty()) {
            let index = self.block_index(BlockKey::Text);
            self.text.get_or_insert_with(String::new).push_str(t);
            on_event(StreamEvent::TextDelta { index, text: t.to_string() });
        }
        for call in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
            let wire = call.get("index").and_then(Value::as_u64).unwrap_or(0);
            let f = call.get("function");
            let name = f.and_then(|f| f.get("name")).and_then(Value::as_str);
            let args = f.and_then(|f| f.get("arguments")).and_then(Value::as_str).unwrap_or("");
            let id = call.get("id").and_then(Value::as_str);
            let index = self.block_index(BlockKey::Call(wire));
            let pos = match self.calls.iter().position(|c| c.0 == wire) {
                Some(p) => p,
                None => {
                    self.calls.push((wire, String::new(), String::new(), String::new()));
                    self.calls.len() - 1
                }
            };
            let entry = &mut self.calls[pos];
            let started = entry.1.is_empty() && entry.2.is_empty();
            if let Some(id) = id {
                entry.1 = id.to_string();
            }
            if let Some(n) = name {
                // The name comes whole in the first fragment; some servers repeat it in every fragment.
                if entry.2.is_empty() || n.starts_with(entry.2.as_str()) {
                    entry.2 = n.to_string();
                } else {
                    entry.2.push_str(n);
                }
            }
            if started && (id.is_some() || name.is_some()) {
                on_event(StreamEvent::ToolUseStart { index, id: entry.1.clone(), name: entry.2.clone() });
            }
            if !args.is_empty() {
                entry.3.push_str(args);
                on_event(StreamEvent::ToolInputDelta { index, partial_json: args.to_string() });
            }
        }
        Ok(())
    }

    /// The neutral message so far.
    pub fn snapshot(&self) -> MessageResponse {
        let mut content = Vec::new();
        for key in &self.order {
            match key {
                BlockKey::Reasoning => content.push(ContentBlock::Thinking(ThinkingBlock {
                    thinking: self.reasoning.clone().unwrap_or_default(),
                    ..Default::default()
                })),
                BlockKey::Text => content.push(ContentBlock::Text(TextBlock {
                    text: self.text.clone().unwrap_or_default(),
                    ..Default::default()
                })),
                BlockKey::Call(w) => {
                    if let Some(c) = self.calls.iter().find(|c| c.0 == *w) {
                        content.push(tool_use(&c.1, &c.2, &c.3));
                    }
                }
            }
        }
        MessageResponse {
            id: self.id.clone(),
            model: self.model.clone(),
            content,
            stop_reason: map_finish_reason(self.finish_reason.as_deref(), !self.calls.is_empty()),
            usage: self.usage.as_ref().map(map_usage).unwrap_or_default(),
            ..Default::default()
        }
    }

    /// The stream reassembled as the `chat.completion` object the JSON call would have returned.
    pub fn completion(&self) -> Value {
        let mut message = Map::new();
        message.insert("role".into(), json!("assistant"));
        message.insert("content".into(), self.text.clone().map(Value::String).unwrap_or(Value::Null));
        if let Some(r) = &self.reasoning {
            message.insert("reasoning_content".into(), json!(r));
        }
        if !self.calls.is_empty() {
            let calls: Vec<Value> = self
                .calls
                .iter()
                .map(|c| json!({"id": c.1, "type": "function", "function": {"name": c.2, "arguments": c.3}}))
                .collect();
            message.insert("tool_calls".into(), Value::Array(calls));
        }
        let mut out = Map::new();
        out.insert("id".into(), json!(self.id));
        out.insert("object".into(), json!("chat.completion"));
        out.insert("created".into(), self.created.clone());
        out.insert("model".into(), json!(self.model));
        out.insert(
            "choices".into(),
            json!([{"index": 0, "message": Value::Object(message), "finish_reason": self.finish_reason}]),
        );
        if let Some(u) = &self.usage {
            out.insert("usage".into(), u.clone());
        }
        if let Some(fp) = &self.system_fingerprint {
            out.insert("system_fingerprint".into(), fp.clone());
        }
        Value::Object(out)
    }
}

impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        super::Protocol::OpenAi.name()
    }

    /// OpenAI's own endpoint takes `response_format` with a JSON schema; compatible local servers vary, so
    /// they get the final-answer tool (`output_mode: "native"` asks them for `response_format` anyway).
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
            read_raw(resp, on_event, &mut emitted).map_err(|e| super::attempt(e, emitted))
        })
    }

    fn pulls_raw_streams(&self) -> bool {
        true
    }

    /// The exchange of [`Provider::send_raw`] (retries included) up to the first delivered chunks; the rest
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
                let mut emitted = false;
                return read_raw(resp, on_event, &mut emitted)
                    .map(RawOpen::Done)
                    .map_err(|e| super::attempt(e, emitted));
            }
            let mut reader = ChunkReader::new(RawFold::default(), request_id(&resp));
            loop {
                match reader.step(&mut resp, on_event) {
                    Ok(true) => return Ok(RawOpen::Done(reader.fold.whole.completion())),
                    Ok(false) if reader.emitted => return Ok(RawOpen::Open(Box::new(PulledRaw { resp, reader }))),
                    Ok(false) => {}
                    Err(e) => return Err(super::attempt(e, reader.emitted)),
                }
            }
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
                let mut emitted = false;
                return read(resp, on_event, &mut emitted)
                    .map(|r| TurnOpen::Done(Box::new(r)))
                    .map_err(|e| super::attempt(e, emitted));
            }
            let mut reader = ChunkReader::new(ChunkAccumulator::default(), request_id(&resp));
            loop {
                match reader.step(&mut resp, on_event) {
                    Ok(true) => return Ok(TurnOpen::Done(Box::new(reader.response()))),
                    Ok(false) if reader.emitted => {
                        return Ok(TurnOpen::Open(Box::new(PulledChunks { resp, reader })));
                    }
                    Ok(false) => {}
                    Err(e) => return Err(super::attempt(e, reader.emitted)),
                }
            }
        })
    }
}

/// A raw Chat Completions stream under way, pulled by the caller (see [`Provider::open_raw_stream`]).
struct PulledRaw {
    resp: HttpResponse,
    reader: ChunkReader<RawFold>,
}

impl RawStream for PulledRaw {
    fn step(&mut self, on_event: &mut dyn FnMut(StreamEvent)) -> Result<Option<Value>> {
        Ok(self.reader.step(&mut self.resp, on_event)?.then(|| self.reader.fold.whole.completion()))
    }

    /// The text of each chunk is its first choice's `delta.content` (the chunks come as raw events only).
    fn step_text(&mut self, text: &mut String) -> Result<Option<Value>> {
        self.step(&mut |ev| {
            if let StreamEvent::Raw { data, .. } = ev
                && let Some(t) = data
                    .get("choices")
                    .and_then(|c| c.get(0))
                    .and_then(|c| c.get("delta"))
                    .and_then(|d| d.get("content"))
                    .and_then(Value::as_str)
            {
                text.push_str(t);
            }
        })
    }
}

/// A raw request body as sent: `stream` set, or `stream` and `stream_options` removed.
fn raw_body(body: &Value, stream: bool) -> Result<Value> {
    let Some(obj) = body.as_object() else {
        return Err(Error::Config("the request must be an object (a Chat Completions request body)".into()));
    };
    let mut obj = obj.clone();
    if stream {
        obj.insert("stream".into(), Value::Bool(true));
    } else {
        obj.remove("stream");
        obj.remove("stream_options");
    }
    Ok(Value::Object(obj))
}

/// A Chat Completions stream under way, pulled by the caller (see [`Provider::open_stream`]).
struct PulledChunks {
    resp: HttpResponse,
    reader: ChunkReader<ChunkAccumulator>,
}

impl TurnStream for PulledChunks {
    fn step(&mut self, on_event: &mut dyn FnMut(StreamEvent)) -> Result<Option<Response>> {
        Ok(self.reader.step(&mut self.resp, on_event)?.then(|| self.reader.response()))
    }
}

impl OpenAiProvider {
    fn http_request(&self, body: &Value) -> Result<HttpRequest> {
        let body = serde_json::to_vec(body).map_err(|e| Error::Config(format!("request not serializable: {e}")))?;
        let mut headers = vec![("content-type".to_string(), "application/json".to_string())];
        if let Some(key) = &self.api_key {
            headers.push(("authorization".to_string(), format!("Bearer {}", key.expose())));
        }
        super::override_headers(&mut headers, &self.headers);
        Ok(HttpRequest { url: format!("{}/chat/completions", self.base_url), headers, body })
    }

    fn api_error(&self, s: u16, h: &[(String, String)], b: &[u8]) -> ApiError {
        let mut e = super::anthropic::api_error_with_hint(s, h, b, "OPENAI_API_KEY");
        // OpenAI's header is x-request-id (as on success below); a proxy's request-id must not win.
        if let Some(id) = crate::http::header_value(h, "x-request-id") {
            e.request_id = Some(id.to_string());
        }
        redact_key(e, self.api_key.as_ref())
    }
}

/// One choice being rebuilt: its index, the choice object, and its tool calls by stream index.
type RawChoice = (u64, Map<String, Value>, Vec<(u64, Map<String, Value>)>);

/// Folds `chat.completion.chunk`s into the `chat.completion` they make up, in the API's own shape: every
/// choice (`n > 1`), `content` and `refusal` as the deltas give them (`""` stays `""`, never-sent stays
/// absent, `null` stays `null`), tool calls with their argument strings joined, `logprobs` joined, and the
/// other fields of the chunks and deltas kept.
#[derive(Debug, Default)]
pub struct CompletionAccumulator {
    top: Map<String, Value>,
    /// (choice index, choice object, the message's tool calls by their stream index).
    choices: Vec<RawChoice>,
    /// Whether `[DONE]` arrived (set by the reader).
    pub done: bool,
}

impl CompletionAccumulator {
    /// Apply one chunk.
    pub fn apply(&mut self, chunk: &Value) {
        let Some(obj) = chunk.as_object() else { return };
        for (k, v) in obj {
            match k.as_str() {
                "choices" | "object" => {}
                "usage" if v.is_null() => {}
                _ => {
                    self.top.insert(k.clone(), v.clone());
                }
            }
        }
        for (position, c) in obj.get("choices").and_then(Value::as_array).into_iter().flatten().enumerate() {
            let index = c.get("index").and_then(Value::as_u64).unwrap_or(position as u64);
            let slot = match self.choices.iter().position(|(i, _, _)| *i == index) {
                Some(p) => p,
                None => {
                    let mut choice = Map::new();
                    choice.insert("index".into(), json!(index));
                    choice.insert("message".into(), json!({"role": "assistant"}));
                    choice.insert("logprobs".into(), Value::Null);
                    choice.insert("finish_reason".into(), Value::Null);
                    self.choices.push((index, choice, Vec::new()));
                    self.choices.len() - 1
                }
            };
            let (_, choice, calls) = &mut self.choices[slot];
            if let Some(delta) = c.get("delta").and_then(Value::as_object) {
                let Some(message) = choice.get_mut("message").and_then(Value::as_object_mut) else { continue };
                for (k, v) in delta {
                    match (k.as_str(), v) {
                        ("tool_calls", Value::Array(frags)) => {
                            for frag in frags {
                                merge_tool_call(calls, frag);
                            }
                        }
                        (_, Value::String(more)) if k != "role" => match message.get_mut(k) {
                            Some(Value::String(existing)) => existing.push_str(more),
                            _ => {
                                message.insert(k.clone(), v.clone());
                            }
                        },
                        (_, Value::Null) if message.contains_key(k) => {}
                        _ => {
                            message.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
            for (k, v) in c.as_object().into_iter().flatten() {
                match (k.as_str(), v) {
                    ("index" | "delta", _) | (_, Value::Null) => {}
                    ("logprobs", Value::Object(more)) => match choice.get_mut("logprobs") {
                        Some(Value::Object(existing)) => {
                            for (lk, lv) in more {
                                match (existing.get_mut(lk), lv) {
                                    (Some(Value::Array(a)), Value::Array(b)) => a.extend(b.iter().cloned()),
                                    _ => {
                                        existing.insert(lk.clone(), lv.clone());
                                    }
                                }
                            }
                        }
                        _ => {
                            choice.insert(k.clone(), v.clone());
                        }
                    },
                    _ => {
                        choice.insert(k.clone(), v.clone());
                    }
                }
            }
        }
    }

    /// Whether every choice has a finish_reason (a stream that ends without `[DONE]` is still whole then).
    pub fn finished(&self) -> bool {
        !self.choices.is_empty()
            && self.choices.iter().all(|(_, c, _)| c.get("finish_reason").is_some_and(|f| !f.is_null()))
    }

    /// The `chat.completion` so far.
    pub fn completion(&self) -> Value {
        let mut out = Map::new();
        for k in ["id"] {
            if let Some(v) = self.top.get(k) {
                out.insert(k.into(), v.clone());
            }
        }
        out.insert("object".into(), json!("chat.completion"));
        for k in ["created", "model"] {
            if let Some(v) = self.top.get(k) {
                out.insert(k.into(), v.clone());
            }
        }
        let mut choices: Vec<&RawChoice> = self.choices.iter().collect();
        choices.sort_by_key(|(i, _, _)| *i);
        let choices: Vec<Value> = choices
            .into_iter()
            .map(|(_, choice, calls)| {
                let mut choice = choice.clone();
                if !calls.is_empty() {
                    if let Some(Value::Object(m)) = choice.get_mut("message") {
                        let mut calls = calls.clone();
                        calls.sort_by_key(|(i, _)| *i);
                        m.insert(
                            "tool_calls".into(),
                            Value::Array(calls.into_iter().map(|(_, c)| Value::Object(c)).collect()),
                        );
                    }
                }
                Value::Object(choice)
            })
            .collect();
        out.insert("choices".into(), Value::Array(choices));
        for (k, v) in &self.top {
            if !out.contains_key(k) {
                out.insert(k.clone(), v.clone());
            }
        }
        Value::Object(out)
    }
}

/// Fold one `tool_calls` fragment: the first of an index brings id, type and name; later ones append
/// `arguments` (a name repeated in every fragment, as some compatible servers send it, is not doubled).
fn merge_tool_call(calls: &mut Vec<(u64, Map<String, Value>)>, frag: &Value) {
    let Some(f) = frag.as_object() else { return };
    let index = f.get("index").and_then(Value::as_u64).unwrap_or(calls.len() as u64);
    let pos = match calls.iter().position(|(i, _)| *i == index) {
        Some(p) => p,
        None => {
            calls.push((index, Map::new()));
            calls.len() - 1
        }
    };
    let call = &mut calls[pos].1;
    for (k, v) in f {
        match (k.as_str(), v) {
            ("index", _) | (_, Value::Null) => {}
            ("function", Value::Object(func)) => {
                let entry = call.entry("function").or_insert_with(|| json!({}));
                let Some(existing) = entry.as_object_mut() else { continue };
                for (fk, fv) in func {
                    match (fk.as_str(), existing.get_mut(fk), fv) {
                        ("arguments", Some(Value::String(a)), Value::String(b)) => a.push_str(b),
                        (_, Some(Value::String(a)), Value::String(b)) if a == b => {}
                        (_, Some(Value::String(a)), Value::String(b)) if fk != "name" => a.push_str(b),
                        (_, Some(_), _) if fk == "name" => {}
                        _ => {
                            existing.insert(fk.clone(), fv.clone());
                        }
                    }
                }
            }
            _ => {
                if !call.contains_key(k) {
                    call.insert(k.clone(), v.clone());
                }
            }
        }
    }
}

/// Read one 2xx response (JSON or SSE) into the turn; `emitted` tells whether any event reached the caller.
fn read(resp: HttpResponse, on_event: &mut dyn FnMut(StreamEvent), emitted: &mut bool) -> Result<Response> {
    let mut acc = ChunkAccumulator::default();
    let (json, request_id) = read_body(resp, &mut acc, on_event, emitted)?;
    match json {
        Some(raw) => {
            let message = parse_completion(&raw)
                .map_err(|message| Error::InvalidResponse { message, request_id: request_id.clone() })?;
            Ok(Response { message, raw, request_id })
        }
        None => Ok(Response { message: acc.snapshot(), raw: acc.completion(), request_id }),
    }
}

/// Read one 2xx response of a raw request: the JSON body as received, or the stream's chunks (each
/// emitted as it is decoded) folded into the `chat.completion` they make up.
fn read_raw(resp: HttpResponse, on_event: &mut dyn FnMut(StreamEvent), emitted: &mut bool) -> Result<Value> {
    let mut fold = RawFold::default();
    let (json, _) = read_body(resp, &mut fold, on_event, emitted)?;
    Ok(json.unwrap_or_else(|| fold.whole.completion()))
}

/// What a Chat Completions stream is folded into: the typed turn ([`ChunkAccumulator`], for `send`) or the
/// raw `chat.completion` ([`RawFold`], for `send_raw`). [`read_body`] is the one loop that drives either.
trait ChunkFold {
    /// The event name of a [`StreamEvent::Raw`] whose SSE frame names none.
    const DEFAULT_EVENT: &'static str;
    /// Apply one parsed chunk, typed events to `on_event`; a chunk carrying `error` comes back as that error.
    fn fold(&mut self, chunk: &Value, on_event: &mut dyn FnMut(StreamEvent)) -> std::result::Result<(), ApiError>;
    /// The neutral message so far (the partial of an interrupted stream).
    fn partial(&self) -> MessageResponse;
    /// `[DONE]` arrived.
    fn set_done(&mut self);
    /// Whether the turn is whole: `[DONE]` arrived, or the body `ended` with the turn finished (servers that
    /// omit `[DONE]` still end the body).
    fn whole(&self, ended: bool) -> bool;
}

impl ChunkFold for ChunkAccumulator {
    const DEFAULT_EVENT: &'static str = "message";
    fn fold(&mut self, chunk: &Value, on_event: &mut dyn FnMut(StreamEvent)) -> std::result::Result<(), ApiError> {
        self.apply(chunk, on_event)
    }
    fn partial(&self) -> MessageResponse {
        self.snapshot()
    }
    fn set_done(&mut self) {
        self.done = true;
    }
    fn whole(&self, ended: bool) -> bool {
        self.done || (ended && self.finish_reason.is_some())
    }
}

/// The raw fold: every chunk into the whole `chat.completion`, and into a typed accumulator (its events
/// dropped) that maps error chunks and keeps the partial message an interrupted stream reports.
#[derive(Default)]
struct RawFold {
    whole: CompletionAccumulator,
    typed: ChunkAccumulator,
}

impl ChunkFold for RawFold {
    const DEFAULT_EVENT: &'static str = "chunk";
    fn fold(&mut self, chunk: &Value, _: &mut dyn FnMut(StreamEvent)) -> std::result::Result<(), ApiError> {
        self.typed.apply(chunk, &mut |_| {})?;
        self.whole.apply(chunk);
        Ok(())
    }
    fn partial(&self) -> MessageResponse {
        self.typed.snapshot()
    }
    fn set_done(&mut self) {
        self.whole.done = true;
    }
    fn whole(&self, ended: bool) -> bool {
        self.whole.done || (ended && self.whole.finished())
    }
}

/// The request id of a response (OpenAI's `x-request-id`, or `request-id`).
fn request_id(resp: &HttpResponse) -> Option<String> {
    resp.header("x-request-id").or_else(|| resp.header("request-id")).map(str::to_string)
}

/// Whether a response is an SSE stream (else a JSON body).
fn is_sse(resp: &HttpResponse) -> bool {
    resp.header("content-type").is_some_and(|c| c.starts_with("text/event-stream"))
}

/// Read one 2xx response: a JSON body comes back parsed (`Some`); an SSE stream is folded chunk by chunk into
/// `fold` as the bytes arrive (`None` once it is whole), each chunk's typed events and then its `Raw` event
/// going to `on_event`. Also returns the request id. `emitted` tells whether any event reached the caller.
fn read_body<F: ChunkFold + Default>(
    mut resp: HttpResponse,
    fold: &mut F,
    on_event: &mut dyn FnMut(StreamEvent),
    emitted: &mut bool,
) -> Result<(Option<Value>, Option<String>)> {
    let request_id = request_id(&resp);
    if !is_sse(&resp) {
        let body = resp.read_all().map_err(|e| body_error(e, MessageResponse::default(), false))?;
        let raw: Value = serde_json::from_slice(&body).map_err(|e| Error::InvalidResponse {
            message: format!("response is not JSON ({e}): {}", String::from_utf8_lossy(&body[..body.len().min(200)])),
            request_id: request_id.clone(),
        })?;
        return Ok((Some(raw), request_id));
    }
    let mut reader = ChunkReader::new(std::mem::take(fold), request_id);
    let whole = loop {
        let step = reader.step(&mut resp, on_event);
        *emitted = reader.emitted;
        match step {
            Ok(true) => break Ok(()),
            Ok(false) => {}
            Err(e) => break Err(e),
        }
    };
    *fold = reader.fold;
    whole.map(|()| (None, reader.request_id))
}

/// A Chat Completions stream being read, one network read per [`ChunkReader::step`]: what [`read_body`] loops
/// over, and what a caller that drives the stream itself ([`PulledChunks`]) keeps between reads.
struct ChunkReader<F> {
    fold: F,
    decoder: SseDecoder,
    /// The events of the last read (kept for its buffer).
    events: Vec<SseEvent>,
    request_id: Option<String>,
    /// Whether any event reached the caller (after which nothing may be retried).
    emitted: bool,
}

impl<F: ChunkFold> ChunkReader<F> {
    fn new(fold: F, request_id: Option<String>) -> Self {
        ChunkReader { fold, decoder: SseDecoder::new(), events: Vec::new(), request_id, emitted: false }
    }

    /// Wait for the next bytes of `resp` and fold the chunks they complete (typed events, then the `Raw`
    /// one, to `on_event`); `true` once the turn is whole (`false`: read again). An error ends the stream.
    fn step(&mut self, resp: &mut HttpResponse, on_event: &mut dyn FnMut(StreamEvent)) -> Result<bool> {
        let request_id = &self.request_id;
        let invalid = |message: String| Error::InvalidResponse { message, request_id: request_id.clone() };
        let chunk = resp.next_chunk().map_err(|e| body_error(e, self.fold.partial(), self.emitted))?;
        let finished = chunk.is_none();
        match chunk {
            Some(bytes) => self.decoder.feed(&bytes, &mut self.events),
            None => self.events.extend(self.decoder.finish()),
        }
        let (fold, emitted) = (&mut self.fold, &mut self.emitted);
        for ev in self.events.drain(..) {
            let data = ev.data.trim();
            if data.is_empty() {
                continue;
            }
            if data == "[DONE]" {
                // The end of the stream: anything a proxy appends after the sentinel is not ours to parse.
                fold.set_done();
                break;
            }
            let parsed: Value = match serde_json::from_str(data) {
                Ok(v) => v,
                Err(e) => {
                    let message = format!("stream chunk is not JSON: {e}");
                    return Err(cut_short(message, fold.partial(), *emitted, invalid));
                }
            };
            let step = fold.fold(&parsed, &mut |e| {
                *emitted = true;
                on_event(e)
            });
            if let Err(mut api) = step {
                api.request_id = request_id.clone();
                return Err(if *emitted {
                    Error::StreamInterrupted {
                        message: format!("error in stream: {}", api.message),
                        partial: Box::new(fold.partial()),
                        api: Some(Box::new(api)),
                    }
                } else {
                    Error::Api(Box::new(api))
                });
            }
            *emitted = true;
            let event = ev.event.clone().unwrap_or_else(|| F::DEFAULT_EVENT.into());
            on_event(StreamEvent::Raw { event, data: parsed });
        }
        if fold.whole(finished) {
            return Ok(true);
        }
        if finished {
            let message = "the stream ended before [DONE]".to_string();
            return Err(cut_short(message, fold.partial(), *emitted, |message| Error::Connection { message }));
        }
        Ok(false)
    }
}

impl ChunkReader<ChunkAccumulator> {
    /// The whole turn (once [`ChunkReader::step`] said so).
    fn response(&self) -> Response {
        Response { message: self.fold.snapshot(), raw: self.fold.completion(), request_id: self.request_id.clone() }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_name_repeated_in_every_fragment_is_not_doubled() {
        let mut acc = ChunkAccumulator::default();
        let frag = |args: &str| {
            json!({"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": args}}
            ]}}]})
        };
        for piece in ["{\"city\":", " \"Paris\"}"] {
            acc.apply(&frag(piece), &mut |_| {}).unwrap();
        }
        let calls = acc.snapshot();
        let ContentBlock::ToolUse(t) = &calls.content[0] else { panic!("{calls:?}") };
        assert_eq!((t.name.as_str(), &t.input), ("get_weather", &json!({"city": "Paris"})));
    }

    #[test]
    fn completion_accumulator_keeps_every_choice_refusal_and_tool_calls() {
        let mut acc = CompletionAccumulator::default();
        let chunk = |choices: Value| json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": choices});
        for c in [
            chunk(
                json!([{"index": 0, "delta": {"role": "assistant", "content": "", "refusal": null}, "finish_reason": null}]),
            ),
            chunk(json!([{"index": 1, "delta": {"role": "assistant", "content": null}, "finish_reason": null}])),
            chunk(json!([{"index": 0, "delta": {"refusal": "No, "}}])),
            chunk(json!([{"index": 0, "delta": {"refusal": "sorry."}}])),
            chunk(
                json!([{"index": 1, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}}]}}]),
            ),
            chunk(
                json!([{"index": 1, "delta": {"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": "{\"a\":"}}]}}]),
            ),
            chunk(json!([{"index": 1, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}}])),
            chunk(json!([{"index": 0, "delta": {}, "finish_reason": "stop"}])),
            chunk(json!([{"index": 1, "delta": {}, "finish_reason": "tool_calls"}])),
        ] {
            acc.apply(&c);
        }
        assert!(acc.finished());
        assert_eq!(
            acc.completion(),
            json!({"id": "c", "object": "chat.completion", "created": 1, "model": "m", "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "", "refusal": "No, sorry."}, "logprobs": null, "finish_reason": "stop"},
                {"index": 1, "message": {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
                 "logprobs": null, "finish_reason": "tool_calls"}
            ]})
        );
    }

    #[test]
    fn max_completion_tokens_in_extra_replaces_max_tokens() {
        let mut req = Request {
            model: "o3".into(),
            max_tokens: 100,
            messages: vec![Message::user("hi")].into(),
            ..Default::default()
        };
        assert_eq!(render_request(&req)["max_tokens"], json!(100));
        req.extra.insert("max_completion_tokens".into(), json!(4000));
        let body = render_request(&req);
        assert_eq!((body.get("max_tokens"), &body["max_completion_tokens"]), (None, &json!(4000)));
    }
}
