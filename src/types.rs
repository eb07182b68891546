//! Wire types in the exact JSON shapes of the Anthropic Messages API, which is also tooloop's neutral form.
//!
//! Everything here must survive parse → serialize unchanged: unknown block kinds are kept as raw JSON,
//! unknown fields of known blocks are kept in an `extra` map, unknown stop reasons keep their string.
//! The OpenAI-compatible provider converts to and from these shapes at its edge.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

mod messages;
pub use messages::Messages;

/// Who speaks a message in the API view.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The user (and tool results, on Anthropic).
    User,
    /// The model.
    #[default]
    Assistant,
}

/// One message of the API view: a role and its content blocks.
///
/// On input `content` may be a plain string (it becomes one text block); it is always serialized as an array.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who speaks.
    pub role: Role,
    /// The blocks, in order.
    #[serde(deserialize_with = "de_content")]
    pub content: Vec<ContentBlock>,
}

impl Message {
    /// A user message holding one text block.
    pub fn user(text: impl Into<String>) -> Self {
        Message { role: Role::User, content: vec![ContentBlock::text(text)] }
    }
    /// An assistant message holding one text block.
    pub fn assistant(text: impl Into<String>) -> Self {
        Message { role: Role::Assistant, content: vec![ContentBlock::text(text)] }
    }
}

fn de_content<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ContentBlock>, D::Error> {
    match Value::deserialize(d)? {
        Value::String(s) => Ok(vec![ContentBlock::text(s)]),
        Value::Array(items) => {
            items.into_iter().map(|v| ContentBlock::from_value(v).map_err(D::Error::custom)).collect()
        }
        other => Err(D::Error::custom(format!("message content must be a string or an array, got {other}"))),
    }
}

/// A `text` block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct TextBlock {
    /// The text.
    pub text: String,
    /// Citations, when the API attached some (kept as raw JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub citations: Option<Vec<Value>>,
    /// Fields tooloop does not model (e.g. `cache_control`), kept verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A `thinking` block: must be sent back unmodified, signature included.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct ThinkingBlock {
    /// The model's reasoning text.
    pub thinking: String,
    /// The opaque signature that authenticates the thinking text.
    #[serde(default)]
    pub signature: String,
    /// Unmodelled fields, verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A `redacted_thinking` block: encrypted reasoning, sent back unmodified.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct RedactedThinkingBlock {
    /// The encrypted payload.
    pub data: String,
    /// Unmodelled fields, verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A `tool_use` block: the model asks for a tool call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct ToolUseBlock {
    /// The call id, answered by a `tool_result` with the same `tool_use_id`.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments (an object on the Anthropic wire; whatever arrived otherwise).
    #[serde(default = "empty_object")]
    pub input: Value,
    /// Unmodelled fields, verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

/// A `tool_result` block: the answer to one `tool_use`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct ToolResultBlock {
    /// The id of the `tool_use` this answers.
    pub tool_use_id: String,
    /// A string, or an array of content blocks (text, image, …).
    #[serde(default = "empty_string_value")]
    pub content: Value,
    /// `Some(true)` when the tool failed; the model reads `content` as the error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// Unmodelled fields, verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn empty_string_value() -> Value {
    Value::String(String::new())
}

impl ToolResultBlock {
    /// The result's text: the string content, or its text blocks joined with newlines.
    pub fn text(&self) -> String {
        match &self.content {
            Value::String(s) => s.clone(),
            Value::Array(items) => {
                items.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n")
            }
            other => other.to_string(),
        }
    }
}

