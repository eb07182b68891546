//! Structured output: the run's final answer as JSON valid against a schema the host gives
//! (`output_schema`), whatever the backend.
//!
//! Two ways to ask, one result. **Native**: the request carries the schema in the API's own field —
//! Anthropic `output_config.format` (`{"type": "json_schema", "schema": ...}`, generally available, no beta
//! header), which the OpenAI provider renders as `response_format` `{"type": "json_schema", ...}` — and the
//! answer is the final turn's text. **Tool**: where the API has no such field (local OpenAI-compatible
//! servers, Bedrock), a `final_answer` tool whose input schema is the output schema is offered, the model is
//! made to call a tool each turn (`tool_choice` any, unless thinking is on or the host chose), and the
//! answer is that call's input. Either way the answer is checked against the host's schema
//! ([`validate`]); an invalid one goes back to the model with the errors (a user message, or the
//! `final_answer` call's error result), at most `retries` times, then the run fails with
//! [`crate::Error::OutputValidation`] carrying the last answer. A JSON answer in text is taken in tool
//! mode too, and a `final_answer` call in native mode, so a model that answers the other way is not failed.
//!
//! Must never: send the API a schema it refuses for keywords it does not take (they move into the
//! description, [`api_schema`]) while validating against less than the host's own schema; or leave a
//! `final_answer` call without its result.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::types::{ContentBlock, MessageResponse, Request, ToolSpec};

mod validate;
pub use crate::error::OutputFailure;
pub use validate::validate;

/// The name of the forced final-answer tool.
pub const TOOL_NAME: &str = "final_answer";

/// How the schema reaches the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputMode {
    /// Native where the provider has it (Anthropic, OpenAI's own endpoint, a host model), else the tool.
    #[default]
    Auto,
    /// Always the API's structured-output field.
    Native,
    /// Always the `final_answer` tool.
    Tool,
}

impl OutputMode {
    /// `"auto"`, `"native"` or `"tool"`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "auto" => Some(OutputMode::Auto),
            "native" => Some(OutputMode::Native),
            "tool" => Some(OutputMode::Tool),
            _ => None,
        }
    }
}

/// What the host asked for: the schema, how many corrections the model gets, and the mode.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputSpec {
    /// The JSON Schema the answer must be valid against.
    pub schema: Value,
    /// Invalid answers sent back to the model before the run fails (default 2).
    pub retries: u32,
    /// How the schema is asked for.
    pub mode: OutputMode,
}

impl OutputSpec {
    /// A spec with the default retries (2) and mode (auto).
    pub fn new(schema: Value) -> Self {
        OutputSpec { schema, retries: crate::defaults::OUTPUT_RETRIES, mode: OutputMode::Auto }
    }

    /// Whether requests use the tool (`native`: whether the provider takes the native field).
    pub fn uses_tool(&self, native: bool) -> bool {
        match self.mode {
            OutputMode::Auto => !native,
            OutputMode::Native => false,
            OutputMode::Tool => true,
        }
    }
}

/// Check a schema given as an option: an object (or `true`) whose local `$ref`s resolve.
pub fn check_schema(schema: &Value) -> Result<(), String> {
    if !schema.is_object() {
        return Err(format!("must be a JSON Schema object such as {{\"type\": \"object\", ...}}, got {schema}"));
    }
    let mut bad = None;
    walk(schema, &mut |s| {
        if let Some(r) = s.get("$ref").and_then(Value::as_str) {
            let ok = r.strip_prefix('#').is_some_and(|p| p.is_empty() || schema.pointer(p).is_some());
            if !ok && bad.is_none() {
                bad = Some(format!("$ref {r:?} does not point into the schema (only local refs such as #/$defs/X)"));
            }
        }
    });
    bad.map_or(Ok(()), Err)
}

fn walk(v: &Value, f: &mut dyn FnMut(&Map<String, Value>)) {
    match v {
        Value::Object(o) => {
            f(o);
            o.values().for_each(|x| walk(x, f));
        }
        Value::Array(a) => a.iter().for_each(|x| walk(x, f)),
        _ => {}
    }
}

/// Keywords the APIs' strict structured-output modes refuse: moved into the description instead.
const UNSUPPORTED: [&str; 11] = [
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "maxItems",
    "minProperties",
    "maxProperties",
    "pattern",
];

