//! Prompt caching (Anthropic Messages API, also on Bedrock): where the `cache_control` breakpoints go.
//!
//! A request is cached up to each breakpoint; the next request reads the cache when everything before a
//! breakpoint is the same bytes. So the breakpoints sit on what stays put — the last tool (tools come
//! first in the prompt), the system prompt — and one moves with the conversation: on the newest message,
//! so the next turn reads everything up to it from the cache (plus the previous user turn's, while the
//! budget allows, for a turn that adds many blocks). Only the wire request gets them: the stored
//! conversation and `messages` never hold a breakpoint, so nothing in the prefix changes between turns.
//!
//! Must never: put more than the API's 4 breakpoints in a request (the host's own count), mark a block the
//! API refuses to mark (thinking), or change anything but the markers.

use serde_json::{Value, json};

use crate::types::{ContentBlock, Request, Role};

/// Most `cache_control` breakpoints the API accepts in one request.
pub const MAX_BREAKPOINTS: usize = 4;

fn marker() -> Value {
    json!({"type": "ephemeral"})
}

fn block_has_marker(b: &ContentBlock) -> bool {
    match b {
        ContentBlock::Text(t) => t.extra.contains_key("cache_control"),
        ContentBlock::ToolUse(t) => t.extra.contains_key("cache_control"),
        ContentBlock::ToolResult(t) => t.extra.contains_key("cache_control"),
        ContentBlock::Unknown(v) => v.get("cache_control").is_some(),
        _ => false,
    }
}

/// Breakpoints the host already put in `request` (its system blocks, tools, message blocks).
pub fn count(request: &Request) -> usize {
    let system = match &request.system {
        Some(Value::Array(blocks)) => blocks.iter().filter(|b| b.get("cache_control").is_some()).count(),
        _ => 0,
    };
    let tools = request.tools.iter().filter(|t| t.extra.contains_key("cache_control")).count();
    let messages = request.messages.iter().flat_map(|m| m.content.iter()).filter(|b| block_has_marker(b)).count();
    system + tools + messages
}

/// Mark the last markable block of a message; whether one was marked.
fn mark_message(content: &mut [ContentBlock]) -> bool {
    for b in content.iter_mut().rev() {
        let extra = match b {
            ContentBlock::Text(t) => &mut t.extra,
            ContentBlock::ToolUse(t) => &mut t.extra,
            ContentBlock::ToolResult(t) => &mut t.extra,
            ContentBlock::Unknown(Value::Object(o)) => {
                if o.contains_key("cache_control") {
                    return false;
                }
                o.insert("cache_control".into(), marker());
                return true;
            }
            // Thinking blocks cannot be marked; an empty text block neither.
            _ => continue,
        };
        if extra.contains_key("cache_control") {
            return false;
        }
        extra.insert("cache_control".into(), marker());
        return true;
    }
    false
}

/// Add breakpoints to `request`, within the 4 the API allows counting the host's own. When they are
/// scarce the newest message comes first (a breakpoint there caches everything before it), then the last
/// tool, the system prompt, and the previous user message.
pub fn add_breakpoints(request: &mut Request) {
    let mut budget = MAX_BREAKPOINTS.saturating_sub(count(request));
    let n = request.messages.len();
    if budget > 0 && n > 0 && mark_message(&mut request.messages[n - 1].content) {
        budget -= 1;
    }
    if budget > 0 {
        if let Some(last) = request.tools.last_mut() {
            if !last.extra.contains_key("cache_control") {
                last.extra.insert("cache_control".into(), marker());
                budget -= 1;
            }
        }
    }
    if budget > 0 {
        let marked = match request.system.take() {
            Some(Value::String(s)) if !s.is_empty() => {
                request.system = Some(json!([{"type": "text", "text": s, "cache_control": marker()}]));
                true
            }
            Some(Value::Array(mut blocks)) => {
                let mut marked = false;
                if let Some(Value::Object(last)) = blocks.last_mut() {
                    if !last.contains_key("cache_control") {
                        last.insert("cache_control".into(), marker());
                        marked = true;
                    }
                }
                request.system = Some(Value::Array(blocks));
                marked
            }
            other => {
                request.system = other;
                false
            }
        };
        if marked {
            budget -= 1;
        }
    }
    if budget > 0 && n > 2 {
        // The user turn before the newest one: two turns back, since roles alternate.
        let prev = n - 3;
        if request.messages[prev].role == Role::User {
            mark_message(&mut request.messages[prev].content);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::types::{Message, ToolSpec};
    use serde_json::Map;

    fn request(system: Option<Value>, turns: usize) -> Request {
        let mut messages = Vec::new();
        for i in 0..turns {
            messages.push(Message::user(format!("u{i}")));
            messages.push(Message::assistant(format!("a{i}")));
        }
        messages.push(Message::user("last"));
        Request {
            model: "m".into(),
            max_tokens: 10,
            messages: messages.into(),
            system,
            tools: vec![
                ToolSpec { name: "a".into(), description: String::new(), input_schema: json!({}), extra: Map::new() },
                ToolSpec { name: "b".into(), description: String::new(), input_schema: json!({}), extra: Map::new() },
            ],
            tool_choice: None,
            thinking: None,
            stop_sequences: Vec::new(),
            temperature: None,
            metadata: None,
            stream: false,
            extra: Map::new(),
        }
    }

    #[test]
    fn four_breakpoints_at_most_on_tools_system_and_the_newest_turns() {
        let mut r = request(Some(json!("be brief")), 2);
        add_breakpoints(&mut r);
        assert_eq!(count(&r), 4);
        assert!(r.tools[1].extra.contains_key("cache_control") && !r.tools[0].extra.contains_key("cache_control"));
        assert_eq!(r.system.as_ref().unwrap()[0]["cache_control"], json!({"type": "ephemeral"}));
        assert!(block_has_marker(&r.messages[4].content[0]) && block_has_marker(&r.messages[2].content[0]));
    }

    #[test]
    fn the_hosts_own_breakpoints_count() {
        let mut r = request(
            Some(json!([{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}},
                                        {"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}}])),
            2,
        );
        r.tools[0].extra.insert("cache_control".into(), marker());
        add_breakpoints(&mut r);
        assert_eq!(count(&r), 4, "3 of the host's + 1 of ours");
        assert!(block_has_marker(r.messages.last().unwrap().content.last().unwrap()));
        let mut full = request(None, 1);
        for t in &mut full.tools {
            t.extra.insert("cache_control".into(), marker());
        }
        full.messages[0].content[0] = ContentBlock::text("x");
        if let ContentBlock::Text(t) = &mut full.messages[0].content[0] {
            t.extra.insert("cache_control".into(), marker());
            t.extra.insert("x".into(), json!(1));
        }
        if let ContentBlock::Text(t) = &mut full.messages[1].content[0] {
            t.extra.insert("cache_control".into(), marker());
        }
        add_breakpoints(&mut full);
        assert_eq!(count(&full), 4, "already full: nothing added");
    }
}