/// One content block. Kinds tooloop does not know are kept whole in [`ContentBlock::Unknown`].
#[derive(Clone, Debug, PartialEq)]
pub enum ContentBlock {
    /// `text`
    Text(TextBlock),
    /// `thinking`
    Thinking(ThinkingBlock),
    /// `redacted_thinking`
    RedactedThinking(RedactedThinkingBlock),
    /// `tool_use`
    ToolUse(ToolUseBlock),
    /// `tool_result`
    ToolResult(ToolResultBlock),
    /// Any other kind (`image`, `document`, `server_tool_use`, `web_search_tool_result`, future kinds):
    /// the raw JSON object, sent back unchanged.
    Unknown(Value),
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text(TextBlock { text: text.into(), ..Default::default() })
    }

    /// The block's `type` string.
    pub fn kind(&self) -> &str {
        match self {
            ContentBlock::Text(_) => "text",
            ContentBlock::Thinking(_) => "thinking",
            ContentBlock::RedactedThinking(_) => "redacted_thinking",
            ContentBlock::ToolUse(_) => "tool_use",
            ContentBlock::ToolResult(_) => "tool_result",
            ContentBlock::Unknown(v) => v.get("type").and_then(Value::as_str).unwrap_or(""),
        }
    }

    /// Parse one block from JSON. Unknown `type`s become [`ContentBlock::Unknown`]; a known type with
    /// wrongly-typed fields is an error naming the type.
    pub fn from_value(v: Value) -> Result<Self, String> {
        let kind = match v.get("type").and_then(Value::as_str) {
            Some(k) => k.to_string(),
            None => return Err(format!("content block without a string \"type\": {v}")),
        };
        fn strip<T: serde::de::DeserializeOwned>(mut v: Value, kind: &str) -> Result<T, String> {
            if let Value::Object(m) = &mut v {
                m.remove("type");
            }
            serde_json::from_value(v).map_err(|e| format!("invalid {kind} block: {e}"))
        }
        Ok(match kind.as_str() {
            "text" => ContentBlock::Text(strip(v, &kind)?),
            "thinking" => ContentBlock::Thinking(strip(v, &kind)?),
            "redacted_thinking" => ContentBlock::RedactedThinking(strip(v, &kind)?),
            "tool_use" => ContentBlock::ToolUse(strip(v, &kind)?),
            "tool_result" => ContentBlock::ToolResult(strip(v, &kind)?),
            _ => ContentBlock::Unknown(v),
        })
    }

    /// The block as JSON, `type` first.
    pub fn to_value(&self) -> Value {
        fn tagged<T: Serialize>(kind: &str, block: &T) -> Value {
            let mut out = Map::new();
            out.insert("type".into(), Value::String(kind.into()));
            if let Ok(Value::Object(fields)) = serde_json::to_value(block) {
                out.extend(fields);
            }
            Value::Object(out)
        }
        match self {
            ContentBlock::Text(b) => tagged("text", b),
            ContentBlock::Thinking(b) => tagged("thinking", b),
            ContentBlock::RedactedThinking(b) => tagged("redacted_thinking", b),
            ContentBlock::ToolUse(b) => tagged("tool_use", b),
            ContentBlock::ToolResult(b) => tagged("tool_result", b),
            ContentBlock::Unknown(v) => v.clone(),
        }
    }
}

impl Serialize for ContentBlock {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(s)
    }
}

impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        ContentBlock::from_value(Value::deserialize(d)?).map_err(D::Error::custom)
    }
}

/// Why the model stopped. Unknown values keep their string.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum StopReason {
    /// The model finished its turn.
    EndTurn,
    /// The model wants tools run.
    ToolUse,
    /// `max_tokens` was reached; the last block may be cut off.
    MaxTokens,
    /// One of the `stop_sequences` was produced.
    StopSequence,
    /// A long server-side turn was paused: send the conversation back to continue.
    PauseTurn,
    /// The model refused.
    Refusal,
    /// The context window is full.
    ModelContextWindowExceeded,
    /// Not from the API: the loop's runaway guard stopped the run because the model kept repeating the same
    /// tool call (see `agent::RepeatGuard`).
    Repetition,
    /// Not from the API: the run stopped because the next request would have taken the agent's spend past
    /// `max_cost_usd`.
    Budget,
    /// Not from the API: the run ended with the `check` command still failing (turns ran out, or the
    /// model answered again with nothing changed since the check failed).
    CheckFailed,
    /// A value this version does not know, kept verbatim.
    Other(String),
}