/// The schema as sent to a native structured-output API: every object closed (`additionalProperties:
/// false` where not given) and constraints the APIs refuse moved into descriptions (the answer is still
/// validated against the full schema, so the model is corrected if it breaks one).
pub fn api_schema(schema: &Value) -> Value {
    let mut s = schema.clone();
    close(&mut s);
    s
}

fn close(v: &mut Value) {
    match v {
        Value::Object(o) => {
            let is_object = o.get("type").and_then(Value::as_str) == Some("object") || o.contains_key("properties");
            if is_object && !o.contains_key("additionalProperties") {
                o.insert("additionalProperties".into(), Value::Bool(false));
            }
            let mut notes = Vec::new();
            for k in UNSUPPORTED {
                if let Some(x) = o.get(k) {
                    if !x.is_object() && !x.is_array() {
                        notes.push(format!("{k}: {x}"));
                        o.remove(k);
                    }
                }
            }
            if !notes.is_empty() {
                let note = format!("{{{}}}", notes.join(", "));
                let d = match o.get("description").and_then(Value::as_str) {
                    Some(d) => format!("{d} {note}"),
                    None => note,
                };
                o.insert("description".into(), Value::String(d));
            }
            for (k, x) in o.iter_mut() {
                // The values of `properties` and `$defs` are schemas; a property *named* like a keyword is not one.
                if k == "enum" || k == "const" || k == "default" || k == "examples" {
                    continue;
                }
                close(x);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(close),
        _ => {}
    }
}

/// Whether the tool's input is the answer itself (an object schema) or wraps it as `{"value": ...}`.
fn wraps(schema: &Value) -> bool {
    let t = schema.get("type");
    let object = t.and_then(Value::as_str) == Some("object")
        || (t.is_none() && (schema.get("properties").is_some() || schema.get("$ref").is_some()));
    !object
}

/// The `final_answer` tool for `schema`.
pub fn tool_spec(schema: &Value) -> ToolSpec {
    let description = "Give the final answer. Call this once, when the task is done (after any other tools you \
                       need), with the answer as the input; it must follow the input schema exactly. Do not \
                       answer in plain text."
        .to_string();
    let input_schema = if wraps(schema) {
        let mut inner = schema.clone();
        let mut outer = Map::new();
        outer.insert("type".into(), json!("object"));
        // Definitions stay at the root, where the answer's `$ref`s point.
        for k in ["$defs", "definitions"] {
            if let Some(d) = inner.as_object_mut().and_then(|o| o.remove(k)) {
                outer.insert(k.into(), d);
            }
        }
        outer.insert("properties".into(), json!({"value": inner}));
        outer.insert("required".into(), json!(["value"]));
        Value::Object(outer)
    } else {
        schema.clone()
    };
    ToolSpec { name: TOOL_NAME.into(), description, input_schema, extra: Map::new() }
}

/// Shape one request for structured output (`tool`: the final-answer tool, else the native field).
pub fn prepare(request: &mut Request, spec: &OutputSpec, tool: bool) {
    if tool {
        request.tools.push(tool_spec(&spec.schema));
        let thinking =
            request.thinking.as_ref().is_some_and(|t| t.get("type").and_then(Value::as_str) != Some("disabled"));
        if request.tool_choice.is_none() && !thinking {
            request.tool_choice = Some(json!({"type": "any"}));
        }
        let note = format!(
            "When the task is done, give your final answer by calling the {TOOL_NAME} tool (its input is the \
             answer, following its schema); do not answer in plain text."
        );
        request.system = Some(crate::text::with_text(request.system.take(), &note));
    } else {
        let format = json!({"type": "json_schema", "schema": api_schema(&spec.schema)});
        match request.extra.get_mut("output_config") {
            Some(Value::Object(c)) => {
                c.insert("format".into(), format);
            }
            _ => {
                request.extra.insert("output_config".into(), json!({ "format": format }));
            }
        }
    }
}

/// What the model answered, before validation.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// A `final_answer` call: its id and the answer (unwrapped from `{"value": ...}` where the tool wraps).
    Tool {
        /// The call id (it must get a result).
        id: String,
        /// The answer.
        value: Value,
    },
    /// The turn's text.
    Text(String),
}

/// The answer in a model turn: a `final_answer` call if there is one, else the text.
pub fn answer_of(message: &MessageResponse, schema: &Value) -> Answer {
    for b in &message.content {
        if let ContentBlock::ToolUse(t) = b {
            if t.name == TOOL_NAME {
                let value = match (wraps(schema), &t.input) {
                    (true, Value::Object(o)) if o.len() == 1 && o.contains_key("value") => o["value"].clone(),
                    _ => t.input.clone(),
                };
                return Answer::Tool { id: t.id.clone(), value };
            }
        }
    }
    Answer::Text(message.text())
}

/// Parse a text answer as JSON: as it is, inside a ```json fence, or from its first `{`/`[` to its last
/// `}`/`]` (models wrap answers in a sentence now and then).
pub fn parse_text(text: &str) -> Result<Value, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("the answer is empty; it must be JSON".into());
    }
    let first_err = match serde_json::from_str::<Value>(t) {
        Ok(v) => return Ok(v),
        Err(e) => e,
    };
    if let Some(start) = t.find("```") {
        let body = &t[start + 3..];
        let body = body.find('\n').map(|n| &body[n + 1..]).unwrap_or(body);
        if let Some(end) = body.find("```") {
            if let Ok(v) = serde_json::from_str::<Value>(body[..end].trim()) {
                return Ok(v);
            }
        }
    }
    let open = t.find(['{', '[']);
    let close = t.rfind(['}', ']']);
    if let (Some(a), Some(b)) = (open, close) {
        if a < b {
            if let Ok(v) = serde_json::from_str::<Value>(&t[a..=b]) {
                return Ok(v);
            }
        }
    }
    Err(format!("the answer is not valid JSON ({first_err})"))
}

