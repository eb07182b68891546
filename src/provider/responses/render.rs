//! A neutral request as a Responses request body: `instructions`, `input` items in the order of the blocks
//! (function calls and their outputs paired by `call_id`, only this wire's reasoning items, with their
//! `encrypted_content`), flat function tools, `store: false`, `text.format` for structured output.

use serde_json::{Map, Value, json};

use super::REASONING_KEY;
use crate::types::{ContentBlock, Message, Request, Role, ThinkingBlock};

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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::types::{ToolResultBlock, ToolUseBlock};

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
}