impl StopReason {
    /// The wire string.
    pub fn as_str(&self) -> &str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::ToolUse => "tool_use",
            StopReason::MaxTokens => "max_tokens",
            StopReason::StopSequence => "stop_sequence",
            StopReason::PauseTurn => "pause_turn",
            StopReason::Refusal => "refusal",
            StopReason::ModelContextWindowExceeded => "model_context_window_exceeded",
            StopReason::Repetition => "repetition",
            StopReason::Budget => "budget",
            StopReason::CheckFailed => "check_failed",
            StopReason::Other(s) => s,
        }
    }

    /// Parse a wire string (never fails).
    pub fn parse(s: &str) -> Self {
        match s {
            "end_turn" => StopReason::EndTurn,
            "tool_use" => StopReason::ToolUse,
            "max_tokens" => StopReason::MaxTokens,
            "stop_sequence" => StopReason::StopSequence,
            "pause_turn" => StopReason::PauseTurn,
            "refusal" => StopReason::Refusal,
            "model_context_window_exceeded" => StopReason::ModelContextWindowExceeded,
            "repetition" => StopReason::Repetition,
            "budget" => StopReason::Budget,
            "check_failed" => StopReason::CheckFailed,
            other => StopReason::Other(other.to_string()),
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for StopReason {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for StopReason {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(StopReason::parse(&String::deserialize(d)?))
    }
}

/// Token usage of one response, or a sum of several.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Usage {
    /// Input tokens not read from or written to the cache.
    #[serde(default)]
    pub input_tokens: u64,
    /// Output tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// Input tokens written to the prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_creation_input_tokens: Option<u64>,
    /// Input tokens read from the prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_input_tokens: Option<u64>,
    /// Unmodelled fields (e.g. `server_tool_use`, `service_tier`), verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Usage {
    /// Add `other`'s token counts to this one (the `extra` map is not summed).
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        fn add_opt(a: &mut Option<u64>, b: Option<u64>) {
            if let Some(b) = b {
                *a = Some(a.unwrap_or(0) + b);
            }
        }
        add_opt(&mut self.cache_creation_input_tokens, other.cache_creation_input_tokens);
        add_opt(&mut self.cache_read_input_tokens, other.cache_read_input_tokens);
    }

    /// Overwrite the counts that `update` carries (a streamed `message_delta` usage is cumulative). Other
    /// fields it carries (e.g. `server_tool_use`, which only `message_delta` reports) replace those in `extra`.
    pub fn merge_cumulative(&mut self, update: &Value) {
        const COUNTS: [&str; 4] =
            ["input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"];
        if let Some(fields) = update.as_object() {
            for (k, v) in fields {
                if !COUNTS.contains(&k.as_str()) && !v.is_null() {
                    self.extra.insert(k.clone(), v.clone());
                }
            }
        }
        let get = |k: &str| update.get(k).and_then(Value::as_u64);
        if let Some(v) = get("input_tokens") {
            self.input_tokens = v;
        }
        if let Some(v) = get("output_tokens") {
            self.output_tokens = v;
        }
        if let Some(v) = get("cache_creation_input_tokens") {
            self.cache_creation_input_tokens = Some(v);
        }
        if let Some(v) = get("cache_read_input_tokens") {
            self.cache_read_input_tokens = Some(v);
        }
    }

    /// All input tokens: uncached + cache writes + cache reads.
    pub fn total_input_tokens(&self) -> u64 {
        self.input_tokens + self.cache_creation_input_tokens.unwrap_or(0) + self.cache_read_input_tokens.unwrap_or(0)
    }
}

/// A complete assistant response (`"type": "message"`), in the Messages API shape.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MessageResponse {
    /// The message id (`msg_…`).
    #[serde(default)]
    pub id: String,
    /// Always `"message"`.
    #[serde(rename = "type", default = "message_type")]
    pub kind: String,
    /// Always `assistant`.
    #[serde(default = "assistant_role")]
    pub role: Role,
    /// The blocks.
    #[serde(default, deserialize_with = "de_content")]
    pub content: Vec<ContentBlock>,
    /// The model that answered.
    #[serde(default)]
    pub model: String,
    /// Why it stopped (`None` only while streaming).
    #[serde(default)]
    pub stop_reason: Option<StopReason>,
    /// The stop sequence produced, if that is why it stopped.
    #[serde(default)]
    pub stop_sequence: Option<String>,
    /// Token usage.
    #[serde(default)]
    pub usage: Usage,
    /// Unmodelled fields (e.g. `container`), verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn message_type() -> String {
    "message".into()
}

// Not derived: a derived Default would say `"type": ""`, and messages built by the OpenAI provider or the
// host provider would serialize (into sessions, into the bindings) as something that is not a message.
impl Default for MessageResponse {
    fn default() -> Self {
        MessageResponse {
            id: String::new(),
            kind: message_type(),
            role: assistant_role(),
            content: Vec::new(),
            model: String::new(),
            stop_reason: None,
            stop_sequence: None,
            usage: Usage::default(),
            extra: Map::new(),
        }
    }
}

fn assistant_role() -> Role {
    Role::Assistant
}

impl MessageResponse {
    /// The text blocks joined (no separator), the way SDKs' `get_final_text()` do.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The tool_use blocks, in order.
    pub fn tool_uses(&self) -> Vec<&ToolUseBlock> {
        self.content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolUse(t) => Some(t),
                _ => None,
            })
            .collect()
    }
}

/// A tool as the model sees it: name, description and the JSON schema of its input.
///
/// A tool that carries a `type` (kept in `extra`) is a server tool or a versioned client tool defined by the
/// API itself (`{"type": "web_search_20250305", "name": "web_search"}`, code execution, `bash_20250124`,
/// text editor versions): it has no `input_schema` and is sent exactly as given.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct ToolSpec {
    /// `^[a-zA-Z0-9_-]{1,64}$`
    #[serde(default)]
    pub name: String,
    /// What the tool does, for the model.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// JSON schema of the input object (`null`, and then not sent, for tools defined by a `type`).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub input_schema: Value,
    /// Unmodelled fields (e.g. `cache_control`), verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ToolSpec {
    /// The tool's `type` when the API defines it (server tools, versioned client tools); `None` for an
    /// ordinary custom tool.
    pub fn server_type(&self) -> Option<&str> {
        self.extra.get("type").and_then(Value::as_str).filter(|t| *t != "custom")
    }
}