/// Check an answer: the value when valid, else the errors (and the value, when it parsed).
pub fn check(answer: &Answer, schema: &Value) -> Result<Value, (Vec<String>, Option<Value>)> {
    let value = match answer {
        Answer::Tool { value, .. } => value.clone(),
        Answer::Text(t) => parse_text(t).map_err(|e| (vec![e], None))?,
    };
    match validate(schema, &value) {
        Ok(()) => Ok(value),
        Err(errors) => Err((errors, Some(value))),
    }
}

/// What the model reads after an invalid answer.
pub fn correction(errors: &[String], tool: bool) -> String {
    let how = if tool {
        format!("Call the {TOOL_NAME} tool again with a corrected answer.")
    } else {
        "Answer again with only the corrected JSON.".to_string()
    };
    format!("Your final answer does not match the required JSON schema:\n- {}\n{how}", errors.join("\n- "))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn text_answers_parse_plain_fenced_or_wrapped() {
        assert_eq!(parse_text(" {\"a\": 1} ").unwrap(), json!({"a": 1}));
        assert_eq!(parse_text("Here:\n```json\n{\"a\": 2}\n```\n").unwrap(), json!({"a": 2}));
        assert_eq!(parse_text("The answer is {\"a\": 3}.").unwrap(), json!({"a": 3}));
        assert!(parse_text("no json here").unwrap_err().contains("not valid JSON"));
    }

    #[test]
    fn api_schema_closes_objects_and_moves_constraints_to_descriptions() {
        let s = json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1},
            "minimum": {"type": "string"}}, "required": ["n"]});
        let a = api_schema(&s);
        assert_eq!(a["additionalProperties"], false);
        assert!(a["properties"]["n"].get("minimum").is_none());
        assert_eq!(a["properties"]["n"]["description"], "{minimum: 1}");
        assert_eq!(a["properties"]["minimum"]["type"], "string");
    }

    #[test]
    fn a_non_object_schema_is_wrapped_in_the_tool_and_unwrapped_from_the_answer() {
        let s = json!({"type": "array", "items": {"$ref": "#/$defs/X"}, "$defs": {"X": {"type": "integer"}}});
        let t = tool_spec(&s);
        assert_eq!(t.input_schema["required"], json!(["value"]));
        assert!(t.input_schema["$defs"].is_object());
        let m = MessageResponse {
            content: vec![ContentBlock::ToolUse(crate::types::ToolUseBlock {
                id: "f".into(),
                name: TOOL_NAME.into(),
                input: json!({"value": [1, 2]}),
                extra: Map::new(),
            })],
            stop_reason: Some(crate::types::StopReason::ToolUse),
            ..Default::default()
        };
        assert_eq!(answer_of(&m, &s), Answer::Tool { id: "f".into(), value: json!([1, 2]) });
        assert!(check(&answer_of(&m, &s), &s).is_ok());
    }
}