/// A neutral request: what the agent asks a provider for. Serializes to a Messages API request body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct Request {
    /// Model name.
    pub model: String,
    /// Output token cap.
    pub max_tokens: u32,
    /// The conversation, starting with a user message. Shared, not copied, between the requests of a
    /// conversation (see [`Messages`]); `vec![...].into()` builds one.
    pub messages: Messages,
    /// System prompt: a string or an array of text blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<Value>,
    /// Tools offered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
    /// `tool_choice`, passed through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    /// `thinking` config, passed through (`{"type":"enabled","budget_tokens":N}`, `{"type":"adaptive"}`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<Value>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop_sequences: Vec<String>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// `metadata`, passed through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// Whether to stream (SSE).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stream: bool,
    /// Any other body field, passed through unchanged so a new API feature never waits for a release.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_blocks_fields_and_stop_reasons_round_trip_unchanged() {
        let wire = json!({
            "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-x",
            "content": [
                {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}, "citations": [{"type": "char_location", "cited_text": "x"}]},
                {"type": "thinking", "thinking": "hmm", "signature": "sig=="},
                {"type": "redacted_thinking", "data": "Enc=="},
                {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}, "caller": {"x": 1}},
                {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
                {"type": "future_kind", "zeta": 1, "alpha": [1, 2]}
            ],
            "stop_reason": "brand_new_reason", "stop_sequence": null,
            "usage": {"input_tokens": 3, "output_tokens": 4, "cache_read_input_tokens": 2, "service_tier": "standard"},
            "container": {"id": "c1"}
        });
        let parsed: MessageResponse = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!(parsed.stop_reason, Some(StopReason::Other("brand_new_reason".into())));
        assert!(matches!(parsed.content[5], ContentBlock::Unknown(_)));
        assert_eq!(serde_json::to_value(&parsed).unwrap(), wire);
    }

    #[test]
    fn string_content_becomes_one_text_block() {
        let m: Message = serde_json::from_value(json!({"role": "user", "content": "hello"})).unwrap();
        assert_eq!(m.content, vec![ContentBlock::text("hello")]);
        assert_eq!(
            serde_json::to_value(&m).unwrap(),
            json!({"role": "user", "content": [{"type": "text", "text": "hello"}]})
        );
    }

    #[test]
    fn known_block_with_wrong_field_type_is_a_named_error() {
        let err = ContentBlock::from_value(json!({"type": "text", "text": 5})).unwrap_err();
        assert!(err.contains("invalid text block"), "{err}");
    }

    #[test]
    fn request_extra_fields_pass_through() {
        let req: Request = serde_json::from_value(json!({
            "model": "m", "max_tokens": 10, "messages": [], "betas_field": {"x": 1}, "thinking": {"type": "adaptive"}
        }))
        .unwrap();
        let out = serde_json::to_value(&req).unwrap();
        assert_eq!(out["betas_field"], json!({"x": 1}));
        assert_eq!(out["thinking"], json!({"type": "adaptive"}));
    }

    #[test]
    fn server_tool_without_input_schema_parses_and_is_sent_as_given() {
        let wire = json!({
            "model": "m", "max_tokens": 10, "messages": [],
            "tools": [
                {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
                {"name": "f", "description": "d", "input_schema": {"type": "object"}}
            ]
        });
        let req: Request = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!(req.tools[0].server_type(), Some("web_search_20250305"));
        assert_eq!(req.tools[1].server_type(), None);
        assert_eq!(serde_json::to_value(&req).unwrap(), wire);
    }

    #[test]
    fn usage_sums_and_cumulative_merge() {
        let mut total = Usage::default();
        total.add(&Usage { input_tokens: 5, output_tokens: 2, cache_read_input_tokens: Some(7), ..Default::default() });
        total.add(&Usage { input_tokens: 1, output_tokens: 1, ..Default::default() });
        assert_eq!((total.input_tokens, total.output_tokens, total.cache_read_input_tokens), (6, 3, Some(7)));
        let mut u = Usage { input_tokens: 10, output_tokens: 1, ..Default::default() };
        u.merge_cumulative(&json!({"output_tokens": 50}));
        u.merge_cumulative(&json!({"output_tokens": 80}));
        assert_eq!((u.input_tokens, u.output_tokens), (10, 80));
        assert_eq!(total.total_input_tokens(), 13);
    }
}
